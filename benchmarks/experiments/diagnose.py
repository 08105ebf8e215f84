"""
What limits an algorithm on a task: one training run of its rl-zoo3 entry (the harness's model and seeding, one torch
thread), with each training episode's reward split into the env's ``reward_*`` info components, next to the algorithm's
logged statistics (``train/lambda``, ``train/entropy``, ...), both averaged over blocks of ``--block`` env steps.

    python -m benchmarks.experiments.diagnose --algo trust_pcl --env Ant-v5 --steps 300000 \
        --out benchmarks/results/mujoco/diagnosis/ant

Writes ``episodes.csv``, ``progress.csv`` (SB3's CSV logger), ``diagnosis.md`` (the block table, a deterministic
evaluation at the end, the command, machine and hyperparameters) and ``diagnosis.png`` to ``--out``. With
``--eval-every-block`` each block ends with a deterministic evaluation too (``evaluations.csv``): its return and the
policy's mean actions before any clipping (their mean magnitude and the share of components outside ``[-1, 1]``).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import sync_envs_normalization

from benchmarks import harness
from benchmarks.reporting import markdown_table, number, saved_figure
from benchmarks.reporting import steps as format_steps

#: Logged statistics shown in the summary when the algorithm records them (``train/<name>``), in this order
TRAIN_STATS = ("lambda", "entropy", "kl_to_target", "explained_variance", "mean_abs_consistency", "value_fit_loss",
               "value_loss", "policy_loss")  # fmt: skip
COMPONENT_PREFIX = "reward_"
#: Columns of the block evaluations (:class:`BlockEvaluation`)
EVAL_COLUMNS = ("eval_return", "eval_abs_mean_action", "eval_saturated_share")


def evaluate_with_means(model: Any, env: Any, n_episodes: int) -> dict[str, float]:
    """
    Deterministic episodes of ``model`` on the VecEnv ``env`` (one env), as ``evaluate_policy`` plays them (the actions of
    ``model.predict``), recording the policy's deterministic actions before ``predict`` clips them.

    :return: ``eval_return`` (mean episode return), ``eval_abs_mean_action`` (mean ``|a|`` over steps and components of
        the unclipped deterministic action) and ``eval_saturated_share`` (share of those components with ``|a| > 1``)
    """
    import torch as th

    returns, magnitudes, saturated = [], [], []
    for _ in range(n_episodes):
        obs, done, total = env.reset(), False, 0.0
        while not done:
            with th.no_grad():
                mode = model.policy.get_distribution(model.policy.obs_to_tensor(obs)[0]).mode().cpu().numpy()
            magnitudes.append(float(np.abs(mode).mean()))
            saturated.append(float((np.abs(mode) > 1.0).mean()))
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, dones, _ = env.step(action)
            total += float(reward[0])
            done = bool(dones[0])
        returns.append(total)
    return {
        "eval_return": float(np.mean(returns)),
        "eval_abs_mean_action": float(np.mean(magnitudes)),
        "eval_saturated_share": float(np.mean(saturated)),
    }


class BlockEvaluation(BaseCallback):
    """At the end of every block of ``block`` env steps: :func:`evaluate_with_means` on ``eval_env``, one row each."""

    def __init__(self, eval_env: Any, block: int, n_episodes: int) -> None:
        super().__init__()
        self.eval_env, self.block, self.n_episodes = eval_env, block, n_episodes
        self.rows: list[dict[str, float]] = []

    def _evaluate(self) -> None:
        sync_envs_normalization(self.model.get_env(), self.eval_env)  # type: ignore[arg-type]
        evaluation = evaluate_with_means(self.model, self.eval_env, self.n_episodes)
        self.rows.append({"steps": float(self.num_timesteps), **evaluation})

    def _on_training_start(self) -> None:
        self._evaluate()  # the untrained policy

    def _on_step(self) -> bool:
        if self.num_timesteps // self.block > (self.num_timesteps - self.training_env.num_envs) // self.block:
            self._evaluate()
        return True


class EpisodeComponents(BaseCallback):
    """Record each finished training episode: return, length, terminated, the policy's mean action std, summed ``reward_*``."""

    def __init__(self) -> None:
        super().__init__()
        self.episodes: list[dict[str, float]] = []
        self._sums: list[collections.defaultdict[str, float]] = []

    def _on_training_start(self) -> None:
        self._sums = [collections.defaultdict(float) for _ in range(self.training_env.num_envs)]

    def _on_step(self) -> bool:
        for info, done, sums in zip(self.locals["infos"], self.locals["dones"], self._sums, strict=True):
            for key, value in info.items():
                if key.startswith(COMPONENT_PREFIX) and isinstance(value, (float, int, np.number)):
                    sums[key] += float(value)
            if done and "episode" in info:
                log_std = getattr(self.model.policy, "log_std", None)  # NaN without a state-independent std
                self.episodes.append(
                    {
                        "timesteps": float(self.num_timesteps),
                        "return": float(info["episode"]["r"]),
                        "length": float(info["episode"]["l"]),
                        "terminated": float(not info.get("TimeLimit.truncated", False)),
                        "policy_std": float(log_std.detach().exp().mean()) if log_std is not None else math.nan,
                        **sums,
                    }
                )
            if done:
                sums.clear()
        return True


def block_summary(
    episodes: pd.DataFrame, progress: pd.DataFrame, block: int, steps: int, evaluations: pd.DataFrame | None = None
) -> pd.DataFrame:
    """
    :param episodes: The records of :class:`EpisodeComponents`
    :param progress: The logger's CSV (``time/total_timesteps`` and ``train/*`` columns; may be empty)
    :param block: Env steps per block
    :param steps: The run's steps
    :param evaluations: The rows of :class:`BlockEvaluation` (``steps`` and :data:`EVAL_COLUMNS`), if any
    :return: Per block (``steps`` is its end): the episodes that ended in it, the mean of their columns, the mean of
        the :data:`TRAIN_STATS` logged in it, and the evaluation at its end
    """
    rows = []
    for end in range(block, steps + block, block):
        start = end - block
        row: dict[str, float] = {"steps": float(min(end, steps))}
        inside = episodes[(episodes["timesteps"] > start) & (episodes["timesteps"] <= end)] if len(episodes) else episodes
        row["episodes"] = float(len(inside))
        for column in episodes.columns.drop("timesteps", errors="ignore"):
            row[column] = float(inside[column].mean()) if len(inside) else math.nan
        if "time/total_timesteps" in progress:
            logged = progress[(progress["time/total_timesteps"] > start) & (progress["time/total_timesteps"] <= end)]
            for name in TRAIN_STATS:
                if f"train/{name}" in progress:
                    row[name] = float(logged[f"train/{name}"].mean()) if len(logged) else math.nan
        if evaluations is not None and len(evaluations):
            at_end = evaluations[evaluations["steps"] == row["steps"]]
            for name in EVAL_COLUMNS:
                row[name] = float(at_end[name].iloc[-1]) if len(at_end) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def plot(summary: pd.DataFrame, title: str, path: Path) -> None:
    """Save the block means against steps: the return with its components, then each other column, one panel each."""
    components = [column for column in summary.columns if column == "return" or column.startswith(COMPONENT_PREFIX)]
    others = [column for column in ("length", "terminated", "policy_std", *TRAIN_STATS, *EVAL_COLUMNS) if column in summary]
    rows = math.ceil((1 + len(others)) / 3)
    with saved_figure(path, rows, 3, dpi=90, figsize=(4.2 * 3, 3.0 * rows), squeeze=False) as (figure, axes):
        panels = list(axes.flat)
        for column in components:
            panels[0].plot(summary["steps"], summary[column], marker=".", label=column)
        panels[0].set_title("episode return and its components")
        panels[0].legend(fontsize=7)
        for axis, column in zip(panels[1:], others, strict=False):
            axis.plot(summary["steps"], summary[column], marker=".")
            axis.set_title(column)
        for axis in panels[1 + len(others) :]:
            axis.axis("off")
        for axis in panels:
            axis.set_xlabel("env steps")
        figure.suptitle(title)


def diagnose(
    algo: str,
    env_id: str,
    steps: int,
    out: Path,
    seed: int = 0,
    block: int | None = None,
    hyperparams_dir: str | None = None,
    overrides: dict[str, Any] | None = None,
    eval_episodes: int = 5,
    command: str = "",
    entry: str | None = None,
    eval_every_block: bool = False,
) -> pd.DataFrame:
    """
    Train one run and write the diagnosis to ``out`` (see the module docstring).

    :param algo: Benchmark name of an algorithm or variant
    :param env_id: Gymnasium env id
    :param steps: Env steps of training
    :param out: Output folder (created)
    :param seed: Seed
    :param block: Env steps per row of the summary (default ``steps // 10``)
    :param hyperparams_dir: Folder searched first for the YAML files
    :param overrides: Hyperparameters replacing the entry's (rl-zoo3's ``--hyperparams``)
    :param eval_episodes: Deterministic evaluation episodes at the end (0: none)
    :param command: The command line, recorded in ``diagnosis.md``
    :param entry: Read this key of the algorithm's file whatever the env (a campaign's ``entry``, e.g. ``Ant-v5``)
    :param eval_every_block: Also evaluate at the start and at the end of every block (``eval_episodes`` episodes,
        :class:`BlockEvaluation`)
    :return: The block summary
    """
    import torch

    if steps <= 0:
        raise ValueError(f"steps must be positive, got {steps}")
    block = block or max(steps // 10, 1)
    if block <= 0:
        raise ValueError(f"block must be positive, got {block}")
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    experiment = harness.make_experiment(
        algo, env_id, seed, hyperparams_dir, overrides=overrides, eval_env=eval_episodes > 0, entry=entry
    )
    model = experiment.model
    model.set_logger(configure(str(out), ["csv"]))
    recorder = EpisodeComponents()
    callbacks: list[BaseCallback] = [recorder, *experiment.callbacks]
    block_evaluation = None
    if eval_every_block and experiment.eval_env is not None:
        block_evaluation = BlockEvaluation(experiment.eval_env, block, eval_episodes)
        callbacks.append(block_evaluation)
    started = harness.now()
    clock = time.perf_counter()
    cpu_clock = time.process_time()
    model.learn(total_timesteps=steps, callback=callbacks)
    seconds, cpu_seconds = time.perf_counter() - clock, time.process_time() - cpu_clock
    evaluation: Any = (math.nan, math.nan)
    if experiment.eval_env is not None:
        sync_envs_normalization(model.get_env(), experiment.eval_env)  # type: ignore[arg-type]
        evaluation = evaluate_policy(model, experiment.eval_env, n_eval_episodes=eval_episodes, deterministic=True)
    model.logger.close()
    episodes = pd.DataFrame(recorder.episodes)
    episodes.to_csv(out / "episodes.csv", index=False)
    progress_path = out / "progress.csv"
    progress = pd.read_csv(progress_path) if progress_path.exists() and progress_path.stat().st_size else pd.DataFrame()
    evaluations = pd.DataFrame(block_evaluation.rows) if block_evaluation is not None else None
    if evaluations is not None:
        evaluations.to_csv(out / "evaluations.csv", index=False)
    summary = block_summary(episodes, progress, block, steps, evaluations)
    machine = harness.machine_info()
    header = [
        f"# Diagnosis: `{algo}` on {env_id}",
        "",
        f"Command: `{command}`",
        "",
        f"Seed {seed}, {steps} env steps in {seconds:.0f} s ({cpu_seconds:.0f} CPU-s, evaluations included), one torch "
        f"thread; {machine.get('cpu')}, "
        f"{machine.get('cores')} cores; git {machine.get('git')}; started {started}.",
        f"Hyperparameters: {experiment.hyperparams_source} "
        f"`{json.dumps(harness._jsonable(experiment.hyperparams), sort_keys=True)}`",
        "",
        f"Deterministic evaluation at the end ({eval_episodes} episodes): {number(evaluation[0])} ± {number(evaluation[1])}.",
        "",
        "Each row: the training episodes (stochastic policy) that ended in the block of env steps up to *steps*: their "
        "number, mean return, length, share that terminated (rather than being cut by the time limit), the policy's "
        "mean action std, each reward component summed over the episode; then the mean of the logged training "
        "statistics of the block."
        + (
            " *eval_*: the deterministic evaluation at the end of the block "
            f"({eval_episodes} episodes): its return, the mean |a| of the policy's deterministic actions before "
            "clipping, the share of their components outside [-1, 1]."
            if evaluations is not None
            else ""
        ),
    ]
    if evaluations is not None and len(evaluations) and evaluations["steps"].iloc[0] == 0:
        first = evaluations.iloc[0]
        header += [
            "",
            f"Untrained policy (step 0): eval_return {number(first['eval_return'])}, eval_abs_mean_action "
            f"{number(first['eval_abs_mean_action'])}, eval_saturated_share {number(first['eval_saturated_share'])}.",
        ]
    rows = [[format_steps(row[0]), *map(number, row[1:])] for row in summary.itertuples(index=False)]
    (out / "diagnosis.md").write_text("\n".join([*header, "", *markdown_table(list(summary.columns), rows)]) + "\n")
    plot(summary, f"{algo} on {env_id}, seed {seed}", out / "diagnosis.png")
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    from rl_zoo3.utils import StoreDict

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--algo", required=True, help="benchmark name of an algorithm or variant (as benchmarks.run)")
    parser.add_argument("--env", required=True, help="Gymnasium env id")
    parser.add_argument("--steps", type=int, required=True, help="env steps of training")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--block", type=int, default=None, help="env steps per row of the summary (default steps // 10)")
    parser.add_argument("--eval-episodes", type=int, default=5, help="deterministic evaluation episodes at the end")
    parser.add_argument("--hyperparams-dir", default=None, help="folder searched first for <algo>.yml and variant files")
    parser.add_argument("--hyperparams", nargs="+", action=StoreDict, help="overrides of the entry, as rl-zoo3's: key:value")
    parser.add_argument("--entry", default=None, help="read this key of <algo>.yml whatever the env (e.g. Ant-v5)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--eval-every-block", action="store_true", help="also evaluate at the end of every block")
    args = parser.parse_args(argv)
    command = shlex.join([Path(sys.executable).name, "-m", "benchmarks.experiments.diagnose", *(argv or sys.argv[1:])])
    summary = diagnose(
        args.algo, args.env, args.steps, args.out, args.seed, args.block, args.hyperparams_dir, args.hyperparams,
        args.eval_episodes, command, args.entry, args.eval_every_block,
    )  # fmt: skip
    print(summary.to_string(index=False, float_format=lambda value: f"{value:.4g}"))
    print(f"Wrote {args.out / 'diagnosis.md'} and {args.out / 'diagnosis.png'}")


if __name__ == "__main__":
    main()
