"""
Episode-aware replay for path-consistency learning: :class:`PathReplayBuffer`.

Each environment of the VecEnv writes into its current *path* (an episode, or the part of it collected so far); a path
is a list of storage slots, so paths of different envs may interleave in storage (:mod:`.storage`). Sampling returns
padded, time-major segments of whole paths (or of windows of at most ``max_segment_length`` steps) together with the
information needed to bootstrap at their far end (:mod:`.sampling`). The buffer saves to and loads from an ``.npz``
file that cannot run code (:mod:`.persistence`).
"""

import os
from collections.abc import Callable
from typing import IO, Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.preprocessing import get_action_dim, get_obs_shape
from stable_baselines3.common.utils import get_device

from sb3_pcl.common.dict_obs import ObsDict, obs_layout
from sb3_pcl.common.path_buffer.paths import EVICTION_STRATEGIES, PATH_HINT, PRIORITY_MODES, STORAGE_HINT, Path
from sb3_pcl.common.path_buffer.persistence import read_replay_arrays, restore_buffer, write_replay_npz
from sb3_pcl.common.path_buffer.replay_file import RETIRED_SETTINGS, replay_file_name
from sb3_pcl.common.path_buffer.sampling import PathSampling
from sb3_pcl.common.validation import check_storable


class PathReplayBuffer(PathSampling):
    """
    Replay buffer of paths (episodes) for PCL-style algorithms.

    **SB3's ReplayBuffer attributes.** SB3's ``ReplayBuffer`` is a circular buffer of ``(buffer_size, n_envs, ...)``
    arrays written at a cursor ``pos``. This buffer evicts whole paths (or the oldest steps of a running one) instead of
    the oldest row, so its transitions sit in ``buffer_size`` *slots*, one transition per slot and no ``n_envs`` axis,
    and each stored :class:`~sb3_pcl.common.path_buffer.paths.Path` lists its slots (``paths[i].slots``). Like SB3's
    ``HerReplayBuffer``, an episode-aware buffer, it keeps SB3's attributes with their meaning per slot:

    - ``observations`` ``(buffer_size, *obs_shape)`` (for a ``Dict`` space an
      :class:`~sb3_pcl.common.dict_obs.ObsDict` of such arrays, one per key, in the sub-space's dtype, as SB3's
      ``DictReplayBuffer``), ``actions`` ``(buffer_size, action_dim)`` (float32, as sampled by the policy) and
      ``rewards`` ``(buffer_size,)`` (float32); ``dones`` ``(buffer_size,)`` (float32, 1 where the slot's transition
      ended its path) and ``timeouts`` (1 where it ended it without terminating: a time limit or a cut, which
      bootstraps). All are ``None`` until the first ``add``.
    - ``pos``: where the next transition is written. Fresh slots are written in order, so until the storage first fills
      ``pos == size()`` and ``observations[:pos]`` are exactly the stored transitions in the order they came, as in
      SB3; afterwards ``pos`` is the slot the next write reuses, or, when ``full``, the slot of the oldest transition.
    - ``full``: every slot holds a transition (``size() == buffer_size``, as in SB3). Unlike SB3's, it can become
      ``False`` again, when evicting a whole path frees several slots.
    - ``next_observations`` does not exist as an array (a next observation is the path's next stored one or its final
      state): :meth:`transitions` returns every stored transition in path order with its next observation and SB3's
      ``dones`` and ``timeouts``.

    Seeded paths (expert demonstrations, ``add_path(..., seed=True)``) are never evicted and always carry the top
    priority.

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
        distinct_paths: bool = False,
    ):
        # Not BaseBuffer.__init__: pos and full are derived from the slots (properties), not a cursor of their own
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
        self._clear()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """
        Restore a pickled buffer.

        The :class:`PathIndex` (and the eviction order) is always rebuilt from the paths, whichever version pickled the
        buffer; one pickled before ``distinct_paths`` existed samples with replacement, as it did.

        :param state: the pickled attributes
        """
        # pos and full: an SB3 cursor, not ours; the retired settings: older versions' (RETIRED_SETTINGS)
        state = {key: value for key, value in state.items() if key not in ("pos", "full", *RETIRED_SETTINGS)}
        self.__dict__.update(state)
        self.__dict__.setdefault("distinct_paths", False)
        self.__dict__.setdefault("next_fresh_slot", self.buffer_size)  # older pickles list every free slot
        self.__dict__.setdefault("obs_layout", obs_layout(self.observation_space))  # pickled before Dict observations
        self._rebuild_index()

    # ------------------------------------------------------------------ SB3's ReplayBuffer attributes
    @property
    def full(self) -> bool:
        """Whether every slot holds a transition (``size() == buffer_size``, as in SB3); read-only."""
        return self.n_stored >= self.buffer_size

    @full.setter
    def full(self, value: bool) -> None:
        raise AttributeError("PathReplayBuffer.full is read-only: it says whether every slot holds a transition")

    @property
    def pos(self) -> int:
        """
        SB3's write position, read-only: the slot the next transition is written to while one is free (the latest
        freed slot, else the first never used one). Until the storage first fills, ``pos == size()`` and
        ``observations[:pos]`` are the stored transitions in the order they came, as in SB3. When :attr:`full`, the
        slot of the oldest stored transition (where SB3's cursor points then: the row it overwrites next; this buffer
        evicts a path first, see ``eviction``).
        """
        if self.free_slots:
            return self.free_slots[-1]
        if self.next_fresh_slot < self.buffer_size:
            return self.next_fresh_slot
        oldest = min((path for path in self.paths.values() if len(path) > 0), key=lambda path: path.first_step)
        return oldest.slot_at(0)

    @pos.setter
    def pos(self, value: int) -> None:
        raise AttributeError("PathReplayBuffer.pos is read-only: it is where the next transition is written")

    @property
    def dones(self) -> np.ndarray | None:
        """
        SB3's ``dones`` per slot: ``(buffer_size,)`` float32, 1 where the slot's transition ended its path (an episode
        end, or a path cut when a new ``learn`` reset the envs), 0 elsewhere, free slots included; ``None`` until the
        first ``add``. A new array on each read.
        """
        return self._last_slot_flags(lambda path: path.done)

    @property
    def timeouts(self) -> np.ndarray | None:
        """
        SB3's ``timeouts`` per slot: ``(buffer_size,)`` float32, 1 where the slot's transition ended its path without
        terminating (a time limit with ``handle_timeout_termination``, or a cut path), so that it bootstraps; ``None``
        until the first ``add``. A new array on each read.
        """
        return self._last_slot_flags(lambda path: path.done and not path.terminated)

    def _last_slot_flags(self, ends: Callable[[Path], bool]) -> np.ndarray | None:
        """
        :param ends: whether a stored path counts
        :return: per slot, 1.0 at the last slot of each path that counts (``None`` before the storage is allocated)
        """
        if self.observations is None:
            return None
        flags = np.zeros(self.buffer_size, dtype=np.float32)
        flags[[path.slot_at(len(path) - 1) for path in self.paths.values() if len(path) > 0 and ends(path)]] = 1.0
        return flags

    @property
    def next_observations(self) -> np.ndarray:
        """Not available as an array (raises ``AttributeError``): see :meth:`transitions`."""
        raise AttributeError(
            "PathReplayBuffer has no 'next_observations' array: a next observation is the path's next stored one or "
            "its final state; use transitions()['next_observations'] (see the class docstring)"
        )

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

    # ------------------------------------------------------------------ files
    def save_npz(self, file: str | os.PathLike[str] | IO[bytes]) -> None:
        """
        Write the buffer (data, paths, collection state, settings) to an ``.npz`` file that cannot run code when loaded.

        The file holds arrays only, with the scalars and settings as JSON in its ``metadata`` array; it is written at
        ``file`` exactly (no suffix is appended). :meth:`load_npz` restores a buffer that samples exactly as this one.

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
        arrays, metadata = read_replay_arrays(file, name, observation_space, action_space, max_buffer_size, cls.SETTINGS)
        return restore_buffer(cls, arrays, metadata, observation_space, action_space, device, name)
