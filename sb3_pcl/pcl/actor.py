"""PCL's ``actor``: the module that acts, the online or the lagged target policy (``sample_from``)."""

import numpy as np
import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy

from sb3_pcl.common.actions import sample_actions

#: the policies that can act, by their ``sample_from`` name
SAMPLE_FROM = ("online", "target")


class PCLActor(th.nn.Module):
    """
    The acting network of :class:`~sb3_pcl.PCL`, what SB3's off-policy algorithms call ``actor`` (SAC's is its policy's
    actor network): collection samples its actions, SB3's :meth:`OffPolicyAlgorithm.collect_rollouts` redraws its gSDE
    noise and its logs read its standard deviation. PCL acts with its online policy or, with ``sample_from="target"``,
    with the lagged target policy, so the actor holds both (its parameters are theirs).

    New noise matrices are drawn for both policies alike (online first), so that either can act; the logged standard
    deviation is the online policy's.

    :param policy: the online policy
    :param policy_target: the target policy
    """

    def __init__(self, policy: ActorCriticPolicy, policy_target: ActorCriticPolicy):
        super().__init__()
        self.policy = policy
        self.policy_target = policy_target

    def acting(self, sample_from: str) -> ActorCriticPolicy:
        """
        :param sample_from: ``"online"`` or ``"target"``
        :return: the policy that acts
        """
        return self.policy_target if sample_from == "target" else self.policy

    def forward(self, observation: np.ndarray, sample_from: str = "online") -> th.Tensor:
        """
        :param observation: observations ``(n_envs, *obs_shape)``, as the VecEnv returns them
        :param sample_from: which policy acts, ``"online"`` or ``"target"``
        :return: its stochastic actions as sampled (:func:`~sb3_pcl.common.actions.sample_actions`), ``(n_envs, ...)``
        """
        return sample_actions(self.acting(sample_from), observation)

    def reset_noise(self, n_envs: int = 1) -> None:
        """:param n_envs: number of envs (one gSDE noise matrix each)"""
        self.policy.reset_noise(n_envs)
        self.policy_target.reset_noise(n_envs)

    def get_std(self) -> th.Tensor:
        """:return: the online policy's gSDE standard deviations, ``(latent_dim, action_dim)``"""
        return self.policy.action_dist.get_std(self.policy.log_std)  # type: ignore[attr-defined]
