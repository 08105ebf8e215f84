"""
PCL's constructor defaults on CartPole-v1, built as the README builds them: ``PCL("MlpPolicy", "CartPole-v1", seed=s)``
(one env), ``learn(100_000)``, then a deterministic evaluation of 10 episodes on each of three differently seeded
eval envs (30 episodes). A candidate is a set of constructor arguments given explicitly (the defaults it would become);
``current`` spells out the defaults the study started from.

    python -m benchmarks.experiments.defaults_study run --candidate lin3e-3 --threads 1 --seeds 0 1 2 3 4 5 6 7 8 9
    python -m benchmarks.experiments.defaults_study report

``run`` appends one row per seed to ``benchmarks/results/defaults_study/runs.csv`` (each run's CPU time, the machine,
the date) and stops a candidate's thread setting once ``--max-failures`` seeds fall below the bar (it can no longer
pass), or when the CPU budget of the whole study (``--budget-cpu-min``, summed over the file) is spent. ``report``
writes ``results.md`` from the file. The rule that chooses among the candidates: ``NOTES.md`` in that folder.
"""

import argparse
import csv
import datetime
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "results" / "defaults_study"
RUNS = RESULTS / "runs.csv"
BAR = 475.0
STEPS = 100_000
#: the eval envs' seeds for training seed s: three envs, 10 episodes each
EVAL_SEEDS = (10_000, 20_000, 30_000)
EVAL_EPISODES = 10
FIELDS = ["candidate", "threads", "torch_threads", "seed", "eval_1", "eval_2", "eval_3", "mean", "passed", "cpu_s"]
FIELDS += ["wall_s", "cpu_model", "git", "date"]


def candidates() -> dict[str, dict[str, Any]]:
    """:return: the candidates' constructor arguments, by name (the order of NOTES.md)"""
    from stable_baselines3.common.utils import LinearSchedule

    return {
        "current": {"learning_rate": 3e-3, "train_freq": 32},  # the defaults before this study, spelt out
        "lin3e-3": {"learning_rate": LinearSchedule(3e-3, 0.0, 1.0)},
        "lin3e-3_3e-4": {"learning_rate": LinearSchedule(3e-3, 3e-4, 1.0)},
        "const1e-3": {"learning_rate": 1e-3},
    }


def cpu_model() -> str:
    """:return: the CPU's model name (``/proc/cpuinfo``), else the platform's processor"""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def git_revision() -> str:
    """:return: the checkout's short revision, ``+dirty`` when it has changes"""
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return run.stdout.strip() or "unknown"


def read_runs() -> list[dict[str, str]]:
    """:return: the rows of ``runs.csv`` (none before the first run)"""
    if not RUNS.is_file():
        return []
    with RUNS.open(newline="") as file:
        return list(csv.DictReader(file))


def spent_cpu_minutes() -> float:
    """:return: the CPU minutes of every run recorded so far"""
    return sum(float(row["cpu_s"]) for row in read_runs()) / 60


def train_and_evaluate(candidate: str, seed: int) -> tuple[list[float], float, float]:
    """
    :param candidate: a key of :func:`candidates`
    :param seed: the training seed
    :return: the three eval envs' mean returns, the run's CPU seconds and its wall-clock seconds
    """
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    from sb3_pcl import PCL

    cpu, wall = time.process_time(), time.perf_counter()
    model = PCL("MlpPolicy", "CartPole-v1", seed=seed, **candidates()[candidate])
    model.learn(STEPS)
    returns = []
    for eval_seed in EVAL_SEEDS:
        env = make_vec_env("CartPole-v1", n_envs=1, seed=eval_seed + seed)
        mean, _ = evaluate_policy(model, env, n_eval_episodes=EVAL_EPISODES, deterministic=True)
        returns.append(float(mean))
    return returns, time.process_time() - cpu, time.perf_counter() - wall


def run(args: argparse.Namespace) -> None:
    import torch as th

    if args.candidate not in candidates():
        raise SystemExit(f"unknown candidate {args.candidate!r}: one of {sorted(candidates())}")
    if args.threads != "default":
        th.set_num_threads(int(args.threads))
    RESULTS.mkdir(parents=True, exist_ok=True)
    failures = sum(
        row["passed"] == "False" for row in read_runs() if (row["candidate"], row["threads"]) == (args.candidate, args.threads)
    )
    for seed in args.seeds:
        key = (args.candidate, args.threads, str(seed))
        if any((row["candidate"], row["threads"], row["seed"]) == key for row in read_runs()):
            continue
        if failures >= args.max_failures:
            print(f"{args.candidate} @ {args.threads} threads: {failures} seeds below {BAR}: cannot pass, stopped")
            return
        if spent_cpu_minutes() >= args.budget_cpu_min:
            print(f"the study's budget of {args.budget_cpu_min} CPU-minutes is spent: stopped")
            return
        returns, cpu_s, wall_s = train_and_evaluate(args.candidate, seed)
        mean = float(np.mean(returns))
        failures += mean < BAR
        row = {
            "candidate": args.candidate,
            "threads": args.threads,
            "torch_threads": th.get_num_threads(),
            "seed": seed,
            **{f"eval_{i + 1}": f"{value:.1f}" for i, value in enumerate(returns)},
            "mean": f"{mean:.1f}",
            "passed": mean >= BAR,
            "cpu_s": f"{cpu_s:.1f}",
            "wall_s": f"{wall_s:.1f}",
            "cpu_model": cpu_model(),
            "git": git_revision(),
            "date": datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        }
        new = not RUNS.is_file()
        with RUNS.open("a", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=FIELDS)
            if new:
                writer.writeheader()
            writer.writerow(row)
        print(", ".join(f"{key}={value}" for key, value in row.items()), flush=True)


def report(_: argparse.Namespace) -> str:
    """Write ``results.md`` from ``runs.csv``; :return: its text"""
    rows = read_runs()
    lines = [
        "# PCL's defaults on CartPole-v1: the README's construction at 100k steps",
        "",
        f'`PCL("MlpPolicy", "CartPole-v1", seed=s, **candidate).learn({STEPS:_})`, then `evaluate_policy` with deterministic',
        f"actions, {EVAL_EPISODES} episodes on each of three eval envs seeded {' / '.join(f'{e} + s' for e in EVAL_SEEDS)}. "
        f"Passed: the mean of the 30 episodes >= {BAR:g}. The rule: [NOTES.md](NOTES.md).",
        "Written by `python -m benchmarks.experiments.defaults_study report` from `runs.csv`; the runs: "
        "`python -m benchmarks.experiments.defaults_study run --candidate NAME --threads T --seeds 0 1 2 3 4 5 6 7 8 9`.",
        "",
        "| Candidate | Threads | Seeds run | Passed | Mean of 30 episodes, per seed (seed: value) | CPU s per run (median) |",
        "|---|---|---|---|---|---|",
    ]
    keys = list(dict.fromkeys((row["candidate"], row["threads"]) for row in rows))
    for candidate, threads in keys:
        group = [row for row in rows if (row["candidate"], row["threads"]) == (candidate, threads)]
        passed = sum(row["passed"] == "True" for row in group)
        torch_threads = group[0]["torch_threads"]
        label = f"{threads} ({torch_threads})" if threads == "default" else threads
        values = ", ".join(f"{row['seed']}: {row['mean']}" for row in group)
        cpu = float(np.median([float(row["cpu_s"]) for row in group]))
        lines.append(f"| `{candidate}` | {label} | {len(group)} | {passed}/{len(group)} | {values} | {cpu:.0f} |")
    spent = sum(float(row["cpu_s"]) for row in rows) / 60
    machines = sorted({row["cpu_model"] for row in rows})
    dates = sorted(row["date"] for row in rows)
    lines += [
        "",
        f"Threads: `default` is torch's own choice (in parentheses); 1 is `torch.set_num_threads(1)`. CPU time in all: "
        f"{spent:.1f} min. Machine: {', '.join(machines)} (2 cores shared with other jobs). "
        f"Runs from {dates[0][:16]} to {dates[-1][:16]} UTC."
        if rows
        else "No runs yet.",
        "",
    ]
    text = "\n".join(lines)
    (RESULTS / "results.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.experiments.defaults_study", description=__doc__.strip().splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train and evaluate seeds of one candidate")
    run_parser.add_argument("--candidate", required=True)
    run_parser.add_argument("--threads", default="default", help="'default' (torch's choice) or a number")
    run_parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    run_parser.add_argument("--max-failures", type=int, default=2, help="seeds below the bar that end the candidate")
    run_parser.add_argument("--budget-cpu-min", type=float, default=60.0, help="CPU minutes of the whole study")
    commands.add_parser("report", help="write results.md from runs.csv")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "run":
        run(args)
    else:
        print(report(args))


if __name__ == "__main__":
    main()
