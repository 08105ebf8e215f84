"""The grid layout (``GridAlgorithmicEnv``) and the tasks that read a grid: ``ReversedAddition`` and
``ReversedAddition3``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sb3_pcl.envs.algorithmic.base import AlgorithmicEnv

__all__ = ["GridAlgorithmicEnv", "ReversedAddition3Env", "ReversedAdditionEnv", "reversed_addition_target"]


def reversed_addition_target(columns: Sequence[Sequence[int]] | np.ndarray, base: int = 3) -> np.ndarray:
    """
    Target of the reversed addition tasks: the digit-wise sum of the rows, least significant digit first.

    The input grid is given column by column, column 0 holding the least significant digit of every
    row. The target holds, from column 0 on, ``(sum of the column + carry) % base``, followed by the
    final carry when it is not zero.

    Example (base 3): columns ``[[2, 2], [1, 0]]`` give ``[1, 2]``; ``[[1, 2], [1, 0], [2, 2]]`` give
    ``[0, 2, 1, 1]``.

    :param columns: The digits, one sequence per column (all of the same length, the number of rows).
    :param base: The base of the numbers.
    :return: The target digits.
    """
    carry = 0
    digits: list[int] = []
    for column in columns:
        total = int(sum(int(digit) for digit in column)) + carry
        digits.append(total % base)
        carry = total // base
    if carry > 0:
        digits.append(carry)
    return np.asarray(digits, dtype=np.int64)


class GridAlgorithmicEnv(AlgorithmicEnv):
    """
    Algorithmic task whose input is a grid of ``rows`` rows, stored column by column
    (``input_data[x][y]``); the read head starts at ``(0, 0)`` and moves left (0, x-1), right (1, x+1),
    up (2, y-1) or down (3, y+1). Time limit: ``2 * columns + 4``.

    :param rows: Number of rows of the grid (task default when ``None``).
    :param kwargs: the other arguments are those of :class:`AlgorithmicEnv`.
    """

    MOVEMENTS = ("left", "right", "up", "down")
    MOVE_DELTAS = ((-1, 0), (1, 0), (0, -1), (0, 1))
    LEFT: ClassVar[int] = 0
    RIGHT: ClassVar[int] = 1
    UP: ClassVar[int] = 2
    DOWN: ClassVar[int] = 3
    DEFAULT_ROWS: ClassVar[int] = 2

    read_head_position: tuple[int, int]

    def __init__(self, rows: int | None = None, **kwargs: Any) -> None:
        self.rows = int(self.DEFAULT_ROWS if rows is None else rows)
        if self.rows < 1:
            raise ValueError(f"rows must be >= 1, got {self.rows}")
        super().__init__(**kwargs)
        self.input_data = np.zeros((0, self.rows), dtype=np.int64)

    def generate_input_data(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """
        :param size: The number of columns.
        :param rng: The random generator to use.
        :return: A ``(size, rows)`` array of symbols drawn uniformly in ``[0, base)``.
        """
        return rng.integers(self.base, size=(size, self.rows)).astype(np.int64)

    @property
    def input_width(self) -> int:
        """Number of columns of the input grid."""
        return len(self.input_data)

    @property
    def time_limit(self) -> int:
        """``2 * columns + 4`` (gym's quirk: the number of columns, not the target length)."""
        return 2 * self.input_width + 4

    def _reset_read_head(self) -> None:
        self.read_head_position = (0, 0)

    @property
    def input_rows(self) -> int:
        """Number of rows of the grid."""
        return self.rows

    def input_grid(self) -> np.ndarray:
        """:return: The ``(columns, rows)`` grid."""
        return np.asarray(self.input_data, dtype=np.int64).reshape(-1, self.rows)

    @property
    def read_head_xy(self) -> tuple[int, int]:
        """``(column, row)``; settable."""
        return self.read_head_position

    @read_head_xy.setter
    def read_head_xy(self, xy: tuple[int, int]) -> None:
        self.read_head_position = (int(xy[0]), int(xy[1]))

    def _symbol_at(self, x: int, y: int) -> int:
        if 0 <= x < self.input_width and 0 <= y < self.rows:
            return int(self.input_data[x][y])
        return self.base

    def _observe(self) -> int:
        return self._symbol_at(*self.read_head_position)

    def render_observation(self) -> list[str]:
        """:return: One line per grid row (plus a margin) with the read head in brackets."""
        head_x, head_y = self.read_head_position
        x_start, x_stop = min(-2, head_x), max(self.input_width + 2, head_x + 1)
        y_start, y_stop = min(-1, head_y), max(self.rows + 1, head_y + 1)
        lines = []
        for y in range(y_start, y_stop):
            cells = []
            for x in range(x_start, x_stop):
                symbol = self._symbol_str(self._symbol_at(x, y))
                cells.append(f"[{symbol}]" if (x, y) == (head_x, head_y) else f" {symbol} ")
            prefix = "Observation Grid    : " if y == y_start else " " * 22
            lines.append(prefix + "".join(cells))
        return lines


class ReversedAdditionEnv(GridAlgorithmicEnv):
    """
    Add the rows of a grid of base-3 numbers written least significant digit first, one column per
    digit (gym ``ReversedAddition-v0``: 2 rows, base 3, digits, reward threshold 25). The target is
    given by :func:`reversed_addition_target`. Time limit ``2 * columns + 4``.

    The arguments are those of :class:`GridAlgorithmicEnv`, with this task's defaults.
    """

    DEFAULT_BASE = 3
    DEFAULT_CHARS = False
    DEFAULT_ROWS = 2

    def target_from_input_data(self, input_data: np.ndarray) -> np.ndarray:
        """
        :param input_data: The ``(columns, rows)`` grid.
        :return: The column sums with carry, least significant digit first, plus a non-zero final carry.
        """
        return reversed_addition_target(input_data, self.base)


class ReversedAddition3Env(ReversedAdditionEnv):
    """
    :class:`ReversedAdditionEnv` with 3 rows (gym ``ReversedAddition3-v0``, reward threshold 25).

    The time limit stays ``2 * columns + 4`` while reading every digit takes ``3 * columns`` steps, so
    (as in gym) no policy can avoid the time-limit penalty once ``columns + (final carry > 0) > 4``.

    The arguments are those of :class:`GridAlgorithmicEnv`, with this task's defaults.
    """

    DEFAULT_ROWS = 3
