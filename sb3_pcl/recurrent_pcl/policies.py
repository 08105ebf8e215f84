"""
Policies of RecurrentPCL and RecurrentTrustPCL.

``MlpPrevActionLstmPolicy`` is the recurrent policy of the original code,
:class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy` (an LSTM fed with the observation and the previous
action, linear action and value heads on its output; not sb3-contrib's ``MlpLstmPolicy``, whose LSTM reads the
observation only), ``CnnPrevActionLstmPolicy`` the same reading images; ``UnifiedMlpLstmPolicy`` is its Unified PCL
variant, whose value is the soft value of its action logits.
"""

from typing import Any

import torch as th
from stable_baselines3.common.distributions import Distribution

from sb3_pcl.common.recurrent import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy
from sb3_pcl.pcl.policies import UnifiedValue


class UnifiedLstmPolicy(UnifiedValue, MlpPrevActionLstmPolicy):
    """
    Unified PCL's recurrent policy: :class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy` whose heads
    read both the action distribution and the soft value (:class:`UnifiedValue`) from the action logits on the LSTM
    output.

    Its value head (``value_net``) is unused, so ``detach_value`` has no effect and a critic LSTM
    (``enable_critic_lstm=True``) is refused.

    :param observation_space: observation space
    :param action_space: a ``Discrete`` or ``MultiDiscrete`` action space
    :param lr_schedule: learning rate schedule
    :param temperature: ``ent_coef + lambda``
    :param kwargs: the other arguments of :class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy`
    """

    def __init__(self, *args: Any, enable_critic_lstm: bool = False, **kwargs: Any):
        if enable_critic_lstm:
            raise ValueError("UnifiedLstmPolicy reads the value from the action logits: enable_critic_lstm must be False")
        super().__init__(*args, **kwargs)

    def _heads(self, latent: th.Tensor) -> tuple[Distribution, th.Tensor]:
        return self.unified_heads(self.action_net(self.mlp_extractor.forward_actor(latent)))


UnifiedMlpLstmPolicy = UnifiedLstmPolicy

__all__ = ["CnnPrevActionLstmPolicy", "MlpPrevActionLstmPolicy", "UnifiedLstmPolicy", "UnifiedMlpLstmPolicy"]
