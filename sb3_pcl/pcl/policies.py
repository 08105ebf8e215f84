"""
Policies of PCL.

PCL needs, for any state, the log-probability of an action under a stochastic policy and a
state value. SB3's actor-critic policies provide exactly that for Discrete, MultiDiscrete,
MultiBinary and Box actions (a diagonal Gaussian with a learned, state-independent log-std),
with separate policy and value MLPs by default (2 x 64 tanh units: the seed's MLP).

Unified PCL (:class:`UnifiedPolicy`) uses one network for both: ``pi = softmax(logits)`` and
``V(s) = temperature * logsumexp(logits)``, with ``temperature = tau + lambda`` (set by PCL).

``MlpLstmPolicy`` is the recurrent policy of the original code (an LSTM fed with the observation
and the previous action, linear action and value heads on its output,
:mod:`sb3_pcl.common.recurrent`); PCL replays each sampled segment's path from its first step to
rebuild the recurrent state.
"""

from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, BaseModel
from stable_baselines3.common.type_aliases import PyTorchObs

from sb3_pcl.common.consistency import soft_value
from sb3_pcl.common.recurrent import MlpLstmPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy


class UnifiedPolicy(ActorCriticPolicy):
    """
    Unified PCL's policy (Discrete actions): the policy MLP's action logits give both
    ``pi = softmax(logits)`` and the soft value ``V(s) = temperature * logsumexp(logits)``.

    The value MLP and head that :class:`ActorCriticPolicy` builds are never used (they get no gradient).
    ``temperature`` is a plain float, stored in the ``state_dict`` (extra state); PCL sets it to
    ``tau + relative_entropy_coef`` at every training iteration.

    :param observation_space: observation space
    :param action_space: a ``Discrete`` action space
    :param lr_schedule: learning rate schedule
    :param temperature: ``tau + lambda``
    :param kwargs: the other arguments of :class:`ActorCriticPolicy`
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Any,
        *args: Any,
        temperature: float = 0.01,
        **kwargs: Any,
    ):
        if not isinstance(action_space, spaces.Discrete):
            raise ValueError(f"UnifiedPolicy supports only Discrete action spaces, got {action_space}")
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)
        self.temperature = float(temperature)

    def action_logits(self, obs: PyTorchObs) -> th.Tensor:
        """:return: the unnormalised action logits ``(batch, n_actions)``"""
        features = BaseModel.extract_features(self, obs, self.pi_features_extractor)
        return self.action_net(self.mlp_extractor.forward_actor(features))

    def _soft_value(self, logits: th.Tensor) -> th.Tensor:
        return soft_value(logits, self.temperature).unsqueeze(-1)

    def forward(self, obs: th.Tensor, deterministic: bool = False) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        logits = self.action_logits(obs)
        distribution = self.action_dist.proba_distribution(action_logits=logits)
        actions = distribution.get_actions(deterministic=deterministic)
        return actions, self._soft_value(logits), distribution.log_prob(actions)

    def evaluate_actions(self, obs: PyTorchObs, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        logits = self.action_logits(obs)
        distribution = self.action_dist.proba_distribution(action_logits=logits)
        return self._soft_value(logits), distribution.log_prob(actions), distribution.entropy()

    def predict_values(self, obs: PyTorchObs) -> th.Tensor:
        return self._soft_value(self.action_logits(obs))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "temperature": self.temperature}

    def get_extra_state(self) -> dict[str, float]:
        return {"temperature": self.temperature}

    def set_extra_state(self, state: dict[str, float]) -> None:
        self.temperature = float(state["temperature"])


UnifiedMlpPolicy = UnifiedPolicy

__all__ = ["CnnPolicy", "MlpLstmPolicy", "MlpPolicy", "UnifiedMlpPolicy", "UnifiedPolicy"]
