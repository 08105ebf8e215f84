"""The stored path and the batches sampled from a :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`."""

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Self

import numpy as np
import torch as th

EVICTION_STRATEGIES = ("fifo", "rand", "rank")
PRIORITY_MODES = ("step", "return")
#: what :meth:`PathReplayBuffer.add` tells the user to check when it refuses a value
STORAGE_HINT = (
    "Check the environment and its wrappers: the replay stores rewards and actions as float32 and observations "
    "in the observation space's dtype."
)
#: the same for :meth:`PathReplayBuffer.add_path` (demonstrations)
PATH_HINT = (
    "Check the path (demonstration): the replay stores rewards and actions as float32 and observations "
    "in the observation space's dtype."
)


@dataclass(frozen=True, eq=False)
class PathBatch:
    """
    A padded, time-major batch of ``B`` path segments of at most ``T`` steps.

    For a ``Dict`` observation space, ``observations`` and ``final_observations`` are dicts of such tensors, one per key
    (as SB3's ``DictReplayBuffer`` samples them). A buffer subclass whose batches carry more per segment returns a
    subclass of this class that adds fields.
    """

    observations: th.Tensor
    """``(T, B, *obs_shape)``; padding rows repeat a valid observation."""
    actions: th.Tensor
    """``(T, B, action_dim)`` actions as sampled by the policy (not clipped to the env bounds)."""
    rewards: th.Tensor
    """``(T, B)``, zero on padding."""
    mask: th.Tensor
    """``(T, B)``, 1 on valid steps (a prefix of each column)."""
    final_observations: th.Tensor
    """``(B, *obs_shape)`` the state reached after the last valid step."""
    terminated: th.Tensor
    """``(B,)`` 1 when that state is terminal (no bootstrapping), 0 when the segment was cut."""
    at_path_start: th.Tensor
    """``(B,)`` 1 when the segment starts at the first step of its path."""
    path_ids: np.ndarray
    """``(B,)`` identifiers of the sampled paths."""

    def _replace(self, **changes: Any) -> Self:
        """
        :param changes: new values of some fields
        :return: a copy of the batch with these fields changed (``dataclasses.replace``, named as a ``NamedTuple``'s)
        """
        return replace(self, **changes)


@dataclass
class Path:
    """
    Bookkeeping of one stored path (its transitions live in the buffer's arrays).

    The path's slots are kept in a list with a head offset, so that dropping the oldest step of a path longer than the
    buffer (:meth:`pop_head`) is amortised O(1); :attr:`slots` returns them as a new list.
    """

    path_id: int
    env_idx: int
    first_step: int = 0
    last_step: int = 0
    total_return: float = 0.0
    done: bool = False
    terminated: bool = False
    is_seed: bool = False
    dropped_head: bool = False
    final_obs: np.ndarray | None = None
    _slots: list[int] = field(default_factory=list, repr=False)
    _head: int = field(default=0, repr=False)

    #: a dropped head is compacted away once it is this long and at least half of the list
    MIN_HEAD_TO_COMPACT: ClassVar[int] = 64

    def __len__(self) -> int:
        return len(self._slots) - self._head

    def __setstate__(self, state: dict[str, Any]) -> None:
        """
        Restore a pickled path; one pickled before the head offset existed held its slots in ``slots``.

        :param state: the pickled attributes
        """
        if "slots" in state:
            state = {**state, "_slots": list(state["slots"]), "_head": 0}
            del state["slots"]
        self.__dict__.update(state)

    @property
    def slots(self) -> list[int]:
        """The buffer slots of the path's transitions, oldest first (a copy: change the path through the buffer)."""
        return self._slots[self._head :]

    def slot_range(self, start: int, end: int) -> list[int]:
        """
        :param start: first step (``0 <= start <= end``)
        :param end: end step, excluded (``<= len(self)``)
        :return: the slots of steps ``start .. end - 1``
        """
        return self._slots[self._head + start : self._head + end]

    def slot_at(self, step: int) -> int:
        """
        :param step: a step of the path (``0 <= step < len(self)``)
        :return: its slot
        """
        return self._slots[self._head + step]

    def append_slot(self, slot: int) -> None:
        """
        :param slot: the slot of a new last step
        """
        self._slots.append(slot)

    def pop_head(self) -> int:
        """
        Drop the oldest step (amortised O(1): the list is compacted only when the dropped head is most of it).

        :return: its slot
        """
        slot = self._slots[self._head]
        self._head += 1
        if self._head >= self.MIN_HEAD_TO_COMPACT and 2 * self._head >= len(self._slots):
            del self._slots[: self._head]
            self._head = 0
        return slot
