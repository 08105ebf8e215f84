"""
The model's replay buffer: :class:`ReplayAccess`, a base of :class:`~sb3_pcl.PCL` that chooses the buffer's class and
settings, saves and loads the buffer as a file that cannot run code, and seeds it with demonstrations.
"""

import io
import pathlib

from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy

from sb3_pcl.common.demonstrations import DemonstrationSource, seed_replay
from sb3_pcl.common.path_buffer import PathReplayBuffer, load_replay_file, save_replay_file, without_retired_settings


class ReplayAccess(OffPolicyAlgorithm):
    """SB3's replay files, in the npz format, and demonstrations for :class:`~sb3_pcl.PCL`'s path replay."""

    policy: ActorCriticPolicy
    replay_buffer: PathReplayBuffer  # type: ignore[assignment]
    max_segment_length: int | None

    def _configure_replay_buffer(self) -> None:
        """
        Before the buffer is built: ``replay_buffer_class`` defaults to ``PathReplayBuffer`` (another class must
        subclass it), and the buffer takes the model's ``max_segment_length`` unless ``replay_buffer_kwargs`` sets it.
        """
        if self.replay_buffer_class is None:
            self.replay_buffer_class = PathReplayBuffer  # type: ignore[assignment]
        elif not issubclass(self.replay_buffer_class, PathReplayBuffer):  # type: ignore[arg-type]
            raise ValueError(f"replay_buffer_class must be a PathReplayBuffer subclass, got {self.replay_buffer_class}")
        self.replay_buffer_kwargs = {
            "max_segment_length": self.max_segment_length,
            **without_retired_settings(self.replay_buffer_kwargs),  # a model saved by an earlier version records them
        }

    def add_demonstrations(self, episodes: DemonstrationSource) -> int:
        """
        Seed the replay with demonstrations: paths never evicted, sampled with the top priority (checked first, see
        :func:`~sb3_pcl.common.demonstrations.seed_replay`). Observations and rewards must be the env's raw ones. The
        replay is not saved with the model: after ``load``, call this again
        (:class:`~sb3_pcl.common.demonstrations.DemonstrationsCallback` does it at the start of ``learn``).

        :param episodes: episode dicts (``observations`` ``(T + 1, *obs_shape)``, ``actions``, ``rewards``,
            ``terminated``), e.g. from :func:`~sb3_pcl.common.demonstrations.record_episodes`, an episodes file, or a
            local Minari dataset (a ``minari.MinariDataset``, a dataset id or a dataset folder; never downloaded: see
            :mod:`sb3_pcl.common.minari_io`)
        :return: the number of paths added
        """
        if self.replay_buffer is None:
            raise ValueError("The model has no replay buffer yet: call add_demonstrations after _setup_model()")
        scale_action = self.policy.scale_action if self.policy.squash_output else None  # stored as the policy samples
        n_paths, n_transitions = seed_replay(
            self.replay_buffer, episodes, self.observation_space, self.action_space, scale_action
        )
        if self.verbose >= 1:
            print(f"Seeded the replay with {n_paths} demonstration paths ({n_transitions} transitions)")
        return n_paths

    def save_replay_buffer(self, path: str | pathlib.Path | io.BufferedIOBase) -> None:
        """
        Save the replay buffer to a file that cannot run code when loaded (unlike SB3's pickle): an ``.npz`` of arrays
        with JSON metadata (:meth:`~sb3_pcl.common.path_buffer.PathReplayBuffer.save_npz`). A ``str`` or ``pathlib.Path``
        without suffix gets ``.npz`` appended (SB3 appends ``.pkl``).

        :param path: the file (a path, created with its folders if needed, or a binary file open for writing)
        """
        assert self.replay_buffer is not None, "The replay buffer is not defined"
        save_replay_file(self.replay_buffer, path, self.verbose)

    def load_replay_buffer(
        self, path: str | pathlib.Path | io.BufferedIOBase, truncate_last_traj: bool = True, allow_pickle: bool = False
    ) -> None:
        """
        Load a replay buffer saved with :meth:`save_replay_buffer` (read with ``allow_pickle=False``; every array is
        checked, and every size before anything is allocated: see
        :meth:`~sb3_pcl.common.path_buffer.PathReplayBuffer.load_npz`).
        It samples exactly as the saved one. A replay saved with a larger ``buffer_size`` than this model's is refused
        (create the model with that ``buffer_size``).

        Pickled buffers (SB3's format, which this package also wrote before) are refused with a ``ValueError``, because
        unpickling runs any code the file holds. ``allow_pickle=True`` loads one anyway, with a warning: only for files
        you trust; call :meth:`save_replay_buffer` then to convert it.

        :param path: the file (a ``str`` or ``pathlib.Path`` that does not exist is tried with ``.npz`` appended)
        :param truncate_last_traj: unused (kept for SB3's signature)
        :param allow_pickle: also accept a pickled ``PathReplayBuffer`` (runs the file's code: trusted files only)
        """
        buffer_class = self.replay_buffer_class if self.replay_buffer_class is not None else PathReplayBuffer
        buffer = load_replay_file(
            path,
            buffer_class,  # type: ignore[arg-type]
            self.observation_space,
            self.action_space,
            device=self.device,
            allow_pickle=allow_pickle,
            verbose=self.verbose,
            max_buffer_size=self.buffer_size,
        )
        buffer.device = self.device
        self.replay_buffer = buffer
