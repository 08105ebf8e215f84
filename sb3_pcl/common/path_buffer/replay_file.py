"""
The replay file of :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`: an ``.npz`` of arrays with JSON metadata,
never a pickle, read with ``allow_pickle=False`` and checked before anything is allocated.

The arrays: ``metadata`` (UTF-8 JSON as ``uint8``: format, version, sizes, spaces, settings, counters), the storage
``observations``, ``actions``, ``rewards`` (``buffer_size`` rows, once allocated), one ``path_<field>`` array per
:data:`PATH_FIELDS` entry (a row per path, in increasing id), ``path_slots`` (the paths' slots, oldest first, one path
after the other), ``path_final_obs``, ``free_slots``, and per env ``open_paths`` (-1: none) and ``last_next_obs`` /
``last_next_obs_known``. For a ``Dict`` space each observation array is one per key (``observations.<key>``).
Version 1 files (no ``next_fresh_slot``, every free slot listed) still load.

Reading checks, in order: the file's kind; the archive's members (unexpected ones refused unread) and each array's
header, whose declared size must match the archive's (:func:`~sb3_pcl.common.npz_files.read_npz_headers`); the
metadata (format, version, spaces, ``buffer_size`` at most the loading model's, ``n_envs`` at most ``buffer_size``);
every array's dtype and shape against the sizes these imply. Only then are the arrays read, and their contents checked:
that every used slot belongs to exactly one path or is free, the paths' bookkeeping, and that the values are finite
(:func:`~sb3_pcl.common.validation.check_storable`).
"""

import io
import itertools
import json
import os
import pathlib
import pickle
import warnings
import zipfile
import zlib
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.preprocessing import get_action_dim
from stable_baselines3.common.save_util import open_path

from sb3_pcl.common.dict_obs import ObsDict, obs_layout, obs_member
from sb3_pcl.common.npz_files import ArrayHeader, check_header, npz_member_names, read_npz_headers
from sb3_pcl.common.validation import check_storable

if TYPE_CHECKING:
    from sb3_pcl.common.path_buffer.buffer import PathReplayBuffer

#: the ``format`` entry of a replay file's metadata
REPLAY_FILE_FORMAT = "sb3_pcl.PathReplayBuffer"
#: the version :func:`write_replay_npz` writes (and the newest :func:`read_replay_npz` reads)
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
#: the arrays of a replay file that hold observations (one array each, or one per key of a Dict space)
OBS_ARRAYS = ("observations", "last_next_obs", "path_final_obs")
#: the arrays a replay file may hold
REPLAY_ARRAYS = frozenset(
    {"metadata", "free_slots", "open_paths", "last_next_obs_known", "path_slots", "actions", "rewards", *OBS_ARRAYS}
    | {f"path_{key}" for key in PATH_FIELDS}
)
_FILE_MAGIC = {b"PK\x03\x04": "npz", b"PK\x05\x06": "npz", b"\x93NUMPY": "npy", b"\x80": "pickle"}


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


def _obs_metadata(observation_space: spaces.Space) -> dict[str, Any]:
    """:return: the ``obs_shape`` and ``obs_dtype`` entries of a replay file's metadata (dicts by key for a Dict space)"""
    layout = obs_layout(observation_space)
    if None in layout:
        shape, dtype = layout[None]
        return {"obs_shape": list(shape), "obs_dtype": dtype.name}
    return {
        "obs_shape": {key: list(shape) for key, (shape, _) in layout.items()},
        "obs_dtype": {key: dtype.name for key, (_, dtype) in layout.items()},
    }


def write_replay_npz(buffer: "PathReplayBuffer", file: str | os.PathLike[str] | IO[bytes]) -> None:
    """
    What :meth:`PathReplayBuffer.save_npz <sb3_pcl.common.path_buffer.PathReplayBuffer.save_npz>` does.

    :param buffer: the replay
    :param file: a path, or a binary file open for writing
    """
    paths = list(buffer.paths.values())  # in increasing id
    metadata = {
        "format": REPLAY_FILE_FORMAT,
        "version": REPLAY_FILE_VERSION,
        "class": type(buffer).__name__,
        "buffer_size": int(buffer.buffer_size),
        "n_envs": int(buffer.n_envs),
        **_obs_metadata(buffer.observation_space),
        "action_dim": int(buffer.action_dim),
        "settings": {name: getattr(buffer, name) for name in buffer.SETTINGS},
        "allocated": buffer.observations is not None,
        "next_path_id": int(buffer.next_path_id),
        "add_count": int(buffer.add_count),
        "next_fresh_slot": int(buffer.next_fresh_slot),
    }
    text = json.dumps(metadata, default=lambda value: value.item() if isinstance(value, np.generic) else str(value))
    arrays: dict[str, Any] = {
        "metadata": np.frombuffer(text.encode("utf-8"), dtype=np.uint8),
        "free_slots": np.asarray(buffer.free_slots, dtype=np.int64),
        "open_paths": np.asarray([-1 if path_id is None else path_id for path_id in buffer.open_paths], dtype=np.int64),
        "last_next_obs_known": np.asarray([obs is not None for obs in buffer.last_next_obs], dtype=bool),
        "path_slots": np.asarray([slot for path in paths for slot in path.slots], dtype=np.int64),
    }
    derived = {
        "ids": [path.path_id for path in paths],
        "has_final": [path.final_obs is not None for path in paths],
        "lengths": [len(path) for path in paths],
    }
    for key, dtype in PATH_FIELDS.items():  # the others are Path attributes
        arrays[f"path_{key}"] = np.asarray(derived[key] if key in derived else [getattr(path, key) for path in paths], dtype)
    known = {"last_next_obs": buffer.last_next_obs, "path_final_obs": [path.final_obs for path in paths]}
    for sub, (shape, dtype) in obs_layout(buffer.observation_space).items():
        for key, observations in known.items():  # zeros where an observation is unknown
            stacked = np.zeros((len(observations), *shape), dtype=dtype)
            for row, obs in enumerate(observations):
                if obs is not None:
                    stacked[row] = obs if sub is None else obs[sub]
            arrays[obs_member(key, sub)] = stacked
        if buffer.observations is not None:
            arrays[obs_member("observations", sub)] = buffer.observations if sub is None else buffer.observations[sub]
    if buffer.observations is not None:
        arrays.update(actions=buffer.actions, rewards=buffer.rewards)
    pickled = sorted(key for key, array in arrays.items() if np.asarray(array).dtype.hasobject)
    if pickled:  # np.savez would pickle them; checked here, as older NumPy's savez has no allow_pickle argument
        raise ValueError(f"cannot save the replay as .npz: {pickled} hold Python objects, which would need pickling")
    if isinstance(file, (str, os.PathLike)):
        with open(file, "wb") as handle:
            np.savez(handle, **arrays)
    else:
        np.savez(file, **arrays)


def read_replay_npz(
    file: IO[bytes],
    name: str,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    max_buffer_size: int | None,
    settings: tuple[str, ...],
) -> dict[str, Any]:
    """
    The checked reading of :meth:`PathReplayBuffer.load_npz <sb3_pcl.common.path_buffer.PathReplayBuffer.load_npz>`
    (the checks are listed in this module's docstring).

    :param file: a binary file open for reading (seekable)
    :param name: how to name it in the messages
    :param observation_space: the observation space of the model that loads it
    :param action_space: its action space
    :param max_buffer_size: the largest ``buffer_size`` accepted (``None``: no limit but the archive's sizes)
    :param settings: the settings the buffer class records (``SETTINGS``)
    :return: the buffer's state: ``buffer_size``, ``n_envs``, ``settings``, ``next_path_id``, ``add_count``,
        ``next_fresh_slot``, ``free_slots``, ``open_paths`` and ``last_next_obs`` (lists per env, ``None`` for none),
        the storage arrays (``None`` when not allocated) and ``paths``, the keyword arguments of each
        :class:`~sb3_pcl.common.path_buffer.Path` in increasing id
    :raises ValueError: naming the file and the problem
    """
    kind = replay_file_kind(file)
    if kind == "pickle":
        raise ValueError(
            f"{name} is a pickle (SB3's replay buffer format, or a replay saved by an older sb3_pcl), not a PathReplayBuffer "
            ".npz file: unpickling it could run arbitrary code, so it is refused. If you trust the file, load it with "
            "load_replay_buffer(path, allow_pickle=True) and save it again to convert it"
        )
    if kind == "empty":
        raise ValueError(f"{name} is empty, not a PathReplayBuffer .npz file")
    if kind != "npz":
        what = "a single .npy array" if kind == "npy" else "not a zip archive"
        raise ValueError(f"{name} is not a PathReplayBuffer .npz file (it is {what})")
    members = npz_member_names(file, name, REPLAY_FILE_KIND)
    if "metadata" not in members:
        hint = " (it looks like an episodes file: pass it to add_demonstrations)" if "lengths" in members else ""
        raise ValueError(
            f"{name} is an .npz file of another kind (arrays {sorted(members)}), not a PathReplayBuffer file{hint}"
        )
    allowed = replay_arrays(observation_space)
    # the observation arrays of another space pass this first check (headers only), so that the metadata's check
    # names both spaces
    other_obs = {member for member in members if member.split(".", 1)[0] in OBS_ARRAYS}
    headers = read_npz_headers(file, name, REPLAY_FILE_KIND, allowed | other_obs)
    check_header(headers, "metadata", np.uint8, (None,), name, REPLAY_FILE_KIND, max_rows=MAX_METADATA_BYTES)
    metadata = _read_metadata(_read_arrays(file, name, ["metadata"])["metadata"], name, settings)
    _check_headers(headers, metadata, observation_space, action_space, name, max_buffer_size)
    unexpected = sorted(set(headers) - allowed)
    if unexpected:
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: unexpected arrays {unexpected} for its spaces")
    arrays = _read_arrays(file, name, list(headers))
    layout = obs_layout(observation_space)  # the dtypes and shapes were checked against the headers (_check_headers)

    def bad(problem: str) -> ValueError:
        return ValueError(f"{name} is not a valid PathReplayBuffer file: {problem}")

    def storable(values: Any, what: str, index_name: str) -> None:
        for sub, (_, dtype) in layout.items():
            try:
                check_storable(values if sub is None else values[sub], dtype, f"{what} {sub!r}" if sub else what, index_name)
            except ValueError as error:
                raise bad(str(error)) from None

    def obs_array(key: str) -> Any:
        if None in layout:
            return arrays[key]
        return ObsDict({sub: arrays[obs_member(key, sub)] for sub in layout})

    buffer_size, n_envs, add_count = metadata["buffer_size"], metadata["n_envs"], metadata["add_count"]
    fields = {key: arrays[f"path_{key}"] for key in PATH_FIELDS}
    lengths = fields["lengths"].tolist()
    if any(n < 0 for n in lengths):
        raise bad("a path has a negative length")
    slots, free_slots = arrays["path_slots"], arrays["free_slots"]
    if len(slots) != sum(lengths):
        raise bad(f"the array 'path_slots' holds {len(slots)} slots, the paths' lengths sum to {sum(lengths)}")
    # version 1 listed every free slot, the never used ones included
    next_fresh_slot = metadata.get("next_fresh_slot", buffer_size if metadata["allocated"] else 0)
    if not 0 <= next_fresh_slot <= buffer_size:
        raise bad(f"next_fresh_slot={next_fresh_slot} is outside [0, buffer_size={buffer_size}]")
    ids = fields["ids"].tolist()
    if any(b <= a for a, b in itertools.pairwise(ids)) or (ids and ids[0] < 0):
        raise bad("the path ids must be >= 0 and increasing")
    if ids and ids[-1] >= metadata["next_path_id"]:
        raise bad(f"a path id ({ids[-1]}) is not below next_path_id ({metadata['next_path_id']})")
    env_idx = fields["env_idx"]
    if np.any(env_idx < -1) or np.any(env_idx >= n_envs):
        raise bad(f"a path's env index is outside [-1, {n_envs})")
    for key in ("first_step", "last_step"):
        if np.any(fields[key] < 0) or np.any(fields[key] > add_count):
            raise bad(f"a path's {key} is outside [0, add_count={add_count}]")
    try:
        check_storable(fields["total_return"], np.float64, "path return", "path")
    except ValueError as error:
        raise bad(str(error)) from None
    final_obs, last_next_obs = obs_array("path_final_obs"), obs_array("last_next_obs")
    last_next_known = arrays["last_next_obs_known"]
    storable(final_obs[fields["has_final"]], "final observation", "path")
    storable(last_next_obs[last_next_known], "last next observation", "env")
    storage: dict[str, Any] = {"observations": None, "actions": None, "rewards": None}
    if metadata["allocated"]:
        storage = {"observations": obs_array("observations"), "actions": arrays["actions"], "rewards": arrays["rewards"]}
        storable(storage["observations"], "observation", "slot")
        for key, what in (("actions", "action"), ("rewards", "reward")):
            try:
                check_storable(storage[key], np.float32, what, "slot")
            except ValueError as error:
                raise bad(str(error)) from None
        # the slots below next_fresh_slot are each held by one path or free (the others were never used)
        used = np.concatenate([slots, free_slots])
        in_range = bool(np.all((used >= 0) & (used < next_fresh_slot)))
        if not in_range or len(np.unique(used)) != len(used) or len(used) != next_fresh_slot:
            raise bad(f"the paths' slots and the free slots must hold each of the {next_fresh_slot} used slots exactly once")
    elif ids or len(free_slots) or next_fresh_slot:
        raise bad("the storage is not allocated but paths or free slots are listed")
    open_paths = arrays["open_paths"].tolist()
    row_of = {path_id: row for row, path_id in enumerate(ids)}
    for env, path_id in enumerate(open_paths):
        row = row_of.get(path_id)
        if path_id != -1 and (row is None or fields["done"][row] or env_idx[row] != env):
            raise bad(f"env {env}'s open path {path_id} is not a running path of that env")
    running = {ids[row] for row in np.flatnonzero(~fields["done"]).tolist()}
    if not running <= set(open_paths):
        raise bad(f"the running paths {sorted(running - set(open_paths))} are no env's open path")

    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).tolist()
    slot_list = slots.tolist()
    paths = [
        {
            "path_id": path_id,
            **{key: fields[key][row].item() for key in ("env_idx", "first_step", "last_step", "total_return")},
            **{key: bool(fields[key][row]) for key in ("done", "terminated", "is_seed", "dropped_head")},
            "final_obs": final_obs[row].copy() if fields["has_final"][row] else None,
            "slot_list": slot_list[offsets[row] : offsets[row + 1]],
        }
        for row, path_id in enumerate(ids)
    ]
    return {
        **{key: metadata[key] for key in ("buffer_size", "n_envs", "settings", "next_path_id", "add_count")},
        **storage,
        "next_fresh_slot": next_fresh_slot,
        "free_slots": free_slots.tolist(),
        "open_paths": [None if path_id == -1 else path_id for path_id in open_paths],
        "last_next_obs": [last_next_obs[env].copy() if last_next_known[env] else None for env in range(n_envs)],
        "paths": paths,
    }


def _read_arrays(file: IO[bytes], name: str, keys: list[str]) -> dict[str, np.ndarray]:
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


def _read_metadata(raw: np.ndarray, name: str, settings: tuple[str, ...]) -> dict[str, Any]:
    """
    :param raw: the ``metadata`` array of a replay file
    :param name: the file's name, for the messages
    :param settings: the settings the buffer class records (``SETTINGS``)
    :return: its replay metadata (format, version and entry types checked, retired settings dropped)
    :raises ValueError: when the ``.npz`` is of another kind, of a newer version, or its metadata is malformed
    """
    try:
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
        **({"next_fresh_slot": int} if "next_fresh_slot" in metadata else {}),
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
    return metadata


def _shape_text(shape: Any) -> str:
    """:return: an ``obs_shape`` metadata entry as a tuple, or a dict of tuples by key"""
    if isinstance(shape, dict):
        return str({key: tuple(value) if isinstance(value, list) else value for key, value in shape.items()})
    return str(tuple(shape))


def _check_headers(
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
    :param metadata: its metadata (:func:`_read_metadata`)
    :param observation_space: the loading model's observation space
    :param action_space: its action space
    :param name: the file's name, for the messages
    :param max_buffer_size: the largest ``buffer_size`` accepted (``None``: no limit)
    :raises ValueError: naming the file and the first size or array that does not fit
    """
    layout = obs_layout(observation_space)
    action_dim = get_action_dim(action_space)
    expected_obs = _obs_metadata(observation_space)
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


def save_replay_file(buffer: "PathReplayBuffer", path: str | pathlib.Path | io.BufferedIOBase, verbose: int = 0) -> None:
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
    buffer_class: "type[PathReplayBuffer]",
    observation_space: spaces.Space,
    action_space: spaces.Space,
    device: th.device | str = "auto",
    allow_pickle: bool = False,
    verbose: int = 0,
    max_buffer_size: int | None = None,
) -> "PathReplayBuffer":
    """
    What :meth:`sb3_pcl.PCL.load_replay_buffer` does: read a replay file written by :func:`save_replay_file`.

    A ``str`` or ``pathlib.Path`` that does not exist is tried with ``.npz`` appended (and, with ``allow_pickle``,
    ``.pkl``). Pickles (SB3's replay files) are refused unless ``allow_pickle=True``: then a pickled buffer of this
    version is unpickled, with a warning, since unpickling runs any code the file holds. Either way the buffer comes
    back as a ``buffer_class``: what the loading model samples with, whichever class saved it (the stored paths are the
    same).

    :param path: the file
    :param buffer_class: the class of the restored buffer (a :class:`PathReplayBuffer` subclass)
    :param observation_space: the loading model's observation space
    :param action_space: its action space
    :param device: PyTorch device of the sampled tensors
    :param allow_pickle: accept a pickled buffer (only for files you trust)
    :param verbose: SB3's verbosity
    :param max_buffer_size: the largest ``buffer_size`` accepted (see :meth:`PathReplayBuffer.load_npz`)
    :return: the buffer
    :raises ValueError: naming the file and the problem (see :func:`read_replay_npz`)
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
            other_version = ValueError(
                f"{name} holds a replay buffer pickled by another version of sb3_pcl: load it with that version and "
                "save it with save_replay_buffer (an .npz file, which every version reads)"
            )
            try:
                buffer = pickle.load(file)
            except (AttributeError, ImportError):  # it names a class or module this version does not have
                raise other_version from None
            # a PathReplayBuffer: of the loading class, one of its subclasses, or one of its bases
            related = isinstance(buffer, buffer_class) or issubclass(buffer_class, type(buffer))
            if not (isinstance(buffer, BaseBuffer) and related):
                raise ValueError(f"{name} does not hold a PathReplayBuffer (found {type(buffer).__name__})")
            if not isinstance(vars(buffer).get("_table"), np.ndarray):  # the table of the paths of this version
                raise other_version
            if type(buffer) is not buffer_class:  # the same stored state, sampled as the loading model's class
                converted = buffer_class.__new__(buffer_class)
                converted.__dict__.update(vars(buffer))
                return converted
            return buffer
        return buffer_class.load_npz(file, observation_space, action_space, device, name, max_buffer_size)  # type: ignore[arg-type]
    finally:
        if isinstance(path, (str, pathlib.Path)):
            file.close()
