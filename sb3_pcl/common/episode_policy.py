"""
How a policy plays and evaluates the episodes of a synchronized batch (:mod:`sb3_pcl.common.episodes`, which Reinforce
and UREX learn from), dispatched on the policy's type with :func:`functools.singledispatch`.

The versions here are those of SB3's feed-forward ``ActorCriticPolicy``: each step on its own, nothing carried from
one step to the next. A policy type that needs more registers its own versions of :func:`play_step` and
:func:`evaluate_episodes`: the recurrent policies (sb3-contrib's ``RecurrentActorCriticPolicy`` and its subclasses)
in :mod:`sb3_pcl.common.recurrent.episodes`, which carry the recurrent state from step to step while playing and run
whole sequences when evaluating.
"""

import functools
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import PyTorchObs

from sb3_pcl.common.dict_obs import map_obs

__all__ = ["evaluate_episodes", "play_step"]


@functools.singledispatch
def play_step(
    policy: ActorCriticPolicy, obs: PyTorchObs, state: Any, episode_starts: np.ndarray
) -> tuple[th.Tensor, th.Tensor, Any]:
    """
    Sample one action per env at one step of a pass (the caller disables gradients).

    :param policy: the policy playing the episodes
    :param obs: the envs' observations, as tensors on the policy's device
    :param state: what the previous call returned as the state for the next step (``None`` at the first step of a
        pass)
    :param episode_starts: ``(n_envs,)`` 1.0 where an env starts an episode at this step, else 0.0
    :return: the sampled actions, their log-probabilities, and the state for the next step (``None`` here: a
        feed-forward policy carries nothing)
    """
    actions, _, log_prob = policy(obs)
    return actions, log_prob, None


@functools.singledispatch
def evaluate_episodes(
    policy: ActorCriticPolicy, observations: np.ndarray, actions: np.ndarray, mask: np.ndarray
) -> tuple[th.Tensor, th.Tensor]:
    """
    Log-probabilities and entropies of the actions of ``N`` time-major episodes under the current policy (with
    gradients). Only the valid steps are evaluated here, in one batch; the others are zero.

    :param policy: the policy to evaluate
    :param observations: ``(T, N, *obs_shape)`` observations (for a Dict space, an
        :class:`~sb3_pcl.common.dict_obs.ObsDict` of such arrays)
    :param actions: ``(T, N, *action_shape)`` actions
    :param mask: ``(T, N)``, 1 on the steps of each episode, 0 after its end
    :return: ``(T, N)`` log-probabilities and entropies; what they hold on masked steps depends on the policy type:
        mask them
    """
    valid = mask > 0
    obs = map_obs(lambda value: th.as_tensor(value, device=policy.device), observations[valid])
    valid_actions = th.as_tensor(actions[valid], device=policy.device)
    if isinstance(policy.action_space, spaces.Discrete):
        valid_actions = valid_actions.long().flatten()
    elif isinstance(policy.action_space, spaces.MultiDiscrete):
        valid_actions = valid_actions.long()
    elif isinstance(policy.action_space, spaces.Box):
        valid_actions = valid_actions.reshape(len(valid_actions), -1)  # SB3's distributions take flat Box actions
    _, valid_log_prob, valid_entropy = policy.evaluate_actions(obs, valid_actions)  # type: ignore[arg-type]
    selected = th.as_tensor(valid, device=policy.device)
    log_prob = th.zeros(mask.shape, device=policy.device)
    entropy = th.zeros(mask.shape, device=policy.device)
    log_prob[selected] = valid_log_prob
    if valid_entropy is not None:
        entropy[selected] = valid_entropy
    return log_prob, entropy
