"""
Reading and writing a :class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` as a replay file
(:mod:`~sb3_pcl.common.path_buffer.replay_file`): the buffer's arrays and bookkeeping to ``.npz`` members and back,
every value checked before the restored buffer is used.
"""

import itertools
import json
import os
from typing import IO, Any, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.preprocessing import get_action_dim

from sb3_pcl.common.dict_obs import ObsDict, obs_layout, obs_member
from sb3_pcl.common.npz_files import check_header, npz_member_names, read_npz_headers
from sb3_pcl.common.path_buffer.paths import Path
from sb3_pcl.common.path_buffer.replay_file import (
    MAX_METADATA_BYTES,
    OBS_ARRAYS,
    PATH_FIELDS,
    REPLAY_FILE_FORMAT,
    REPLAY_FILE_KIND,
    REPLAY_FILE_VERSION,
    check_replay_headers,
    not_npz_message,
    obs_members,
    obs_metadata,
    path_field,
    read_metadata,
    read_npz_arrays,
    replay_arrays,
    replay_file_kind,
)
from sb3_pcl.common.path_buffer.storage import PathStorage
from sb3_pcl.common.validation import check_storable

BufferT = TypeVar("BufferT", bound=PathStorage)


def write_replay_npz(buffer: PathStorage, file: str | os.PathLike[str] | IO[bytes]) -> None:
    """
    What :meth:`PathReplayBuffer.save_npz <sb3_pcl.common.path_buffer.PathReplayBuffer.save_npz>` does.

    :param buffer: the replay
    :param file: a path, or a binary file open for writing
    """
    paths = list(buffer.paths.values())  # in increasing id
    final_obs = buffer._obs_zeros((len(paths),))
    for row, path in enumerate(paths):
        if path.final_obs is not None:
            final_obs[row] = path.final_obs
    last_next_obs = buffer._obs_zeros((buffer.n_envs,))
    for env_idx, next_obs in enumerate(buffer.last_next_obs):
        if next_obs is not None:
            last_next_obs[env_idx] = next_obs
    metadata = {
        "format": REPLAY_FILE_FORMAT,
        "version": REPLAY_FILE_VERSION,
        "class": type(buffer).__name__,
        "buffer_size": int(buffer.buffer_size),
        "n_envs": int(buffer.n_envs),
        **obs_metadata(buffer.observation_space),
        "action_dim": int(buffer.action_dim),
        "settings": {name: getattr(buffer, name) for name in buffer.SETTINGS},
        "allocated": buffer.observations is not None,
        "next_path_id": int(buffer.next_path_id),
        "add_count": int(buffer.add_count),
        "next_fresh_slot": int(buffer.next_fresh_slot),
    }
    text = json.dumps(metadata, default=lambda value: value.item() if isinstance(value, np.generic) else str(value))
    arrays: dict[str, np.ndarray] = {
        "metadata": np.frombuffer(text.encode("utf-8"), dtype=np.uint8),
        "free_slots": np.asarray(buffer.free_slots, dtype=np.int64),
        "open_paths": np.asarray([-1 if pid is None else pid for pid in buffer.open_paths], dtype=np.int64),
        **obs_members("last_next_obs", last_next_obs),
        "last_next_obs_known": np.asarray([obs is not None for obs in buffer.last_next_obs], dtype=bool),
        "path_slots": np.asarray([slot for path in paths for slot in path.slots], dtype=np.int64),
        **obs_members("path_final_obs", final_obs),
    }
    for name, dtype in PATH_FIELDS.items():
        arrays[f"path_{name}"] = np.asarray([path_field(path, name) for path in paths], dtype=dtype)
    if buffer.observations is not None and buffer.actions is not None and buffer.rewards is not None:
        arrays.update(obs_members("observations", buffer.observations), actions=buffer.actions, rewards=buffer.rewards)
    pickled = sorted(name for name, array in arrays.items() if array.dtype.hasobject)
    if pickled:  # np.savez would pickle them; checked here, as older NumPy's savez has no allow_pickle argument
        raise ValueError(f"cannot save the replay as .npz: {pickled} hold Python objects, which would need pickling")
    if isinstance(file, (str, os.PathLike)):
        with open(file, "wb") as handle:
            np.savez(handle, **arrays)  # type: ignore[arg-type]
    else:
        np.savez(file, **arrays)  # type: ignore[arg-type]


def read_replay_arrays(
    file: IO[bytes],
    name: str,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    max_buffer_size: int | None,
    settings: tuple[str, ...],
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """
    The checked reading of :meth:`PathReplayBuffer.load_npz <sb3_pcl.common.path_buffer.PathReplayBuffer.load_npz>`:
    the file's kind, members and array headers, its metadata against the spaces and ``max_buffer_size``, then the
    arrays (``allow_pickle=False``).

    :param file: a binary file open for reading (seekable)
    :param name: how to name it in the messages
    :param observation_space: the observation space of the model that loads it
    :param action_space: its action space
    :param max_buffer_size: the largest ``buffer_size`` accepted (``None``: no limit but the archive's sizes)
    :param settings: the settings the buffer class records (``SETTINGS``)
    :return: the arrays and the metadata, for :func:`restore_buffer`
    :raises ValueError: naming the file and the problem
    """
    kind = replay_file_kind(file)
    if kind != "npz":
        raise ValueError(not_npz_message(name, kind))
    members = npz_member_names(file, name, REPLAY_FILE_KIND)
    if "metadata" not in members:
        hint = " (it looks like an episodes file: pass it to add_demonstrations)" if "lengths" in members else ""
        raise ValueError(
            f"{name} is an .npz file of another kind (arrays {sorted(members)}), not a PathReplayBuffer file{hint}"
        )
    allowed = replay_arrays(observation_space)
    # the observation arrays of another space pass this first check (headers only), so that the metadata's
    # check names both spaces
    other_obs = {member for member in members if member.split(".", 1)[0] in OBS_ARRAYS}
    headers = read_npz_headers(file, name, REPLAY_FILE_KIND, allowed | other_obs)
    check_header(headers, "metadata", np.uint8, (None,), name, REPLAY_FILE_KIND, max_rows=MAX_METADATA_BYTES)
    metadata = read_metadata(read_npz_arrays(file, name, ["metadata"])["metadata"], name, settings)
    check_replay_headers(headers, metadata, observation_space, action_space, name, max_buffer_size)
    unexpected = sorted(set(headers) - allowed)
    if unexpected:
        raise ValueError(f"{name} is not a valid PathReplayBuffer file: unexpected arrays {unexpected} for its spaces")
    return read_npz_arrays(file, name, list(headers)), metadata


def restore_buffer(
    cls: type[BufferT],
    arrays: dict[str, np.ndarray],
    metadata: dict[str, Any],
    observation_space: spaces.Space,
    action_space: spaces.Space,
    device: th.device | str,
    name: str,
) -> BufferT:
    """
    :param cls: the buffer class to restore
    :param arrays: the arrays of a replay file
    :param metadata: its checked metadata (:func:`~sb3_pcl.common.path_buffer.replay_file.read_metadata`)
    :param observation_space: the loading model's observation space
    :param action_space: its action space
    :param device: PyTorch device
    :param name: the file's name, for the messages
    :return: the restored buffer
    :raises ValueError: naming the file and the first inconsistency found
    """

    def bad(problem: str) -> ValueError:
        return ValueError(f"{name} is not a valid PathReplayBuffer file: {problem}")

    # the spaces and sizes were checked against the file's headers (check_replay_headers)
    layout = obs_layout(observation_space)
    action_dim = get_action_dim(action_space)
    try:
        buffer = cls(
            metadata["buffer_size"],
            observation_space,
            action_space,
            device=device,
            n_envs=metadata["n_envs"],
            **metadata["settings"],
        )
    except (TypeError, ValueError) as error:
        raise bad(f"invalid settings {metadata['settings']} ({error})") from None
    buffer_size, n_envs = buffer.buffer_size, buffer.n_envs

    def array(key: str, dtype: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
        if key not in arrays:
            raise bad(f"the array {key!r} is missing")
        value = arrays[key]
        if value.dtype != np.dtype(dtype) or (value.ndim != 1 if shape is None else value.shape != shape):
            expected = "1-d" if shape is None else f"shape {shape}"
            raise bad(
                f"the array {key!r} has dtype {value.dtype} and shape {value.shape}, expected {np.dtype(dtype)} {expected}"
            )
        return value

    def storable(values: np.ndarray, dtype: Any, what: str, index_name: str) -> None:
        try:
            check_storable(values, dtype, what, index_name)
        except ValueError as error:
            raise bad(str(error)) from None

    def obs_array(key: str, lead: tuple[int, ...]) -> Any:
        if None in layout:
            shape, dtype = layout[None]
            return array(key, dtype, (*lead, *shape))
        return ObsDict({sub: array(obs_member(key, sub), dtype, (*lead, *shape)) for sub, (shape, dtype) in layout.items()})

    def obs_storable(values: Any, what: str, index_name: str) -> None:
        for sub, (_, dtype) in layout.items():
            storable(values if sub is None else values[sub], dtype, what if sub is None else f"{what} {sub!r}", index_name)

    path_ids = array("path_ids", np.int64)
    n_paths = len(path_ids)
    fields = {key: array(f"path_{key}", dtype, (n_paths,)) for key, dtype in PATH_FIELDS.items()}
    lengths = [int(n) for n in fields["lengths"].tolist()]
    if any(n < 0 for n in lengths):
        raise bad("a path has a negative length")
    n_stored = sum(lengths)
    slots = array("path_slots", np.int64, (n_stored,))
    free_slots = array("free_slots", np.int64)
    final_obs = obs_array("path_final_obs", (n_paths,))
    open_paths = array("open_paths", np.int64, (n_envs,))
    last_next_obs = obs_array("last_next_obs", (n_envs,))
    last_next_known = array("last_next_obs_known", bool, (n_envs,))
    next_path_id, add_count = metadata["next_path_id"], metadata["add_count"]
    # version 1 listed every free slot, the never used ones included
    next_fresh_slot = metadata.get("next_fresh_slot", buffer_size if metadata["allocated"] else 0)
    if not 0 <= next_fresh_slot <= buffer_size:
        raise bad(f"next_fresh_slot={next_fresh_slot} is outside [0, buffer_size={buffer_size}]")

    id_list = path_ids.tolist()
    if any(b <= a for a, b in itertools.pairwise(id_list)) or (n_paths and id_list[0] < 0):
        raise bad("the path ids must be >= 0 and increasing")
    if n_paths and id_list[-1] >= next_path_id:
        raise bad(f"a path id ({id_list[-1]}) is not below next_path_id ({next_path_id})")
    env_idx = fields["env_idx"]
    if np.any(env_idx < -1) or np.any(env_idx >= n_envs):
        raise bad(f"a path's env index is outside [-1, {n_envs})")
    for key in ("first_step", "last_step"):
        if np.any(fields[key] < 0) or np.any(fields[key] > add_count):
            raise bad(f"a path's {key} is outside [0, add_count={add_count}]")
    storable(fields["total_return"], np.float64, "path return", "path")
    obs_storable(final_obs[fields["has_final"]], "final observation", "path")
    obs_storable(last_next_obs[last_next_known], "last next observation", "env")

    if metadata["allocated"]:
        observations = obs_array("observations", (buffer_size,))
        actions = array("actions", np.float32, (buffer_size, action_dim))
        rewards = array("rewards", np.float32, (buffer_size,))
        obs_storable(observations, "observation", "slot")
        storable(actions, np.float32, "action", "slot")
        storable(rewards, np.float32, "reward", "slot")
        # the slots below next_fresh_slot are each held by one path or free (the others were never used)
        used_slots = np.concatenate([slots, free_slots])
        in_range = bool(np.all((used_slots >= 0) & (used_slots < next_fresh_slot)))
        if not in_range or len(np.unique(used_slots)) != len(used_slots) or len(used_slots) != next_fresh_slot:
            raise bad(f"the paths' slots and the free slots must hold each of the {next_fresh_slot} used slots exactly once")
        buffer.observations, buffer.actions, buffer.rewards = observations, actions, rewards
    elif n_paths or len(free_slots) or next_fresh_slot:
        raise bad("the storage is not allocated but paths or free slots are listed")

    open_ids = open_paths.tolist()
    row_of = {path_id: row for row, path_id in enumerate(id_list)}
    for env, path_id in enumerate(open_ids):
        if path_id == -1:
            continue
        row = row_of.get(path_id)
        if row is None or fields["done"][row] or env_idx[row] != env:
            raise bad(f"env {env}'s open path {path_id} is not a running path of that env")
    running = {id_list[row] for row in np.flatnonzero(~fields["done"]).tolist()}
    if not running <= set(open_ids):
        raise bad(f"the running paths {sorted(running - set(open_ids))} are no env's open path")

    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).tolist()
    slot_list = slots.tolist()
    for row, path_id in enumerate(id_list):
        path = Path(
            path_id=path_id,
            env_idx=int(env_idx[row]),
            first_step=int(fields["first_step"][row]),
            last_step=int(fields["last_step"][row]),
            total_return=float(fields["total_return"][row]),
            done=bool(fields["done"][row]),
            terminated=bool(fields["terminated"][row]),
            is_seed=bool(fields["is_seed"][row]),
            dropped_head=bool(fields["dropped_head"][row]),
            final_obs=final_obs[row].copy() if fields["has_final"][row] else None,
            _slots=slot_list[offsets[row] : offsets[row + 1]],
        )
        buffer.paths[path_id] = path
    buffer.free_slots = free_slots.tolist()
    buffer.next_fresh_slot = next_fresh_slot
    buffer.n_stored = n_stored
    buffer.open_paths = [None if path_id == -1 else path_id for path_id in open_ids]
    buffer.last_next_obs = [last_next_obs[env].copy() if last_next_known[env] else None for env in range(n_envs)]
    buffer.next_path_id, buffer.add_count = next_path_id, add_count
    buffer._rebuild_index()
    return buffer
