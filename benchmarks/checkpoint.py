"""
Checkpoints of a benchmark run: everything a run needs to continue after its process is stopped (the files are listed
in benchmarks/README.md, "Checkpoints and resume"; no pickle but SB3's ``model.save``). Each is written into a new
folder ``ckpt-<n>``, then the file ``LATEST`` naming it is replaced by a rename, then older folders are removed: a
process killed at any moment leaves ``LATEST`` pointing at a complete checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

#: Environment variable overriding :func:`default_checkpoint_root`
CHECKPOINT_DIR_ENV = "SB3_PCL_CHECKPOINT_DIR"
LATEST_FILENAME = "LATEST"
STATE_FILENAME = "state.json"
#: Attributes never written with the model (installed on the instance by the harness for one ``learn`` call)
TRANSIENT_MODEL_ATTRIBUTES = ("_update_current_progress_remaining",)


class BadFileError(ValueError):
    """A file of the benchmark tool (a campaign file, a checkpoint's file, a results folder's file) that is missing,
    truncated, corrupt or holds a field of the wrong type. Its message starts with the file's path, then where in it
    (a key path, a line) and the problem."""


def default_checkpoint_root() -> Path:
    """:return: ``$SB3_PCL_CHECKPOINT_DIR`` if set, else ``~/.cache/sb3_pcl/checkpoints`` (outside any work tree)"""
    configured = os.environ.get(CHECKPOINT_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "sb3_pcl" / "checkpoints"


def write_atomically(path: Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` through a temporary file and a rename, flushed to disk first: a process
    killed at any moment leaves the old file or the new one, whole.

    :raises OSError: naming ``path`` (the disk full, no permission), the temporary file removed"""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb" if isinstance(text, bytes) else "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, f"{path}: cannot be written ({exc.strerror or exc}); it is unchanged") from exc


#: What a message about a damaged checkpoint tells to do
_FIX = "; delete that run's checkpoint folder to start the run again from step 0"
#: The numbers of a ``state.json`` (``next_cpu_mark`` may be infinite: no CPU-time mark ahead)
STATE_NUMBERS = ("timesteps", "cpu_time_s", "wall_time_s", "next_cpu_mark")


@contextlib.contextmanager
def reading(path: Path, what: str, fix: str = "") -> Iterator[None]:
    """Turn any error while reading ``path`` (truncated, corrupt, a field missing or mistyped) into a
    :class:`BadFileError` naming it, ``what`` it holds and the ``fix`` (``"; ..."``)."""
    try:
        yield
    except BadFileError:
        raise
    except Exception as exc:
        raise BadFileError(f"{path}: cannot be read as {what} ({type(exc).__name__}: {exc}){fix}") from exc


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """:return: The folder of the run's last complete checkpoint, ``None`` without one

    :raises BadFileError: if ``LATEST`` names no complete checkpoint (damaged after it was written)"""
    latest = Path(run_dir) / LATEST_FILENAME
    if not latest.is_file():
        return None
    with reading(latest, "the name of the last checkpoint", _FIX):
        name = latest.read_text().strip()
    if not re.fullmatch(r"ckpt-\d+", name) or not (latest.parent / name / STATE_FILENAME).is_file():
        raise BadFileError(f"{latest}: names {name[:40]!r}, not a complete checkpoint folder of {latest.parent}{_FIX}")
    return latest.parent / name


def read_state(run_dir: str | Path) -> dict[str, Any] | None:
    """:return: The ``state.json`` of the run's last checkpoint, ``None`` without one

    :raises BadFileError: naming the file if it is torn or a field is missing or mistyped"""
    folder = latest_checkpoint(run_dir)
    if folder is None:
        return None
    path = folder / STATE_FILENAME
    with reading(path, "a checkpoint's state (JSON)", _FIX):
        state = json.loads(path.read_text())
    problem = None
    if not isinstance(state, dict) or {*STATE_NUMBERS, "records"} - set(state):
        problem = f"needs {', '.join(STATE_NUMBERS)} and records"
    elif not all(isinstance(state[key], (int, float)) and not isinstance(state[key], bool) for key in STATE_NUMBERS):
        problem = f"{', '.join(STATE_NUMBERS)} must be numbers"
    elif not all(math.isfinite(state[key]) and state[key] >= 0 for key in STATE_NUMBERS[:3]):
        problem = f"{', '.join(STATE_NUMBERS[:3])} must be finite and not negative"
    elif not isinstance(state["records"], list) or not all(_is_record(record) for record in state["records"]):
        problem = "records must be a list of evaluations (timesteps, mean_return, cpu_time_s, ... numbers)"
    elif state.get("episodes") is not None and not _are_episodes(state["episodes"], len(state["records"])):
        problem = "episodes must hold, for each record, its episode returns and lengths ([[numbers], [numbers]])"
    if problem is not None:
        raise BadFileError(f"{path}: {problem}{_FIX}")
    return state


def _is_record(record: Any) -> bool:
    """:return: Whether ``record`` is an evaluation of a ``state.json`` (numbers under text keys, ``timesteps``
    and ``cpu_time_s`` among them)"""
    return (
        isinstance(record, dict)
        and {"timesteps", "mean_return", "cpu_time_s"} <= set(record)
        and all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in record.values())
    )


def _are_episodes(episodes: Any, count: int) -> bool:
    """:return: Whether ``episodes`` is a ``state.json``'s episode returns and lengths of ``count`` evaluations"""

    def numbers(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in value)

    return (
        isinstance(episodes, list)
        and len(episodes) == count
        and all(isinstance(pair, list) and len(pair) == 2 and all(map(numbers, pair)) for pair in episodes)
    )


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    with reading(path, "a NumPy archive (npz)"), np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _rng_arrays() -> dict[str, np.ndarray]:
    import torch

    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    version, python_state, gauss = random.getstate()
    return {
        "torch": torch.get_rng_state().numpy(),
        "numpy_keys": np.asarray(keys, dtype=np.uint32),
        "numpy_scalars": np.asarray([pos, has_gauss, cached], dtype=np.float64),
        "numpy_kind": np.frombuffer(str(kind).encode(), dtype=np.uint8),
        "python": np.asarray(python_state, dtype=np.int64),
        "python_meta": np.asarray([version, np.nan if gauss is None else gauss], dtype=np.float64),
    }


def _set_rng(arrays: Mapping[str, np.ndarray]) -> None:
    import torch

    torch.set_rng_state(torch.from_numpy(np.array(arrays["torch"], dtype=np.uint8)))
    pos, has_gauss, cached = arrays["numpy_scalars"]
    kind = bytes(arrays["numpy_kind"]).decode()
    np.random.set_state((kind, arrays["numpy_keys"], int(pos), int(has_gauss), float(cached)))
    version, gauss = arrays["python_meta"]
    state = tuple(int(value) for value in arrays["python"])
    random.setstate((int(version), state, None if np.isnan(gauss) else float(gauss)))


def _statistics(prefix: str, rms: RunningMeanStd | Mapping[str, RunningMeanStd]) -> Iterator[tuple[str, RunningMeanStd]]:
    """:return: The running statistics by npz key prefix (``obs_rms``, ``obs_rms.<key>`` for dict observations)"""
    if isinstance(rms, RunningMeanStd):
        yield prefix, rms
        return
    for key, sub in rms.items():
        yield from _statistics(f"{prefix}.{key}", sub)


def _vec_normalize_statistics(normalize: VecNormalize) -> list[tuple[str, RunningMeanStd]]:
    return [*_statistics("obs_rms", normalize.obs_rms), *_statistics("ret_rms", normalize.ret_rms)]


def _replay_arrays(buffer: ReplayBuffer | DictReplayBuffer) -> dict[str, np.ndarray]:
    """:return: The buffer's arrays by npz key (``<attribute>``, ``<attribute>.<key>`` for dict observations)"""
    arrays: dict[str, np.ndarray] = {}
    for name, value in vars(buffer).items():
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, dict) and value and all(isinstance(item, np.ndarray) for item in value.values()):
            arrays.update({f"{name}.{key}": item for key, item in value.items()})
    return arrays


def _first_rows(buffer: ReplayBuffer | DictReplayBuffer, array: np.ndarray, count: int) -> np.ndarray:
    """:return: The first ``count`` rows of one of the buffer's per-transition arrays (the rows written), others whole"""
    return array[:count] if array.ndim and len(array) == buffer.buffer_size else array


def save_checkpoint(run_dir: str | Path, model: BaseAlgorithm, state: Mapping[str, Any]) -> Path:
    """
    Write a checkpoint of ``model`` and the harness's ``state`` (JSON-able) into ``run_dir``, atomically.

    :return: The new checkpoint folder
    :raises ValueError: for a replay buffer this module cannot write without pickle (HER's)
    :raises OSError: if a file cannot be written (the new folder is removed: the last checkpoint stays the one before)
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    previous = latest_checkpoint(run_dir)
    number = int(previous.name.rpartition("-")[2]) + 1 if previous is not None else 0
    folder = run_dir / f"ckpt-{number}"
    shutil.rmtree(folder, ignore_errors=True)  # an incomplete folder of a process killed while writing it
    folder.mkdir()
    try:
        model.save(folder / "model.zip", exclude=list(TRANSIENT_MODEL_ATTRIBUTES))
        buffer = getattr(model, "replay_buffer", None)
        if type(buffer) in (ReplayBuffer, DictReplayBuffer):
            written = buffer.buffer_size if buffer.full else buffer.pos
            arrays = {key: _first_rows(buffer, value, written) for key, value in _replay_arrays(buffer).items()}
            counters = {"pos": np.asarray(buffer.pos), "full": np.asarray(buffer.full)}
            np.savez(folder / "replay.npz", allow_pickle=False, **counters, **arrays)
        elif buffer is not None and hasattr(model, "save_replay_buffer") and type(model).__module__.startswith("sb3_pcl"):
            model.save_replay_buffer(folder / "replay.npz")  # type: ignore[attr-defined]  # this package's npz
        elif buffer is not None:
            raise ValueError(f"Cannot checkpoint a {type(buffer).__name__} without pickle: no resumable runs for it")
        normalize = model.get_vec_normalize_env()
        if isinstance(normalize, VecNormalize):
            arrays = {
                f"{prefix}.{name}": np.asarray(getattr(rms, name))
                for prefix, rms in _vec_normalize_statistics(normalize)
                for name in ("mean", "var", "count")
            }
            np.savez(folder / "vecnormalize.npz", allow_pickle=False, returns=normalize.returns, **arrays)
        np.savez(folder / "rng.npz", allow_pickle=False, **_rng_arrays())
        (folder / STATE_FILENAME).write_text(json.dumps(state, indent=1) + "\n")
        for path in folder.iterdir():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    except BaseException:  # the disk full, a buffer refused: no torn folder left
        shutil.rmtree(folder, ignore_errors=True)
        raise
    write_atomically(run_dir / LATEST_FILENAME, folder.name + "\n")
    for old in run_dir.glob("ckpt-*"):
        if old != folder and re.fullmatch(r"ckpt-\d+", old.name):
            shutil.rmtree(old, ignore_errors=True)
    return folder


def restore_checkpoint(run_dir: str | Path, model: BaseAlgorithm) -> tuple[BaseAlgorithm, dict[str, Any]] | None:
    """
    Load the run's last checkpoint into a model built for the same run (same algorithm, entry and envs): the model
    with ``type(model).load`` on ``model``'s training env, then its replay buffer, the env's ``VecNormalize``
    statistics and the random states. The episodes that were running restart at the next ``learn`` call (reseed the env
    to make them new ones).

    :param run_dir: The run's checkpoint folder
    :param model: The freshly built model of the run (its env is reused)
    :return: The restored model and the harness's state, ``None`` without a checkpoint
    :raises BadFileError: naming the checkpoint's file that is truncated, corrupt or does not fit the model
    """
    state = read_state(run_dir)
    folder = latest_checkpoint(run_dir)
    if state is None or folder is None:
        return None
    env = model.get_env()
    assert isinstance(env, VecEnv), "the model must have its training env"
    with reading(folder / "model.zip", f"a saved {type(model).__name__} (SB3's zip)", _FIX):
        restored = type(model).load(folder / "model.zip", env=env, device=model.device)
    replay = folder / "replay.npz"
    with reading(replay, "the model's replay buffer", _FIX):
        _restore_replay(restored, replay)
    normalize = restored.get_vec_normalize_env()
    if isinstance(normalize, VecNormalize) and (folder / "vecnormalize.npz").is_file():
        with reading(folder / "vecnormalize.npz", "VecNormalize statistics", _FIX):
            _restore_statistics(normalize, _read_npz(folder / "vecnormalize.npz"))
    restored._last_obs = None  # type: ignore[assignment]  # the next learn() resets the envs: running episodes restart
    with reading(folder / "rng.npz", "random states", _FIX):
        _set_rng(_read_npz(folder / "rng.npz"))
    return restored, state


def _restore_replay(restored: BaseAlgorithm, replay: Path) -> None:
    """Fill the restored model's replay buffer from the checkpoint's ``replay.npz`` (if there is one)."""
    buffer = getattr(restored, "replay_buffer", None)
    if replay.is_file() and type(buffer) in (ReplayBuffer, DictReplayBuffer):
        arrays, targets = _read_npz(replay), _replay_arrays(buffer)
        for key, value in arrays.items():
            if key in ("pos", "full"):
                continue
            rows = _first_rows(buffer, targets[key], len(value))
            if rows.shape != value.shape or rows.dtype != value.dtype:
                raise ValueError(
                    f"{replay}: {key} is {value.dtype}{value.shape}, the model's replay buffer holds "
                    f"{targets[key].dtype}{targets[key].shape}"
                )
            rows[...] = value
        buffer.pos, buffer.full = int(arrays["pos"]), bool(arrays["full"])
    elif replay.is_file():
        restored.load_replay_buffer(replay)  # type: ignore[attr-defined]


def _restore_statistics(normalize: VecNormalize, arrays: Mapping[str, np.ndarray]) -> None:
    """Set a ``VecNormalize`` env's running statistics from a checkpoint's ``vecnormalize.npz`` arrays."""
    for prefix, rms in _vec_normalize_statistics(normalize):
        for name in ("mean", "var"):
            value = arrays[f"{prefix}.{name}"]
            if value.shape != np.shape(getattr(rms, name)):
                raise ValueError(f"VecNormalize statistics {prefix}.{name} have shape {value.shape}, the env's differ")
            setattr(rms, name, value.astype(np.float64))
        rms.count = float(arrays[f"{prefix}.count"])
    normalize.returns = arrays["returns"]
