"""
The files of a results folder, written by grids and campaigns alike: ``evaluations.csv`` (each run's rows replaced after
every evaluation, under the folder's lock, through a temporary file and a rename: a kill at any moment leaves a whole
file), ``run_metadata.json`` (a run when it ends, with its status) and the invocations of ``config.json``.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import io
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from benchmarks import harness
from benchmarks.checkpoint import BadFileError, reading, write_atomically

#: Where a row was written, after the harness's columns: the git revision and the CPU model (a CPU-time budget buys
#: another number of env steps on another CPU)
STAMP_COLUMNS = ("git", "cpu")
#: Columns of a folder's ``evaluations.csv``
COLUMNS = (*harness.EVAL_COLUMNS, *STAMP_COLUMNS)
LOCK_FILENAME = ".lock"


def lock_folder(task: harness.RunTask) -> Path:
    """:return: Where the locks of a run's folder live: next to its checkpoints (outside the work tree), or in the
    git-ignored ``<out>/runs/`` for runs without checkpoints"""
    if task.checkpoint_dir is not None:
        return Path(task.checkpoint_dir).parent
    return Path(task.out_dir) / harness.RUNS_DIRNAME


@contextlib.contextmanager
def locked(path: Path, blocking: bool = True) -> Iterator[TextIO]:
    """Hold an exclusive lock on ``path`` (created with its folder) for the block.

    :param blocking: Wait for the lock (else raise :class:`BlockingIOError` if another process holds it)
    :return: The lock file, open for reading and appending"""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_evaluations(out: str | Path) -> pd.DataFrame:
    """:return: A folder's ``evaluations.csv`` (empty with :data:`COLUMNS` when there is none), checked first
    (:func:`check_evaluations`)

    :raises BadFileError: naming the file and the line of its first problem"""
    path = Path(out) / harness.EVALUATIONS_FILENAME
    if not path.is_file():
        return pd.DataFrame(columns=list(COLUMNS))
    with reading(path, "text"):
        text = path.read_text()
    check_evaluations(path, text)
    with reading(path, "evaluations (CSV)"):
        frame = pd.read_csv(io.StringIO(text))
        # names as written: an algorithm or env called "nan" or "null" is not a missing value
        frame[["algo", "env"]] = pd.read_csv(io.StringIO(text), usecols=["algo", "env"], dtype=str, keep_default_na=False)
    for column in [name for name in (*WHOLE_COLUMNS, *NUMBER_COLUMNS) if name in frame and len(frame)]:  # missed?
        wanted = pd.api.types.is_integer_dtype if column in WHOLE_COLUMNS else pd.api.types.is_numeric_dtype
        if not wanted(frame[column]) and not (column in NUMBER_COLUMNS and frame[column].isna().all()):
            raise BadFileError(f"{path}: column {column} is not read as numbers: {frame[column].tolist()[:5]}...")
    return frame.reindex(columns=list(COLUMNS))


#: The columns every ``evaluations.csv`` has (older folders lack ``cpu_time_s`` and the :data:`STAMP_COLUMNS`)
REQUIRED_COLUMNS = ("algo", "env", "seed", "timesteps", "mean_return")
#: Columns of numbers: whole and never empty, or any number (empty: NaN)
WHOLE_COLUMNS = ("seed", "timesteps")
NUMBER_COLUMNS = ("mean_return", "std_return", "wall_time_s", "cpu_time_s", "fps", "curriculum_length")


def check_evaluations(path: Path, text: str) -> None:
    """Check the content of an ``evaluations.csv`` as its writers leave it (a hand edit may not): a header of known
    columns with the :data:`REQUIRED_COLUMNS`, then rows of as many fields, numbers where numbers go, algorithm and env
    named, no field holding a line break (one row per line), the last row ended by a newline (else it may have been cut
    mid-way).

    :raises BadFileError: naming ``path``, the line and the problem"""
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        lines = list(reader)
    except csv.Error as exc:  # a quoted field cut mid-way
        raise BadFileError(f"{path}: line {reader.line_num}: {exc} (a row cut mid-way?)") from exc
    header = lines[0] if lines else []
    unknown = [name for name in header if name not in COLUMNS]
    if unknown or len(set(header)) != len(header) or not set(REQUIRED_COLUMNS) <= set(header):
        problem = f"unknown column {unknown[0]!r}" if unknown else "a column missing or repeated"
        raise BadFileError(
            f"{path}: line 1: {problem}: the header must name {', '.join(COLUMNS)} (each once; at least "
            f"{', '.join(REQUIRED_COLUMNS)}), got {header}"
        )
    if not text.endswith("\n"):
        raise BadFileError(f"{path}: line {len(lines)}: no newline at the end: the last row may be cut mid-way")
    for number, row in enumerate(lines[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise BadFileError(f"{path}: line {number}: {len(row)} fields, the header has {len(header)} (a row cut mid-way?)")
        for name, value in zip(header, row, strict=True):
            if "\n" in value or "\r" in value:  # one row per line, as written: a line break would also break a report
                raise BadFileError(f"{path}: line {number}: {name} holds a line break: {value!r}")
            if name in ("algo", "env") and not value.strip():
                raise BadFileError(f"{path}: line {number}: {name} is empty")
            if name in WHOLE_COLUMNS + NUMBER_COLUMNS and not _is_number(value, whole=name in WHOLE_COLUMNS):
                kind = "a whole number" if name in WHOLE_COLUMNS else "a number (or empty)"
                raise BadFileError(f"{path}: line {number}: {name} must be {kind}, got {value!r}")


#: How the writers (pandas) write numbers: decimals, exponents, ``inf``, ``nan``
NUMBER = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|inf|infinity|nan)", re.IGNORECASE)


def _is_number(text: str, whole: bool) -> bool:
    """:return: Whether a CSV field is a number as pandas reads one (``whole``: an integer, never empty; else empty is
    NaN)"""
    if not text:
        return not whole
    return re.fullmatch(r"[-+]?\d+", text) is not None if whole else NUMBER.fullmatch(text) is not None


def is_run(frame: pd.DataFrame, task: harness.RunTask) -> pd.Series:
    """:return: Which rows of ``frame`` are the run's"""
    return (frame["algo"] == task.algo) & (frame["env"] == task.env) & (frame["seed"] == task.seed)


def _row_keys(frame: pd.DataFrame) -> list[tuple[int, float]]:
    """:return: What identifies an evaluation of a run: its step count and CPU time (rounded to a microsecond)"""
    return [(int(steps), round(float(cpu), 6)) for steps, cpu in zip(frame["timesteps"], frame["cpu_time_s"], strict=True)]


def stamp() -> dict[str, str]:
    """:return: The :data:`STAMP_COLUMNS` of the rows this process writes"""
    return {"git": harness.git_revision(), "cpu": harness.cpu_model()}


def store_rows(task: harness.RunTask, stamped: Mapping[str, str], frame: pd.DataFrame) -> None:
    """Replace the run's rows of ``evaluations.csv`` by ``frame`` (all its evaluations so far: after a resume, rows
    written after its checkpoint are dropped). Rows already there keep the stamp (git revision, CPU) they were
    written with; new ones get ``stamped`` (:func:`stamp`)."""
    out = Path(task.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with locked(lock_folder(task) / LOCK_FILENAME):
        old = read_evaluations(out)
        mine = old[is_run(old, task)]
        new = frame.reindex(columns=list(COLUMNS))
        for column in STAMP_COLUMNS:
            known = dict(zip(_row_keys(mine), mine[column], strict=True))
            new[column] = [known.get(key, stamped[column]) for key in _row_keys(new)]
        merged = pd.concat([part for part in (old[~is_run(old, task)], new) if len(part)], ignore_index=True)
        write_atomically(out / harness.EVALUATIONS_FILENAME, merged.reindex(columns=list(COLUMNS)).to_csv(index=False))


def store_run(task: harness.RunTask, csv_text: str, metadata: Mapping[str, Any]) -> None:
    """Record a finished run: its rows, then its entry in ``run_metadata.json`` (status ``done`` or ``stopped``)."""
    stamped = {**stamp(), "cpu": metadata.get("cpu", harness.cpu_model())}  # the worker's CPU (Ray: another machine)
    rows = pd.read_csv(io.StringIO(csv_text))
    store_rows(task, stamped, rows)
    if len(rows):  # a run on another machine (Ray) wrote no log folder here: its rows give one
        write_zoo_from_rows(Path(task.out_dir) / harness.ZOO_DIRNAME, rows)
    out = Path(task.out_dir)
    with locked(lock_folder(task) / LOCK_FILENAME):
        everything = harness.read_json(out / harness.RUN_METADATA_FILENAME, {})
        status = "stopped" if metadata.get("stopped_by_rule") else "done"
        everything[task.name] = {**metadata, "status": status, "git": stamped["git"], "finished": harness.now()}
        write_atomically(out / harness.RUN_METADATA_FILENAME, json.dumps(dict(sorted(everything.items())), indent=2) + "\n")
        (out / harness.RUNS_DIRNAME / f"{task.name}.err").unlink(missing_ok=True)  # an earlier failure of the run


def forget_run(task: harness.RunTask) -> None:
    """A failed run is not finished: drop its entry of ``run_metadata.json`` (a run started again with ``--force``)
    and, when it has no checkpoints to resume from, its rows of ``evaluations.csv``."""
    out = Path(task.out_dir)
    with locked(lock_folder(task) / LOCK_FILENAME):
        everything = harness.read_json(out / harness.RUN_METADATA_FILENAME, {})
        if everything.pop(task.name, None) is not None:
            write_atomically(out / harness.RUN_METADATA_FILENAME, json.dumps(everything, indent=2) + "\n")
        if task.checkpoint_dir is None:
            _drop_rows(task)


def drop_rows(task: harness.RunTask) -> None:
    """Drop the run's rows of ``evaluations.csv`` before it starts again from step 0: it writes every row anew, with
    its own stamp (kept rows would lend theirs to a new row with the same key, as at step 0)."""
    with locked(lock_folder(task) / LOCK_FILENAME):
        _drop_rows(task)


def _drop_rows(task: harness.RunTask) -> None:
    old = read_evaluations(Path(task.out_dir))
    if is_run(old, task).any():
        write_atomically(Path(task.out_dir) / harness.EVALUATIONS_FILENAME, old[~is_run(old, task)].to_csv(index=False))
    zoo = Path(task.out_dir) / harness.ZOO_DIRNAME
    harness.zoo_evaluations_path(zoo, task.algo, task.env, task.seed).unlink(missing_ok=True)


def export_zoo(out: str | Path, to: str | Path | None = None) -> list[Path]:
    """
    Write rl-zoo3's log folder of a results folder from its ``evaluations.csv`` (for results written before runs
    wrote it themselves): each run's ``<to>/<algo>/<env>_<seed>/evaluations.npz`` (:func:`benchmarks.harness
    .write_zoo_evaluations`), its ``results`` the mean return minus and plus the standard deviation (the episodes'
    returns were not kept). A run
    whose file already holds the same evaluations (written by the run, with every episode) is left as it is.

    :param out: The results folder
    :param to: The log folder (default ``<out>/zoo``)
    :return: The files written
    :raises BadFileError: for a damaged ``evaluations.csv``
    """
    frame = read_evaluations(out).dropna(subset=["timesteps"])
    to = Path(out) / harness.ZOO_DIRNAME if to is None else Path(to)
    written = [write_zoo_from_rows(to, run) for _, run in frame.groupby(["algo", "env", "seed"], sort=True)]
    return [path for path in written if path is not None]


def write_zoo_from_rows(log_folder: Path, run: pd.DataFrame) -> Path | None:
    """Write one run's ``evaluations.npz`` of rl-zoo3's layout from its rows of ``evaluations.csv``, unless the file
    already holds the same evaluations (written by the run, with every episode).

    :return: The file written, ``None`` if kept"""
    run = run.sort_values("timesteps", kind="stable")
    first = run.iloc[0]
    path = harness.zoo_evaluations_path(log_folder, str(first["algo"]), str(first["env"]), int(first["seed"]))
    if path.is_file():
        with reading(path, "rl-zoo3's evaluations"), np.load(path, allow_pickle=False) as existing:
            if np.array_equal(existing["timesteps"], run["timesteps"].to_numpy()):
                return None
    harness.write_zoo_evaluations(path, run.to_dict("records"), None)
    return path


def progress_rows(task: harness.RunTask) -> functools.partial[None]:
    """:return: Where a worker writes a run's evaluations after each one: its rows of ``evaluations.csv``"""
    return functools.partial(store_rows, task, stamp())


def start_invocation(config_path: Path, invocation: Mapping[str, Any]) -> None:
    """Add an invocation (a command that runs benchmarks into a folder) to the folder's ``config.json``."""
    config = harness.read_json(config_path, {"invocations": []})
    config.setdefault("invocations", []).append(invocation)
    write_atomically(config_path, json.dumps(config, indent=2) + "\n")


def finish_invocation(config_path: Path, invocation: dict[str, Any], failed: list[str]) -> None:
    """Mark an invocation finished in ``config.json``, re-reading the file so that concurrent invocations keep theirs."""
    invocation.update(finished=harness.now(), runs_failed=failed)
    config = harness.read_json(config_path, {"invocations": []})
    entries = config.setdefault("invocations", [])
    key = (invocation["started"], invocation["command"])
    same = [i for i, entry in enumerate(entries) if (entry.get("started"), entry.get("command")) == key]
    if same:
        entries[same[0]] = invocation
    else:
        entries.append(invocation)
    write_atomically(config_path, json.dumps(config, indent=2) + "\n")
