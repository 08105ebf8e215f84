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

import argparse
import collections
import contextlib
import dataclasses
import logging
import math
import os
import platform
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from benchmarks import backends, harness, reporting, store
from benchmarks.algorithms import get_algorithm_class, load_hyperparams, resolve_entry, zoo_v4_id
from benchmarks.checkpoint import default_checkpoint_root, read_state

logger = logging.getLogger(__name__)

RUN_LOCK_FILENAME = ".running"
RUN_KEYS = {"algo", "env", "envs", "seeds", "cpu_seconds", "steps", "max_steps", "entry", "hyperparams_dir"}
RUN_KEYS |= {"zoo_v4_entries", "vec_env", "stop_below", "tuning_seeds"}
CAMPAIGN_KEYS = {"out", "eval", "runs", "checkpoint_every", "report", "hyperparams_dir", "zoo_v4_entries", "notes"}
CAMPAIGN_KEYS |= {"reference", "docs", "order"}
#: The run orders of a campaign file (key ``order``, :func:`order_tasks`); the first is the default
ORDERS = ("by_seed", "by_block")


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


def _positive(value: Any, what: str, kind: type = float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    if kind is int and int(value) != value:
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return kind(value)


def load_campaign(path: str | Path, checkpoint_root: str | Path | None = None) -> Campaign:
    """Read and check a campaign file (every algorithm, variant and hyperparameter entry must exist).

    :param checkpoint_root: Folder of the checkpoints (default :func:`benchmarks.checkpoint.default_checkpoint_root`)
    :raises ValueError: naming the file and the problem"""
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
        return _parse(path, spec, Path(checkpoint_root) if checkpoint_root is not None else default_checkpoint_root())
    except (ValueError, TypeError, KeyError, FileNotFoundError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


def _parse(path: Path, spec: Any, checkpoint_root: Path) -> Campaign:
    if not isinstance(spec, dict) or not {"out", "eval", "runs"} <= set(spec):
        raise ValueError("a campaign is a mapping with at least 'out', 'eval' and 'runs'")
    unknown = set(spec) - CAMPAIGN_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; allowed: {sorted(CAMPAIGN_KEYS)}")
    evaluation = spec["eval"]
    if not isinstance(evaluation, dict) or not {"every_cpu_seconds", "every_steps"} & set(evaluation):
        raise ValueError("'eval' needs every_cpu_seconds and/or every_steps (and episodes)")
    eval_cpu, eval_steps = evaluation.get("every_cpu_seconds"), evaluation.get("every_steps")
    out = Path(spec["out"])
    common = {
        "eval_cpu_seconds": None if eval_cpu is None else _positive(eval_cpu, "eval.every_cpu_seconds"),
        "eval_freq": harness.TIME_BUDGET_STEP_CAP if eval_steps is None else _positive(eval_steps, "eval.every_steps", int),
        "checkpoint_every": _positive(spec.get("checkpoint_every", harness.CHECKPOINT_EVERY), "checkpoint_every"),
        "n_eval_episodes": _positive(evaluation.get("episodes", 10), "eval.episodes", int),
        "eval_at_start": bool(evaluation.get("at_start", True)),
        "out_dir": str(out),
    }
    if not isinstance(spec["runs"], list) or not spec["runs"]:
        raise ValueError("'runs' must be a non-empty list")
    tasks: list[harness.RunTask] = []
    tuning_seeds: set[str] = set()
    for index, run in enumerate(spec["runs"]):
        try:
            parsed = _parse_run(run, spec, common, checkpoint_root)
        except (ValueError, TypeError, KeyError, FileNotFoundError, ImportError) as exc:
            raise ValueError(f"runs[{index}]: {exc}") from exc
        tasks += parsed
        if run.get("tuning_seeds"):
            tuning_seeds.update(task.name for task in parsed)
    tasks = order_tasks(tasks, spec.get("order", ORDERS[0]))
    duplicates = sorted(name for name, count in collections.Counter(task.name for task in tasks).items() if count > 1)
    if duplicates:
        raise ValueError(f"runs listed twice: {', '.join(duplicates)}")
    reference = _reference(spec["reference"], tasks) if "reference" in spec else None
    docs = spec.get("docs", [])
    if not isinstance(docs, list) or not all(isinstance(doc, str) for doc in docs):
        raise ValueError("'docs' must be a list of file paths")
    marks = _report_marks(spec.get("report"), tasks)
    notes = str(spec.get("notes", ""))
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
    if not isinstance(spec, dict) or set(spec) - {"algo", "note", "columns"} or not {"algo", "columns"} <= set(spec):
        raise ValueError(f"'reference' takes algo, columns and optionally note, got {spec!r}")
    if spec["algo"] not in {task.algo for task in tasks}:
        raise ValueError(f"reference.algo {spec['algo']!r} is not an algorithm of the campaign's runs")
    columns = spec["columns"]
    if not isinstance(columns, dict) or not columns:
        raise ValueError("reference.columns must map column names to {env id: return}")
    envs = {task.env for task in tasks}
    checked: dict[str, dict[str, float]] = {}
    for name, values in columns.items():
        if not isinstance(values, dict) or set(values) - envs:
            raise ValueError(f"reference.columns[{name!r}] must map env ids of the campaign's runs to returns")
        for env, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"reference.columns[{name!r}][{env!r}] must be a finite number, got {value!r}")
        checked[str(name)] = {env: float(value) for env, value in values.items()}
    return Reference(str(spec["algo"]), str(spec.get("note", "")), checked)


def _parse_run(run: Any, spec: Mapping[str, Any], common: Mapping[str, Any], checkpoint_root: Path) -> list[harness.RunTask]:
    """:return: The task of every env and seed of one entry of ``runs``"""
    if not isinstance(run, dict):
        raise ValueError(f"each run is a mapping, got {run!r}")
    unknown = set(run) - RUN_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; allowed: {sorted(RUN_KEYS)}")
    if ("cpu_seconds" in run) == ("steps" in run):
        raise ValueError("give exactly one budget: cpu_seconds or steps")
    if not isinstance(run.get("tuning_seeds", False), bool):
        raise ValueError(f"tuning_seeds must be true or false, got {run['tuning_seeds']!r}")
    envs = run["envs"] if "envs" in run else [run["env"]]
    if not isinstance(envs, list) or not envs or not all(isinstance(env, str) for env in envs):
        raise ValueError(f"env / envs must be env ids, got {envs!r}")
    seeds = run["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"seeds must be a list of integers, got {seeds!r}")
    stop_below = run.get("stop_below")
    if stop_below is not None:
        if not isinstance(stop_below, dict) or set(stop_below) != {"by_steps", "best_return"}:
            raise ValueError(f"stop_below must be {{by_steps: N, best_return: VALUE}}, got {stop_below!r}")
        stop_below = (_positive(stop_below["by_steps"], "stop_below.by_steps", int), float(stop_below["best_return"]))
    cpu_budget = None if "cpu_seconds" not in run else _positive(run["cpu_seconds"], "cpu_seconds")
    hyperparams_dir = run.get("hyperparams_dir", spec.get("hyperparams_dir"))
    zoo_v4_entries = bool(run.get("zoo_v4_entries", spec.get("zoo_v4_entries", False)))
    algo = str(run["algo"])
    get_algorithm_class(algo)
    steps = _positive(run.get("steps", run.get("max_steps", harness.TIME_BUDGET_STEP_CAP)), "steps", int)
    options = {
        **common,
        "hyperparams_dir": None if hyperparams_dir is None else str(hyperparams_dir),
        "vec_env": run.get("vec_env"),
        "cpu_budget": cpu_budget,
        "zoo_v4_entries": zoo_v4_entries,
        "entry": run.get("entry"),
        "stop_below": stop_below,
    }
    tasks = []
    for env in envs:
        file, key = resolve_entry(algo, env, hyperparams_dir, zoo_v4_entries, run.get("entry"))
        content = yaml.safe_load(file.read_text()) or {}
        if key not in content:
            raise ValueError(f"{file} has no entry for {env} (nor a default one); see zoo_v4_entries and entry")
        if key == "default" and zoo_v4_id(env) in content:  # the untuned default where a tuned entry exists
            raise ValueError(
                f"{file} has no entry for {env} but one for {zoo_v4_id(env)}: give zoo_v4_entries: true to run "
                "that tuned entry (or entry: default to run the untuned default on purpose)"
            )
        load_hyperparams(algo, env, hyperparams_dir, zoo_v4_entries, run.get("entry"))  # a variant's too
        for seed in seeds:
            checkpoint_dir = harness.run_checkpoint_dir(checkpoint_root, common["out_dir"], algo, env, seed)
            tasks.append(harness.RunTask(algo, env, seed, steps, checkpoint_dir=checkpoint_dir, **options))
    return tasks


def _report_marks(report: Any, tasks: Sequence[harness.RunTask]) -> tuple[str, tuple[float, ...]]:
    """:return: The clock and the marks of the report's table (default: 25%, 50%, 100% of the largest budget)"""
    report = report or {}
    if not isinstance(report, dict) or len(set(report) - {"cpu_seconds", "steps"}) or len(report) > 1:
        raise ValueError(f"'report' takes one of cpu_seconds: [...] or steps: [...], got {report!r}")
    if "cpu_seconds" in report:
        return "cpu_time_s", tuple(_positive(mark, "report.cpu_seconds", float) for mark in report["cpu_seconds"])
    if "steps" in report:
        return "timesteps", tuple(_positive(mark, "report.steps", int) for mark in report["steps"])
    cpu = [task.cpu_budget for task in tasks if task.cpu_budget is not None]
    clock, budget = ("cpu_time_s", max(cpu)) if cpu else ("timesteps", max(task.steps for task in tasks))
    return clock, tuple(fraction * budget for fraction in harness.TIME_FRACTIONS)


# ---------------------------------------------------------------------------------------------------- status
def run_states(campaign: Campaign) -> pd.DataFrame:
    """:return: One row per run, in run order: ``name, algo, env, seed, state`` (``done``, ``stopped``, ``failed``,
    ``partial`` or ``to do``), ``timesteps``, ``cpu_time_s`` (spent), ``budget`` (``"3600 CPU-s"``, ``"10M steps"``),
    ``cpu_left_s`` (estimated; NaN when unknown), ``last_return`` and ``restarts`` (a partial run with rows past step 0
    but no checkpoint: it starts again from 0 and its rows are replaced)"""
    frame = store.read_evaluations(campaign.out)
    metadata = harness.read_json(campaign.out / harness.RUN_METADATA_FILENAME, {})
    rows = []
    for task in campaign.tasks:
        run = frame[store.is_run(frame, task)].sort_values("timesteps")
        state = read_state(task.checkpoint_dir) if task.checkpoint_dir else None
        steps = max(int(run["timesteps"].max()) if len(run) else 0, state["timesteps"] if state else 0)
        cpu = max(float(run["cpu_time_s"].max()) if len(run) else 0.0, state["cpu_time_s"] if state else 0.0)
        if task.name in metadata:
            status = metadata[task.name].get("status", "done")
        elif (campaign.out / harness.RUNS_DIRNAME / f"{task.name}.err").is_file():
            status = "failed"
        else:
            status = "partial" if len(run) or state else "to do"
        budget = f"{task.cpu_budget:g} CPU-s" if task.cpu_budget else f"{reporting.steps(task.steps)} steps"
        left = 0.0 if status in ("done", "stopped") else _cpu_left(task, steps, cpu, frame)
        last = float(run["mean_return"].iloc[-1]) if len(run) else math.nan
        started = bool(run["timesteps"].gt(0).any())
        restarts = status == "partial" and task.checkpoint_dir is not None and state is None and started
        rows.append([task.name, task.algo, task.env, task.seed, status, steps, cpu, budget, left, last, restarts])
    columns = ["name", "algo", "env", "seed", "state", "timesteps", "cpu_time_s", "budget", "cpu_left_s", "last_return"]
    columns.append("restarts")
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
    report: Callable[[Campaign], Path] | None = None,
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
    :param report: Writes the report (default :func:`benchmarks.report.write_report`)
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
            starts_at_zero = task.checkpoint_dir is None or read_state(task.checkpoint_dir) is None
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
        if report is None:
            from benchmarks.report import write_report as report  # the report side imports this module
        report(campaign)
        return results


@contextlib.contextmanager
def _running(campaign: Campaign) -> Iterator[None]:
    """Hold the campaign's run lock (in :func:`benchmarks.store.lock_folder`): one ``run`` at a time."""
    path = store.lock_folder(campaign.tasks[0]) / RUN_LOCK_FILENAME
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(store.locked(path, blocking=False))
        except BlockingIOError:
            raise RuntimeError(
                f"{campaign.path} is already running ({path.read_text().strip() or 'another process'}): one run command "
                "per campaign; see its progress with the status command"
            ) from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()} on {platform.node()}\n")
        handle.flush()
        yield


def build_parser() -> argparse.ArgumentParser:
    """:return: The argument parser of ``python -m benchmarks.campaign``"""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.campaign", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the unfinished runs, resuming the partial ones")
    status = commands.add_parser("status", help="print done / stopped / partial / to do and the CPU-hours")
    report = commands.add_parser("report", help="write results.md and the plots from evaluations.csv")
    report.add_argument("--check", action="store_true", help="write nothing; exit 1 if a docs block differs from the data")
    status.add_argument("file", nargs="+", help="campaign YAML files (each one's status in turn)")
    for sub in (run, status, report):
        if sub is not status:
            sub.add_argument("file", help="campaign YAML file")
        sub.add_argument("--checkpoint-dir", help="folder of the checkpoints (default: $SB3_PCL_CHECKPOINT_DIR)")
    run.add_argument("--workers", type=int, default=1, help="parallel runs (default 1; each run uses one core)")
    run.add_argument("--nice", type=int, default=10, help="niceness added to this process and its workers (default 10)")
    run.add_argument("--backend", choices=backends.BACKENDS, default="local", help="local worker processes, or Ray tasks")
    run.add_argument("--address", help="with --backend ray: HOST:PORT of the cluster's head, or auto")
    run.add_argument("--quiet", action="store_true", help="only warnings")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.campaign``. :return: The exit code (1 when a run failed)"""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO, format="%(message)s")
    files = args.file if args.command == "status" else [args.file]
    try:
        campaigns = [load_campaign(file, args.checkpoint_dir) for file in files]
    except (ValueError, ImportError) as exc:
        parser.error(str(exc))
    if args.command == "status":
        for file, campaign in zip(files, campaigns, strict=True):
            status = format_status(campaign, run_states(campaign))
            print(f"{file}:\n{status}\n" if len(files) > 1 else status)
        return 0
    campaign = campaigns[0]
    if args.command == "report":
        from benchmarks.report import report_command  # the report side imports this module

        return report_command(campaign, args.check)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    try:
        backends.check_backend(args.backend, args.address)
    except ValueError as exc:
        parser.error(str(exc))
    os.nice(args.nice)
    command = shlex.join(["python", "-m", "benchmarks.campaign", *(sys.argv[1:] if argv is None else argv)])
    try:
        results = run_campaign(campaign, args.workers, args.backend, args.address, command)
    except RuntimeError as exc:
        parser.error(str(exc))
    print(format_status(campaign, run_states(campaign)))
    return 1 if any(not result["ok"] for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
