"""
Benchmark harness: one run of a benchmark, an (algorithm, env, seed) with a step or CPU-time budget, evaluated along
the way (:func:`run_experiment`; grids of runs: :mod:`benchmarks.run`, campaigns: :mod:`benchmarks.campaign`).

Models are built by rl-zoo3's public ``ExperimentManager.setup_experiment()`` (the algorithms registered with
:func:`sb3_pcl.zoo.register_algorithms`; the entry chosen by :mod:`benchmarks.algorithms`): it applies a variant's
overrides as custom hyperparameters, preprocesses the entry (``lin_<x>`` schedules, ``normalize``, ``policy_kwargs``
strings, ``env_wrapper``, ``vec_env_wrapper``, ``callback``, ``frame_stack``, ``env_kwargs``, action noise) and
creates the training env and the evaluation env. Only rl-zoo3's ``learn()`` is replaced, by
:class:`BudgetEvalCallback`: it stops at the step budget and evaluates every ``eval_freq`` env steps (summed over the
parallel envs), with the evaluation time kept out of the training wall-clock and CPU time. With a CPU-time budget
(``cpu_budget``) it stops at that much process CPU time of training instead (or at the step cap, whichever comes
first), also evaluating at fixed CPU-time marks (``eval_cpu_seconds``), and progress-based schedules follow that
budget. With ``checkpoint_every``, a run saves a checkpoint (:mod:`benchmarks.checkpoint`) every that many CPU seconds,
outside the output folder, and a run started again resumes from it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import datetime
import hashlib
import importlib
import importlib.metadata
import io
import json
import math
import os
import platform
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize, unwrap_vec_wrapper

from benchmarks.algorithms import ALGORITHMS, REPO_ROOT, get_algorithm_class, load_hyperparams, resolve_entry, split_variant
from benchmarks.checkpoint import restore_checkpoint, save_checkpoint, write_atomically

EVAL_SEED_OFFSET = 1000
#: Seed offset of the envs' first reset after a resume (``seed + offset + steps at the checkpoint``): the restarted
#: episodes do not replay the run's first ones
RESUME_SEED_OFFSET = 2000
EVAL_COLUMNS: tuple[str, ...] = ("algo", "env", "seed", "timesteps", "mean_return", "std_return", "wall_time_s", "cpu_time_s")
EVAL_COLUMNS += ("fps", "curriculum_length")
#: ``eval``: deterministic episodes on a separate env; ``train``: mean return of the last 100 training episodes
#: (the model's ``ep_info_buffer``, gym's "solved" criterion of the algorithmic tasks)
METRICS = ("eval", "train")
#: Fractions of a CPU-time budget at which every run is evaluated and the equal-CPU-time table of ``results.md`` reports
TIME_FRACTIONS = (0.25, 0.5, 1.0)
#: ``--steps`` of a CPU-budget run given none: no step cap in practice
TIME_BUDGET_STEP_CAP = 10**12
#: Default interval of checkpoints in CPU seconds of training (when checkpoints are on)
CHECKPOINT_EVERY = 300.0
#: ``algorithmic`` is :class:`sb3_pcl.envs.AlgorithmicVecEnv` (the same episodes as ``dummy`` on the algorithmic tasks)
VEC_ENV_TYPES = ("dummy", "subproc", "algorithmic")
#: The files of a results folder (``runs/``: the tracebacks of failed runs and the folder's locks, git-ignored)
RUNS_DIRNAME = "runs"
EVALUATIONS_FILENAME = "evaluations.csv"
RUN_METADATA_FILENAME = "run_metadata.json"
CONFIG_FILENAME = "config.json"
SUMMARY_FILENAME = "results.md"


@dataclasses.dataclass
class Experiment:
    """A model ready to train (its training env attached), its evaluation env and the YAML's callbacks."""

    model: BaseAlgorithm
    eval_env: VecEnv | None
    callbacks: list[BaseCallback]
    hyperparams: dict[str, Any]
    hyperparams_source: str
    n_envs: int
    #: rl-zoo3's log folder of the run (the config it read), deleted with the experiment
    log_folder: tempfile.TemporaryDirectory[str] | None = dataclasses.field(default=None, repr=False)


def make_experiment(
    algo: str,
    env_id: str,
    seed: int,
    hyperparams_dir: str | Path | None = None,
    device: str = "cpu",
    env_packages: Sequence[str] = (),
    vec_env: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    eval_env: bool = True,
    verbose: int = 0,
    zoo_v4_entries: bool = False,
    entry: str | None = None,
) -> Experiment:
    """
    Build one run's model with rl-zoo3's ``ExperimentManager.setup_experiment()``: the chosen entry is written under the
    env id into a temporary config file (rl-zoo3's own lookup then reads it), rl-zoo3's log folder is a temporary folder
    deleted with the returned :class:`Experiment`, and the envs write no monitor files.

    :param algo: Benchmark name of an algorithm or variant
    :param env_id: Gymnasium env id
    :param seed: Seed of the model and training envs (``seed + i``); the evaluation env is seeded ``seed + 1000``
    :param hyperparams_dir: Folder searched first for the YAML files
    :param device: PyTorch device
    :param env_packages: Modules imported first (to register custom envs)
    :param vec_env: ``dummy``, ``subproc`` or ``algorithmic`` (default ``dummy``)
    :param overrides: Hyperparameters replacing the entry's (after the variant's), as rl-zoo3's ``--hyperparams``
    :param eval_env: Create the evaluation env (same wrappers; ``VecNormalize`` frozen, rewards not normalised)
    :param verbose: Verbosity of the model
    :param zoo_v4_entries: A baseline without an entry for a ``-v5`` env reads its ``-v4`` entry (:func:`resolve_entry`)
    :param entry: Read this key of the algorithm's file whatever the env (:func:`resolve_entry`)
    :return: The experiment
    """
    for package in env_packages:
        importlib.import_module(package)
    algo_class = get_algorithm_class(algo)
    custom, source = load_hyperparams(algo, env_id, hyperparams_dir, zoo_v4_entries, entry)
    custom.update(overrides or {})
    vec_env = vec_env or "dummy"
    if vec_env not in VEC_ENV_TYPES:
        raise ValueError(f"vec_env must be one of {VEC_ENV_TYPES}, got {vec_env!r}")

    # The entry, whatever its key, under the env id: rl-zoo3's documented lookup then reads it for this env
    path, key = resolve_entry(algo, env_id, hyperparams_dir, zoo_v4_entries, entry)
    # rl-zoo3 writes the config it read there; deleted with the Experiment
    log_folder = tempfile.TemporaryDirectory(prefix="sb3_pcl_benchmarks_", ignore_cleanup_errors=True)
    config = Path(log_folder.name) / "config.yml"
    chosen = (yaml.safe_load(path.read_text()) or {}).get(key)  # none: rl-zoo3 says that the entry is missing
    has_budget = chosen is None or "n_timesteps" in chosen
    if chosen is not None:
        chosen = {"n_timesteps": 1, **chosen}  # required by rl-zoo3, unused: the budget comes from the harness
    config.write_text(yaml.safe_dump({env_id: chosen} if chosen is not None else {"": None}))

    # Imported here: rl_zoo3 patches gymnasium's TimeLimit on import and pulls in optuna
    from rl_zoo3.exp_manager import ExperimentManager

    from sb3_pcl.zoo import register_algorithms

    register_algorithms()
    manager = ExperimentManager(
        argparse.Namespace(),
        ALGORITHMS[split_variant(algo)[0]].hyperparams_file,
        env_id,
        log_folder=log_folder.name,
        eval_freq=-1,
        seed=seed,
        verbose=verbose,
        vec_env_type="dummy" if vec_env == "algorithmic" else vec_env,
        device=device,
        config=str(config),
        hyperparams=custom or None,
    )
    if vec_env == "algorithmic":
        from sb3_pcl.envs import AlgorithmicVecEnv

        manager.vec_env_class = AlgorithmicVecEnv
    # no monitor files (the harness records the episodes; AlgorithmicVecEnv writes none)
    manager.save_path = None  # type: ignore[assignment]
    with contextlib.redirect_stdout(io.StringIO()):  # rl-zoo3 prints the hyperparameters it reads
        setup = manager.setup_experiment()
    assert setup is not None, "setup_experiment returns no model only when optimising hyperparameters"
    model, saved = setup
    if not has_budget:
        saved.pop("n_timesteps")
    if not isinstance(model, algo_class):
        model.get_env().close()  # type: ignore[union-attr]
        raise TypeError(f"rl-zoo3 built a {type(model).__name__} for {algo!r}, expected a {algo_class.__name__}")
    try:
        # ExperimentManager keeps the eval env kwargs of its constructor: use the entry's for both envs
        manager.eval_env_kwargs = manager.env_kwargs
        manager.seed = seed + EVAL_SEED_OFFSET
        evaluation = manager.create_envs(1, eval_env=True) if eval_env else None
    except BaseException:
        model.get_env().close()  # type: ignore[union-attr]
        raise
    return Experiment(model, evaluation, list(manager.callbacks), dict(saved), source, manager.n_envs, log_folder)


def curriculum_length(env: VecEnv | None) -> float:
    """
    :param env: A training env
    :return: The algorithmic tasks' curriculum ``min_length``: the shared one under ``SharedCurriculum``, else the mean
        over the envs; NaN for envs without a curriculum
    """
    if env is None:
        return math.nan
    try:
        from sb3_pcl.envs import SharedCurriculum

        shared = unwrap_vec_wrapper(env, SharedCurriculum)
        if shared is not None:
            return float(shared.min_length)  # type: ignore[attr-defined]
        lengths = [float(n) for n in env.get_attr("min_length") if isinstance(n, (int, float, np.integer))]
    except (ImportError, AttributeError):
        return math.nan
    return float(np.mean(lengths)) if lengths else math.nan


def _check_seconds(**values: float | None) -> None:
    """:raises ValueError: naming the first value that is given and is not a positive finite number of seconds"""
    for name, value in values.items():
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


class BudgetEvalCallback(BaseCallback):
    """
    Evaluate at step 0 and each time the env steps (summed over the parallel envs) reach the next multiple of
    ``eval_freq``; stop training when ``budget`` steps are spent, or at the first evaluation after step 0 that
    reaches ``stop_threshold``. Evaluations and checkpoints are kept out of the recorded training wall-clock
    (``wall_time_s``) and CPU time (``cpu_time_s``: ``time.process_time()`` of this process, so env stepping in it
    is included, but not the CPU time of other processes such as ``SubprocVecEnv`` workers).

    With ``cpu_budget``, training also stops at the first env step at which the training CPU time reaches it, and the
    run is also evaluated at the first env step past each of its :data:`TIME_FRACTIONS` below 1. The remaining progress
    that SB3's schedules read (``_current_progress_remaining``) then follows whichever budget ends the run:
    ``1 - max(steps / budget, cpu_time / cpu_budget)``. SB3 recomputes it from the step count during collection
    (``_update_current_progress_remaining``); for the duration of ``learn`` the callback shadows that method on the
    model instance with one that also takes the CPU fraction, so every progress-based schedule (rl-zoo3's
    ``lin_<x>``, this package's ``ent_coef`` / ``tau`` schedules) anneals over the CPU budget. With
    ``eval_cpu_seconds``, the run is also evaluated at the first env step past each multiple of that many CPU seconds.
    The clock is read only between env steps: a run overshoots a mark by at most one env step or one update phase
    (PPO's epochs, an off-policy algorithm's gradient steps), and the records hold the actual times.

    With ``checkpoint_dir``, a checkpoint (:func:`benchmarks.checkpoint.save_checkpoint`: the model, its replay buffer,
    ``VecNormalize`` statistics, random states and :meth:`state`) is written there every ``checkpoint_every`` CPU
    seconds of training, at the start of a collection (after the last update, so that every step counted was trained
    on). :meth:`load_state` continues the counters and the evaluation history of one.

    :param eval_env: Evaluation env (``metric="eval"``); ``VecNormalize`` statistics are copied from the training env
    :param eval_freq: Evaluation interval in env steps
    :param n_eval_episodes: Deterministic episodes per evaluation
    :param budget: Step budget (with ``cpu_budget``: a cap)
    :param eval_at_start: Evaluate the untrained policy at step 0
    :param metric: ``"eval"`` or ``"train"`` (see :data:`METRICS`)
    :param stop_threshold: Stop at the first evaluation after step 0 reaching it (``None``: spend the budget)
    :param progress: Where the records so far go after every evaluation: a CSV path (rewritten, ``progress_columns``
        first), or a callable taking them as a ``DataFrame`` (``progress_columns`` first)
    :param progress_columns: Constant columns of the progress records (algo, env, seed)
    :param cpu_budget: Budget of training CPU time in seconds (``None``: none)
    :param eval_cpu_seconds: Evaluation interval in seconds of training CPU time (``None``: only at step multiples)
    :param checkpoint_dir: Folder of the run's checkpoints (``None``: no checkpoints)
    :param checkpoint_every: Checkpoint interval in seconds of training CPU time
    :param stop_below: ``(by_steps, value)``: stop at the first evaluation at or past ``by_steps`` steps if the best
        evaluation after step 0 so far is below ``value`` (``stopped_by_rule``)
    """

    def __init__(
        self,
        eval_env: VecEnv | None,
        eval_freq: int,
        n_eval_episodes: int,
        budget: int,
        eval_at_start: bool = True,
        metric: str = "eval",
        stop_threshold: float | None = None,
        progress: str | Path | Callable[[pd.DataFrame], None] | None = None,
        progress_columns: Mapping[str, Any] | None = None,
        cpu_budget: float | None = None,
        eval_cpu_seconds: float | None = None,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: float = CHECKPOINT_EVERY,
        stop_below: tuple[int, float] | None = None,
    ):
        super().__init__(verbose=0)
        if eval_freq <= 0 or n_eval_episodes <= 0 or budget <= 0:
            raise ValueError("eval_freq, n_eval_episodes and budget must be positive")
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
        _check_seconds(cpu_budget=cpu_budget, eval_cpu_seconds=eval_cpu_seconds, checkpoint_every=checkpoint_every)
        self.eval_env, self.eval_freq, self.n_eval_episodes, self.budget = eval_env, eval_freq, n_eval_episodes, budget
        self.eval_at_start, self.metric, self.stop_threshold = eval_at_start, metric, stop_threshold
        self.cpu_budget, self.eval_cpu_seconds = cpu_budget, eval_cpu_seconds
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.checkpoint_every, self.stop_below = checkpoint_every, stop_below
        self.progress = Path(progress) if isinstance(progress, (str, Path)) else progress
        self.progress_columns = dict(progress_columns or {})
        self.records: list[dict[str, float]] = []
        self.stopped_at_threshold = self.stopped_at_cpu_budget = self.stopped_by_rule = False
        self._wall_offset = self._cpu_offset = self._last_checkpoint = 0.0  # continued from a checkpoint
        self._start, self._cpu_start, self._excluded_wall, self._excluded_cpu = 0.0, 0.0, 0.0, 0.0
        self._next_eval, self._next_time_eval = eval_freq, self._time_mark_after(0.0)
        self._resumed_cpu_mark: float | None = None

    def train_time(self) -> float:
        """:return: Seconds of training wall-clock (over all sessions of a resumed run), evaluation excluded"""
        return self._wall_offset + time.perf_counter() - self._start - self._excluded_wall

    def train_cpu_time(self) -> float:
        """:return: Process CPU seconds (``time.process_time()``) of training over all sessions of a resumed run, env
        stepping included, evaluation and checkpoints excluded"""
        return self._cpu_offset + time.process_time() - self._cpu_start - self._excluded_cpu

    @contextlib.contextmanager
    def _excluded(self) -> Iterator[None]:
        """Keep the time spent inside (evaluation, checkpoints) out of the training time."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self._excluded_wall += time.perf_counter() - wall
            self._excluded_cpu += time.process_time() - cpu

    def _time_mark_after(self, seconds: float) -> float:
        """:return: The first CPU-time evaluation mark after ``seconds`` of training (``inf`` without one)"""
        marks = [math.inf]
        if self.eval_cpu_seconds is not None:
            marks.append((math.floor(seconds / self.eval_cpu_seconds) + 1) * self.eval_cpu_seconds)
        if self.cpu_budget is not None:
            marks += [fraction * self.cpu_budget for fraction in TIME_FRACTIONS if fraction * self.cpu_budget > seconds]
        return min(mark for mark in marks if mark > seconds)

    def state(self) -> dict[str, Any]:
        """:return: What a checkpoint holds of the run besides the model: counters and the evaluation history"""
        return {
            "timesteps": int(self.model.num_timesteps),
            "cpu_time_s": self.train_cpu_time(),
            "wall_time_s": self.train_time(),
            "next_cpu_mark": self._next_time_eval,  # the CPU time may pass a mark between the last step and now
            "records": self.records,
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from a checkpoint's :meth:`state`: the training times go on from its counters, the records follow."""
        self.records = [dict(record) for record in state["records"]]
        self._wall_offset, self._cpu_offset = float(state["wall_time_s"]), float(state["cpu_time_s"])
        self._last_checkpoint = self._cpu_offset
        self._resumed_cpu_mark = float(state["next_cpu_mark"])

    def cpu_budget_spent(self) -> bool:
        """:return: Whether the CPU budget was spent before this session (a run resumed from its last checkpoint)"""
        return self.cpu_budget is not None and self._cpu_offset >= self.cpu_budget

    def _on_training_start(self) -> None:
        self._start, self._cpu_start = time.perf_counter(), time.process_time()
        self._excluded_wall = self._excluded_cpu = 0.0
        self._next_eval = (self.model.num_timesteps // self.eval_freq + 1) * self.eval_freq
        self._next_time_eval = self._resumed_cpu_mark or self._time_mark_after(self.train_cpu_time())
        if self.cpu_budget is not None:
            self._follow_cpu_budget()
        if self.eval_at_start and not self.records:
            self.evaluate()

    def _follow_cpu_budget(self) -> None:
        """Shadow the model's ``_update_current_progress_remaining`` so that the progress also counts CPU time."""
        model, cpu_budget = self.model, self.cpu_budget
        assert cpu_budget is not None
        by_steps = type(model)._update_current_progress_remaining

        def update_progress(num_timesteps: int, total_timesteps: int) -> None:
            by_steps(model, num_timesteps, total_timesteps)
            by_cpu = 1.0 - self.train_cpu_time() / cpu_budget
            model._current_progress_remaining = max(0.0, min(model._current_progress_remaining, by_cpu))

        model._update_current_progress_remaining = update_progress  # type: ignore[method-assign]

    def _on_training_end(self) -> None:
        self.model.__dict__.pop("_update_current_progress_remaining", None)

    def _on_rollout_start(self) -> None:
        if self.checkpoint_dir is not None and self.train_cpu_time() - self._last_checkpoint >= self.checkpoint_every:
            self.save_checkpoint()

    def save_checkpoint(self) -> Path:
        """:return: The folder of a new checkpoint of the run (model, buffers, random states, :meth:`state`)"""
        assert self.checkpoint_dir is not None, "no checkpoint_dir"
        with self._excluded():
            state = self.state()
            folder = save_checkpoint(self.checkpoint_dir, self.model, state)
        self._last_checkpoint = state["cpu_time_s"]
        return folder

    def _on_step(self) -> bool:
        seconds = self.train_cpu_time()
        if self.model.num_timesteps >= self._next_eval or seconds >= self._next_time_eval:
            record = self.evaluate()
            self._next_eval = (self.model.num_timesteps // self.eval_freq + 1) * self.eval_freq
            self._next_time_eval = self._time_mark_after(seconds)
            if self.stop_threshold is not None and record["mean_return"] >= self.stop_threshold:
                self.stopped_at_threshold = True
                return False
            if self._below_stop_rule():
                self.stopped_by_rule = True
                return False
        if self.cpu_budget is not None and seconds >= self.cpu_budget:
            self.stopped_at_cpu_budget = True
            return False
        return self.model.num_timesteps < self.budget

    def _below_stop_rule(self) -> bool:
        """:return: Whether ``stop_below`` stops the run at its last evaluation"""
        if self.stop_below is None or self.records[-1]["timesteps"] < self.stop_below[0]:
            return False
        best = max((record["mean_return"] for record in self.records if record["timesteps"] > 0), default=-math.inf)
        return not best >= self.stop_below[1]

    def evaluate(self) -> dict[str, float]:
        """:return: The new record (``timesteps, mean_return, std_return, wall_time_s, cpu_time_s, fps,
        curriculum_length``)"""
        train_time, train_cpu_time = self.train_time(), self.train_cpu_time()
        with self._excluded():
            returns = self._returns()
        steps = int(self.model.num_timesteps)
        record = {
            "timesteps": steps,
            "mean_return": float(np.mean(returns)) if returns else math.nan,
            "std_return": float(np.std(returns)) if returns else math.nan,
            "wall_time_s": train_time,
            "cpu_time_s": train_cpu_time,
            "fps": steps / train_time if steps > 0 and train_time > 0 else math.nan,
            "curriculum_length": curriculum_length(self.model.get_env()),
        }
        self.records.append(record)
        if self.progress is not None:
            with self._excluded():  # writing the records is not training either
                if isinstance(self.progress, Path):
                    write_atomically(self.progress, self.evaluations().to_csv(index=False))
                else:
                    self.progress(self.evaluations())
        return record

    def evaluations(self) -> pd.DataFrame:
        """:return: The records so far, after the constant ``progress_columns``"""
        return pd.DataFrame([{**self.progress_columns, **row} for row in self.records])

    def _returns(self) -> list[float]:
        """:return: The returns of this evaluation (:data:`METRICS`)"""
        if self.metric == "train":
            return [float(info["r"]) for info in self.model.ep_info_buffer or []]
        assert self.eval_env is not None, "metric 'eval' needs an evaluation env"
        train_norm, eval_norm = self.model.get_vec_normalize_env(), unwrap_vec_normalize(self.eval_env)
        if isinstance(train_norm, VecNormalize) and eval_norm is not None:
            eval_norm.obs_rms = copy.deepcopy(train_norm.obs_rms)
            eval_norm.training = False
        episode_returns, _ = evaluate_policy(
            self.model, self.eval_env, self.n_eval_episodes, deterministic=True, return_episode_rewards=True, warn=False
        )
        return [float(value) for value in episode_returns]  # type: ignore[union-attr]


def _spec_reward_threshold(env_id: str) -> float | None:
    """:return: The env's ``spec.reward_threshold`` (``None`` when it has none or is not registered)"""
    try:
        import gymnasium as gym

        threshold = gym.spec(env_id).reward_threshold
    except Exception:
        return None
    return None if threshold is None else float(threshold)


def _jsonable(value: Any) -> Any:
    """:return: ``value`` with containers converted recursively and other objects by ``repr``"""
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value if isinstance(value, (bool, int, float, str)) or value is None else repr(value)


@dataclasses.dataclass(frozen=True)
class RunTask:
    """
    One (algo, env, seed) run, as sent to a worker process; the other fields are the options of ``python -m
    benchmarks.run`` (``threshold``: the env's ``--threshold``, default its ``spec.reward_threshold``; ``cpu_budget``
    and ``eval_cpu_seconds`` in seconds of training CPU time, ``steps`` then being a cap; ``entry``: the key of the
    algorithm's file to read whatever the env; ``checkpoint_dir``: the run's checkpoint folder (``None``: no
    checkpoints), written every ``checkpoint_every`` CPU seconds and resumed from when the run starts; ``stop_below``:
    ``(by_steps, value)``, see :class:`BudgetEvalCallback`).
    """

    algo: str
    env: str
    seed: int
    steps: int
    eval_freq: int
    n_eval_episodes: int = 10
    out_dir: str = "benchmarks/runs/latest"
    hyperparams_dir: str | None = None
    device: str = "cpu"
    env_packages: tuple[str, ...] = ()
    eval_at_start: bool = True
    metric: str = "eval"
    stop_at_threshold: bool = False
    threshold: float | None = None
    vec_env: str | None = None
    cpu_budget: float | None = None
    eval_cpu_seconds: float | None = None
    zoo_v4_entries: bool = False
    entry: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: float = CHECKPOINT_EVERY
    stop_below: tuple[int, float] | None = None

    def __post_init__(self) -> None:
        if self.steps <= 0 or self.eval_freq <= 0 or self.n_eval_episodes <= 0:
            raise ValueError("steps, eval_freq and n_eval_episodes must be positive")
        _check_seconds(
            cpu_budget=self.cpu_budget, eval_cpu_seconds=self.eval_cpu_seconds, checkpoint_every=self.checkpoint_every
        )
        if self.cpu_budget is not None and self.vec_env == "subproc":
            raise ValueError(
                "cpu_budget with vec_env 'subproc': the process CPU time of a run does not count its env worker "
                "processes, so the budget would leave out the env stepping; use 'dummy' (or 'algorithmic')"
            )
        if self.stop_below is not None and (len(self.stop_below) != 2 or not self.stop_below[0] > 0):
            raise ValueError(f"stop_below must be (by_steps > 0, best_return), got {self.stop_below!r}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.vec_env is not None and self.vec_env not in VEC_ENV_TYPES:
            raise ValueError(f"vec_env must be one of {VEC_ENV_TYPES}, got {self.vec_env!r}")

    @property
    def name(self) -> str:
        """:return: The run's file name stem ``<algo>__<env>__seed<seed>``"""
        return run_name(self.algo, self.env, self.seed)


#: Options recorded in the metadata and ``config.json`` only when set, so that the files of a step-budget grid stay as
#: they were (``checkpoint_every`` only with a ``checkpoint_dir``, which is never recorded: it is this machine's)
TIME_OPTIONS = ("cpu_budget", "eval_cpu_seconds", "zoo_v4_entries", "entry", "checkpoint_every", "stop_below")


def _task_options(task: RunTask) -> dict[str, Any]:
    """:return: The task's fields, those of :data:`TIME_OPTIONS` only when set"""
    options = {
        key: value for key, value in dataclasses.asdict(task).items() if key not in TIME_OPTIONS or value not in (None, False)
    }
    if task.checkpoint_dir is None:
        options.pop("checkpoint_every")
    options.pop("checkpoint_dir")
    return options


def run_checkpoint_dir(root: str | Path, out_dir: str | Path, algo: str, env_id: str, seed: int) -> str:
    """
    :param root: Folder of all checkpoints (:func:`benchmarks.checkpoint.default_checkpoint_root`)
    :param out_dir: The run's output folder (runs of different folders never share checkpoints)
    :return: The run's checkpoint folder ``<root>/<out folder name>-<hash of its path>/<run name>``, the path taken
        relative to the repository when the folder is inside it: a fresh checkout of the repository at the same or
        another place (the next session's, a second worktree) resumes the same runs
    """
    out = Path(out_dir).resolve()
    where = out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out
    key = f"{safe_name(out.name)}-{hashlib.sha256(where.as_posix().encode()).hexdigest()[:10]}"
    return str(Path(root).expanduser().resolve() / key / run_name(algo, env_id, seed))


def run_name(algo: str, env_id: str, seed: int) -> str:
    """:return: File-name-safe identifier of a run (``+`` and ``/`` become ``-``)"""
    return f"{safe_name(algo)}__{safe_name(env_id)}__seed{seed}"


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


def run_experiment(
    task: RunTask,
    progress_path: str | Path | Callable[[pd.DataFrame], None] | None = None,
    callbacks: Sequence[BaseCallback] = (),
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """
    Train one run in the current process (one torch thread), evaluating along the way. With ``task.checkpoint_dir``,
    it resumes from the run's last checkpoint there if there is one (:func:`benchmarks.checkpoint.restore_checkpoint`:
    counters, schedules, replay buffer and evaluation history continue; the episodes that were running restart) and
    writes checkpoints as it goes; they stay after the run (delete them with
    :func:`benchmarks.checkpoint.remove_checkpoints` once the results are stored).

    :param task: The run
    :param progress_path: Where the evaluations so far go after each evaluation: a CSV rewritten, or a callable
    :param callbacks: More callbacks for ``learn`` (after the harness's own and the entry's)
    :return: Its evaluations (columns :data:`EVAL_COLUMNS`) and metadata (``resumed_from``: the step count of the
        checkpoint it started from, 0 for a fresh start)
    """
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    experiment = make_experiment(
        task.algo,
        task.env,
        task.seed,
        task.hyperparams_dir,
        task.device,
        task.env_packages,
        task.vec_env,
        eval_env=task.metric == "eval",
        zoo_v4_entries=task.zoo_v4_entries,
        entry=task.entry,
    )
    train_env = experiment.model.get_env()
    try:
        threshold = task.threshold if task.threshold is not None else _spec_reward_threshold(task.env)
        if task.stop_at_threshold and threshold is None:
            raise ValueError(f"stop_at_threshold needs a reward threshold and {task.env} has none: give one (--threshold)")
        callback = BudgetEvalCallback(
            experiment.eval_env,
            task.eval_freq,
            task.n_eval_episodes,
            task.steps,
            task.eval_at_start,
            task.metric,
            threshold if task.stop_at_threshold else None,
            progress_path,
            {"algo": task.algo, "env": task.env, "seed": task.seed},
            task.cpu_budget,
            task.eval_cpu_seconds,
            task.checkpoint_dir,
            task.checkpoint_every,
            task.stop_below,
        )
        model, resumed_from = experiment.model, 0
        restored = restore_checkpoint(task.checkpoint_dir, model) if task.checkpoint_dir is not None else None
        if restored is not None:
            model, state = restored
            callback.load_state(state)
            resumed_from = int(model.num_timesteps)
            assert train_env is not None
            train_env.seed(task.seed + RESUME_SEED_OFFSET + resumed_from)  # the restarted episodes are new ones
        remaining = task.steps - model.num_timesteps
        if remaining > 0 and not callback.cpu_budget_spent():
            model.learn(
                total_timesteps=remaining,
                callback=[callback, *experiment.callbacks, *callbacks],
                reset_num_timesteps=resumed_from == 0,
            )
        if not callback.records or callback.records[-1]["timesteps"] != model.num_timesteps:
            callback.evaluate()
    finally:
        for env in (experiment.eval_env, train_env):
            if env is not None:
                env.close()
    frame = callback.evaluations().reindex(columns=list(EVAL_COLUMNS))
    final = frame.iloc[-1]
    metadata = {
        **{key: value for key, value in _task_options(task).items() if key not in ("out_dir", "threshold")},
        "algorithm_class": f"{type(model).__module__}.{type(model).__qualname__}",
        "n_envs": experiment.n_envs,
        "vec_env": type(train_env.unwrapped).__name__ if train_env is not None else None,
        "hyperparams_source": experiment.hyperparams_source,
        "hyperparams": _jsonable(experiment.hyperparams),
        "reward_threshold": threshold,
        "stopped_at_threshold": callback.stopped_at_threshold,
        "final_timesteps": int(final["timesteps"]),
        "final_mean_return": float(final["mean_return"]),
        "final_curriculum_length": float(final["curriculum_length"]),
        "train_time_s": float(final["wall_time_s"]),
        "train_cpu_time_s": float(final["cpu_time_s"]),
        "total_time_s": time.perf_counter() - start,
    }
    if task.cpu_budget is not None:
        metadata["stopped_at_cpu_budget"] = callback.stopped_at_cpu_budget or callback.cpu_budget_spent()
    if task.stop_below is not None:
        metadata["stopped_by_rule"] = callback.stopped_by_rule
    if task.checkpoint_dir is not None:
        metadata["resumed_from"] = resumed_from
    return frame, _jsonable(metadata)


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def git_revision() -> str:
    """:return: Short commit of the repository (``+dirty`` with uncommitted changes to tracked files), or ``unknown``"""
    try:
        git = ["git", "-C", str(REPO_ROOT)]
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit.strip() + ("+dirty" if dirty.strip() else "")


def machine_info() -> dict[str, str]:
    """:return: Platform, CPU model, core count, Python and library versions, git revision"""
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    info = {"platform": platform.platform(), "cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version()}
    for package in ("torch", "stable-baselines3", "sb3-contrib", "rl_zoo3", "gymnasium", "numpy"):
        info[package] = package_version(package)
    info["git"] = git_revision()
    return info


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def read_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.is_file() else default
