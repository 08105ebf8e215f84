"""
The report of a grid folder (:mod:`benchmarks.run`), from its ``evaluations.csv``, ``run_metadata.json`` and
``config.json``: ``results.md`` (one table per env, equal-time tables of the time-budget runs, the
invocations of ``config.json``) and the learning curves against env steps (``<env>.png``) and training seconds
(``<env>_seconds.png``). The curves on a clock are shared with the campaigns' reports (:mod:`benchmarks.campaign`).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks import harness, reporting
from benchmarks.algorithms import ALGORITHMS, VARIANT_SEPARATOR, split_variant
from benchmarks.checkpoint import write_atomically
from benchmarks.harness import RUNS_DIRNAME, TIME_BUDGET_STEP_CAP, TIME_FRACTIONS, safe_name
from benchmarks.reporting import interval_of_mean, markdown_table, number
from benchmarks.reporting import steps as format_steps
from benchmarks.store import read_evaluations

#: ``<env><suffix>.png``: the learning curves against training seconds of the envs with time-budget runs
SECONDS_PLOT_SUFFIX = "_seconds"


def threshold_crossings(frame: pd.DataFrame, threshold: float | None) -> pd.DataFrame:
    """
    :param frame: Evaluations
    :param threshold: Reward threshold (``None``: never reached)
    :return: Per (algo, env, seed): ``reached`` and the ``timesteps`` / ``wall_time_s`` of the first evaluation after
        step 0 (a lucky untrained policy says nothing about learning) with ``mean_return >= threshold`` (NaN when not
        reached)
    """
    rows = []
    for (algo, env, seed), run in frame.groupby(["algo", "env", "seed"], sort=True):
        run = run.sort_values("timesteps")
        run = run[run["timesteps"] > 0]
        hits = run[run["mean_return"] >= threshold] if threshold is not None else run.iloc[0:0]
        first = hits.iloc[0] if len(hits) else {"timesteps": math.nan, "wall_time_s": math.nan}
        rows.append((algo, env, seed, len(hits) > 0, float(first["timesteps"]), float(first["wall_time_s"])))
    return pd.DataFrame(rows, columns=["algo", "env", "seed", "reached", "timesteps", "wall_time_s"])


def summarize_results(frame: pd.DataFrame, thresholds: Mapping[str, float | None]) -> pd.DataFrame:
    """
    Aggregate the evaluations per (env, algo) over seeds: ``n_seeds``, ``finals`` (each seed's last evaluation, by
    seed), ``final_mean`` / ``final_std`` (population std), ``best_mean`` (mean of each seed's best evaluation),
    ``fps`` and ``wall_time_s`` (final, mean over seeds), ``n_reached``, ``steps_to_threshold`` /
    ``wall_to_threshold`` (median over seeds of the first crossing after step 0; NaN unless every seed reaches it),
    ``curriculum_final`` / ``curriculum_min`` / ``curriculum_max`` (last recorded curriculum length; NaN without one).
    """
    rows = []
    for (env, algo), group in frame.groupby(["env", "algo"], sort=True):
        group = group.sort_values(["seed", "timesteps"])
        finals = group.groupby("seed").tail(1).set_index("seed")
        threshold = thresholds.get(env)
        crossings = threshold_crossings(group, threshold)
        n_reached = int(crossings["reached"].sum())
        everyone = threshold is not None and n_reached == len(finals)
        curricula = group.dropna(subset=["curriculum_length"]).groupby("seed")["curriculum_length"].last()
        rows.append(
            {
                "env": env,
                "algo": algo,
                "n_seeds": len(finals),
                "finals": finals["mean_return"].to_dict(),
                "final_mean": float(finals["mean_return"].mean()),
                "final_std": float(finals["mean_return"].std(ddof=0)),
                "best_mean": float(group.groupby("seed")["mean_return"].max().mean()),
                "fps": float(finals["fps"].mean()),
                "wall_time_s": float(finals["wall_time_s"].mean()),
                "threshold": math.nan if threshold is None else float(threshold),
                "n_reached": n_reached,
                "crossings": dict(zip(crossings["seed"], crossings["timesteps"], strict=True)),
                "steps_to_threshold": float(crossings["timesteps"].median()) if everyone else math.nan,
                "wall_to_threshold": float(crossings["wall_time_s"].median()) if everyone else math.nan,
                "curriculum_final": float(curricula.mean()) if len(curricula) else math.nan,
                "curriculum_min": float(curricula.min()) if len(curricula) else math.nan,
                "curriculum_max": float(curricula.max()) if len(curricula) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def _ordered(values: Iterable[str], order: Sequence[str] | None = None) -> list[str]:
    """:return: ``values`` in the order of ``order``, the others after it, sorted"""
    values = set(values)
    first = [value for value in dict.fromkeys(order or []) if value in values]
    return first + sorted(values - set(first))


def resolve_thresholds(
    envs: Sequence[str],
    overrides: Mapping[str, float] | None = None,
    run_metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, tuple[float | None, str]]:
    """:return: Per env its threshold and the source: ``override``, ``env spec`` (or recorded with the runs) or ``none``"""
    overrides = overrides or {}
    metas = (run_metadata or {}).values()
    recorded = {meta["env"]: float(meta["reward_threshold"]) for meta in metas if meta.get("reward_threshold") is not None}
    resolved: dict[str, tuple[float | None, str]] = {}
    for env in envs:
        threshold = float(overrides[env]) if env in overrides else recorded.get(env, harness._spec_reward_threshold(env))
        source = "override" if env in overrides else "none" if threshold is None else "env spec"
        resolved[env] = (threshold, source)
    return resolved


def _cpu_budgets(metas: Iterable[Mapping[str, Any]]) -> list[float]:
    """:return: The distinct CPU budgets (seconds of training) of runs or invocations, sorted"""
    return sorted({float(meta["cpu_budget"]) for meta in metas if meta.get("cpu_budget")})


def _invocation_row(invocation: Mapping[str, Any]) -> list[str]:
    """
    :param invocation: An entry of ``config.json``; in a curated folder its ``kept`` blocks say which of its runs the
        folder holds and under which name (``{"algo", "reported_as", "envs", "seeds"}``)
    :return: Its cells in the *Runs* table of ``results.md``
    """
    machine = invocation.get("machine") or {}
    asked = invocation.get("envs", [])
    blocks = invocation.get("kept") or [{"algo": algo, "envs": asked} for algo in invocation.get("algos", [])]
    algos = []
    for block in blocks:
        name = block["algo"]
        if block.get("reported_as", name) != name:
            name += f" as {block['reported_as']}"
        if set(block["envs"]) != set(asked):
            name += f" ({', '.join(block['envs'])})"
        algos.append(name)
    envs = _ordered({env for block in blocks for env in block["envs"]}, asked)
    seeds = sorted({seed for block in blocks for seed in block.get("seeds", invocation.get("seeds", []))})
    steps, eval_freq = invocation.get("steps"), invocation.get("eval_freq")
    budget, schedule = str(steps), [f"{eval_freq} steps"]
    if invocation.get("cpu_budget"):
        budget = f"{float(invocation['cpu_budget']):g} CPU-s of training"
        if steps is not None and int(steps) < TIME_BUDGET_STEP_CAP:
            budget += f", at most {format_steps(float(steps))} steps"
        if (eval_freq or 0) >= (steps or TIME_BUDGET_STEP_CAP):
            schedule = []  # no evaluation on the step grid before the step cap
        schedule.append(", ".join(f"{fraction:.0%}" for fraction in TIME_FRACTIONS if fraction < 1) + " of the budget")
    if invocation.get("eval_cpu_seconds") is not None:
        schedule.append(f"{invocation['eval_cpu_seconds']:g} CPU-s")
    if invocation.get("metric", "eval") == "train":
        episodes = "last 100 training episodes"
    else:
        episodes = f"{invocation.get('n_eval_episodes')} deterministic episodes"
    evaluation = f"every {' and '.join(schedule)}, {episodes}"
    if invocation.get("stop_at_threshold"):
        evaluation += ", stop at threshold"
    versions = [f"{name} {machine[name]}" for name in ("torch", "stable-baselines3", "rl_zoo3") if name in machine]
    return [
        f"`{invocation.get('command', 'unknown')}`",
        "; ".join(algos),
        ", ".join(envs),
        " ".join(map(str, seeds)),
        budget,
        evaluation,
        f"{machine.get('cpu', 'unknown')}; {machine.get('cores', '?')} cores",
        ", ".join([f"git {machine.get('git', 'unknown')}", *versions]),
        f"{invocation.get('started', '?')} - {invocation.get('finished') or 'not recorded'}",
    ]


#: The column of the interval of the mean over seeds (:func:`interval_of_mean`)
INTERVAL_HEADER = f"95% CI (bootstrap, {reporting.MIN_SEEDS_FOR_INTERVAL}+ seeds)"
#: What the column holds, for the reports' legends
INTERVAL_NOTE = (
    f"with a percentile bootstrap 95% interval of the mean ({reporting.BOOTSTRAP_REPS} resamples, "
    f"`scipy.stats.bootstrap`) only from {reporting.MIN_SEEDS_FOR_INTERVAL} seeds: an interval drawn from n seeds lies "
    "within their range, which covers the median of their distribution with probability 1 - 2^(1-n) (75% for 3 "
    f"seeds, {reporting.range_coverage(5):.0%} for 5); below that, read the per-seed values."
)
#: The columns of the tables of returns at marks of a clock (:func:`marks_rows`)
MARKS_HEADER = ["Algorithm", "At", "Seeds there", "Mean return", INTERVAL_HEADER, "Per seed", "Env steps"]


def value_at(run: pd.DataFrame, clock: str, mark: float) -> tuple[float, float] | None:
    """:return: ``(return, steps)`` of a run's first evaluation at or after ``mark`` on ``clock``; ``None`` if it has
    not got there (a run that ended before, e.g. stopped by its rule, has no value there)"""
    after = run[run[clock] >= mark].sort_values(clock)
    if not len(after):
        return None
    return float(after["mean_return"].iloc[0]), float(after["timesteps"].iloc[0])


def report_row(algo: str, at: str, per_seed: Sequence[float | None], steps: Sequence[float]) -> list[str]:
    """:return: A row of the report's table: the values of the seeds there (``None``: not there), their mean and
    interval (:func:`interval_of_mean`), and the mean of ``steps``"""
    values = [value for value in per_seed if value is not None]
    low, high = interval_of_mean(values)
    return [
        algo,
        at,
        f"{len(values)}/{len(per_seed)}",
        number(float(np.mean(values))) if values else "-",
        "-" if math.isnan(low) else f"[{number(low)}, {number(high)}]",
        " / ".join("-" if value is None else number(value) for value in per_seed),
        format_steps(float(np.mean(steps))) if len(steps) else "-",
    ]


def marks_rows(
    runs: pd.DataFrame, algo: str, clock: str, marks: Sequence[float], label: Callable[[float], str]
) -> list[list[str]]:
    """:return: One row per mark of :data:`MARKS_HEADER`'s table for the seeds of one algorithm (``runs``): each seed's
    first evaluation at or after the mark on ``clock`` (:func:`value_at`), their mean and bootstrap interval"""
    rows = []
    for mark in marks:
        found = [value_at(run, clock, mark) for _, run in runs.groupby("seed")]
        steps = [value[1] for value in found if value is not None]
        rows.append(report_row(algo, label(mark), [None if value is None else value[0] for value in found], steps))
    return rows


def _equal_cpu_time_lines(frame: pd.DataFrame, metas: Sequence[Mapping[str, Any]], algos: Sequence[str]) -> list[str]:
    """:return: The *Equal CPU time* table of one env's evaluations and run metadata: the return of each algorithm's
    CPU-budget runs at 25%, 50% and 100% of their budget (:func:`marks_rows`); nothing without such runs"""
    rows = []
    for algo in algos:
        algo_metas = [meta for meta in metas if meta.get("algo") == algo]
        for budget in _cpu_budgets(algo_metas):
            seeds = {meta.get("seed") for meta in algo_metas if meta.get("cpu_budget") == budget}
            runs = frame[(frame["algo"] == algo) & frame["seed"].isin(seeds)]
            marks = [fraction * budget for fraction in TIME_FRACTIONS]
            rows += marks_rows(runs, algo, "cpu_time_s", marks, lambda mark: f"{mark:g} CPU-s")
    return ["### Equal CPU time", "", *markdown_table(MARKS_HEADER, rows), ""] if rows else []


def _algo_order(name: str) -> tuple[bool, int, str]:
    """:return: Sort key of a benchmark name: this package's algorithms first, in :data:`ALGORITHMS` order, variants after"""
    base, variant = split_variant(name) if name.partition(VARIANT_SEPARATOR)[0] in ALGORITHMS else (name, name)
    spec = ALGORITHMS.get(base)
    return (spec is None or spec.zoo_hyperparams, list(ALGORITHMS).index(base) if spec else 0, variant or "")


def _algo_cells(algo: str, row: pd.Series, runs: Sequence[Mapping[str, Any]], threshold: float | None) -> list[str]:
    """:return: The cells of an algorithm's row in an env's table of ``results.md`` (``runs``: its run metadata)"""
    n_reached, n_seeds = int(row["n_reached"]), int(row["n_seeds"])
    step_budgets = sorted({int(meta["steps"]) for meta in runs if meta.get("steps") and not meta.get("cpu_budget")})
    budgets = [format_steps(steps) for steps in step_budgets] + [f"{budget:g} CPU-s" for budget in _cpu_budgets(runs)]
    to_threshold, reached = "-", "-"
    if threshold is not None:
        to_threshold = format_steps(row["steps_to_threshold"]) if n_reached == n_seeds else "n/a"
        reached = f"{n_reached}/{n_seeds}: {', '.join(map(format_steps, row['crossings'].values()))}"
    return [
        algo,
        str(n_seeds),
        ", ".join(budgets) or "?",
        ", ".join(sorted({meta.get("metric", "eval") for meta in runs})) or "?",
        f"{number(row['final_mean'])} ± {number(row['final_std'])}",
        " / ".join(number(value) for value in row["finals"].values()),
        number(row["best_mean"]),
        to_threshold,
        reached,
        "-" if math.isnan(row["fps"]) else f"{row['fps']:.0f}",
    ]


def write_summary(out_dir: str | Path, thresholds: Mapping[str, float] | None = None) -> Path:
    """
    Write ``out_dir/results.md`` (one table per env, then the invocations of ``config.json``) and ``out_dir/<env>.png``.

    :param out_dir: Output folder of a grid
    :param thresholds: Threshold overrides per env id; stored in ``config.json`` for later summaries, they take
        precedence over those stored with the invocations and over the envs' ``spec.reward_threshold``
    :return: Path of ``results.md``
    """
    out = Path(out_dir)
    frame = read_evaluations(out).sort_values(["env", "algo", "seed", "timesteps"], kind="stable")
    config = harness.read_json(out / harness.CONFIG_FILENAME, {"invocations": []})
    if thresholds:
        config["thresholds"] = {**config.get("thresholds", {}), **thresholds}
        write_atomically(out / harness.CONFIG_FILENAME, json.dumps(config, indent=2) + "\n")
    invocations = config.get("invocations", [])
    metadata = harness.read_json(out / harness.RUN_METADATA_FILENAME, {})
    overrides: dict[str, float] = {}
    for invocation in [*invocations, config]:
        overrides.update(invocation.get("thresholds") or {})
    envs = _ordered(frame["env"].unique(), [env for invocation in invocations for env in invocation.get("envs", [])])
    algos = sorted(frame["algo"].unique(), key=_algo_order)
    resolved = resolve_thresholds(envs, overrides, metadata)
    threshold_values = {env: value for env, (value, _) in resolved.items()}
    summary = summarize_results(frame, threshold_values)
    timed_envs = {meta["env"] for meta in metadata.values() if meta.get("cpu_budget") or meta.get("eval_cpu_seconds")}

    lines = [f"# Benchmark results: `{out.name}`", ""] + ([config["notes"], ""] if config.get("notes") else [])
    lines += [
        "Final: last evaluation (eval: deterministic episodes on a separate env; train: mean of the last 100 training "
        "episodes), mean ± std over seeds, then per seed. Best: mean over seeds of each seed's best evaluation. To "
        "threshold: first evaluation after step 0 reaching it, median over seeds (n/a unless every seed does). Reached: "
        "how many seeds did, and when, per seed. FPS: training steps per second (evaluation excluded), mean over seeds; it "
        "compares only runs made on the same machine. Curriculum (algorithmic tasks): the curriculum length at the last "
        "evaluation, mean [min, max] over seeds.",
        "",
    ]
    if _cpu_budgets(metadata.values()):
        lines += [
            "Equal CPU time (runs with a budget of process CPU time of training, env stepping included, evaluation "
            "excluded; Steps then gives it in CPU-s): at 25%, 50% and 100% of the budget, each seed's first evaluation at "
            "or after that much training CPU time (the runs are evaluated there; a seed that ended before, at its step "
            f"cap, shows -), their mean, {INTERVAL_NOTE} Env steps: mean over seeds at that evaluation.",
            "",
        ]
    for env in envs:
        threshold, source = resolved[env]
        lines += [f"## {env} ({f'threshold {threshold:g}, {source}' if threshold is not None else 'no reward threshold'})", ""]
        env_summary = summary[summary["env"] == env].set_index("algo")
        env_metas = [meta for meta in metadata.values() if meta.get("env") == env]
        with_curriculum = bool(env_summary["curriculum_final"].notna().any())
        rows = []
        for algo in [algo for algo in algos if algo in env_summary.index]:
            row, runs = env_summary.loc[algo], [meta for meta in env_metas if meta.get("algo") == algo]
            cells = _algo_cells(algo, row, runs, threshold)
            if with_curriculum:
                final, low, high = row["curriculum_final"], row["curriculum_min"], row["curriculum_max"]
                cells.append("-" if math.isnan(final) else f"{final:.1f} [{low:.0f}, {high:.0f}]")
            cells.append("; ".join(sorted({str(meta.get("hyperparams_source")) for meta in runs})) or "unknown")
            rows.append(cells)
        columns = ["Algorithm", "Seeds", "Steps", "Metric", "Final", "Final per seed", "Best", "To threshold", "Reached"]
        columns += ["FPS"] + ["Curriculum"] * with_curriculum + ["Hyperparameters"]
        lines += [*markdown_table(columns, rows), "", f"![{env}]({safe_name(env)}.png)", ""]
        lines += _equal_cpu_time_lines(frame[frame["env"] == env], env_metas, algos)
        if env in timed_envs:
            lines += [f"![{env} against training seconds]({safe_name(env)}{SECONDS_PLOT_SUFFIX}.png)", ""]

    errors = sorted((out / RUNS_DIRNAME).glob("*.err"))
    if errors:
        lines += ["## Failed runs", ""]
        for path in errors:
            last = [line for line in path.read_text().splitlines() if line.strip()][-1:] or ["unknown error"]
            lines.append(f"- `{path.stem}`: {last[0]} (`{RUNS_DIRNAME}/{path.name}`)")
        lines.append("")
    header = ["Command", "Algorithms", "Envs", "Seeds", "Steps", "Evaluation", "Machine", "Software", "Date (UTC)"]
    lines += ["## Runs", "", *markdown_table(header, [_invocation_row(invocation) for invocation in invocations]), ""]
    plot_learning_curves(frame, out, threshold_values, metadata, algos)
    if timed_envs:
        plot_learning_curves(frame[frame["env"].isin(timed_envs)], out, threshold_values, metadata, algos, seconds=True)
    write_atomically(out / harness.SUMMARY_FILENAME, "\n".join(lines))
    return out / harness.SUMMARY_FILENAME


def plot_learning_curves(
    frame: pd.DataFrame,
    out_dir: str | Path,
    thresholds: Mapping[str, float | None],
    run_metadata: Mapping[str, Mapping[str, Any]] | None = None,
    algo_order: Sequence[str] | None = None,
    seconds: bool = False,
) -> list[Path]:
    """
    Write ``out_dir/<env>.png`` per env: per algorithm the mean over seeds with a min-max band, the threshold dashed.
    Each record is placed on the multiple of its run's ``eval_freq`` it was taken for, so that seeds line up, and a run
    stopped at the threshold keeps its last value; the x axis is logarithmic when the budgets differ more than tenfold.
    With ``seconds``, write ``out_dir/<env>_seconds.png`` instead: the return against CPU seconds of training
    (:func:`draw_on_clock`), CPU budgets dotted.

    :return: Paths of the written files
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metas = list((run_metadata or {}).values())
    freqs = {  # the runs evaluated at time marks too have records off the step grid
        (meta["algo"], meta["env"]): int(meta["eval_freq"])
        for meta in metas
        if meta.get("eval_freq") and not (meta.get("cpu_budget") or meta.get("eval_cpu_seconds"))
    }
    paths = []
    for env, env_frame in frame.groupby("env", sort=True):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        env_metas = [meta for meta in metas if meta.get("env") == env]
        ends = []
        for algo in _ordered(env_frame["algo"].unique(), algo_order):
            runs = env_frame[env_frame["algo"] == algo]
            if seconds:
                draw_on_clock(ax, runs, "cpu_time_s", algo)
            else:
                ends.append(_draw_on_steps(ax, runs, freqs.get((algo, str(env))), algo))
        for budget in _cpu_budgets(env_metas) if seconds else []:
            ax.axvline(budget, color="gray", linestyle=":", linewidth=1)
        threshold = thresholds.get(str(env))
        if threshold is not None:
            ax.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        if ends and max(ends) > 10 * max(min(ends), 1):  # budgets far apart: log scale (step 0 is not shown)
            ax.set_xscale("log")
            ax.set_xlim(left=min(freqs.get((algo, str(env)), 1) for algo in env_frame["algo"].unique()))
        metrics = {meta.get("metric", "eval") for meta in env_metas}
        xlabel = "training CPU seconds (evaluation excluded)" if seconds else "env steps"
        path = Path(out_dir) / f"{safe_name(str(env))}{SECONDS_PLOT_SUFFIX if seconds else ''}.png"
        paths.append(save_plot(fig, ax, str(env), xlabel, metrics, path))
    return paths


def _draw_on_steps(ax: Any, runs: pd.DataFrame, grid: int | None, algo: str) -> int:
    """Draw the runs of one algorithm against env steps (on the multiples of ``grid``, their ``eval_freq``, when
    given); :return: the last step drawn"""
    if grid:
        per_seed = runs.assign(timesteps=runs["timesteps"] // grid * grid)
        per_seed = per_seed.groupby(["timesteps", "seed"])["mean_return"].last().unstack("seed")
        per_seed = per_seed.reindex(range(0, int(per_seed.index.max()) + 1, grid)).ffill()
    else:
        per_seed = runs.groupby(["timesteps", "seed"])["mean_return"].last().unstack("seed").ffill()
    mean = per_seed.mean(axis=1)
    label, marker = f"{algo} ({runs['seed'].nunique()} seeds)", "." if len(mean) < 30 else None
    (line,) = ax.plot(mean.index, mean, label=label, marker=marker)
    ax.fill_between(mean.index, per_seed.min(axis=1), per_seed.max(axis=1), color=line.get_color(), alpha=0.2, linewidth=0)
    return int(mean.index.max())


def save_plot(fig: Any, ax: Any, env: str, xlabel: str, metrics: set[str], path: Path) -> Path:
    """Title, labels, grid and legend of a learning-curve plot, then write it to ``path`` and close it."""
    import matplotlib.pyplot as plt

    ax.set_title(env)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{'training' if metrics == {'train'} else 'evaluation'} return\n(mean over seeds, min-max band)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw_on_clock(ax: Any, runs: pd.DataFrame, clock: str, algo: str, seeds: bool = False) -> None:
    """Draw the runs of one algorithm on ``clock`` (a column): the mean over seeds of each seed's last evaluation so
    far (none before its first, kept after its last), with a min-max band, and with ``seeds`` each seed's own curve."""
    timed = runs.dropna(subset=[clock])
    times = np.unique(timed[clock].to_numpy(dtype=float))
    curves = []
    for _, run in timed.groupby("seed"):
        run = run.sort_values(clock)
        index = np.searchsorted(run[clock].to_numpy(dtype=float), times, side="right") - 1
        curves.append(np.where(index >= 0, run["mean_return"].to_numpy(dtype=float)[np.maximum(index, 0)], np.nan))
    stacked = np.vstack(curves) if curves else np.empty((0, len(times)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns before every seed's first evaluation
        mean, low, high = np.nanmean(stacked, 0), np.nanmin(stacked, 0), np.nanmax(stacked, 0)
    (line,) = ax.plot(times, mean, drawstyle="steps-post", label=f"{algo} ({runs['seed'].nunique()} seeds)")
    ax.fill_between(times, low, high, step="post", color=line.get_color(), alpha=0.2, linewidth=0)
    if seeds and len(stacked) > 1:
        for curve in stacked:
            ax.plot(times, curve, drawstyle="steps-post", color=line.get_color(), linewidth=0.7, alpha=0.6)
