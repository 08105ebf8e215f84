"""
:class:`AlgorithmicVecEnv`: a VecEnv that steps many algorithmic tasks at once with array operations.

UREX and Reinforce play batches of 400 episodes. With SB3's ``DummyVecEnv`` every step of every env goes
through Python (the env, its ``Monitor``, gymnasium's wrappers, a deep copy of the infos), which takes most
of the training time on these tasks. This VecEnv keeps the state of the running episodes in arrays and
steps them all at once; it produces the same observations, rewards, ``done`` flags and infos as a
``DummyVecEnv`` of the same (``Monitor``-wrapped) envs, which the tests check step by step.

What stays with the env objects: drawing episodes (inputs, targets, random generators and seeds), the
per-env curriculum and rendering. At a reset the VecEnv resets the env object and loads its episode into the
arrays; the env objects are brought up to date before any ``get_attr``, ``set_attr`` or ``env_method``
call (and the arrays reloaded from them afterwards), so that those calls see and may change the current
episode as with a ``DummyVecEnv``. The step rules themselves are :meth:`AlgorithmicEnv.step_outcome` and
``MOVE_DELTAS``, shared with the env's own ``step``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit
from stable_baselines3.common import env_util
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from sb3_pcl.envs.algorithmic import AlgorithmicEnv

__all__ = ["AlgorithmicVecEnv", "make_algorithmic_vec_env"]

#: Wrappers whose effect the VecEnv reproduces (``TimeLimit``, ``Monitor`` without a file) or that only check the
#: API (``OrderEnforcing``, ``PassiveEnvChecker``); any other wrapper is refused.
SUPPORTED_WRAPPERS: tuple[type[gym.Wrapper], ...] = (Monitor, TimeLimit, OrderEnforcing, PassiveEnvChecker)


def _unwrap(env: gym.Env, index: int) -> tuple[AlgorithmicEnv, int | None, bool]:
    """
    :param env: An algorithmic task, possibly wrapped in :data:`SUPPORTED_WRAPPERS`
    :param index: Its index in the VecEnv (for error messages)
    :return: The task, the ``max_episode_steps`` of its ``TimeLimit`` (``None`` without one) and whether it has a
        ``Monitor``
    :raises ValueError: For another wrapper, a ``Monitor`` writing a file or an env that is not an algorithmic task
    """
    max_episode_steps: int | None = None
    monitored = False
    current: gym.Env = env
    while isinstance(current, gym.Wrapper):
        if not isinstance(current, SUPPORTED_WRAPPERS):
            raise ValueError(
                f"env {index}: AlgorithmicVecEnv steps the algorithmic tasks itself and cannot apply the wrapper "
                f"{type(current).__name__}; use DummyVecEnv for wrapped envs"
            )
        if isinstance(current, Monitor) and (current.results_writer is not None or current.info_keywords):
            raise ValueError(
                f"env {index}: AlgorithmicVecEnv adds Monitor's episode info itself but writes no monitor file and no "
                "info_keywords; create the envs without a monitor_dir, or use DummyVecEnv"
            )
        monitored |= isinstance(current, Monitor)
        if isinstance(current, TimeLimit):
            limit = current._max_episode_steps
            max_episode_steps = limit if max_episode_steps is None else min(max_episode_steps, limit)
        current = current.env
    if not isinstance(current, AlgorithmicEnv):
        raise ValueError(f"env {index}: AlgorithmicVecEnv needs the algorithmic tasks of sb3_pcl.envs, got {type(current)}")
    return current, max_episode_steps, monitored


class AlgorithmicVecEnv(VecEnv):
    """
    Vectorised algorithmic tasks, a faster drop-in for ``DummyVecEnv`` (same constructor, same results).

    All envs must be the same task with the same settings, each possibly wrapped in ``Monitor`` (without a
    file), ``TimeLimit`` and gymnasium's checkers, as ``make_vec_env`` and ``gym.make`` create them:
    ``make_vec_env("sb3_pcl/Copy-v0", n_envs=400, vec_env_cls=AlgorithmicVecEnv)``. Like ``DummyVecEnv`` it
    resets finished envs automatically (``terminal_observation`` in the info), reports a ``TimeLimit``
    truncation as ``TimeLimit.truncated``, adds ``Monitor``'s ``episode`` info (``r``, ``l``, ``t``: seconds
    since the VecEnv was created) at the end of every episode, passes the seeds of :meth:`seed` and the
    options of :meth:`set_options` to the next :meth:`reset`, and works under ``SharedCurriculum`` and other
    VecEnv wrappers. Unlike it, the infos are not deep-copied (they are new dicts at every step) and the
    wrappers are not called: their state (e.g. ``Monitor.get_episode_rewards()``) is not updated.

    :param env_fns: Functions that create the envs
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        if len(env_fns) == 0:
            raise ValueError("AlgorithmicVecEnv needs at least one env")
        self.envs = [fn() for fn in env_fns]
        unwrapped = [_unwrap(env, index) for index, env in enumerate(self.envs)]
        self.tasks = [task for task, _, _ in unwrapped]
        limits = {limit for _, limit, _ in unwrapped}
        if len(limits) != 1:
            raise ValueError(f"the envs have different TimeLimits: {sorted(map(str, limits))}")
        #: ``max_episode_steps`` of the envs' ``TimeLimit`` (``None``: no limit besides the task's own)
        self.max_episode_steps: int | None = limits.pop()
        monitored = {flag for _, _, flag in unwrapped}
        if len(monitored) != 1:
            raise ValueError("some envs have a Monitor and others not")
        #: Whether to add ``Monitor``'s ``episode`` info (the envs were created with a ``Monitor``)
        self.monitored = monitored.pop()
        first = self.tasks[0]
        for index, task in enumerate(self.tasks):
            same = type(task) is type(first) and (task.base, task.input_rows) == (first.base, first.input_rows)
            if not same:
                raise ValueError(
                    f"env {index} is a different task ({type(task).__name__}, base {task.base}, {task.input_rows} rows) "
                    f"than env 0 ({type(first).__name__}, base {first.base}, {first.input_rows} rows)"
                )
        self.task_class = type(first)
        self.blank = first.base
        self.rows = first.input_rows
        self._move_deltas = np.asarray(first.MOVE_DELTAS, dtype=np.int64)
        self._action_nvec = np.array([len(first.MOVEMENTS), 2, first.base], dtype=np.int64)
        self._started = False
        self._actions: np.ndarray | None = None
        self._t_start = time.time()
        n = len(self.envs)
        self._index = np.arange(n)
        self._allocate()
        super().__init__(n, first.observation_space, first.action_space)

    # ------------------------------------------------------------------
    # Episode state in arrays
    # ------------------------------------------------------------------
    def _allocate(self) -> None:
        """Create the episode arrays; those sized by the inputs and targets start empty and grow in :meth:`_grow`."""
        n = len(self.envs)
        self.inputs = np.full((n, 0, self.rows), self.blank, dtype=np.int64)
        self.widths = np.zeros(n, dtype=np.int64)
        self.targets = np.zeros((n, 0), dtype=np.int64)
        self.written = np.zeros((n, 0), dtype=np.int64)
        self.target_lengths = np.zeros(n, dtype=np.int64)
        self.head_x = np.zeros(n, dtype=np.int64)
        self.head_y = np.zeros(n, dtype=np.int64)
        self.write_positions = np.zeros(n, dtype=np.int64)
        self.times = np.zeros(n, dtype=np.int64)
        self.time_limits = np.zeros(n, dtype=np.int64)
        self.totals = np.zeros(n, dtype=np.float64)
        # last action (-1: none yet) and reward, shown by the env's render()
        self.last_actions = np.full((n, 3), -1, dtype=np.int64)
        self.last_rewards = np.zeros(n, dtype=np.float64)

    def _grow(self, width: int, target_length: int) -> None:
        """
        Enlarge the arrays (keeping their content) to hold inputs of ``width`` columns and targets of ``target_length``.

        :param width: Input columns needed
        :param target_length: Target symbols needed
        """
        old = (self.inputs, self.targets, self.written)
        new_width, new_length = max(width, 2 * old[0].shape[1]), max(target_length, 2 * old[1].shape[1])
        self.inputs = np.full((len(self.envs), new_width, self.rows), self.blank, dtype=np.int64)
        self.inputs[:, : old[0].shape[1]] = old[0]
        self.targets = np.zeros((len(self.envs), new_length), dtype=np.int64)
        self.targets[:, : old[1].shape[1]] = old[1]
        self.written = np.zeros((len(self.envs), new_length), dtype=np.int64)
        self.written[:, : old[2].shape[1]] = old[2]

    def _pull(self, index: int) -> None:
        """
        Load env ``index``'s current episode (input, target, heads, time, reward so far) into the arrays.

        :param index: The env
        """
        task = self.tasks[index]
        grid = task.input_grid()
        width, length = len(grid), len(task.target)
        if width > self.inputs.shape[1] or length > self.targets.shape[1]:
            self._grow(width, length)
        self.inputs[index] = self.blank
        self.inputs[index, :width] = grid
        self.widths[index] = width
        self.targets[index, :length] = task.target
        self.target_lengths[index] = length
        written = task.written[: self.written.shape[1]]
        self.written[index, : len(written)] = written
        self.head_x[index], self.head_y[index] = task.read_head_xy
        self.write_positions[index] = task.write_head_position
        self.times[index] = task.time
        self.time_limits[index] = task.time_limit
        self.totals[index] = task.episode_total_reward or 0.0
        self.last_actions[index] = -1 if task.last_action is None else task.last_action
        self.last_rewards[index] = task.last_reward

    def _push(self, index: int) -> None:
        """
        Write the arrays' state of env ``index``'s episode back into the env object.

        :param index: The env
        """
        task = self.tasks[index]
        position = int(self.write_positions[index])
        task.written = [int(symbol) for symbol in self.written[index, :position]]
        task.write_head_position = position
        task.read_head_xy = (int(self.head_x[index]), int(self.head_y[index]))
        task.time = int(self.times[index])
        if task.episode_total_reward is not None:
            task.episode_total_reward = float(self.totals[index])
        last_action = self.last_actions[index]
        task.last_action = None if last_action[0] < 0 else (int(last_action[0]), int(last_action[1]), int(last_action[2]))
        task.last_reward = float(self.last_rewards[index])

    def _observations(self, indices: np.ndarray | None = None) -> np.ndarray:
        """
        :param indices: Envs to observe (default: all)
        :return: The symbol under each read head, ``base`` (blank) outside the input
        """
        index = self._index if indices is None else indices
        x, y = self.head_x[index], self.head_y[index]
        inside = (x >= 0) & (x < self.widths[index]) & (y >= 0) & (y < self.rows)
        symbols = self.inputs[index, np.where(inside, x, 0), np.where(inside, y, 0)]
        return np.where(inside, symbols, self.blank)

    def _reset_env(self, index: int) -> dict[str, Any]:
        """
        Start env ``index``'s next episode after the end of one (recording it for its curriculum) and load it.

        :param index: The env
        :return: The reset info
        """
        _, info = self.tasks[index].reset()
        self._pull(index)
        return info

    # ------------------------------------------------------------------
    # VecEnv API
    # ------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        """
        Reset every env, with the seeds of :meth:`seed` and the options of :meth:`set_options` if given.

        :return: The first observations
        """
        for index, env in enumerate(self.envs):
            # through the wrappers, as DummyVecEnv does (they check the order of calls); later resets skip them
            options = {"options": self._options[index]} if self._options[index] else {}
            _, self.reset_infos[index] = env.reset(seed=self._seeds[index], **options)
            self._pull(index)
        self._started = True
        self._reset_seeds()
        self._reset_options()
        return self._observations()

    def step_async(self, actions: np.ndarray) -> None:
        """
        :param actions: One ``(move, write, symbol)`` action per env
        """
        self._actions = actions

    def _validated_actions(self) -> np.ndarray:
        """
        :return: The actions of :meth:`step_async` as a ``(num_envs, 3)`` integer array
        :raises ValueError: When an action is not in the action space
        """
        actions = np.asarray(self._actions)
        if actions.shape != (self.num_envs, 3):
            raise ValueError(f"expected actions of shape ({self.num_envs}, 3), got {actions.shape}")
        if actions.dtype.kind == "f" and np.all(np.isfinite(actions)) and np.all(actions == np.round(actions)):
            actions = actions.astype(np.int64)
        if actions.dtype.kind not in "iub":
            raise ValueError(f"invalid actions of dtype {actions.dtype}: not in the action space {self.action_space}")
        invalid = np.flatnonzero(np.any((actions < 0) | (actions >= self._action_nvec), axis=1))
        if len(invalid):
            first = int(invalid[0])
            action = actions[first].tolist()
            raise ValueError(f"invalid action {action} for env {first}: not in the action space {self.action_space}")
        return actions.astype(np.int64, copy=False)

    def step_wait(self) -> VecEnvStepReturn:
        """
        Step every env; reset those whose episode ended.

        :return: observations, rewards, dones, infos (as ``DummyVecEnv`` returns them)
        """
        if not self._started:
            raise RuntimeError("Call reset() before step()")
        actions = self._validated_actions()
        move, write, symbol = actions.T
        index = self._index
        self.times += 1
        writing = write == 1
        positions = self.write_positions
        recorded = writing & (positions < self.target_lengths)  # writes past the target are wrong, and not kept
        next_symbol = self.targets[index, np.minimum(positions, self.targets.shape[1] - 1)]
        correct = recorded & (symbol == next_symbol)
        rewards, terminated = self.task_class.step_outcome(
            writing, correct, positions + 1 >= self.target_lengths, self.times > self.time_limits
        )
        self.written[index[recorded], positions[recorded]] = symbol[recorded]
        self.write_positions = positions + writing
        self.head_x += self._move_deltas[move, 0]
        self.head_y += self._move_deltas[move, 1]
        self.totals += rewards
        self.last_actions[:] = actions
        self.last_rewards[:] = rewards
        truncated = np.zeros(self.num_envs, dtype=bool)
        if self.max_episode_steps is not None:
            truncated = ~terminated & (self.times >= self.max_episode_steps)
        dones = terminated | truncated
        observations = self._observations()

        infos: list[dict[str, Any]] = [
            {"min_length": task.min_length, "target_length": length, "TimeLimit.truncated": False}
            for task, length in zip(self.tasks, self.target_lengths.tolist(), strict=True)
        ]
        finished = np.flatnonzero(dones)
        for i in finished:
            info = infos[i]
            task = self.tasks[i]
            total = float(self.totals[i])
            if terminated[i]:
                info["shortfall"] = total - float(self.target_lengths[i])
            if self.monitored:
                info["episode"] = {"r": round(total, 6), "l": int(self.times[i]), "t": round(time.time() - self._t_start, 6)}
            info["TimeLimit.truncated"] = bool(truncated[i])
            info["terminal_observation"] = observations[i]
            # what the env object's reset reads to record the episode for its curriculum (the rest is replaced)
            task.episode_total_reward = total
            task.episode_ended = bool(terminated[i])
            self.reset_infos[i] = self._reset_env(int(i))
        if len(finished):
            observations[finished] = self._observations(finished)
        return observations, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        """Close the envs."""
        for env in self.envs:
            env.close()

    def _call(self, indices: VecEnvIndices, call: Callable[[gym.Env], Any], changes_state: bool) -> list[Any]:
        """
        Run ``call`` on the envs with their objects up to date (and reload the arrays if it may have changed them).

        :param indices: The envs
        :param call: What to do with each (wrapped) env
        :param changes_state: Reload the episode arrays from the env objects afterwards
        :return: The results
        """
        results = []
        for index in self._get_indices(indices):
            if self._started:
                self._push(index)
            results.append(call(self.envs[index]))
            if self._started and changes_state:
                self._pull(index)
        return results

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """
        :param attr_name: Attribute of the envs (found through their wrappers)
        :param indices: The envs
        :return: Its value in each env
        """
        return self._call(indices, lambda env: env.get_wrapper_attr(attr_name), changes_state=False)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """
        :param attr_name: Attribute to set on the (outermost wrapper of the) envs
        :param value: Its new value
        :param indices: The envs
        """
        self._call(indices, lambda env: setattr(env, attr_name, value), changes_state=True)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """
        :param method_name: Method of the envs (found through their wrappers)
        :param method_args: Its positional arguments
        :param indices: The envs
        :param method_kwargs: Its keyword arguments
        :return: Its result in each env
        """
        return self._call(
            indices, lambda env: env.get_wrapper_attr(method_name)(*method_args, **method_kwargs), changes_state=True
        )

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """
        :param wrapper_class: A wrapper class
        :param indices: The envs
        :return: Whether each env was created with that wrapper (``Monitor``: its episode info is reproduced)
        """
        return [env_util.is_wrapped(self.envs[index], wrapper_class) for index in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """:return: ``None`` per env: the algorithmic tasks render text (``render_mode="ansi"``), not images."""
        return [None for _ in self.envs]


def make_algorithmic_vec_env(
    env_id: str,
    n_envs: int = 1,
    seed: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> AlgorithmicVecEnv:
    """
    ``make_vec_env(env_id, n_envs, seed, env_kwargs=env_kwargs, vec_env_cls=AlgorithmicVecEnv)``.

    :param env_id: A registered algorithmic task, e.g. ``"sb3_pcl/RepeatCopy-v0"``
    :param n_envs: Number of envs
    :param seed: Seed of env 0 at the first reset (env ``i`` gets ``seed + i``)
    :param env_kwargs: Keyword arguments of the task
    :return: The VecEnv
    """
    # make_vec_env takes any VecEnv class with DummyVecEnv's constructor; its annotation names only SB3's two
    vec_env = env_util.make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=seed,
        env_kwargs=env_kwargs,
        vec_env_cls=AlgorithmicVecEnv,  # type: ignore[arg-type]
    )
    assert isinstance(vec_env, AlgorithmicVecEnv)
    return vec_env
