"""From the actions a policy samples to the actions the env receives."""

import numpy as np
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
