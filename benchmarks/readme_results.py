"""
README.md's results table, computed from the committed ``benchmarks/results/*/evaluations.csv``.

``python -m benchmarks.readme_results`` rewrites the table between the two markers of README.md's Results section and
prints, for every cell, the file and the rows behind it with their per-seed values. ``--check`` rewrites nothing and
exits with 1 when README.md differs from what the data gives (the test suite runs it).

Statistics, the same for every row: *mean [low, high]* is the mean over seeds with a 95% percentile bootstrap interval
of the mean (10,000 resamples, a fixed generator seed, so the table is reproducible); *p* is the two-sided permutation
test of the difference of the two means (exact: every split of the pooled seeds). A difference with p >= 0.05 is
written "not distinguishable". The CPU-hour row sets Trust-PCL against SAC and TRPO at equal CPU time with the numbers
of the cpu_hour campaign's *Who leads* table (:func:`benchmarks.campaign.leads`). The last row is no comparison of
runs: it sets the paper_table1 campaign (the paper's recipe at the paper's budget) beside the paper's published Table 1
as a ratio, with the numbers of that campaign's report (:func:`benchmarks.campaign.best_within_budget`).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import difflib
import functools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import store
from benchmarks.campaign import Campaign, best_within_budget, leads, load_campaign
from benchmarks.harness import RUN_METADATA_FILENAME, read_json
from benchmarks.reporting import bootstrap_interval, markdown_table, permutation_p_value, steps

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
RESULTS = Path("benchmarks") / "results"
BEGIN = "<!-- results table: python -m benchmarks.readme_results writes it from benchmarks/results; do not edit -->"
END = "<!-- end of the results table -->"
SIGNIFICANCE = 0.05


@functools.cache
def load_evaluations(folder: str) -> pd.DataFrame:
    """:return: ``benchmarks/results/<folder>/evaluations.csv``"""
    return pd.read_csv(REPO_ROOT / RESULTS / folder / "evaluations.csv")


def seed_list(seeds: Sequence[int]) -> str:
    """:return: ``0-4`` for consecutive seeds, else ``0, 2, 5``"""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(str(seed) for seed in seeds)


@dataclass(frozen=True)
class Runs:
    """The runs of one algorithm (as named in the CSV's ``algo`` column) on one env in a committed results folder."""

    folder: str
    algo: str
    env: str

    @functools.cached_property
    def frame(self) -> pd.DataFrame:
        frame = load_evaluations(self.folder)
        rows = frame[(frame["algo"] == self.algo) & (frame["env"] == self.env)]
        if rows.empty:
            raise ValueError(f"{self.csv} has no rows with algo={self.algo} and env={self.env}")
        return rows.sort_values(["seed", "timesteps"])

    @property
    def csv(self) -> str:
        return (RESULTS / self.folder / "evaluations.csv").as_posix()

    @property
    def seeds(self) -> list[int]:
        return sorted(int(seed) for seed in self.frame["seed"].unique())

    def describe(self) -> str:
        """:return: The file and the rows, e.g. ``.../mujoco/evaluations.csv [algo=trpo, env=Ant-v5, seeds 0-4]``"""
        return f"{self.csv} [algo={self.algo}, env={self.env}, seeds {seed_list(self.seeds)}]"

    def finals(self) -> pd.Series:
        """:return: Per seed, the return of the last evaluation"""
        return self.frame.groupby("seed")["mean_return"].last()

    def first_reaching(self, threshold: float, column: str) -> pd.Series:
        """:return: Per seed, ``column`` at the first evaluation after step 0 with a return >= threshold (NaN if none)"""
        after_start = self.frame[self.frame["timesteps"] > 0]
        reached = after_start[after_start["mean_return"] >= threshold].groupby("seed")[column].first()
        return reached.reindex(self.seeds).astype(float)


def number(value: float) -> str:
    """:return: A return or a time as the table shows it (3 significant digits, at least the units)"""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2g}" if abs(value) < 10 else f"{value:.1f}"


@dataclass(frozen=True)
class Quantity:
    """What a row measures per seed, and how to show it."""

    label: str
    values: Callable[[Runs], pd.Series]
    show: Callable[[float], str] = number
    higher_is_better: bool = True
    median_first: bool = False


FINAL = Quantity("final return", Runs.finals)


def to_threshold(threshold: float, column: str, label: str, show: Callable[[float], str]) -> Quantity:
    """:return: The steps or seconds to the first evaluation at or above ``threshold`` (lower is better)"""
    return Quantity(
        label, lambda runs: runs.first_reaching(threshold, column), show, higher_is_better=False, median_first=True
    )


def summary(values: pd.Series, quantity: Quantity) -> str:
    """:return: ``mean [low, high]`` (with the median first for times), or how many seeds have a value"""
    finite = values.dropna()
    if len(finite) < len(values):
        return f"{len(finite)}/{len(values)} seeds reach it" + (
            f", median of those {quantity.show(float(finite.median()))}" if len(finite) else ""
        )
    low, high = bootstrap_interval(finite.to_numpy())
    text = f"{quantity.show(float(finite.mean()))} [{quantity.show(low)}, {quantity.show(high)}]"
    if quantity.median_first:
        return f"median {quantity.show(float(finite.median()))}, mean {text}"
    return text


def difference(ours: pd.Series, baseline: pd.Series, quantity: Quantity, names: tuple[str, str]) -> str:
    """:return: Who is ahead and the permutation p-value, or "not distinguishable" """
    if ours.isna().any() or baseline.isna().any():
        return "not compared: some seeds never reach it"
    p_value = permutation_p_value(ours.to_numpy(), baseline.to_numpy())
    smallest = permutation_p_value(np.arange(len(ours)) + len(ours) + len(baseline), np.arange(len(baseline)))
    if smallest >= SIGNIFICANCE:
        return f"not distinguishable (p = {p_value:.2f}; with {len(ours)} against {len(baseline)} seeds p >= {smallest:.2f})"
    if p_value >= SIGNIFICANCE:
        return f"not distinguishable (p = {p_value:.2f})"
    ahead = (ours.mean() > baseline.mean()) == quantity.higher_is_better
    return f"{names[0] if ahead else names[1]} ahead (p = {p_value:.2g})"


@dataclass(frozen=True)
class Row:
    """One line of the table: an algorithm of ours against a baseline, the same quantity over each one's seeds."""

    algorithm: str
    task: str
    ours: Runs
    baseline_name: str
    baseline: Runs
    quantity: Quantity
    ours_note: str = ""
    baseline_note: str = ""
    #: the Difference cell of a row that compares nothing (instead of the test)
    no_comparison: str = ""

    def cells(self) -> tuple[list[str], list[str]]:
        """:return: The row's cells, and one line per cell naming the data behind it with its per-seed values"""
        ours, baseline = self.quantity.values(self.ours), self.quantity.values(self.baseline)
        seeds = f"{len(ours)}: {seed_list(self.ours.seeds)}"
        if self.baseline.seeds != self.ours.seeds:
            seeds += f" (baseline {len(baseline)}: {seed_list(self.baseline.seeds)})"
        name = self.algorithm.split(" (")[0]
        verdict = self.no_comparison or difference(ours, baseline, self.quantity, (name, self.baseline_name))
        ours_cell = summary(ours, self.quantity) + self.ours_note
        baseline_cell = f"{self.baseline_name} {summary(baseline, self.quantity)}{self.baseline_note}"
        data = ", ".join(link(folder) for folder in dict.fromkeys((self.ours.folder, self.baseline.folder)))
        cells = [self.algorithm, f"{self.task}: {self.quantity.label}", seeds, ours_cell, baseline_cell, verdict, data]
        sources = [
            f"{self.algorithm} | {self.task} | {self.quantity.label}: {runs.describe()}, per seed "
            + ", ".join("-" if math.isnan(value) else self.quantity.show(value) for value in values)
            for runs, values in ((self.ours, ours), (self.baseline, baseline))
        ]
        return cells, sources


def link(folder: str) -> str:
    """:return: A markdown link to a results folder's results.md, relative to README.md"""
    return f"[{folder}]({(RESULTS / folder / 'results.md').as_posix()})"


def ant_note() -> str:
    """:return: TRPO's Ant runs, whose best evaluation is mostly the untrained policy's (step 0)"""
    frame = Runs("mujoco", "trpo", "Ant-v5").frame
    at_start = frame.loc[frame.groupby("seed")["mean_return"].idxmax(), "timesteps"] == 0
    return f"; best evaluation at step 0 on {int(at_start.sum())} of {len(at_start)} seeds"


#: the folders of PCL's and PPO's final returns on Acrobot-v1 and Pendulum-v1: ``classic_fresh`` holds PCL's runs on
#: seeds 100-109, ``classic`` PPO's (seeds 0-2); PPO's runs on seeds 100-109 are not made yet
CLASSIC_FINALS = {"Acrobot-v1": ("classic_fresh", "classic"), "Pendulum-v1": ("classic_fresh", "classic")}


def rows() -> list[Row]:
    """:return: The table's rows, top to bottom"""
    fresh, mujoco, recurrent = "classic_fresh", "mujoco", "recurrent"
    steps_to_475 = to_threshold(475.0, "timesteps", "env steps to 475", steps)
    cpu_to_475 = to_threshold(475.0, "cpu_time_s", "CPU seconds of training to 475", lambda value: f"{value:.2g} s")
    classic = [
        Row("PCL", "CartPole-v1, 100k", Runs(fresh, "pcl", "CartPole-v1"), "PPO", Runs(fresh, "ppo", "CartPole-v1"), quantity)
        for quantity in (steps_to_475, cpu_to_475)
    ] + [
        Row("PCL", f"{env}, 100k", Runs(ours, "pcl", env), "PPO", Runs(baseline, "ppo", env), FINAL)
        for env, (ours, baseline) in CLASSIC_FINALS.items()
    ]
    trust = [
        Row("Trust-PCL (fixed λ)", f"{env}, 1M", Runs(mujoco, "trust_pcl", env), "TRPO", Runs(mujoco, "trpo", env), FINAL)
        for env in ("HalfCheetah-v5", "Hopper-v5", "Swimmer-v5", "Walker2d-v5")
    ]
    ant = Row("Trust-PCL (adaptive λ)", "Ant-v5, 1M", Runs(mujoco, "trust_pcl", "Ant-v5"), "TRPO",
              Runs(mujoco, "trpo", "Ant-v5"), FINAL, ours_note="; stands still, does not walk",
              baseline_note=f"; ends below its untrained policy{ant_note()}",
              no_comparison="no comparison: neither walks")  # fmt: skip
    recurrent_rows = [
        Row("Recurrent PCL", f"{env}, 100k", Runs(recurrent, "recurrent_pcl", env), "RecurrentPPO",
            Runs(recurrent, "recurrentppo", env), FINAL)
        for env in ("CartPoleNoVel-v1", "PendulumNoVel-v1")
    ]  # fmt: skip
    return [*classic, *trust, ant, *recurrent_rows]


ALGORITHMIC_TASKS = {"sb3_pcl/Copy-v0": 25.0, "sb3_pcl/DuplicatedInput-v0": 9.0, "sb3_pcl/Reverse-v0": 25.0}


def algorithmic_rows() -> tuple[list[list[str]], list[str]]:
    """:return: The algorithmic tasks' rows (seeds reaching the threshold; steps to it on Copy) and their sources"""
    tasks = " / ".join(env.split("/")[1].removesuffix("-v0") for env in ALGORITHMIC_TASKS)
    counts, sources = {}, []
    for algo in ("urex", "reinforce"):
        reaching = []
        for env, threshold in ALGORITHMIC_TASKS.items():
            runs = Runs("algorithmic", algo, env)
            first = runs.first_reaching(threshold, "timesteps")
            reaching.append(f"{int(first.notna().sum())}/3")
            sources.append(
                f"UREX, Reinforce | {tasks} | seeds reaching the threshold: {runs.describe()}, steps to it per seed "
                + ", ".join(map(steps, first))
            )
        counts[algo] = ", ".join(reaching)
    copy = {algo: Runs("algorithmic", algo, "sb3_pcl/Copy-v0") for algo in ("urex", "reinforce")}
    medians = {algo: steps(float(runs.first_reaching(25.0, "timesteps").median())) for algo, runs in copy.items()}
    sources += [
        f"Reinforce | Copy | steps to 25: {runs.describe()}, per seed "
        + ", ".join(map(steps, runs.first_reaching(25.0, "timesteps")))
        for runs in copy.values()
    ]
    table = link("algorithmic")
    return [
        ["UREX", f"{tasks}, 5M: seeds reaching gym's threshold", "3: 0-2", counts["urex"],
         f"Reinforce {counts['reinforce']}", "3 seeds: no test", table],
        ["Reinforce (MENT)", "Copy, 5M: env steps to the threshold", "3: 0-2", f"median {medians['reinforce']}",
         f"UREX median {medians['urex']}", "3 seeds: no test", table],
    ], sources  # fmt: skip


#: the campaign of Trust-PCL with the paper's recipe at the paper's budget, whose reference is the paper's Table 1
PAPER_CAMPAIGN = Path("benchmarks") / "campaigns" / "paper_table1.yml"


def repo_campaign(path: Path) -> Campaign:
    """:return: The campaign file ``path`` (relative to the repository) with its output folder in this checkout"""
    campaign = load_campaign(REPO_ROOT / path)
    return dataclasses.replace(campaign, out=REPO_ROOT / campaign.out)


def paper_row() -> tuple[list[str], list[str]]:
    """:return: The row setting the paper's recipe beside the paper's Table 1 (per task: our best evaluation within the
    budget, mean over seeds, against the published number, as a ratio), and its sources"""
    campaign = repo_campaign(PAPER_CAMPAIGN)
    reference = campaign.reference
    if reference is None:
        raise ValueError(f"{PAPER_CAMPAIGN} has no reference")
    paper_name, paper = next(iter(reference.columns.items()))
    frame = load_evaluations(campaign.out.name)
    ours, ratios, sources, seed_groups = [], [], [], collections.defaultdict(list)
    for env, target in paper.items():
        result = best_within_budget(campaign, frame, env, reference.algo)
        task = env.removesuffix("-v5")
        runs = [run for run in campaign.tasks if run.env == env and run.algo == reference.algo]
        seeds = [run.seed for run in runs]
        seed_groups[f"{len(seeds)}: {seed_list(seeds)}"].append(task)
        cell = number(result.mean) if result.best else "-"
        if len(result.best) >= 2:
            low, high = bootstrap_interval(list(result.best))
            cell += f" [{number(low)}, {number(high)}]"
        statuses = collections.Counter(result.statuses)
        if set(statuses) == {"stopped"}:
            by_steps = {steps(float(run.stop_below[0])) for run in runs if run.stop_below is not None}
            cell += f" (stopped at {', '.join(sorted(by_steps))})"
        elif set(statuses) != {"done"}:
            cell += f" ({statuses['done']}/{len(seeds)} seeds done)"
        ours.append(cell)
        ratios.append(f"{result.mean / target:.2f}" if result.best else "-")
        sources.append(
            f"Trust-PCL (paper's recipe) | {env} | best evaluation: {(RESULTS / campaign.out.name).as_posix()}"
            f"/evaluations.csv [algo={reference.algo}, env={env}], per seed {', '.join(result.seeds)}; {paper_name} {target:g}"
        )
    seeds_cell = "; ".join(f"{', '.join(tasks)} {seeds}" for seeds, tasks in seed_groups.items())
    budget = steps(float(max(task.steps for task in campaign.tasks)))
    cells = [
        "Trust-PCL (adaptive λ, the paper's recipe)",
        f"{' / '.join(env.removesuffix('-v5') for env in paper)}-v5, {budget}: best evaluation (the paper's metric)",
        seeds_cell,
        " / ".join(ours),
        f"{paper_name} (gym v1) {' / '.join(f'{value:g}' for value in paper.values())}",
        f"ratio {' / '.join(ratios)}; published numbers: no test",
        f"{link(campaign.out.name)}, [reproduction](docs/reproduction.md)",
    ]
    return cells, sources


#: the campaign of Trust-PCL, SAC and TRPO given the same CPU time per run
CPU_HOUR_CAMPAIGN = Path("benchmarks") / "campaigns" / "cpu_hour.yml"
DISPLAY_NAMES = {"trust_pcl": "Trust-PCL", "sac": "SAC", "trpo": "TRPO", "ppo": "PPO"}


def task_list(envs: Sequence[str]) -> str:
    """:return: ``HalfCheetah / Hopper-v5`` for envs of one version suffix ``-v5``, else the ids joined by ``/``"""
    if all(env.endswith("-v5") for env in envs):
        return " / ".join(env.removesuffix("-v5") for env in envs) + "-v5"
    return " / ".join(envs)


def cpu_hour_row(campaign: Campaign | None = None) -> tuple[list[str], list[str]]:
    """:return: The row of the equal-CPU-time campaign (runs on tuning seeds left out, as in its report): per task each
    algorithm's return at the last report mark (mean over the seeds there [bootstrap interval]), who leads at every
    mark (a leader is named once each algorithm has a seed there), the permutation test of the leader against the
    runner-up, how many of the compared runs are done and, when their rows come from more than one CPU model, how
    many; and its sources. The first algorithm of the campaign file
    is ours, the others the baselines.

    :param campaign: The campaign (default: ``benchmarks/campaigns/cpu_hour.yml``), with CPU-second report marks"""
    campaign = repo_campaign(CPU_HOUR_CAMPAIGN) if campaign is None else campaign
    frame = store.read_evaluations(campaign.out).dropna(subset=["timesteps"])
    clock, marks = campaign.report_marks
    if clock != "cpu_time_s" or not marks:
        raise ValueError(f"{CPU_HOUR_CAMPAIGN} must report at marks of CPU seconds")
    compared = [task for task in campaign.tasks if task.name not in campaign.tuning_seeds]
    algos = list(dict.fromkeys(task.algo for task in compared))
    envs = list(dict.fromkeys(task.env for task in campaign.tasks))
    found = leads(campaign, frame)
    by_mark = {(lead.env, lead.mark): dict(lead.ranked) for lead in found}
    metadata = read_json(campaign.out / RUN_METADATA_FILENAME, {})
    done = sum(metadata.get(task.name, {}).get("status") == "done" for task in compared)
    label = {algo: DISPLAY_NAMES.get(algo, algo) for algo in algos}
    seeds_per_run = {(task.algo, task.env): [] for task in compared}
    for task in compared:
        seeds_per_run[task.algo, task.env].append(task.seed)

    def at_last_mark(algo: str) -> str:
        cells = []
        for env in envs:
            values = by_mark.get((env, marks[-1]), {}).get(algo, ())
            cell = number(float(np.mean(values))) if values else "-"
            if len(values) >= 2:
                low, high = bootstrap_interval(np.asarray(values))
                cell += f" [{number(low)}, {number(high)}]"
            expected = len(seeds_per_run[algo, env])
            cells.append(cell + (f" ({len(values)}/{expected} seeds)" if values and len(values) < expected else ""))
        return " / ".join(cells)

    started = {env: {algo for algo in algos if any(by_mark.get((env, mark), {}).get(algo) for mark in marks)} for env in envs}
    # a leader is named once each algorithm with evaluations on the task has a seed at the mark
    first = {
        (lead.env, lead.mark): label[lead.ranked[0][0]]
        for lead in found
        if len(lead.ranked) == len(started[lead.env]) and len(lead.ranked) >= 2
    }
    leaders = [f"{env.removesuffix('-v5')} {', '.join(first.get((env, mark), '-') for mark in marks)}" for env in envs]
    tested, verdicts = [lead for lead in found if not math.isnan(lead.p_value)], []
    ahead = [lead for lead in tested if lead.p_value < SIGNIFICANCE]
    if ahead:
        verdicts = [
            f"{label[lead.ranked[0][0]]} ahead on {lead.env.removesuffix('-v5')} at {lead.mark / 60:g} CPU-min "
            f"(p = {lead.p_value:.2g})"
            for lead in ahead
        ]
    elif tested:
        floor = min(lead.smallest_p for lead in tested)
        verdicts = [f"no leader distinguishable (p >= {floor:.2f} with these seed counts)"]
    marks_label = " / ".join(f"{mark / 60:g}" for mark in marks)
    difference = f"leader at {marks_label} CPU-min: {'; '.join(leaders)}; " + ("; ".join(verdicts) or "no test yet")
    if done < len(compared):
        difference = f"{done} of {len(compared)} runs done; " + difference
    keys = {(task.algo, task.env, task.seed) for task in compared}
    run_keys = zip(frame["algo"], frame["env"], frame["seed"], strict=True)
    rows = frame[[(algo, env, int(seed)) in keys for algo, env, seed in run_keys]]
    cpus = rows.loc[rows["timesteps"] > 0, "cpu"].fillna("?").nunique()
    if cpus > 1:  # a CPU second buys another number of env steps on each
        difference += f"; the runs trained on {cpus} CPU models (per run: results.md, CPUs)"
    seed_groups: dict[str, list[str]] = collections.defaultdict(list)
    for algo in algos:
        per_env: dict[str, list[str]] = collections.defaultdict(list)
        for env in envs:
            per_env[seed_list(seeds_per_run[algo, env])].append(env.removesuffix("-v5"))
        common = max(per_env, key=lambda seeds: len(per_env[seeds]))
        others = "; ".join(f"{', '.join(tasks)} {seeds}" for seeds, tasks in per_env.items() if seeds != common)
        seed_groups[common + (f" ({others})" if others else "")].append(label[algo])
    seeds_cell = "; ".join(f"{', '.join(names)} {seeds}" for seeds, names in seed_groups.items())
    ours, baselines = algos[0], algos[1:]
    budget = max(task.cpu_budget or 0.0 for task in compared)
    cells = [
        f"{label[ours]} (fixed λ; Ant: adaptive λ)",
        f"{task_list(envs)}, {budget:g} CPU-s per run: return at {marks[-1] / 60:g} CPU-min",
        seeds_cell,
        at_last_mark(ours),
        "; ".join(f"{label[algo]} {at_last_mark(algo)}" for algo in baselines),
        difference,
        f"{link(campaign.out.name)}, [which algorithm](docs/trust_pcl.md#which-algorithm-for-which-budget)",
    ]
    path = campaign.out / "evaluations.csv"
    csv = (path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path).as_posix()
    sources = [
        f"{label[algo]} | {env} | return at {mark / 60:g} CPU-min: {csv} [algo={algo}, env={env}, seeds "
        f"{seed_list(seeds_per_run[algo, env])}], per seed there "
        + (", ".join(map(number, by_mark.get((env, mark), {}).get(algo, ()))) or "-")
        for env in envs
        for algo in algos
        for mark in marks
    ]
    return cells, sources


def render() -> tuple[str, list[str]]:
    """:return: The markdown table (between the markers) and the sources of its cells"""
    compared = [row.cells() for row in rows()]
    algorithmic, algorithmic_sources = algorithmic_rows()
    paper, paper_sources = paper_row()
    cpu_hour, cpu_hour_sources = cpu_hour_row()
    lines = [cells for cells, _ in compared] + algorithmic + [cpu_hour, paper]
    sources = [source for _, row_sources in compared for source in row_sources] + algorithmic_sources
    sources += cpu_hour_sources + paper_sources
    header = ["Algorithm", "Task, budget: quantity", "Seeds", "sb3_pcl", "Baseline", "Difference", "Data"]
    return "\n".join([BEGIN, *markdown_table(header, lines), END]), sources


def main(argv: Sequence[str] | None = None) -> int:
    """
    :param argv: Command line arguments (default: ``sys.argv[1:]``)
    :return: Exit code: 0, or 1 with ``--check`` when README.md's table differs from the data
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readme_results", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit with 1 when README.md differs; write nothing")
    parser.add_argument("--readme", type=Path, default=README, help="the README to update (default: the repository's)")
    args = parser.parse_args(argv)
    current = args.readme.read_text()
    table, sources = render()
    start, end = current.find(BEGIN), current.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md must hold the markers {BEGIN!r} and {END!r} (in this order)")
    updated = current[:start] + table + current[end + len(END) :]
    if args.check:
        if updated == current:
            print(f"{args.readme}: the results table matches the committed data")
            return 0
        diff = difflib.unified_diff(current.splitlines(), updated.splitlines(), "README.md", "from the data", lineterm="")
        print("\n".join(diff))
        print(f"{args.readme} differs from the data: run python -m benchmarks.readme_results", file=sys.stderr)
        return 1
    args.readme.write_text(updated)
    print("\n".join(sources))
    return 0


if __name__ == "__main__":
    sys.exit(main())
