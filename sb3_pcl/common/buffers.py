"""
Episode-aware replay for path-consistency learning.

Transitions are stored once, in flat arrays of ``buffer_size`` slots allocated on the first
``add``. Each environment of the VecEnv writes into its current *path* (an episode, or the
part of it collected so far); a path is a list of slots, so paths of different envs may
interleave in storage. Sampling returns padded, time-major segments of whole paths (or of
windows of at most ``max_segment_length`` steps) together with the information needed to
bootstrap at their far end.

When the storage is full, whole finished paths are evicted (``fifo``, ``rand`` or ``rank``).
Seeded paths (expert demonstrations) are never evicted and always carry the top priority.
Paths are sampled with probability ``p_i ~ exp(alpha * (prio_i - max prio))`` where the
priority is the recency of the path (``priority="step"``: the buffer step of its last
transition) or its return (``priority="return"``).

For recurrent policies (``replay_from_start=True``) every batch also carries a
:class:`PathHistory`: each segment's path from its first stored step up to the segment's final
state, so that the policy's recurrent state at the segment can be rebuilt exactly, for the current
parameters, by replaying the path from the start of its episode.
"""

import heapq
import io
import itertools
import json
import os
import pathlib
import pickle
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.preprocessing import get_action_dim, get_obs_shape
from stable_baselines3.common.save_util import open_path
from stable_baselines3.common.utils import get_device
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl.common.dict_obs import ObsDict, obs_layout, obs_member, zeros_obs
from sb3_pcl.common.npz_files import ArrayHeader, check_header, npz_member_names, read_npz_headers
from sb3_pcl.common.validation import check_storable

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


class PathHistory(NamedTuple):
    """
    Each segment's path replayed from its first stored step, for recurrent policies (which take no ``Dict``
    observations).

    Column ``b`` holds the path's steps ``0 .. end_b - 1`` (the segment is the last ``L_b`` of them) and
    then the segment's final observation, padded after that; the segment's step ``t`` is row
    ``offsets[b] + t`` and its final state is row ``offsets[b] + L_b``.
    """

    observations: th.Tensor
    """``(H, B, *obs_shape)``; padding rows repeat the final observation."""
    actions: th.Tensor
    """``(H, B, action_dim)``; the action of the final-observation row and of padding rows is zero."""
    offsets: th.Tensor
    """``(B,)`` (long) row of the segment's first step: how many steps of its path precede it."""


class PathBatch(NamedTuple):
    """
    A padded, time-major batch of ``B`` path segments of at most ``T`` steps.

    For a ``Dict`` observation space, ``observations`` and ``final_observations`` are dicts of such tensors, one per key
    (as SB3's ``DictReplayBuffer`` samples them).
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
    history: PathHistory | None = None
    """The segments' paths from their first step (only from a buffer with ``replay_from_start=True``)."""


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


class PathIndex:
    """
    The per-path numbers that sampling and eviction need, in parallel arrays (one row per path).

    Rows are appended in creation order, that is in increasing path id (the order of
    :attr:`PathReplayBuffer.paths`), so that selecting rows with a mask keeps the ids sorted. A removed
    path leaves a dead row until more than half of the rows are dead, when the table is compacted
    (amortised O(1) per removal). The buffer writes a path's row whenever the path changes
    (:meth:`PathReplayBuffer._sync`); queries are then vectorised over the rows instead of looping
    over the ``Path`` objects.

    The rows of the *evictable* paths (finished, not seeded) are also counted in a Fenwick tree, so that the
    ``k``-th of them in id order (the oldest for ``fifo``, a uniform one for ``rand``) is found in O(log n)
    instead of scanning every row at each eviction.

    :param capacity: initial number of rows (grows by doubling)
    """

    COLUMNS = ("ids", "env_idx", "length", "last_step", "total_return", "live", "done", "is_seed", "has_final", "evictable")
    """The names of the row arrays."""
    MIN_DEAD_TO_COMPACT = 32
    """Fewer dead rows than this are never compacted."""

    def __init__(self, capacity: int = 64):
        capacity = max(int(capacity), 1)
        self.n_rows = 0
        self.n_dead = 0
        self.row_of: dict[int, int] = {}
        self.ids = np.zeros(capacity, dtype=np.int64)
        self.env_idx = np.zeros(capacity, dtype=np.int64)
        self.length = np.zeros(capacity, dtype=np.int64)
        self.last_step = np.zeros(capacity, dtype=np.int64)
        self.total_return = np.zeros(capacity, dtype=np.float64)
        self.live = np.zeros(capacity, dtype=bool)
        self.done = np.zeros(capacity, dtype=bool)
        self.is_seed = np.zeros(capacity, dtype=bool)
        self.has_final = np.zeros(capacity, dtype=bool)
        self.evictable = np.zeros(capacity, dtype=bool)
        self.n_evictable = 0
        self._build_tree()

    def _build_tree(self) -> None:
        """Recompute the Fenwick tree of :attr:`evictable` (O(capacity), after a growth or a compaction)."""
        counts = np.concatenate([[0], np.cumsum(self.evictable, dtype=np.int64)])
        positions = np.arange(1, len(self.evictable) + 1)
        # node i (1-based) counts the rows i - lowbit(i) .. i - 1
        self._tree: list[int] = [0, *(counts[positions] - counts[positions - (positions & -positions)]).tolist()]
        self.n_evictable = int(counts[-1])

    def _tree_add(self, row: int, delta: int) -> None:
        node = row + 1
        tree = self._tree
        while node < len(tree):
            tree[node] += delta
            node += node & -node
        self.n_evictable += delta

    def evictable_row(self, k: int) -> int:
        """
        :param k: ``0 <= k < n_evictable``
        :return: the row of the ``k``-th evictable path in increasing id (O(log n))
        """
        if not 0 <= k < self.n_evictable:
            raise IndexError(f"evictable path {k} of {self.n_evictable}")
        tree = self._tree
        node, remaining = 0, k
        step = 1 << (len(tree) - 1).bit_length()
        while step:
            nxt = node + step
            if nxt < len(tree) and tree[nxt] <= remaining:
                node, remaining = nxt, remaining - tree[nxt]
            step >>= 1
        return node

    def append(self, path_id: int, env_idx: int, is_seed: bool) -> None:
        """
        Add the row of a new (empty, running) path.

        :param path_id: its id, larger than every id already in the table
        :param env_idx: the env writing it (-1 for :meth:`PathReplayBuffer.add_path`)
        :param is_seed: whether it is a seeded path
        """
        if self.n_rows > 0 and path_id <= int(self.ids[self.n_rows - 1]):
            raise ValueError(f"path ids must increase: {path_id} after {int(self.ids[self.n_rows - 1])}")
        if self.n_rows == len(self.ids):
            for name in self.COLUMNS:
                column = getattr(self, name)
                grown = np.zeros(2 * len(column), dtype=column.dtype)
                grown[: self.n_rows] = column[: self.n_rows]
                setattr(self, name, grown)
            self._build_tree()
        row = self.n_rows
        self.ids[row] = path_id
        self.env_idx[row] = env_idx
        self.length[row] = 0
        self.last_step[row] = 0
        self.total_return[row] = 0.0
        self.live[row] = True
        self.done[row] = False
        self.is_seed[row] = is_seed
        self.has_final[row] = False
        self.evictable[row] = False
        self.row_of[path_id] = row
        self.n_rows += 1

    def update(self, path_id: int, length: int, last_step: int, total_return: float, done: bool, has_final: bool) -> bool:
        """
        Overwrite the changing numbers of a path's row.

        :param path_id: the path
        :param length: its number of stored transitions
        :param last_step: the buffer step of its last transition
        :param total_return: its total reward
        :param done: whether it is finished (a finished path stays finished)
        :param has_final: whether its final observation is known
        :return: whether the path has just become evictable (finished, not seeded)
        """
        row = self.row_of[path_id]
        self.length[row] = length
        self.last_step[row] = last_step
        self.total_return[row] = total_return
        self.done[row] = done
        self.has_final[row] = has_final
        if done and not self.is_seed[row] and not self.evictable[row]:
            self.evictable[row] = True
            self._tree_add(row, 1)
            return True
        return False

    def remove(self, path_id: int) -> None:
        """
        Mark a path's row dead, and compact the table when most rows are dead.

        :param path_id: the removed path
        """
        row = self.row_of.pop(path_id)
        self.live[row] = False
        if self.evictable[row]:
            self.evictable[row] = False
            self._tree_add(row, -1)
        self.n_dead += 1
        if self.n_dead >= self.MIN_DEAD_TO_COMPACT and 2 * self.n_dead > self.n_rows:
            self.compact()

    def compact(self) -> None:
        """Drop the dead rows (keeping the others in order)."""
        keep = np.flatnonzero(self.live[: self.n_rows])
        for name in self.COLUMNS:
            column = getattr(self, name)
            column[: len(keep)] = column[keep]
            column[len(keep) : self.n_rows] = 0
        self.n_rows = len(keep)
        self.n_dead = 0
        self.row_of = dict(zip(self.ids[: self.n_rows].tolist(), range(self.n_rows), strict=True))
        self._build_tree()

    def live_rows(self) -> np.ndarray:
        """:return: the rows of the stored paths, in increasing path id"""
        return np.flatnonzero(self.live[: self.n_rows])

    def rows_of(self, path_ids: np.ndarray) -> np.ndarray:
        """
        :param path_ids: ids of stored paths (any order, repeats allowed)
        :return: their rows
        :raises KeyError: when an id is not a stored path
        """
        path_ids = np.asarray(path_ids, dtype=np.int64).reshape(-1)
        ids = self.ids[: self.n_rows]
        rows = np.searchsorted(ids, path_ids)
        found = rows < self.n_rows
        found[found] = (ids[rows[found]] == path_ids[found]) & self.live[rows[found]]
        if not found.all():
            raise KeyError(int(path_ids[np.argmin(found)]))
        return rows


class PathReplayBuffer(BaseBuffer):
    """
    Replay buffer of paths (episodes) for PCL-style algorithms.

    **Storage and SB3's ReplayBuffer attributes.** SB3's ``ReplayBuffer`` is a circular buffer of
    ``(buffer_size, n_envs, ...)`` arrays written at a cursor ``pos``; tools read ``observations[:pos]``,
    ``next_observations``, ``dones`` or ``timeouts`` from it. This buffer is not circular: it evicts whole paths
    (or the oldest steps of a running one), so its transitions sit in ``buffer_size`` *slots* reused in any order,
    and each stored :class:`Path` lists its slots. Its attributes therefore do not all keep SB3's meaning:

    - ``observations`` ``(buffer_size, *obs_shape)`` (for a ``Dict`` space an :class:`~sb3_pcl.common.dict_obs.ObsDict`
      of such arrays, one per key, in the sub-space's dtype, as SB3's ``DictReplayBuffer``), ``actions``
      ``(buffer_size, action_dim)`` (float32, as sampled by the policy) and ``rewards`` ``(buffer_size,)`` (float32)
      are slot-indexed, with no ``n_envs`` axis, and are ``None`` until the first ``add``. Only the slots listed in
      some ``paths[i].slots`` hold stored transitions.
    - ``full`` keeps SB3's relation to ``size()``: every slot holds a transition (``size() == buffer_size``); read-only.
      Unlike SB3's, it can become ``False`` again, when evicting a whole path frees several slots.
    - ``pos``, ``next_observations``, ``dones`` and ``timeouts`` do not exist (there is no cursor, and a next
      observation is the path's next stored one or its final state): reading them raises an ``AttributeError`` that
      says so. Use :meth:`transitions` instead: every stored transition in path order, with the next observations,
      ``dones`` and ``timeouts`` in SB3's meaning, or ``paths`` / :meth:`sample` directly.

    **Saving.** ``pickle`` works (it is how SB3 saves replay buffers), but :meth:`save_npz` / :meth:`load_npz` write
    and read a file that cannot run code when loaded (arrays and JSON metadata in an ``.npz``, read with
    ``allow_pickle=False``); :meth:`sb3_pcl.PCL.save_replay_buffer` uses them.

    :param buffer_size: capacity in transitions
    :param observation_space: observation space
    :param action_space: action space
    :param device: PyTorch device of the sampled tensors
    :param n_envs: number of parallel environments
    :param optimize_memory_usage: not supported (kept for SB3's constructor signature)
    :param alpha: sharpness of the prioritised sampling; 0 samples paths uniformly
    :param priority: ``"step"`` (recency) or ``"return"`` (total path reward)
    :param eviction: ``"fifo"`` (oldest path first), ``"rand"`` or ``"rank"`` (lowest priority first)
    :param max_segment_length: sampled segments are at most this long (``None``: whole paths)
    :param handle_timeout_termination: treat ``TimeLimit.truncated`` episode ends as cut
        paths that bootstrap, as SB3's replay buffers do
    :param replay_from_start: batches also carry each segment's path from its first stored step
        (:attr:`PathBatch.history`), so that a recurrent policy can rebuild its state at the segment
        exactly by replaying the path from the start of the episode
    :param distinct_paths: draw a batch's paths without replacement, as the original code's replay did: a batch
        then holds ``min(batch_size, paths with a non-zero probability)`` different paths. With whole paths and a
        sharp recency priority this makes a batch the most recent episodes instead of a few of them drawn many times
    """

    #: the settings a saved buffer records (the constructor's keyword arguments after ``n_envs``)
    SETTINGS = (
        "alpha",
        "priority",
        "eviction",
        "max_segment_length",
        "handle_timeout_termination",
        "replay_from_start",
        "distinct_paths",
    )

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        alpha: float = 0.0,
        priority: str = "step",
        eviction: str = "fifo",
        max_segment_length: int | None = None,
        handle_timeout_termination: bool = True,
        replay_from_start: bool = False,
        distinct_paths: bool = False,
    ):
        # Not BaseBuffer.__init__: it also sets SB3's circular-buffer cursor (pos, full), which this buffer has not.
        self.buffer_size = buffer_size
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_shape = get_obs_shape(observation_space)  # type: ignore[assignment]
        #: the stored observation arrays, ``{None: (shape, dtype)}`` or one per key of a ``Dict`` space
        self.obs_layout = obs_layout(observation_space)
        self.action_dim = get_action_dim(action_space)
        self.device = get_device(device)
        self.n_envs = n_envs
        if optimize_memory_usage:
            raise ValueError("optimize_memory_usage is not supported by PathReplayBuffer")
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if priority not in PRIORITY_MODES:
            raise ValueError(f"priority must be one of {PRIORITY_MODES}, got {priority!r}")
        if eviction not in EVICTION_STRATEGIES:
            raise ValueError(f"eviction must be one of {EVICTION_STRATEGIES}, got {eviction!r}")
        if max_segment_length is not None and max_segment_length < 1:
            raise ValueError(f"max_segment_length must be >= 1 or None, got {max_segment_length}")
        self.alpha = alpha
        self.priority = priority
        self.eviction = eviction
        self.max_segment_length = max_segment_length
        self.handle_timeout_termination = handle_timeout_termination
        self.replay_from_start = replay_from_start
        self.distinct_paths = distinct_paths
        self._clear()

    def _clear(self) -> None:
        """Empty storage and path bookkeeping (allocated on first use); the settings are kept."""
        n_envs = self.n_envs
        self.observations: np.ndarray | None = None
        self.actions: np.ndarray | None = None
        self.rewards: np.ndarray | None = None
        #: slots freed by evictions, reused last-in first-out; the slots from ``next_fresh_slot`` on were never used
        self.free_slots: list[int] = []
        self.next_fresh_slot = 0
        self.n_stored = 0

        self.paths: dict[int, Path] = {}
        self.open_paths: list[int | None] = [None] * n_envs
        self.last_next_obs: list[np.ndarray | None] = [None] * n_envs
        self.next_path_id = 0
        self.add_count = 0
        self._index = PathIndex()
        self._rank_heap: list[tuple[float, int]] = []

    def __setstate__(self, state: dict[str, Any]) -> None:
        """
        Restore a pickled buffer.

        The :class:`PathIndex` (and the eviction order) is always rebuilt from the paths, whichever version pickled the
        buffer; one pickled before ``distinct_paths`` existed samples with replacement, as it did.

        :param state: the pickled attributes
        """
        state = {key: value for key, value in state.items() if key not in ("pos", "full")}  # an SB3 cursor, not ours
        self.__dict__.update(state)
        self.__dict__.setdefault("distinct_paths", False)
        self.__dict__.setdefault("next_fresh_slot", self.buffer_size)  # older pickles list every free slot
        self.__dict__.setdefault("obs_layout", obs_layout(self.observation_space))  # pickled before Dict observations
        self._rebuild_index()

    def _rebuild_index(self) -> None:
        """Recompute the :class:`PathIndex` and the ``rank`` eviction order from :attr:`paths`."""
        self._index = PathIndex(capacity=len(self.paths))
        self._rank_heap = []
        for path_id in sorted(self.paths):
            path = self.paths[path_id]
            self._index.append(path.path_id, path.env_idx, path.is_seed)
            self._sync(path)

    def _sync(self, path: Path) -> None:
        """
        Copy a stored path's numbers to its :class:`PathIndex` row; called after every change of the path.

        :param path: the path
        """
        became_evictable = self._index.update(
            path.path_id, len(path), path.last_step, path.total_return, path.done, self._final_obs(path) is not None
        )
        if became_evictable and self.eviction == "rank":  # a finished path's priority never changes
            heapq.heappush(self._rank_heap, (self._raw_priority(path), path.path_id))

    # ------------------------------------------------------------------ SB3's ReplayBuffer attributes
    @property
    def full(self) -> bool:
        """Whether every slot holds a transition (``size() == buffer_size``, as in SB3); read-only."""
        return self.n_stored >= self.buffer_size

    @full.setter
    def full(self, value: bool) -> None:
        raise AttributeError("PathReplayBuffer.full is read-only: it says whether every slot holds a transition")

    @staticmethod
    def _no_sb3_attribute(name: str, instead: str) -> AttributeError:
        """
        :param name: an attribute of SB3's ``ReplayBuffer`` this buffer has not
        :param instead: what to use instead
        :return: the error to raise, saying why
        """
        return AttributeError(
            f"PathReplayBuffer has no {name!r}: it is not SB3's circular ReplayBuffer (its transitions sit in slots "
            f"reused in any order, listed per path in paths[i].slots); {instead} (see the class docstring)"
        )

    @property
    def pos(self) -> int:
        """Not available: there is no write cursor (raises ``AttributeError``)."""
        raise self._no_sb3_attribute("pos", "use size() for the number of stored transitions")

    @pos.setter
    def pos(self, value: int) -> None:
        raise self._no_sb3_attribute("pos", "use size() for the number of stored transitions")

    @property
    def next_observations(self) -> np.ndarray:
        """Not available as an array (raises ``AttributeError``): see :meth:`transitions`."""
        raise self._no_sb3_attribute("next_observations", "use transitions()['next_observations']")

    @property
    def dones(self) -> np.ndarray:
        """Not available as an array (raises ``AttributeError``): see :meth:`transitions`."""
        raise self._no_sb3_attribute("dones", "use transitions()['dones'] or paths[i].done")

    @property
    def timeouts(self) -> np.ndarray:
        """Not available as an array (raises ``AttributeError``): see :meth:`transitions`."""
        raise self._no_sb3_attribute("timeouts", "use transitions()['timeouts'] or paths[i].terminated")

    def transitions(self) -> dict[str, np.ndarray]:
        """
        Every stored transition, path after path (increasing path id) and oldest step first, as flat arrays.

        The keys keep the meaning of SB3's ``ReplayBuffer`` attributes, without its ``n_envs`` axis: ``observations``
        ``(N, *obs_shape)``, ``next_observations`` (the path's next stored observation, or its final state; for the
        last step of a running path the latest next observation of its env), ``actions`` ``(N, action_dim)``,
        ``rewards`` ``(N,)`` (for a Dict space the observations are dicts of such arrays, one per key), ``dones``
        (the path ends after this step: an episode end, or a cut path), ``timeouts`` (it ends there without
        terminating: a time limit or a cut, so it bootstraps), plus ``path_ids`` and ``env_idx`` (-1 for
        :meth:`add_path`). A running path whose env has no next observation yet is left out.

        :return: the arrays, copies
        """
        slots: list[int] = []
        next_obs: list[np.ndarray] = []
        dones: list[bool] = []
        timeouts: list[bool] = []
        path_ids: list[int] = []
        env_idx: list[int] = []
        for path in self.paths.values():
            final = self._final_obs(path)
            if len(path) == 0 or final is None:
                continue
            assert self.observations is not None
            path_slots = path.slots
            slots.extend(path_slots)
            final_row = self._obs_zeros((1,))
            final_row[0] = final
            next_obs.extend([self.observations[path_slots[1:]], final_row])
            ends = [False] * len(path)
            ends[-1] = path.done
            dones.extend(ends)
            timeouts.extend([False] * (len(path) - 1) + [path.done and not path.terminated])
            path_ids.extend([path.path_id] * len(path))
            env_idx.extend([path.env_idx] * len(path))
        index = np.asarray(slots, dtype=np.int64)
        empty_obs = self._obs_zeros((0,))
        if next_obs and isinstance(empty_obs, ObsDict):
            next_observations: Any = ObsDict({key: np.concatenate([obs[key] for obs in next_obs]) for key in empty_obs})
        else:
            next_observations = np.concatenate(next_obs) if next_obs else empty_obs
        return {
            "observations": self.observations[index] if self.observations is not None else empty_obs,
            "next_observations": next_observations,
            "actions": self.actions[index] if self.actions is not None else np.zeros((0, self.action_dim), np.float32),
            "rewards": self.rewards[index] if self.rewards is not None else np.zeros(0, np.float32),
            "dones": np.asarray(dones, dtype=bool),
            "timeouts": np.asarray(timeouts, dtype=bool),
            "path_ids": np.asarray(path_ids, dtype=np.int64),
            "env_idx": np.asarray(env_idx, dtype=np.int64),
        }

    # ------------------------------------------------------------------ storage
    def _obs_dtype(self) -> np.dtype:
        """:return: the dtype observations are stored in (the observation space's)"""
        return np.dtype(self.observation_space.dtype if self.observation_space.dtype is not None else np.float32)

    def _obs_zeros(self, lead: tuple[int, ...]) -> np.ndarray:
        """:return: zero observations ``(*lead, *obs_shape)``: one array, or an :class:`ObsDict` for a Dict space"""
        return zeros_obs(self.observation_space, lead)

    def _checked_obs(self, obs: Any, lead: tuple[int, ...], what: str, index_name: str, hint: str) -> np.ndarray:
        """
        :param obs: observations ``(*lead, *obs_shape)`` (a dict of arrays for a Dict space)
        :param lead: their leading dimensions
        :param what: what they are, for the message
        :param index_name: what the first index is, for the message
        :param hint: what to check, for the message
        :return: the observations in their storage dtype (an :class:`ObsDict` for a Dict space)
        :raises ValueError: for a value not storable (:func:`~sb3_pcl.common.validation.check_storable`), a missing key
        """
        if None in self.obs_layout:
            return check_storable(np.asarray(obs).reshape((*lead, *self.obs_shape)), self._obs_dtype(), what, index_name, hint)
        if not isinstance(obs, dict) or set(obs) != set(self.obs_layout):
            keys = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"{what}s must be a dict with the keys {sorted(map(str, self.obs_layout))} (got {keys}). {hint}")
        return ObsDict(  # type: ignore[return-value]
            {
                key: check_storable(np.asarray(obs[key]).reshape((*lead, *shape)), dtype, f"{what} {key!r}", index_name, hint)
                for key, (shape, dtype) in self.obs_layout.items()
            }
        )

    def _obs_tensor(self, obs: np.ndarray, env: VecNormalize | None) -> Any:
        """:return: the observations normalised by ``env`` as tensors (a dict of them for a Dict space)"""
        normalized = self._normalize_obs(obs, env)
        if isinstance(normalized, dict):
            return {key: self.to_torch(np.asarray(value)) for key, value in normalized.items()}
        return self.to_torch(np.asarray(normalized))

    def _allocate(self) -> None:
        self.observations = self._obs_zeros((self.buffer_size,))
        self.actions = np.zeros((self.buffer_size, self.action_dim), dtype=np.float32)
        self.rewards = np.zeros((self.buffer_size,), dtype=np.float32)
        # np.zeros maps pages lazily, and the free slots are a counter plus the evicted ones: memory grows with use
        self.free_slots = []
        self.next_fresh_slot = 0

    def size(self) -> int:
        """:return: number of stored transitions"""
        return self.n_stored

    @property
    def n_paths(self) -> int:
        """:return: number of stored paths (finished or running)"""
        return len(self.paths)

    @property
    def n_seeded_paths(self) -> int:
        """:return: number of seeded paths (``add_path(..., seed=True)``, never evicted)"""
        index = self._index
        return int(np.count_nonzero(index.live[: index.n_rows] & index.is_seed[: index.n_rows]))

    @property
    def n_seeded_transitions(self) -> int:
        """:return: number of transitions held by the seeded paths"""
        index = self._index
        return int(index.length[: index.n_rows][index.live[: index.n_rows] & index.is_seed[: index.n_rows]].sum())

    def reset(self) -> None:
        """Remove every path, seeded ones included; every setting (sampling mode, priorities, ...) is kept."""
        self._clear()

    def _new_path(self, env_idx: int, is_seed: bool = False) -> Path:
        path = Path(path_id=self.next_path_id, env_idx=env_idx, first_step=self.add_count, is_seed=is_seed)
        self.paths[path.path_id] = path
        self._index.append(path.path_id, env_idx, is_seed)
        self.next_path_id += 1
        return path

    def _evictable_rows(self) -> np.ndarray:
        """:return: the :class:`PathIndex` rows of the finished, not seeded paths, in increasing path id"""
        index = self._index
        n_rows = index.n_rows
        return np.flatnonzero(index.live[:n_rows] & index.done[:n_rows] & ~index.is_seed[:n_rows])

    def _raw_priorities(self, rows: np.ndarray) -> np.ndarray:
        """
        :param rows: :class:`PathIndex` rows
        :return: the priorities of their paths, recency (``"step"``) or return (seeded paths not raised to the top)
        """
        index = self._index
        return (index.last_step[rows] if self.priority == "step" else index.total_return[rows]).astype(np.float64)

    def _raw_priority(self, path: Path) -> float:
        """:return: :meth:`_raw_priorities` of one path"""
        return float(path.last_step if self.priority == "step" else path.total_return)

    def _take_slot(self, writer: Path) -> int:
        if not self.free_slots and self.next_fresh_slot < self.buffer_size:  # the slots in order, 0 first
            self.next_fresh_slot += 1
            return self.next_fresh_slot - 1
        while not self.free_slots:
            self._make_room(writer)
        return self.free_slots.pop()

    def _make_room(self, writer: Path) -> None:
        """
        Free at least one slot: evict a finished path (O(log n)), else drop the oldest step of a running one (O(1)).

        :param writer: the path that needs the slot
        """
        index = self._index
        if index.n_evictable > 0:
            if self.eviction == "fifo":  # the oldest finished path
                path_id = int(index.ids[index.evictable_row(0)])
            elif self.eviction == "rand":
                path_id = int(index.ids[index.evictable_row(np.random.randint(index.n_evictable))])
            else:  # the lowest priority, the oldest path among equals
                path_id = self._pop_lowest_priority()
            self._remove_path(self.paths[path_id])
            return
        self._drop_running_head(writer)

    def _pop_lowest_priority(self) -> int:
        """:return: the evictable path of lowest priority (the oldest among equals), taken off the ``rank`` order"""
        while True:
            if not self._rank_heap:  # only when the eviction setting was changed after paths finished
                rows = self._evictable_rows()
                priorities = self._raw_priorities(rows).tolist()
                self._rank_heap = list(zip(priorities, self._index.ids[rows].tolist(), strict=True))
                heapq.heapify(self._rank_heap)
            _, path_id = heapq.heappop(self._rank_heap)
            row = self._index.row_of.get(path_id)
            if row is not None and self._index.evictable[row]:
                return path_id

    def _drop_running_head(self, writer: Path) -> None:
        """
        Only running (or seeded) paths are stored: drop the oldest transition of the longest running path.

        The running paths are the envs' open paths and the path :meth:`add_path` is writing, so this does not look at
        the finished ones.

        :param writer: the path that needs the slot (preferred among equally long paths)
        """
        candidates = {path_id: self.paths.get(path_id) for path_id in self.open_paths if path_id is not None}
        candidates[writer.path_id] = writer
        running: list[Path] = []
        for path_id in sorted(candidates):  # in increasing id, as the paths are stored
            path = candidates[path_id]
            if path is not None and not path.done and not path.is_seed and len(path) > 0:
                running.append(path)
        if not running:
            raise ValueError(
                f"buffer_size={self.buffer_size} is too small: the seeded paths fill the whole buffer "
                "and nothing can be evicted"
            )
        self._drop_head(max(running, key=lambda p: (len(p), p is writer)))

    def _drop_head(self, path: Path) -> None:
        """
        Free the slot of a running path's oldest step (amortised O(1)).

        :param path: the path
        """
        self.free_slots.append(path.pop_head())
        path.first_step += 1
        path.dropped_head = True
        self.n_stored -= 1
        self._sync(path)

    def _remove_path(self, path: Path) -> None:
        self.free_slots.extend(path.slots)
        self.n_stored -= len(path)
        del self.paths[path.path_id]
        self._index.remove(path.path_id)

    # ------------------------------------------------------------------ writing
    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """
        Store one vectorised transition (one step of every env), as SB3's ``_store_transition`` calls it.

        Rewards, observations, next observations and actions are checked in their storage dtype first
        (:func:`~sb3_pcl.common.validation.check_storable`): a NaN, an inf or a value that overflows it (a float64
        reward of 1e39 from a ``SubprocVecEnv``) is refused with a ``ValueError`` and nothing is stored.

        :param obs: observations ``(n_envs, *obs_shape)``
        :param next_obs: next observations, the terminal ones for envs that finished
        :param action: actions as sampled by the policy ``(n_envs, *action_shape)``
        :param reward: rewards ``(n_envs,)``
        :param done: episode ends ``(n_envs,)``
        :param infos: per-env infos (``TimeLimit.truncated`` marks time-limit ends)
        """
        reward = np.asarray(reward, dtype=np.float64).reshape(self.n_envs)
        stored_reward = check_storable(reward, np.float32, "reward", "env index", STORAGE_HINT)
        obs = self._checked_obs(obs, (self.n_envs,), "observation", "env index", STORAGE_HINT)
        next_obs = self._checked_obs(next_obs, (self.n_envs,), "next observation", "env index", STORAGE_HINT)
        copy_obs: Any = ObsDict.copy if isinstance(next_obs, ObsDict) else np.array
        action = check_storable(
            np.asarray(action).reshape((self.n_envs, self.action_dim)), np.float32, "action", "env index", STORAGE_HINT
        )
        done = np.asarray(done).reshape(self.n_envs)
        if self.observations is None:
            self._allocate()
        assert self.observations is not None and self.actions is not None and self.rewards is not None
        self.add_count += 1
        for env_idx in range(self.n_envs):
            path_id = self.open_paths[env_idx]
            if path_id is None or path_id not in self.paths:
                path = self._new_path(env_idx)
                self.open_paths[env_idx] = path.path_id
            else:
                path = self.paths[path_id]
            slot = self._take_slot(path)
            self.observations[slot] = obs[env_idx]
            self.actions[slot] = action[env_idx]
            self.rewards[slot] = stored_reward[env_idx]
            path.append_slot(slot)
            path.last_step = self.add_count
            path.total_return += float(reward[env_idx])
            self.n_stored += 1
            self.last_next_obs[env_idx] = copy_obs(next_obs[env_idx])
            if done[env_idx]:
                truncated = bool(infos[env_idx].get("TimeLimit.truncated", False)) if env_idx < len(infos) else False
                path.done = True
                path.terminated = not (truncated and self.handle_timeout_termination)
                path.final_obs = copy_obs(next_obs[env_idx])
                self.open_paths[env_idx] = None
            self._sync(path)

    def close_open_paths(self) -> None:
        """
        End the running path of every env as cut (it bootstraps from its latest next observation).

        Called when the envs are reset outside of an episode end (a new ``learn``, ``set_env``),
        so that the next episode does not continue the previous one.
        """
        for env_idx, path_id in enumerate(self.open_paths):
            path = self.paths.get(path_id) if path_id is not None else None
            if path is not None:
                path.done = True
                path.terminated = False
                path.final_obs = self.last_next_obs[env_idx]
                self._sync(path)
            self.open_paths[env_idx] = None

    def add_path(
        self,
        observations: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: bool = True,
        seed: bool = False,
    ) -> int:
        """
        Store a whole path at once, e.g. an expert demonstration.

        The rewards, observations and actions are checked in their storage dtype first, as in :meth:`add`.

        :param observations: ``(T + 1, *obs_shape)``: the visited states and the final one (for a Dict space a dict
            of such arrays, one per key)
        :param actions: ``(T, *action_shape)`` actions
        :param rewards: ``(T,)`` rewards
        :param terminated: whether the final state is terminal
        :param seed: seeded paths are never evicted and are sampled with the top priority
        :return: the new path's id
        """
        rewards = np.asarray(rewards, dtype=np.float64).reshape(-1)
        n_steps = len(rewards)
        if n_steps < 1:
            raise ValueError("a path needs at least one transition")
        if None not in self.obs_layout and not (isinstance(observations, dict) and set(observations) == set(self.obs_layout)):
            self._checked_obs(observations, (n_steps + 1,), "observation", "step", PATH_HINT)  # raises, naming the keys
        for key, (shape, _) in self.obs_layout.items():
            given = np.shape(observations if key is None else observations[key])  # type: ignore[call-overload]
            if given != (n_steps + 1, *shape):
                what = "observations" if key is None else f"observations[{key!r}]"
                raise ValueError(f"{what} must have shape {(n_steps + 1, *shape)} (T + 1 states), got {given}")
        stored_rewards = check_storable(rewards, np.float32, "reward", "step", PATH_HINT)
        observations = self._checked_obs(observations, (n_steps + 1,), "observation", "step", PATH_HINT)
        actions = check_storable(
            np.asarray(actions).reshape((n_steps, self.action_dim)), np.float32, "action", "step", PATH_HINT
        )
        if self.observations is None:
            self._allocate()
        assert self.observations is not None and self.actions is not None and self.rewards is not None
        self.add_count += 1
        path = self._new_path(env_idx=-1, is_seed=seed)
        for step in range(n_steps):
            slot = self._take_slot(path)
            self.observations[slot] = observations[step]
            self.actions[slot] = actions[step]
            self.rewards[slot] = stored_rewards[step]
            path.append_slot(slot)
            self.n_stored += 1
        path.last_step = self.add_count
        path.total_return = float(rewards.sum())
        path.done = True
        path.terminated = bool(terminated)
        path.final_obs = observations[-1].copy()
        self._sync(path)
        return path.path_id

    # ------------------------------------------------------------------ sampling
    def priorities(self, path_ids: np.ndarray | None = None) -> np.ndarray:
        """
        :param path_ids: the paths (default: all stored, in insertion order)
        :return: the priority of each path; seeded paths get the top priority of the others
        """
        return self._priorities_of_rows(self._rows(path_ids))

    def _rows(self, path_ids: np.ndarray | None) -> np.ndarray:
        """
        :param path_ids: stored paths, or ``None`` for all of them in increasing id
        :return: their :class:`PathIndex` rows
        """
        return self._index.live_rows() if path_ids is None else self._index.rows_of(path_ids)

    def _priorities_of_rows(self, rows: np.ndarray) -> np.ndarray:
        """
        :param rows: :class:`PathIndex` rows
        :return: :meth:`priorities` of their paths
        """
        prio = self._raw_priorities(rows)
        seeded = self._index.is_seed[rows]
        if seeded.any():
            prio[seeded] = prio[~seeded].max() if (~seeded).any() else 0.0
        return prio

    def sampling_distribution(self, path_ids: np.ndarray | None = None, max_segment_length: int | None = None) -> np.ndarray:
        """
        Probability of drawing each path: ``n_windows * exp(alpha * (prio - max prio))``, normalised.

        With segments of at most ``T = max_segment_length`` steps, a path of length ``L`` has
        ``L + T - 1`` possible windows (see :meth:`sample`); it is weighted by ``(L + T - 1) / T``
        (1 when whole paths are sampled). With ``alpha = 0`` every stored transition, the first and
        the last of an episode included, is then equally likely to be trained on.

        :param path_ids: the paths (default: all stored, in insertion order)
        :param max_segment_length: segment length (default: the buffer's)
        :return: probabilities
        """
        max_len = max_segment_length if max_segment_length is not None else self.max_segment_length
        return self._distribution_of_rows(self._rows(path_ids), max_len)

    def _distribution_of_rows(self, rows: np.ndarray, max_len: int | None) -> np.ndarray:
        """
        :param rows: :class:`PathIndex` rows
        :param max_len: segment length (``None``: whole paths)
        :return: :meth:`sampling_distribution` of their paths
        """
        prio = self._priorities_of_rows(rows)
        weights = np.exp(self.alpha * (prio - prio.max()))
        if max_len is not None:
            lengths = self._index.length[rows].astype(np.float64)
            weights = weights * (lengths + max_len - 1) / max_len
        return weights / weights.sum()

    def _sampleable_rows(self) -> np.ndarray:
        """:return: the :class:`PathIndex` rows of the non-empty paths whose final state is known, in increasing id"""
        index = self._index
        n_rows = index.n_rows
        return np.flatnonzero(index.live[:n_rows] & (index.length[:n_rows] > 0) & index.has_final[:n_rows])

    def _final_obs(self, path: Path) -> np.ndarray | None:
        return path.final_obs if path.done else self.last_next_obs[path.env_idx]

    def sample(  # type: ignore[override]
        self, batch_size: int, env: VecNormalize | None = None, max_segment_length: int | None = None
    ) -> PathBatch:
        """
        Sample ``batch_size`` path segments: paths drawn with replacement (:meth:`sampling_distribution`), then a window.
        With ``distinct_paths`` the paths are drawn without replacement, so the batch may hold fewer segments.

        :param batch_size: number of segments
        :param env: VecNormalize wrapper whose statistics normalise observations and rewards
        :param max_segment_length: override of the buffer's ``max_segment_length``
        :return: a padded time-major batch
        """
        rows = self._sampleable_rows()
        if len(rows) == 0:
            raise ValueError("cannot sample from an empty PathReplayBuffer")
        ids = self._index.ids[rows]
        max_len = max_segment_length if max_segment_length is not None else self.max_segment_length
        probs = self._distribution_of_rows(rows, max_len)
        if self.distinct_paths:
            size = min(batch_size, int(np.count_nonzero(probs)))
            chosen = np.random.choice(len(ids), size=size, replace=False, p=probs)
        else:
            chosen = np.random.choice(len(ids), size=batch_size, replace=True, p=probs)
        return self._gather(self._draw_windows([self.paths[int(path_id)] for path_id in ids[chosen]], max_len), env)

    @staticmethod
    def _draw_windows(paths: list[Path], max_len: int | None) -> list[tuple[Path, int, int]]:
        """
        :param paths: the sampled paths
        :param max_len: the segment length (``None``: the whole paths)
        :return: a random window ``(path, start, end)`` of at most ``max_len`` steps of each path, all starts drawn in
            one call. A start is uniform in ``[-(max_len - 1), length - 1]``, clipped to the path: every transition is
            covered by exactly ``max_len`` of these windows, the first and last ones included (a window drawn inside
            ``[0, length - max_len]`` would rarely see the end). Paths of at most one step are taken whole.
        """
        if max_len is None:
            return [(path, 0, len(path)) for path in paths]
        lengths = np.array([len(path) for path in paths], dtype=np.int64)
        drawn = lengths > 1
        starts = np.zeros(len(paths), dtype=np.int64)
        if drawn.any():
            starts[drawn] = np.random.randint(-(max_len - 1), lengths[drawn])
        begin, end = np.maximum(starts, 0), np.minimum(lengths, starts + max_len)
        end[~drawn] = lengths[~drawn]
        return [(path, int(b), int(e)) for path, b, e in zip(paths, begin, end, strict=True)]

    def recent_segments(self, n_steps: int, env: VecNormalize | None = None) -> PathBatch | None:
        """
        The transitions of the last ``n_steps`` vectorised steps, one segment per (env, path) (the online batch).

        :param n_steps: how many of the latest ``add`` calls to cover
        :param env: VecNormalize wrapper for normalisation
        :return: the batch, or ``None`` when nothing recent is stored
        """
        first_step = self.add_count - n_steps + 1
        index = self._index
        n_rows = index.n_rows
        recent = (
            index.live[:n_rows]
            & (index.env_idx[:n_rows] >= 0)
            & (index.length[:n_rows] > 0)
            & (index.last_step[:n_rows] >= first_step)
            & index.has_final[:n_rows]
        )
        segments = []
        for path_id in index.ids[:n_rows][recent]:  # increasing path id, as ``self.paths``
            path = self.paths[int(path_id)]
            start = max(0, first_step - path.first_step)
            segments.append((path, start, len(path)))
        if not segments:
            return None
        return self._gather(segments, env)

    def _gather(self, segments: list[tuple[Path, int, int]], env: VecNormalize | None) -> PathBatch:
        assert self.observations is not None and self.actions is not None and self.rewards is not None
        n_segments = len(segments)
        horizon = max(end - start for _, start, end in segments)
        index = np.zeros((horizon, n_segments), dtype=np.int64)
        mask = np.zeros((horizon, n_segments), dtype=np.float32)
        final_obs = self._obs_zeros((n_segments,))
        terminated = np.zeros(n_segments, dtype=np.float32)
        at_start = np.zeros(n_segments, dtype=np.float32)
        for col, (path, start, end) in enumerate(segments):
            slots = path.slot_range(start, end)
            index[: len(slots), col] = slots
            index[len(slots) :, col] = slots[-1]
            mask[: len(slots), col] = 1.0
            if end < len(path):
                final_obs[col] = self.observations[path.slot_at(end)]
            else:
                final = self._final_obs(path)
                assert final is not None
                final_obs[col] = final
                terminated[col] = float(path.done and path.terminated)
            at_start[col] = float(start == 0 and not path.dropped_head)
        rewards = self._normalize_reward(self.rewards[index], env) * mask
        return PathBatch(
            observations=self._obs_tensor(self.observations[index], env),
            actions=self.to_torch(self.actions[index]),
            rewards=self.to_torch(rewards.astype(np.float32)),
            mask=self.to_torch(mask),
            final_observations=self._obs_tensor(final_obs, env),
            terminated=self.to_torch(terminated),
            at_path_start=self.to_torch(at_start),
            path_ids=np.array([path.path_id for path, _, _ in segments]),
            history=self._gather_history(segments, env) if getattr(self, "replay_from_start", False) else None,
        )

    def _gather_history(self, segments: list[tuple[Path, int, int]], env: VecNormalize | None) -> PathHistory:
        """
        The segments' paths from their first stored step to the segment's final state (see :class:`PathHistory`).

        :param segments: ``(path, start, end)`` of each column
        :param env: VecNormalize wrapper for normalisation
        :return: the time-major history of each column
        """
        assert self.observations is not None and self.actions is not None
        horizon = max(end for _, _, end in segments) + 1
        n_segments = len(segments)
        observations = self._obs_zeros((horizon, n_segments))
        actions = np.zeros((horizon, n_segments, self.action_dim), dtype=np.float32)
        offsets = np.zeros(n_segments, dtype=np.int64)
        for col, (path, start, end) in enumerate(segments):
            slots = path.slot_range(0, end)
            final = self.observations[path.slot_at(end)] if end < len(path) else self._final_obs(path)
            assert final is not None
            observations[:end, col] = self.observations[slots]
            observations[end:, col] = final
            actions[:end, col] = self.actions[slots]
            offsets[col] = start
        return PathHistory(
            observations=self._obs_tensor(observations, env),
            actions=self.to_torch(actions),
            offsets=th.as_tensor(offsets, device=self.device),
        )

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        raise NotImplementedError("PathReplayBuffer samples paths: use sample()")

    # ------------------------------------------------------------------ files
    def save_npz(self, file: str | os.PathLike[str] | IO[bytes]) -> None:
        """
        Write the buffer (data, paths, collection state, settings) to an ``.npz`` file that cannot run code when loaded.

        The file holds arrays only, with the scalars and settings as JSON in its ``metadata`` array; it is written at
        ``file`` exactly (no suffix is appended). :meth:`load_npz` restores a buffer that samples exactly as this one.

        :param file: a path, or a binary file open for writing
        """
        paths = list(self.paths.values())  # in increasing id
        final_obs = self._obs_zeros((len(paths),))
        for row, path in enumerate(paths):
            if path.final_obs is not None:
                final_obs[row] = path.final_obs
        last_next_obs = self._obs_zeros((self.n_envs,))
        for env_idx, next_obs in enumerate(self.last_next_obs):
            if next_obs is not None:
                last_next_obs[env_idx] = next_obs
        metadata = {
            "format": REPLAY_FILE_FORMAT,
            "version": REPLAY_FILE_VERSION,
            "class": type(self).__name__,
            "buffer_size": int(self.buffer_size),
            "n_envs": int(self.n_envs),
            **_obs_metadata(self.observation_space),
            "action_dim": int(self.action_dim),
            "settings": {name: getattr(self, name) for name in self.SETTINGS},
            "allocated": self.observations is not None,
            "next_path_id": int(self.next_path_id),
            "add_count": int(self.add_count),
            "next_fresh_slot": int(self.next_fresh_slot),
        }
        text = json.dumps(metadata, default=lambda value: value.item() if isinstance(value, np.generic) else str(value))
        arrays: dict[str, np.ndarray] = {
            "metadata": np.frombuffer(text.encode("utf-8"), dtype=np.uint8),
            "free_slots": np.asarray(self.free_slots, dtype=np.int64),
            "open_paths": np.asarray([-1 if pid is None else pid for pid in self.open_paths], dtype=np.int64),
            **_obs_members("last_next_obs", last_next_obs),
            "last_next_obs_known": np.asarray([obs is not None for obs in self.last_next_obs], dtype=bool),
            "path_slots": np.asarray([slot for path in paths for slot in path.slots], dtype=np.int64),
            **_obs_members("path_final_obs", final_obs),
        }
        for name, dtype in PATH_FIELDS.items():
            arrays[f"path_{name}"] = np.asarray([_path_field(path, name) for path in paths], dtype=dtype)
        if self.observations is not None and self.actions is not None and self.rewards is not None:
            arrays.update(_obs_members("observations", self.observations), actions=self.actions, rewards=self.rewards)
        pickled = sorted(name for name, array in arrays.items() if array.dtype.hasobject)
        if pickled:  # np.savez would pickle them; checked here, as older NumPy's savez has no allow_pickle argument
            raise ValueError(f"cannot save the replay as .npz: {pickled} hold Python objects, which would need pickling")
        if isinstance(file, (str, os.PathLike)):
            with open(file, "wb") as handle:
                np.savez(handle, **arrays)  # type: ignore[arg-type]
        else:
            np.savez(file, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load_npz(
        cls,
        file: str | os.PathLike[str] | IO[bytes],
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        name: str | None = None,
        max_buffer_size: int | None = None,
    ) -> "PathReplayBuffer":
        """
        Read a buffer written by :meth:`save_npz` (``allow_pickle=False``: the file cannot run code).

        Everything is checked before use, and sizes before anything is allocated: the file kind; the archive's members
        (unexpected ones are refused unread) and each array's header, whose declared size must match the archive's
        (:func:`~sb3_pcl.common.npz_files.read_npz_headers`); the metadata (format version, spaces, ``buffer_size`` at
        most ``max_buffer_size``, ``n_envs`` at most ``buffer_size``); every array's dtype and shape against the sizes
        these imply. Only then are the arrays read, and checked: that every slot belongs to exactly one path or is
        free, the paths' bookkeeping, and that the stored values are finite
        (:func:`~sb3_pcl.common.validation.check_storable`). A crafted file therefore cannot make the loader allocate
        more than a buffer of ``max_buffer_size`` transitions of the given spaces needs.

        :param file: a path, or a binary file open for reading
        :param observation_space: the observation space of the model that loads it
        :param action_space: its action space
        :param device: PyTorch device of the sampled tensors
        :param name: how to name the file in error messages (default: its path or name)
        :param max_buffer_size: the largest ``buffer_size`` accepted (``None``: no limit but the archive's sizes; a
            model's ``load_replay_buffer`` passes its own ``buffer_size``)
        :return: the buffer, sampling exactly as the saved one (same batches for the same NumPy random state)
        :raises ValueError: naming the file and the problem: a pickle, an empty, truncated or corrupt file, an ``.npz``
            of another kind, a newer format version, other spaces, or inconsistent contents
        """
        name = name if name is not None else replay_file_name(file)
        if isinstance(file, (str, os.PathLike)):
            with open(file, "rb") as handle:
                return cls.load_npz(handle, observation_space, action_space, device, name, max_buffer_size)
        kind = replay_file_kind(file)
        if kind != "npz":
            raise ValueError(_not_npz_message(name, kind))
        members = npz_member_names(file, name, REPLAY_FILE_KIND)
        if "metadata" not in members:
            hint = " (it looks like an episodes file: pass it to add_demonstrations)" if "lengths" in members else ""
            raise ValueError(
                f"{name} is an .npz file of another kind (arrays {sorted(members)}), not a PathReplayBuffer file{hint}"
            )
        allowed = replay_arrays(observation_space)
        # the observation arrays of another space pass this first check (headers only), so that the metadata's
        # check names both spaces
        other_obs = {member for member in members if member.split(".", 1)[0] in OBS_ARRAYS}
        headers = read_npz_headers(file, name, REPLAY_FILE_KIND, allowed | other_obs)
        check_header(headers, "metadata", np.uint8, (None,), name, REPLAY_FILE_KIND, max_rows=MAX_METADATA_BYTES)
        metadata = _replay_metadata(_read_npz_arrays(file, name, ["metadata"])["metadata"], name)
        _check_replay_headers(headers, metadata, observation_space, action_space, name, max_buffer_size)
        unexpected = sorted(set(headers) - allowed)
        if unexpected:
            raise ValueError(f"{name} is not a valid PathReplayBuffer file: unexpected arrays {unexpected} for its spaces")
        arrays = _read_npz_arrays(file, name, list(headers))
        return cls._from_arrays(arrays, metadata, observation_space, action_space, device, name)

    @classmethod
    def _from_arrays(
        cls,
        arrays: dict[str, np.ndarray],
        metadata: dict[str, Any],
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str,
        name: str,
    ) -> "PathReplayBuffer":
        """
        :param arrays: the arrays of a replay file
        :param metadata: its checked metadata (:func:`_replay_metadata`)
        :param observation_space: the loading model's observation space
        :param action_space: its action space
        :param device: PyTorch device
        :param name: the file's name, for the messages
        :return: the restored buffer
        :raises ValueError: naming the file and the first inconsistency found
        """

        def bad(problem: str) -> ValueError:
            return ValueError(f"{name} is not a valid PathReplayBuffer file: {problem}")

        # the spaces and sizes were checked against the file's headers (_check_replay_headers)
        layout = obs_layout(observation_space)
        action_dim = get_action_dim(action_space)
        try:
            buffer = cls(
                metadata["buffer_size"],
                observation_space,
                action_space,
                device=device,
                n_envs=metadata["n_envs"],
                **metadata["settings"],
            )
        except (TypeError, ValueError) as error:
            raise bad(f"invalid settings {metadata['settings']} ({error})") from None
        buffer_size, n_envs = buffer.buffer_size, buffer.n_envs

        def array(key: str, dtype: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
            if key not in arrays:
                raise bad(f"the array {key!r} is missing")
            value = arrays[key]
            if value.dtype != np.dtype(dtype) or (value.ndim != 1 if shape is None else value.shape != shape):
                expected = "1-d" if shape is None else f"shape {shape}"
                raise bad(
                    f"the array {key!r} has dtype {value.dtype} and shape {value.shape}, expected {np.dtype(dtype)} {expected}"
                )
            return value

        def storable(values: np.ndarray, dtype: Any, what: str, index_name: str) -> None:
            try:
                check_storable(values, dtype, what, index_name)
            except ValueError as error:
                raise bad(str(error)) from None

        def obs_array(key: str, lead: tuple[int, ...]) -> Any:
            if None in layout:
                shape, dtype = layout[None]
                return array(key, dtype, (*lead, *shape))
            return ObsDict(
                {sub: array(obs_member(key, sub), dtype, (*lead, *shape)) for sub, (shape, dtype) in layout.items()}
            )

        def obs_storable(values: Any, what: str, index_name: str) -> None:
            for sub, (_, dtype) in layout.items():
                storable(values if sub is None else values[sub], dtype, what if sub is None else f"{what} {sub!r}", index_name)

        path_ids = array("path_ids", np.int64)
        n_paths = len(path_ids)
        fields = {key: array(f"path_{key}", dtype, (n_paths,)) for key, dtype in PATH_FIELDS.items()}
        lengths = [int(n) for n in fields["lengths"].tolist()]
        if any(n < 0 for n in lengths):
            raise bad("a path has a negative length")
        n_stored = sum(lengths)
        slots = array("path_slots", np.int64, (n_stored,))
        free_slots = array("free_slots", np.int64)
        final_obs = obs_array("path_final_obs", (n_paths,))
        open_paths = array("open_paths", np.int64, (n_envs,))
        last_next_obs = obs_array("last_next_obs", (n_envs,))
        last_next_known = array("last_next_obs_known", bool, (n_envs,))
        next_path_id, add_count = metadata["next_path_id"], metadata["add_count"]
        # version 1 listed every free slot, the never used ones included
        next_fresh_slot = metadata.get("next_fresh_slot", buffer_size if metadata["allocated"] else 0)
        if not 0 <= next_fresh_slot <= buffer_size:
            raise bad(f"next_fresh_slot={next_fresh_slot} is outside [0, buffer_size={buffer_size}]")

        id_list = path_ids.tolist()
        if any(b <= a for a, b in itertools.pairwise(id_list)) or (n_paths and id_list[0] < 0):
            raise bad("the path ids must be >= 0 and increasing")
        if n_paths and id_list[-1] >= next_path_id:
            raise bad(f"a path id ({id_list[-1]}) is not below next_path_id ({next_path_id})")
        env_idx = fields["env_idx"]
        if np.any(env_idx < -1) or np.any(env_idx >= n_envs):
            raise bad(f"a path's env index is outside [-1, {n_envs})")
        for key in ("first_step", "last_step"):
            if np.any(fields[key] < 0) or np.any(fields[key] > add_count):
                raise bad(f"a path's {key} is outside [0, add_count={add_count}]")
        storable(fields["total_return"], np.float64, "path return", "path")
        obs_storable(final_obs[fields["has_final"]], "final observation", "path")
        obs_storable(last_next_obs[last_next_known], "last next observation", "env")

        if metadata["allocated"]:
            observations = obs_array("observations", (buffer_size,))
            actions = array("actions", np.float32, (buffer_size, action_dim))
            rewards = array("rewards", np.float32, (buffer_size,))
            obs_storable(observations, "observation", "slot")
            storable(actions, np.float32, "action", "slot")
            storable(rewards, np.float32, "reward", "slot")
            # the slots below next_fresh_slot are each held by one path or free (the others were never used)
            used_slots = np.concatenate([slots, free_slots])
            in_range = bool(np.all((used_slots >= 0) & (used_slots < next_fresh_slot)))
            if not in_range or len(np.unique(used_slots)) != len(used_slots) or len(used_slots) != next_fresh_slot:
                raise bad(
                    f"the paths' slots and the free slots must hold each of the {next_fresh_slot} used slots exactly once"
                )
            buffer.observations, buffer.actions, buffer.rewards = observations, actions, rewards
        elif n_paths or len(free_slots) or next_fresh_slot:
            raise bad("the storage is not allocated but paths or free slots are listed")

        open_ids = open_paths.tolist()
        row_of = {path_id: row for row, path_id in enumerate(id_list)}
        for env, path_id in enumerate(open_ids):
            if path_id == -1:
                continue
            row = row_of.get(path_id)
            if row is None or fields["done"][row] or env_idx[row] != env:
                raise bad(f"env {env}'s open path {path_id} is not a running path of that env")
        running = {id_list[row] for row in np.flatnonzero(~fields["done"]).tolist()}
        if not running <= set(open_ids):
            raise bad(f"the running paths {sorted(running - set(open_ids))} are no env's open path")

        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).tolist()
        slot_list = slots.tolist()
        for row, path_id in enumerate(id_list):
            path = Path(
                path_id=path_id,
                env_idx=int(env_idx[row]),
                first_step=int(fields["first_step"][row]),
                last_step=int(fields["last_step"][row]),
                total_return=float(fields["total_return"][row]),
                done=bool(fields["done"][row]),
                terminated=bool(fields["terminated"][row]),
                is_seed=bool(fields["is_seed"][row]),
                dropped_head=bool(fields["dropped_head"][row]),
                final_obs=final_obs[row].copy() if fields["has_final"][row] else None,
                _slots=slot_list[offsets[row] : offsets[row + 1]],
            )
            buffer.paths[path_id] = path
        buffer.free_slots = free_slots.tolist()
        buffer.next_fresh_slot = next_fresh_slot
        buffer.n_stored = n_stored
        buffer.open_paths = [None if path_id == -1 else path_id for path_id in open_ids]
        buffer.last_next_obs = [last_next_obs[env].copy() if last_next_known[env] else None for env in range(n_envs)]
        buffer.next_path_id, buffer.add_count = next_path_id, add_count
        buffer._rebuild_index()
        return buffer


# ---------------------------------------------------------------------------------------------- replay files
#: the ``format`` entry of a replay file's metadata
REPLAY_FILE_FORMAT = "sb3_pcl.PathReplayBuffer"
#: the version :meth:`PathReplayBuffer.save_npz` writes (and the newest :meth:`PathReplayBuffer.load_npz` reads)
REPLAY_FILE_VERSION = 2
#: what a replay file is, in messages
REPLAY_FILE_KIND = "PathReplayBuffer"
#: the largest metadata (JSON) array a replay file may hold, in bytes
MAX_METADATA_BYTES = 1 << 20
#: the per-path arrays of a replay file (``path_<name>``), with their dtype
PATH_FIELDS: dict[str, Any] = {
    "ids": np.int64,
    "env_idx": np.int64,
    "first_step": np.int64,
    "last_step": np.int64,
    "total_return": np.float64,
    "done": bool,
    "terminated": bool,
    "is_seed": bool,
    "dropped_head": bool,
    "has_final": bool,
    "lengths": np.int64,
}
_FILE_MAGIC = {b"PK\x03\x04": "npz", b"PK\x05\x06": "npz", b"\x93NUMPY": "npy", b"\x80": "pickle"}


def _path_field(path: Path, name: str) -> Any:
    """:return: the value of a :data:`PATH_FIELDS` entry for ``path``"""
    if name == "ids":
        return path.path_id
    if name == "has_final":
        return path.final_obs is not None
    if name == "lengths":
        return len(path)
    return getattr(path, name)


def replay_file_name(file: Any) -> str:
    """
    :param file: a path or a file object
    :return: how to name it in a message
    """
    if isinstance(file, (str, os.PathLike)):
        return repr(os.fspath(file))
    return repr(getattr(file, "name", f"<{type(file).__name__}>"))


def replay_file_kind(file: IO[bytes]) -> str:
    """
    Tell a replay file's kind from its first bytes, without moving the file's position.

    :param file: a binary file open for reading (seekable)
    :return: ``"npz"`` (a zip archive), ``"npy"``, ``"pickle"`` (SB3's replay files), ``"empty"`` or ``"other"``
    """
    start = file.tell()
    header = file.read(8)
    file.seek(start)
    if not header:
        return "empty"
    return next((kind for magic, kind in _FILE_MAGIC.items() if header.startswith(magic)), "other")


def _not_npz_message(name: str, kind: str) -> str:
    """
    :param name: the file's name
    :param kind: its :func:`replay_file_kind`, not ``"npz"``
    :return: why it is refused as a replay file
    """
    if kind == "pickle":
        return (
            f"{name} is a pickle (SB3's replay buffer format, or a replay saved by an older sb3_pcl), not a PathReplayBuffer "
            ".npz file: unpickling it could run arbitrary code, so it is refused. If you trust the file, load it with "
            "load_replay_buffer(path, allow_pickle=True) and save it again to convert it"
        )
    if kind == "empty":
        return f"{name} is empty, not a PathReplayBuffer .npz file"
    return (
        f"{name} is not a PathReplayBuffer .npz file (it is {'a single .npy array' if kind == 'npy' else 'not a zip archive'})"
    )


def _replay_metadata(raw: np.ndarray, name: str) -> dict[str, Any]:
    """
    :param raw: the ``metadata`` array of a replay file
    :param name: the file's name, for the messages
    :return: its replay metadata (format, version and entry types checked)
    :raises ValueError: when the ``.npz`` is of another kind, of a newer version, or its metadata is malformed
    """
    try:
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"a {raw.dtype} array of shape {raw.shape}")
        metadata = json.loads(raw.tobytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: unreadable metadata ({error})") from None
    if not isinstance(metadata, dict) or metadata.get("format") != REPLAY_FILE_FORMAT:
        raise ValueError(f"{name} is an .npz file of another kind (its metadata is not a {REPLAY_FILE_FORMAT} one)")
    version = metadata.get("version")
    if not isinstance(version, int) or version > REPLAY_FILE_VERSION:
        raise ValueError(
            f"{name} has replay format version {version!r}; this sb3_pcl reads versions up to {REPLAY_FILE_VERSION}"
        )
    expected = {
        "buffer_size": int,
        "n_envs": int,
        "obs_shape": (list, dict),
        "obs_dtype": (str, dict),
        "action_dim": int,
        "settings": dict,
        "allocated": bool,
        "next_path_id": int,
        "add_count": int,
    }
    for key, kind in expected.items():
        value: Any = metadata.get(key)
        negative_int = kind is int and (isinstance(value, bool) or (isinstance(value, int) and value < 0))
        if not isinstance(value, kind) or negative_int:  # type: ignore[arg-type]
            raise ValueError(f"{name} is not a valid PathReplayBuffer file: metadata {key!r} is {value!r}")
    unknown = set(metadata["settings"]) - set(PathReplayBuffer.SETTINGS)
    if unknown:
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: unknown settings {sorted(unknown)}")
    fresh = metadata.get("next_fresh_slot", 0)
    if isinstance(fresh, bool) or not isinstance(fresh, int):
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: metadata 'next_fresh_slot' is {fresh!r}")
    return metadata


#: the arrays a replay file may hold
REPLAY_ARRAYS = frozenset(
    {
        "metadata",
        "free_slots",
        "open_paths",
        "last_next_obs",
        "last_next_obs_known",
        "path_slots",
        "path_final_obs",
        "observations",
        "actions",
        "rewards",
        *(f"path_{key}" for key in PATH_FIELDS),
    }
)
#: the arrays of a replay file that hold observations (one array each, or one per key of a Dict space)
OBS_ARRAYS = ("observations", "last_next_obs", "path_final_obs")


def replay_arrays(observation_space: spaces.Space) -> frozenset[str]:
    """
    :param observation_space: the loading model's observation space
    :return: the arrays a replay file for it may hold: :data:`REPLAY_ARRAYS`, with the observation arrays named per
        key for a Dict space (``observations.<key>``, ...)
    """
    layout = obs_layout(observation_space)
    if None in layout:
        return REPLAY_ARRAYS
    return (REPLAY_ARRAYS - set(OBS_ARRAYS)) | {obs_member(name, key) for name in OBS_ARRAYS for key in layout}


def _obs_metadata(observation_space: spaces.Space) -> dict[str, Any]:
    """:return: the ``obs_shape`` and ``obs_dtype`` entries of a replay file's metadata (dicts by key for a Dict space)"""
    layout = obs_layout(observation_space)
    if None in layout:
        shape, dtype = layout[None]
        return {"obs_shape": list(shape), "obs_dtype": dtype.name}
    return {
        "obs_shape": {key: list(shape) for key, (shape, _) in layout.items()},
        "obs_dtype": {key: dtype.name for key, (_, dtype) in layout.items()},
    }


def _shape_text(shape: Any) -> str:
    """:return: an ``obs_shape`` metadata entry as a tuple, or a dict of tuples by key"""
    if isinstance(shape, dict):
        return str({key: tuple(value) if isinstance(value, list) else value for key, value in shape.items()})
    return str(tuple(shape))


def _obs_members(name: str, obs: Any) -> dict[str, np.ndarray]:
    """:return: the ``.npz`` arrays holding the observations ``name``: one, or one per key of an :class:`ObsDict`"""
    if isinstance(obs, dict):
        return {obs_member(name, key): value for key, value in obs.items()}
    return {name: obs}


def _read_npz_arrays(file: IO[bytes], name: str, keys: list[str]) -> dict[str, np.ndarray]:
    """:return: the arrays ``keys`` of an ``.npz`` whose headers were checked (``allow_pickle=False``)"""
    start = file.tell()
    try:
        with np.load(file, allow_pickle=False) as data:
            return {key: np.asarray(data[key]) for key in keys}
    except (OSError, EOFError, KeyError, ValueError, TypeError, zipfile.BadZipFile, zlib.error) as error:
        raise ValueError(
            f"{name} is not a valid PathReplayBuffer .npz file (unreadable: truncated or corrupt?): {error}"
        ) from error
    finally:
        file.seek(start)


def _check_replay_headers(
    headers: dict[str, ArrayHeader],
    metadata: dict[str, Any],
    observation_space: spaces.Space,
    action_space: spaces.Space,
    name: str,
    max_buffer_size: int | None,
) -> None:
    """
    Check, before any array is read, that the metadata suits the loading model and that every array declares the
    dtype and shape the metadata implies: no array is larger than a buffer of ``max_buffer_size`` needs.

    :param headers: the file's array headers
    :param metadata: its metadata (:func:`_replay_metadata`)
    :param observation_space: the loading model's observation space
    :param action_space: its action space
    :param name: the file's name, for the messages
    :param max_buffer_size: the largest ``buffer_size`` accepted (``None``: no limit)
    :raises ValueError: naming the file and the first size or array that does not fit
    """
    layout = obs_layout(observation_space)
    action_dim = get_action_dim(action_space)
    expected_obs = _obs_metadata(observation_space)
    saved = (metadata["obs_shape"], metadata["obs_dtype"], metadata["action_dim"])
    if saved != (expected_obs["obs_shape"], expected_obs["obs_dtype"], action_dim):
        raise ValueError(
            f"{name} holds a replay of observations of shape {_shape_text(saved[0])} ({saved[1]}) and actions of "
            f"dimension {saved[2]}; this model has observations of shape {_shape_text(expected_obs['obs_shape'])} "
            f"({expected_obs['obs_dtype']}) and actions of dimension {action_dim}"
        )
    buffer_size, n_envs = metadata["buffer_size"], metadata["n_envs"]
    if max_buffer_size is not None and buffer_size > max_buffer_size:
        raise ValueError(
            f"{name} holds a replay of buffer_size={buffer_size}, larger than this model's buffer_size={max_buffer_size}: "
            f"create the model with buffer_size >= {buffer_size} to load it"
        )
    if n_envs > max(buffer_size, 1):
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: n_envs={n_envs} exceeds buffer_size={buffer_size}")
    max_paths = 2 * (buffer_size + n_envs)  # a path holds >= 1 slot, or is the (possibly empty) open path of an env

    def expect(key: str, dtype: Any, shape: tuple[int | None, ...], max_rows: int | None = None) -> ArrayHeader:
        return check_header(headers, key, dtype, shape, name, REPLAY_FILE_KIND, max_rows)

    n_paths = expect("path_ids", np.int64, (None,), max_paths).shape[0]
    for key, dtype in PATH_FIELDS.items():
        expect(f"path_{key}", dtype, (n_paths,))
    for sub, (shape, dtype) in layout.items():
        expect(obs_member("path_final_obs", sub), dtype, (n_paths, *shape))
        expect(obs_member("last_next_obs", sub), dtype, (n_envs, *shape))
    expect("path_slots", np.int64, (None,), buffer_size)
    expect("free_slots", np.int64, (None,), buffer_size)
    expect("open_paths", np.int64, (n_envs,))
    expect("last_next_obs_known", bool, (n_envs,))
    storage: dict[str, tuple[Any, tuple[int, ...]]] = {
        obs_member("observations", sub): (dtype, shape) for sub, (shape, dtype) in layout.items()
    }
    storage.update(actions=(np.float32, (action_dim,)), rewards=(np.float32, ()))
    for key, (dtype, shape) in storage.items():
        if metadata["allocated"]:
            expect(key, dtype, (buffer_size, *shape))
        elif key in headers:
            raise ValueError(
                f"{name} is not a valid PathReplayBuffer file: the storage is not allocated but {key!r} is stored"
            )


def save_replay_file(buffer: PathReplayBuffer, path: str | pathlib.Path | io.BufferedIOBase, verbose: int = 0) -> None:
    """
    What :meth:`sb3_pcl.PCL.save_replay_buffer` does: :meth:`PathReplayBuffer.save_npz` at ``path``, a ``str`` or
    ``pathlib.Path`` without suffix getting ``.npz`` (as SB3 appends ``.pkl``), or an open binary file.

    :param buffer: the replay
    :param path: where to write it
    :param verbose: SB3's verbosity (warnings about the path)
    """
    file = open_path(path, "w", verbose=verbose, suffix="npz")
    try:
        buffer.save_npz(file)  # type: ignore[arg-type]
    finally:
        if isinstance(path, (str, pathlib.Path)):
            file.close()


def load_replay_file(
    path: str | pathlib.Path | io.BufferedIOBase,
    buffer_class: type[PathReplayBuffer],
    observation_space: spaces.Space,
    action_space: spaces.Space,
    device: th.device | str = "auto",
    allow_pickle: bool = False,
    verbose: int = 0,
    max_buffer_size: int | None = None,
) -> PathReplayBuffer:
    """
    What :meth:`sb3_pcl.PCL.load_replay_buffer` does: read a replay file written by :func:`save_replay_file`.

    A ``str`` or ``pathlib.Path`` that does not exist is tried with ``.npz`` appended (and, with ``allow_pickle``,
    ``.pkl``). Pickles (SB3's replay files, and those of sb3_pcl before the npz format) are refused unless
    ``allow_pickle=True``: then a :class:`PathReplayBuffer` is unpickled, with a warning, since unpickling runs any code
    the file holds.

    :param path: the file
    :param buffer_class: the class of the restored buffer (a :class:`PathReplayBuffer` subclass)
    :param observation_space: the loading model's observation space
    :param action_space: its action space
    :param device: PyTorch device of the sampled tensors
    :param allow_pickle: accept a pickled buffer (only for files you trust)
    :param verbose: SB3's verbosity
    :param max_buffer_size: the largest ``buffer_size`` accepted (see :meth:`PathReplayBuffer.load_npz`)
    :return: the buffer
    :raises ValueError: naming the file and the problem (see :meth:`PathReplayBuffer.load_npz`)
    """
    try:
        file = open_path(path, "r", verbose=verbose, suffix="npz")
    except FileNotFoundError:
        if not (allow_pickle and isinstance(path, (str, pathlib.Path))):
            raise
        file = open_path(path, "r", verbose=verbose, suffix="pkl")
    name = replay_file_name(getattr(file, "name", path) if isinstance(path, (str, pathlib.Path)) else path)
    try:
        if allow_pickle and replay_file_kind(file) == "pickle":  # type: ignore[arg-type]
            warnings.warn(
                f"Unpickling the replay buffer {name} (allow_pickle=True): this runs any code the file holds, load only "
                "files you trust; save_replay_buffer then writes it in the npz format, which loads without pickle",
                stacklevel=3,
            )
            buffer = pickle.load(file)
            if not isinstance(buffer, PathReplayBuffer):
                raise ValueError(f"{name} does not hold a PathReplayBuffer (found {type(buffer).__name__})")
            return buffer
        return buffer_class.load_npz(file, observation_space, action_space, device, name, max_buffer_size)  # type: ignore[arg-type]
    finally:
        if isinstance(path, (str, pathlib.Path)):
            file.close()
