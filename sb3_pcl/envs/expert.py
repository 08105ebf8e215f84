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

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv

# The episode files are shared by every source of demonstrations; re-exported here for compatibility.
from sb3_pcl.common.demonstrations import DemonstrationsCallback, load_episodes, save_episodes
from sb3_pcl.envs.algorithmic import (
    AlgorithmicEnv,
    CopyEnv,
    DuplicatedInputEnv,
    GridAlgorithmicEnv,
    RepeatCopyEnv,
    ReverseEnv,
    TapeAlgorithmicEnv,
)
from sb3_pcl.envs.registration import ALGORITHMIC_ENV_IDS, register_algorithmic_envs
from sb3_pcl.envs.wrappers import CombinedActionWrapper

#: Curriculum lengths ``(low, high)`` of the episodes behind PCL's ``expert_paths``: inputs of 2 to 10 symbols,
#: as the original code's ``sample_expert_path`` (``random.randint(2, 10)``) draws them
SEED_EXPERT_MIN_LENGTHS = (2, 8)

__all__ = [
    "SEED_EXPERT_MIN_LENGTHS",
    "ExpertPathsCallback",
    "expert_actions",
    "expert_episodes_for_vec_env",
    "generate_expert_episodes",
    "load_episodes",
    "save_episodes",
]


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


def generate_expert_episodes(
    env_id_or_env: str | gym.Env,
    n_episodes: int,
    seed: int | None = None,
    min_lengths: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """
    Play expert episodes in an algorithmic task.

    The first reset uses ``seed``, the following ones continue the environment's random stream. Without
    ``min_lengths``, perfect expert episodes promote the environment's curriculum like any other episode,
    so the input length grows along the way (``last`` perfect episodes per promotion). With ``min_lengths``
    the curriculum length of each episode is drawn instead (the environment's curriculum is then left
    external, see :meth:`~sb3_pcl.envs.algorithmic.AlgorithmicEnv.set_min_length`). A given environment is
    stepped in place; an id is created with ``gymnasium.make`` and closed afterwards. Wrapped environments
    whose action space is a :class:`CombinedActionWrapper`'s ``Discrete`` space are stepped with the
    encoded actions; the recorded actions are always the (move, write, symbol) triples.

    :param env_id_or_env: A registered id (e.g. ``"sb3_pcl/Copy-v0"``) or an environment.
    :param n_episodes: Number of episodes.
    :param seed: Seed of the first reset (and of the draw of the lengths).
    :param min_lengths: ``(low, high)``: draw each episode's curriculum ``min_length`` uniformly from
        ``low..high`` (inclusive), so the input has ``min_length + {0, 1, 2}`` symbols; ``None``: keep the
        environment's curriculum. :data:`SEED_EXPERT_MIN_LENGTHS` gives the original code's 2 to 10 symbols.
    :return: One dict per episode with ``observations`` (T + 1,), ``actions`` (T, 3), ``rewards`` (T,),
        ``terminated`` (bool) and ``truncated`` (bool).
    """
    if n_episodes < 0:
        raise ValueError(f"n_episodes must be >= 0, got {n_episodes}")
    if min_lengths is not None:
        low, high = min_lengths
        if not 1 <= low <= high:
            raise ValueError(f"min_lengths must be (low, high) with 1 <= low <= high, got {min_lengths!r}")
    length_rng = np.random.default_rng(seed)
    if isinstance(env_id_or_env, str):
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
            if min_lengths is not None:
                env.unwrapped.set_min_length(int(length_rng.integers(min_lengths[0], min_lengths[1] + 1)))  # type: ignore[attr-defined]
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


def expert_task(venv: VecEnv) -> AlgorithmicEnv:
    """
    The algorithmic task of a VecEnv, checked for expert demonstrations.

    :param venv: A VecEnv of an algorithmic task (wrappers are looked through); its observations must be the
        task's own and its actions the task's ``MultiDiscrete`` ones or their :class:`CombinedActionWrapper` encoding.
    :return: The base environment of the VecEnv's first env (the live object for a ``DummyVecEnv``, a copy for a
        ``SubprocVecEnv``).
    :raises ValueError: When the task has no scripted expert or the VecEnv changes its observations or actions.
    """
    base = venv.get_attr("unwrapped", indices=[0])[0]
    if not isinstance(base, AlgorithmicEnv):
        raise ValueError(
            f"Expert paths exist only for the algorithmic tasks ({', '.join(ALGORITHMIC_ENV_IDS)}), not for "
            f"{type(base).__name__}: record demonstrations of a trained agent with "
            "sb3_pcl.common.demonstrations.record_episodes / save_episodes and seed them from the file instead"
        )
    if venv.observation_space != base.observation_space:
        raise ValueError(
            f"The expert records the task's observations {base.observation_space}, but the env's wrappers turn them "
            f"into {venv.observation_space}"
        )
    if venv.action_space != base.action_space and not (
        isinstance(venv.action_space, gym.spaces.Discrete) and venv.has_attr("encode_batch")
    ):
        raise ValueError(
            f"The expert's actions {base.action_space} cannot be converted to the env's action space {venv.action_space} "
            "(supported: the task's own MultiDiscrete actions or a CombinedActionWrapper)"
        )
    return base


def expert_episodes_for_vec_env(
    venv: VecEnv, n_episodes: int, seed: int | None = None, min_lengths: tuple[int, int] | None = None
) -> list[dict[str, Any]]:
    """
    Expert episodes of a VecEnv's algorithmic task, with actions in the VecEnv's action space.

    The episodes are played in a copy of the first env's base environment (its settings and curriculum state;
    the VecEnv itself is not stepped), reset with ``seed`` first. With a :class:`CombinedActionWrapper` in the
    env's chain, the (move, write, symbol) actions are encoded with its ``encode_batch``.

    :param venv: The VecEnv (see :func:`expert_task` for what it may wrap).
    :param n_episodes: Number of episodes.
    :param seed: Seed of the first reset of the copy.
    :param min_lengths: Curriculum lengths of the episodes (see :func:`generate_expert_episodes`).
    :return: The episodes, in the format of :func:`generate_expert_episodes`.
    :raises ValueError: When the task has no expert (see :func:`expert_task`).
    """
    base = expert_task(venv)
    episodes = generate_expert_episodes(copy.deepcopy(base), n_episodes, seed=seed, min_lengths=min_lengths)
    if venv.action_space != base.action_space:
        for episode in episodes:
            episode["actions"] = np.asarray(venv.env_method("encode_batch", episode["actions"], indices=[0])[0])
    return episodes


class ExpertPathsCallback(DemonstrationsCallback):
    """
    Seed a PCL model's replay with scripted expert episodes of its algorithmic task when training starts.

    The original code's ``num_expert_paths``: the episodes are played by :func:`expert_episodes_for_vec_env` in a
    copy of the training env's first env (with inputs of 2 to 10 symbols, :data:`SEED_EXPERT_MIN_LENGTHS`, whatever
    the curriculum's length), from a seed derived from the model's, and added with ``add_demonstrations`` at the
    start of every ``learn`` whose replay holds no seeded path yet.

    :param n_paths: number of expert episodes
    :param verbose: 0 no output, 1 info
    """

    def __init__(self, n_paths: int, verbose: int = 0):
        if isinstance(n_paths, bool) or not isinstance(n_paths, (int, np.integer)) or n_paths < 1:
            raise ValueError(f"n_paths must be an integer >= 1, got {n_paths!r}")
        super().__init__([], verbose)
        self.n_paths = int(n_paths)

    def _init_callback(self) -> None:
        env = self.model.get_env()
        if env is None:
            raise ValueError("ExpertPathsCallback needs the model's training env")
        expert_task(env)  # fails early, naming the problem, when the env has no expert

    def demonstrations(self) -> list[dict[str, Any]]:
        env = self.model.get_env()
        assert env is not None
        # A seed derived from the model's: the expert's inputs differ from the training env's first ones.
        seed = int(np.random.default_rng(self.model.seed).integers(2**31 - 1))
        return expert_episodes_for_vec_env(env, self.n_paths, seed=seed, min_lengths=SEED_EXPERT_MIN_LENGTHS)
