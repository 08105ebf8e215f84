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

        # Storage, allocated on first use.
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
        return sum(1 for path in self.paths.values() if path.is_seed)

    @property
    def n_seeded_transitions(self) -> int:
        """:return: number of transitions held by the seeded paths"""
        return sum(len(path) for path in self.paths.values() if path.is_seed)

    def reset(self) -> None:
        """Remove every path, seeded ones included."""
        self.__init__(  # type: ignore[misc]
            self.buffer_size,
            self.observation_space,
            self.action_space,
            device=self.device,
            n_envs=self.n_envs,
            alpha=self.alpha,
            priority=self.priority,
            eviction=self.eviction,
            max_segment_length=self.max_segment_length,
            handle_timeout_termination=self.handle_timeout_termination,
            replay_from_start=self.replay_from_start,
        )

    def _new_path(self, env_idx: int, is_seed: bool = False) -> Path:
        path = Path(path_id=self.next_path_id, env_idx=env_idx, first_step=self.add_count, is_seed=is_seed)
        self.paths[path.path_id] = path
        self.next_path_id += 1
        return path

    def _priority_of(self, path: Path) -> float:
        return float(path.last_step if self.priority == "step" else path.total_return)

    def _evictable(self) -> list[Path]:
        return [p for p in self.paths.values() if p.done and not p.is_seed]

    def _take_slot(self, writer: Path) -> int:
        while not self.free_slots:
            self._make_room(writer)
        return self.free_slots.pop()

    def _make_room(self, writer: Path) -> None:
        candidates = self._evictable()
        if candidates:
            if self.eviction == "fifo":
                victim = min(candidates, key=lambda p: p.path_id)
            elif self.eviction == "rand":
                victim = candidates[np.random.randint(len(candidates))]
            else:
                victim = min(candidates, key=lambda p: (self._priority_of(p), p.path_id))
            self._remove_path(victim)
            return
        # Only running (or seeded) paths are stored: drop the oldest transition of the longest running path.
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

    def _remove_path(self, path: Path) -> None:
        self.free_slots.extend(path.slots)
        self.n_stored -= len(path.slots)
        del self.paths[path.path_id]

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
        return path.path_id

    # ------------------------------------------------------------------ sampling
    def priorities(self, path_ids: np.ndarray | None = None) -> np.ndarray:
        """
        :param path_ids: the paths (default: all stored, in insertion order)
        :return: the priority of each path; seeded paths get the top priority of the others
        """
        if path_ids is None:
            path_ids = np.array(sorted(self.paths), dtype=np.int64)
        paths = [self.paths[int(i)] for i in path_ids]
        prio = np.array([self._priority_of(p) for p in paths], dtype=np.float64)
        seeded = np.array([p.is_seed for p in paths], dtype=bool)
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
        if path_ids is None:
            path_ids = np.array(sorted(self.paths), dtype=np.int64)
        prio = self.priorities(path_ids)
        weights = np.exp(self.alpha * (prio - prio.max()))
        max_len = max_segment_length if max_segment_length is not None else self.max_segment_length
        if max_len is not None:
            lengths = np.array([len(self.paths[int(i)]) for i in path_ids], dtype=np.float64)
            weights = weights * (lengths + max_len - 1) / max_len
        return weights / weights.sum()

    def _sampleable_ids(self) -> np.ndarray:
        return np.array(sorted(pid for pid, p in self.paths.items() if len(p) > 0 and self._final_obs(p) is not None))

    def _final_obs(self, path: Path) -> np.ndarray | None:
        return path.final_obs if path.done else self.last_next_obs[path.env_idx]

    def sample(  # type: ignore[override]
        self, batch_size: int, env: VecNormalize | None = None, max_segment_length: int | None = None
    ) -> PathBatch:
        """
        Sample ``batch_size`` path segments: paths drawn with replacement (:meth:`sampling_distribution`), then a window.

        :param batch_size: number of segments
        :param env: VecNormalize wrapper whose statistics normalise observations and rewards
        :param max_segment_length: override of the buffer's ``max_segment_length``
        :return: a padded time-major batch
        """
        ids = self._sampleable_ids()
        if len(ids) == 0:
            raise ValueError("cannot sample from an empty PathReplayBuffer")
        max_len = max_segment_length if max_segment_length is not None else self.max_segment_length
        probs = self.sampling_distribution(ids, max_len)
        chosen = np.random.choice(len(ids), size=batch_size, replace=True, p=probs)
        segments = []
        for path_id in ids[chosen]:
            path = self.paths[int(path_id)]
            length = len(path)
            if max_len is not None and length > 1:
                # A window of max_len steps whose start is uniform in [-(max_len - 1), length - 1], clipped to
                # the path: every transition is covered by exactly max_len of these windows, the first and
                # last ones included (a window drawn inside [0, length - max_len] would rarely see the end).
                start = np.random.randint(-(max_len - 1), length)
                segments.append((path, max(0, start), min(length, start + max_len)))
            else:
                segments.append((path, 0, length))
        return self._gather(segments, env)

    def recent_segments(self, n_steps: int, env: VecNormalize | None = None) -> PathBatch | None:
        """
        The transitions of the last ``n_steps`` vectorised steps, one segment per (env, path) (the online batch).

        :param n_steps: how many of the latest ``add`` calls to cover
        :param env: VecNormalize wrapper for normalisation
        :return: the batch, or ``None`` when nothing recent is stored
        """
        first_step = self.add_count - n_steps + 1
        segments = []
        for path in self.paths.values():
            if path.env_idx < 0 or len(path) == 0 or path.last_step < first_step or self._final_obs(path) is None:
                continue
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
