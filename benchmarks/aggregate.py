"""
Aggregate metrics of a benchmark suite with `rliable <https://github.com/google-research/rliable>`_: written by
``python -m benchmarks.report benchmarks/results/classic`` (:mod:`benchmarks.report`) into the suite folder:
``aggregate.md`` (IQM, mean, median and optimality gap of the normalised final scores, with stratified-bootstrap
intervals where every env has :data:`benchmarks.reporting.MIN_SEEDS_FOR_INTERVAL` seeds), ``performance_profile.png``
and ``sample_efficiency.png``. Normalisation: benchmarks/README.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.metadata
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from benchmarks import harness, store
from benchmarks.algorithms import REPO_ROOT
from benchmarks.reporting import MIN_SEEDS_FOR_INTERVAL, markdown_table, saved_figure, steps

try:
    from rliable import library as rly_library
    from rliable import metrics as rly_metrics
    from rliable import plot_utils as rly_plots
except ImportError as error:  # pragma: no cover
    raise ImportError(f"benchmarks.aggregate needs rliable: pip install -e '.[bench]' ({error})") from error

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
AGGREGATE_FILENAME = "aggregate.md"
PROFILE_FILENAME = "performance_profile.png"
SAMPLE_EFFICIENCY_FILENAME = "sample_efficiency.png"
OUTPUT_FILENAMES = (AGGREGATE_FILENAME, PROFILE_FILENAME, SAMPLE_EFFICIENCY_FILENAME)
#: The aggregate metrics (rliable's), in the order of the table of ``aggregate.md``
METRICS = {
    "IQM": rly_metrics.aggregate_iqm,
    "Mean": rly_metrics.aggregate_mean,
    "Median": rly_metrics.aggregate_median,
    "Optimality gap": rly_metrics.aggregate_optimality_gap,
}
#: A ``random`` entry of :data:`NORMALISATION` measured instead of given: the mean step-0 evaluation of the env's runs
STEP0 = "step0"
DEFAULT_REPS = 50_000
DEFAULT_PROFILE_REPS = 2_000
DEFAULT_SEED = 0
DEFAULT_POINTS = 21
CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class SuiteNormalisation:
    """How the returns of one suite become normalised scores: ``score = (return - random) / (reference - random)``."""

    envs: Mapping[str, tuple[float | str, float]]  #: per env id ``(random, reference)``; ``random`` may be :data:`STEP0`
    random_source: str  #: what ``random`` is, in words (written to ``aggregate.md``, as are the next two)
    reference_source: str  #: what ``reference`` is and where its numbers come from
    notes: str = ""  #: what to keep in mind when reading the suite's aggregate


#: The normalisation of each committed suite, by the name of its folder under ``benchmarks/results`` (0: the random
#: return, 1: the reference; scores outside [0, 1] are kept as they are).
NORMALISATION: dict[str, SuiteNormalisation] = {
    "classic": SuiteNormalisation(
        envs={"CartPole-v1": (0.0, 475.0), "Acrobot-v1": (-500.0, -100.0), "Pendulum-v1": (STEP0, -250.0)},
        random_source=(
            "the worst return an episode can have at the time limit where the task bounds it (CartPole-v1: 0; "
            "Acrobot-v1: -500, the goal never reached), the untrained policy's return (mean of the step-0 evaluations "
            "of every run of the env) for Pendulum-v1"
        ),
        reference_source=(
            "the env's `reward_threshold` (CartPole-v1, Acrobot-v1); Pendulum-v1 has none: -250, the threshold of the "
            "suite's `results.md` (`config.json`)"
        ),
    ),
    "mujoco": SuiteNormalisation(
        envs={
            "HalfCheetah-v5": (STEP0, 1785.476),
            "Hopper-v5": (STEP0, 3618.386),
            "Walker2d-v5": (STEP0, 4933.148),
            "Ant-v5": (STEP0, 4982.301),
            "Swimmer-v5": (STEP0, 365.663),
        },
        random_source=(
            "the untrained policy's return: mean of the step-0 evaluations of every run of the env in `evaluations.csv`"
        ),
        reference_source=(
            "rl-zoo3's published TRPO agents: `benchmark.md` of DLR-RM/rl-baselines3-zoo, `trpo` rows (1M steps, one "
            "trained agent per env, deterministic evaluation), measured on the v3 envs (our runs: v5, whose rewards are "
            "close but not identical); 1 means as good as the zoo's TRPO agent"
        ),
        notes=(
            "The reference is one published agent per env, not a bound: runs may score well above 1 where it is weak "
            "(HalfCheetah), and below 0 where the untrained policy's return is high (Ant-v5: an untrained policy that "
            "stays healthy for its 1000 steps earns the healthy reward)."
        ),
    ),
    "algorithmic": SuiteNormalisation(
        envs={
            "sb3_pcl/Copy-v0": (0.0, 25.0),
            "sb3_pcl/DuplicatedInput-v0": (0.0, 9.0),
            "sb3_pcl/RepeatCopy-v0": (0.0, 75.0),
            "sb3_pcl/Reverse-v0": (0.0, 25.0),
            "sb3_pcl/ReversedAddition-v0": (0.0, 25.0),
            "sb3_pcl/ReversedAddition3-v0": (0.0, 25.0),
        },
        random_source="0: no correct symbol written (a wrong write earns -0.5 and ends the episode)",
        reference_source="the env's `reward_threshold` (gym's criterion for solving the task, on the training return)",
        notes=(
            "The return is the mean of the last 100 training episodes (gym's criterion), not a deterministic "
            "evaluation, and it depends on the curriculum length the run has reached. Runs stop at the first "
            "evaluation reaching the threshold, so a solved run's final score is its score there (1 or more) however "
            "early it solved the task, and the algorithms had different budgets (*Runs used*): the final "
            "scores compare each algorithm at its own budget; the sample-efficiency plot compares them at equal steps."
        ),
    ),
}


@dataclasses.dataclass
class Selection:
    """The runs an aggregate uses."""

    envs: list[str]  #: the suite's envs (the tasks), in table order
    seeds: dict[str, list[int]]  #: per aggregated algorithm, the seeds it has on every env
    excluded: dict[str, list[str]]  #: per algorithm left out, the envs it was not run on
    dropped: dict[tuple[str, str], list[int]]  #: per ``(algo, env)``, the seeds the algorithm lacks on another env


@dataclasses.dataclass
class Aggregate:
    """Everything ``aggregate.md`` and the two plots show."""

    suite: str  #: the suite's name (its key in :data:`NORMALISATION`)
    references: dict[str, tuple[float, float]]  #: per env, the ``(random, reference)`` returns used
    selection: Selection
    scores: dict[str, np.ndarray]  #: per algorithm, the normalised final scores, ``seeds x envs``
    points: dict[str, np.ndarray]  #: per algorithm, the point estimates of :data:`METRICS`
    intervals: dict[str, np.ndarray]  #: per algorithm, ``2 x len(METRICS)``: the intervals' lower and upper bounds
    budgets: dict[str, dict[str, list[int]]]  #: per algorithm and env, the step budgets of its runs
    curves: dict[str, tuple[np.ndarray, np.ndarray]]  #: per algorithm, ``(steps, scores)``, ``seeds x envs x steps``
    normalisation: SuiteNormalisation


@contextlib.contextmanager
def _seeded_global_numpy(seed: int) -> Iterator[None]:
    """Seed NumPy's global generator (rliable's bootstrap draws from it) for the block, then restore it."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        np.random.set_state(state)


def load_evaluations(folder: str | Path) -> pd.DataFrame:
    """
    Read a suite folder's ``evaluations.csv`` (:func:`benchmarks.store.read_evaluations`) for the aggregate: the
    :data:`benchmarks.store.REQUIRED_COLUMNS`, one row per step of a run. Step-0 rows without a return (the
    training-return metric has no finished episode yet) are dropped; any other missing or non-finite return is an error.

    :return: The evaluations, sorted by algorithm, env, seed and step
    """
    path = Path(folder) / harness.EVALUATIONS_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    frame = store.read_evaluations(folder)[list(store.REQUIRED_COLUMNS)]
    try:
        frame = frame.set_index(["algo", "env", "seed", "timesteps"], verify_integrity=True)
    except ValueError as error:  # several evaluations of a step
        raise ValueError(f"{path}: {error}") from error
    frame = frame.sort_index(kind="stable").reset_index()
    bad = ~np.isfinite(frame["mean_return"])
    untrained = bad & (frame["timesteps"] == 0)
    if (bad & ~untrained).any():
        row = frame[bad & ~untrained].iloc[0]
        raise ValueError(
            f"{path}: return {row['mean_return']} (NaN or infinite) for {row['algo']} on {row['env']}, "
            f"seed {row['seed']}, step {row['timesteps']}; only step-0 rows may lack a return"
        )
    if untrained.all():
        raise ValueError(f"{path} has no evaluation with a return")
    return frame[~untrained].reset_index(drop=True)


def load_run_metadata(folder: str | Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """:return: The suite folder's ``run_metadata.json`` by ``(algo, env, seed)`` (empty when absent)"""
    records = harness.read_json(Path(folder) / harness.RUN_METADATA_FILENAME, {})
    return {
        (str(meta["algo"]), str(meta["env"]), int(meta["seed"])): meta
        for meta in records.values()
        if isinstance(meta, dict) and {"algo", "env", "seed"} <= meta.keys()
    }


def resolve_references(frame: pd.DataFrame, normalisation: SuiteNormalisation) -> dict[str, tuple[float, float]]:
    """:return: Per env of ``frame``, its ``(random, reference)`` returns, :data:`STEP0` measured"""
    references = {}
    for env in sorted(frame["env"].unique()):
        if env not in normalisation.envs:
            raise ValueError(
                f"No normalisation reference for env {env!r}: the suite's entry of benchmarks.aggregate.NORMALISATION "
                f"covers {sorted(normalisation.envs)}"
            )
        random, reference = normalisation.envs[env]
        if random == STEP0:
            initial = frame[(frame["env"] == env) & (frame["timesteps"] == 0)]["mean_return"]
            if initial.empty:
                raise ValueError(
                    f"The random return of {env} is its step-0 evaluation, and no run of it has one "
                    "(runs made with --no-initial-eval): give a number in NORMALISATION"
                )
            random = initial.mean()
        random, reference = float(random), float(reference)
        if reference == random:
            raise ValueError(f"Normalisation of {env}: the reference return equals the random return ({random})")
        references[env] = (random, reference)
    return references


def normalise(returns: npt.ArrayLike, random: float, reference: float) -> np.ndarray:
    """:return: ``(returns - random) / (reference - random)``"""
    return (np.asarray(returns, dtype=float) - random) / (reference - random)


def select_runs(frame: pd.DataFrame, env_order: Sequence[str] | None = None) -> Selection:
    """
    Keep the algorithms run on every env of ``frame``, each with the seeds it has on all of them.

    :param env_order: Preferred order of the envs (the others follow, sorted).
    """
    present = set(frame["env"].unique())
    envs = [env for env in (env_order or []) if env in present] + sorted(present - set(env_order or []))
    selection = Selection(envs=envs, seeds={}, excluded={}, dropped={})
    for name, runs in frame.groupby("algo", sort=True):
        algo = str(name)
        per_env = {env: set(group["seed"].tolist()) for env, group in runs.groupby("env")}
        missing = [env for env in envs if env not in per_env]
        common = sorted(set.intersection(*per_env.values())) if not missing else []
        if not common:
            selection.excluded[algo] = missing
            continue
        selection.seeds[algo] = [int(seed) for seed in common]
        for env in envs:
            if extra := sorted(per_env[env] - set(common)):
                selection.dropped[(algo, env)] = [int(seed) for seed in extra]
    if not selection.seeds:
        raise ValueError(
            f"No algorithm has runs on every env ({envs}) with a seed in common: nothing to aggregate "
            f"(per algorithm, the envs missing: {selection.excluded})"
        )
    return selection


def score_curves(
    frame: pd.DataFrame,
    selection: Selection,
    references: Mapping[str, tuple[float, float]],
    metadata: Mapping[tuple[str, str, int], Mapping[str, Any]] | None = None,
    n_points: int = DEFAULT_POINTS,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """
    Normalised scores of every selected run at ``n_points`` evenly spaced steps from 0 to the algorithm's shortest run
    (a run stopped at the threshold counts to its budget). Evaluations are placed on their run's ``eval_freq`` grid; a
    run's score at a step is its latest evaluation at or before it; steps before some run's first evaluation are left out.

    :return: Per algorithm ``(steps, scores)``, scores ``seeds x envs x steps``
    """
    if n_points < 2:
        raise ValueError(f"n_points must be at least 2, not {n_points}")
    metadata = metadata or {}
    curves = {}
    for algo, seeds in selection.seeds.items():
        runs = {}
        for j, env in enumerate(selection.envs):
            for i, seed in enumerate(seeds):
                run = frame[(frame["algo"] == algo) & (frame["env"] == env) & (frame["seed"] == seed)]
                meta = metadata.get((algo, env, seed)) or {}
                run_steps = run["timesteps"].to_numpy()
                if meta.get("eval_freq"):
                    run_steps = run_steps // int(meta["eval_freq"]) * int(meta["eval_freq"])
                end = int(run_steps.max())
                if meta.get("stopped_at_threshold") and meta.get("steps"):
                    end = max(int(meta["steps"]), end)
                runs[(i, j)] = (run_steps, run["mean_return"].to_numpy(), end)
        horizon = min(end for _, _, end in runs.values())
        grid = np.unique(np.linspace(0, horizon, n_points).round().astype(np.int64))
        values = np.full((len(seeds), len(selection.envs), len(grid)), np.nan)
        for (i, j), (run_steps, returns, _) in runs.items():
            index = np.searchsorted(run_steps, grid, side="right") - 1
            values[i, j, index >= 0] = normalise(returns[index[index >= 0]], *references[selection.envs[j]])
        keep = ~np.isnan(values).any(axis=(0, 1))
        if not keep.any():
            raise ValueError(f"{algo}: no step point where every run has an evaluation")
        curves[algo] = (grid[keep], values[:, :, keep])
    return curves


def _metrics(scores: np.ndarray) -> np.ndarray:
    """:return: :data:`METRICS` of a ``runs x tasks`` matrix"""
    return np.array([metric(scores) for metric in METRICS.values()])


def _iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """:return: The IQM at each step of a ``runs x tasks x steps`` array"""
    return np.array([rly_metrics.aggregate_iqm(scores[..., k]) for k in range(scores.shape[-1])])


def interval_estimates(
    scores: Mapping[str, np.ndarray],
    reps: int = DEFAULT_REPS,
    seed: int = DEFAULT_SEED,
    metric: Callable[[np.ndarray], np.ndarray] = _metrics,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """
    ``rliable.library.get_interval_estimates`` of ``metric`` (default: :data:`METRICS`), 95% intervals, seeded, leaving
    NumPy's global generator as it was.

    :return: Point estimates (per algorithm, one per metric) and intervals (per algorithm, ``2 x metrics``)
    """
    if reps < 1:
        raise ValueError(f"reps must be positive, not {reps}")
    with _seeded_global_numpy(seed):
        return rly_library.get_interval_estimates(dict(scores), metric, reps=reps, confidence_interval_size=CONFIDENCE)


def aggregate_suite(
    folder: str | Path,
    normalisation: SuiteNormalisation | None = None,
    reps: int = DEFAULT_REPS,
    n_points: int = DEFAULT_POINTS,
) -> Aggregate:
    """
    Compute the aggregate of a suite folder (nothing is written; bootstrap seed :data:`DEFAULT_SEED`).

    :param folder: The suite folder (``evaluations.csv``, optionally ``run_metadata.json``), named as its suite in
        :data:`NORMALISATION`.
    :param normalisation: Use this normalisation instead of the suite's entry.
    :param reps: Bootstrap resamples of the final-score intervals.
    :param n_points: Step points of the sample-efficiency curves.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"Suite folder {folder} not found")
    suite = folder.resolve().name
    if normalisation is None and suite not in NORMALISATION:
        raise ValueError(
            f"No normalisation reference for suite {suite!r}: known suites are {sorted(NORMALISATION)} "
            "(benchmarks.aggregate.NORMALISATION, by the name of the folder)"
        )
    normalisation = normalisation or NORMALISATION[suite]
    frame = load_evaluations(folder)
    references = resolve_references(frame, normalisation)
    metadata = load_run_metadata(folder)
    selection = select_runs(frame, env_order=list(normalisation.envs))
    last = frame.groupby(["algo", "env", "seed"], sort=False)[["mean_return", "timesteps"]].last()
    scores, budgets = {}, {}
    for algo, seeds in selection.seeds.items():
        columns, budgets[algo] = [], {}
        for env in selection.envs:
            runs = [(algo, env, seed) for seed in seeds]
            columns.append(normalise(last.loc[runs, "mean_return"], *references[env]))
            budgets[algo][env] = sorted(
                {int((metadata.get(run) or {}).get("steps") or last.loc[run, "timesteps"]) for run in runs}
            )
        scores[algo] = np.stack(columns, axis=1)
    supported = {algo: values for algo, values in scores.items() if len(values) >= MIN_SEEDS_FOR_INTERVAL}
    points, intervals = interval_estimates(supported, reps=reps) if supported else ({}, {})
    for algo in scores.keys() - supported.keys():  # too few seeds per env for an interval: the point estimates only
        points[algo] = _metrics(scores[algo])
        intervals[algo] = np.full((2, len(METRICS)), np.nan)
    curves = score_curves(frame, selection, references, metadata, n_points=n_points)
    return Aggregate(suite, references, selection, scores, points, intervals, budgets, curves, normalisation)


def _fmt(value: float) -> str:
    """:return: A normalised score with 3 decimals (2 from 10 on)"""
    if not np.isfinite(value):
        return str(value)
    return f"{value:.2f}" if abs(value) >= 10 else f"{value:.3f}"


@contextlib.contextmanager
def _figure(aggregate: Aggregate, path: str | Path, title: str, vertical: bool) -> Iterator[tuple[Any, ...]]:
    """
    A figure for the block, then its title, a dashed line at score 1 (``vertical``: on the x axis) and the legend.

    :return: Per algorithm its legend entry (with its number of runs), and the keyword arguments of rliable's plot
        functions: the axes, the font sizes and per legend entry its colour (the same in both figures)
    """
    import matplotlib

    legend = {algo: f"{algo} ({scores.size} runs)" for algo, scores in aggregate.scores.items()}
    colors = {label: matplotlib.colormaps["tab10"](i % 10) for i, label in enumerate(legend.values())}
    with saved_figure(path, figsize=(7, 4.5)) as (_, ax):
        yield legend, {"colors": colors, "ax": ax, "labelsize": "medium", "ticklabelsize": "medium"}
        (ax.axvline if vertical else ax.axhline)(1.0, color="gray", linestyle="--", linewidth=1)
        ax.set_title(
            f"{aggregate.suite}: {title} ({int(CONFIDENCE * 100)}% bands from {MIN_SEEDS_FOR_INTERVAL} seeds per env)"
        )
        ax.legend(loc="best", fontsize="small")


def _supported(aggregate: Aggregate, algo: str) -> bool:
    """:return: Whether the algorithm has seeds enough on every env for an interval (and a band)"""
    return len(aggregate.selection.seeds[algo]) >= MIN_SEEDS_FOR_INTERVAL


def plot_performance_profile(
    aggregate: Aggregate, path: str | Path, reps: int = DEFAULT_PROFILE_REPS, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """
    Write rliable's performance profile of the final scores (the fraction of runs above each tau, with 95% bands).

    :return: The thresholds tau of the profile
    """
    every = np.concatenate([scores.ravel() for scores in aggregate.scores.values()])
    low, high = min(0.0, float(np.floor(every.min() * 10) / 10)), max(1.0, float(np.ceil(every.max() * 10) / 10))
    taus = np.linspace(low, high, 101)
    with _seeded_global_numpy(seed):
        profiles, bands = rly_library.create_performance_profile(
            dict(aggregate.scores), taus, reps=reps, confidence_interval_size=CONFIDENCE
        )
    with _figure(aggregate, path, "performance profile", vertical=True) as (legend, style):
        rly_plots.plot_performance_profiles(
            {legend[algo]: profile for algo, profile in profiles.items()},
            taus,
            performance_profile_cis={legend[algo]: band for algo, band in bands.items() if _supported(aggregate, algo)},
            xlabel=r"normalised final score $\tau$ (1 = reference)",
            ylabel=r"fraction of runs with score > $\tau$",
            **style,
        )
    return taus


def plot_sample_efficiency(
    aggregate: Aggregate, path: str | Path, reps: int = DEFAULT_PROFILE_REPS, seed: int = DEFAULT_SEED
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """
    Write the IQM of the normalised score against env steps per algorithm with its 95% band (rliable's
    ``plot_sample_efficiency_curve``); the x axis is logarithmic (step 0 not shown) when the horizons differ tenfold.

    :return: Per algorithm ``(steps, IQM, 2 x steps interval)``
    """
    estimates = {}
    for algo, (grid, scores) in aggregate.curves.items():
        if _supported(aggregate, algo):
            points, intervals = interval_estimates({algo: scores}, reps=reps, seed=seed, metric=_iqm_per_step)
            estimates[algo] = (grid, points[algo], intervals[algo])
        else:  # too few seeds per env for a band
            iqm = _iqm_per_step(scores)
            estimates[algo] = (grid, iqm, np.vstack([iqm, iqm]))
    horizons = [int(grid.max()) for grid, _, _ in estimates.values()]
    log_x = max(horizons) > 10 * max(min(horizons), 1)
    with _figure(aggregate, path, "sample efficiency", vertical=False) as (legend, style):
        for algo, (grid, iqm, interval) in estimates.items():
            shown = grid > 0 if log_x else np.ones_like(grid, dtype=bool)
            rly_plots.plot_sample_efficiency_curve(
                grid[shown],
                {legend[algo]: iqm[shown]},
                {legend[algo]: interval[:, shown]},
                xlabel="env steps",
                ylabel="IQM normalised score\n(1 = reference)",
                marker="." if shown.sum() < 30 else None,
                **style,
            )
        style["ax"].set_xscale("log" if log_x else "linear")
    return estimates


def regenerate_command(folder: Path) -> str:
    """:return: The command line that regenerates a suite's aggregate"""
    shown = str(folder)
    with contextlib.suppress(ValueError):
        shown = folder.resolve().relative_to(REPO_ROOT).as_posix()
    return f"python -m benchmarks.report {shown}"


def render_markdown(aggregate: Aggregate, command: str, reps: int, profile_reps: int, seed: int, date: str) -> str:
    """:return: The text of ``aggregate.md``"""
    sel, normalisation = aggregate.selection, aggregate.normalisation
    final_rows = [
        [algo, "{} x {}".format(*aggregate.scores[algo].shape)]
        + [
            _fmt(point) if np.isnan(low) else f"{_fmt(point)} [{_fmt(low)}, {_fmt(high)}]"
            for point, low, high in zip(aggregate.points[algo], *aggregate.intervals[algo], strict=True)
        ]
        for algo in sel.seeds
    ]
    per_env_rows = [[algo, *(_fmt(value) for value in aggregate.scores[algo].mean(axis=0))] for algo in sel.seeds]
    reference_rows = []
    for env in sel.envs:
        random, reference = aggregate.references[env]
        measured = " (step-0 mean)" if normalisation.envs[env][0] == STEP0 else ""
        reference_rows.append([env, f"{random:.6g}{measured}", f"{reference:.6g}"])
    run_rows = []
    for algo, seeds in sel.seeds.items():
        budgets = aggregate.budgets[algo]
        distinct = {budget for env in sel.envs for budget in budgets[env]}
        if len(distinct) == 1:
            budget = steps(distinct.pop())
        else:
            budget = "; ".join(f"{env}: {'/'.join(steps(b) for b in budgets[env])}" for env in sel.envs)
        run_rows.append([algo, f"{len(sel.envs)} (all)", " ".join(map(str, seeds)), budget])
    runs_text = [f"Envs: {', '.join(sel.envs)}."]
    if sel.excluded:
        left_out = "; ".join(
            f"`{algo}` ({'not run on ' + ', '.join(missing) if missing else 'no seed run on every env'})"
            for algo, missing in sel.excluded.items()
        )
        runs_text.append(f"Left out, as rliable needs every algorithm on every env: {left_out}.")
    if sel.dropped:
        dropped = "; ".join(f"`{algo}` on {env}: seeds {' '.join(map(str, s))}" for (algo, env), s in sel.dropped.items())
        runs_text.append(f"Seeds dropped, as their algorithm lacks them on another env: {dropped}.")
    blocks = [
        f"# Aggregate metrics: `{aggregate.suite}`",
        f"Generated {date} by `{command}` (rliable {importlib.metadata.version('rliable')}) from this folder's "
        f"`{harness.EVALUATIONS_FILENAME}`.",
        "Normalised score = (return - random) / (reference - random): 0 is the random return, 1 the reference. A run's "
        "final score is its last evaluation. Over all runs (seeds x envs) of an algorithm: **IQM**, the mean of the "
        "middle 50% of the scores; **mean**; **median** of the per-env mean scores; **optimality gap**, the mean "
        "shortfall below 1 (scores above 1 count as 1; lower is better). Brackets: 95% confidence intervals, "
        f"percentile stratified bootstrap over the seeds of each env (`rliable.library.get_interval_estimates`), {reps} "
        f"bootstrap resamples, NumPy seed {seed}, for an algorithm with at least {MIN_SEEDS_FOR_INTERVAL} seeds on "
        "every env; with fewer, the point estimates alone (each env's resamples hold only its few seeds' values: an "
        "interval would lean on them), and the per-env means below.",
        *([normalisation.notes] if normalisation.notes else []),
        "## Final normalised scores",
        "\n".join(markdown_table(["Algorithm", "Runs (seeds x envs)", *METRICS], final_rows)),
        "Mean normalised final score per env (over the seeds above), for reading the aggregate:",
        "\n".join(markdown_table(["Algorithm", *sel.envs], per_env_rows)),
        "## Normalisation",
        f"Random: {normalisation.random_source}. Reference: {normalisation.reference_source}. The table is "
        "`NORMALISATION` in `benchmarks/aggregate.py`.",
        "\n".join(markdown_table(["Env", "Random return", "Reference return"], reference_rows)),
        "## Runs used",
        "\n".join(markdown_table(["Algorithm", "Envs", "Seeds", "Steps (budget per run)"], run_rows)),
        "\n".join(runs_text),
        "## Plots",
        f"`{PROFILE_FILENAME}`: rliable's performance profile (`rliable.library.create_performance_profile`), the "
        f"fraction of all runs with a final score above tau, with 95% bands ({profile_reps} bootstrap resamples, seed "
        f"{seed}) for the algorithms with at least {MIN_SEEDS_FOR_INTERVAL} seeds on every env.",
        f"![performance profile]({PROFILE_FILENAME})",
        f"`{SAMPLE_EFFICIENCY_FILENAME}`: the IQM of the normalised score against env steps, with 95% bands "
        f"({profile_reps} bootstrap resamples, seed {seed}) from {MIN_SEEDS_FOR_INTERVAL} seeds per env. Per algorithm, "
        "evenly spaced steps from 0 to its shortest "
        "run; a run's score at a step is its latest evaluation at or before it (evaluations placed on their run's "
        "`eval_freq` grid); a run stopped at the threshold keeps its last score to its budget; steps before some run's "
        "first evaluation with a return are left out.",
        f"![sample efficiency]({SAMPLE_EFFICIENCY_FILENAME})",
    ]
    return "\n\n".join(blocks) + "\n"


def write_aggregate(folder: str | Path) -> list[Path]:
    """
    Compute a suite's aggregate (:func:`aggregate_suite`, with the ``DEFAULT_*`` settings) and write ``aggregate.md``
    (dated today, UTC) and the two plots (:data:`DEFAULT_PROFILE_REPS` resamples) into its folder.

    :return: The written paths
    """
    folder = Path(folder)
    aggregate = aggregate_suite(folder)
    paths = [folder / name for name in OUTPUT_FILENAMES]
    plot_performance_profile(aggregate, paths[1], reps=DEFAULT_PROFILE_REPS, seed=DEFAULT_SEED)
    plot_sample_efficiency(aggregate, paths[2], reps=DEFAULT_PROFILE_REPS, seed=DEFAULT_SEED)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    markdown = render_markdown(aggregate, regenerate_command(folder), DEFAULT_REPS, DEFAULT_PROFILE_REPS, DEFAULT_SEED, date)
    paths[0].write_text(markdown)
    return paths
