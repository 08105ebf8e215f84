"""
Bounded memory and constant add cost of the path replay once it is full.

Each run adds one-env transitions (4 float32 observations, 2 discrete actions) to a
:class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` for ``--multiple`` times its size in a fresh process, sampling the
process's resident memory (RSS) and timing the adds per CPU second. Scenarios: ``episodes`` (of ``--episode-length``
steps), ``one_step`` (the most evictions), ``never`` (one episode longer than the buffer) and ``sb3`` (SB3's
``ReplayBuffer``, the reference cost). The RSS must stay flat once full, and the adds/s must not fall with the size.

    python -m benchmarks.experiments.buffer_memory                       # the default run (under 2 minutes on 2 cores)
    python -m benchmarks.experiments.buffer_memory --sizes 10000 100000 --scenarios never one_step --multiple 5

Writes ``results.md`` and ``buffer_memory.png`` to ``--out``; ``--json FILE`` also saves the raw numbers, and
``--baseline FILE`` reports such a file (e.g. from an older commit) alongside, as a second table and dashed lines.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.reporting import markdown_table, saved_figure

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "replay"
SCENARIOS = ("episodes", "never", "one_step", "sb3")
OBS_DIM = 4
#: RSS samples per run, and timed chunks of adds once the buffer is full
N_SAMPLES, N_CHUNKS = 16, 20


def rss_mib() -> float:
    """:return: this process's resident memory in MiB (``/proc/self/statm``; the peak where it is missing)"""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def run_one(scenario: str, size: int, multiple: int, episode_length: int) -> dict[str, Any]:
    """
    Add ``multiple * size`` transitions in this process.

    :return: the RSS samples ``(adds, MiB)``, the RSS before the first add, the adds per CPU second of this process
        while filling and once full (the median over :data:`N_CHUNKS` chunks), and the transitions stored at the end
    """
    from gymnasium import spaces

    observation_space, action_space = spaces.Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float32), spaces.Discrete(2)
    if scenario == "sb3":  # each imports only its own buffer: the RSS is the run's own
        from stable_baselines3.common.buffers import ReplayBuffer

        buffer: Any = ReplayBuffer(size, observation_space, action_space, device="cpu")
    else:
        from sb3_pcl.common.path_buffer import PathReplayBuffer

        buffer = PathReplayBuffer(size, observation_space, action_space, device="cpu")
    rng = np.random.default_rng(0)
    observations = rng.normal(size=(1024, 1, OBS_DIM)).astype(np.float32)
    actions, rewards = rng.integers(0, 2, size=(1024, 1, 1)), rng.normal(size=(1024, 1))
    ends = {"episodes": episode_length, "sb3": episode_length, "one_step": 1, "never": 0}[scenario]
    done, not_done = np.ones(1, dtype=bool), np.zeros(1, dtype=bool)
    total = multiple * size
    checkpoints = set(np.linspace(0, total, N_SAMPLES + 1).astype(int).tolist()) | {size}
    marks = set(range(size, total, max(1, (total - size) // N_CHUNKS)))  # timing marks once full
    samples, times = [], []
    rss_before, start = rss_mib(), time.process_time()
    for i in range(total):
        if i in checkpoints:
            samples.append((i, rss_mib()))
        if i in marks:
            times.append((i, time.process_time()))
        j = i % 1024
        ended = done if ends and (i + 1) % ends == 0 else not_done
        buffer.add(observations[j], observations[j - 1], actions[j], rewards[j], ended, [{}])
    times.append((total, time.process_time()))
    samples.append((total, rss_mib()))
    return {
        "scenario": scenario,
        "buffer_size": size,
        "adds": total,
        "rss_before_mib": rss_before,
        "rss_samples": samples,
        "adds_per_s_filling": size / (times[0][1] - start),
        "adds_per_s_full": float(np.median([(b[0] - a[0]) / (b[1] - a[1]) for a, b in itertools.pairwise(times)])),
        "stored_at_end": int(buffer.size()),
    }


def run_in_subprocess(scenario: str, size: int, multiple: int, episode_length: int) -> dict[str, Any]:
    """:return: :func:`run_one` in a fresh Python process (its memory is the run's own), importing this checkout"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "benchmarks.experiments.buffer_memory", "--worker", scenario, str(size), str(multiple)]
    command += ["--episode-length", str(episode_length)]
    output = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """:return: the row of the table for a run: RSS once full and at the end, its growth, adds per second"""
    full = [mib for adds, mib in run["rss_samples"] if adds >= run["buffer_size"]]
    last_third = [mib for adds, mib in run["rss_samples"] if adds >= 2 * run["adds"] / 3]
    return {
        **{key: run[key] for key in ("scenario", "buffer_size", "adds", "adds_per_s_filling", "adds_per_s_full")},
        "rss_full_mib": full[0],
        "rss_end_mib": full[-1],
        "rss_max_growth_mib": max(full) - full[0],
        "rss_last_third_mib": max(last_third) - last_third[0],
    }


def by_scenario(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """:return: per scenario, the summaries of its runs by buffer size"""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in map(summarize, runs):
        groups.setdefault(row["scenario"], []).append(row)
    return {scenario: sorted(rows, key=lambda row: row["buffer_size"]) for scenario, rows in groups.items()}


def report_lines(runs: list[dict[str, Any]]) -> list[str]:
    """:return: the table of the runs, then per scenario its RSS growth and the adds/s of its largest buffer / smallest"""
    header = ["scenario", "buffer size", "adds", "adds/s filling", "adds/s full", "RSS when full (MiB)"]
    header += ["RSS at the end (MiB)", "RSS growth after full (MiB)", "RSS growth, last third (MiB)"]
    rows = [
        [r["scenario"], f"{r['buffer_size']:,}", f"{r['adds']:,}", f"{r['adds_per_s_filling']:,.0f}",
         f"{r['adds_per_s_full']:,.0f}", f"{r['rss_full_mib']:.1f}", f"{r['rss_end_mib']:.1f}",
         f"{r['rss_max_growth_mib']:+.1f}", f"{r['rss_last_third_mib']:+.1f}"]
        for r in map(summarize, runs)
    ]  # fmt: skip
    lines = [*markdown_table(header, rows), ""]
    for scenario, group in by_scenario(runs).items():
        growth, last = max(r["rss_max_growth_mib"] for r in group), max(r["rss_last_third_mib"] for r in group)
        lines.append(
            f"- `{scenario}`: RSS grows by at most {growth:.1f} MiB once the buffer is full, {last:.1f} MiB in the last "
            f"third of the run; adds/s of the {group[-1]['buffer_size']:,} buffer / the {group[0]['buffer_size']:,} "
            f"one: {group[-1]['adds_per_s_full'] / group[0]['adds_per_s_full']:.2f}"
        )
    return lines


def plot(runs: list[dict[str, Any]], baseline: list[dict[str, Any]], baseline_label: str, path: Path) -> None:
    """Write the RSS curves (left) and the adds/s once full against the buffer size (right) to ``path``."""
    with saved_figure(path, 1, 2, dpi=110, figsize=(13, 5)) as (_, (left, right)):
        colors: dict[str, Any] = {}
        for label, group, style in (("", runs, "-"), (baseline_label, baseline, "--")):
            for run in group:
                adds, mib = np.array(run["rss_samples"], dtype=float).T
                key = f"{run['scenario']} {run['buffer_size']:,}"
                line = left.plot(adds / run["buffer_size"], mib, style, color=colors.get(key), marker=".")[0]
                colors.setdefault(key, line.get_color())
                if not label:
                    line.set_label(key)
            for scenario, rows in by_scenario(group).items():
                sizes, speeds = [r["buffer_size"] for r in rows], [r["adds_per_s_full"] for r in rows]
                name = f"{scenario} ({label})" if label else scenario
                line = right.plot(sizes, speeds, style, marker="o", label=name, color=colors.get(scenario))[0]
                colors.setdefault(scenario, line.get_color())
        left.axvline(1.0, color="grey", linewidth=0.8)
        left.set(xlabel="transitions added / buffer size", ylabel="RSS (MiB)", title="Resident memory (dashed: baseline)")
        right.set(xscale="log", yscale="log", xlabel="buffer size", ylabel="adds/s once full", title="Cost of an add")
        for axis in (left, right):
            axis.legend(fontsize=7)


def write_report(result: dict[str, Any], baseline: dict[str, Any] | None, out: Path) -> None:
    """Write ``results.md`` and ``buffer_memory.png`` from the runs of ``result`` (and ``baseline``)."""
    lines = [
        "# Replay buffer: memory and add cost once full",
        "",
        "Each run adds one-env transitions (4 float32 observations, 2 discrete actions) for several times the buffer "
        f"size in a fresh process. `episodes`: episodes of {result['episode_length']} steps; `one_step`: episodes of "
        "one step; `never`: one episode that never ends (longer than the buffer); `sb3`: SB3's `ReplayBuffer`, "
        "episodes of the same length, for reference.",
        "",
        "adds/s: adds per second of the process's CPU time (other processes on the machine do not count), while "
        f"filling and once the buffer is full (the median over {N_CHUNKS} timed chunks of adds). RSS: the process's "
        "resident memory (about 245 MiB of it is the imported libraries, PyTorch included). RSS growth after full: "
        "its largest rise over its value when the buffer first became full; last third: the same over the last third "
        "of the run, once the bookkeeping of the paths has reached its working size.",
        "",
        f"- Command: `{result['command']}`",
        f"- Machine: {result['machine']}",
        f"- Date: {result['date']}",
        "",
        *report_lines(result["runs"]),
    ]
    if baseline:
        lines += ["", f"## Baseline: git {baseline['git']} ({baseline['date']})", ""]
        lines += [f"- Command: `{baseline['command']}`", f"- Machine: {baseline['machine']}", ""]
        lines += report_lines(baseline["runs"])
    lines += ["", "![RSS and adds/s](buffer_memory.png)", ""]
    (out / "results.md").write_text("\n".join(lines))
    label = f"baseline, git {baseline['git']}" if baseline else ""
    plot(result["runs"], baseline["runs"] if baseline else [], label, out / "buffer_memory.png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000], help="buffer sizes")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=["episodes", "never", "sb3"])
    parser.add_argument("--multiple", type=int, default=3, help="add this many times the buffer size (default 3)")
    parser.add_argument("--episode-length", type=int, default=200, help="episode length of `episodes` and `sb3`")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--json", type=Path, help="also write the raw numbers to this file")
    parser.add_argument("--baseline", type=Path, help="the --json file of another invocation, reported alongside")
    parser.add_argument("--worker", nargs=3, metavar=("SCENARIO", "SIZE", "MULTIPLE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.multiple < 2:
        parser.error("--multiple must be >= 2 (the buffer is full after the first)")
    if args.worker:
        scenario, size, multiple = args.worker
        print(json.dumps(run_one(scenario, int(size), int(multiple), args.episode_length)))
        return 0
    from benchmarks.harness import machine_info, now

    info = machine_info()
    result: dict[str, Any] = {
        "command": shlex.join(
            ["python", "-m", "benchmarks.experiments.buffer_memory", *(sys.argv[1:] if argv is None else argv)]
        ),
        "machine": f"{info['cpu']}, {info['cores']} cores, {info['platform']}, Python {info['python']}, "
        f"NumPy {info['numpy']}, git {info['git']}",
        "git": info["git"],
        "date": now(),
        "episode_length": args.episode_length,
        "runs": [],
    }
    for scenario in args.scenarios:
        for size in args.sizes:
            result["runs"].append(run_in_subprocess(scenario, size, args.multiple, args.episode_length))
            row = summarize(result["runs"][-1])
            print(f"{scenario:>9} {size:>9,}: {row['adds_per_s_full']:>9,.0f} adds/s full, RSS {row['rss_full_mib']:.1f} -> "
                  f"{row['rss_end_mib']:.1f} MiB", flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    write_report(result, json.loads(args.baseline.read_text()) if args.baseline else None, args.out)
    print(f"wrote {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
