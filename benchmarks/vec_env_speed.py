"""
Training speed of UREX / Reinforce on the algorithmic tasks with SB3's ``DummyVecEnv`` and with
:class:`sb3_pcl.envs.AlgorithmicVecEnv`, same hyperparameters (``hyperparams/<algo>.yml``), same seed.

``python -m benchmarks.vec_env_speed [--algo urex] [--envs ...] [--steps 200000] [--warmup 20000] [--repeats 2]``

For each task and repeat, each VecEnv class in turn: build the model as the benchmark harness does
(:func:`benchmarks.harness.make_experiment`, ``torch.set_num_threads(1)``), train ``warmup`` steps, then time
``steps`` more. Both classes must produce the same training (checked: the returns of the episodes seen, the
number of steps and the final parameters), so the only difference is the time. Writes ``results.md``,
``results.csv`` and ``speed.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.harness import _now, machine_info, make_experiment
from sb3_pcl.envs import ALGORITHMIC_ENV_IDS

VEC_ENVS = ("dummy", "algorithmic")


def measure(algo: str, env_id: str, vec_env: str, seed: int, warmup: int, steps: int) -> dict[str, object]:
    """
    :param algo: ``urex`` or ``reinforce``
    :param env_id: An algorithmic task
    :param vec_env: ``dummy`` or ``algorithmic``
    :param seed: Seed of the model and envs
    :param warmup: Steps trained before timing
    :param steps: Steps timed
    :return: The measured FPS and a fingerprint of the training (to compare the two VecEnv classes)
    """
    import torch

    torch.set_num_threads(1)
    experiment = make_experiment(algo, env_id, seed, env_packages=("sb3_pcl",), vec_env=vec_env)
    model = experiment.model
    try:
        model.learn(warmup)
        start_steps, start = model.num_timesteps, time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        elapsed = time.perf_counter() - start
        returns = [float(info["r"]) for info in model.ep_info_buffer or []]
        parameters = torch.cat([p.detach().flatten() for p in model.policy.parameters()])
        fingerprint = (model.num_timesteps, tuple(returns), float(parameters.double().sum()), float(parameters.abs().max()))
    finally:
        experiment.eval_env.close()
        env = model.get_env()
        if env is not None:
            env.close()
    return {
        "fps": (model.num_timesteps - start_steps) / elapsed,
        "seconds": elapsed,
        "timed_steps": model.num_timesteps - start_steps,
        "fingerprint": fingerprint,
    }


def write_results(
    frame: pd.DataFrame, out: Path, command: str, args: argparse.Namespace, started: str, load: tuple[float, float]
) -> None:
    """
    :param frame: One row per (env, repeat, vec_env)
    :param out: Output folder
    :param command: Command line
    :param args: Parsed arguments
    :param started: Start date (UTC)
    :param load: 1-minute load average of the machine at the start and at the end (other jobs slow both classes)
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    frame.drop(columns=["fingerprint"]).to_csv(out / "results.csv", index=False)
    fps = frame.pivot_table(index="env", columns="vec_env", values="fps", aggfunc="mean").reindex(args.envs)
    same = frame.groupby(["env", "repeat"])["fingerprint"].nunique().groupby("env").max().eq(1)
    machine = machine_info()
    lines = [
        "# Training speed: DummyVecEnv vs AlgorithmicVecEnv",
        "",
        "Command:",
        "",
        "```bash",
        command,
        "```",
        "",
        "| Setting | Value |",
        "|---|---|",
        f"| Algorithm | {args.algo} (hyperparams/{args.algo}.yml: 400 envs = 40 start states x 10 samples, LSTM 128) |",
        f"| Measure | env steps per second over {args.steps} steps after {args.warmup} warm-up steps, mean of "
        f"{args.repeats} repeats (the two classes alternate), seed {args.seed}, torch.set_num_threads(1) |",
        f"| Machine | {machine['platform']}; {machine['cpu']}; {machine['cores']} cores |",
        f"| Versions | python {machine['python']}, torch {machine['torch']}, "
        f"stable-baselines3 {machine['stable-baselines3']}, gymnasium {machine['gymnasium']}, numpy {machine['numpy']} |",
        f"| Load average (1 min) | {load[0]:.2f} at the start, {load[1]:.2f} at the end (this job adds about 1) |",
        f"| Git revision | {machine['git']} |",
        f"| Date (UTC) | started {started}, finished {_now()} |",
        "",
        "Same training: whether both classes gave the same steps, episode returns and final parameters in every repeat.",
        "The speed is that of the first phase of training (short inputs, curriculum length 2 to 4), where",
        "episodes are shortest and resets most frequent.",
        "",
        "| Task | DummyVecEnv (steps/s) | AlgorithmicVecEnv (steps/s) | Speed-up | Same training |",
        "|---|---|---|---|---|",
    ]
    for env_id, row in fps.iterrows():
        lines.append(
            f"| {env_id} | {row['dummy']:.0f} | {row['algorithmic']:.0f} | {row['algorithmic'] / row['dummy']:.2f}x "
            f"| {'yes' if same[env_id] else '**no**'} |"
        )
    lines += ["", "![speed](speed.png)", ""]
    (out / "results.md").write_text("\n".join(lines))

    fig, ax = plt.subplots(figsize=(8, 4))
    positions = np.arange(len(fps))
    ax.bar(positions - 0.2, fps["dummy"], 0.4, label="DummyVecEnv")
    ax.bar(positions + 0.2, fps["algorithmic"], 0.4, label="AlgorithmicVecEnv")
    ax.set_xticks(positions, [env_id.split("/")[-1].removesuffix("-v0") for env_id in fps.index], rotation=20)
    ax.set_ylabel("env steps per second")
    ax.set_title(f"{args.algo}: training speed, {machine['cores']} cores, {started[:10]}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "speed.png", dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """
    :param argv: Command line arguments (default: ``sys.argv[1:]``)
    :return: Exit code (1 if the two classes trained differently)
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vec_env_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="urex", choices=("urex", "reinforce"))
    parser.add_argument("--envs", nargs="+", default=list(ALGORITHMIC_ENV_IDS))
    parser.add_argument("--steps", type=int, default=200_000, help="timed env steps (default: 200000)")
    parser.add_argument("--warmup", type=int, default=20_000, help="env steps trained before timing (default: 20000)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per task and class (default: 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/vec_env_speed")
    args = parser.parse_args(argv)
    if args.steps <= 0 or args.warmup < 0 or args.repeats <= 0:
        parser.error("--steps and --repeats must be positive, --warmup non-negative")
    arguments = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join(["python", "-m", "benchmarks.vec_env_speed", *arguments])
    started = _now()
    load_start = os.getloadavg()[0]
    rows = []
    for env_id in args.envs:
        for repeat in range(args.repeats):
            order = VEC_ENVS if repeat % 2 == 0 else VEC_ENVS[::-1]
            for vec_env in order:
                result = measure(args.algo, env_id, vec_env, args.seed, args.warmup, args.steps)
                print(f"{env_id} repeat {repeat} {vec_env}: {result['fps']:.0f} steps/s", flush=True)
                rows.append({"env": env_id, "repeat": repeat, "vec_env": vec_env, **result})
    frame = pd.DataFrame(rows)
    write_results(frame, Path(args.out), command, args, started, (load_start, os.getloadavg()[0]))
    identical = frame.groupby(["env", "repeat"])["fingerprint"].nunique().eq(1).all()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
