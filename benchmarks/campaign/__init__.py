"""
Campaigns: long benchmark grids written down as a YAML file, run in the background, resumable at any moment.

A campaign file (``benchmarks/campaigns/*.yml``, described in ``benchmarks/README.md``) lists runs with their budgets
and evaluations, and optionally published numbers to set ours against and docs files whose block between the
campaign's markers the report rewrites. ``run FILE`` runs what is unfinished, resuming partial runs; ``status FILE...``
prints each run's state and the CPU-hours; ``report FILE [--check]`` writes ``results.md`` and the plots. Each run is
one :class:`benchmarks.harness.RunTask`; its rows of ``<out>/evaluations.csv`` are rewritten after every evaluation
(:mod:`benchmarks.store`); a finished run enters ``<out>/run_metadata.json`` with its status (``done``, or ``stopped``
by its stop rule) and its checkpoints are deleted.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import math
import os
import platform
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from benchmarks import backends, harness, reporting, store
from benchmarks.algorithms import get_algorithm_class, load_hyperparams, resolve_entry, zoo_v4_id
from benchmarks.checkpoint import BadFileError, default_checkpoint_root, read_state

logger = logging.getLogger(__name__)

RUN_LOCK_FILENAME = ".running"
#: The keys of a campaign file, of its ``eval`` block and of each entry of its ``runs`` (benchmarks/README.md,
#: "Campaigns"); :func:`load_campaign` checks every key and value before anything runs
CAMPAIGN_KEYS = ("out", "eval", "runs", "checkpoint_every", "report", "hyperparams_dir", "zoo_v4_entries", "notes")
CAMPAIGN_KEYS += ("reference", "docs", "order")
EVAL_KEYS = ("every_cpu_seconds", "every_steps", "episodes", "at_start")
RUN_KEYS = ("algo", "env", "envs", "seeds", "cpu_seconds", "steps", "max_steps", "entry", "hyperparams_dir")
RUN_KEYS += ("zoo_v4_entries", "vec_env", "stop_below", "tuning_seeds")
#: The run orders of a campaign file (key ``order``, :func:`order_tasks`); the first is the default
ORDERS = ("by_seed", "by_block")
#: The largest seed: SB3's ``set_random_seed`` seeds NumPy's legacy generator, which takes 0 to 2**32 - 1
MAX_SEED = 2**32 - 1


@dataclasses.dataclass(frozen=True)
class Campaign:
    """A parsed campaign file (for a grid of :mod:`benchmarks.run`, ``path`` is its output folder)."""

    path: Path
    out: Path
    tasks: tuple[harness.RunTask, ...]  # in the order they run (:func:`order_tasks`)
    report_marks: tuple[str, tuple[float, ...]] = ("timesteps", ())  # the clock ("cpu_time_s" or "timesteps") and marks
    notes: str = ""  # free text put at the top of the report
    reference: Reference | None = None  # published numbers the report sets ours against
    docs: tuple[Path, ...] = ()  # files whose block between the campaign's markers the report rewrites (write_docs)
    #: the runs on the seeds their entry was chosen on: listed apart (:func:`series`), left out of the comparison
    tuning_seeds: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Reference:
    """Published returns that a campaign's report sets its runs against (a paper's table)."""

    algo: str  # our algorithm compared with the first column (the ratio of our mean best to it)
    note: str  # what the numbers are (source and metric), printed above the table
    columns: dict[str, dict[str, float]]  # column name -> env id -> return


def load_campaign(path: str | Path, checkpoint_root: str | Path | None = None) -> Campaign:
    """Read and check a campaign file before anything runs: every key known, every value of its type and range (seeds
    in 0 to :data:`MAX_SEED`, ``true`` / ``false`` for flags, the ``docs`` files and ``hyperparams_dir`` folders
    present), every algorithm, variant and hyperparameter entry found.

    :param checkpoint_root: Folder of the checkpoints (default :func:`benchmarks.checkpoint.default_checkpoint_root`)
    :raises BadFileError: naming the file, the key path (``runs[2].seeds[0]``) and the problem"""
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_bytes())
    except (OSError, yaml.YAMLError) as exc:
        raise BadFileError(f"{path}: cannot be read as YAML: {exc}") from exc
    try:
        return _parse(path, spec, Path(checkpoint_root) if checkpoint_root is not None else default_checkpoint_root())
    except (ValueError, TypeError, KeyError, FileNotFoundError, ImportError) as exc:
        raise BadFileError(f"{path}: {exc}") from exc


def _problem(where: str, problem: str) -> ValueError:
    """:return: The error of the value at key path ``where`` (``""``: the whole file)"""
    return ValueError(f"{where}: {problem}" if where else problem)


def _mapping(value: Any, where: str, allowed: Sequence[str], required: Sequence[str] = ()) -> dict[str, Any]:
    """:return: ``value``, a mapping of some of the ``allowed`` keys with every ``required`` one"""
    if not isinstance(value, dict):
        raise _problem(where, f"must be a mapping of {', '.join(allowed)}, got {value!r}")
    unknown = sorted(str(key) for key in value if key not in allowed)
    if unknown:
        raise _problem(where, f"unknown keys {unknown}; allowed: {sorted(allowed)}")
    missing = [key for key in required if key not in value]
    if missing:
        raise _problem(where, f"missing {', '.join(missing)} (required: {', '.join(required)})")
    return value


def _number(value: Any, where: str, whole: bool = False, positive: bool = True) -> Any:
    """:return: ``value``, a finite number (``whole``: an ``int``; ``positive``: above 0)"""
    kind = "a positive number" if positive else "a finite number"
    if isinstance(value, str) and re.fullmatch(r"[-+]?[\d.]+e[-+]?\d+", value.strip(), re.IGNORECASE):
        raise _problem(where, f"must be {kind}, got the text {value!r} (YAML reads 1e6 as text: write 1.0e6)")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _problem(where, f"must be {kind}, got {value!r}")
    if positive and value <= 0:
        raise _problem(where, f"must be {kind}, got {value!r}")
    if whole and int(value) != value:
        raise _problem(where, f"must be a whole number, got {value!r}")
    return int(value) if whole else float(value)


def _flag(value: Any, where: str) -> bool:
    """:return: ``value``, YAML's ``true`` or ``false`` (the text ``'false'`` is refused, not read as true)"""
    if not isinstance(value, bool):
        raise _problem(where, f"must be true or false (unquoted), got {value!r}")
    return value


def _text(value: Any, where: str, choices: Sequence[str] = ()) -> str:
    """:return: ``value``, a non-empty string (one of ``choices`` when given)"""
    if not isinstance(value, str) or not value.strip():
        raise _problem(where, f"must be a non-empty string, got {value!r}")
    if choices and value not in choices:
        raise _problem(where, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def _items(value: Any, where: str) -> list[Any]:
    """:return: ``value``, a non-empty list"""
    if not isinstance(value, list) or not value:
        raise _problem(where, f"must be a non-empty list, got {value!r}")
    return value


def _existing(value: Any, where: str, folder: bool) -> str:
    """:return: ``value``, the path of an existing folder (``folder``) or file, relative to the working directory"""
    found = Path(_text(value, where))
    if not (found.is_dir() if folder else found.is_file()):
        raise _problem(where, f"{'folder' if folder else 'file'} {value!r} not found (from {Path.cwd()})")
    return value


def _parse(path: Path, spec: Any, checkpoint_root: Path) -> Campaign:
    spec = _mapping(spec, "", CAMPAIGN_KEYS, ("out", "eval", "runs"))
    evaluation = _mapping(spec["eval"], "eval", EVAL_KEYS)
    if not {"every_cpu_seconds", "every_steps"} & set(evaluation):
        raise _problem("eval", "needs every_cpu_seconds and/or every_steps (and episodes)")
    eval_cpu, eval_steps = evaluation.get("every_cpu_seconds"), evaluation.get("every_steps")
    out = Path(_text(spec["out"], "out"))
    common = {
        "eval_cpu_seconds": None if eval_cpu is None else _number(eval_cpu, "eval.every_cpu_seconds"),
        "eval_freq": harness.TIME_BUDGET_STEP_CAP if eval_steps is None else _number(eval_steps, "eval.every_steps", True),
        "checkpoint_every": _number(spec.get("checkpoint_every", harness.CHECKPOINT_EVERY), "checkpoint_every"),
        "n_eval_episodes": _number(evaluation.get("episodes", 10), "eval.episodes", True),
        "eval_at_start": _flag(evaluation.get("at_start", True), "eval.at_start"),
        "out_dir": str(out),
    }
    defaults = {
        "hyperparams_dir": _existing(spec["hyperparams_dir"], "hyperparams_dir", True) if "hyperparams_dir" in spec else None,
        "zoo_v4_entries": _flag(spec.get("zoo_v4_entries", False), "zoo_v4_entries"),
    }
    notes = "" if spec.get("notes") is None else spec["notes"]
    if not isinstance(notes, str):
        raise _problem("notes", f"must be text, got {notes!r}")
    docs = spec.get("docs", [])
    if not isinstance(docs, list):
        raise _problem("docs", f"must be a list of file paths, got {docs!r}")
    docs = [_existing(doc, f"docs[{index}]", False) for index, doc in enumerate(docs)]
    tasks: list[harness.RunTask] = []
    tuning_seeds: set[str] = set()
    for index, run in enumerate(_items(spec["runs"], "runs")):
        where = f"runs[{index}]"
        try:
            parsed = _parse_run(run, where, defaults, common, checkpoint_root)
        except (ValueError, TypeError, KeyError, FileNotFoundError, ImportError) as exc:
            if str(exc).startswith(where):
                raise
            raise _problem(where, str(exc)) from exc
        tasks += parsed
        if run.get("tuning_seeds"):
            tuning_seeds.update(task.name for task in parsed)
    tasks = order_tasks(tasks, _text(spec.get("order", ORDERS[0]), "order", ORDERS))
    duplicates = sorted(name for name, count in collections.Counter(task.name for task in tasks).items() if count > 1)
    if duplicates:
        raise _problem("runs", f"runs listed twice: {', '.join(duplicates)}")
    reference = _reference(spec["reference"], tasks) if "reference" in spec else None
    marks = _report_marks(spec.get("report"), tasks)
    return Campaign(path, out, tuple(tasks), marks, notes, reference, tuple(map(Path, docs)), frozenset(tuning_seeds))


def order_tasks(tasks: Sequence[harness.RunTask], order: str) -> list[harness.RunTask]:
    """:return: The runs in the order they run (the sorts are stable: the file's order breaks ties). ``by_seed``: seed
    by seed (seed 0 of every entry first), so that partial results cover every task early. ``by_block``: seed by seed
    and within a seed task by task (tasks in the order of their first run), so that the runs of one (task, seed) block
    run together for all algorithms, on the machine of that moment, and the algorithms compared on a block trained on
    one CPU model (unless a run resumes elsewhere)

    :raises ValueError: for another order"""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if order == "by_block":
        envs = {env: index for index, env in enumerate(dict.fromkeys(task.env for task in tasks))}
        return sorted(tasks, key=lambda task: (task.seed, envs[task.env]))
    return sorted(tasks, key=lambda task: task.seed)


def _reference(spec: Any, tasks: Sequence[harness.RunTask]) -> Reference:
    """:return: The campaign's ``reference`` block, checked (known algorithm, numeric returns of the campaign's envs)"""
    spec = _mapping(spec, "reference", ("algo", "note", "columns"), ("algo", "columns"))
    if _text(spec["algo"], "reference.algo") not in {task.algo for task in tasks}:
        raise _problem("reference.algo", f"{spec['algo']!r} is not an algorithm of the campaign's runs")
    columns = spec["columns"]
    if not isinstance(columns, dict) or not columns:
        raise _problem("reference.columns", "must map column names to {env id: return}")
    envs = sorted({task.env for task in tasks})
    checked: dict[str, dict[str, float]] = {}
    for name, values in columns.items():
        where = f"reference.columns[{name!r}]"
        values = _mapping(values, where, envs)  # env ids of the campaign's runs
        checked[str(name)] = {env: _number(value, f"{where}[{env!r}]", positive=False) for env, value in values.items()}
    note = spec.get("note", "")
    if not isinstance(note, str):
        raise _problem("reference.note", f"must be text, got {note!r}")
    return Reference(spec["algo"], note, checked)


def _parse_run(
    run: Any, where: str, defaults: Mapping[str, Any], common: Mapping[str, Any], checkpoint_root: Path
) -> list[harness.RunTask]:
    """:return: The task of every env and seed of one entry of ``runs`` (at key path ``where``)"""
    run = _mapping(run, where, RUN_KEYS, ("algo", "seeds"))
    if ("cpu_seconds" in run) == ("steps" in run):
        raise _problem(where, "give exactly one budget: cpu_seconds or steps")
    if "max_steps" in run and "steps" in run:
        raise _problem(f"{where}.max_steps", "caps a cpu_seconds budget: with steps, give steps alone")
    if ("env" in run) == ("envs" in run):
        raise _problem(where, "give env (one env id) or envs (a list of them), not both nor neither")
    envs = [run["env"]] if "env" in run else _items(run["envs"], f"{where}.envs")
    envs = [_text(env, f"{where}.env" if "env" in run else f"{where}.envs[{index}]") for index, env in enumerate(envs)]
    seeds = _items(run["seeds"], f"{where}.seeds")
    for index, seed in enumerate(seeds):
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise _problem(f"{where}.seeds[{index}]", f"must be a whole number from 0 to 2**32 - 1, got {seed!r}")
    stop_below = run.get("stop_below")
    if stop_below is not None:
        stop_below = _mapping(stop_below, f"{where}.stop_below", ("by_steps", "best_return"), ("by_steps", "best_return"))
        by_steps = _number(stop_below["by_steps"], f"{where}.stop_below.by_steps", True)
        stop_below = (by_steps, _number(stop_below["best_return"], f"{where}.stop_below.best_return", positive=False))
    cpu_budget = None if "cpu_seconds" not in run else _number(run["cpu_seconds"], f"{where}.cpu_seconds")
    hyperparams_dir = defaults["hyperparams_dir"]
    if "hyperparams_dir" in run:
        hyperparams_dir = _existing(run["hyperparams_dir"], f"{where}.hyperparams_dir", True)
    zoo_v4_entries = _flag(run.get("zoo_v4_entries", defaults["zoo_v4_entries"]), f"{where}.zoo_v4_entries")
    _flag(run.get("tuning_seeds", False), f"{where}.tuning_seeds")
    algo = _text(run["algo"], f"{where}.algo")
    get_algorithm_class(algo)
    budget_key = "steps" if "steps" in run else "max_steps"
    steps = _number(run.get(budget_key, harness.TIME_BUDGET_STEP_CAP), f"{where}.{budget_key}", True)
    entry = None if "entry" not in run else _text(run["entry"], f"{where}.entry")
    vec_env = None if "vec_env" not in run else _text(run["vec_env"], f"{where}.vec_env", harness.VEC_ENV_TYPES)
    options = {
        **common,
        "hyperparams_dir": hyperparams_dir,
        "vec_env": vec_env,
        "cpu_budget": cpu_budget,
        "zoo_v4_entries": zoo_v4_entries,
        "entry": entry,
        "stop_below": stop_below,
    }
    tasks = []
    for env in envs:
        file, key = resolve_entry(algo, env, hyperparams_dir, zoo_v4_entries, entry)
        content = yaml.safe_load(file.read_text()) or {}
        if key not in content:
            raise _problem(where, f"{file} has no entry for {env} (nor a default one); see zoo_v4_entries and entry")
        if key == "default" and zoo_v4_id(env) in content:  # the untuned default where a tuned entry exists
            raise _problem(
                where,
                f"{file} has no entry for {env} but one for {zoo_v4_id(env)}: give zoo_v4_entries: true to run "
                "that tuned entry (or entry: default to run the untuned default on purpose)",
            )
        load_hyperparams(algo, env, hyperparams_dir, zoo_v4_entries, entry)  # a variant's too
        for seed in seeds:
            checkpoint_dir = harness.run_checkpoint_dir(checkpoint_root, common["out_dir"], algo, env, seed)
            try:
                tasks.append(harness.RunTask(algo, env, seed, steps, checkpoint_dir=checkpoint_dir, **options))
            except ValueError as exc:
                raise _problem(where, str(exc)) from exc
    return tasks


def _report_marks(report: Any, tasks: Sequence[harness.RunTask]) -> tuple[str, tuple[float, ...]]:
    """:return: The clock and the marks of the report's table (default: 25%, 50%, 100% of the largest budget)"""
    if report is not None:
        report = _mapping(report, "report", ("cpu_seconds", "steps"))
        if len(report) != 1:
            raise _problem("report", f"takes one of cpu_seconds: [...] or steps: [...], got {report!r}")
        [(key, marks)] = report.items()
        marks = [_number(mark, f"report.{key}[{i}]", key == "steps") for i, mark in enumerate(_items(marks, f"report.{key}"))]
        return ("cpu_time_s" if key == "cpu_seconds" else "timesteps"), tuple(marks)
    cpu = [task.cpu_budget for task in tasks if task.cpu_budget is not None]
    clock, budget = ("cpu_time_s", max(cpu)) if cpu else ("timesteps", max(task.steps for task in tasks))
    return clock, tuple(fraction * budget for fraction in harness.TIME_FRACTIONS)


# ---------------------------------------------------------------------------------------------------- status
def run_states(campaign: Campaign) -> pd.DataFrame:
    """:return: One row per run, in run order: ``name, algo, env, seed, state`` (``done``, ``stopped``, ``failed``,
    ``partial`` or ``to do``), ``timesteps``, ``cpu_time_s`` (spent), ``budget`` (``"3600 CPU-s"``, ``"10M steps"``),
    ``cpu_left_s`` (estimated; NaN when unknown), ``last_return``, ``restarts`` (a partial run with rows past step 0
    but no checkpoint: it starts again from 0 and its rows are replaced) and ``problem`` (a damaged checkpoint: the
    error that fails the run, which is ``failed``; else empty)

    :raises BadFileError: for a damaged ``evaluations.csv`` or ``run_metadata.json`` (the campaign's, not one run's)"""
    frame = store.read_evaluations(campaign.out)
    metadata = harness.read_json(campaign.out / harness.RUN_METADATA_FILENAME, {})
    rows = []
    for task in campaign.tasks:
        run = frame[store.is_run(frame, task)].sort_values("timesteps")
        state, problem = None, ""
        try:
            state = read_state(task.checkpoint_dir) if task.checkpoint_dir else None
        except BadFileError as exc:
            problem = str(exc)
        steps = max(int(run["timesteps"].max()) if len(run) else 0, state["timesteps"] if state else 0)
        cpu = max(float(run["cpu_time_s"].max()) if len(run) else 0.0, state["cpu_time_s"] if state else 0.0)
        if task.name in metadata:
            status = metadata[task.name].get("status", "done")
        elif problem or (campaign.out / harness.RUNS_DIRNAME / f"{task.name}.err").is_file():
            status = "failed"
        else:
            status = "partial" if len(run) or state else "to do"
        budget = f"{task.cpu_budget:g} CPU-s" if task.cpu_budget else f"{reporting.steps(task.steps)} steps"
        left = 0.0 if status in ("done", "stopped") else _cpu_left(task, steps, cpu, frame)
        last = float(run["mean_return"].iloc[-1]) if len(run) else math.nan
        started = bool(run["timesteps"].gt(0).any())
        restarts = status == "partial" and task.checkpoint_dir is not None and state is None and started
        rows.append([task.name, task.algo, task.env, task.seed, status, steps, cpu, budget, left, last, restarts, problem])
    columns = ["name", "algo", "env", "seed", "state", "timesteps", "cpu_time_s", "budget", "cpu_left_s", "last_return"]
    columns += ["restarts", "problem"]
    return pd.DataFrame(rows, columns=columns)


def _cpu_left(task: harness.RunTask, steps: int, cpu: float, frame: pd.DataFrame) -> float:
    """:return: CPU seconds a run still needs: the rest of its CPU budget, or its steps left at the speed of its
    (algo, env) so far; NaN when nothing of that (algo, env) has run yet"""
    if task.cpu_budget is not None:
        return max(task.cpu_budget - cpu, 0.0)
    same = frame[(frame["algo"] == task.algo) & (frame["env"] == task.env) & (frame["cpu_time_s"] > 0)]
    if not len(same):
        return math.nan
    last = same.sort_values("timesteps").groupby("seed").tail(1)
    rate = float(last["timesteps"].sum() / last["cpu_time_s"].sum())
    return max(task.steps - steps, 0) / rate if rate > 0 else math.nan


def format_status(campaign: Campaign, states: pd.DataFrame) -> str:
    """:return: The text printed by ``status``: one line per run, then the totals"""
    lines = [f"Campaign {campaign.path} -> {campaign.out}", ""]
    width = max(len(name) for name in states["name"])
    for row in states.itertuples():
        last = "" if math.isnan(row.last_return) else f"  last return {row.last_return:.1f}"
        last += "  NO CHECKPOINT: starts again from 0" if row.restarts else ""
        last += f"  DAMAGED CHECKPOINT: {row.problem}" if row.problem else ""
        lines.append(
            f"{row.name:<{width}}  {row.state:<7}  {reporting.steps(float(row.timesteps)):>6} steps  "
            f"{row.cpu_time_s:>7.0f} CPU-s  (budget {row.budget}){last}"
        )
    counts = states["state"].value_counts()
    summary = ", ".join(f"{counts.get(state, 0)} {state}" for state in ("done", "stopped", "partial", "failed", "to do"))
    unknown = int(states["cpu_left_s"].isna().sum())
    left = f"{states['cpu_left_s'].sum() / 3600:.2f}" + (f" + {unknown} run(s) not estimated yet" if unknown else "")
    spent = f"CPU-hours spent (training): {states['cpu_time_s'].sum() / 3600:.2f}; left (estimated): {left}"
    return "\n".join([*lines, "", f"{len(states)} runs: {summary}", spent])


# ---------------------------------------------------------------------------------------------------- run
def run_campaign(
    campaign: Campaign,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    command: str | None = None,
    recorded: Mapping[str, Any] | None = None,
    skip_done: bool = True,
    fresh_process_per_run: bool = False,
    *,
    report: Callable[[Campaign], Path],
) -> list[dict[str, Any]]:
    """
    Run the campaign's unfinished runs in their order (``partial`` ones resume from their checkpoints, ``failed`` ones
    start again), then write the report. Grids (:mod:`benchmarks.run`) run through here too.

    :param workers: Worker processes (``local``) or CPUs of a new local Ray instance (``ray`` without address)
    :param backend: ``local`` or ``ray`` (:func:`benchmarks.backends.execute`)
    :param address: With ``ray``: the cluster's head (``HOST:PORT`` or ``auto``)
    :param command: The command line recorded in ``config.json``
    :param recorded: What ``config.json`` records besides the command, workers, backend, machine and times (default:
        the campaign file)
    :param skip_done: Skip the runs already ``done`` or ``stopped`` (else run every run again)
    :param fresh_process_per_run: Start a new worker process for every run
    :param report: Writes the report (:func:`benchmarks.report.write_report` for a campaign file's)
    :return: One result per run executed
    :raises RuntimeError: if the campaign is already running (another ``run`` holds its lock)
    """
    with _running(campaign):
        states = run_states(campaign).set_index("name")
        done = ("done", "stopped") if skip_done else ()
        todo = [task for task in campaign.tasks if states.loc[task.name, "state"] not in done]
        for task in todo:
            if states.loc[task.name, "restarts"]:
                logger.warning(
                    "%s has rows to %.0f CPU-s but no checkpoint in %s: it starts again from 0 and its rows are replaced",
                    task.name,
                    states.loc[task.name, "cpu_time_s"],
                    task.checkpoint_dir,
                )
            damaged = bool(states.loc[task.name, "problem"])  # the run fails naming its file; its rows stay
            starts_at_zero = task.checkpoint_dir is None or (not damaged and read_state(task.checkpoint_dir) is None)
            if starts_at_zero and states.loc[task.name, "state"] != "to do":
                store.drop_rows(task)
        campaign.out.mkdir(parents=True, exist_ok=True)
        invocation: dict[str, Any] = {
            "command": command or shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
            **({"campaign": str(campaign.path)} if recorded is None else recorded),
            "workers": workers,
            "backend": backend,
        }
        with contextlib.ExitStack() as stack:
            if backend == "ray" and todo:
                invocation["ray"] = stack.enter_context(backends.ray_session(workers, address))
            invocation.update(machine=harness.machine_info(), started=harness.now(), finished=None, runs_executed=len(todo))
            store.start_invocation(campaign.out / harness.CONFIG_FILENAME, invocation)
            logger.info("Running %d of %d run(s) of %s on %s", len(todo), len(campaign.tasks), campaign.path, backend)
            results = []
            if todo:
                results = backends.execute(todo, workers, store.store_run, store.progress_rows, backend, fresh_process_per_run)
        failed = sorted(result["name"] for result in results if not result["ok"])
        for task in todo:
            if task.name in failed:
                store.forget_run(task)
        store.finish_invocation(campaign.out / harness.CONFIG_FILENAME, invocation, failed)
        report(campaign)
        return results


@contextlib.contextmanager
def _running(campaign: Campaign) -> Iterator[None]:
    """Hold the campaign's run locks: one ``run`` at a time, whether started from another checkout (the lock beside
    the checkpoints, :func:`benchmarks.store.lock_folder`) or with another checkpoint folder (the lock in the results
    folder's ``runs/``)."""
    checkpoints = Path(campaign.tasks[0].checkpoint_dir or campaign.out / harness.RUNS_DIRNAME).parent
    paths = dict.fromkeys([store.lock_folder(campaign.tasks[0]), campaign.out / harness.RUNS_DIRNAME])
    with contextlib.ExitStack() as stack:
        for path in (folder / RUN_LOCK_FILENAME for folder in paths):
            try:
                handle = stack.enter_context(store.locked(path, blocking=False))
            except BlockingIOError:
                raise RuntimeError(
                    f"{campaign.path} is already running ({path.read_text().strip() or 'another process'}): one run "
                    f"command per campaign (this one: checkpoints in {checkpoints}); see its progress with the status "
                    "command"
                ) from None
            handle.truncate(0)
            handle.write(f"pid {os.getpid()} on {platform.node()}, checkpoints in {checkpoints}\n")
            handle.flush()
        yield
