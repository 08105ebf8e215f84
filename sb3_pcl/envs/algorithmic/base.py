"""
The base class of the algorithmic tasks: the read head, the write rules, the rewards, the per-instance
curriculum and the gymnasium API. The input layouts (tape, grid) and the tasks are in the sibling modules.
"""

from __future__ import annotations

import abc
import copy
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: Booleans, one per env: an array, or a NumPy scalar for a single env (``~`` must be the logical not)
Bools = np.ndarray | np.bool_

__all__ = ["AlgorithmicEnv", "UnsupportedRenderModeError", "record_shortfall"]


def record_shortfall(
    shortfalls: list[float], shortfall: float, last: int, min_reward_threshold: float, can_grow: bool
) -> tuple[list[float], bool]:
    """
    gym's curriculum rule: keep the last ``last`` reward shortfalls; promote when all of them are at least
    ``min_reward_threshold`` (and the length may still grow), then start a new list.

    :param shortfalls: The recent shortfalls (total reward minus the target's length), oldest first.
    :param shortfall: The shortfall of the episode that just ended.
    :param last: How many recent shortfalls a promotion needs.
    :param min_reward_threshold: The worst shortfall that still allows a promotion.
    :param can_grow: Whether the curriculum length is below its maximum.
    :return: The new list of shortfalls and whether the curriculum is promoted.
    """
    shortfalls = [*shortfalls, float(shortfall)][-last:]
    if len(shortfalls) == last and min(shortfalls) >= min_reward_threshold and can_grow:
        return [], True
    return shortfalls, False


class UnsupportedRenderModeError(ValueError, TypeError):
    """
    An algorithmic task was asked for a render mode other than ``None`` or ``"ansi"``.

    It is also a ``TypeError`` so that SB3's ``make_vec_env``, which asks for ``"rgb_array"``
    by default and retries without a render mode on ``TypeError``, works with these envs.
    """


class AlgorithmicEnv(gym.Env[np.int64, np.ndarray], abc.ABC):
    """
    Base class of the algorithmic tasks: read an input (tape or grid) with a movable read head and
    write the target sequence on an output tape, one symbol at a time.

    Observation: ``Discrete(base + 1)``, the symbol under the read head (``base`` means blank, i.e. any
    cell outside the input). Action: ``MultiDiscrete([len(MOVEMENTS), 2, base])`` = (move, write?, symbol);
    the symbol is ignored unless ``write == 1``.

    One step: ``time += 1``; if writing, compare the symbol with ``target[write_pos]`` (+1 if correct,
    -0.5 and end of the episode otherwise), then ``write_pos += 1`` and the episode ends once the whole
    target has been written; move the read head (unbounded); if ``time > time_limit`` the step's reward
    is replaced by -1 and the episode ends; observe the symbol under the head.

    Curriculum: each episode uses an input length ``min_length + uniform{0, 1, 2}``. At every reset the
    shortfall of the previous episode (total reward - len(target)) is appended to a list keeping the
    last ``last`` values, if that episode ended (an episode interrupted by ``reset()`` is not recorded;
    the step that ends an episode reports its shortfall in ``info["shortfall"]``). When the list is full,
    its minimum is ``>= min_reward_threshold`` and ``min_length < 30``, ``min_length`` is increased by one
    and the list is cleared.
    As in gym, whose constructor called ``reset()``, the first reset after construction records the
    shortfall of an episode that was drawn but never played (``-len(target)``); that phantom episode
    is drawn from a generator jumped ahead of ``self.np_random`` so that it does not consume random
    numbers of the real episodes (``reset(seed=s)`` always gives the same input for a given curriculum).
    :meth:`set_min_length` hands the curriculum to an external driver (e.g.
    :class:`~sb3_pcl.envs.curriculum.SharedCurriculum`): the env then records and promotes nothing itself.

    :param base: Number of symbols (task default when ``None``).
    :param chars: Render symbols as letters ``'A' + i`` instead of digits (task default when ``None``).
    :param starting_min_length: Initial curriculum length (task default when ``None``).
    :param last: Number of recent episode shortfalls considered for promotion (task default when ``None``).
    :param min_reward_threshold: A promotion needs the worst of the last ``last`` shortfalls to be at least
        this value (task default when ``None``).
    :param render_mode: ``None`` or ``"ansi"``.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    #: Names of the moves of the read head, indexed by the move component of the action.
    MOVEMENTS: ClassVar[tuple[str, ...]] = ()
    #: ``(dx, dy)`` displacement of the read head for each move (a tape has ``dy = 0``; ``y`` is the grid row).
    MOVE_DELTAS: ClassVar[tuple[tuple[int, int], ...]] = ()
    #: Curriculum cap: no promotion once ``min_length`` has reached this value.
    MAX_MIN_LENGTH: ClassVar[int] = 30
    #: Reward of a correct write.
    CORRECT_REWARD: ClassVar[float] = 1.0
    #: Reward of a wrong write (the episode ends).
    WRONG_REWARD: ClassVar[float] = -0.5
    #: Reward replacing the step's reward once the time limit is exceeded (the episode ends).
    TIME_LIMIT_REWARD: ClassVar[float] = -1.0

    DEFAULT_BASE: ClassVar[int] = 10
    DEFAULT_CHARS: ClassVar[bool] = False
    DEFAULT_STARTING_MIN_LENGTH: ClassVar[int] = 2
    DEFAULT_LAST: ClassVar[int] = 10
    DEFAULT_MIN_REWARD_THRESHOLD: ClassVar[float] = -1.0

    def __init__(
        self,
        base: int | None = None,
        chars: bool | None = None,
        starting_min_length: int | None = None,
        last: int | None = None,
        min_reward_threshold: float | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.base = int(self.DEFAULT_BASE if base is None else base)
        self.chars = bool(self.DEFAULT_CHARS if chars is None else chars)
        if starting_min_length is None:
            starting_min_length = self.DEFAULT_STARTING_MIN_LENGTH
        self.starting_min_length = int(starting_min_length)
        self.last = int(self.DEFAULT_LAST if last is None else last)
        self.min_reward_threshold = float(
            self.DEFAULT_MIN_REWARD_THRESHOLD if min_reward_threshold is None else min_reward_threshold
        )
        if self.base < 1:
            raise ValueError(f"base must be >= 1, got {self.base}")
        if self.starting_min_length < 1:
            raise ValueError(f"starting_min_length must be >= 1, got {self.starting_min_length}")
        if self.last < 1:
            raise ValueError(f"last must be >= 1, got {self.last}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            supported = self.metadata["render_modes"]
            raise UnsupportedRenderModeError(f"Unsupported render_mode {render_mode!r}, expected None or one of {supported}")
        self.render_mode = render_mode

        self.observation_space = spaces.Discrete(self.base + 1)
        self._action_nvec = np.array([len(self.MOVEMENTS), 2, self.base], dtype=np.int64)
        self._action_bounds = (len(self.MOVEMENTS), 2, self.base)
        self.action_space = spaces.MultiDiscrete(self._action_nvec)
        if self.chars:
            self.charmap = [chr(ord("A") + i) for i in range(self.base)]
        else:
            self.charmap = [str(i) for i in range(self.base)]
        self.charmap.append(" ")

        # Curriculum state (per instance).
        self.min_length = self.starting_min_length
        self.reward_shortfalls: list[float] = []
        # ``None`` until the first reset (used to reproduce gym's first-reset quirk).
        self.episode_total_reward: float | None = None
        # Whether the current episode ended by the task's rules (only such episodes are recorded).
        self.episode_ended = False
        # ``True`` while an external driver (``set_min_length``) owns the curriculum.
        self.external_curriculum = False

        # Episode state.
        self.input_data = np.zeros(0, dtype=np.int64)
        self.target = np.zeros(0, dtype=np.int64)
        self.written: list[int] = []
        self.time = 0
        self.write_head_position = 0
        self.last_action: tuple[int, int, int] | None = None
        self.last_reward = 0.0
        self._reset_read_head()

    # ------------------------------------------------------------------
    # Task-specific parts
    # ------------------------------------------------------------------
    @abc.abstractmethod
    def generate_input_data(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """
        Draw the input of an episode.

        :param size: The input length ``n`` drawn by the curriculum.
        :param rng: The random generator to use.
        :return: The input (1-D tape or ``(columns, rows)`` grid) of integer symbols in ``[0, base)``.
        """

    @abc.abstractmethod
    def target_from_input_data(self, input_data: np.ndarray) -> np.ndarray:
        """
        Compute the target sequence of an input.

        :param input_data: The input tape or grid.
        :return: The 1-D target sequence.
        """

    @property
    @abc.abstractmethod
    def input_width(self) -> int:
        """Length of the input tape, or number of columns of the input grid."""

    @property
    @abc.abstractmethod
    def time_limit(self) -> int:
        """Number of steps after which every step gets the -1 time-limit reward and ends the episode."""

    @abc.abstractmethod
    def _reset_read_head(self) -> None:
        """Put the read head at its start position."""

    @property
    @abc.abstractmethod
    def input_rows(self) -> int:
        """Number of rows of the input (1 for a tape)."""

    @abc.abstractmethod
    def input_grid(self) -> np.ndarray:
        """:return: The input as a ``(input_width, input_rows)`` array (a tape is a grid of one row)."""

    @property
    @abc.abstractmethod
    def read_head_xy(self) -> tuple[int, int]:
        """The read head as ``(x, y)``: column and row of the input grid (``y = 0`` on a tape); settable."""

    @read_head_xy.setter
    @abc.abstractmethod
    def read_head_xy(self, xy: tuple[int, int]) -> None: ...

    def _move(self, move: int) -> None:
        """
        Move the read head by ``MOVE_DELTAS[move]`` (unbounded).

        :param move: The move component of the action.
        """
        x, y = self.read_head_xy
        dx, dy = self.MOVE_DELTAS[move]
        self.read_head_xy = (x + dx, y + dy)

    @classmethod
    def step_outcome(
        cls, write: Bools, correct: Bools, target_complete: Bools, over_time: Bools
    ) -> tuple[np.ndarray, np.ndarray]:
        """
        Reward and end of a step, elementwise (one entry per env; 0-d arrays for a single env). The rules live
        here only: :meth:`step` and :class:`~sb3_pcl.envs.vec_env.AlgorithmicVecEnv` both call this.

        :param write: Boolean array: the action writes a symbol.
        :param correct: Boolean array: the action writes the next symbol of the target.
        :param target_complete: Boolean array: the next write is the last symbol of the target.
        :param over_time: Boolean array: ``time > time_limit`` after this step.
        :return: The rewards (+1 correct write, -0.5 wrong write, 0 no write; -1 once over the time limit,
            replacing the others) and whether the episode ends (a wrong write, the last symbol written, or
            over the time limit).
        """
        reward = np.where(write, np.where(correct, cls.CORRECT_REWARD, cls.WRONG_REWARD), 0.0)
        terminated = write & (~correct | target_complete)
        reward = np.where(over_time, cls.TIME_LIMIT_REWARD, reward)
        return reward, np.asarray(terminated | over_time)

    @abc.abstractmethod
    def _observe(self) -> int:
        """:return: The symbol under the read head (``base`` when the head is outside the input)."""

    @abc.abstractmethod
    def render_observation(self) -> list[str]:
        """:return: The lines showing the input with the read head."""

    # ------------------------------------------------------------------
    # Curriculum
    # ------------------------------------------------------------------
    def _record_shortfall(self, shortfall: float) -> None:
        """
        Append an episode's reward shortfall and promote the curriculum when due.

        :param shortfall: Total reward of the episode minus the length of its target.
        """
        self.reward_shortfalls, promoted = record_shortfall(
            self.reward_shortfalls, shortfall, self.last, self.min_reward_threshold, self.min_length < self.MAX_MIN_LENGTH
        )
        self.min_length += int(promoted)

    def curriculum_settings(self) -> dict[str, Any]:
        """
        :return: The curriculum's settings and state: ``last``, ``min_reward_threshold``, ``min_length`` and
            ``max_min_length`` (what :class:`~sb3_pcl.envs.curriculum.SharedCurriculum` reads from each env).
        """
        return {
            "last": self.last,
            "min_reward_threshold": self.min_reward_threshold,
            "min_length": self.min_length,
            "max_min_length": self.MAX_MIN_LENGTH,
        }

    def set_min_length(self, min_length: int, external: bool = True) -> None:
        """
        Set the curriculum length, used from the next reset on, and clear the list of recent shortfalls.

        :param min_length: The new ``min_length`` (>= 1).
        :param external: ``True`` (default): an external driver owns the curriculum from now on, the env
            stops recording shortfalls and promoting on its own. ``False``: the env's own curriculum resumes.
        """
        if isinstance(min_length, bool) or not isinstance(min_length, (int, np.integer)) or min_length < 1:
            raise ValueError(f"min_length must be an integer >= 1, got {min_length!r}")
        self.min_length = int(min_length)
        self.reward_shortfalls = []
        self.external_curriculum = bool(external)

    def _draw_episode(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """
        Draw an input of length ``min_length + uniform{0, 1, 2}`` and compute its target.

        :param rng: The random generator to use.
        :return: The input and the target.
        """
        length = self.min_length + int(rng.integers(3))
        input_data = self.generate_input_data(length, rng)
        return input_data, self.target_from_input_data(input_data)

    def _phantom_generator(self) -> np.random.Generator:
        """
        :return: A generator independent of (and not advancing) ``self.np_random``, deterministic given its state.
        """
        bit_generator = self.np_random.bit_generator
        jumped = getattr(bit_generator, "jumped", None)
        if callable(jumped):
            return np.random.Generator(jumped())
        # Bit generators without ``jumped`` (e.g. SFC64): a copy keeps determinism and leaves the state untouched.
        return copy.deepcopy(self.np_random)

    # ------------------------------------------------------------------
    # Gymnasium API
    # ------------------------------------------------------------------
    def _get_info(self) -> dict[str, Any]:
        return {"min_length": self.min_length, "target_length": len(self.target)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.int64, dict[str, Any]]:
        """
        Record the previous episode for the curriculum (if it ended) and start a new one.

        :param seed: Seed of ``self.np_random`` (the only source of randomness of the environment).
        :param options: Unused.
        :return: The first observation and the info dict (``min_length``, ``target_length``).
        """
        super().reset(seed=seed)
        if self.external_curriculum:
            pass  # an external driver records the episodes and sets min_length
        elif self.episode_total_reward is None:
            # gym's constructor drew an episode that was never played: its shortfall is -len(target).
            _, phantom_target = self._draw_episode(self._phantom_generator())
            self._record_shortfall(-float(len(phantom_target)))
        elif self.episode_ended:
            # Only episodes that ended count; one interrupted by this reset is not recorded (unlike gym).
            self._record_shortfall(self.episode_total_reward - len(self.target))

        self.input_data, self.target = self._draw_episode(self.np_random)
        self.written = []
        self.time = 0
        self.write_head_position = 0
        self.episode_total_reward = 0.0
        self.episode_ended = False
        self.last_action = None
        self.last_reward = 0.0
        self._reset_read_head()
        return np.int64(self._observe()), self._get_info()

    def _validate_action(self, action: Any) -> tuple[int, int, int]:
        """
        :param action: A (move, write, symbol) triple.
        :return: The action as three Python ints.
        :raises ValueError: When the action is not in the action space.
        """
        array = np.asarray(action)
        valid = array.shape == (3,) and array.dtype.kind in "iub"
        if not valid and array.shape == (3,) and array.dtype.kind == "f":
            valid = bool(np.all(np.isfinite(array)) and np.all(array == np.round(array)))
        if valid:
            # Plain Python comparisons: this runs once per env step (hundreds of envs per batch)
            move, write, symbol = (int(value) for value in array.tolist())
            n_moves, n_writes, n_symbols = self._action_bounds
            valid = 0 <= move < n_moves and 0 <= write < n_writes and 0 <= symbol < n_symbols
        if not valid:
            raise ValueError(f"Invalid action {action!r}: not in the action space {self.action_space}")
        return move, write, symbol

    def step(self, action: np.ndarray) -> tuple[np.int64, float, bool, bool, dict[str, Any]]:
        """
        Apply a (move, write?, symbol) action.

        :param action: The action, in ``MultiDiscrete([len(MOVEMENTS), 2, base])``.
        :return: observation, reward, terminated, truncated (always ``False``), info (``min_length``,
            ``target_length``, plus ``shortfall``, total reward - len(target), on the step that ends the episode).
        """
        if self.episode_total_reward is None:
            raise RuntimeError("Call reset() before step()")
        move, write, symbol = self._validate_action(action)
        self.last_action = (move, write, symbol)

        self.time += 1
        writing = write == 1
        position = self.write_head_position
        # As in gym, writing past the end of the target (only possible after the episode ended) is wrong.
        correct = writing and position < len(self.target) and symbol == int(self.target[position])
        complete, over_time = position + 1 >= len(self.target), self.time > self.time_limit
        step_reward, step_end = self.step_outcome(
            np.bool_(writing), np.bool_(correct), np.bool_(complete), np.bool_(over_time)
        )
        reward, terminated = float(step_reward), bool(step_end)
        if writing:
            self.written.append(symbol)
            self.write_head_position += 1
        self._move(move)

        self.last_reward = reward
        self.episode_total_reward += reward
        info = self._get_info()
        if terminated:
            self.episode_ended = True
            info["shortfall"] = self.episode_total_reward - len(self.target)
        return np.int64(self._observe()), reward, terminated, False, info

    def _symbol_str(self, symbol: int) -> str:
        return self.charmap[symbol] if 0 <= symbol <= self.base else "?"

    def _render_text(self) -> str:
        header = f"Total length of input instance: {self.input_width}, step: {self.time}"
        lines = [header, "=" * len(header), *self.render_observation()]
        lines.append("Output Tape         : " + "".join(self._symbol_str(symbol) for symbol in self.written))
        lines.append("Targets             : " + "".join(self._symbol_str(int(symbol)) for symbol in self.target))
        if self.last_action is not None:
            move, write, symbol = self.last_action
            lines.append(f"Current reward      : {self.last_reward:.3f}")
            lines.append(f"Cumulative reward   : {self.episode_total_reward or 0.0:.3f}")
            lines.append(
                f"Action              : (move: {self.MOVEMENTS[move]}, write: {bool(write)}, "
                f"prediction: {self._symbol_str(symbol)!r})"
            )
            if write == 1:
                position = len(self.written) - 1
                correct = position < len(self.target) and symbol == int(self.target[position])
                lines.append(f"Last write          : {'correct' if correct else 'wrong'}")
        return "\n".join(lines) + "\n"

    def render(self) -> str | None:
        """
        :return: With ``render_mode="ansi"``, a text picture of the input with the read head (in brackets),
            the output written so far and the target; ``None`` without a render mode.
        """
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; create the environment with render_mode='ansi'.")
            return None
        return self._render_text()
