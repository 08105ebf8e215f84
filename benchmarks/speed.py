"""
Training throughput of this package's algorithms against SB3's and sb3-contrib's, side by side.

Every configuration (an algorithm with its shipped rl-zoo3 entry on one env) is built once by the benchmark harness
(:func:`benchmarks.harness.make_experiment`), trained past its ``learning_starts`` and warmed up, then timed for
``--reps`` repetitions of ``--steps`` env steps each. The repetitions are interleaved (rep 1 of every configuration,
then rep 2, ...) so that a change of machine load hits every configuration alike; every process runs one torch
thread. The table reports the median env steps per second of process CPU time (``time.process_time``), training
included: what a CPU-time budget counts, and a measure that a busy machine disturbs far less than wall-clock (which
is recorded too). ``env:<id>`` configurations give the env's own limit: the env, in a 4-env ``DummyVecEnv`` with
``Monitor``, stepped with uniformly random actions and nothing else.

For this package's algorithms, one more repetition runs with timers around the parts of an iteration and gives the
breakdown: collection (acting, env steps, storing), replay sampling, forward passes (policy, values, consistency),
backward, optimiser step, value fit, and the rest of an iteration (statistics and logging), per training iteration
and per 1000 env steps. The timers add a little overhead, so that repetition is not in the throughput table.

With ``--threshold-seeds``, the script also trains each of ``--threshold-algos`` from scratch on ``--threshold-env``
until its first deterministic evaluation (10 episodes every ``--threshold-eval-freq`` steps) reaches the env's reward
threshold, the seeds interleaved (algorithm A seed 0, B seed 0, A seed 1, ...), and reports the training wall-clock
to the threshold (evaluation time excluded), the same measure as ``python -m benchmarks.run --stop-at-threshold``.

    python -m benchmarks.speed                      # the default configurations (about 5 minutes on 2 cores)
    python -m benchmarks.speed --configs pcl:CartPole-v1 ppo:CartPole-v1 --reps 5
    python -m benchmarks.speed --configs pcl:CartPole-v1 pcl:CartPole-v1@2 --load 2   # 1 against 2 torch threads

Writes ``results.md`` (the tables, with the command, machine and date) and ``speed.png`` to ``--out`` (default
``benchmarks/results/speed``); ``--json FILE`` also saves the raw numbers. ``--baseline FILE`` adds the runs of such a
file (the same command run on an older commit) as a "before" column.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import functools
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "speed"
#: the MuJoCo tasks of Trust-PCL's shipped entries
MUJOCO_TASKS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5")
#: ``algo:env`` of the default run: PCL against PPO on CartPole, PCL's defaults with one env (now and up to 0.2.0) and
#: PCL's other classic entries; on each MuJoCo task
#: Trust-PCL, TRPO and the env's random-action limit; SAC as the reference of the per-CPU-hour comparison
DEFAULT_CONFIGS = (
    "pcl:CartPole-v1",
    "ppo:CartPole-v1",
    "pcl+defaults:CartPole-v1",  # PCL's defaults with one env
    "pcl+old_defaults:CartPole-v1",  # the defaults up to 0.2.0
    "pcl:Acrobot-v1",
    "pcl:Pendulum-v1",
    *(f"{algo}:{task}" for task in MUJOCO_TASKS for algo in ("trust_pcl", "trpo", "env")),
    "sac:HalfCheetah-v4",  # rl-zoo3 has no v5 entry for SAC; the step cost is its networks', not the env version's
)
#: pseudo-algorithm of the env-limit configurations
ENV_LIMIT = "env"
#: envs of the env-limit configurations
ENV_LIMIT_ENVS = 4
#: env steps of one timed repetition, per algorithm (SAC trains on every step: fewer)
DEFAULT_STEPS = {"sac": 1_000, "td3": 1_000}
STEPS = 5_000
#: baselines whose v5 entries rl-zoo3 lacks: benchmarks/hyperparams holds its v4 entries under the v5 ids
BASELINE_DIR_ALGOS = ("trpo",)
PARTS = ("collection", "sampling", "forward", "backward", "optimizer", "value_fit", "other")


class PartTimer:
    """
    Exclusive time per part: a timed call's time goes to its part, minus the timed calls it makes.

    :param clock: the clock read (``time.perf_counter``: wall-clock; ``time.process_time``: process CPU time)
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.totals: dict[str, float] = collections.defaultdict(float)
        self._stack: list[list[Any]] = []
        self._clock = clock

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        frame = [name, 0.0]  # name, time of the timed calls inside
        self._stack.append(frame)
        start = self._clock()
        try:
            yield
        finally:
            elapsed = self._clock() - start
            self._stack.pop()
            self.totals[name] += elapsed - frame[1]
            if self._stack:
                self._stack[-1][1] += elapsed

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """Time ``owner.attribute`` (a method or function) as part ``name``, on this object only."""
        function: Callable[..., Any] = getattr(owner, attribute)

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.part(name):
                return function(*args, **kwargs)

        setattr(owner, attribute, timed)


def instrument(model: Any, clock: Callable[[], float] = time.perf_counter) -> PartTimer:
    """
    Put timers around the parts of a PCL-family model's training (``train`` itself counts as ``other``).

    :param model: a :class:`sb3_pcl.PCL` (or subclass)
    :param clock: the timers' clock (see :class:`PartTimer`)
    :return: the timer
    """
    import torch as th

    timer = PartTimer(clock)
    timer.wrap(model, "collect_rollouts", "collection")
    timer.wrap(model, "train", "other")
    timer.wrap(model.replay_buffer, "sample", "sampling")
    timer.wrap(model.replay_buffer, "recent_segments", "sampling")
    timer.wrap(model, "_evaluate", "forward")
    timer.wrap(model, "_consistency", "forward")
    if model._policy_step is not None:  # a trust-region step: its forward re-evaluations are timed apart
        timer.wrap(model._policy_step, "step", "backward")
    timer.wrap(model.policy.optimizer, "step", "optimizer")
    timer.wrap(model._value_fit, "fit", "value_fit")
    original_backward = th.Tensor.backward

    def backward(tensor: th.Tensor, *args: Any, **kwargs: Any) -> None:
        with timer.part("backward"):
            original_backward(tensor, *args, **kwargs)

    th.Tensor.backward = backward  # type: ignore[method-assign]
    return timer


def _configure(spec: str) -> tuple[str, str, int]:
    """:return: algorithm, env and torch threads of ``algo:env`` or ``algo:env@threads``"""
    rest, _, threads = spec.partition("@")
    algo, sep, env = rest.partition(":")
    if not sep or not algo or not env or (threads and not (threads.isdigit() and int(threads) >= 1)):
        raise ValueError(f"a configuration is 'algo:env' or 'algo:env@threads', got {spec!r}")
    return algo, env, int(threads or 1)


def _busy() -> None:
    while True:
        pass


@contextlib.contextmanager
def machine_load(n_processes: int) -> Iterator[None]:
    """Keep ``n_processes`` busy-looping processes running (a loaded machine) inside the block."""
    import multiprocessing

    processes = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(n_processes)]
    for process in processes:
        process.start()
    try:
        yield
    finally:
        for process in processes:
            process.terminate()
            process.join()


class EnvLimit:
    """
    The env's own speed: ``n_envs`` copies in a ``DummyVecEnv`` with ``Monitor``, stepped with uniformly random actions
    (drawn for all the envs in one call per step), nothing else. ``learn`` mimics an algorithm's for :func:`measure`.

    :param env_id: Gymnasium env id
    :param seed: seed of the envs and of the actions
    :param n_envs: number of envs
    """

    learning_starts = 0

    def __init__(self, env_id: str, seed: int, n_envs: int = ENV_LIMIT_ENVS) -> None:
        import numpy as np
        from gymnasium import spaces
        from stable_baselines3.common.env_util import make_vec_env

        self.env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
        self.n_envs = n_envs
        self.num_timesteps = 0
        space = self.env.action_space
        if not isinstance(space, spaces.Box):
            raise ValueError(f"the env limit draws Box actions, {env_id} has {space}")
        self._rng = np.random.default_rng(seed)
        self._low, self._high = np.broadcast_to(space.low, (n_envs, *space.shape)), space.high
        self.env.reset()

    def learn(self, total_timesteps: int, reset_num_timesteps: bool = True) -> EnvLimit:
        """Step the envs ``total_timesteps`` times in all (rounded up to whole vector steps)."""
        end = self.num_timesteps + total_timesteps
        while self.num_timesteps < end:
            self.env.step(self._rng.uniform(self._low, self._high).astype(self.env.action_space.dtype))
            self.num_timesteps += self.n_envs
        return self


def _build(algo: str, env_id: str, seed: int) -> Any:
    from benchmarks.harness import VARIANTS_HYPERPARAMS_DIR, make_experiment

    if algo == ENV_LIMIT:
        return EnvLimit(env_id, seed)
    hyperparams_dir = VARIANTS_HYPERPARAMS_DIR if algo in BASELINE_DIR_ALGOS else None
    return make_experiment(algo, env_id, seed, hyperparams_dir=hyperparams_dir, eval_env=False).model


def _timed_learn(model: Any, steps: int) -> tuple[float, float]:
    """:return: env steps per second of process CPU time and per second of wall-clock, while ``model`` learns ``steps``"""
    start_steps, start_cpu, start = model.num_timesteps, time.process_time(), time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start
    steps_done = model.num_timesteps - start_steps
    return steps_done / cpu, steps_done / wall


def measure(configs: Sequence[str], reps: int, steps: int | None, warmup: int, seed: int, breakdown: bool) -> dict[str, Any]:
    """
    :param configs: ``algo:env`` strings (``algo:env@threads``: with that many torch threads, default 1)
    :param reps: timed repetitions per configuration (interleaved)
    :param steps: env steps per repetition (``None``: :data:`DEFAULT_STEPS` or :data:`STEPS`)
    :param warmup: env steps trained after ``learning_starts`` before timing
    :param seed: seed of every model
    :param breakdown: also time the parts of this package's algorithms (one extra repetition)
    :return: ``{"runs": {config: {...}}}`` with the steps per CPU second and per wall-clock second of each repetition,
        and the breakdowns
    """
    import torch as th

    models, results = {}, {}
    for spec in configs:
        algo, env_id, threads = _configure(spec)
        th.set_num_threads(threads)
        model = _build(algo, env_id, seed)
        learning_starts = int(getattr(model, "learning_starts", 0) or 0)
        model.learn(learning_starts + warmup)
        models[spec] = model
        n_steps = steps if steps is not None else DEFAULT_STEPS.get(algo, STEPS)
        results[spec] = {
            "algo": algo,
            "env": env_id,
            "class": type(model).__name__,
            "n_envs": model.n_envs,
            "threads": threads,
            "steps_per_rep": n_steps,
            "steps_per_cpu_s": [],
            "steps_per_s": [],
        }
        print(f"built {spec} ({type(model).__name__}, {model.n_envs} envs), trained {model.num_timesteps} steps", flush=True)
    for rep in range(reps):
        for spec, model in models.items():
            th.set_num_threads(results[spec]["threads"])
            cpu_fps, fps = _timed_learn(model, results[spec]["steps_per_rep"])
            results[spec]["steps_per_cpu_s"].append(cpu_fps)
            results[spec]["steps_per_s"].append(fps)
            print(f"rep {rep + 1}/{reps} {spec}: {cpu_fps:.0f} steps per CPU second, {fps:.0f} per second", flush=True)
    for spec, model in models.items():
        results[spec]["median_steps_per_cpu_s"] = statistics.median(results[spec]["steps_per_cpu_s"])
        results[spec]["median_steps_per_s"] = statistics.median(results[spec]["steps_per_s"])
        if breakdown and hasattr(model, "_policy_step"):
            th.set_num_threads(results[spec]["threads"])
            results[spec]["breakdown"] = _breakdown(model, results[spec]["steps_per_rep"])
    return {"runs": results}


def _breakdown(model: Any, steps: int) -> dict[str, Any]:
    import torch as th

    original_backward = th.Tensor.backward
    timer = instrument(model, time.process_time)
    n_updates, start_steps = model._n_updates, model.num_timesteps
    iterations = [0]
    train = model.train

    def counted_train(*args: Any, **kwargs: Any) -> None:
        iterations[0] += 1
        train(*args, **kwargs)

    model.train = counted_train
    start = time.process_time()
    try:
        model.learn(steps, reset_num_timesteps=False)
    finally:
        th.Tensor.backward = original_backward  # type: ignore[method-assign]
        del model.train, model.collect_rollouts, model._evaluate, model._consistency  # the class's methods again
        for owner, attribute in ((model.replay_buffer, "sample"), (model.replay_buffer, "recent_segments")):
            delattr(owner, attribute)
        for owner, attribute in ((model.policy.optimizer, "step"), (model._value_fit, "fit")):
            delattr(owner, attribute)
        if model._policy_step is not None:
            delattr(model._policy_step, "step")
    total = time.process_time() - start
    env_steps = model.num_timesteps - start_steps
    parts = {name: timer.totals.get(name, 0.0) for name in PARTS}
    parts["other"] += total - sum(parts.values())  # learn's own loop, callbacks
    return {
        "env_steps": env_steps,
        "iterations": iterations[0],
        "batches": model._n_updates - n_updates,
        "total_s": total,
        "parts_s": parts,
    }


def time_to_threshold(algos: Sequence[str], env_id: str, seeds: Sequence[int], eval_freq: int, budget: int) -> list[dict]:
    """
    :param algos: algorithms (their shipped entries)
    :param env_id: env with a reward threshold
    :param seeds: seeds, run interleaved across the algorithms
    :param eval_freq: evaluation interval in env steps
    :param budget: step budget of a run that never reaches the threshold
    :return: one record per run: ``algo, seed, reached, steps, wall_time_s`` (training time to the first evaluation
        at or above the threshold, or of the whole budget)
    """
    from benchmarks.harness import VARIANTS_HYPERPARAMS_DIR, RunTask, run_experiment

    records = []
    for seed in seeds:
        for algo in algos:
            task = RunTask(
                algo,
                env_id,
                seed,
                steps=budget,
                eval_freq=eval_freq,
                hyperparams_dir=str(VARIANTS_HYPERPARAMS_DIR) if algo in BASELINE_DIR_ALGOS else None,
                stop_at_threshold=True,
            )
            frame, metadata = run_experiment(task)
            last = frame.iloc[-1]
            record = {
                "algo": algo,
                "seed": seed,
                "reached": bool(metadata["stopped_at_threshold"]),
                "steps": int(last["timesteps"]),
                "wall_time_s": float(last["wall_time_s"]),
                "threshold": metadata["reward_threshold"],
            }
            records.append(record)
            print(
                f"{algo} seed {seed}: {'reached' if record['reached'] else 'missed'} the threshold at "
                f"{record['steps']} steps, {record['wall_time_s']:.1f} s",
                flush=True,
            )
    return records


def _machine() -> str:
    from benchmarks.harness import machine_info

    info = machine_info()
    return f"{info.get('cpu', '?')}; {info.get('cores', '?')} cores"


def load_text(load: int) -> str:
    """:return: how loaded the machine was, in words"""
    return f"Machine loaded with {load} busy-looping processes." if load else "No load added (`--load 0`)."


def write_report(data: dict[str, Any], out: Path, baseline: dict[str, Any] | None) -> Path:
    """Write ``results.md`` and ``speed.png`` to ``out``; :return: the markdown path"""
    out.mkdir(parents=True, exist_ok=True)
    runs = data["runs"]
    before = (baseline or {}).get("runs", {})
    lines = [
        "# Training throughput",
        "",
        f"Command: `{data['command']}`",
        "",
        f"Machine: {data['machine']}; {data['versions']}; {data['date']}. "
        f"{load_text(data.get('load', 0))} One torch thread (`@N`: N threads); seed {data['seed']}; "
        f"{data['reps']} interleaved repetitions per configuration after `learning_starts` + {data['warmup']} warm-up "
        "steps; the shipped rl-zoo3 entries. `env:<task>`: the env's limit, the task in a "
        f"{ENV_LIMIT_ENVS}-env `DummyVecEnv` with `Monitor` stepped with random actions.",
        "",
        "Throughput is env steps per second of **process CPU time** (`time.process_time`), training included: what a "
        "CPU-time budget counts. It is the measure to compare on a shared machine; wall-clock steps/s, also given, "
        "falls with whatever else the machine runs.",
        "",
    ]
    lines += _mujoco_table(runs, before)
    lines += ["## Env steps per CPU second, training included (median of the repetitions)", ""]
    header = ["Configuration", "Class", "Envs", "Steps per rep", "Median CPU steps/s", "Repetitions", "Wall steps/s"]
    if before:
        header += ["Before (median)", "After / before"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for spec, run in runs.items():
        row = [
            spec,
            run["class"],
            str(run["n_envs"]),
            str(run["steps_per_rep"]),
            f"{_throughput(run):.0f}",
            ", ".join(f"{value:.0f}" for value in run.get("steps_per_cpu_s", run["steps_per_s"])),
            f"{run['median_steps_per_s']:.0f}",
        ]
        if before:
            old = _throughput(before[spec]) if spec in before else None
            row += [f"{old:.0f}" if old else "-", f"{_throughput(run) / old:.2f}x" if old else "-"]
        lines.append("| " + " | ".join(row) + " |")
    if baseline:
        when = f"{baseline.get('revision', '?')}, {baseline.get('date', '?')}"
        lines += ["", f"Before: `{baseline.get('command', '?')}` at {when}."]
    for title, source in (("", data), ("Before: ", baseline or {})):
        broken_down = {spec: run["breakdown"] for spec, run in source.get("runs", {}).items() if "breakdown" in run}
        if not broken_down:
            continue
        lines += ["", f"## {title}where the time goes (one extra repetition with timers)", ""]
        lines += [
            f"Milliseconds of {source.get('breakdown_clock', 'wall-clock')} time per training iteration / per 1000 env "
            "steps. *collection*: acting, env steps and storing "
            "transitions; *sampling*: drawing the replay's path segments; *forward*: the policy's and the values' "
            "forward passes and the consistency; *backward*: autograd; *optimizer*: the optimiser's step; "
            "*value_fit*: a separate value fit; *other*: statistics, logging, the learn loop and callbacks.",
            "",
        ]
        head = ["Configuration", "Iterations", "Batches", *PARTS, "Total"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for spec, part in broken_down.items():
            iterations = max(part["iterations"], 1)
            per_1000 = 1000.0 / max(part["env_steps"], 1)
            cells = [
                f"{1e3 * part['parts_s'][name] / iterations:.2f} / {1e3 * part['parts_s'][name] * per_1000:.0f}"
                for name in PARTS
            ]
            total = f"{1e3 * part['total_s'] / iterations:.2f} / {1e3 * part['total_s'] * per_1000:.0f}"
            lines.append("| " + " | ".join([spec, str(part["iterations"]), str(part["batches"]), *cells, total]) + " |")
    threshold = data.get("threshold")
    if threshold:
        records = threshold["records"]
        lines += [
            "",
            f"## Training wall-clock to the reward threshold of {threshold['env']} ({records[0]['threshold']})",
            "",
            f"Each run from scratch with its shipped entry, 10 deterministic evaluation episodes every "
            f"{threshold['eval_freq']} steps (evaluation time excluded), stopping at the first evaluation at or above "
            f"the threshold; budget {threshold['budget']} steps; seeds run interleaved.",
            "",
            "| Algorithm | Seeds reaching it | Wall-clock (s) per seed | Median wall-clock (s) | Steps per seed "
            "| Median steps |",
            "|---|---|---|---|---|---|",
        ]
        for algo in dict.fromkeys(record["algo"] for record in records):
            algo_runs = [record for record in records if record["algo"] == algo]
            times = [record["wall_time_s"] if record["reached"] else float("inf") for record in algo_runs]
            steps = [record["steps"] if record["reached"] else float("inf") for record in algo_runs]
            lines.append(
                f"| {algo} | {sum(record['reached'] for record in algo_runs)}/{len(algo_runs)} | "
                + ", ".join(
                    f"{record['wall_time_s']:.1f}" + ("" if record["reached"] else " (missed)") for record in algo_runs
                )
                + f" | {statistics.median(times):.1f} | "
                + ", ".join(str(record["steps"]) for record in algo_runs)
                + f" | {statistics.median(steps):.0f} |"
            )
    path = out / "results.md"
    path.write_text("\n".join(lines) + "\n")
    _plot(runs, before, out / "speed.png")
    return path


def _throughput(run: dict[str, Any]) -> float:
    """:return: a run's median env steps per CPU second (per wall-clock second for runs saved before CPU time was kept)"""
    return run.get("median_steps_per_cpu_s", run["median_steps_per_s"])


def _mujoco_table(runs: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """:return: the lines of the per-task summary: Trust-PCL against TRPO and the env limit (empty without such runs)"""
    tasks = [task for task in MUJOCO_TASKS if all(f"{algo}:{task}" in runs for algo in ("trust_pcl", "trpo", ENV_LIMIT))]
    if not tasks:
        return []
    lines = [
        "## Trust-PCL on the MuJoCo tasks: against TRPO and the env's limit",
        "",
        "Median env steps per CPU second (same run). Targets: Trust-PCL at least TRPO's throughput, and at least a "
        "quarter of the env's limit.",
        "",
    ]
    header = ["Task", "Env limit", "Trust-PCL", "TRPO", "Trust-PCL / TRPO", "Trust-PCL / env limit"]
    if before:
        header += ["Trust-PCL before", "TRPO before", "Env limit before"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    met = {"trpo": 0, "quarter": 0}
    for task in tasks:
        limit, ours, trpo = (_throughput(runs[f"{algo}:{task}"]) for algo in (ENV_LIMIT, "trust_pcl", "trpo"))
        met["trpo"] += ours >= trpo
        met["quarter"] += ours >= limit / 4
        row = [task, f"{limit:.0f}", f"{ours:.0f}", f"{trpo:.0f}", f"{ours / trpo:.2f}", f"{ours / limit:.2f}"]
        if before:
            row += [
                f"{_throughput(before[key]):.0f}" if key in before else "-"
                for key in (f"trust_pcl:{task}", f"trpo:{task}", f"{ENV_LIMIT}:{task}")
            ]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        f"Trust-PCL at least TRPO's throughput on {met['trpo']} of {len(tasks)} tasks; at least a quarter of the env's "
        f"limit on {met['quarter']} of {len(tasks)}.",
        "",
    ]
    return lines


def _plot(runs: dict[str, Any], before: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = list(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(specs) + 2), 4.5))
    width = 0.4 if before else 0.6
    positions = list(range(len(specs)))
    if before:
        old = [_throughput(before[spec]) if spec in before else 0.0 for spec in specs]
        ax.bar([p - width / 2 for p in positions], old, width, label="before", color="#bbbbbb")
    now = [_throughput(runs[spec]) for spec in specs]
    ax.bar([p + (width / 2 if before else 0) for p in positions], now, width, label="now", color="#3070b0")
    ax.set_xticks(positions, [spec.replace(":", "\n") for spec in specs])
    ax.set_ylabel("env steps per CPU second (training included)")
    ax.set_title("Median throughput, one torch thread")
    if before:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    description = (__doc__ or "").split("\n\n")[1]
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS), help="algo:env pairs (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions per configuration (default: 3)")
    parser.add_argument("--steps", type=int, default=None, help=f"env steps per repetition (default: {STEPS}, SAC/TD3 1000)")
    parser.add_argument("--warmup", type=int, default=2_000, help="env steps after learning_starts before timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-breakdown", action="store_true", help="skip the timed breakdown of our algorithms")
    parser.add_argument("--load", type=int, default=0, help="busy-looping processes running alongside (a loaded machine)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: benchmarks/results/speed)")
    parser.add_argument("--json", type=Path, default=None, help="also save the raw numbers to this JSON file")
    parser.add_argument("--baseline", type=Path, default=None, help="JSON of an earlier run: a 'before' column")
    parser.add_argument(
        "--from-json", type=Path, default=None, help="write the report from this --json file of a run, without measuring"
    )
    parser.add_argument("--threshold-seeds", type=int, nargs="*", default=[], help="also time runs to the threshold")
    parser.add_argument("--threshold-algos", nargs="+", default=["pcl", "ppo"], help="(default: pcl ppo)")
    parser.add_argument("--threshold-env", default="CartPole-v1", help="(default: CartPole-v1)")
    parser.add_argument("--threshold-eval-freq", type=int, default=1_000, help="(default: 1000 steps)")
    parser.add_argument("--threshold-budget", type=int, default=100_000, help="(default: 100000 steps)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.reps < 1 or (args.steps is not None and args.steps < 1) or args.warmup < 0 or args.load < 0:
        raise SystemExit("--reps and --steps must be positive, --warmup and --load >= 0")
    for spec in args.configs:
        _configure(spec)
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    if args.from_json:
        path = write_report(json.loads(args.from_json.read_text()), args.out, baseline)
        print(path.read_text())
        return 0
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from benchmarks.harness import _git_revision, _package_version

    with machine_load(args.load):
        data = measure(args.configs, args.reps, args.steps, args.warmup, args.seed, not args.no_breakdown)
    data["load"] = args.load
    if args.threshold_seeds:
        data["threshold"] = {
            "env": args.threshold_env,
            "eval_freq": args.threshold_eval_freq,
            "budget": args.threshold_budget,
            "records": time_to_threshold(
                args.threshold_algos, args.threshold_env, args.threshold_seeds, args.threshold_eval_freq, args.threshold_budget
            ),
        }
    data.update(
        command=" ".join(["python -m benchmarks.speed", *map(shlex.quote, sys.argv[1:] if argv is None else argv)]),
        machine=_machine(),
        versions=", ".join(f"{name} {_package_version(name)}" for name in ("torch", "stable-baselines3", "sb3-contrib")),
        revision=_git_revision(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        seed=args.seed,
        reps=args.reps,
        warmup=args.warmup,
        breakdown_clock="process CPU",
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    path = write_report(data, args.out, baseline)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
