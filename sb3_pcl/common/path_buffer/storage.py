"""
The storage of a :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`: slot-indexed arrays, the slot allocator, the
paths' bookkeeping (:class:`~sb3_pcl.common.path_buffer.index.PathIndex`) and eviction.

Transitions are stored once, in flat arrays of ``buffer_size`` slots allocated on the first write. Fresh slots are
taken in order (slot ``i`` holds the ``i``-th transition written until the storage first fills); after that a write
reuses the most recently freed slot. When no slot is free a whole finished path is evicted (``fifo``: the oldest,
``rand``: a uniform one, ``rank``: the lowest priority), or, when every stored path is still running, the oldest step
of the longest one. Seeded paths are never evicted.
"""

import heapq
from typing import Any, ClassVar

import numpy as np
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl.common.dict_obs import ObsDict, zeros_obs
from sb3_pcl.common.path_buffer.index import PathIndex
from sb3_pcl.common.path_buffer.paths import Path
from sb3_pcl.common.validation import check_storable


class PathStorage(BaseBuffer):
    """
    Slot storage, path bookkeeping and eviction of :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` (which sets
    the attributes declared here in its constructor).
    """

    #: the settings a saved buffer records (the constructor's keyword arguments after ``n_envs``)
    SETTINGS: ClassVar[tuple[str, ...]] = (
        "alpha",
        "priority",
        "eviction",
        "max_segment_length",
        "handle_timeout_termination",
        "distinct_paths",
    )
    obs_layout: dict[str | None, tuple[tuple[int, ...], np.dtype]]
    alpha: float
    priority: str
    eviction: str
    max_segment_length: int | None
    handle_timeout_termination: bool
    distinct_paths: bool

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

    def _final_obs(self, path: Path) -> np.ndarray | None:
        """:return: the state reached after the path's last stored step (``None`` while its env has not reported it)"""
        return path.final_obs if path.done else self.last_next_obs[path.env_idx]

    def _allocate(self) -> None:
        self.observations = self._obs_zeros((self.buffer_size,))
        self.actions = np.zeros((self.buffer_size, self.action_dim), dtype=np.float32)
        self.rewards = np.zeros((self.buffer_size,), dtype=np.float32)
        # np.zeros maps pages lazily, and the free slots are a counter plus the evicted ones: memory grows with use
        self.free_slots = []
        self.next_fresh_slot = 0

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
