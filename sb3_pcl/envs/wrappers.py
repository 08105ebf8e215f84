"""Wrappers for the algorithmic tasks."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["CombinedActionWrapper"]


class CombinedActionWrapper(gym.ActionWrapper[Any, np.int64, np.ndarray]):
    """
    Expose a ``MultiDiscrete(nvec)`` action space as a single ``Discrete(prod(nvec))`` one.

    This is the "combined actions" encoding of the original PCL/UREX code. The encoding is mixed-radix
    with the **first component least significant**::

        index = a[0] + nvec[0] * (a[1] + nvec[1] * (a[2] + ...))

    so for the algorithmic tasks ``index = move + moves * (write + 2 * symbol)``.

    :param env: Environment with a one-dimensional ``MultiDiscrete`` action space (``start`` must be 0).
    """

    def __init__(self, env: gym.Env[Any, np.ndarray]) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, spaces.MultiDiscrete) or space.nvec.ndim != 1:
            raise TypeError(f"CombinedActionWrapper needs a one-dimensional MultiDiscrete action space, got {space}")
        if np.any(space.start != 0):
            raise ValueError(f"CombinedActionWrapper needs a MultiDiscrete space starting at 0, got start={space.start}")
        self.nvec = space.nvec.astype(np.int64)
        # radices[i] = prod(nvec[:i]): weight of component i in the combined index.
        self.radices = np.concatenate([[1], np.cumprod(self.nvec)[:-1]]).astype(np.int64)
        self.n_combined = int(np.prod(self.nvec))
        self.action_space = spaces.Discrete(self.n_combined)

    def decode(self, action: int | np.integer) -> np.ndarray:
        """
        Map a combined index back to the ``MultiDiscrete`` action.

        :param action: The combined index in ``[0, prod(nvec))``.
        :return: The action components, as an int64 array.
        :raises ValueError: When the index is out of range.
        """
        array = np.asarray(action)
        if array.shape != () or array.dtype.kind not in "iu" or not 0 <= int(array) < self.n_combined:
            raise ValueError(f"Invalid action {action!r}: not in the action space {self.action_space}")
        return (int(array) // self.radices) % self.nvec

    def encode(self, *components: int | np.integer) -> int:
        """
        Inverse of :meth:`decode`: ``encode(move, write, symbol)`` for the algorithmic tasks.

        :param components: One value per ``MultiDiscrete`` component, in order.
        :return: The combined index.
        :raises ValueError: When the components are not a valid ``MultiDiscrete`` action.
        """
        array = np.asarray(components)
        if array.shape != self.nvec.shape or array.dtype.kind not in "iu" or np.any(array < 0) or np.any(array >= self.nvec):
            raise ValueError(f"Invalid action components {components!r} for MultiDiscrete({self.nvec.tolist()})")
        return int(np.dot(array.astype(np.int64), self.radices))

    def encode_batch(self, actions: np.ndarray) -> np.ndarray:
        """
        Vectorised :meth:`encode`, e.g. to convert expert action sequences.

        :param actions: Array of shape ``(..., len(nvec))`` of ``MultiDiscrete`` actions.
        :return: The combined indices, of shape ``actions.shape[:-1]``.
        :raises ValueError: When an action is out of range.
        """
        array = np.asarray(actions)
        if array.ndim < 1 or array.shape[-1] != len(self.nvec) or array.dtype.kind not in "iu":
            raise ValueError(f"Expected an integer array of shape (..., {len(self.nvec)}), got shape {array.shape}")
        if np.any(array < 0) or np.any(array >= self.nvec):
            raise ValueError(f"Actions out of range for MultiDiscrete({self.nvec.tolist()})")
        return array.astype(np.int64) @ self.radices

    def action(self, action: np.int64 | int) -> np.ndarray:
        """
        :param action: The combined index.
        :return: The ``MultiDiscrete`` action passed to the wrapped environment.
        """
        return self.decode(action)
