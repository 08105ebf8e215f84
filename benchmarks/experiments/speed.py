"""
Training throughput of this package's algorithms against SB3's and sb3-contrib's: each configuration (an algorithm's
shipped rl-zoo3 entry on one env, or ``env:<id>``, the env's own limit) is warmed up, then timed for interleaved
repetitions (rep 1 of every configuration, then rep 2, ...: a change of machine load hits them alike). Throughput is
the median env steps per second of process CPU time, training included (what a CPU-time budget counts; wall-clock is
recorded too); one more repetition with timers gives where our algorithms' time goes. Usage: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import functools
import json
import operator
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.reporting import markdown_table, saved_figure

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "results" / "speed"
#: the MuJoCo tasks of Trust-PCL's shipped entries
MUJOCO_TASKS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5")
#: pseudo-algorithm of the env-limit configurations, and their number of envs
ENV_LIMIT, ENV_LIMIT_ENVS = "env", 4
#: ``algo:env`` of the default run: PCL against PPO on CartPole, PCL's defaults with one env (now and up to 0.2.0),
#: PCL's other classic entries; on each MuJoCo task Trust-PCL, TRPO and the env's limit; SAC, the reference of the
#: per-CPU-hour comparison (rl-zoo3 has no v5 entry for SAC; the step cost is its networks', not the env version's)
DEFAULT_CONFIGS = (
    "pcl:CartPole-v1",
    "ppo:CartPole-v1",
    "pcl+defaults:CartPole-v1",
    "pcl+old_defaults:CartPole-v1",
    "pcl:Acrobot-v1",
    "pcl:Pendulum-v1",
    *(f"{algo}:{task}" for task in MUJOCO_TASKS for algo in ("trust_pcl", "trpo", ENV_LIMIT)),
    "sac:HalfCheetah-v4",
)
#: env steps of one timed repetition (SAC and TD3 train on every step: fewer)
STEPS, DEFAULT_STEPS = 5_000, {"sac": 1_000, "td3": 1_000}
#: baselines whose v5 entries rl-zoo3 lacks: this folder holds their v4 entries under the v5 ids
BASELINE_DIR_ALGOS, BASELINE_HYPERPARAMS_DIR = ("trpo",), Path(__file__).resolve().parents[1] / "hyperparams"
PARTS = ("env", "acting", "collection", "sampling", "forward", "backward", "optimizer", "value_fit", "training", "other")
#: the parts inside a training iteration (``train``): its time is their sum
TRAINING_PARTS = ("sampling", "forward", "backward", "optimizer", "value_fit", "training")
#: the timed calls of a PCL-family model: (attribute path of the object, method, part); those a model lacks are skipped
#: (the policy optimiser's steps and autograd's backward passes are timed too: :func:`instrument`)
TIMED_CALLS = (
    ("", "collect_rollouts", "collection"),
    ("env", "step", "env"),
    ("actor", "forward", "acting"),
    ("", "train", "training"),
    ("replay_buffer", "sample", "sampling"),
    ("replay_buffer", "recent_segments", "sampling"),
    ("", "_evaluate", "forward"),
    ("", "_consistency", "forward"),
    ("", "_trust_region_step", "backward"),  # a trust-region step: its forward re-evaluations are timed apart
    ("", "_fit_value", "value_fit"),
)


class PartTimer:
    """
    Exclusive time per part: a timed call's time goes to its part, minus the timed calls it makes.

    :param clock: the clock read (``time.perf_counter``: wall-clock; ``time.process_time``: process CPU time)
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.totals: dict[str, float] = collections.defaultdict(float)
        self.calls: collections.Counter[str] = collections.Counter()  # calls of each function timed with timed()
        self._stack: list[list[Any]] = []  # per open part: name, time of the timed calls inside, start
        self._clock = clock

    def start(self, name: str) -> None:
        self._stack.append([name, 0.0, self._clock()])

    def stop(self) -> None:
        name, inside, start = self._stack.pop()
        elapsed = self._clock() - start
        self.totals[name] += elapsed - inside
        if self._stack:
            self._stack[-1][1] += elapsed

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        self.start(name)
        try:
            yield
        finally:
            self.stop()

    def timed(self, function: Callable[..., Any], name: str) -> Callable[..., Any]:
        """:return: ``function`` timed as part ``name``"""

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.calls[function.__name__] += 1
            with self.part(name):
                return function(*args, **kwargs)

        return timed


@contextlib.contextmanager
def instrument(model: Any, clock: Callable[[], float] = time.perf_counter) -> Iterator[PartTimer]:
    """
    Time the parts of a PCL-family model's training inside the block (:data:`TIMED_CALLS`, the policy optimiser's steps
    through its step hooks, autograd's backward passes through a ``TorchFunctionMode``), leaving it as it was.

    :param model: a :class:`sb3_pcl.PCL` (or subclass)
    :param clock: the timers' clock (see :class:`PartTimer`)
    """
    import torch as th
    from torch.overrides import TorchFunctionMode

    timer = PartTimer(clock)

    class TimedBackward(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            with timer.part("backward") if func is th.Tensor.backward else contextlib.nullcontext():
                return func(*args, **(kwargs or {}))

    wrapped = []
    for path, method, name in TIMED_CALLS:
        try:
            owner = operator.attrgetter(path)(model) if path else model
            function = getattr(owner, method)
        except AttributeError:  # not in this model (a policy step of None: the default gradient step)
            continue
        setattr(owner, method, timer.timed(function, name))
        wrapped.append((owner, method))
    optimizer = model.policy.optimizer
    hooks = [
        optimizer.register_step_pre_hook(lambda *_: timer.start("optimizer")),
        optimizer.register_step_post_hook(lambda *_: timer.stop()),
    ]
    try:
        with TimedBackward():
            yield timer
    finally:
        for hook in hooks:
            hook.remove()
        for owner, method in wrapped:
            delattr(owner, method)  # the class's method again


def _configure(spec: str) -> tuple[str, str, int, str | None, str | None]:
    """:return: algorithm, env, torch threads, entry and VecEnv of ``algo:env``, ``algo:env@threads``,
    ``algo[entry]:env...`` or ``algo:env[vec_env]...`` (``entry``: the key of the algorithm's file read whatever the env,
    as a campaign's ``entry``; ``vec_env``: one of :data:`benchmarks.harness.VEC_ENV_TYPES`, default ``dummy``)"""
    from benchmarks.harness import VEC_ENV_TYPES

    rest, _, threads = spec.partition("@")
    algo, sep, env = rest.partition(":")
    entry = vec_env = None
    if algo.endswith("]") and "[" in algo:
        algo, _, entry = algo[:-1].partition("[")
    if env.endswith("]") and "[" in env:
        env, _, vec_env = env[:-1].partition("[")
    if (
        not sep
        or not algo
        or not env
        or entry == ""
        or (vec_env is not None and vec_env not in VEC_ENV_TYPES)
        or (threads and not (threads.isdigit() and int(threads) >= 1))
    ):
        raise ValueError(
            f"a configuration is 'algo:env', 'algo:env@threads', 'algo[entry]:env' or 'algo:env[vec_env]' (vec_env one"
            f" of {VEC_ENV_TYPES}), got {spec!r}"
        )
    return algo, env, int(threads or 1), entry, vec_env


def matmul_rate(rows: int = 768, width: int = 256, seconds: float = 1.0) -> float:
    """
    :param rows: rows of the left operand (a training batch's, about)
    :param width: the hidden width (both other dimensions)
    :param seconds: process CPU time to measure for
    :return: GFLOP per second of process CPU time of ``(rows, width) @ (width, width)`` products, with this process's
        torch threads (the reference of the training step's achieved rate, :func:`_breakdown`)
    """
    import torch as th

    left, right = th.randn(rows, width), th.randn(width, width)
    for _ in range(20):
        left @ right
    count, start = 0, time.process_time()
    while (elapsed := time.process_time() - start) < seconds:
        for _ in range(50):
            left @ right
        count += 50
    return 2.0 * rows * width * width * count / elapsed / 1e9


def training_flops(model: Any, iterations: int = 5) -> float:
    """
    :param model: a PCL-family model that has trained (its replay can be sampled)
    :param iterations: training iterations counted (they train the model further)
    :return: matrix-multiply FLOPs per training iteration (forward, target and backward passes), counted by
        ``torch.utils.flop_counter.FlopCounterMode``
    """
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        for _ in range(iterations):
            model.train(gradient_steps=model.gradient_steps, batch_size=model.batch_size)
    return counter.get_total_flops() / iterations


@contextlib.contextmanager
def machine_load(n_processes: int) -> Iterator[None]:
    """Keep ``n_processes`` busy-looping processes running (a loaded machine) inside the block."""
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n_processes)]
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait()


class EnvLimit:
    """
    The env's own speed: ``n_envs`` copies in a ``DummyVecEnv`` with ``Monitor``, stepped with uniformly random actions
    (drawn for all the envs in one call per step), nothing else. ``learn`` mimics an algorithm's for :func:`measure`.
    """

    learning_starts = 0

    def __init__(self, env_id: str, seed: int, n_envs: int = ENV_LIMIT_ENVS) -> None:
        import numpy as np
        from gymnasium import spaces
        from stable_baselines3.common.env_util import make_vec_env

        self.env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
        self.n_envs, self.num_timesteps = n_envs, 0
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


def _breakdown(model: Any, steps: int) -> dict[str, Any]:
    """:return: process CPU seconds per part (:data:`PARTS`) of ``steps`` more env steps of training"""
    n_updates, start_steps = model._n_updates, model.num_timesteps
    with instrument(model, time.process_time) as timer:
        start = time.process_time()
        model.learn(steps, reset_num_timesteps=False)
        total = time.process_time() - start
    parts = {name: timer.totals.get(name, 0.0) for name in PARTS}
    parts["other"] += total - sum(parts.values())  # learn's own loop, callbacks
    return {
        "env_steps": model.num_timesteps - start_steps,
        "iterations": timer.calls["train"],
        "batches": model._n_updates - n_updates,
        "total_s": total,
        "parts_s": parts,
        "flops_per_iteration": training_flops(model),
    }


def measure(configs: Sequence[str], reps: int, steps: int | None, warmup: int, seed: int, breakdown: bool) -> dict[str, Any]:
    """
    :param configs: ``algo:env`` strings (``algo:env@threads``: with that many torch threads, default 1; ``algo[entry]``
        and ``env[vec_env]``: see :func:`_configure`)
    :param reps: timed repetitions per configuration (interleaved)
    :param steps: env steps per repetition (``None``: :data:`DEFAULT_STEPS` or :data:`STEPS`)
    :param warmup: env steps trained after ``learning_starts`` before timing
    :param seed: seed of every model
    :param breakdown: also time the parts of this package's algorithms (one extra repetition)
    :return: ``{"runs": {config: {...}}}`` with the steps per CPU second and per wall-clock second of each repetition,
        and the breakdowns
    """
    import torch as th

    from benchmarks.harness import make_experiment
    from sb3_pcl import PCL

    parsed = {spec: _configure(spec) for spec in configs}  # every configuration checked before any is built
    models, results = {}, {}
    for spec, (algo, env_id, threads, entry, vec_env) in parsed.items():
        th.set_num_threads(threads)
        if algo == ENV_LIMIT:
            model = EnvLimit(env_id, seed)
        else:
            hyperparams_dir = BASELINE_HYPERPARAMS_DIR if algo in BASELINE_DIR_ALGOS else None
            model = make_experiment(
                algo, env_id, seed, hyperparams_dir=hyperparams_dir, vec_env=vec_env, eval_env=False, entry=entry
            ).model
        if (before_timing := int(getattr(model, "learning_starts", 0) or 0) + warmup) > 0:
            model.learn(before_timing)
        models[spec] = model
        results[spec] = {
            "algo": algo,
            "env": env_id,
            "class": type(model).__name__,
            "vec_env": type(model.env.unwrapped).__name__,
            "n_envs": model.n_envs,
            "threads": threads,
            "steps_per_rep": steps if steps is not None else DEFAULT_STEPS.get(algo, STEPS),
            "steps_per_cpu_s": [],
            "steps_per_s": [],
        }
        print(f"built {spec} ({type(model).__name__}, {model.n_envs} envs), trained {model.num_timesteps} steps", flush=True)
    for rep in range(reps):
        for spec, model in models.items():
            run = results[spec]
            th.set_num_threads(run["threads"])
            start_steps, start_cpu, start = model.num_timesteps, time.process_time(), time.perf_counter()
            model.learn(run["steps_per_rep"], reset_num_timesteps=False)
            cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start
            run["steps_per_cpu_s"].append((model.num_timesteps - start_steps) / cpu)
            run["steps_per_s"].append((model.num_timesteps - start_steps) / wall)
            rates = f"{run['steps_per_cpu_s'][-1]:.0f} steps per CPU second, {run['steps_per_s'][-1]:.0f} per second"
            print(f"rep {rep + 1}/{reps} {spec}: {rates}", flush=True)
    for spec, model in models.items():
        run = results[spec]
        run["median_steps_per_cpu_s"] = statistics.median(run["steps_per_cpu_s"])
        run["median_steps_per_s"] = statistics.median(run["steps_per_s"])
        if breakdown and isinstance(model, PCL):
            th.set_num_threads(run["threads"])
            run["breakdown"] = _breakdown(model, run["steps_per_rep"])
            run["matmul_gflops"] = matmul_rate()
    return {"runs": results}


def load_text(load: int) -> str:
    """:return: how loaded the machine was, in words"""
    return f"Machine loaded with {load} busy-looping processes." if load else "No load added (`--load 0`)."


def _throughput(run: dict[str, Any]) -> float:
    """:return: a run's median env steps per CPU second (per wall-clock second for runs saved before CPU time was kept)"""
    return run.get("median_steps_per_cpu_s", run["median_steps_per_s"])


def _mujoco_table(runs: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """:return: the paragraphs of the per-task summary: Trust-PCL against TRPO and the env limit (none without such runs)"""
    tasks = [task for task in MUJOCO_TASKS if all(f"{algo}:{task}" in runs for algo in ("trust_pcl", "trpo", ENV_LIMIT))]
    if not tasks:
        return []
    header = ["Task", "Env limit", "Trust-PCL", "TRPO", "Trust-PCL / TRPO", "Trust-PCL / env limit"]
    if before:
        header += ["Trust-PCL before", "TRPO before", "Env limit before"]
    rows, met_trpo, met_quarter = [], 0, 0
    for task in tasks:
        limit, ours, trpo = (_throughput(runs[f"{algo}:{task}"]) for algo in (ENV_LIMIT, "trust_pcl", "trpo"))
        met_trpo += ours >= trpo
        met_quarter += ours >= limit / 4
        row = [task, f"{limit:.0f}", f"{ours:.0f}", f"{trpo:.0f}", f"{ours / trpo:.2f}", f"{ours / limit:.2f}"]
        if before:
            keys = (f"trust_pcl:{task}", f"trpo:{task}", f"{ENV_LIMIT}:{task}")
            row += [f"{_throughput(before[key]):.0f}" if key in before else "-" for key in keys]
        rows.append(row)
    return [
        "## Trust-PCL on the MuJoCo tasks: against TRPO and the env's limit",
        "Median env steps per CPU second (same run). Targets: Trust-PCL at least TRPO's throughput, and at least a "
        "quarter of the env's limit.",
        "\n".join(markdown_table(header, rows)),
        f"Trust-PCL at least TRPO's throughput on {met_trpo} of {len(tasks)} tasks; at least a quarter of the env's "
        f"limit on {met_quarter} of {len(tasks)}.",
    ]


def _vec_env_table(runs: dict[str, Any]) -> list[str]:
    """:return: the paragraphs comparing each ``algo:env[vec_env]`` run with its ``algo:env`` run (none without pairs)"""
    rows = []
    for spec, run in runs.items():
        _, env, _, _, vec_env = _configure(spec)
        plain = spec.replace(f"{env}[{vec_env}]", env)
        if vec_env is not None and plain != spec and plain in runs:
            ours, theirs = _throughput(run), _throughput(runs[plain])
            rows.append([plain, runs[plain].get("vec_env", "-"), f"{theirs:.0f}", run["vec_env"], f"{ours:.0f}"])
            rows[-1].append(f"{ours / theirs:.2f}x")
    if not rows:
        return []
    header = ["Configuration", "VecEnv", "Median CPU steps/s", "Other VecEnv", "Median CPU steps/s", "Speed-up"]
    return [
        "## Against another VecEnv",
        "Each `algo:env[vec_env]` configuration against the same entry on its default VecEnv, same run.",
        "\n".join(markdown_table(header, rows)),
    ]


def _breakdown_table(title: str, source: dict[str, Any]) -> list[str]:
    """:return: the paragraphs of where the time goes of the runs of ``source`` that have a breakdown (none if none)"""
    rows = []
    for spec, run in source.get("runs", {}).items():
        if "breakdown" in run:
            part = run["breakdown"]
            iterations, per_1000 = max(part["iterations"], 1), 1000.0 / max(part["env_steps"], 1)
            seconds = [*(part["parts_s"].get(name, 0.0) for name in PARTS), part["total_s"]]
            cells = [f"{1e3 * value / iterations:.2f} / {1e3 * value * per_1000:.0f}" for value in seconds]
            rows.append([spec, str(part["iterations"]), str(part["batches"]), *cells])
    if not rows:
        return []
    return [
        f"## {title}where the time goes (one extra repetition with timers)",
        f"Milliseconds of {source.get('breakdown_clock', 'wall-clock')} time per training iteration / per 1000 env "
        "steps. *env*: the VecEnv's steps; *acting*: the acting policy's forward passes; *collection*: the rest of "
        "collecting (storing transitions, SB3's loop); *sampling*: drawing the replay's path segments; *forward*: the "
        "policy's and the values' forward passes and the consistency; *backward*: autograd; *optimizer*: the "
        "optimiser's step; *value_fit*: a separate value fit; *training*: the rest of a training iteration (target "
        "update, statistics, logging); *other*: the learn loop and callbacks. Runs measured before *env*, *acting* and "
        "*training* were split out count them in *collection* and *other*.",
        "\n".join(markdown_table(["Configuration", "Iterations", "Batches", *PARTS, "Total"], rows)),
    ]


def _flops_table(source: dict[str, Any]) -> list[str]:
    """:return: the paragraphs of the training step's achieved FLOP rate against the matmul rate (none without data)"""
    rows = []
    for spec, run in source.get("runs", {}).items():
        part = run.get("breakdown", {})
        if "flops_per_iteration" not in part or "matmul_gflops" not in run:
            continue
        parts, steps, iterations = part["parts_s"], max(part["env_steps"], 1), max(part["iterations"], 1)
        training = sum(parts.get(name, 0.0) for name in TRAINING_PARTS)
        acting_env = parts.get("env", 0.0) + parts.get("acting", 0.0)
        achieved = part["flops_per_iteration"] * iterations / max(training, 1e-12) / 1e9
        rows.append([
            spec,
            f"{1e3 * part['total_s'] / steps:.3f}",
            f"{1e3 * parts.get('env', 0.0) / steps:.3f}",
            f"{1e3 * parts.get('acting', 0.0) / steps:.3f}",
            f"{1e3 * (part['total_s'] - training - acting_env) / steps:.3f}",
            f"{1e3 * training / steps:.3f} ({training / part['total_s']:.0%})",
            f"{part['flops_per_iteration'] / 1e9:.3f}",
            f"{achieved:.1f}",
            f"{run['matmul_gflops']:.1f}",
            f"{achieved / run['matmul_gflops']:.2f}",
        ])  # fmt: skip
    if not rows:
        return []
    header = ["Configuration", "CPU ms / env step", "env", "acting", "collection, loop", "training", "GFLOP / iteration"]
    header += ["Training GFLOP/s", "Matmul GFLOP/s", "Ratio"]
    return [
        "## The training step against the matmul rate",
        "CPU milliseconds per env step of the timed repetition, split into the env's steps, the acting policy's passes, "
        "the rest of collection and the learn loop, and the training iterations (share of the total). GFLOP per "
        "iteration: the matrix products of an iteration (forward, target and backward passes) as "
        "`torch.utils.flop_counter` counts them. Training GFLOP/s: those FLOPs over the training iterations' CPU time. "
        "Matmul GFLOP/s: this process's `(768, 256) @ (256, 256)` products, measured in the same run with the same "
        "threads. Ratio: training over matmul.",
        "\n".join(markdown_table(header, rows)),
    ]


def write_report(data: dict[str, Any], out: Path, baseline: dict[str, Any] | None) -> Path:
    """Write ``results.md`` and ``speed.png`` (the median throughputs; a baseline's in grey) to ``out``; :return: its path"""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    runs, before = data["runs"], (baseline or {}).get("runs", {})
    header = ["Configuration", "Class", "Envs", "VecEnv", "Steps per rep", "Median CPU steps/s", "Repetitions"]
    header.append("Wall steps/s")
    rows = []
    for spec, run in runs.items():
        repetitions = ", ".join(f"{value:.0f}" for value in run.get("steps_per_cpu_s", run["steps_per_s"]))
        row = [spec, run["class"], run["n_envs"], run.get("vec_env", "-"), run["steps_per_rep"]]
        row += [f"{_throughput(run):.0f}", repetitions]
        row.append(f"{run['median_steps_per_s']:.0f}")
        if before:
            old = _throughput(before[spec]) if spec in before else None
            row += [f"{old:.0f}" if old else "-", f"{_throughput(run) / old:.2f}x" if old else "-"]
        rows.append(row)
    paragraphs = [
        "# Training throughput",
        f"Command: `{data['command']}`",
        f"Machine: {data['machine']}; {data['versions']}; {data['date']}. "
        f"{load_text(data.get('load', 0))} One torch thread (`@N`: N threads); seed {data['seed']}; "
        f"{data['reps']} interleaved repetitions per configuration after `learning_starts` + {data['warmup']} warm-up "
        "steps; the shipped rl-zoo3 entries. `env:<task>`: the env's limit, the task in a "
        f"{ENV_LIMIT_ENVS}-env `DummyVecEnv` with `Monitor` stepped with random actions.",
        "Throughput is env steps per second of **process CPU time** (`time.process_time`), training included: what a "
        "CPU-time budget counts. It is the measure to compare on a shared machine; wall-clock steps/s, also given, "
        "falls with whatever else the machine runs.",
        *_mujoco_table(runs, before),
        *_vec_env_table(runs),
        "## Env steps per CPU second, training included (median of the repetitions)",
        "\n".join(markdown_table(header + (["Before (median)", "After / before"] if before else []), rows)),
    ]
    if baseline:
        when = f"{baseline.get('revision', '?')}, {baseline.get('date', '?')}"
        paragraphs.append(f"Before: `{baseline.get('command', '?')}` at {when}.")
    paragraphs += _flops_table(data)
    paragraphs += _breakdown_table("", data) + _breakdown_table("Before: ", baseline or {})
    path = out / "results.md"
    path.write_text("\n\n".join(paragraphs) + "\n")
    bars = {"now": [_throughput(run) for run in runs.values()]}
    if before:
        bars = {"before": [_throughput(before[spec]) if spec in before else 0.0 for spec in runs], **bars}
    labels = [spec.replace(":", "\n").replace("[", "\n[") for spec in runs]
    slanted = max(len(line) for label in labels for line in label.splitlines()) > 14  # wider than a bar: slant them
    frame = pd.DataFrame(bars, index=labels)
    with saved_figure(out / "speed.png", figsize=(max(6.0, 1.1 * len(runs) + 2), 4.5 + 1.5 * slanted)) as (_, ax):
        frame.plot.bar(
            ax=ax,
            rot=30 if slanted else 0,
            color=["#bbbbbb", "#3070b0"][-len(bars) :],
            legend=bool(before),
            ylabel="env steps per CPU second (training included)",
            title="Median throughput, one torch thread",
        )
        if slanted:
            for label in ax.get_xticklabels():
                label.set_horizontalalignment("right")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Training throughput (env steps per CPU second); benchmarks/README.md")
    parser.add_argument(
        "--configs", nargs="+", default=list(DEFAULT_CONFIGS), help="algo:env[@threads], algo[entry]:env, algo:env[vec_env]"
    )
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions per configuration (default: 3)")
    parser.add_argument("--steps", type=int, default=None, help=f"env steps per repetition (default: {STEPS}, SAC/TD3 1000)")
    parser.add_argument("--warmup", type=int, default=2_000, help="env steps after learning_starts before timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-breakdown", action="store_true", help="skip the timed breakdown of our algorithms")
    parser.add_argument("--load", type=int, default=0, help="busy-looping processes running alongside (a loaded machine)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: benchmarks/results/speed)")
    parser.add_argument("--json", type=Path, default=None, help="also save the raw numbers to this JSON file")
    parser.add_argument("--baseline", type=Path, default=None, help="JSON of an earlier run: a 'before' column")
    parser.add_argument("--from-json", type=Path, default=None, help="write the report of this --json file, not measuring")
    args = parser.parse_args(argv)
    if args.reps < 1 or (args.steps is not None and args.steps < 1) or args.warmup < 0 or args.load < 0:
        raise SystemExit("--reps and --steps must be positive, --warmup and --load >= 0")
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    if args.from_json:
        data = json.loads(args.from_json.read_text())
    else:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        from benchmarks.harness import machine_info

        with machine_load(args.load):
            data = measure(args.configs, args.reps, args.steps, args.warmup, args.seed, not args.no_breakdown)
        info = machine_info()
        data.update(
            load=args.load,
            command=shlex.join(["python", "-m", "benchmarks.experiments.speed", *(sys.argv[1:] if argv is None else argv)]),
            machine=f"{info['cpu']}; {info['cores']} cores",
            versions=", ".join(f"{name} {info[name]}" for name in ("torch", "stable-baselines3", "sb3-contrib")),
            revision=info["git"],
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            seed=args.seed,
            reps=args.reps,
            warmup=args.warmup,
            breakdown_clock="process CPU",
        )
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(data, indent=2) + "\n")
    print(write_report(data, args.out, baseline).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
