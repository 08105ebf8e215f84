"""
The reports: one path from a results folder's ``evaluations.csv`` and ``run_metadata.json`` to its tables, its plots
and the generated blocks of the pages (``RESULTS.md``'s table, ``README.md``'s summary rows, the campaigns' blocks in
``docs/``). Statistics: :mod:`benchmarks.reporting` (``scipy.stats``); aggregates: :mod:`benchmarks.aggregate` (rliable).

``python -m benchmarks.report`` rewrites every generated block of the pages from the committed data (``--check``: writes
nothing, exits 1 naming each block that differs). ``python -m benchmarks.report PATH...`` writes the reports of campaign
files (``results.md``, the plots, their docs blocks; ``python -m benchmarks.campaign report FILE`` is the same) and of grid
folders (``results.md`` and the plots; ``aggregate.md`` and its plots for a suite of
:data:`benchmarks.aggregate.NORMALISATION`).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import harness, reporting, store
from benchmarks.algorithms import REPO_ROOT
from benchmarks.campaign import Campaign, format_status, load_campaign, run_states
from benchmarks.checkpoint import write_atomically
from benchmarks.summary import (
    INTERVAL_HEADER,
    INTERVAL_NOTE,
    MARKS_HEADER,
    draw_on_clock,
    marks_rows,
    report_row,
    save_plot,
    write_summary,
)


# ---------------------------------------------------------------------------------------------------- a campaign
def _campaign_frame(campaign: Campaign) -> pd.DataFrame:
    """:return: The campaign's evaluations with a step count"""
    return store.read_evaluations(campaign.out).dropna(subset=["timesteps"])


def series(campaign: Campaign, task: harness.RunTask) -> str:
    """:return: The name a run is reported under: its algorithm, marked ``(tuning seeds)`` when the campaign says the
    run is on the seeds its entry was chosen on"""
    return f"{task.algo} (tuning seeds)" if task.name in campaign.tuning_seeds else task.algo


def _with_series(campaign: Campaign, frame: pd.DataFrame) -> pd.DataFrame:
    """:return: ``frame`` with a ``series`` column: the name each row's run is reported under (:func:`series`)"""
    names = {(task.algo, task.env, task.seed): series(campaign, task) for task in campaign.tasks}
    keys = zip(frame["algo"], frame["env"], frame["seed"], strict=True)
    return frame.assign(series=[names.get((algo, env, int(seed)), algo) for algo, env, seed in keys])


def _grid(campaign: Campaign, tuning_seeds: bool = True) -> dict[str, list[str]]:
    """:return: Each env of the campaign's runs with its series (:func:`series`), algorithms in the order of their
    first run, a series on tuning seeds after its algorithm's other one; without ``tuning_seeds`` the compared ones"""
    tasks = [task for task in campaign.tasks if tuning_seeds or task.name not in campaign.tuning_seeds]
    first = {algo: index for index, algo in enumerate(dict.fromkeys(task.algo for task in campaign.tasks))}
    grid = {}
    for env in dict.fromkeys(task.env for task in campaign.tasks):
        names = {
            series(campaign, task): (first[task.algo], task.name in campaign.tuning_seeds) for task in tasks if task.env == env
        }
        if names:
            grid[env] = sorted(names, key=names.__getitem__)
    return grid


def _plotted(campaign: Campaign, frame: pd.DataFrame) -> dict[str, list[str]]:
    """:return: The envs with evaluations of a compared series, with those series: what the curves show"""
    frame = _with_series(campaign, frame)
    grid = {
        env: [name for name in names if ((frame["env"] == env) & (frame["series"] == name)).any()]
        for env, names in _grid(campaign, False).items()
    }
    return {env: names for env, names in grid.items() if names}


def _mark_label(clock: str) -> Callable[[float], str]:
    """:return: How the report names a mark of ``clock`` (``15 CPU-min``, ``2.5M``)"""
    return (lambda mark: f"{mark / 60:g} CPU-min") if clock == "cpu_time_s" else reporting.steps


def report_tables(campaign: Campaign, frame: pd.DataFrame) -> list[str]:
    """:return: The markdown lines of the report's tables, one section per env"""
    clock, marks = campaign.report_marks
    lines = [
        f"At each mark ({'CPU-s' if clock == 'cpu_time_s' else 'steps'}): each seed's first evaluation at or after it "
        f"(a seed not there yet, or stopped before, shows -), their mean, {INTERVAL_NOTE} Env steps: mean over seeds at "
        "that evaluation. Best so "
        "far: each seed's best evaluation after step 0 up to now (the paper's metric), Env steps there: the steps each "
        "seed has reached.\n",
    ]
    if campaign.tuning_seeds:
        lines[0] = lines[0][:-1] + (
            " An algorithm marked (tuning seeds) ran on the seeds its entry was chosen on: listed here, left out of the "
            "comparison (Who leads, the curves).\n"
        )
    frame, plotted = _with_series(campaign, frame), _plotted(campaign, frame)
    for env, algos in _grid(campaign).items():
        rows = []
        for algo in algos:
            runs = frame[(frame["series"] == algo) & (frame["env"] == env)]
            if len(runs):
                rows += marks_rows(runs, algo, clock, marks, _mark_label(clock))
                best = runs[runs["timesteps"] > 0].groupby("seed")["mean_return"].max()
                end = runs.sort_values("timesteps").groupby("seed").tail(1)
                rows.append(report_row(algo, "best so far", best.tolist(), end["timesteps"].tolist()))
        lines += [f"## {env}", ""]
        if not rows:
            lines += ["No evaluation yet.", ""]
            continue
        name = harness.safe_name(env)
        lines += [*reporting.markdown_table(MARKS_HEADER, rows), ""]
        if env in plotted:  # plot_campaign draws the envs with evaluations of a compared series
            lines += [f"![{env} against env steps]({name}_steps.png)", "", f"![{env} against CPU seconds]({name}_cpu.png)"]
            lines += [""]
    return lines


@dataclasses.dataclass(frozen=True)
class BestWithinBudget:
    """One algorithm's runs on one env in the paper's metric: each seed's best evaluation after step 0."""

    best: tuple[float, ...]  # per seed with evaluations, in the campaign's order
    seeds: tuple[str, ...]  # per seed: its best, with how far a run not done got (or "seed N: to do")
    finals: tuple[float, ...]  # the last evaluation of each finished (``done``) seed
    statuses: tuple[str, ...]  # per seed: done, stopped, running or to do
    cpu_s: float  # training CPU seconds, all seeds

    @property
    def mean(self) -> float:
        return float(np.mean(self.best)) if self.best else math.nan


def best_within_budget(campaign: Campaign, frame: pd.DataFrame, env: str, algo: str) -> BestWithinBudget:
    """:return: The runs of series ``algo`` (:func:`series`) on ``env`` in the paper's metric, from
    ``evaluations.csv`` (``frame``) and ``run_metadata.json`` only (the committed data)"""
    metadata = harness.read_json(campaign.out / harness.RUN_METADATA_FILENAME, {})
    best, seeds, finals, statuses, cpu = [], [], [], [], 0.0
    for task in (task for task in campaign.tasks if task.env == env and series(campaign, task) == algo):
        run = frame[store.is_run(frame, task) & (frame["timesteps"] > 0)].sort_values("timesteps")
        status = metadata.get(task.name, {}).get("status", "running" if len(run) else "to do")
        statuses.append(status)
        if not len(run):
            seeds.append(f"seed {task.seed}: {status}")
            continue
        best.append(float(run["mean_return"].max()))
        cpu += float(run["cpu_time_s"].max())
        where = "" if status == "done" else f" ({status} at {reporting.steps(float(run['timesteps'].iloc[-1]))})"
        seeds.append(f"{reporting.number(best[-1])}{where}")
        if status == "done":
            finals.append(float(run["mean_return"].iloc[-1]))
    return BestWithinBudget(tuple(best), tuple(seeds), tuple(finals), tuple(statuses), cpu)


def reference_table(campaign: Campaign, frame: pd.DataFrame) -> list[str]:
    """:return: The markdown lines setting the campaign's runs against its reference, per env and algorithm (our best
    evaluation after step 0, its ratio to the first column, the final evaluations, the CPU-hours), from
    ``evaluations.csv`` and ``run_metadata.json`` only (the committed data): a docs block regenerates anywhere"""
    reference = campaign.reference
    assert reference is not None
    first = next(iter(reference.columns))
    header = ["Task", *reference.columns, "Ours", "Best (mean)", INTERVAL_HEADER, "Best per seed", f"Ratio to {first}"]
    header += ["Final per seed", "CPU-h"]
    rows = []
    for env, algos in _grid(campaign, tuning_seeds=False).items():
        for algo in algos:
            ours = best_within_budget(campaign, frame, env, algo)
            low, high = reporting.interval_of_mean(list(ours.best))
            target = reference.columns[first].get(env)
            published = [f"{column[env]:g}" if env in column else "-" for column in reference.columns.values()]
            interval = "-" if math.isnan(low) else f"[{reporting.number(low)}, {reporting.number(high)}]"
            ratio = f"{ours.mean / target:.2f}" if ours.best and target else "-"
            row = [env, *published, algo, reporting.number(ours.mean), interval, " / ".join(ours.seeds), ratio]
            finals = " / ".join(map(reporting.number, ours.finals)) or "-"
            rows.append([*row, finals, f"{ours.cpu_s / 3600:.1f}"])
    return [
        *([f"{reference.note.strip()}\n"] if reference.note.strip() else []),
        f"Ours, from `{campaign.out / harness.EVALUATIONS_FILENAME}`: Best is each seed's best evaluation after step 0 "
        "within its budget (a run not done says how far it got, or that the stop rule ended it); mean over the seeds "
        f"that have one, {INTERVAL_NOTE} Final: the last "
        "evaluation of the finished runs. CPU-h: training CPU-hours, all seeds.\n",
        *reporting.markdown_table(header, rows),
    ]


#: The metrics a lead is read under (:func:`metric_values`): the evaluation at the mark, the best evaluation after step 0
#: up to it, the mean of the last three evaluations up to it
METRICS = ("at mark", "best so far", "last 3")


@dataclasses.dataclass(frozen=True)
class Lead:
    """Who leads on one env at one report mark: the compared series with evaluations there, best mean first."""

    env: str
    mark: float
    ranked: tuple[tuple[str, tuple[float, ...]], ...]  # (series, each seed's return at the mark), best mean first
    p_value: float = math.nan  # the leader against the runner-up when both have 2 seeds or more, else NaN
    smallest_p: float = math.nan  # the smallest p-value that those two seed counts can give
    #: per metric of :data:`METRICS`, the series whose mean over its seeds is highest under it
    leaders: tuple[str, ...] = ()
    #: per other series, best mean first: how many of the leader's seeds lie above all of its seeds, and the reverse
    separations: tuple[tuple[str, int, int], ...] = ()
    #: per series of ``ranked``, per seed: its CPU model and env steps per CPU second up to the mark
    machines: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()

    @property
    def means(self) -> dict[str, float]:
        return {name: float(np.mean(values)) for name, values in self.ranked}

    @property
    def leaders_agree(self) -> bool:
        return len(set(self.leaders)) <= 1


def metric_values(run: pd.DataFrame, clock: str, mark: float) -> tuple[float, float, float, str, float] | None:
    """:return: One seed's values at ``mark`` under each of :data:`METRICS` (its first evaluation at or after the mark,
    the best after step 0 up to that one, the mean of the last three up to it), its CPU model there and its env steps
    per CPU second up to it; ``None`` if the seed has not got there"""
    run = run.sort_values(clock)
    after = run[run[clock] >= mark]
    if not len(after):
        return None
    upto = run[run[clock] <= after[clock].iloc[0]]
    trained = upto[upto["timesteps"] > 0]
    last = upto.iloc[-1]
    best = float(trained["mean_return"].max()) if len(trained) else float(last["mean_return"])
    cpu_s = float(last["cpu_time_s"]) if "cpu_time_s" in upto and pd.notna(last["cpu_time_s"]) else math.nan
    rate = float(last["timesteps"]) / cpu_s if cpu_s and cpu_s > 0 else math.nan
    cpu = str(last["cpu"]) if "cpu" in upto and pd.notna(last["cpu"]) else "?"
    return float(last["mean_return"]), best, float(trained["mean_return"].tail(3).mean()) if len(trained) else best, cpu, rate


def _leader(values: Mapping[str, Sequence[float]]) -> str:
    """:return: The series of highest mean among ``values`` (series -> per-seed values)"""
    return max(values, key=lambda name: float(np.mean(values[name])))


def leads(campaign: Campaign, frame: pd.DataFrame) -> list[Lead]:
    """:return: Per env with two compared series or more and per report mark, who leads (the mean over seeds there; a
    permutation test of the leader against the runner-up; the leader under each of :data:`METRICS`; the separation
    counts of the leader against each other series; each seed's CPU and env steps per CPU second); runs on tuning
    seeds left out"""
    clock, marks = campaign.report_marks
    frame, found = _with_series(campaign, frame), []
    for env, algos in _grid(campaign, tuning_seeds=False).items():
        if len(algos) < 2:
            continue
        for mark in marks:
            per_metric: dict[str, list[list[float]]] = {}
            machines: dict[str, tuple[tuple[str, float], ...]] = {}
            for algo in algos:
                runs = frame[(frame["series"] == algo) & (frame["env"] == env)]
                there = [value for _, run in runs.groupby("seed") if (value := metric_values(run, clock, mark))]
                if there:
                    *metrics, cpus, rates = zip(*there, strict=True)
                    per_metric[algo] = [list(values) for values in metrics]
                    machines[algo] = tuple(zip(cpus, rates, strict=True))
            values = {algo: tuple(metrics[0]) for algo, metrics in per_metric.items()}
            ranked = sorted(values, key=lambda algo: -float(np.mean(values[algo])))
            lead = Lead(env, mark, tuple((algo, values[algo]) for algo in ranked))
            if not ranked:
                found.append(lead)
                continue
            leaders = tuple(_leader({algo: per_metric[algo][index] for algo in ranked}) for index in range(len(METRICS)))
            first = values[ranked[0]]
            separations = tuple((algo, *reporting.separation(first, values[algo])) for algo in ranked[1:])
            lead = dataclasses.replace(
                lead, leaders=leaders, separations=separations, machines=tuple((algo, machines[algo]) for algo in ranked)
            )
            if len(ranked) >= 2 and min(len(values[ranked[0]]), len(values[ranked[1]])) >= 2:
                second = values[ranked[1]]
                p_value = reporting.permutation_p_value(first, second)
                lead = dataclasses.replace(lead, p_value=p_value, smallest_p=smallest_p(len(first), len(second)))
            found.append(lead)
    return found


def _cpu_label(cpu: str) -> str:
    """:return: A CPU model's short name in the tables (``AMD EPYC`` -> ``AMD``, ``Intel(R) Xeon(R) Processor`` ->
    ``Intel``)"""
    return cpu.replace("(R)", "").split()[0] if cpu.strip() else "?"


def _machines_cell(lead: Lead) -> str:
    """:return: Per series of a lead, each seed's CPU and env steps per CPU second up to the mark"""
    return "; ".join(
        f"{algo} " + " / ".join(f"{_cpu_label(cpu)} {rate:.0f}" for cpu, rate in seeds) for algo, seeds in lead.machines
    )


def leaders_table(campaign: Campaign, frame: pd.DataFrame) -> list[str]:
    """:return: The markdown lines of :func:`leads`; nothing when no env has two algorithms"""
    rows = []
    for lead in leads(campaign, frame):
        means = lead.means
        cells = [f"{algo} {reporting.number(means[algo])} ({len(values)})" for algo, values in lead.ranked]
        verdict = "-"
        if not math.isnan(lead.p_value):
            verdict = f"{lead.ranked[0][0]} ahead" if lead.p_value < SIGNIFICANCE else "not distinguishable"
            verdict += f" (p = {lead.p_value:.2g}; smallest possible {lead.smallest_p:.2g})"
        size = {algo: len(values) for algo, values in lead.ranked}
        separated = "; ".join(
            f"{algo} {above}/{size[lead.ranked[0][0]]} (reverse {below}/{size[algo]})"
            for algo, above, below in lead.separations
        )
        metric_leaders = " / ".join(lead.leaders) + ("" if lead.leaders_agree else " (differ)")
        mark = _mark_label(campaign.report_marks[0])(lead.mark)
        row = [lead.env, mark, " > ".join(cells) or "-", verdict, separated or "-", metric_leaders or "-"]
        rows.append([*row, _machines_cell(lead) or "-"])
    if not rows:
        return []
    header = ["Task", "At", "Mean return (seeds), best first", "Leader vs runner-up", "Leader's seeds above all of"]
    header += ["Leader: at mark / best so far / last 3", "CPU, env steps per CPU-s (per seed)"]
    return [
        "Per mark: each algorithm's mean return over its seeds there (their number in brackets), best first; the "
        "leader against the runner-up by the exact permutation test of the difference of the means over every split "
        f"of the pooled seeds (`scipy.stats.permutation_test`; {reporting.P_VALUE_CONVENTION}, which for equal seed "
        "counts is the share of the splits whose absolute difference is at least the observed one), with the smallest "
        "p-value that these seed counts can give (0.1 for 3 "
        "against 3: no lead of 3 seeds can reach 0.05); how many of the leader's seeds lie above every seed of each "
        "other algorithm, and the reverse (3/3 and 0: a complete separation); the leader under the evaluation at the "
        "mark, the best evaluation after step 0 up to it and the mean of the last three evaluations up to it, marked "
        "(differ) where they are not the same; per seed, the CPU model it trained on and its env steps per CPU "
        "second up to the mark (a CPU second buys another number of env steps on each model)."
        + (" Runs on the seeds their entry was chosen on are left out." if campaign.tuning_seeds else "")
        + "\n",
        *reporting.markdown_table(header, rows),
    ]


def pooled_tests(
    campaign: Campaign, frame: pd.DataFrame, first_only: bool = False
) -> list[tuple[float, str, str, int, float, float, float]]:
    """:return: Per report mark and pair of compared series (in the campaign's order; with ``first_only`` the first
    series against each other) with seeds at the mark on two tasks or more: ``(mark, first, second, tasks, p, rank
    sum of first, its expectation)`` of :func:`benchmarks.reporting.stratified_rank_test` over the tasks (the returns
    at the mark)"""
    found: dict[float, dict[str, dict[str, tuple[float, ...]]]] = collections.defaultdict(dict)
    for lead in leads(campaign, frame):
        found[lead.mark][lead.env] = dict(lead.ranked)
    order = list(dict.fromkeys(name for names in _grid(campaign, tuning_seeds=False).values() for name in names))
    tests = []
    for mark in campaign.report_marks[1]:
        for index, first in enumerate(order[:1] if first_only else order):
            for second in order[index + 1 :]:
                strata = [(v[first], v[second]) for v in found[mark].values() if v.get(first) and v.get(second)]
                if len(strata) >= 2:
                    p_value, observed, expected = reporting.stratified_rank_test(strata)
                    tests.append((mark, first, second, len(strata), p_value, observed, expected))
    return tests


def pooled_table(campaign: Campaign, frame: pd.DataFrame, first_only: bool = False) -> list[str]:
    """:return: The markdown lines of :func:`pooled_tests`; nothing without such a pair"""
    label = _mark_label(campaign.report_marks[0])
    order = next(iter(dict.fromkeys(name for names in _grid(campaign, tuning_seeds=False).values() for name in names)), "")
    rows = [
        [label(mark), f"{first} vs {second}", str(tasks), f"{observed:g} (expected {expected:g})", f"{p_value:.2g}"]
        for mark, first, second, tasks, p_value, observed, expected in pooled_tests(campaign, frame, first_only)
    ]
    if not rows:
        return []
    return [
        "Pooled over the tasks: per mark and pair of algorithms, the exact stratified permutation test of ranks (the "
        "returns at the mark ranked within each task; the statistic is the first algorithm's rank sum over the tasks, "
        "its null distribution shuffles the algorithm labels within each task; computed exactly, as scipy has no "
        f"stratified test), {reporting.P_VALUE_CONVENTION}. Tasks: those where both have seeds at the mark."
        + (f" Here {order} against each other algorithm (all pairs: results.md)." if first_only and order else "")
        + "\n",
        *reporting.markdown_table(["At", "Pair", "Tasks", "Rank sum of the first", "p"], rows),
    ]


def cpus_table(campaign: Campaign, frame: pd.DataFrame) -> list[str]:
    """:return: The markdown lines of each run's CPU (of its rows after step 0) and env steps per CPU second, when the
    rows come from more than one CPU model (a CPU-time budget buys another number of steps on another CPU); else
    nothing"""
    frame = _with_series(campaign, frame[frame["timesteps"] > 0])
    if frame["cpu"].fillna("?").nunique() < 2:
        return []
    rows = []
    for env, algos in _grid(campaign).items():
        for algo in algos:
            for seed, run in frame[(frame["series"] == algo) & (frame["env"] == env)].groupby("seed"):
                last = run.sort_values("timesteps").iloc[-1]
                cpus = " then ".join(dict.fromkeys(run.sort_values("timesteps")["cpu"].fillna("?")))
                rate = float(last["timesteps"]) / float(last["cpu_time_s"])
                rows.append([env, algo, str(seed), cpus, f"{rate:.0f}", f"{float(last['cpu_time_s']) / 60:.0f}"])
    return [
        "The runs trained on more than one CPU model: a CPU second buys another number of env steps on each. Per run: "
        "the CPU of its evaluations after step 0 (in order, when it resumed on another), and its env steps per CPU "
        "second of training up to its last evaluation.\n",
        *reporting.markdown_table(["Task", "Algorithm", "Seed", "CPU", "Env steps per CPU-s", "Up to CPU-min"], rows),
    ]


def fill_block(path: Path, start: str, end: str, block: Sequence[str], check: bool = False) -> bool:
    """Replace the lines from the marker line ``start`` to the marker line ``end`` of a page by ``start``, ``block`` and
    ``end`` (the text outside the markers is the page's own).

    :param check: Rewrite nothing
    :return: Whether the page's block differed
    :raises ValueError: if the page lacks one of the markers, or has them out of order"""
    text = path.read_text()
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"{path} needs one line {start!r} and, after it, one line {end!r}")
    head, rest = text.split(start, 1)
    new = head + "\n".join([start, *block, end]) + rest.split(end, 1)[1]
    if new != text and not check:
        write_atomically(path, new)
    return new != text


def write_docs(campaign: Campaign, frame: pd.DataFrame, check: bool = False, root: Path | None = None) -> list[Path]:
    """Rewrite the block between the campaign's markers in its ``docs`` files (:func:`fill_block`):
    :func:`reference_table` (without a reference :func:`leaders_table` and :func:`pooled_table`) and the curves of the
    envs with evaluations (against env steps with a reference).

    :param check: Rewrite nothing
    :param root: Folder the ``docs`` paths are relative to (default: the working directory); the curves' links are
        relative to the page either way
    :return: The files whose block differed from the data
    :raises ValueError: if a file lacks the markers"""
    if not campaign.docs:
        return []
    start, end = (f"<!-- campaign {campaign.path.name}: {side} -->" for side in ("start", "end"))
    table = reference_table(campaign, frame) if campaign.reference is not None else leaders_table(campaign, frame)
    pooled = pooled_table(campaign, frame, first_only=True) if campaign.reference is None else []
    table = [*table, *(["", *pooled] if pooled else [])]
    suffix, axis = ("steps", "env steps") if campaign.reference is not None else ("cpu", "CPU seconds")
    envs = list(_plotted(campaign, frame))
    changed = []
    for path in campaign.docs:
        folder = Path(os.path.relpath(campaign.out, path.parent)).as_posix()
        curves = [f"![{env} against {axis}]({folder}/{harness.safe_name(env)}_{suffix}.png)" for env in envs]
        page = path if root is None else root / path
        if fill_block(page, start, end, ["", *table, "", *curves, *([""] if curves else [])], check):
            changed.append(page)
    return changed


def plot_campaign(campaign: Campaign, frame: pd.DataFrame) -> list[Path]:
    """Write ``<env>_steps.png`` and ``<env>_cpu.png`` per env with evaluations: per algorithm the mean over seeds with
    a min-max band and each seed's curve, against env steps and CPU seconds of training; runs on tuning seeds are left
    out. :return: The written files"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths, frame, plotted = [], _with_series(campaign, frame), _plotted(campaign, frame)
    for env in set(_grid(campaign)) - set(plotted):  # curves drawn before the runs were set apart
        for suffix in ("steps", "cpu"):
            (campaign.out / f"{harness.safe_name(env)}_{suffix}.png").unlink(missing_ok=True)
    for env, algos in plotted.items():
        env_frame = frame[frame["env"] == env]
        for clock, suffix, xlabel in (
            ("timesteps", "steps", "env steps"),
            ("cpu_time_s", "cpu", "CPU seconds of training (evaluation excluded)"),
        ):
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for algo in algos:
                draw_on_clock(ax, env_frame[env_frame["series"] == algo], clock, algo, seeds=True)
            paths.append(save_plot(fig, ax, env, xlabel, {"eval"}, campaign.out / f"{harness.safe_name(env)}_{suffix}.png"))
    return paths


def write_report(campaign: Campaign) -> Path:
    """Write ``<out>/results.md`` and the plots from ``evaluations.csv``. :return: The path of ``results.md``"""
    frame = _campaign_frame(campaign)
    lines = [f"# Campaign `{campaign.path.name}`", ""] + ([campaign.notes.strip(), ""] if campaign.notes else [])
    status = format_status(campaign, run_states(campaign)).replace(str(campaign.path), campaign.path.name)
    lines += ["```", status, "```", ""]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # means over seeds not there yet
        if campaign.reference is not None:
            lines += ["## Against the reference", "", *reference_table(campaign, frame), ""]
        leaders = leaders_table(campaign, frame)
        if leaders:
            lines += ["## Who leads", "", *leaders, ""]
        pooled = pooled_table(campaign, frame)
        if pooled:
            lines += ["### Pooled over the tasks", "", *pooled, ""]
        write_docs(campaign, frame)
        lines += report_tables(campaign, frame)
        plot_campaign(campaign, frame)
    cpus = cpus_table(campaign, frame)
    if cpus:
        lines += ["## CPUs", "", *cpus, ""]
    metadata = harness.read_json(campaign.out / harness.RUN_METADATA_FILENAME, {})
    sources = sorted({(meta["algo"], meta["env"], meta.get("hyperparams_source", "?")) for meta in metadata.values()})
    if sources:
        lines += ["## Hyperparameters", "", *reporting.markdown_table(["Algorithm", "Env", "Entry"], sources), ""]
    config = harness.read_json(campaign.out / harness.CONFIG_FILENAME, {"invocations": []})
    rows = []
    for entry in config["invocations"]:
        machine = entry.get("machine", {})
        versions = [f"{name} {machine[name]}" for name in ("torch", "stable-baselines3", "rl_zoo3") if name in machine]
        where = "; ".join([f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores", ", ".join(versions) or "?"])
        rows.append([f"`{entry['command']}`", machine.get("git", "?"), where, entry["started"], entry.get("finished") or "-"])
    header = ["Command", "Git", "Machine", "Started", "Finished"]
    lines += ["## Invocations", "", *reporting.markdown_table(header, rows), ""]
    path = campaign.out / harness.SUMMARY_FILENAME
    write_atomically(path, "\n".join(lines))
    return path


# ---------------------------------------------------------------------------------------------------- the pages
RESULTS_DIR = Path("benchmarks") / "results"
CAMPAIGNS_DIR = Path("benchmarks") / "campaigns"
#: The pages whose blocks :func:`write_pages` fills, relative to the repository
RESULTS_PAGE, README = Path("RESULTS.md"), Path("README.md")
#: The markers of RESULTS.md's table and of README.md's summary (some rows of that table, without the Data column)
TABLE_MARKERS = (
    "<!-- results table: python -m benchmarks.report writes it from benchmarks/results; do not edit -->",
    "<!-- end of the results table -->",
)
SUMMARY_MARKERS = (
    "<!-- results summary: python -m benchmarks.report writes it (rows of RESULTS.md's table); do not edit -->",
    "<!-- end of the results summary -->",
)
TABLE_HEADER = ["Algorithm", "Task, budget: quantity", "Seeds", "sb3_pcl", "Baseline", "Difference", "Data"]
SIGNIFICANCE = 0.05
DISPLAY_NAMES = {"trust_pcl": "Trust-PCL", "sac": "SAC", "trpo": "TRPO", "ppo": "PPO"}


def short(value: float) -> str:
    """:return: A return or a time as the pages' tables show it (3 significant digits, at least the units)"""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2g}" if abs(value) < 10 else f"{value:.1f}"


def seed_list(seeds: Sequence[int]) -> str:
    """:return: ``0-4`` for consecutive seeds, else ``0, 2, 5``"""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(seed) for seed in seeds)


def link(folder: str) -> str:
    """:return: A markdown link to a results folder's results.md, relative to the repository's root"""
    return f"[{folder}]({(RESULTS_DIR / folder / harness.SUMMARY_FILENAME).as_posix()})"


@dataclasses.dataclass(frozen=True)
class Runs:
    """The runs of one algorithm (the ``algo`` column) on one env in a committed results folder."""

    folder: str
    algo: str
    env: str

    @property
    def frame(self) -> pd.DataFrame:
        frame = store.read_evaluations(REPO_ROOT / RESULTS_DIR / self.folder)
        rows = frame[(frame["algo"] == self.algo) & (frame["env"] == self.env)]
        if rows.empty:
            raise ValueError(f"{self.csv} has no rows with algo={self.algo} and env={self.env}")
        return rows.sort_values(["seed", "timesteps"])

    @property
    def csv(self) -> str:
        return (RESULTS_DIR / self.folder / harness.EVALUATIONS_FILENAME).as_posix()

    @property
    def seeds(self) -> list[int]:
        return sorted(int(seed) for seed in self.frame["seed"].unique())

    def describe(self) -> str:
        """:return: The file and the rows, e.g. ``.../mujoco/evaluations.csv [algo=trpo, env=Ant-v5, seeds 0-4]``"""
        return f"{self.csv} [algo={self.algo}, env={self.env}, seeds {seed_list(self.seeds)}]"


@dataclasses.dataclass(frozen=True)
class Quantity:
    """What a row measures per seed (NaN: the seed has no value, e.g. never reached the threshold), and how to show it."""

    label: str
    values: Callable[[pd.DataFrame], pd.Series]  #: a run group's rows -> per seed
    show: Callable[[float], str] = short
    higher_is_better: bool = True


def final_return(frame: pd.DataFrame) -> pd.Series:
    """:return: Per seed, the return of its last evaluation"""
    return frame.groupby("seed")["mean_return"].last()


def first_reaching(threshold: float, column: str) -> Callable[[pd.DataFrame], pd.Series]:
    """:return: Per seed, ``column`` at its first evaluation after step 0 with a return of at least ``threshold``"""

    def values(frame: pd.DataFrame) -> pd.Series:
        after = frame[(frame["timesteps"] > 0) & (frame["mean_return"] >= threshold)]
        return after.groupby("seed")[column].first().reindex(sorted(frame["seed"].unique())).astype(float)

    return values


FINAL = Quantity("final return", final_return)


def values_cell(values: pd.Series, quantity: Quantity) -> str:
    """:return: :func:`benchmarks.reporting.mean_cell` of the seeds' values (times to a threshold: the median first),
    or how many seeds have a value"""
    finite = values.dropna()
    if len(finite) < len(values):
        median = f", median of those {quantity.show(float(finite.median()))}" if len(finite) else ""
        return f"{len(finite)}/{len(values)} seeds reach it{median}"
    cell = reporting.mean_cell(finite.to_numpy(), quantity.show)
    return cell if quantity.higher_is_better else f"median {quantity.show(float(finite.median()))}, mean {cell}"


def smallest_p(n_first: int, n_second: int) -> float:
    """:return: The smallest p-value :func:`benchmarks.reporting.permutation_p_value` can give for these seed counts"""
    return reporting.permutation_p_value(np.arange(n_first) + n_first + n_second, np.arange(n_second))


def difference(first: pd.Series, second: pd.Series, quantity: Quantity, names: tuple[str, str]) -> str:
    """:return: Who is ahead by the permutation test, or "not distinguishable"; where the seed counts cannot give
    p < 0.05, how many seeds of each lie above all of the other's instead"""
    if first.isna().any() or second.isna().any():
        return "not compared: some seeds never reach it"
    floor = smallest_p(len(first), len(second))
    if floor >= SIGNIFICANCE:
        above, below = reporting.separation(first, second)
        if not quantity.higher_is_better:
            above, below = reporting.separation(-first, -second)
        return (
            f"{names[0]}'s seeds above all of {names[1]}'s: {above}/{len(first)}, the reverse {below}/{len(second)} "
            f"({len(first)} against {len(second)} seeds: p >= {floor:.2f}, no test)"
        )
    p_value = reporting.permutation_p_value(first.to_numpy(), second.to_numpy())
    if p_value >= SIGNIFICANCE:
        return f"not distinguishable (p = {p_value:.2f})"
    ahead = (first.mean() > second.mean()) == quantity.higher_is_better
    return f"{names[0] if ahead else names[1]} ahead (p = {p_value:.2g})"


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of the table: an algorithm of ours against a baseline, the same quantity over each one's seeds."""

    algorithm: str
    task: str
    ours: Runs
    baseline_name: str
    baseline: Runs
    quantity: Quantity
    summary: bool = False  #: also in README.md's summary

    def cells(self) -> tuple[list[str], list[str]]:
        """:return: The row's cells, and one line per cell naming the data behind it with its per-seed values"""
        ours, baseline = self.quantity.values(self.ours.frame), self.quantity.values(self.baseline.frame)
        seeds = f"{len(ours)}: {seed_list(self.ours.seeds)}"
        if self.baseline.seeds != self.ours.seeds:
            seeds += f" (baseline {len(baseline)}: {seed_list(self.baseline.seeds)})"
        name = self.algorithm.split(" (")[0]
        data = ", ".join(link(folder) for folder in dict.fromkeys((self.ours.folder, self.baseline.folder)))
        cells = [
            self.algorithm,
            f"{self.task}: {self.quantity.label}",
            seeds,
            values_cell(ours, self.quantity),
            f"{self.baseline_name} {values_cell(baseline, self.quantity)}",
            difference(ours, baseline, self.quantity, (name, self.baseline_name)),
            data,
        ]
        sources = [
            f"{self.algorithm} | {self.task} | {self.quantity.label}: {runs.describe()}, per seed "
            + ", ".join("-" if math.isnan(value) else self.quantity.show(value) for value in values)
            for runs, values in ((self.ours, ours), (self.baseline, baseline))
        ]
        return cells, sources


def comparison_rows() -> list[Row]:
    """:return: The table's comparisons of runs of the grid folders, top to bottom"""
    fresh, mujoco, recurrent = "classic_fresh", "mujoco", "recurrent"
    to_475 = Quantity("env steps to 475", first_reaching(475.0, "timesteps"), reporting.steps, higher_is_better=False)
    cpu_to_475 = Quantity("CPU seconds of training to 475", first_reaching(475.0, "cpu_time_s"), lambda s: f"{s:.2g} s", False)
    rows = [
        Row("PCL", "CartPole-v1, 100k", Runs(fresh, "pcl", "CartPole-v1"), "PPO", Runs(fresh, "ppo", "CartPole-v1"),
            quantity, summary=quantity is to_475)
        for quantity in (to_475, cpu_to_475)
    ]  # fmt: skip
    # PCL's runs on seeds 100-109 (classic_fresh) against PPO's on seeds 0-2 (classic)
    rows += [
        Row("PCL", f"{env}, 100k", Runs(fresh, "pcl", env), "PPO", Runs("classic", "ppo", env), FINAL,
            summary=env == "Pendulum-v1")
        for env in ("Acrobot-v1", "Pendulum-v1")
    ]  # fmt: skip
    rows += [
        Row("Trust-PCL (fixed λ)", f"{env}, 1M", Runs(mujoco, "trust_pcl", env), "TRPO", Runs(mujoco, "trpo", env),
            FINAL, summary=env in ("HalfCheetah-v5", "Walker2d-v5"))
        for env in ("HalfCheetah-v5", "Hopper-v5", "Swimmer-v5", "Walker2d-v5")
    ]  # fmt: skip
    rows.append(
        Row("Trust-PCL (adaptive λ)", "Ant-v5, 1M", Runs(mujoco, "trust_pcl", "Ant-v5"), "TRPO",
            Runs(mujoco, "trpo", "Ant-v5"), FINAL)
    )  # fmt: skip
    rows += [
        Row("Recurrent PCL", f"{env}, 100k", Runs(recurrent, "recurrent_pcl", env), "RecurrentPPO",
            Runs(recurrent, "recurrentppo", env), FINAL)
        for env in ("CartPoleNoVel-v1", "PendulumNoVel-v1")
    ]  # fmt: skip
    return rows


#: The algorithmic tasks of the table, with gym's thresholds
ALGORITHMIC_TASKS = {"sb3_pcl/Copy-v0": 25.0, "sb3_pcl/DuplicatedInput-v0": 9.0, "sb3_pcl/Reverse-v0": 25.0}


def algorithmic_rows() -> tuple[list[list[str]], list[str]]:
    """:return: The algorithmic tasks' rows (seeds reaching the threshold; steps to it on Copy) and their sources"""
    tasks = " / ".join(env.split("/")[1].removesuffix("-v0") for env in ALGORITHMIC_TASKS)
    counts, sources, medians = {}, [], {}
    for algo in ("urex", "reinforce"):
        reaching = []
        for env, threshold in ALGORITHMIC_TASKS.items():
            runs = Runs("algorithmic", algo, env)
            first = first_reaching(threshold, "timesteps")(runs.frame)
            reaching.append(f"{int(first.notna().sum())}/{len(first)}")
            sources.append(
                f"{algo} | {env} | steps to {threshold:g}: {runs.describe()}, per seed "
                + ", ".join(map(reporting.steps, first))
            )
            if env == "sb3_pcl/Copy-v0":
                medians[algo] = reporting.steps(float(first.median()))
        counts[algo] = ", ".join(reaching)
    seeds = f"{len(first)}: {seed_list(runs.seeds)}"
    table = link("algorithmic")
    return [
        ["UREX", f"{tasks}, 5M: seeds reaching gym's threshold", seeds, counts["urex"], f"Reinforce {counts['reinforce']}",
         f"{len(first)} seeds: no test", table],
        ["Reinforce (MENT)", "Copy, 5M: env steps to the threshold", seeds, f"median {medians['reinforce']}",
         f"UREX median {medians['urex']}", f"{len(first)} seeds: no test", table],
    ], sources  # fmt: skip


def repo_campaign(name: str) -> Campaign:
    """:return: ``benchmarks/campaigns/<name>`` (its paths relative to the repository, the working directory of
    :func:`write_pages`)"""
    return load_campaign(REPO_ROOT / CAMPAIGNS_DIR / name)


def paper_row(campaign: Campaign) -> tuple[list[str], list[str]]:
    """:return: The row setting a campaign with a reference (the paper's recipe) beside the reference's first column
    (per task: our best evaluation within the budget, mean over seeds, as a ratio to the published number), and its
    sources"""
    reference = campaign.reference
    if reference is None:
        raise ValueError(f"{campaign.path} has no reference")
    paper_name, paper = next(iter(reference.columns.items()))
    frame = _campaign_frame(campaign)
    ours, ratios, sources, seed_groups = [], [], [], collections.defaultdict(list)
    for env, target in paper.items():
        result = best_within_budget(campaign, frame, env, reference.algo)
        runs = [run for run in campaign.tasks if run.env == env and run.algo == reference.algo]
        seed_groups[f"{len(runs)}: {seed_list([run.seed for run in runs])}"].append(env.removesuffix("-v5"))
        cell = reporting.mean_cell(result.best, short)
        statuses = collections.Counter(result.statuses)
        if set(statuses) == {"stopped"}:
            by_steps = {reporting.steps(float(run.stop_below[0])) for run in runs if run.stop_below is not None}
            cell += f" (stopped at {', '.join(sorted(by_steps))})"
        elif set(statuses) != {"done"}:
            cell += f" ({statuses['done']}/{len(runs)} seeds done)"
        ours.append(cell)
        ratios.append(f"{result.mean / target:.2f}" if result.best else "-")
        sources.append(
            f"{reference.algo} | {env} | best evaluation: {campaign.out / harness.EVALUATIONS_FILENAME} "
            f"[algo={reference.algo}, env={env}], per seed {', '.join(result.seeds)}; {paper_name} {target:g}"
        )
    budget = reporting.steps(float(max(task.steps for task in campaign.tasks)))
    cells = [
        "Trust-PCL (adaptive λ, the paper's recipe)",
        f"{' / '.join(env.removesuffix('-v5') for env in paper)}-v5, {budget}: best evaluation (the paper's metric)",
        "; ".join(f"{', '.join(tasks)} {seeds}" for seeds, tasks in seed_groups.items()),
        " / ".join(ours),
        f"{paper_name} (gym v1) {' / '.join(f'{value:g}' for value in paper.values())}",
        f"ratio {' / '.join(ratios)}; published numbers: no test",
        f"{link(campaign.out.name)}, [reproduction](docs/reproduction.md)",
    ]
    return cells, sources


def task_list(envs: Sequence[str]) -> str:
    """:return: ``HalfCheetah / Hopper-v5`` for envs of one version suffix ``-v5``, else the ids joined by ``/``"""
    if all(env.endswith("-v5") for env in envs):
        return " / ".join(env.removesuffix("-v5") for env in envs) + "-v5"
    return " / ".join(envs)


def cpu_hour_row(campaign: Campaign) -> tuple[list[str], list[str]]:
    """:return: The row of an equal-CPU-time campaign (runs on tuning seeds left out, as in its report) from its
    :func:`leads`: per task each algorithm's return at the last report mark (:func:`benchmarks.reporting.mean_cell`),
    who leads at every mark (named once each algorithm with evaluations on the task has a seed there), the tests of the
    leader against the runner-up where the seed counts can give p < 0.05 and else the separation counts at the last
    mark, the pooled test of the first algorithm against each other at the last mark, how many runs are done and, when
    their rows come from more than one CPU model, how many; and its sources. The first algorithm of the campaign file is
    ours, the others the baselines."""
    frame = _campaign_frame(campaign)
    clock, marks = campaign.report_marks
    if clock != "cpu_time_s" or not marks:
        raise ValueError(f"{campaign.path} must report at marks of CPU seconds")
    compared = [task for task in campaign.tasks if task.name not in campaign.tuning_seeds]
    algos = list(dict.fromkeys(task.algo for task in compared))
    envs = list(dict.fromkeys(task.env for task in campaign.tasks))
    found = leads(campaign, frame)
    by_mark = {(lead.env, lead.mark): dict(lead.ranked) for lead in found}
    metadata = harness.read_json(campaign.out / harness.RUN_METADATA_FILENAME, {})
    done = sum(metadata.get(task.name, {}).get("status") == "done" for task in compared)
    label = {algo: DISPLAY_NAMES.get(algo, algo) for algo in algos}
    seeds_per_run: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for task in compared:
        seeds_per_run[task.algo, task.env].append(task.seed)

    def at_last_mark(algo: str) -> str:
        cells = []
        for env in envs:
            values = by_mark.get((env, marks[-1]), {}).get(algo, ())
            expected = len(seeds_per_run[algo, env])
            missing = f" ({len(values)}/{expected} seeds there)" if values and len(values) < expected else ""
            cells.append(reporting.mean_cell(values, short) + missing)
        return " / ".join(cells)

    started = {env: {algo for algo in algos if any(by_mark.get((env, mark), {}).get(algo) for mark in marks)} for env in envs}
    complete = [lead for lead in found if len(lead.ranked) == len(started[lead.env]) and len(lead.ranked) >= 2]
    first = {(lead.env, lead.mark): label[lead.ranked[0][0]] for lead in complete}
    leaders = [f"{env.removesuffix('-v5')} {', '.join(first.get((env, mark), '-') for mark in marks)}" for env in envs]
    mark_names = f"{' / '.join(f'{mark / 60:g}' for mark in marks)} CPU-min"
    parts = [f"leader at {mark_names}: {'; '.join(leaders)}"]
    ahead = [lead for lead in complete if not math.isnan(lead.p_value) and lead.p_value < SIGNIFICANCE]
    parts += [
        f"{label[lead.ranked[0][0]]} ahead on {lead.env.removesuffix('-v5')} at {lead.mark / 60:g} CPU-min "
        f"(p = {lead.p_value:.2g})"
        for lead in ahead
    ]
    untestable = [lead for lead in complete if lead.mark == marks[-1] and lead.smallest_p >= SIGNIFICANCE]
    if untestable:
        counts = [f"{lead.env.removesuffix('-v5')} {lead.separations[0][1]}/{len(lead.ranked[0][1])}" for lead in untestable]
        parts.append(
            f"at {marks[-1] / 60:g} CPU-min the leader's seeds above all of the runner-up's: {', '.join(counts)} "
            f"({'; '.join(sorted({f'p >= {lead.smallest_p:.2f}' for lead in untestable}))} with these seed counts: no test)"
        )
    pooled: dict[str, list[str]] = collections.defaultdict(list)
    for _, _, second, tasks, p_value, _, _ in pooled_tests(campaign, frame, first_only=True):
        pooled[f"{label.get(second, second)} ({tasks} tasks)"].append(f"{p_value:.2g}")
    if pooled:
        against = "; ".join(f"{name} p = {' / '.join(values)}" for name, values in pooled.items())
        parts.append(f"pooled over the tasks (stratified rank test), {label[algos[0]]} against {against}")
    if done < len(compared):
        parts.insert(0, f"{done} of {len(compared)} runs done")
    keys = {(task.algo, task.env, task.seed) for task in compared}
    rows = frame[[(a, e, int(s)) in keys for a, e, s in zip(frame["algo"], frame["env"], frame["seed"], strict=True)]]
    cpus = rows.loc[rows["timesteps"] > 0, "cpu"].fillna("?").nunique()
    if cpus > 1:  # a CPU second buys another number of env steps on each
        parts.append(f"the runs trained on {cpus} CPU models (per run: results.md, CPUs)")
    seed_groups: dict[str, list[str]] = collections.defaultdict(list)
    for algo in algos:
        per_env: dict[str, list[str]] = collections.defaultdict(list)
        for env in envs:
            per_env[seed_list(seeds_per_run[algo, env])].append(env.removesuffix("-v5"))
        common = max(per_env, key=lambda seeds: len(per_env[seeds]))
        others = "; ".join(f"{', '.join(tasks)} {seeds}" for seeds, tasks in per_env.items() if seeds != common)
        seed_groups[common + (f" ({others})" if others else "")].append(label[algo])
    budget = max(task.cpu_budget or 0.0 for task in compared)
    cells = [
        f"{label[algos[0]]} (fixed λ; Ant: adaptive λ)",
        f"{task_list(envs)}, {budget:g} CPU-s per run: return at {marks[-1] / 60:g} CPU-min",
        "; ".join(f"{', '.join(names)} {seeds}" for seeds, names in seed_groups.items()),
        at_last_mark(algos[0]),
        "; ".join(f"{label[algo]} {at_last_mark(algo)}" for algo in algos[1:]),
        "; ".join(parts),
        f"{link(campaign.out.name)}, [which algorithm](docs/trust_pcl.md#which-algorithm-for-which-budget)",
    ]
    sources = [
        f"{label[algo]} | {env} | return at {mark / 60:g} CPU-min: {campaign.out / harness.EVALUATIONS_FILENAME} "
        f"[algo={algo}, env={env}, seeds {seed_list(seeds_per_run[algo, env])}], per seed there "
        + (", ".join(map(short, by_mark.get((env, mark), {}).get(algo, ()))) or "-")
        for env in envs
        for algo in algos
        for mark in marks
    ]
    return cells, sources


#: The campaigns the table reads (their reports rewrite the pages' blocks too): the paper's recipe against its Table 1,
#: and Trust-PCL against the baselines at equal CPU time
TABLE_CAMPAIGNS = {"paper_table1.yml": paper_row, "cpu_hour.yml": cpu_hour_row}


def results_table() -> tuple[list[list[str]], list[list[str]], list[str]]:
    """:return: RESULTS.md's rows, README.md's (some of them), and the sources of their cells"""
    compared = [(row, *row.cells()) for row in comparison_rows()]
    algorithmic, sources = algorithmic_rows()
    cpu_hour, cpu_sources = cpu_hour_row(repo_campaign("cpu_hour.yml"))
    paper, paper_sources = paper_row(repo_campaign("paper_table1.yml"))
    rows = [cells for _, cells, _ in compared] + algorithmic + [cpu_hour, paper]
    summary = [cells for row, cells, _ in compared if row.summary] + algorithmic[:1]
    sources = [line for _, _, lines in compared for line in lines] + sources + cpu_sources + paper_sources
    return rows, summary, sources


def write_pages(check: bool = False, root: Path = REPO_ROOT) -> tuple[list[str], list[str]]:
    """Fill every generated block of the pages from the committed data (read in the repository, whatever ``root``):
    RESULTS.md's table, README.md's summary (:func:`results_table`) and the campaigns' blocks in docs/
    (:func:`write_docs`).

    :param check: Rewrite nothing
    :param root: The folder holding the pages (default: the repository)
    :return: The blocks that differed from the data (page and block), and the sources of the table's cells"""
    with contextlib.chdir(REPO_ROOT):  # the campaigns' paths are relative to the repository
        rows, summary, sources = results_table()
        stale = []
        if fill_block(root / RESULTS_PAGE, *TABLE_MARKERS, reporting.markdown_table(TABLE_HEADER, rows), check):
            stale.append(f"{RESULTS_PAGE}: the results table")
        short_table = reporting.markdown_table(TABLE_HEADER[:-1], [cells[:-1] for cells in summary])
        if fill_block(root / README, SUMMARY_MARKERS[0], SUMMARY_MARKERS[1], short_table, check):
            stale.append(f"{README}: the results summary")
        for path in sorted((REPO_ROOT / CAMPAIGNS_DIR).glob("*.yml")):
            campaign = repo_campaign(path.name)
            frame = _campaign_frame(campaign)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # means over seeds not there yet
                changed = write_docs(campaign, frame, check, root)
            stale += [f"{page.relative_to(root)}: the block of {path.name}" for page in changed]
    return stale, sources


def report_command(campaign: Campaign, check: bool = False) -> int:
    """``python -m benchmarks.campaign report FILE [--check]``: write the campaign's ``results.md``, plots and docs
    blocks (:func:`write_report`), and the pages' blocks (:func:`write_pages`) when the table reads the campaign; with
    ``check`` write nothing and print what differs.

    :return: The exit code: 1 with ``check`` when a block differs from the data"""
    in_table = campaign.path.name in TABLE_CAMPAIGNS and campaign.path.resolve().parent == REPO_ROOT / CAMPAIGNS_DIR
    if not check:
        print(f"Wrote {write_report(campaign)}")
        if in_table:
            write_pages()
        return 0
    stale = [f"{path}: the block of {campaign.path.name}" for path in write_docs(campaign, _campaign_frame(campaign), True)]
    if in_table:
        stale += [block for block in write_pages(check=True)[0] if "the block of" not in block]
    for block in stale:
        print(f"{block} differs from {campaign.out}; run the report command")
    return 1 if stale else 0


def report_folder(folder: Path) -> list[Path]:
    """Write a grid folder's ``results.md`` and plots (:func:`benchmarks.summary.write_summary`) and, for a suite of
    :data:`benchmarks.aggregate.NORMALISATION`, its ``aggregate.md`` and plots. :return: The written reports"""
    from benchmarks import aggregate  # needs rliable

    written = [write_summary(folder)]
    if folder.resolve().name in aggregate.NORMALISATION:
        written += aggregate.write_aggregate(folder)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.report``. :return: The exit code (1 with ``--check`` when a block differs)"""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n\n")[1])
    parser.add_argument("paths", nargs="*", type=Path, help="campaign files and grid folders (default: the pages' blocks)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated block differs")
    args = parser.parse_args(argv)
    if not args.paths:
        stale, sources = write_pages(check=args.check)
        for block in stale:
            print(f"{block} differs from the data: run python -m benchmarks.report" if args.check else f"wrote {block}")
        if not args.check:
            print("\n".join(sources))
        return 1 if args.check and stale else 0
    status = 0
    for path in args.paths:
        if path.is_dir():
            if args.check:
                parser.error(f"--check compares the pages' blocks and the campaigns' docs blocks, not {path}")
            print("wrote " + ", ".join(map(str, report_folder(path))))
            continue
        try:
            campaign = load_campaign(path)
        except ValueError as exc:
            parser.error(str(exc))
        status = max(status, report_command(campaign, args.check))
    return status


if __name__ == "__main__":
    sys.exit(main())
