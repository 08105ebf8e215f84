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

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.vec_env import VecNormalize

EVICTION_STRATEGIES = ("fifo", "rand", "rank")
PRIORITY_MODES = ("step", "return")


class PathHistory(NamedTuple):
    """
    Each segment's path replayed from its first stored step, for recurrent policies.

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
    """A padded, time-major batch of ``B`` path segments of at most ``T`` steps."""

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
    """Bookkeeping of one stored path (its transitions live in the buffer's arrays)."""

    path_id: int
    env_idx: int
    slots: list[int] = field(default_factory=list)
    first_step: int = 0
    last_step: int = 0
    total_return: float = 0.0
    done: bool = False
    terminated: bool = False
    is_seed: bool = False
    dropped_head: bool = False
    final_obs: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.slots)


class PathIndex:
    """
    The per-path numbers that sampling and eviction need, in parallel arrays (one row per path).

    Rows are appended in creation order, that is in increasing path id (the order of
    :attr:`PathReplayBuffer.paths`), so that selecting rows with a mask keeps the ids sorted. A removed
    path leaves a dead row until more than half of the rows are dead, when the table is compacted
    (amortised O(1) per removal). The buffer writes a path's row whenever the path changes
    (:meth:`PathReplayBuffer._sync`); queries are then vectorised over the rows instead of looping
    over the ``Path`` objects.

    :param capacity: initial number of rows (grows by doubling)
    """

    COLUMNS = ("ids", "env_idx", "length", "last_step", "total_return", "live", "done", "is_seed", "has_final")
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
        self.row_of[path_id] = row
        self.n_rows += 1

    def update(self, path_id: int, length: int, last_step: int, total_return: float, done: bool, has_final: bool) -> None:
        """
        Overwrite the changing numbers of a path's row.

        :param path_id: the path
        :param length: its number of stored transitions
        :param last_step: the buffer step of its last transition
        :param total_return: its total reward
        :param done: whether it is finished
        :param has_final: whether its final observation is known
        """
        row = self.row_of[path_id]
        self.length[row] = length
        self.last_step[row] = last_step
        self.total_return[row] = total_return
        self.done[row] = done
        self.has_final[row] = has_final

    def remove(self, path_id: int) -> None:
        """
        Mark a path's row dead, and compact the table when most rows are dead.

        :param path_id: the removed path
        """
        row = self.row_of.pop(path_id)
        self.live[row] = False
        self.n_dead += 1
        if self.n_dead >= self.MIN_DEAD_TO_COMPACT and 2 * self.n_dead > self.n_rows:
            self.compact()

    def compact(self) -> None:
        """Drop the dead rows (keeping the others in order)."""
        keep = np.flatnonzero(self.live[: self.n_rows])
        for name in self.COLUMNS:
            column = getattr(self, name)
            column[: len(keep)] = column[keep]
        self.n_rows = len(keep)
        self.n_dead = 0
        self.row_of = dict(zip(self.ids[: self.n_rows].tolist(), range(self.n_rows), strict=True))

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
        super().__init__(buffer_size, observation_space, action_space, device=device, n_envs=n_envs)
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
        self.free_slots: list[int] = []
        self.n_stored = 0

        self.paths: dict[int, Path] = {}
        self.open_paths: list[int | None] = [None] * n_envs
        self.last_next_obs: list[np.ndarray | None] = [None] * n_envs
        self.next_path_id = 0
        self.add_count = 0
        self._index = PathIndex()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """
        Restore a pickled buffer (:meth:`~stable_baselines3.common.base_class.BaseAlgorithm.load_replay_buffer`).

        A buffer pickled before the :class:`PathIndex` existed gets it rebuilt from its paths; one pickled before
        ``distinct_paths`` existed samples with replacement, as it did.

        :param state: the pickled attributes
        """
        self.__dict__.update(state)
        self.__dict__.setdefault("distinct_paths", False)
        if not isinstance(state.get("_index"), PathIndex):
            self._rebuild_index()

    def _rebuild_index(self) -> None:
        """Recompute the :class:`PathIndex` from :attr:`paths`."""
        self._index = PathIndex(capacity=len(self.paths))
        for path_id in sorted(self.paths):
            path = self.paths[path_id]
            self._index.append(path.path_id, path.env_idx, path.is_seed)
            self._sync(path)

    def _sync(self, path: Path) -> None:
        """
        Copy a stored path's numbers to its :class:`PathIndex` row; called after every change of the path.

        :param path: the path
        """
        self._index.update(
            path.path_id, len(path.slots), path.last_step, path.total_return, path.done, self._final_obs(path) is not None
        )

    # ------------------------------------------------------------------ storage
    def _allocate(self) -> None:
        obs_dtype = self.observation_space.dtype if self.observation_space.dtype is not None else np.float32
        self.observations = np.zeros((self.buffer_size, *self.obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((self.buffer_size, self.action_dim), dtype=np.float32)
        self.rewards = np.zeros((self.buffer_size,), dtype=np.float32)
        self.free_slots = list(range(self.buffer_size - 1, -1, -1))

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
        super().reset()
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

    def _take_slot(self, writer: Path) -> int:
        while not self.free_slots:
            self._make_room(writer)
        return self.free_slots.pop()

    def _make_room(self, writer: Path) -> None:
        candidates = self._evictable_rows()  # in increasing path id
        if len(candidates) > 0:
            if self.eviction == "fifo":
                row = candidates[0]
            elif self.eviction == "rand":
                row = candidates[np.random.randint(len(candidates))]
            else:  # the lowest priority, the oldest path among equals (argmin returns the first minimum)
                row = candidates[int(np.argmin(self._raw_priorities(candidates)))]
            self._remove_path(self.paths[int(self._index.ids[row])])
            return
        self._drop_running_head(writer)

    def _drop_running_head(self, writer: Path) -> None:
        """
        Only running (or seeded) paths are stored: drop the oldest transition of the longest running path.

        :param writer: the path that needs the slot (preferred among equally long paths)
        """
        running = [p for p in self.paths.values() if not p.done and not p.is_seed and len(p) > 0]
        if not running:
            raise ValueError(
                f"buffer_size={self.buffer_size} is too small: the seeded paths fill the whole buffer "
                "and nothing can be evicted"
            )
        longest = max(running, key=lambda p: (len(p), p is writer))
        slot = longest.slots.pop(0)
        longest.first_step += 1
        longest.dropped_head = True
        self.free_slots.append(slot)
        self.n_stored -= 1
        self._sync(longest)

    def _remove_path(self, path: Path) -> None:
        self.free_slots.extend(path.slots)
        self.n_stored -= len(path.slots)
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

        :param obs: observations ``(n_envs, *obs_shape)``
        :param next_obs: next observations, the terminal ones for envs that finished
        :param action: actions as sampled by the policy ``(n_envs, *action_shape)``
        :param reward: rewards ``(n_envs,)``
        :param done: episode ends ``(n_envs,)``
        :param infos: per-env infos (``TimeLimit.truncated`` marks time-limit ends)
        """
        obs = np.asarray(obs).reshape((self.n_envs, *self.obs_shape))
        next_obs = np.asarray(next_obs).reshape((self.n_envs, *self.obs_shape))
        action = np.asarray(action).reshape((self.n_envs, self.action_dim))
        reward = np.asarray(reward, dtype=np.float64).reshape(self.n_envs)
        done = np.asarray(done).reshape(self.n_envs)
        self._check_finite(reward, "reward")
        self._check_finite(obs, "observation")
        self._check_finite(next_obs, "next observation")
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
            self.rewards[slot] = reward[env_idx]
            path.slots.append(slot)
            path.last_step = self.add_count
            path.total_return += float(reward[env_idx])
            self.n_stored += 1
            self.last_next_obs[env_idx] = np.array(next_obs[env_idx])
            if done[env_idx]:
                truncated = bool(infos[env_idx].get("TimeLimit.truncated", False)) if env_idx < len(infos) else False
                path.done = True
                path.terminated = not (truncated and self.handle_timeout_termination)
                path.final_obs = np.array(next_obs[env_idx])
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

    @staticmethod
    def _check_finite(array: np.ndarray, what: str) -> None:
        if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
            bad = np.argwhere(~np.isfinite(array.reshape(array.shape[0], -1)))[:, 0]
            raise ValueError(
                f"Non-finite {what} (NaN or inf) from env index {sorted(set(bad.tolist()))}: "
                "refusing to store it in the replay buffer (check the environment or its wrappers)"
            )

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

        :param observations: ``(T + 1, *obs_shape)``: the visited states and the final one
        :param actions: ``(T, *action_shape)`` actions
        :param rewards: ``(T,)`` rewards
        :param terminated: whether the final state is terminal
        :param seed: seeded paths are never evicted and are sampled with the top priority
        :return: the new path's id
        """
        observations = np.asarray(observations)
        rewards = np.asarray(rewards, dtype=np.float64).reshape(-1)
        n_steps = len(rewards)
        if n_steps < 1:
            raise ValueError("a path needs at least one transition")
        if observations.shape != (n_steps + 1, *self.obs_shape):
            raise ValueError(
                f"observations must have shape {(n_steps + 1, *self.obs_shape)} (T + 1 states), got {observations.shape}"
            )
        actions = np.asarray(actions).reshape((n_steps, self.action_dim))
        self._check_finite(rewards.reshape(n_steps, 1), "reward")
        self._check_finite(observations, "observation")
        if self.observations is None:
            self._allocate()
        assert self.observations is not None and self.actions is not None and self.rewards is not None
        self.add_count += 1
        path = self._new_path(env_idx=-1, is_seed=seed)
        for step in range(n_steps):
            slot = self._take_slot(path)
            self.observations[slot] = observations[step]
            self.actions[slot] = actions[step]
            self.rewards[slot] = rewards[step]
            path.slots.append(slot)
            self.n_stored += 1
        path.last_step = self.add_count
        path.total_return = float(rewards.sum())
        path.done = True
        path.terminated = bool(terminated)
        path.final_obs = np.array(observations[-1])
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
        segments = [self._draw_window(self.paths[int(path_id)], max_len) for path_id in ids[chosen]]
        return self._gather(segments, env)

    @staticmethod
    def _draw_window(path: Path, max_len: int | None) -> tuple[Path, int, int]:
        """
        :param path: a sampled path
        :param max_len: the segment length (``None``: the whole path)
        :return: ``(path, start, end)`` of a random window of at most ``max_len`` steps. Its start is uniform in
            ``[-(max_len - 1), length - 1]``, clipped to the path: every transition is covered by exactly ``max_len``
            of these windows, the first and last ones included (a window drawn inside ``[0, length - max_len]``
            would rarely see the end)
        """
        length = len(path)
        if max_len is None or length <= 1:
            return path, 0, length
        start = np.random.randint(-(max_len - 1), length)
        return path, max(0, start), min(length, start + max_len)

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
        final_obs = np.zeros((n_segments, *self.obs_shape), dtype=self.observations.dtype)
        terminated = np.zeros(n_segments, dtype=np.float32)
        at_start = np.zeros(n_segments, dtype=np.float32)
        for col, (path, start, end) in enumerate(segments):
            slots = path.slots[start:end]
            index[: len(slots), col] = slots
            index[len(slots) :, col] = slots[-1]
            mask[: len(slots), col] = 1.0
            if end < len(path):
                final_obs[col] = self.observations[path.slots[end]]
            else:
                final = self._final_obs(path)
                assert final is not None
                final_obs[col] = final
                terminated[col] = float(path.done and path.terminated)
            at_start[col] = float(start == 0 and not path.dropped_head)
        observations = np.asarray(self._normalize_obs(self.observations[index], env))
        final_obs = np.asarray(self._normalize_obs(final_obs, env))
        rewards = self._normalize_reward(self.rewards[index], env) * mask
        return PathBatch(
            observations=self.to_torch(np.asarray(observations)),
            actions=self.to_torch(self.actions[index]),
            rewards=self.to_torch(rewards.astype(np.float32)),
            mask=self.to_torch(mask),
            final_observations=self.to_torch(np.asarray(final_obs)),
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
        observations = np.zeros((horizon, n_segments, *self.obs_shape), dtype=self.observations.dtype)
        actions = np.zeros((horizon, n_segments, self.action_dim), dtype=np.float32)
        offsets = np.zeros(n_segments, dtype=np.int64)
        for col, (path, start, end) in enumerate(segments):
            slots = path.slots[:end]
            final = self.observations[path.slots[end]] if end < len(path) else self._final_obs(path)
            assert final is not None
            observations[:end, col] = self.observations[slots]
            observations[end:, col] = final
            actions[:end, col] = self.actions[slots]
            offsets[col] = start
        normalized = np.asarray(self._normalize_obs(observations, env))
        return PathHistory(
            observations=self.to_torch(normalized),
            actions=self.to_torch(actions),
            offsets=th.as_tensor(offsets, device=self.device),
        )

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        raise NotImplementedError("PathReplayBuffer samples paths: use sample()")
