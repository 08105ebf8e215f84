"""
The grid command: train every algorithm x env x seed with a step or CPU-time budget into one folder, then write its
``results.md`` and plots (benchmarks/README.md has the options and examples; ``--summary-only`` rebuilds them).

A grid is a campaign given on the command line: its runs are stored and resumed as :mod:`benchmarks.campaign`'s are.
A folder holding committed files or an earlier invocation's results is refused without ``--force``
(``--skip-existing`` resumes an uncommitted one).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks import backends, campaign, store
from benchmarks.algorithms import ALGORITHMS, get_algorithm_class, split_variant, variant_overrides_path
from benchmarks.checkpoint import CHECKPOINT_DIR_ENV, default_checkpoint_root
from benchmarks.harness import RUNS_DIRNAME, TIME_BUDGET_STEP_CAP, VEC_ENV_TYPES, RunTask, _task_options, run_checkpoint_dir
from benchmarks.summary import write_summary

logger = logging.getLogger(__name__)


def parse_thresholds(items: Sequence[str]) -> dict[str, float]:
    """
    :param items: ``ENV=VALUE`` strings (the env id may itself contain ``=``; the last one separates the value)
    :return: Threshold per env id
    :raises ValueError: on a malformed item
    """
    thresholds: dict[str, float] = {}
    for item in items:
        env, separator, value = item.rpartition("=")
        if not separator or not env:
            raise ValueError(f"--threshold expects ENV=VALUE, got {item!r}")
        try:
            thresholds[env] = float(value)
        except ValueError:
            raise ValueError(f"--threshold {item!r}: {value!r} is not a number") from None
    return thresholds


#: files whose presence marks a folder as holding results of the harness
RESULT_FILES = ("evaluations.csv", "results.md", "config.json")


def git_tracked_files(folder: str | Path) -> list[str]:
    """
    :param folder: An existing folder
    :return: The files under ``folder`` that git tracks (empty outside a git work tree or without git)
    """
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", "."], cwd=folder, capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return listed.stdout.split() if listed.returncode == 0 else []


def refusal_to_write(out: str | Path, skip_existing: bool) -> str | None:
    """
    Say why a grid must not write into ``out`` without ``--force``: committed files there (even when resuming), or the
    results of an earlier invocation (unless resuming with ``--skip-existing``).

    :param out: The ``--out`` folder
    :param skip_existing: Whether ``--skip-existing`` was given
    :return: The reason, or None when writing there is safe
    """
    folder = Path(out)
    if not folder.is_dir():
        return None
    tracked = git_tracked_files(folder)
    if tracked:
        return (
            f"--out {out} holds {len(tracked)} file(s) tracked by git (e.g. {tracked[0]}): a run would rewrite the "
            "committed results there; write to a new folder (e.g. --out runs/NAME) or give --force"
        )
    found = [name for name in RESULT_FILES if (folder / name).exists()]
    if found and not skip_existing:
        return (
            f"--out {out} already holds results ({', '.join(found)}): write to a new folder, add runs to it with "
            "--skip-existing, or give --force to overwrite"
        )
    return None


def run_grid(
    algos: Sequence[str],
    envs: Sequence[str],
    seeds: Sequence[int],
    out_dir: str | Path = "benchmarks/runs/latest",
    workers: int | None = None,
    skip_existing: bool = False,
    thresholds: Mapping[str, float] | None = None,
    command: str | None = None,
    fresh_process_per_run: bool = False,
    backend: str = "local",
    address: str | None = None,
    checkpoint_root: str | Path | None = None,
    **settings: Any,
) -> pd.DataFrame:
    """
    Run every (algo, env, seed) as a campaign given on the command line (:func:`benchmarks.campaign.run_campaign`),
    then write ``results.md`` and the plots (:func:`benchmarks.summary.write_summary`).

    :param workers: Local worker processes, or CPUs of a new local Ray instance (default: ``os.cpu_count()``)
    :param skip_existing: Skip the runs already finished in ``out_dir`` (else run every run again)
    :param backend: ``local`` (a pool of processes) or ``ray`` (one Ray task of one CPU per run)
    :param address: With ``ray``: ``auto`` or ``HOST:PORT`` of a running cluster's head (default: a new local instance)
    :param checkpoint_root: Give every run checkpoints under this folder (:func:`benchmarks.harness.run_checkpoint_dir`)
    :param settings: The run options of :class:`benchmarks.harness.RunTask` (``steps`` and ``eval_freq`` required)
    :return: All evaluations in ``out_dir``
    :raises ValueError: for bad settings, before anything is written
    """
    backends.check_backend(backend, address)
    if backend == "ray" and settings.get("device", "cpu") != "cpu":
        raise ValueError(f"--backend ray gives each run one CPU and no GPU: --device must be cpu, not {settings['device']!r}")
    algos, envs, seeds = list(algos), list(envs), [int(seed) for seed in seeds]
    if not algos or not envs or not seeds:
        raise ValueError("algos, envs and seeds must not be empty")
    for name, values in (("algos", algos), ("envs", envs), ("seeds", seeds)):
        if len(set(values)) != len(values):
            raise ValueError(f"duplicate entries in {name}: {values}")
    out = Path(out_dir)
    settings["env_packages"] = tuple(settings.get("env_packages", ()))
    if settings.get("hyperparams_dir") is not None:
        settings["hyperparams_dir"] = str(settings["hyperparams_dir"])
    template = RunTask("", "", 0, out_dir=str(out), **settings)  # checks the settings
    for algo in algos:  # fail fast, not once per run
        get_algorithm_class(algo)
        if split_variant(algo)[1] is not None:
            variant_overrides_path(algo, template.hyperparams_dir)
    thresholds = dict(thresholds or {})
    tasks = []
    for env, algo, seed in itertools.product(envs, algos, seeds):
        run: dict[str, Any] = {"algo": algo, "env": env, "seed": seed, "threshold": thresholds.get(env)}
        if checkpoint_root is not None:
            run["checkpoint_dir"] = run_checkpoint_dir(checkpoint_root, out, algo, env, seed)
        tasks.append(dataclasses.replace(template, **run))
    per_run = ("algo", "env", "seed", "out_dir", "threshold")
    options = {key: value for key, value in _task_options(template).items() if key not in per_run}
    recorded = {
        "algos": algos,
        "envs": envs,
        "seeds": seeds,
        **options,
        "skip_existing": skip_existing,
        "thresholds": thresholds,
    }
    results = campaign.run_campaign(
        campaign.Campaign(out, out, tuple(tasks)),
        workers or os.cpu_count() or 1,
        backend,
        address,
        command,
        recorded,
        skip_done=skip_existing,
        fresh_process_per_run=fresh_process_per_run,
        report=lambda _: write_summary(out, thresholds),
    )
    failed = sorted(result["name"] for result in results if not result["ok"])
    if failed:
        logger.warning("%d run(s) failed: %s (tracebacks in %s)", len(failed), ", ".join(failed), out / RUNS_DIRNAME)
    return store.read_evaluations(out)


def build_parser() -> argparse.ArgumentParser:
    """:return: The argument parser of ``python -m benchmarks.run`` (benchmarks/README.md explains the options)"""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Benchmark RL algorithms on a grid algo x env x seed with a step budget and periodic evaluation.",
    )
    add = parser.add_argument
    add("--algos", nargs="+", default=[], help=f"among {', '.join(ALGORITHMS)}, or variants <algo>+<name>")
    add("--envs", nargs="+", default=[], help="Gymnasium env ids")
    add("--seeds", nargs="+", type=int, default=[0, 1, 2], help="random seeds (default: 0 1 2)")
    add("--steps", type=int, default=None, help="env steps per run (with --cpu-budget: an optional cap)")
    add("--cpu-budget", type=float, default=None, metavar="SECONDS", help="training CPU seconds per run")
    add("--eval-cpu-seconds", type=float, default=None, metavar="S", help="also evaluate every S training CPU seconds")
    add("--checkpoint-every", type=float, default=None, metavar="S", help="checkpoint each run every S CPU seconds")
    add("--checkpoint-dir", default=None, metavar="DIR", help=f"checkpoint folder (default: ${CHECKPOINT_DIR_ENV})")
    add("--eval-freq", type=int, default=None, help="evaluation interval in env steps (default: steps // 20)")
    add("--eval-episodes", type=int, default=10, help="deterministic episodes per evaluation (default: 10)")
    add("--metric", choices=("eval", "train"), default="eval", help="evaluation episodes (eval) or last 100 training episodes")
    add("--stop-at-threshold", action="store_true", help="end each run when it reaches the reward threshold")
    add("--no-initial-eval", action="store_true", help="do not evaluate the untrained policy at step 0")
    add("--workers", type=int, default=None, help="worker processes, or CPUs of a local Ray (default: all cores)")
    add("--backend", choices=backends.BACKENDS, default="local", help="local processes (default) or ray tasks")
    add("--address", default=None, help="with --backend ray: HOST:PORT of the cluster's head, or auto")
    add("--out", default="benchmarks/runs/latest", help="output folder (default: benchmarks/runs/latest)")
    add("--device", default="cpu", help="PyTorch device of the models (default: cpu)")
    add("--vec-env", choices=VEC_ENV_TYPES, default=None, help="VecEnv class (default: the entry's, else dummy)")
    add("--hyperparams-dir", default=None, help="folder searched first for <algo>.yml files")
    add("--zoo-v4-entries", action="store_true", help="baselines without a -v5 entry read their -v4 one")
    add("--threshold", nargs="+", action="extend", default=[], metavar="ENV=VALUE", help="reward threshold overrides")
    add("--skip-existing", action="store_true", help="resume: skip the runs finished in --out")
    add("--summary-only", action="store_true", help="only rebuild results.md and the plots from the CSVs")
    add("--force", action="store_true", help="write into --out even when it holds committed or earlier results")
    add("--gym-packages", nargs="+", default=[], help="modules imported in every worker before creating envs")
    add("--fresh-process-per-run", action="store_true", help="start a new worker process for every run")
    add("-q", "--quiet", action="store_true", help="only log warnings")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """
    :param argv: Command line arguments (default: ``sys.argv[1:]``)
    :return: Exit code (0: all runs succeeded, 1: some runs failed)
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(message)s")
    try:
        thresholds = parse_thresholds(args.threshold)
    except ValueError as exc:
        parser.error(str(exc))
    if args.summary_only:
        logger.info("Wrote %s", write_summary(args.out, thresholds))
        return 0
    if not args.algos or not args.envs or (args.steps is None and args.cpu_budget is None):
        parser.error("--algos, --envs and --steps (or --cpu-budget) are required unless --summary-only is given")
    if args.checkpoint_dir is not None and args.checkpoint_every is None:
        parser.error("--checkpoint-dir needs --checkpoint-every")
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    refusal = None if args.force else refusal_to_write(args.out, args.skip_existing)
    if refusal is not None:
        parser.error(refusal)
    if args.eval_freq is None:
        args.eval_freq = TIME_BUDGET_STEP_CAP if args.steps is None else max(args.steps // 20, 1)
    checkpoints: dict[str, Any] = {}
    if args.checkpoint_every is not None:
        checkpoints = {"checkpoint_root": args.checkpoint_dir or default_checkpoint_root()}
        checkpoints["checkpoint_every"] = args.checkpoint_every
    if argv is None:
        command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    else:
        command = shlex.join(["python", "-m", "benchmarks.run", *argv])
    try:
        frame = run_grid(
            args.algos,
            args.envs,
            args.seeds,
            args.out,
            workers=args.workers,
            skip_existing=args.skip_existing,
            thresholds=thresholds,
            command=command,
            fresh_process_per_run=args.fresh_process_per_run,
            steps=args.steps if args.steps is not None else TIME_BUDGET_STEP_CAP,
            eval_freq=args.eval_freq,
            n_eval_episodes=args.eval_episodes,
            hyperparams_dir=args.hyperparams_dir,
            device=args.device,
            env_packages=args.gym_packages,
            eval_at_start=not args.no_initial_eval,
            metric=args.metric,
            stop_at_threshold=args.stop_at_threshold,
            vec_env=args.vec_env,
            cpu_budget=args.cpu_budget,
            eval_cpu_seconds=args.eval_cpu_seconds,
            zoo_v4_entries=args.zoo_v4_entries,
            **checkpoints,
            backend=args.backend,
            address=args.address,
        )
    except (ValueError, FileNotFoundError, ImportError, ConnectionError, RuntimeError) as exc:  # bad settings; the
        parser.error(str(exc))  # ray backend: Ray missing, no cluster at --address; --out already running (nothing written)
    expected = {(algo, env, seed) for algo in args.algos for env in args.envs for seed in args.seeds}
    present = set(zip(frame["algo"], frame["env"], frame["seed"].astype(int), strict=True))
    logger.info("Wrote %s/results.md (%d evaluations)", args.out, len(frame))
    return 1 if expected - present else 0


if __name__ == "__main__":
    sys.exit(main())
