"""
Path replay for recurrent policies: :class:`RecurrentPathReplayBuffer`, a
:class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` whose batches also carry each segment's path from its first
stored step (:class:`RecurrentPathBatch`), as sb3-contrib keeps its recurrent buffers in ``common.recurrent``.

A recurrent policy's state at a segment depends on the whole path before it. Replaying the path from the start of its
episode with the current parameters rebuilds that state exactly; a state stored at collection time would be stale
(computed by older parameters). The buffer stores exactly what a :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`
stores, so a replay file of either class loads into the other.
"""

from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl.common.dict_obs import zeros_obs
from sb3_pcl.common.path_buffer import Path, PathBatch, PathReplayBuffer


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


@dataclass(frozen=True, eq=False)
class RecurrentPathBatch(PathBatch):
    """A :class:`~sb3_pcl.common.path_buffer.PathBatch` with the segments' paths from their first stored step."""

    history: PathHistory
    """The path of each segment from its first stored step to the segment's final state."""


class RecurrentPathReplayBuffer(PathReplayBuffer):
    """
    A :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` whose batches (``sample``, ``recent_segments``) are
    :class:`RecurrentPathBatch` es: each segment comes with its path from the path's first stored step, so that a
    recurrent policy can rebuild its state at the segment by replaying the path from the start of the episode. It takes
    the same arguments and stores the same data.
    """

    def _gather(self, segments: list[tuple[Path, int, int]], env: VecNormalize | None) -> RecurrentPathBatch:
        """
        :param segments: ``(path, start, end)`` of each column: the path's steps ``start .. end - 1``
        :param env: VecNormalize wrapper for normalisation
        :return: the segments as a padded time-major batch, with their path histories
        """
        batch = super()._gather(segments, env)
        columns = {field.name: getattr(batch, field.name) for field in fields(batch)}
        return RecurrentPathBatch(**columns, history=self._gather_history(segments, env))

    def _gather_history(self, segments: list[tuple[Path, int, int]], env: VecNormalize | None) -> PathHistory:
        """
        The segments' paths from their first stored step to the segment's final state (see :class:`PathHistory`).

        :param segments: ``(path, start, end)`` of each column
        :param env: VecNormalize wrapper for normalisation
        :return: the time-major history of each column
        """
        horizon = max(end for _, _, end in segments) + 1
        n_segments = len(segments)
        observations = zeros_obs(self.observation_space, (horizon, n_segments))
        actions = np.zeros((horizon, n_segments, self.action_dim), dtype=np.float32)
        offsets = np.zeros(n_segments, dtype=np.int64)
        for col, (path, start, end) in enumerate(segments):
            slots = path.slot_list[path.head : path.head + end]
            final = self.observations[path.slot_list[path.head + end]] if end < len(path) else self._final_obs(path)
            observations[:end, col] = self.observations[slots]
            observations[end:, col] = final
            actions[:end, col] = self.actions[slots]
            offsets[col] = start
        return PathHistory(
            observations=self._obs_tensor(observations, env),
            actions=self.to_torch(actions),
            offsets=th.as_tensor(offsets, device=self.device),
        )
