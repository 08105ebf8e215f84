"""
Scripted expert demonstrations for the algorithmic tasks (used e.g. to seed PCL's replay buffer).

The expert of every task only uses what an agent can know from its observations: the written
symbols are the ones under the read head (addition: the digit-wise sum of the column just read plus
the carry), and the end of the input is detected by reading a blank. With the gym time limits it
earns exactly ``len(target)`` with no penalty, except for ``ReversedAddition3`` where reading the
``3 * columns`` digits does not fit in the ``2 * columns + 4`` time limit once
``columns + (final carry > 0) > 4``; there no action sequence avoids the -1 penalty and the expert
episode ends at the time limit (a faithful quirk of gym, see :class:`ReversedAddition3Env`).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from sb3_pcl.envs.algorithmic import (
    AlgorithmicEnv,
    CopyEnv,
    DuplicatedInputEnv,
    GridAlgorithmicEnv,
    RepeatCopyEnv,
    ReverseEnv,
    TapeAlgorithmicEnv,
)
from sb3_pcl.envs.wrappers import CombinedActionWrapper

__all__ = ["expert_actions", "generate_expert_episodes", "load_episodes", "save_episodes"]

_EPISODE_KEYS = ("observations", "actions", "rewards", "lengths", "terminated", "truncated")
_FORMAT_VERSION = 1


def _tape_expert(env: TapeAlgorithmicEnv) -> list[tuple[int, int, int]]:
    """
    :param env: A tape task right after reset.
    :return: The expert's (move, write, symbol) actions.
    """
    left, right = TapeAlgorithmicEnv.LEFT, TapeAlgorithmicEnv.RIGHT
    tape = [int(symbol) for symbol in env.input_data]
    n = len(tape)
    if isinstance(env, CopyEnv):
        # Write the symbol under the head, move right.
        return [(right, 1, symbol) for symbol in tape]
    if isinstance(env, DuplicatedInputEnv):
        # Write the first copy of each symbol, skip the others; the episode ends with the last write.
        actions = []
        for position in range(n - env.duplication + 1):
            first_copy = position % env.duplication == 0
            actions.append((right, int(first_copy), tape[position] if first_copy else 0))
        return actions
    if isinstance(env, RepeatCopyEnv):
        forward = [(right, 1, symbol) for symbol in tape]  # head ends on the blank at n
        backward = [(left, 1, symbol) for symbol in reversed(tape)]  # head ends on the blank at -1
        forward_again = [(right, 1, symbol) for symbol in tape]
        return [*forward, (left, 0, 0), *backward, (right, 0, 0), *forward_again]
    if isinstance(env, ReverseEnv):
        # Read to the end (blank at n), step back and write while moving left.
        return [(right, 0, 0)] * n + [(left, 0, 0)] + [(left, 1, symbol) for symbol in reversed(tape)]
    raise TypeError(f"No expert for tape task {type(env).__name__}")


def _grid_expert(env: GridAlgorithmicEnv) -> list[tuple[int, int, int]]:
    """
    Snake through the columns (down the even ones, up the odd ones) and write each column's digit while
    moving to the next column, then the final carry (if any) on the blank after the last column.

    :param env: A grid (addition) task right after reset.
    :return: The expert's (move, write, symbol) actions.
    """
    actions: list[tuple[int, int, int]] = []
    target = [int(digit) for digit in env.target]
    for column in range(env.input_width):
        vertical = GridAlgorithmicEnv.DOWN if column % 2 == 0 else GridAlgorithmicEnv.UP
        actions.extend([(vertical, 0, 0)] * (env.rows - 1))
        actions.append((GridAlgorithmicEnv.RIGHT, 1, target[column]))
    if len(target) > env.input_width:
        actions.append((GridAlgorithmicEnv.RIGHT, 1, target[env.input_width]))
    return actions


def expert_actions(env: gym.Env) -> np.ndarray:
    """
    Optimal action sequence for the current episode of an algorithmic task.

    Must be called right after ``reset()``; the sequence is computed from ``env.unwrapped``'s input and
    target. It writes the whole target (the episode terminates with its last action), except for
    ``ReversedAddition3`` with ``columns + (final carry > 0) > 4``, where the time limit ends the episode
    first (no sequence can avoid it); the actions after that point are then never played.

    :param env: An algorithmic environment (possibly wrapped) right after ``reset()``.
    :return: An int64 array of shape ``(T, 3)`` of (move, write, symbol) actions.
    :raises TypeError: When the environment is not an algorithmic task.
    :raises ValueError: When the episode has not just been reset.
    """
    base_env = env.unwrapped
    if not isinstance(base_env, AlgorithmicEnv):
        raise TypeError(f"expert_actions needs an algorithmic task, got {type(base_env).__name__}")
    if base_env.episode_total_reward is None or base_env.time != 0 or base_env.write_head_position != 0:
        raise ValueError("expert_actions must be called right after reset(), before any step")
    if isinstance(base_env, GridAlgorithmicEnv):
        actions = _grid_expert(base_env)
    elif isinstance(base_env, TapeAlgorithmicEnv):
        actions = _tape_expert(base_env)
    else:
        raise TypeError(f"No expert for {type(base_env).__name__}")
    return np.asarray(actions, dtype=np.int64).reshape(-1, 3)


def _uses_combined_actions(env: gym.Env) -> CombinedActionWrapper | None:
    """
    :param env: The environment stepped by the expert.
    :return: The :class:`CombinedActionWrapper` of the chain when the outer action space is its ``Discrete`` one.
    """
    if isinstance(env.action_space, gym.spaces.MultiDiscrete):
        return None
    current: gym.Env = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, CombinedActionWrapper):
            return current
        current = current.env
    raise TypeError(f"Cannot step the expert's MultiDiscrete actions in action space {env.action_space}")


def generate_expert_episodes(env_id_or_env: str | gym.Env, n_episodes: int, seed: int | None = None) -> list[dict[str, Any]]:
    """
    Play expert episodes in an algorithmic task.

    The first reset uses ``seed``, the following ones continue the environment's random stream. Perfect
    expert episodes promote the environment's curriculum like any other episode, so the input length
    grows along the way (``last`` perfect episodes per promotion). A given environment is stepped in
    place; an id is created with ``gymnasium.make`` and closed afterwards. Wrapped environments whose
    action space is a :class:`CombinedActionWrapper`'s ``Discrete`` space are stepped with the encoded
    actions; the recorded actions are always the (move, write, symbol) triples.

    :param env_id_or_env: A registered id (e.g. ``"sb3_pcl/Copy-v0"``) or an environment.
    :param n_episodes: Number of episodes.
    :param seed: Seed of the first reset.
    :return: One dict per episode with ``observations`` (T + 1,), ``actions`` (T, 3), ``rewards`` (T,),
        ``terminated`` (bool) and ``truncated`` (bool).
    """
    if n_episodes < 0:
        raise ValueError(f"n_episodes must be >= 0, got {n_episodes}")
    if isinstance(env_id_or_env, str):
        from sb3_pcl.envs import register_algorithmic_envs

        register_algorithmic_envs()
        env = gym.make(env_id_or_env)
        owns_env = True
    else:
        env = env_id_or_env
        owns_env = False
    try:
        combined = _uses_combined_actions(env)
        episodes = []
        for episode_index in range(n_episodes):
            obs, _ = env.reset(seed=seed if episode_index == 0 else None)
            actions = expert_actions(env)
            observations = [int(obs)]
            rewards: list[float] = []
            terminated = truncated = False
            for action in actions:
                step_action: Any = action if combined is None else combined.encode(*action)
                obs, reward, terminated, truncated, _ = env.step(step_action)
                observations.append(int(obs))
                rewards.append(float(reward))
                if terminated or truncated:
                    break
            if not (terminated or truncated):
                raise RuntimeError("The expert actions did not end the episode")
            episodes.append(
                {
                    "observations": np.asarray(observations, dtype=np.int64),
                    "actions": actions[: len(rewards)].copy(),
                    "rewards": np.asarray(rewards, dtype=np.float64),
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                }
            )
        return episodes
    finally:
        if owns_env:
            env.close()


def save_episodes(path: str | os.PathLike[str], episodes: Sequence[dict[str, Any]]) -> None:
    """
    Save episodes to a single ``.npz`` file (concatenated arrays plus per-episode lengths, no pickle).

    The file is written at ``path`` exactly (no ``.npz`` suffix is appended).

    :param path: Destination file.
    :param episodes: Episodes as returned by :func:`generate_expert_episodes`.
    :raises ValueError: When an episode is malformed.
    """
    lengths = []
    for index, episode in enumerate(episodes):
        missing = [key for key in ("observations", "actions", "rewards", "terminated", "truncated") if key not in episode]
        if missing:
            raise ValueError(f"Episode {index} lacks {missing}")
        length = len(episode["rewards"])
        if len(episode["observations"]) != length + 1 or np.shape(episode["actions"]) != (length, 3):
            raise ValueError(f"Episode {index}: expected {length + 1} observations and ({length}, 3) actions")
        lengths.append(length)
    if episodes:
        observations = np.concatenate([np.asarray(ep["observations"], dtype=np.int64) for ep in episodes])
        actions = np.concatenate([np.asarray(ep["actions"], dtype=np.int64).reshape(-1, 3) for ep in episodes])
        rewards = np.concatenate([np.asarray(ep["rewards"], dtype=np.float64) for ep in episodes])
    else:
        observations = np.zeros(0, dtype=np.int64)
        actions = np.zeros((0, 3), dtype=np.int64)
        rewards = np.zeros(0, dtype=np.float64)
    with open(path, "wb") as file:
        np.savez_compressed(
            file,
            observations=observations,
            actions=actions,
            rewards=rewards,
            lengths=np.asarray(lengths, dtype=np.int64),
            terminated=np.asarray([bool(ep["terminated"]) for ep in episodes], dtype=bool),
            truncated=np.asarray([bool(ep["truncated"]) for ep in episodes], dtype=bool),
            format_version=np.asarray(_FORMAT_VERSION, dtype=np.int64),
        )


def load_episodes(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """
    Load episodes written by :func:`save_episodes` (``allow_pickle=False``).

    :param path: The ``.npz`` file.
    :return: The episodes, with the same keys and dtypes as :func:`generate_expert_episodes`.
    :raises FileNotFoundError: When the file does not exist.
    :raises ValueError: When the file is not a valid episodes file (corrupt, missing keys, inconsistent shapes).
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"No episodes file at {os.fspath(path)!r}")
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ValueError("not an .npz archive")
            missing = [key for key in _EPISODE_KEYS if key not in data.files]
            if missing:
                raise ValueError(f"missing keys {missing}")
            arrays = {key: np.asarray(data[key]) for key in _EPISODE_KEYS}
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile, zlib.error) as error:
        raise ValueError(f"{os.fspath(path)!r} is not a valid episodes .npz file: {error}") from error

    lengths = arrays["lengths"]
    n_episodes = len(lengths)
    total = int(lengths.sum()) if n_episodes else 0
    checks = [
        lengths.ndim == 1 and lengths.dtype.kind in "iu" and bool(np.all(lengths >= 0)),
        arrays["observations"].shape == (total + n_episodes,),
        arrays["actions"].shape == (total, 3),
        arrays["rewards"].shape == (total,),
        arrays["terminated"].shape == (n_episodes,),
        arrays["truncated"].shape == (n_episodes,),
    ]
    if not all(checks):
        raise ValueError(f"{os.fspath(path)!r} is not a valid episodes .npz file: inconsistent array shapes")

    episodes = []
    step_start = obs_start = 0
    for index, length in enumerate(int(value) for value in lengths):
        episodes.append(
            {
                "observations": arrays["observations"][obs_start : obs_start + length + 1].astype(np.int64),
                "actions": arrays["actions"][step_start : step_start + length].astype(np.int64),
                "rewards": arrays["rewards"][step_start : step_start + length].astype(np.float64),
                "terminated": bool(arrays["terminated"][index]),
                "truncated": bool(arrays["truncated"][index]),
            }
        )
        step_start += length
        obs_start += length + 1
    return episodes
