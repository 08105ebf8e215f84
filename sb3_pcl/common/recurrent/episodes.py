"""Evaluation of synchronised episode batches (Reinforce, UREX) under a recurrent policy."""

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

from sb3_pcl.common.recurrent.policies import initial_recurrent_states

__all__ = ["evaluate_episodes"]


def evaluate_episodes(
    policy: RecurrentActorCriticPolicy, observations: np.ndarray, actions: np.ndarray
) -> tuple[th.Tensor, th.Tensor]:
    """
    Log-probabilities and entropies of the actions of ``N`` episodes under a recurrent policy.

    Each env's valid steps are a prefix of one episode that starts from a zero state, so the LSTM runs over all
    ``T`` steps of each env without a reset (one fused call, sequence-major as sb3-contrib's ``evaluate_actions``
    expects); steps after an episode's end are evaluated too and do not change the earlier ones (the LSTM is causal):
    mask them.

    :param policy: an :class:`~sb3_pcl.common.recurrent.policies.MlpLstmPolicy` or another sb3-contrib recurrent policy
    :param observations: time-major observations ``(T, N, *obs_shape)``
    :param actions: time-major actions ``(T, N, *action_shape)``
    :return: ``(T, N)`` log-probabilities and entropies of every step, the padded ones included
    """
    n_steps, n_envs = observations.shape[:2]
    obs = th.as_tensor(observations.swapaxes(0, 1).reshape(n_envs * n_steps, *observations.shape[2:]), device=policy.device)
    flat_actions = th.as_tensor(actions.swapaxes(0, 1).reshape(n_envs * n_steps, *actions.shape[2:]), device=policy.device)
    if isinstance(policy.action_space, (spaces.Discrete, spaces.MultiDiscrete)):
        flat_actions = flat_actions.long()
    starts = th.zeros(n_envs * n_steps, device=policy.device)
    _, log_prob, entropy = policy.evaluate_actions(obs, flat_actions, initial_recurrent_states(policy, n_envs), starts)
    return log_prob.reshape(n_envs, n_steps).T, entropy.reshape(n_envs, n_steps).T
