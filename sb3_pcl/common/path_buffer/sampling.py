"""
Sampling of a :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`: prioritised path draws, segment windows, and the
gathering of segments into padded time-major :class:`~sb3_pcl.common.path_buffer.paths.PathBatch` es.

Paths are drawn with probability ``p_i ~ exp(alpha * (prio_i - max prio))``, where the priority is the recency of the
path (``priority="step"``: the buffer step of its last transition) or its return (``priority="return"``); seeded
paths always carry the top priority.
"""

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl.common.path_buffer.paths import Path, PathBatch
from sb3_pcl.common.path_buffer.storage import PathStorage


class PathSampling(PathStorage):
    """Sampling of :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` (prioritised paths, segment windows)."""

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
        """
        :param segments: ``(path, start, end)`` of each column: the path's steps ``start .. end - 1``
        :param env: VecNormalize wrapper for normalisation
        :return: the segments as a padded time-major batch (what :meth:`sample` and :meth:`recent_segments` return)
        """
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
        )

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        raise NotImplementedError("PathReplayBuffer samples paths: use sample()")
