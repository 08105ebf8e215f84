"""
Do demonstrations from a Minari dataset speed up PCL?

A teacher PCL (:data:`PCL_SETTINGS`) learns CartPole-v1 until its evaluation reaches 475 and plays ``--n-demos``
deterministic episodes, written as a local Minari dataset. Then, per seed, a fresh PCL learns with the same settings and
budget, once without demonstrations and once with that dataset (``add_demonstrations``). Each learner is evaluated at
step 0 and every ``--eval-freq`` steps on ``--eval-episodes`` deterministic episodes of an env seeded ``seed + 1000``.

    nice -n 10 python -m benchmarks.experiments.demonstrations         # the committed run (about 10 CPU minutes)
    python -m benchmarks.experiments.demonstrations --seeds 0 --steps 2000 --eval-freq 1000 --teacher-steps 2000 \
        --out /tmp/demo

Needs ``pip install -e ".[minari,bench]"``. Writes ``results.md``, ``evaluations.csv`` and ``demonstrations.png`` to
``--out``; the dataset goes to a temporary folder (``--dataset-dir`` keeps it). Each process uses one torch thread.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.reporting import saved_figure

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "results" / "demonstrations"
ENV_ID, THRESHOLD = "CartPole-v1", 475.0
DATASET_ID = "sb3_pcl/cartpole-pcl-teacher-v0"
#: learner conditions: no demonstrations, the teacher's Minari dataset
CONDITIONS = {"none": "no demonstrations", "minari": "Minari demonstrations"}
#: reset seed of the teacher's recorded episodes (the evaluation envs use seed + 1000)
RECORD_SEED = 2000
#: the settings of the teacher and the learners: the CartPole-v1 entry of hyperparams/pcl.yml when the results were made
#: (one env, no normalisation; the shipped entry has since moved to 8 envs, see benchmarks/results/speed)
PCL_SETTINGS: dict[str, Any] = {"policy": "MlpPolicy", "buffer_size": 20000, "train_freq": 8, "learning_rate": "lin_0.001"}


def make_model(seed: int) -> Any:
    """:return: a fresh PCL with :data:`PCL_SETTINGS` on a one-env CartPole-v1, seeded"""
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_pcl import PCL
    from sb3_pcl.common.schedules import parse_schedule

    torch.set_num_threads(1)
    settings = {**PCL_SETTINGS, "learning_rate": parse_schedule("learning_rate", PCL_SETTINGS["learning_rate"])}
    return PCL(env=make_vec_env(ENV_ID, n_envs=1, seed=seed), seed=seed, **settings)


def learn_with_evaluations(
    model: Any, steps: int, eval_freq: int, eval_episodes: int, eval_seed: int, stop_at: float | None
) -> list[tuple[int, float, float, float]]:
    """
    :param eval_seed: seed of the evaluation env (reset once: the evaluations go on with its episodes)
    :param stop_at: stop at the first evaluation after step 0 reaching this mean return (``None``: never)
    :return: the evaluations (at step 0 and every ``eval_freq`` steps): ``(timesteps, mean, std, training CPU seconds)``
    """
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    eval_env = make_vec_env(ENV_ID, n_envs=1, seed=eval_seed)
    rows: list[tuple[int, float, float, float]] = []
    clock = {"train": 0.0, "since": time.process_time()}

    def evaluate(agent: Any) -> bool:
        """Add a row (the training CPU clock stops meanwhile); :return: whether to go on learning"""
        clock["train"] += time.process_time() - clock["since"]
        mean, std = evaluate_policy(agent, eval_env, n_eval_episodes=eval_episodes, deterministic=True, warn=False)
        rows.append((agent.num_timesteps, float(mean), float(std), clock["train"]))
        clock["since"] = time.process_time()
        return stop_at is None or rows[-1][1] < stop_at

    class Evaluations(BaseCallback):
        def _on_step(self) -> bool:
            return self.num_timesteps % eval_freq != 0 or evaluate(self.model)

    evaluate(model)
    model.learn(steps, callback=Evaluations())
    eval_env.close()
    return rows


def train_teacher(args: argparse.Namespace, dataset_dir: str) -> dict[str, Any]:
    """Train the teacher, write its episodes as a Minari dataset under ``dataset_dir``; :return: what to report"""
    from sb3_pcl.common.minari_io import record_minari_dataset

    start = time.process_time()
    teacher = make_model(args.teacher_seed)
    rows = learn_with_evaluations(
        teacher, args.teacher_steps, args.eval_freq, args.eval_episodes, args.teacher_seed + 1000, stop_at=THRESHOLD
    )
    dataset = record_minari_dataset(
        teacher, ENV_ID, args.n_demos, DATASET_ID, seed=RECORD_SEED, author="sb3_pcl benchmarks",
        author_email="see the sb3_pcl repository", code_permalink="benchmarks/demonstrations.py", datasets_path=dataset_dir,
    )  # fmt: skip
    return {
        "steps": int(teacher.num_timesteps),
        "evaluation": rows[-1][1],
        "dataset": str(Path(dataset_dir) / DATASET_ID),
        "returns": [float(np.sum(episode.rewards)) for episode in dataset.iterate_episodes()],
        "transitions": int(dataset.total_steps),
        "cpu_s": time.process_time() - start,
    }


def run_learner(job: tuple[str, int, str | None, int, int, int]) -> list[dict[str, Any]]:
    """One learner: ``(condition, seed, dataset folder or None, steps, eval_freq, eval_episodes)``; :return: its rows"""
    condition, seed, dataset, steps, eval_freq, eval_episodes = job
    start = time.process_time()
    model = make_model(seed)
    if dataset is not None:
        model.add_demonstrations(dataset)
    rows = learn_with_evaluations(model, steps, eval_freq, eval_episodes, seed + 1000, stop_at=None)
    cpu = round(time.process_time() - start, 2)
    return [
        {"condition": condition, "seed": seed, "timesteps": t, "mean_return": mean, "std_return": std,
         "train_cpu_s": round(train, 2), "run_cpu_s": cpu}
        for t, mean, std, train in rows
    ]  # fmt: skip


def write_report(args: argparse.Namespace, teacher: dict[str, Any], frame: pd.DataFrame, out: Path, wall: float) -> None:
    """Write ``evaluations.csv``, ``demonstrations.png`` and ``results.md`` to ``out``."""
    import minari

    from benchmarks.harness import machine_info, now

    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "evaluations.csv", index=False)
    with saved_figure(out / "demonstrations.png", figsize=(7, 4.2)) as (_, axis):
        for (condition, name), color in zip(CONDITIONS.items(), ("tab:gray", "tab:blue"), strict=True):
            curves = frame[frame["condition"] == condition].pivot(index="timesteps", columns="seed", values="mean_return")
            axis.plot(curves.index, curves.to_numpy(), color=color, alpha=0.3, linewidth=0.8)
            axis.plot(curves.index, curves.mean(axis=1), color=color, linewidth=2, label=f"{name} (mean)")
        axis.axhline(THRESHOLD, color="black", linestyle="--", linewidth=0.8)
        axis.set_xlabel("env steps")
        axis.set_ylabel(f"evaluation return ({args.eval_episodes} episodes)")
        axis.set_title(f"PCL on {ENV_ID}, seeds {', '.join(map(str, args.seeds))} (thin lines: seeds)")
        axis.legend(loc="lower right")
    trained = frame[frame["timesteps"] > 0]
    reached = trained[trained["mean_return"] >= THRESHOLD].groupby(["condition", "seed"])["timesteps"].first()
    finals = frame.groupby(["condition", "seed"])["mean_return"].last()
    areas = trained.groupby(["condition", "seed"])["mean_return"].mean()
    learners_cpu = frame.groupby(["condition", "seed"])["run_cpu_s"].last().sum()
    info = machine_info()
    n_demos = len(teacher["returns"])
    lines = [
        "# Demonstrations from a Minari dataset: PCL on CartPole-v1",
        "",
        f"A teacher PCL (seed {args.teacher_seed}) learned until its evaluation reached {THRESHOLD:g} "
        f"({'reached' if teacher['evaluation'] >= THRESHOLD else 'NOT reached'}: {teacher['evaluation']:.1f} after "
        f"{teacher['steps']} steps) and played {n_demos} deterministic episodes (returns "
        f"{', '.join(f'{value:g}' for value in teacher['returns'])}; {teacher['transitions']} transitions), written as "
        f"the local Minari dataset `{DATASET_ID}` with `record_minari_dataset`. Fresh PCL learners (the 1-env "
        f"`hyperparams/pcl.yml` [{ENV_ID}] entry, its learning rate decaying over each run's {args.steps} steps) "
        "learned with and without that dataset, loaded by `add_demonstrations` (seeded paths: never evicted, "
        f"sampled with the top priority). Evaluation: {args.eval_episodes} deterministic episodes every "
        f"{args.eval_freq} steps on a separate env seeded `seed + 1000` (the same for both conditions of a seed). "
        "The screening rule, fixed before the runs, is in [NOTES.md](NOTES.md).",
        "",
        f"- Command: `{args.command}`",
        f"- Seeds: {', '.join(map(str, args.seeds))}; steps: {args.steps} per learner; teacher budget: "
        f"{args.teacher_steps} steps",
        f"- Machine: {info['cpu']}, {info['cores']} cores, {info['platform']}, Python {info['python']}, torch "
        f"{info['torch']}, minari {minari.__version__}, git {info['git']}",
        f"- Date: {now()}; wall time {wall / 60:.1f} min with {args.workers} worker process(es); CPU: teacher "
        f"{teacher['cpu_s'] / 60:.1f} min, learners {learners_cpu / 60:.1f} min",
        "",
        f"Final: the last evaluation ({args.steps} steps). To {THRESHOLD:g}: the first evaluation after step 0 reaching "
        "it. Mean evaluation: the mean of every evaluation after step 0 (the area under the curve, per evaluation).",
        "",
        "| Learner | Final per seed | Final mean | To 475 per seed | Reached | Mean evaluation per seed | Mean evaluation |",
        "|---|---|---:|---|---:|---|---:|",
    ]
    labels = {"none": "no demonstrations", "minari": f"{n_demos} demonstrations (Minari dataset)"}
    for condition, label in labels.items():
        keys = [(condition, seed) for seed in args.seeds]
        to_475 = [f"{reached[key] / 1000:g}k" if key in reached else "never" for key in keys]
        lines.append(
            f"| {label} | {' / '.join(f'{finals[key]:.1f}' for key in keys)} | {finals[condition].mean():.1f} | "
            f"{' / '.join(to_475)} | {sum(key in reached for key in keys)}/{len(keys)} | "
            f"{' / '.join(f'{areas[key]:.1f}' for key in keys)} | {areas[condition].mean():.1f} |"
        )
    lines += ["", "![Evaluations of the learners](demonstrations.png)", ""]
    (out / "results.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20_000, help="budget of each learner")
    parser.add_argument("--eval-freq", type=int, default=2_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--teacher-seed", type=int, default=100)
    parser.add_argument("--teacher-steps", type=int, default=50_000, help="the teacher's budget (it stops at 475)")
    parser.add_argument("--n-demos", type=int, default=10, help="episodes of the dataset")
    parser.add_argument("--workers", type=int, default=1, help="learner processes")
    parser.add_argument("--dataset-dir", type=Path, help="keep the Minari dataset in this folder (default: temporary)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.eval_freq < 1 or args.steps % args.eval_freq:
        parser.error("--steps must be a multiple of --eval-freq")
    args.command = shlex.join(
        ["python", "-m", "benchmarks.experiments.demonstrations", *(sys.argv[1:] if argv is None else argv)]
    )
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    start = time.time()
    with tempfile.TemporaryDirectory() as temporary:
        teacher = train_teacher(args, str(args.dataset_dir or temporary))
        print(f"teacher: {teacher['steps']} steps, evaluation {teacher['evaluation']:.1f}, dataset {teacher['dataset']}")
        # in the order of the table and evaluations.csv: by condition, then seed
        jobs = [
            (condition, seed, teacher["dataset"] if condition == "minari" else None, args.steps, args.eval_freq,
             args.eval_episodes)
            for condition in CONDITIONS
            for seed in sorted(args.seeds)
        ]  # fmt: skip
        spawn = multiprocessing.get_context("spawn")
        pool = concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=spawn) if args.workers > 1 else None
        rows: list[dict[str, Any]] = []
        with pool or contextlib.nullcontext():
            for job, result in zip(jobs, (pool.map if pool else map)(run_learner, jobs), strict=True):
                rows += result
                print(f"{job[0]} seed {job[1]}: final {result[-1]['mean_return']:.1f}", flush=True)
    write_report(args, teacher, pd.DataFrame(rows), args.out, time.time() - start)
    print(f"wrote {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
