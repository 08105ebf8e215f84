"""What a model's ``save_replay_buffer`` / ``load_replay_buffer`` do with a :class:`PathReplayBuffer`."""

import io
import pathlib
import pickle
import warnings

import torch as th
from gymnasium import spaces
from stable_baselines3.common.save_util import open_path

from sb3_pcl.common.path_buffer.buffer import PathReplayBuffer
from sb3_pcl.common.path_buffer.replay_file import replay_file_kind, replay_file_name


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
    the file holds. Either way the buffer comes back as a ``buffer_class``: what the loading model samples with,
    whichever class saved it (the stored paths are the same).

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
            if type(buffer) is not buffer_class:  # the same stored state, sampled as the loading model's class
                converted = buffer_class.__new__(buffer_class)
                converted.__setstate__(vars(buffer))
                return converted
            return buffer
        return buffer_class.load_npz(file, observation_space, action_space, device, name, max_buffer_size)  # type: ignore[arg-type]
    finally:
        if isinstance(path, (str, pathlib.Path)):
            file.close()
