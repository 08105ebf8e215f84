"""
The replay file format of :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`: an ``.npz`` of arrays with JSON
metadata, read with ``allow_pickle=False``. This module names the arrays and checks a file's kind, metadata and array
headers before anything is read or allocated.
"""

import json
import os
import zipfile
import zlib
from typing import IO, Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.preprocessing import get_action_dim

from sb3_pcl.common.dict_obs import obs_layout, obs_member
from sb3_pcl.common.npz_files import ArrayHeader, check_header
from sb3_pcl.common.path_buffer.paths import Path

#: the ``format`` entry of a replay file's metadata
REPLAY_FILE_FORMAT = "sb3_pcl.PathReplayBuffer"
#: the version :meth:`PathReplayBuffer.save_npz` writes (and the newest :meth:`PathReplayBuffer.load_npz` reads)
REPLAY_FILE_VERSION = 2
#: what a replay file is, in messages
REPLAY_FILE_KIND = "PathReplayBuffer"
#: settings that replay files and saved models of earlier versions record, which no buffer takes any more: read, then
#: ignored. ``replay_from_start`` said whether batches carry each segment's path from its first step, which is now what
#: a buffer class does (a buffer file loads into any model, whose buffer class decides)
RETIRED_SETTINGS = ("replay_from_start",)
#: the largest metadata (JSON) array a replay file may hold, in bytes
MAX_METADATA_BYTES = 1 << 20
#: the per-path arrays of a replay file (``path_<name>``), with their dtype
PATH_FIELDS: dict[str, Any] = {
    "ids": np.int64,
    "env_idx": np.int64,
    "first_step": np.int64,
    "last_step": np.int64,
    "total_return": np.float64,
    "done": bool,
    "terminated": bool,
    "is_seed": bool,
    "dropped_head": bool,
    "has_final": bool,
    "lengths": np.int64,
}
_FILE_MAGIC = {b"PK\x03\x04": "npz", b"PK\x05\x06": "npz", b"\x93NUMPY": "npy", b"\x80": "pickle"}


def path_field(path: Path, name: str) -> Any:
    """:return: the value of a :data:`PATH_FIELDS` entry for ``path``"""
    if name == "ids":
        return path.path_id
    if name == "has_final":
        return path.final_obs is not None
    if name == "lengths":
        return len(path)
    return getattr(path, name)


def replay_file_name(file: Any) -> str:
    """
    :param file: a path or a file object
    :return: how to name it in a message
    """
    if isinstance(file, (str, os.PathLike)):
        return repr(os.fspath(file))
    return repr(getattr(file, "name", f"<{type(file).__name__}>"))


def replay_file_kind(file: IO[bytes]) -> str:
    """
    Tell a replay file's kind from its first bytes, without moving the file's position.

    :param file: a binary file open for reading (seekable)
    :return: ``"npz"`` (a zip archive), ``"npy"``, ``"pickle"`` (SB3's replay files), ``"empty"`` or ``"other"``
    """
    start = file.tell()
    header = file.read(8)
    file.seek(start)
    if not header:
        return "empty"
    return next((kind for magic, kind in _FILE_MAGIC.items() if header.startswith(magic)), "other")


def not_npz_message(name: str, kind: str) -> str:
    """
    :param name: the file's name
    :param kind: its :func:`replay_file_kind`, not ``"npz"``
    :return: why it is refused as a replay file
    """
    if kind == "pickle":
        return (
            f"{name} is a pickle (SB3's replay buffer format, or a replay saved by an older sb3_pcl), not a PathReplayBuffer "
            ".npz file: unpickling it could run arbitrary code, so it is refused. If you trust the file, load it with "
            "load_replay_buffer(path, allow_pickle=True) and save it again to convert it"
        )
    if kind == "empty":
        return f"{name} is empty, not a PathReplayBuffer .npz file"
    return (
        f"{name} is not a PathReplayBuffer .npz file (it is {'a single .npy array' if kind == 'npy' else 'not a zip archive'})"
    )


def without_retired_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """
    :param settings: a buffer's settings, or a model's ``replay_buffer_kwargs``, maybe saved by an earlier version
    :return: a copy without the :data:`RETIRED_SETTINGS`
    """
    return {key: value for key, value in settings.items() if key not in RETIRED_SETTINGS}


def refuse_retired_settings(replay_buffer_kwargs: dict[str, Any] | None) -> None:
    """
    :param replay_buffer_kwargs: a model's ``replay_buffer_kwargs``, as given to its constructor
    :raises ValueError: naming the :data:`RETIRED_SETTINGS` it holds
    """
    retired = sorted(set(replay_buffer_kwargs or {}) & set(RETIRED_SETTINGS))
    if retired:
        raise ValueError(
            f"replay_buffer_kwargs {retired}: no longer settings of the replay buffer (what a batch carries is the "
            "buffer class's behaviour, and each algorithm defaults to the class its policy needs): remove them"
        )


def read_metadata(raw: np.ndarray, name: str, settings: tuple[str, ...]) -> dict[str, Any]:
    """
    :param raw: the ``metadata`` array of a replay file
    :param name: the file's name, for the messages
    :param settings: the settings the buffer class records (``SETTINGS``)
    :return: its replay metadata (format, version and entry types checked)
    :raises ValueError: when the ``.npz`` is of another kind, of a newer version, or its metadata is malformed
    """
    try:
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"a {raw.dtype} array of shape {raw.shape}")
        metadata = json.loads(raw.tobytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: unreadable metadata ({error})") from None
    if not isinstance(metadata, dict) or metadata.get("format") != REPLAY_FILE_FORMAT:
        raise ValueError(f"{name} is an .npz file of another kind (its metadata is not a {REPLAY_FILE_FORMAT} one)")
    version = metadata.get("version")
    if not isinstance(version, int) or version > REPLAY_FILE_VERSION:
        raise ValueError(
            f"{name} has replay format version {version!r}; this sb3_pcl reads versions up to {REPLAY_FILE_VERSION}"
        )
    expected = {
        "buffer_size": int,
        "n_envs": int,
        "obs_shape": (list, dict),
        "obs_dtype": (str, dict),
        "action_dim": int,
        "settings": dict,
        "allocated": bool,
        "next_path_id": int,
        "add_count": int,
    }
    for key, kind in expected.items():
        value: Any = metadata.get(key)
        negative_int = kind is int and (isinstance(value, bool) or (isinstance(value, int) and value < 0))
        if not isinstance(value, kind) or negative_int:  # type: ignore[arg-type]
            raise ValueError(f"{name} is not a valid PathReplayBuffer file: metadata {key!r} is {value!r}")
    unknown = set(metadata["settings"]) - set(settings) - set(RETIRED_SETTINGS)
    if unknown:
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: unknown settings {sorted(unknown)}")
    metadata["settings"] = without_retired_settings(metadata["settings"])
    fresh = metadata.get("next_fresh_slot", 0)
    if isinstance(fresh, bool) or not isinstance(fresh, int):
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: metadata 'next_fresh_slot' is {fresh!r}")
    return metadata


#: the arrays a replay file may hold
REPLAY_ARRAYS = frozenset(
    {
        "metadata",
        "free_slots",
        "open_paths",
        "last_next_obs",
        "last_next_obs_known",
        "path_slots",
        "path_final_obs",
        "observations",
        "actions",
        "rewards",
        *(f"path_{key}" for key in PATH_FIELDS),
    }
)
#: the arrays of a replay file that hold observations (one array each, or one per key of a Dict space)
OBS_ARRAYS = ("observations", "last_next_obs", "path_final_obs")


def replay_arrays(observation_space: spaces.Space) -> frozenset[str]:
    """
    :param observation_space: the loading model's observation space
    :return: the arrays a replay file for it may hold: :data:`REPLAY_ARRAYS`, with the observation arrays named per
        key for a Dict space (``observations.<key>``, ...)
    """
    layout = obs_layout(observation_space)
    if None in layout:
        return REPLAY_ARRAYS
    return (REPLAY_ARRAYS - set(OBS_ARRAYS)) | {obs_member(name, key) for name in OBS_ARRAYS for key in layout}


def obs_metadata(observation_space: spaces.Space) -> dict[str, Any]:
    """:return: the ``obs_shape`` and ``obs_dtype`` entries of a replay file's metadata (dicts by key for a Dict space)"""
    layout = obs_layout(observation_space)
    if None in layout:
        shape, dtype = layout[None]
        return {"obs_shape": list(shape), "obs_dtype": dtype.name}
    return {
        "obs_shape": {key: list(shape) for key, (shape, _) in layout.items()},
        "obs_dtype": {key: dtype.name for key, (_, dtype) in layout.items()},
    }


def _shape_text(shape: Any) -> str:
    """:return: an ``obs_shape`` metadata entry as a tuple, or a dict of tuples by key"""
    if isinstance(shape, dict):
        return str({key: tuple(value) if isinstance(value, list) else value for key, value in shape.items()})
    return str(tuple(shape))


def obs_members(name: str, obs: Any) -> dict[str, np.ndarray]:
    """:return: the ``.npz`` arrays holding the observations ``name``: one, or one per key of an :class:`ObsDict`"""
    if isinstance(obs, dict):
        return {obs_member(name, key): value for key, value in obs.items()}
    return {name: obs}


def read_npz_arrays(file: IO[bytes], name: str, keys: list[str]) -> dict[str, np.ndarray]:
    """:return: the arrays ``keys`` of an ``.npz`` whose headers were checked (``allow_pickle=False``)"""
    start = file.tell()
    try:
        with np.load(file, allow_pickle=False) as data:
            return {key: np.asarray(data[key]) for key in keys}
    except (OSError, EOFError, KeyError, ValueError, TypeError, zipfile.BadZipFile, zlib.error) as error:
        raise ValueError(
            f"{name} is not a valid PathReplayBuffer .npz file (unreadable: truncated or corrupt?): {error}"
        ) from error
    finally:
        file.seek(start)


def check_replay_headers(
    headers: dict[str, ArrayHeader],
    metadata: dict[str, Any],
    observation_space: spaces.Space,
    action_space: spaces.Space,
    name: str,
    max_buffer_size: int | None,
) -> None:
    """
    Check, before any array is read, that the metadata suits the loading model and that every array declares the
    dtype and shape the metadata implies: no array is larger than a buffer of ``max_buffer_size`` needs.

    :param headers: the file's array headers
    :param metadata: its metadata (:func:`read_metadata`)
    :param observation_space: the loading model's observation space
    :param action_space: its action space
    :param name: the file's name, for the messages
    :param max_buffer_size: the largest ``buffer_size`` accepted (``None``: no limit)
    :raises ValueError: naming the file and the first size or array that does not fit
    """
    layout = obs_layout(observation_space)
    action_dim = get_action_dim(action_space)
    expected_obs = obs_metadata(observation_space)
    saved = (metadata["obs_shape"], metadata["obs_dtype"], metadata["action_dim"])
    if saved != (expected_obs["obs_shape"], expected_obs["obs_dtype"], action_dim):
        raise ValueError(
            f"{name} holds a replay of observations of shape {_shape_text(saved[0])} ({saved[1]}) and actions of "
            f"dimension {saved[2]}; this model has observations of shape {_shape_text(expected_obs['obs_shape'])} "
            f"({expected_obs['obs_dtype']}) and actions of dimension {action_dim}"
        )
    buffer_size, n_envs = metadata["buffer_size"], metadata["n_envs"]
    if max_buffer_size is not None and buffer_size > max_buffer_size:
        raise ValueError(
            f"{name} holds a replay of buffer_size={buffer_size}, larger than this model's buffer_size={max_buffer_size}: "
            f"create the model with buffer_size >= {buffer_size} to load it"
        )
    if n_envs > max(buffer_size, 1):
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: n_envs={n_envs} exceeds buffer_size={buffer_size}")
    max_paths = 2 * (buffer_size + n_envs)  # a path holds >= 1 slot, or is the (possibly empty) open path of an env

    def expect(key: str, dtype: Any, shape: tuple[int | None, ...], max_rows: int | None = None) -> ArrayHeader:
        return check_header(headers, key, dtype, shape, name, REPLAY_FILE_KIND, max_rows)

    n_paths = expect("path_ids", np.int64, (None,), max_paths).shape[0]
    for key, dtype in PATH_FIELDS.items():
        expect(f"path_{key}", dtype, (n_paths,))
    for sub, (shape, dtype) in layout.items():
        expect(obs_member("path_final_obs", sub), dtype, (n_paths, *shape))
        expect(obs_member("last_next_obs", sub), dtype, (n_envs, *shape))
    expect("path_slots", np.int64, (None,), buffer_size)
    expect("free_slots", np.int64, (None,), buffer_size)
    expect("open_paths", np.int64, (n_envs,))
    expect("last_next_obs_known", bool, (n_envs,))
    storage: dict[str, tuple[Any, tuple[int, ...]]] = {
        obs_member("observations", sub): (dtype, shape) for sub, (shape, dtype) in layout.items()
    }
    storage.update(actions=(np.float32, (action_dim,)), rewards=(np.float32, ()))
    for key, (dtype, shape) in storage.items():
        if metadata["allocated"]:
            expect(key, dtype, (buffer_size, *shape))
        elif key in headers:
            raise ValueError(
                f"{name} is not a valid PathReplayBuffer file: the storage is not allocated but {key!r} is stored"
            )
