"""
Episode-aware replay for path-consistency learning: :class:`PathReplayBuffer`, the :class:`Path` records it keeps and
the :class:`PathBatch` es it samples. Its file format is :mod:`sb3_pcl.common.path_buffer.replay_file`.
"""

import heapq
import os
from dataclasses import dataclass, field, replace
from typing import IO, Any, Self

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.preprocessing import get_action_dim, get_obs_shape
from stable_baselines3.common.utils import get_device
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl.common.dict_obs import ObsDict, copy_obs, obs_layout, zeros_obs
from sb3_pcl.common.path_buffer.replay_file import read_replay_npz, replay_file_name, write_replay_npz
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
#: one row of :attr:`PathReplayBuffer._table`: a stored path's numbers that sampling and eviction read
_ROW = np.dtype(
    [
        ("path_id", np.int64),
        ("env_idx", np.int64),
        ("length", np.int64),
        ("last_step", np.int64),
        ("total_return", np.float64),
        ("live", bool),  # False: the row of a removed path, dropped at the next reindexing
        ("is_seed", bool),
        ("sampleable", bool),  # some steps stored and the state after the last one known
        ("evictable", bool),  # finished and not seeded
    ]
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
    One stored path (an episode, or the part of it collected so far); its transitions live in the buffer's arrays.

    Its storage slots, oldest first, are ``slot_list[head:]``: dropping the oldest step of a path longer than the buffer
    moves ``head`` on, and the buffer deletes the dropped head only once it is most of the list (amortised O(1)).
    """

    path_id: int
    env_idx: int  #: the env that writes it, -1 for :meth:`PathReplayBuffer.add_path`
    first_step: int = 0  #: the buffer step (``add_count``) before its first stored transition
    last_step: int = 0  #: the buffer step of its last transition
    total_return: float = 0.0
    done: bool = False  #: finished: an episode end, or cut (:meth:`PathReplayBuffer.close_open_paths`)
    terminated: bool = False  #: its final state is terminal (no bootstrapping)
    is_seed: bool = False  #: never evicted, sampled with the top priority
    dropped_head: bool = False  #: its oldest steps were dropped to make room
    final_obs: Any = None  #: the state after its last step, once finished
    slot_list: list[int] = field(default_factory=list, repr=False)
    head: int = field(default=0, repr=False)

    def __len__(self) -> int:
        return len(self.slot_list) - self.head

    @property
    def slots(self) -> list[int]:
        """The slots of the path's transitions, oldest first (a copy)."""
        return self.slot_list[self.head :]


class PathReplayBuffer(BaseBuffer):
    """
    Replay buffer of paths (episodes) for PCL-style algorithms, sampled as padded time-major segments.

    Like SB3's ``HerReplayBuffer`` it keeps whole episodes, but it evicts whole paths rather than the oldest row, so it
    has no ``pos`` cursor and no ``full`` flag: transitions sit in ``buffer_size`` *slots* (one per slot, no ``n_envs``
    axis), and each :class:`Path` of :attr:`paths` lists its slots. ``observations`` ``(buffer_size, *obs_shape)`` (an
    :class:`~sb3_pcl.common.dict_obs.ObsDict` of such arrays for a ``Dict`` space, as SB3's ``DictReplayBuffer``),
    ``actions`` ``(buffer_size, action_dim)`` and ``rewards`` ``(buffer_size,)`` (float32) are SB3's arrays per slot,
    ``None`` until the first ``add``; :meth:`transitions` gives SB3's ``next_observations``, ``dones`` and ``timeouts``.

    Fresh slots are written in order (until the storage first fills, slot ``i`` holds the ``i``-th transition); after
    that a write reuses the most recently freed slot. When none is free a finished path is evicted (``fifo``: the
    oldest, ``rand``: a uniform one, ``rank``: the lowest priority, the oldest among equals), or, when only running
    paths are stored, the oldest step of the longest one. Seeded paths (``add_path(..., seed=True)``, e.g. expert
    demonstrations) are never evicted and carry the top priority. Paths are drawn with probability
    ``p_i ~ exp(alpha * (prio_i - max prio))``, the priority being the path's recency (the buffer step of its last
    transition) or its return.

    Sampling and eviction read a NumPy table of the paths' numbers (:attr:`_table`, a row per path in increasing id:
    ``sample(64)`` over 5,000 paths takes about 0.45 ms, a loop over the paths about 10x that). A Fenwick tree over its
    rows finds the ``k``-th finished path (``fifo``: the first, ``rand``: a uniform one) in O(log n) (a scan of 600k
    rows takes 0.5 ms per ``rand`` eviction), and the ``rank`` order is a heap: an add to a full buffer of one-step
    paths, which evicts a path every time, costs the same at 10k and 300k slots (about 35k adds per CPU second,
    ``benchmarks/experiments/buffer_memory.py``). :meth:`save_npz` / :meth:`load_npz` write and read a file that cannot
    run code when loaded (:mod:`~sb3_pcl.common.path_buffer.replay_file`).

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
    :param handle_timeout_termination: treat ``TimeLimit.truncated`` episode ends as cut paths that bootstrap, as SB3's
        replay buffers do
    :param distinct_paths: draw a batch's paths without replacement, as the original code's replay did: a batch then
        holds ``min(batch_size, paths with a non-zero probability)`` different paths
    """

    #: the settings a saved buffer records (the constructor's keyword arguments after ``n_envs``)
    SETTINGS = ("alpha", "priority", "eviction", "max_segment_length", "handle_timeout_termination", "distinct_paths")

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
        distinct_paths: bool = False,
    ):
        # Not BaseBuffer.__init__: it would set SB3's pos and full, which this buffer does not have
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
        self.distinct_paths = distinct_paths
        self.reset()

    def reset(self) -> None:
        """Remove every path, seeded ones included; the settings are kept."""
        self.observations: Any = None
        self.actions: Any = None
        self.rewards: Any = None
        #: slots freed by evictions, reused last-in first-out; the slots from ``next_fresh_slot`` on were never used
        self.free_slots: list[int] = []
        self.next_fresh_slot = 0
        #: the stored paths by id, in increasing id
        self.paths: dict[int, Path] = {}
        #: per env, the id of the path it is writing (``None`` between episodes)
        self.open_paths: list[int | None] = [None] * self.n_envs
        #: per env, its latest next observation: the state after the last step of its running path
        self.last_next_obs: list[Any] = [None] * self.n_envs
        self.next_path_id = 0
        #: the buffer step: the number of ``add`` and ``add_path`` calls
        self.add_count = 0
        self._table = np.zeros(0, dtype=_ROW)
        self._n_rows = 0
        #: ``(priority, path id)`` of the evictable paths for ``rank`` (entries of removed paths are skipped)
        self._rank_heap: list[tuple[float, int]] = []
        self._reindex()

    def size(self) -> int:
        """:return: the number of stored transitions (each slot below ``next_fresh_slot`` is held by a path or free)"""
        return self.next_fresh_slot - len(self.free_slots)

    @property
    def n_paths(self) -> int:
        """The number of stored paths (finished or running)."""
        return len(self.paths)

    @property
    def n_seeded_paths(self) -> int:
        """The number of seeded paths (``add_path(..., seed=True)``, never evicted)."""
        return int(np.count_nonzero(self._table["is_seed"][: self._n_rows]))

    @property
    def n_seeded_transitions(self) -> int:
        """The number of transitions the seeded paths hold."""
        rows = self._table[: self._n_rows]
        return int(rows["length"][rows["is_seed"]].sum())

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
        action = check_storable(
            np.asarray(action).reshape((self.n_envs, self.action_dim)), np.float32, "action", "env index", STORAGE_HINT
        )
        done = np.asarray(done).reshape(self.n_envs)
        self.add_count += 1
        for env_idx in range(self.n_envs):
            path_id = self.open_paths[env_idx]
            if path_id is None:
                path = self._track(Path(self.next_path_id, env_idx, first_step=self.add_count))
                self.open_paths[env_idx] = path.path_id
            else:
                path = self.paths[path_id]
            slot = self._take_slot(path)
            self.observations[slot] = obs[env_idx]
            self.actions[slot] = action[env_idx]
            self.rewards[slot] = stored_reward[env_idx]
            path.slot_list.append(slot)
            path.last_step = self.add_count
            path.total_return += float(reward[env_idx])
            self.last_next_obs[env_idx] = copy_obs(next_obs[env_idx])
            if done[env_idx]:
                truncated = bool(infos[env_idx].get("TimeLimit.truncated", False)) if env_idx < len(infos) else False
                path.done = True
                path.terminated = not (truncated and self.handle_timeout_termination)
                path.final_obs = self.last_next_obs[env_idx]
                self.open_paths[env_idx] = None
            self._sync(path)

    def close_open_paths(self) -> None:
        """
        End the running path of every env as cut (it bootstraps from its latest next observation).

        Called when the envs are reset outside of an episode end (a new ``learn``, ``set_env``), so that the next
        episode does not continue the previous one.
        """
        for env_idx, path_id in enumerate(self.open_paths):
            if path_id is not None:
                path = self.paths[path_id]
                path.done, path.terminated, path.final_obs = True, False, self.last_next_obs[env_idx]
                self._sync(path)
        self.open_paths = [None] * self.n_envs

    def add_path(
        self, observations: Any, actions: np.ndarray, rewards: np.ndarray, terminated: bool = True, seed: bool = False
    ) -> int:
        """
        Store a whole path at once, e.g. an expert demonstration (checked in the storage dtypes first, as in ``add``).

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
            given = np.shape(observations if key is None else observations[key])
            if given != (n_steps + 1, *shape):
                what = "observations" if key is None else f"observations[{key!r}]"
                raise ValueError(f"{what} must have shape {(n_steps + 1, *shape)} (T + 1 states), got {given}")
        stored_rewards = check_storable(rewards, np.float32, "reward", "step", PATH_HINT)
        observations = self._checked_obs(observations, (n_steps + 1,), "observation", "step", PATH_HINT)
        actions = check_storable(
            np.asarray(actions).reshape((n_steps, self.action_dim)), np.float32, "action", "step", PATH_HINT
        )
        self.add_count += 1
        path = self._track(Path(self.next_path_id, env_idx=-1, first_step=self.add_count, is_seed=seed))
        for step in range(n_steps):
            slot = self._take_slot(path)
            self.observations[slot] = observations[step]
            self.actions[slot] = actions[step]
            self.rewards[slot] = stored_rewards[step]
            path.slot_list.append(slot)
        path.last_step, path.total_return = self.add_count, float(rewards.sum())
        path.done, path.terminated, path.final_obs = True, bool(terminated), copy_obs(observations[-1])
        self._sync(path)
        return path.path_id

    def _checked_obs(self, obs: Any, lead: tuple[int, ...], what: str, index_name: str, hint: str) -> Any:
        """
        :param obs: observations ``(*lead, *obs_shape)`` (a dict of arrays for a Dict space)
        :param lead: their leading dimensions
        :param what: what they are; ``index_name``: what the first index is; ``hint``: what to check (for the messages)
        :return: the observations in their storage dtype (an :class:`ObsDict` for a Dict space)
        :raises ValueError: for a value not storable (:func:`~sb3_pcl.common.validation.check_storable`), a missing key
        """
        if None in self.obs_layout:
            shape, dtype = self.obs_layout[None]
            return check_storable(np.asarray(obs).reshape((*lead, *shape)), dtype, what, index_name, hint)
        if not isinstance(obs, dict) or set(obs) != set(self.obs_layout):
            keys = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"{what}s must be a dict with the keys {sorted(map(str, self.obs_layout))} (got {keys}). {hint}")
        return ObsDict(
            {
                key: check_storable(np.asarray(obs[key]).reshape((*lead, *shape)), dtype, f"{what} {key!r}", index_name, hint)
                for key, (shape, dtype) in self.obs_layout.items()
            }
        )

    def _take_slot(self, writer: Path) -> int:
        """
        :param writer: the path that needs the slot (never evicted: it is running or being added)
        :return: a free slot: the next fresh one, else the latest freed one, after an eviction if none is free
        """
        if self.observations is None:  # the storage, allocated on the first write (np.zeros maps its pages lazily)
            self.observations = zeros_obs(self.observation_space, (self.buffer_size,))
            self.actions = np.zeros((self.buffer_size, self.action_dim), dtype=np.float32)
            self.rewards = np.zeros((self.buffer_size,), dtype=np.float32)
        if not self.free_slots and self.next_fresh_slot < self.buffer_size:
            self.next_fresh_slot += 1
            return self.next_fresh_slot - 1
        while not self.free_slots:
            if self._n_evictable == 0:
                self._drop_running_head(writer)
            elif self.eviction == "rank":  # the lowest priority, the oldest among equals
                path_id = heapq.heappop(self._rank_heap)[1]
                if path_id in self.paths:  # an evictable path stays so until it is removed
                    self._remove_path(self.paths[path_id])
            else:  # the k-th evictable row in id order, k = 0 (the oldest) or uniform, found down the Fenwick tree
                remaining = 0 if self.eviction == "fifo" else np.random.randint(self._n_evictable)
                node, tree = 0, self._tree
                step = 1 << (len(tree) - 1).bit_length()
                while step:
                    if node + step < len(tree) and tree[node + step] <= remaining:
                        node += step
                        remaining -= tree[node]
                    step >>= 1
                self._remove_path(self.paths[int(self._table["path_id"][node])])
        return self.free_slots.pop()

    def _drop_running_head(self, writer: Path) -> None:
        """
        Free the slot of the oldest step of the longest running path (the envs' open paths and ``writer``; ``writer``
        first among equally long ones, else the lowest id), as only running and seeded paths are stored.

        :param writer: the path that needs the slot
        """
        candidates = {path_id: self.paths[path_id] for path_id in self.open_paths if path_id is not None}
        candidates[writer.path_id] = writer
        running = [candidates[i] for i in sorted(candidates) if not candidates[i].is_seed and len(candidates[i]) > 0]
        if not running:
            raise ValueError(
                f"buffer_size={self.buffer_size} is too small: the seeded paths fill the whole buffer and nothing can be "
                "evicted"
            )
        path = max(running, key=lambda p: (len(p), p is writer))
        self.free_slots.append(path.slot_list[path.head])
        path.head += 1
        if path.head >= 64 and 2 * path.head >= len(path.slot_list):  # the dropped head is most of the list
            del path.slot_list[: path.head]
            path.head = 0
        path.first_step += 1
        path.dropped_head = True
        self._sync(path)

    def _remove_path(self, path: Path) -> None:
        """:param path: a finished path, evicted: its slots are freed and its table row dies"""
        self.free_slots.extend(path.slots)
        del self.paths[path.path_id]
        row = self._row_of.pop(path.path_id)
        if self._table["evictable"][row]:
            self._tree_add(row, -1)
        self._table[row] = 0  # dead

    # ------------------------------------------------------------------ the table of the paths
    def _track(self, path: Path) -> Path:
        """
        :param path: a new path, whose id is larger than any stored one's
        :return: the path, now stored with its table row
        """
        if self._n_rows == len(self._table):
            self._reindex()
        self.paths[path.path_id] = path
        self._row_of[path.path_id] = self._n_rows
        self._n_rows += 1
        self.next_path_id = path.path_id + 1
        self._sync(path)
        return path

    def _sync(self, path: Path) -> None:
        """:param path: a stored path that changed: its table row is rewritten (the last call of every change)"""
        row = self._row_of[path.path_id]
        evictable = path.done and not path.is_seed
        became_evictable = evictable and not self._table["evictable"][row]
        sampleable = len(path) > 0 and self._final_obs(path) is not None
        self._table[row] = (
            path.path_id, path.env_idx, len(path), path.last_step, path.total_return, True, path.is_seed, sampleable,
            evictable,
        )  # fmt: skip
        if became_evictable:  # a finished path's numbers no longer change
            self._tree_add(row, 1)
            if self.eviction == "rank":
                priority = path.last_step if self.priority == "step" else path.total_return
                heapq.heappush(self._rank_heap, (float(priority), path.path_id))

    def _reindex(self) -> None:
        """Drop the dead rows into a table of twice the live ones (amortised O(1) per path) and rebuild the tree."""
        live = self._table[: self._n_rows][self._table["live"][: self._n_rows]]
        table = np.zeros(max(64, 2 * len(live)), dtype=_ROW)
        table[: len(live)] = live
        self._table, self._n_rows = table, len(live)
        self._row_of: dict[int, int] = dict(zip(live["path_id"].tolist(), range(len(live)), strict=True))
        # Fenwick tree of the evictable rows: node i (1-based) counts the rows i - lowbit(i) .. i - 1
        counts = np.concatenate([[0], np.cumsum(table["evictable"], dtype=np.int64)])
        nodes = np.arange(1, len(table) + 1)
        self._tree: list[int] = [0, *(counts[nodes] - counts[nodes - (nodes & -nodes)]).tolist()]
        self._n_evictable = int(counts[-1])

    def _tree_add(self, row: int, delta: int) -> None:
        """:param row: a row that became evictable (``delta=1``) or stopped being (``delta=-1``)"""
        node = row + 1
        while node < len(self._tree):
            self._tree[node] += delta
            node += node & -node
        self._n_evictable += delta

    # ------------------------------------------------------------------ sampling
    def priorities(self, path_ids: np.ndarray | None = None) -> np.ndarray:
        """
        :param path_ids: stored paths (default: all of them, in increasing id)
        :return: each path's priority (recency or return); seeded paths get the top priority of the others
        :raises KeyError: for an id that is not a stored path
        """
        return self._priorities(self._rows(path_ids))

    def sampling_distribution(self, path_ids: np.ndarray | None = None, max_segment_length: int | None = None) -> np.ndarray:
        """
        Probability of drawing each path: ``n_windows * exp(alpha * (prio - max prio))``, normalised.

        With segments of at most ``T = max_segment_length`` steps, a path of length ``L`` has ``L + T - 1`` possible
        windows (see :meth:`_draw_windows`); it is weighted by ``(L + T - 1) / T`` (1 when whole paths are sampled).
        With ``alpha = 0`` every stored transition, the first and last of an episode included, is then equally likely
        to be trained on.

        :param path_ids: stored paths (default: all of them, in increasing id)
        :param max_segment_length: segment length (default: the buffer's)
        :return: probabilities
        :raises KeyError: for an id that is not a stored path
        """
        max_len = max_segment_length if max_segment_length is not None else self.max_segment_length
        return self._distribution(self._rows(path_ids), max_len)

    def _rows(self, path_ids: np.ndarray | None) -> np.ndarray:
        """:return: the table rows of the paths ``path_ids`` (``None``: every stored path, in increasing id)"""
        if path_ids is None:
            return np.flatnonzero(self._table["live"][: self._n_rows])
        return np.array([self._row_of[path_id] for path_id in np.asarray(path_ids).reshape(-1).tolist()], dtype=np.int64)

    def _priorities(self, rows: np.ndarray) -> np.ndarray:
        """:return: :meth:`priorities` of the paths of table rows ``rows``"""
        prio = self._table["last_step" if self.priority == "step" else "total_return"][rows].astype(np.float64)
        seeded = self._table["is_seed"][rows]
        if seeded.any():
            prio[seeded] = prio[~seeded].max() if (~seeded).any() else 0.0
        return prio

    def _distribution(self, rows: np.ndarray, max_len: int | None) -> np.ndarray:
        """:return: :meth:`sampling_distribution` of the paths of table rows ``rows``, segments of ``max_len`` steps"""
        prio = self._priorities(rows)
        weights = np.exp(self.alpha * (prio - prio.max()))
        if max_len is not None:
            weights = weights * (self._table["length"][rows].astype(np.float64) + max_len - 1) / max_len
        return weights / weights.sum()

    def sample(  # type: ignore[override]
        self, batch_size: int, env: VecNormalize | None = None, max_segment_length: int | None = None
    ) -> PathBatch:
        """
        Sample ``batch_size`` path segments: paths drawn with replacement (:meth:`sampling_distribution`, over the
        paths with a known final state), then a window of each (:meth:`_draw_windows`). With ``distinct_paths`` the
        paths are drawn without replacement, so the batch may hold fewer segments.

        :param batch_size: number of segments
        :param env: VecNormalize wrapper whose statistics normalise observations and rewards
        :param max_segment_length: override of the buffer's ``max_segment_length``
        :return: a padded time-major batch
        """
        rows = np.flatnonzero(self._table["sampleable"][: self._n_rows])
        if len(rows) == 0:
            raise ValueError("cannot sample from an empty PathReplayBuffer")
        max_len = max_segment_length if max_segment_length is not None else self.max_segment_length
        probs = self._distribution(rows, max_len)
        size = min(batch_size, int(np.count_nonzero(probs))) if self.distinct_paths else batch_size
        chosen = np.random.choice(len(rows), size=size, replace=not self.distinct_paths, p=probs)
        paths = [self.paths[path_id] for path_id in self._table["path_id"][rows[chosen]].tolist()]
        return self._gather(self._draw_windows(paths, max_len), env)

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
        rows = self._table[: self._n_rows]
        recent = rows["sampleable"] & (rows["env_idx"] >= 0) & (rows["last_step"] >= first_step)
        paths = [self.paths[path_id] for path_id in rows["path_id"][recent].tolist()]  # in increasing id
        if not paths:
            return None
        return self._gather([(path, max(0, first_step - path.first_step), len(path)) for path in paths], env)

    def _final_obs(self, path: Path) -> Any:
        """:return: the state after the path's last stored step (``None`` while its env has not reported it)"""
        return path.final_obs if path.done else self.last_next_obs[path.env_idx]

    def _gather(self, segments: list[tuple[Path, int, int]], env: VecNormalize | None) -> PathBatch:
        """
        :param segments: ``(path, start, end)`` of each column: the path's steps ``start .. end - 1``
        :param env: VecNormalize wrapper for normalisation
        :return: the segments as a padded time-major batch (what :meth:`sample` and :meth:`recent_segments` return)
        """
        assert self.actions is not None and self.rewards is not None
        n_segments = len(segments)
        horizon = max(end - start for _, start, end in segments)
        index = np.zeros((horizon, n_segments), dtype=np.int64)
        mask = np.zeros((horizon, n_segments), dtype=np.float32)
        final_obs = zeros_obs(self.observation_space, (n_segments,))
        terminated = np.zeros(n_segments, dtype=np.float32)
        at_start = np.zeros(n_segments, dtype=np.float32)
        for col, (path, start, end) in enumerate(segments):
            slots = path.slot_list[path.head + start : path.head + end]
            index[: len(slots), col] = slots
            index[len(slots) :, col] = slots[-1]
            mask[: len(slots), col] = 1.0
            if end < len(path):
                final_obs[col] = self.observations[path.slot_list[path.head + end]]
            else:
                final_obs[col] = self._final_obs(path)
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
        )

    def _obs_tensor(self, obs: Any, env: VecNormalize | None) -> Any:
        """:return: the observations normalised by ``env`` as tensors (a dict of them for a Dict space)"""
        normalized = self._normalize_obs(obs, env)
        if isinstance(normalized, dict):
            return {key: self.to_torch(np.asarray(value)) for key, value in normalized.items()}
        return self.to_torch(np.asarray(normalized))

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        raise NotImplementedError("PathReplayBuffer samples paths: use sample()")

    def transitions(self) -> dict[str, Any]:
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
        paths = [path for path in self.paths.values() if len(path) > 0 and self._final_obs(path) is not None]
        lengths = [len(path) for path in paths]
        slots = np.array([slot for path in paths for slot in path.slots], dtype=np.int64)
        ends = np.zeros(len(slots), dtype=bool)  # the last step of each path
        ends[np.cumsum(lengths, dtype=np.int64) - 1] = True
        if self.observations is None:
            observations = next_observations = zeros_obs(self.observation_space, (0,))
        else:
            observations = self.observations[slots]
            next_observations = self.observations[np.where(ends, 0, np.roll(slots, -1))]  # the next step's slot
            finals = zeros_obs(self.observation_space, (len(paths),))
            for row, path in enumerate(paths):
                finals[row] = self._final_obs(path)
            next_observations[ends] = finals

        def per_step(values: list[Any], dtype: Any) -> np.ndarray:
            return np.repeat(np.array(values, dtype=dtype), lengths)

        return {
            "observations": observations,
            "next_observations": next_observations,
            "actions": self.actions[slots] if self.actions is not None else np.zeros((0, self.action_dim), np.float32),
            "rewards": self.rewards[slots] if self.rewards is not None else np.zeros(0, np.float32),
            "dones": ends & per_step([path.done for path in paths], bool),
            "timeouts": ends & per_step([path.done and not path.terminated for path in paths], bool),
            "path_ids": per_step([path.path_id for path in paths], np.int64),
            "env_idx": per_step([path.env_idx for path in paths], np.int64),
        }

    # ------------------------------------------------------------------ files
    def save_npz(self, file: str | os.PathLike[str] | IO[bytes]) -> None:
        """
        Write the buffer (data, paths, collection state, settings) to an ``.npz`` file that cannot run code when loaded,
        at ``file`` exactly (no suffix is appended). :meth:`load_npz` restores a buffer that samples exactly as this one.

        :param file: a path, or a binary file open for writing
        """
        write_replay_npz(self, file)

    @classmethod
    def load_npz(
        cls,
        file: str | os.PathLike[str] | IO[bytes],
        observation_space: spaces.Space,
        action_space: spaces.Space,
        device: th.device | str = "auto",
        name: str | None = None,
        max_buffer_size: int | None = None,
    ) -> Self:
        """
        Read a buffer written by :meth:`save_npz` (``allow_pickle=False``), every size checked before anything is
        allocated and every value before it is used (:func:`~sb3_pcl.common.path_buffer.replay_file.read_replay_npz`).

        :param file: a path, or a binary file open for reading
        :param observation_space: the observation space of the model that loads it
        :param action_space: its action space
        :param device: PyTorch device of the sampled tensors
        :param name: how to name the file in error messages (default: its path or name)
        :param max_buffer_size: the largest ``buffer_size`` accepted (``None``: no limit but the archive's sizes)
        :return: the buffer, sampling exactly as the saved one (same batches for the same NumPy random state)
        :raises ValueError: naming the file and the problem (a pickle, a corrupt file, other spaces, bad contents, ...)
        """
        name = name if name is not None else replay_file_name(file)
        if isinstance(file, (str, os.PathLike)):
            with open(file, "rb") as handle:
                return cls.load_npz(handle, observation_space, action_space, device, name, max_buffer_size)
        state = read_replay_npz(file, name, observation_space, action_space, max_buffer_size, cls.SETTINGS)
        settings = state["settings"]
        try:
            buffer = cls(state["buffer_size"], observation_space, action_space, device, state["n_envs"], **settings)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name} is not a valid PathReplayBuffer file: invalid settings {settings} ({error})") from None
        for key in ("observations", "actions", "rewards", "free_slots", "next_fresh_slot", "open_paths", "last_next_obs"):
            setattr(buffer, key, state[key])
        buffer.add_count = state["add_count"]
        for fields in state["paths"]:
            buffer._track(Path(**fields))
        buffer.next_path_id = state["next_path_id"]
        return buffer
