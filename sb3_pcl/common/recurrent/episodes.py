"""
Synchronised episode batches (Reinforce, UREX) under a recurrent policy: this module registers the recurrent versions
of :func:`~sb3_pcl.common.episode_policy.play_step` and :func:`~sb3_pcl.common.episode_policy.evaluate_episodes`
for sb3-contrib's ``RecurrentActorCriticPolicy`` and its subclasses (importing :mod:`sb3_pcl.common.recurrent` does).
"""

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.type_aliases import PyTorchObs

from sb3_pcl.common.episode_policy import evaluate_episodes, play_step
from sb3_pcl.common.recurrent.policies import initial_recurrent_states

__all__ = ["evaluate_recurrent_episodes", "play_recurrent_step"]


@play_step.register(RecurrentActorCriticPolicy)
def play_recurrent_step(
    policy: RecurrentActorCriticPolicy, obs: PyTorchObs, state: RNNStates | None, episode_starts: np.ndarray
) -> tuple[th.Tensor, th.Tensor, RNNStates]:
    """
    Sample one action per env at one step of a pass, carrying the recurrent state.

    :param policy: a recurrent policy
    :param obs: the envs' observations, as tensors on the policy's device
    :param state: the recurrent states returned by the previous step (``None`` at the first step: zero states)
    :param episode_starts: ``(n_envs,)`` 1.0 where an env starts an episode at this step (its state is reset)
    :return: the sampled actions, their log-probabilities, and the recurrent states for the next step
    """
    if state is None:
        state = initial_recurrent_states(policy, len(episode_starts))
    starts = th.as_tensor(episode_starts, dtype=th.float32, device=policy.device)
    actions, _, log_prob, state = policy(obs, state, starts)
    return actions, log_prob, state


@evaluate_episodes.register(RecurrentActorCriticPolicy)
def evaluate_recurrent_episodes(
    policy: RecurrentActorCriticPolicy, observations: np.ndarray, actions: np.ndarray, mask: np.ndarray | None = None
) -> tuple[th.Tensor, th.Tensor]:
    """
    Log-probabilities and entropies of the actions of ``N`` episodes under a recurrent policy.

    Each env's valid steps are a prefix of one episode that starts from a zero state, so the LSTM runs over all
    ``T`` steps of each env without a reset (one fused call, sequence-major as sb3-contrib's ``evaluate_actions``
    expects); steps after an episode's end are evaluated too and do not change the earlier ones (the LSTM is causal):
    mask them.

    :param policy: an :class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy` or another sb3-contrib
        recurrent policy
    :param observations: time-major observations ``(T, N, *obs_shape)``
    :param actions: time-major actions ``(T, N, *action_shape)``
    :param mask: unused: every step is evaluated (the generic function's ``(T, N)`` mask of valid steps)
    :return: ``(T, N)`` log-probabilities and entropies of every step, the padded ones included
    """
    n_steps, n_envs = observations.shape[:2]
    obs = th.as_tensor(observations.swapaxes(0, 1).reshape(n_envs * n_steps, *observations.shape[2:]), device=policy.device)
    flat_actions = th.as_tensor(actions.swapaxes(0, 1).reshape(n_envs * n_steps, *actions.shape[2:]), device=policy.device)
    if isinstance(policy.action_space, (spaces.Discrete, spaces.MultiDiscrete)):
        flat_actions = flat_actions.long()
    elif isinstance(policy.action_space, spaces.Box):
        flat_actions = flat_actions.reshape(n_envs * n_steps, -1)  # SB3's distributions take flat Box actions
    starts = th.zeros(n_envs * n_steps, device=policy.device)
    _, log_prob, entropy = policy.evaluate_actions(obs, flat_actions, initial_recurrent_states(policy, n_envs), starts)
    return log_prob.reshape(n_envs, n_steps).T, entropy.reshape(n_envs, n_steps).T
