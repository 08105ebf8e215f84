"""The per-path table that sampling and eviction query (:class:`PathIndex`)."""

import numpy as np


class PathIndex:
    """
    The per-path numbers that sampling and eviction need, in parallel arrays (one row per path).

    Rows are appended in creation order, that is in increasing path id (the order of
    the buffer's ``paths``), so that selecting rows with a mask keeps the ids sorted. A removed
    path leaves a dead row until more than half of the rows are dead, when the table is compacted
    (amortised O(1) per removal). The buffer writes a path's row whenever the path changes
    (``PathReplayBuffer._sync``); queries are then vectorised over the rows instead of looping
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
        :param env_idx: the env writing it (-1 for ``PathReplayBuffer.add_path``)
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
