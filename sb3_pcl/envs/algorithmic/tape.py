"""The tape layout (``TapeAlgorithmicEnv``) and the tasks that read a tape: ``Copy``, ``DuplicatedInput``,
``RepeatCopy`` and ``Reverse``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sb3_pcl.envs.algorithmic.base import AlgorithmicEnv

__all__ = [
    "CopyEnv",
    "DuplicatedInputEnv",
    "RepeatCopyEnv",
    "ReverseEnv",
    "TapeAlgorithmicEnv",
    "duplicated_input_data",
    "duplicated_input_target",
]


def duplicated_input_data(symbols: Sequence[int] | np.ndarray, duplication: int = 2) -> np.ndarray:
    """
    Build the input tape of ``DuplicatedInput``: every symbol written ``duplication`` times in a row.

    :param symbols: The distinct symbols, in order.
    :param duplication: How many times each symbol is repeated.
    :return: The input tape, of length ``len(symbols) * duplication``.
    """
    return np.repeat(np.asarray(symbols, dtype=np.int64), duplication)


def duplicated_input_target(input_data: Sequence[int] | np.ndarray, duplication: int = 2) -> np.ndarray:
    """
    Target of ``DuplicatedInput``: every ``duplication``-th symbol of the input, starting with the first.

    :param input_data: The input tape.
    :param duplication: How many times each symbol is repeated on the input tape.
    :return: The target sequence.
    """
    return np.asarray(input_data, dtype=np.int64)[::duplication].copy()


class TapeAlgorithmicEnv(AlgorithmicEnv):
    """
    Algorithmic task whose input is a 1-D tape; the read head moves left (0) or right (1) and starts at 0.
    Time limit: ``len(input) + len(target) + 4``.

    The other arguments are those of :class:`AlgorithmicEnv`.
    """

    MOVEMENTS = ("left", "right")
    MOVE_DELTAS = ((-1, 0), (1, 0))
    LEFT: ClassVar[int] = 0
    RIGHT: ClassVar[int] = 1

    read_head_position: int

    def generate_input_data(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """
        :param size: The tape length.
        :param rng: The random generator to use.
        :return: ``size`` symbols drawn uniformly in ``[0, base)``.
        """
        return rng.integers(self.base, size=size).astype(np.int64)

    @property
    def input_width(self) -> int:
        """Length of the input tape."""
        return len(self.input_data)

    @property
    def time_limit(self) -> int:
        """``len(input) + len(target) + 4``."""
        return len(self.input_data) + len(self.target) + 4

    def _reset_read_head(self) -> None:
        self.read_head_position = 0

    @property
    def input_rows(self) -> int:
        """1: a tape is a grid of one row."""
        return 1

    def input_grid(self) -> np.ndarray:
        """:return: The tape as a ``(len(tape), 1)`` array."""
        return np.asarray(self.input_data, dtype=np.int64).reshape(-1, 1)

    @property
    def read_head_xy(self) -> tuple[int, int]:
        """``(position on the tape, 0)``; settable."""
        return self.read_head_position, 0

    @read_head_xy.setter
    def read_head_xy(self, xy: tuple[int, int]) -> None:
        self.read_head_position = int(xy[0])

    def _move(self, move: int) -> None:
        self.read_head_position += self.MOVE_DELTAS[move][0]

    def _symbol_at(self, position: int) -> int:
        if 0 <= position < len(self.input_data):
            return int(self.input_data[position])
        return self.base

    def _observe(self) -> int:
        return self._symbol_at(self.read_head_position)

    def render_observation(self) -> list[str]:
        """:return: One line showing the tape with the read head in brackets."""
        head = self.read_head_position
        start, stop = min(-2, head), max(self.input_width + 2, head + 1)
        cells = []
        for position in range(start, stop):
            symbol = self._symbol_str(self._symbol_at(position))
            cells.append(f"[{symbol}]" if position == head else f" {symbol} ")
        return ["Observation Tape    : " + "".join(cells)]


class CopyEnv(TapeAlgorithmicEnv):
    """
    Copy the input tape to the output tape (gym ``Copy-v0``: base 5, letters, reward threshold 25).

    The arguments are those of :class:`TapeAlgorithmicEnv`, with this task's defaults.
    """

    DEFAULT_BASE = 5
    DEFAULT_CHARS = True

    def target_from_input_data(self, input_data: np.ndarray) -> np.ndarray:
        """
        :param input_data: The input tape.
        :return: A copy of the input tape.
        """
        return np.asarray(input_data, dtype=np.int64).copy()


class DuplicatedInputEnv(TapeAlgorithmicEnv):
    """
    The input holds every symbol twice in a row; write each symbol once (gym ``DuplicatedInput-v0``:
    base 5, letters, reward threshold 9). For a curriculum length ``n`` the input has
    ``max(n, duplication) // duplication`` distinct symbols. As in gym, when the target has a single
    symbol an episode reset before any write has shortfall -1, which passes the default -1.0 promotion
    threshold (this includes the unplayed episode recorded at the first reset).

    :param duplication: How many times each symbol is repeated on the input tape.
    :param kwargs: the other arguments are those of :class:`TapeAlgorithmicEnv`.
    """

    DEFAULT_BASE = 5
    DEFAULT_CHARS = True

    def __init__(self, duplication: int = 2, **kwargs: Any) -> None:
        if duplication < 1:
            raise ValueError(f"duplication must be >= 1, got {duplication}")
        self.duplication = int(duplication)
        super().__init__(**kwargs)

    def generate_input_data(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """
        :param size: The curriculum length ``n`` (raised to ``duplication`` when smaller).
        :param rng: The random generator to use.
        :return: ``max(size, duplication) // duplication`` symbols, each repeated ``duplication`` times.
        """
        size = max(size, self.duplication)
        symbols = rng.integers(self.base, size=size // self.duplication)
        return duplicated_input_data(symbols, self.duplication)

    def target_from_input_data(self, input_data: np.ndarray) -> np.ndarray:
        """
        :param input_data: The input tape.
        :return: Every ``duplication``-th symbol of the input.
        """
        return duplicated_input_target(input_data, self.duplication)


class RepeatCopyEnv(TapeAlgorithmicEnv):
    """
    Write the input, then the input reversed, then the input again (gym ``RepeatCopy-v0``: base 5,
    letters, ``last=50``, promotion threshold -0.1, reward threshold 75).

    The arguments are those of :class:`TapeAlgorithmicEnv`, with this task's defaults.
    """

    DEFAULT_BASE = 5
    DEFAULT_CHARS = True
    DEFAULT_LAST = 50
    DEFAULT_MIN_REWARD_THRESHOLD = -0.1

    def target_from_input_data(self, input_data: np.ndarray) -> np.ndarray:
        """
        :param input_data: The input tape ``x``.
        :return: ``x + reversed(x) + x``.
        """
        data = np.asarray(input_data, dtype=np.int64)
        return np.concatenate([data, data[::-1], data])


class ReverseEnv(TapeAlgorithmicEnv):
    """
    Write the input tape reversed, without end marker (gym ``Reverse-v0``: base 2, letters,
    starting length 1, ``last=50``, promotion threshold -0.1, reward threshold 25).

    The arguments are those of :class:`TapeAlgorithmicEnv`, with this task's defaults.
    """

    DEFAULT_BASE = 2
    DEFAULT_CHARS = True
    DEFAULT_STARTING_MIN_LENGTH = 1
    DEFAULT_LAST = 50
    DEFAULT_MIN_REWARD_THRESHOLD = -0.1

    def target_from_input_data(self, input_data: np.ndarray) -> np.ndarray:
        """
        :param input_data: The input tape.
        :return: The input tape reversed.
        """
        return np.asarray(input_data, dtype=np.int64)[::-1].copy()
