"""
Campaigns: long benchmark grids written down as a YAML file, run in the background, resumable at any moment.

A campaign file (``benchmarks/campaigns/*.yml``, see ``benchmarks/README.md``)::

    out: benchmarks/results/cpu_hour            # folder of the results (relative to the working directory)
    eval: {every_cpu_seconds: 300, episodes: 10}   # and/or every_steps; at_start (default true)
    checkpoint_every: 300                       # CPU seconds between checkpoints (default 300)
    report: {cpu_seconds: [900, 1800, 3600]}    # marks of the report's table (or steps: [...])
    reference:                                  # optional: published numbers to set ours against
      algo: trust_pcl                           # our algorithm set against the first column (ratio)
      note: the Trust-PCL paper's Table 1, best average reward within 10M env steps
      columns: {Paper Trust-PCL: {HalfCheetah-v5: 7057}, Paper TRPO: {HalfCheetah-v5: 4344}}
    docs: [docs/reproduction.md]                # files whose block between the campaign's markers the report rewrites:
                                                # the reference table, or without a reference who leads at each mark
    runs:
      - {algo: trust_pcl, env: HalfCheetah-v5, seeds: [0, 1, 2], cpu_seconds: 3600}
      - {algo: trust_pcl, envs: [Hopper-v5, Ant-v5], seeds: [0], steps: 10000000, entry: Ant-v5,
         stop_below: {by_steps: 3000000, best_return: 951}}

Commands::

    python -m benchmarks.campaign run FILE [--workers N]   # run what is unfinished, resuming partial runs
    python -m benchmarks.campaign status FILE              # done / stopped / partial / to do, CPU-hours
    python -m benchmarks.campaign report FILE              # results.md and plots from evaluations.csv
    python -m benchmarks.campaign report FILE --check      # exit 1 if a docs block differs from what the data gives

Each run is one :class:`benchmarks.harness.RunTask` trained by :func:`benchmarks.harness.run_experiment` (rl-zoo3's
``ExperimentManager`` builds the model): CPU-time or step budget, checkpoints outside the work tree, resume. After
every evaluation a worker rewrites the run's rows of ``<out>/evaluations.csv`` (under a file lock, through a
temporary file and a rename: a kill at any moment leaves a whole file); a finished run enters
``<out>/run_metadata.json`` with its status (``done``, or ``stopped`` by its stop rule) and its checkpoints are
deleted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import logging
import math
import os
import platform
import shlex
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from benchmarks import backends, harness, reporting, store
from benchmarks.algorithms import get_algorithm_class, load_hyperparams, resolve_entry, zoo_v4_id
from benchmarks.checkpoint import default_checkpoint_root, read_state, write_atomically
from benchmarks.summary import MARKS_HEADER, bootstrap_interval, draw_on_clock, marks_rows, report_row, save_plot, value_at

logger = logging.getLogger(__name__)

RUN_LOCK_FILENAME = ".running"
RUN_KEYS = {"algo", "env", "envs", "seeds", "cpu_seconds", "steps", "max_steps", "entry", "hyperparams_dir"}
RUN_KEYS |= {"zoo_v4_entries", "vec_env", "stop_below"}
CAMPAIGN_KEYS = {"out", "eval", "runs", "checkpoint_every", "report", "hyperparams_dir", "zoo_v4_entries", "notes"}
CAMPAIGN_KEYS |= {"reference", "docs"}


@dataclasses.dataclass(frozen=True)
class Campaign:
    """
    A parsed campaign file.

    :param path: The file (a grid of :mod:`benchmarks.run`, given on the command line: its output folder)
    :param out: Output folder
    :param tasks: The runs, in the order they run (seed by seed, in the file's order within a seed)
    :param report_marks: ``("cpu_time_s" | "timesteps", marks)`` of the report's table
    :param notes: Free text put at the top of the report
    :param reference: The published numbers the report sets ours against (:class:`Reference`), if any
    :param docs: Files holding a block between this campaign's markers (:func:`doc_markers`) that the report rewrites
    """

    path: Path
    out: Path
    tasks: tuple[harness.RunTask, ...]
    report_marks: tuple[str, tuple[float, ...]] = ("timesteps", ())
    notes: str = ""
    reference: Reference | None = None
    docs: tuple[Path, ...] = ()


@dataclasses.dataclass(frozen=True)
class Reference:
    """
    Published returns that a campaign's report sets its runs against (a paper's table).

    :param algo: Our algorithm compared with the first column (the ratio of our mean best to it)
    :param note: What the numbers are (source and metric), printed above the table
    :param columns: Column name -> env id -> return
    """

    algo: str
    note: str
    columns: dict[str, dict[str, float]]


def _positive(value: Any, what: str, kind: type = float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    if kind is int and int(value) != value:
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return kind(value)


def load_campaign(path: str | Path, checkpoint_root: str | Path | None = None) -> Campaign:
    """
    Read and check a campaign file (every algorithm, variant and hyperparameter entry must exist).

    :param path: The YAML file
    :param checkpoint_root: Folder of the checkpoints (default :func:`benchmarks.checkpoint.default_checkpoint_root`)
    :return: The campaign
    :raises ValueError: naming the file and the problem
    """
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
    eval_cpu = evaluation.get("every_cpu_seconds")
    eval_cpu = None if eval_cpu is None else _positive(eval_cpu, "eval.every_cpu_seconds")
    eval_steps = evaluation.get("every_steps")
    eval_freq = harness.TIME_BUDGET_STEP_CAP if eval_steps is None else _positive(eval_steps, "eval.every_steps", int)
    out = Path(spec["out"])
    checkpoint_every = _positive(spec.get("checkpoint_every", harness.CHECKPOINT_EVERY), "checkpoint_every")
    common = {
        "eval_freq": eval_freq,
        "n_eval_episodes": _positive(evaluation.get("episodes", 10), "eval.episodes", int),
        "eval_at_start": bool(evaluation.get("at_start", True)),
        "eval_cpu_seconds": eval_cpu,
        "out_dir": str(out),
        "checkpoint_every": checkpoint_every,
    }
    if not isinstance(spec["runs"], list) or not spec["runs"]:
        raise ValueError("'runs' must be a non-empty list")
    blocks = []
    for index, run in enumerate(spec["runs"]):
        try:
            blocks.append(_parse_run(run, spec, common))
        except (ValueError, TypeError, KeyError, FileNotFoundError, ImportError) as exc:
            raise ValueError(f"runs[{index}]: {exc}") from exc
    seeds = sorted({seed for block in blocks for seed, _ in block})
    tasks = [task for seed in seeds for block in blocks for task_seed, task in block if task_seed == seed]
    names = [task.name for task in tasks]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"runs listed twice: {', '.join(duplicates)}")
    tasks = [
        dataclasses.replace(
            task, checkpoint_dir=harness.run_checkpoint_dir(checkpoint_root, out, task.algo, task.env, task.seed)
        )
        for task in tasks
    ]
    notes = str(spec.get("notes", ""))
    reference = _reference(spec["reference"], tasks) if "reference" in spec else None
    docs = spec.get("docs", [])
    if not isinstance(docs, list) or not all(isinstance(doc, str) for doc in docs):
        raise ValueError("'docs' must be a list of file paths")
    marks = _report_marks(spec.get("report"), tasks)
    return Campaign(path, out, tuple(tasks), marks, notes, reference, tuple(Path(doc) for doc in docs))


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


def _parse_run(run: Any, spec: Mapping[str, Any], common: Mapping[str, Any]) -> list[tuple[int, harness.RunTask]]:
    """:return: ``(seed, task)`` of every seed and env of one entry of ``runs``"""
    if not isinstance(run, dict):
        raise ValueError(f"each run is a mapping, got {run!r}")
    unknown = set(run) - RUN_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; allowed: {sorted(RUN_KEYS)}")
    if ("cpu_seconds" in run) == ("steps" in run):
        raise ValueError("give exactly one budget: cpu_seconds or steps")
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
    steps = run.get("steps", run.get("max_steps", harness.TIME_BUDGET_STEP_CAP))
    hyperparams_dir = run.get("hyperparams_dir", spec.get("hyperparams_dir"))
    zoo_v4_entries = bool(run.get("zoo_v4_entries", spec.get("zoo_v4_entries", False)))
    algo = str(run["algo"])
    get_algorithm_class(algo)
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
            task = harness.RunTask(
                algo,
                env,
                seed,
                _positive(steps, "steps", int),
                hyperparams_dir=None if hyperparams_dir is None else str(hyperparams_dir),
                vec_env=run.get("vec_env"),
                cpu_budget=cpu_budget,
                zoo_v4_entries=zoo_v4_entries,
                entry=run.get("entry"),
                stop_below=stop_below,
                **common,
            )
            tasks.append((seed, task))
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
    if cpu:
        return "cpu_time_s", tuple(fraction * max(cpu) for fraction in harness.TIME_FRACTIONS)
    return "timesteps", tuple(fraction * max(task.steps for task in tasks) for fraction in harness.TIME_FRACTIONS)


# ---------------------------------------------------------------------------------------------------- status
def run_states(campaign: Campaign) -> pd.DataFrame:
    """
    :return: One row per run, in run order: ``name, algo, env, seed, state`` (``done``, ``stopped``, ``failed``,
        ``partial`` or ``to do``), ``timesteps``, ``cpu_time_s`` (spent, as recorded), ``budget`` (``"3600 CPU-s"`` or
        ``"10M steps"``), ``cpu_left_s`` (estimated; NaN when unknown) and ``last_return``
    """
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
        rows.append(
            {
                "name": task.name,
                "algo": task.algo,
                "env": task.env,
                "seed": task.seed,
                "state": status,
                "timesteps": steps,
                "cpu_time_s": cpu,
                "budget": f"{task.cpu_budget:g} CPU-s" if task.cpu_budget else f"{reporting.steps(task.steps)} steps",
                "cpu_left_s": 0.0 if status in ("done", "stopped") else _cpu_left(task, steps, cpu, frame),
                "last_return": float(run["mean_return"].iloc[-1]) if len(run) else math.nan,
            }
        )
    return pd.DataFrame(rows)


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
        lines.append(
            f"{row.name:<{width}}  {row.state:<7}  {reporting.steps(float(row.timesteps)):>6} steps  "
            f"{row.cpu_time_s:>7.0f} CPU-s  (budget {row.budget}){last}"
        )
    counts = states["state"].value_counts()
    summary = ", ".join(f"{counts.get(state, 0)} {state}" for state in ("done", "stopped", "partial", "failed", "to do"))
    unknown = int(states["cpu_left_s"].isna().sum())
    left = f"{states['cpu_left_s'].sum() / 3600:.2f}" + (f" + {unknown} run(s) not estimated yet" if unknown else "")
    lines += [
        "",
        f"{len(states)} runs: {summary}",
        f"CPU-hours spent (training): {states['cpu_time_s'].sum() / 3600:.2f}; left (estimated): {left}",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- report
def report_tables(campaign: Campaign, frame: pd.DataFrame) -> list[str]:
    """:return: The markdown lines of the report's tables, one section per env"""
    clock, marks = campaign.report_marks
    unit = "CPU-s" if clock == "cpu_time_s" else "steps"
    label = (lambda mark: f"{mark / 60:g} CPU-min") if clock == "cpu_time_s" else (lambda mark: reporting.steps(mark))
    lines = [
        f"At each mark ({unit}): each seed's first evaluation at or after it (a seed not there yet, or stopped before, "
        "shows -), their mean and a percentile bootstrap 95% interval of the mean over seeds "
        f"({reporting.BOOTSTRAP_REPS} resamples); Env steps: mean over seeds at that evaluation. Best so far: each "
        "seed's best evaluation after step 0 up to now (the paper's metric), Env steps there: the steps each seed has "
        "reached.\n",
    ]
    for env in dict.fromkeys(task.env for task in campaign.tasks):
        rows = []
        for algo in dict.fromkeys(task.algo for task in campaign.tasks if task.env == env):
            runs = frame[(frame["algo"] == algo) & (frame["env"] == env)]
            if not len(runs):
                continue
            rows += marks_rows(runs, algo, clock, marks, label)
            best = runs[runs["timesteps"] > 0].groupby("seed")["mean_return"].max()
            end = runs.sort_values("timesteps").groupby("seed").tail(1)
            rows.append(report_row(algo, "best so far", best.tolist(), end["timesteps"].tolist()))
        if not rows:  # no plots either (plot_campaign draws the envs with evaluations)
            lines += [f"## {env}", "", "No evaluation yet.", ""]
            continue
        lines += [f"## {env}", "", *reporting.markdown_table(MARKS_HEADER, rows), ""]
        lines += [f"![{env} against env steps]({harness.safe_name(env)}_steps.png)", ""]
        lines += [f"![{env} against CPU seconds]({harness.safe_name(env)}_cpu.png)", ""]
    return lines


def doc_markers(campaign: Campaign) -> tuple[str, str]:
    """:return: The lines that open and close the campaign's block in a docs file"""
    return f"<!-- campaign {campaign.path.name}: start -->", f"<!-- campaign {campaign.path.name}: end -->"


def reference_table(campaign: Campaign, frame: pd.DataFrame) -> list[str]:
    """
    :return: The markdown lines setting the campaign's runs against its reference, per env and algorithm: the
        reference's columns, our best evaluation after step 0 (mean over the seeds that have one, bootstrap interval,
        per seed with how far each got), its ratio to the first reference column, the final evaluation of the
        finished runs and the training CPU-hours. Built from ``evaluations.csv`` and ``run_metadata.json`` only (the
        committed data), so a docs block regenerates anywhere.
    """
    reference = campaign.reference
    assert reference is not None
    metadata = harness.read_json(campaign.out / harness.RUN_METADATA_FILENAME, {})
    first = next(iter(reference.columns))
    header = ["Task", *reference.columns, "Ours", "Best (mean)", "95% CI", "Best per seed", f"Ratio to {first}"]
    header += ["Final per seed", "CPU-h"]
    rows = []
    for env in dict.fromkeys(task.env for task in campaign.tasks):
        for algo in dict.fromkeys(task.algo for task in campaign.tasks if task.env == env):
            best, seeds, finals, cpu = [], [], [], 0.0
            for task in (task for task in campaign.tasks if task.env == env and task.algo == algo):
                run = frame[store.is_run(frame, task) & (frame["timesteps"] > 0)].sort_values("timesteps")
                status = metadata.get(task.name, {}).get("status", "running" if len(run) else "to do")
                if not len(run):
                    seeds.append(f"seed {task.seed}: {status}")
                    continue
                best.append(float(run["mean_return"].max()))
                cpu += float(run["cpu_time_s"].max())
                where = "" if status == "done" else f" ({status} at {reporting.steps(float(run['timesteps'].iloc[-1]))})"
                seeds.append(f"{reporting.number(best[-1])}{where}")
                if status == "done":
                    finals.append(reporting.number(float(run["mean_return"].iloc[-1])))
            low, high = bootstrap_interval(best)
            mean = float(np.mean(best)) if best else math.nan
            target = reference.columns[first].get(env)
            rows.append(
                [
                    env,
                    *(f"{column[env]:g}" if env in column else "-" for column in reference.columns.values()),  # as published
                    algo,
                    reporting.number(mean) if best else "-",
                    "-" if math.isnan(low) else f"[{reporting.number(low)}, {reporting.number(high)}]",
                    " / ".join(seeds),
                    f"{mean / target:.2f}" if best and target else "-",
                    " / ".join(finals) or "-",
                    f"{cpu / 3600:.1f}",
                ]
            )
    source = f"`{campaign.out / harness.EVALUATIONS_FILENAME}`"
    lines = [f"{reference.note.strip()}\n"] if reference.note.strip() else []
    lines += [
        f"Ours, from {source}: Best is each seed's best evaluation after step 0 within its budget (a run not done "
        "says how far it got, or that the stop rule ended it); mean over the seeds that have one, with a percentile "
        "bootstrap 95% interval of the mean (2 seeds or more). Final: the last evaluation of the finished runs. CPU-h: "
        "training CPU-hours, all seeds.\n",
        *reporting.markdown_table(header, rows),
    ]
    return lines


def leaders_table(campaign: Campaign, frame: pd.DataFrame) -> list[str]:
    """
    :return: The markdown lines saying, per env and report mark, which algorithm leads: each algorithm's mean over
        its seeds there (:func:`benchmarks.summary.value_at`), the leader against the runner-up with the two-sided
        permutation test of the difference of their means (2 seeds each or more), and the smallest p-value those seed
        counts can give. Nothing when no env has two algorithms.
    """
    clock, marks = campaign.report_marks
    label = (lambda mark: f"{mark / 60:g} CPU-min") if clock == "cpu_time_s" else (lambda mark: reporting.steps(mark))
    rows = []
    for env in dict.fromkeys(task.env for task in campaign.tasks):
        algos = list(dict.fromkeys(task.algo for task in campaign.tasks if task.env == env))
        if len(algos) < 2:
            continue
        for mark in marks:
            found = {}
            for algo in algos:
                runs = frame[(frame["algo"] == algo) & (frame["env"] == env)]
                values = [value_at(run, clock, mark) for _, run in runs.groupby("seed")]
                found[algo] = [value[0] for value in values if value is not None]
            ranked = sorted((algo for algo in algos if found[algo]), key=lambda algo: -float(np.mean(found[algo])))
            cells = [f"{algo} {reporting.number(float(np.mean(found[algo])))} ({len(found[algo])})" for algo in ranked]
            verdict = "-"
            if len(ranked) >= 2 and min(len(found[ranked[0]]), len(found[ranked[1]])) >= 2:
                first, second = found[ranked[0]], found[ranked[1]]
                p = reporting.permutation_p_value(first, second)
                floor = reporting.permutation_p_value(np.arange(len(first)) + 1e9, np.arange(len(second)))
                verdict = f"{ranked[0]} ahead" if p < 0.05 else "not distinguishable"
                verdict += f" (p = {p:.2g}; smallest possible {floor:.2g})"
            rows.append([env, label(mark), " > ".join(cells) or "-", verdict])
    if not rows:
        return []
    return [
        "Per mark: each algorithm's mean return over its seeds there (their number in brackets), best first; the "
        "leader against the runner-up by the two-sided permutation test of the difference of the means, with the "
        "smallest p-value that these seed counts can give.\n",
        *reporting.markdown_table(["Task", "At", "Mean return (seeds), best first", "Leader vs runner-up"], rows),
    ]


def write_docs(campaign: Campaign, frame: pd.DataFrame, check: bool = False) -> list[Path]:
    """
    Rewrite the block between the campaign's markers in each of its ``docs`` files with :func:`reference_table`, or
    without a reference :func:`leaders_table`, followed by the learning curves of the envs with evaluations (against
    env steps with a reference, the paper's axis; else against CPU seconds) (``check``: rewrite nothing).

    :return: The files whose block differed from the data
    :raises ValueError: if a file lacks the markers
    """
    if not campaign.docs:
        return []
    start, end = doc_markers(campaign)
    table = reference_table(campaign, frame) if campaign.reference is not None else leaders_table(campaign, frame)
    suffix, axis = ("steps", "env steps") if campaign.reference is not None else ("cpu", "CPU seconds")
    envs = [env for env in dict.fromkeys(task.env for task in campaign.tasks) if (frame["env"] == env).any()]
    changed = []
    for path in campaign.docs:
        folder = Path(os.path.relpath(campaign.out, path.parent)).as_posix()
        curves = [f"![{env} against {axis}]({folder}/{harness.safe_name(env)}_{suffix}.png)" for env in envs]
        block = [start, "", *table, "", *curves, *([""] if curves else []), end]
        text = path.read_text()
        if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
            raise ValueError(f"{path} needs one line {start!r} and, after it, one line {end!r}")
        head, rest = text.split(start, 1)
        new = head + "\n".join(block) + rest.split(end, 1)[1]
        if new != text:
            changed.append(path)
            if not check:
                write_atomically(path, new)
    return changed


def plot_campaign(campaign: Campaign, frame: pd.DataFrame) -> list[Path]:
    """Write ``<env>_steps.png`` and ``<env>_cpu.png`` per env: per algorithm the mean over seeds with a min-max band
    and each seed's curve, against env steps and against CPU seconds of training. :return: The written files"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for env in dict.fromkeys(task.env for task in campaign.tasks):
        env_frame = frame[frame["env"] == env]
        if not len(env_frame):
            continue
        for clock, suffix, xlabel in (
            ("timesteps", "steps", "env steps"),
            ("cpu_time_s", "cpu", "CPU seconds of training (evaluation excluded)"),
        ):
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for algo in dict.fromkeys(task.algo for task in campaign.tasks if task.env == env):
                if (env_frame["algo"] == algo).any():
                    draw_on_clock(ax, env_frame[env_frame["algo"] == algo], clock, algo, seeds=True)
            path = campaign.out / f"{harness.safe_name(env)}_{suffix}.png"
            paths.append(save_plot(fig, ax, env, xlabel, {"eval"}, path))
    return paths


def write_report(campaign: Campaign) -> Path:
    """Write ``<out>/results.md`` and the plots from ``evaluations.csv``. :return: The path of ``results.md``"""
    frame = store.read_evaluations(campaign.out).dropna(subset=["timesteps"])
    states = run_states(campaign)
    lines = [f"# Campaign `{campaign.path.name}`", ""] + ([campaign.notes.strip(), ""] if campaign.notes else [])
    lines += ["```", format_status(campaign, states).replace(str(campaign.path), campaign.path.name), "```", ""]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # means over seeds not there yet
        if campaign.reference is not None:
            lines += ["## Against the reference", "", *reference_table(campaign, frame), ""]
        leaders = leaders_table(campaign, frame)
        if leaders:
            lines += ["## Who leads", "", *leaders, ""]
        write_docs(campaign, frame)
        lines += report_tables(campaign, frame)
        plot_campaign(campaign, frame)
    metadata = harness.read_json(campaign.out / harness.RUN_METADATA_FILENAME, {})
    sources = sorted({(meta["algo"], meta["env"], meta.get("hyperparams_source", "?")) for meta in metadata.values()})
    if sources:
        lines += ["## Hyperparameters", "", *reporting.markdown_table(["Algorithm", "Env", "Entry"], sources), ""]
    config = harness.read_json(campaign.out / harness.CONFIG_FILENAME, {"invocations": []})
    rows = [
        [f"`{entry['command']}`", entry.get("machine", {}).get("git", "?"), entry["started"], entry.get("finished") or "-"]
        for entry in config["invocations"]
    ]
    lines += ["## Invocations", "", *reporting.markdown_table(["Command", "Git", "Started", "Finished"], rows), ""]
    path = campaign.out / harness.SUMMARY_FILENAME
    write_atomically(path, "\n".join(lines))
    return path


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
    Run the campaign's unfinished runs (``partial`` ones resume from their checkpoints, ``failed`` ones start again)
    in their order, then write the report. Grids (:mod:`benchmarks.run`) run through here too.

    :param workers: Parallel worker processes (``local``) or CPUs of a new local Ray instance (``ray`` without address)
    :param backend: ``local`` or ``ray`` (:func:`benchmarks.backends.execute`)
    :param address: With ``ray``: the cluster's head (``HOST:PORT`` or ``auto``)
    :param command: The command line recorded in ``config.json``
    :param recorded: What the invocation records in ``config.json`` besides the command, workers, backend, machine and
        times (default: the campaign file)
    :param skip_done: Skip the runs already ``done`` or ``stopped`` (else run every run again)
    :param fresh_process_per_run: Start a new worker process for every run
    :param report: Writes the report (default :func:`write_report`)
    :return: One result per run executed
    :raises RuntimeError: if the campaign is already running (another ``run`` holds its lock)
    """
    with _running(campaign):
        states = run_states(campaign).set_index("name")
        done = ("done", "stopped") if skip_done else ()
        todo = [task for task in campaign.tasks if states.loc[task.name, "state"] not in done]
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
        for task in (task for task in todo if task.name in failed):
            store.forget_run(task)
        store.finish_invocation(campaign.out / harness.CONFIG_FILENAME, invocation, failed)
        (report or write_report)(campaign)
        return results


@contextlib.contextmanager
def _running(campaign: Campaign) -> Iterator[None]:
    """Hold the campaign's run lock (in :func:`benchmarks.store.lock_folder`): two ``run`` of one campaign would train
    the same runs."""
    path = store.lock_folder(campaign.tasks[0]) / RUN_LOCK_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise RuntimeError(
                f"{campaign.path} is already running ({handle.read().strip() or 'another process'}): one run command "
                "per campaign; see its progress with the status command"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {platform.node()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_parser() -> argparse.ArgumentParser:
    """:return: The argument parser of ``python -m benchmarks.campaign``"""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.campaign", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the unfinished runs, resuming the partial ones")
    status = commands.add_parser("status", help="print done / stopped / partial / to do and the CPU-hours")
    report = commands.add_parser("report", help="write results.md and the plots from evaluations.csv")
    report.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a docs block differs from what the data gives"
    )
    status.add_argument("file", nargs="+", help="campaign YAML files (each one's status in turn)")
    for sub in (run, status, report):
        if sub is not status:
            sub.add_argument("file", help="campaign YAML file")
        sub.add_argument(
            "--checkpoint-dir",
            default=None,
            help="folder of the checkpoints (default: $SB3_PCL_CHECKPOINT_DIR, else ~/.cache/sb3_pcl/checkpoints)",
        )
    run.add_argument("--workers", type=int, default=1, help="parallel runs (default 1; each run uses one core)")
    run.add_argument("--nice", type=int, default=10, help="niceness added to this process and its workers (default 10)")
    run.add_argument("--backend", choices=backends.BACKENDS, default="local", help="local worker processes, or Ray tasks")
    run.add_argument("--address", default=None, help="with --backend ray: HOST:PORT of the cluster's head, or auto")
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
    if args.command == "report" and args.check:
        try:
            stale = write_docs(campaign, store.read_evaluations(campaign.out).dropna(subset=["timesteps"]), check=True)
        except (ValueError, OSError) as exc:
            parser.error(str(exc))
        for path in stale:
            print(f"{path}: the block of {campaign.path.name} differs from {campaign.out}; run the report command")
        return 1 if stale else 0
    if args.command == "report":
        print(f"Wrote {write_report(campaign)}")
        return 0
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if args.address is not None and args.backend != "ray":
        parser.error("--address needs --backend ray")
    if args.nice:
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
