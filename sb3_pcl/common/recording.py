"""Recording episodes from any trained agent, in the episode format of :mod:`sb3_pcl.common.demonstrations`."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, unwrap_vec_normalize


def _as_vec_env(env: gym.Env | VecEnv | str) -> VecEnv:
    """
    :param env: an environment, a VecEnv or a registered id
    :return: a VecEnv (a new ``DummyVecEnv`` of one env unless ``env`` is one)
    """
    if isinstance(env, VecEnv):
        return env
    if isinstance(env, str):
        return DummyVecEnv([lambda: gym.make(env)])
    if isinstance(env, gym.Env):
        return DummyVecEnv([lambda: env])
    raise ValueError(f"env must be a gymnasium Env, a VecEnv or an env id, got {type(env).__name__}")


def record_episodes(
    model: BaseAlgorithm | BasePolicy,
    env: gym.Env | VecEnv | str,
    n_episodes: int,
    deterministic: bool = True,
    seed: int | None = None,
) -> list[dict[str, Any]]:
    """
    Play a trained agent and record its episodes as demonstrations.

    Works with any Stable-Baselines3 / sb3-contrib model or policy: recurrent ones get their state and
    ``episode_start`` back at every step. With several envs, env ``i`` records ``(n_episodes + i) // n_envs``
    episodes, so short episodes are not over-represented (as SB3's ``evaluate_policy`` does). Each env must end
    its episodes by itself (termination or time limit).

    ``VecNormalize`` must be the outermost wrapper of ``env`` when present: the agent acts on observations
    normalised with its (frozen) statistics, and the raw observations and rewards are recorded, as
    :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` stores them. The envs are reset first (with ``seed`` when
    given) and stepped in place: pass a separate env, not the one a model keeps training on.

    :param model: the agent (anything with SB3's ``predict(obs, state, episode_start, deterministic)``)
    :param env: the environment (a VecEnv, an env or a registered id; an id is created and closed here)
    :param n_episodes: number of episodes to record
    :param deterministic: act deterministically
    :param seed: seed of the envs' first reset (env ``i`` gets ``seed + i``)
    :return: the episodes (see the module docstring), ready for :func:`save_episodes`
    """
    if n_episodes < 0:
        raise ValueError(f"n_episodes must be >= 0, got {n_episodes}")
    venv = _as_vec_env(env)
    try:
        return _record(model, venv, n_episodes, deterministic, seed)
    finally:
        if isinstance(env, str):
            venv.close()


def _record(
    model: BaseAlgorithm | BasePolicy, venv: VecEnv, n_episodes: int, deterministic: bool, seed: int | None
) -> list[dict[str, Any]]:
    """See :func:`record_episodes` (``venv`` is the VecEnv to record)."""
    if isinstance(venv.observation_space, (spaces.Dict, spaces.Tuple)):
        raise ValueError(f"Demonstrations need array observations, got {venv.observation_space}")
    normalizer = unwrap_vec_normalize(venv)
    if normalizer is not None and normalizer is not venv:
        raise ValueError("VecNormalize must be the outermost wrapper of the env given to record_episodes")
    if normalizer is None and isinstance(model, BaseAlgorithm) and model.get_vec_normalize_env() is not None:
        warnings.warn(
            "The model was trained with VecNormalize but the recording env has none: "
            "pass the VecNormalize-wrapped env (with training=False) so that the agent sees normalised observations"
        )
    # With VecNormalize, step the env below it (raw observations and rewards) and normalise for the agent only.
    stepped = normalizer.venv if normalizer is not None else venv
    n_envs = stepped.num_envs
    targets = [(n_episodes + i) // n_envs for i in range(n_envs)]
    recorded = [0] * n_envs
    if seed is not None:
        stepped.seed(seed)
    obs = np.asarray(stepped.reset())
    running: list[dict[str, list[Any]]] = [{"observations": [obs[i]], "actions": [], "rewards": []} for i in range(n_envs)]
    state: tuple[np.ndarray, ...] | None = None
    episode_start = np.ones(n_envs, dtype=bool)
    episodes: list[dict[str, Any]] = []
    while sum(recorded) < n_episodes:
        policy_obs = np.asarray(normalizer.normalize_obs(obs)) if normalizer is not None else obs
        actions, state = model.predict(policy_obs, state=state, episode_start=episode_start, deterministic=deterministic)
        next_obs, rewards, dones, infos = stepped.step(actions)
        next_obs = np.asarray(next_obs)
        for i in range(n_envs):
            if recorded[i] >= targets[i]:
                continue
            current = running[i]
            current["actions"].append(np.asarray(actions[i]))
            current["rewards"].append(float(rewards[i]))
            if not dones[i]:
                current["observations"].append(next_obs[i])
                continue
            truncated = bool(infos[i].get("TimeLimit.truncated", False))
            final = np.asarray(infos[i].get("terminal_observation", next_obs[i]))
            episodes.append(
                {
                    "observations": np.stack([*current["observations"], final.astype(next_obs.dtype)]),
                    "actions": np.stack(current["actions"]),
                    "rewards": np.asarray(current["rewards"], dtype=np.float64),
                    "terminated": not truncated,
                    "truncated": truncated,
                }
            )
            recorded[i] += 1
            running[i] = {"observations": [next_obs[i]], "actions": [], "rewards": []}
        obs = next_obs
        episode_start = np.asarray(dones, dtype=bool)
    return episodes
