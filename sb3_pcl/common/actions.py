"""From the actions a policy samples to the actions the env receives, and gSDE's noise controls."""

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy


def to_env_actions(policy: BasePolicy, action_space: spaces.Space, sampled: np.ndarray) -> np.ndarray:
    """
    The env's actions for sampled ones: a squashing policy's ``[-1, 1]`` actions rescaled to a ``Box``'s bounds,
    other ``Box`` actions clipped to them, other spaces unchanged (the replay keeps ``sampled``).

    :param policy: the policy that sampled them (its ``squash_output`` and bounds)
    :param action_space: the env's action space
    :param sampled: actions as sampled, ``(n_envs, *action_shape)``
    :return: the actions to send to the env
    """
    if not isinstance(action_space, spaces.Box):
        return sampled
    if policy.squash_output:
        return policy.unscale_action(sampled)
    return np.clip(sampled, action_space.low, action_space.high)


class NoiseControl:
    """
    The gSDE controls that SB3's :meth:`OffPolicyAlgorithm.collect_rollouts` and its logs expect of ``model.actor``.

    New noise matrices are drawn for the online and the target policy alike, so that either can act
    (``sample_from``); the logged standard deviation is the online policy's.

    :param model: the algorithm (its ``policy`` and ``policy_target`` are gSDE policies)
    """

    def __init__(self, model: Any):
        self._model = model

    def reset_noise(self, n_envs: int = 1) -> None:
        """:param n_envs: number of envs (one noise matrix each)"""
        self._model.policy.reset_noise(n_envs)
        self._model.policy_target.reset_noise(n_envs)

    def get_std(self) -> th.Tensor:
        """:return: the online policy's gSDE standard deviations, ``(latent_dim, action_dim)``"""
        policy = self._model.policy
        return policy.action_dist.get_std(policy.log_std)  # type: ignore[attr-defined]
