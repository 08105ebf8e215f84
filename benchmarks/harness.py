"""
Benchmark harness: one run of a benchmark, an (algorithm, env, seed) with a step or CPU-time budget, evaluated along
the way (:func:`run_experiment`; grids of runs: :mod:`benchmarks.run`, campaigns: :mod:`benchmarks.campaign`).

Models, their training env and their evaluation env are built by rl-zoo3's ``ExperimentManager.setup_experiment()``
with the entry chosen by :mod:`benchmarks.algorithms` (a variant's overrides as custom hyperparameters). Only its
``learn()`` is replaced, by :class:`BudgetEvalCallback`: budgets, evaluations and checkpoints
(:mod:`benchmarks.checkpoint`), from which a run started again resumes.
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
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize

from benchmarks.algorithms import ALGORITHMS, REPO_ROOT, get_algorithm_class, load_hyperparams, resolve_entry, split_variant
from benchmarks.checkpoint import BadFileError, reading, restore_checkpoint, save_checkpoint, write_atomically

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
#: rl-zoo3's log folder of a results folder: ``zoo/<algo>/<env>_<seed>/evaluations.npz``, what ``rl_zoo3.plots`` read
ZOO_DIRNAME = "zoo"


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
    Build one run's model with rl-zoo3's ``ExperimentManager.setup_experiment()``, which reads the chosen entry written
    under the env id into a temporary config file. The envs write no monitor files.

    :param algo: Benchmark name of an algorithm or variant
    :param env_id: Gymnasium env id
    :param seed: Seed of the model and training envs (``seed + i``); the evaluation env is seeded ``seed + 1000``
    :param hyperparams_dir: Folder searched first for the YAML files
    :param device: PyTorch device
    :param env_packages: Modules imported first (to register custom envs)
    :param vec_env: One of :data:`VEC_ENV_TYPES` (default ``dummy``)
    :param overrides: Hyperparameters replacing the entry's (after the variant's), as rl-zoo3's ``--hyperparams``
    :param eval_env: Create the evaluation env (same wrappers; ``VecNormalize`` frozen, rewards not normalised)
    :param verbose: Verbosity of the model
    :param zoo_v4_entries: As in :func:`benchmarks.algorithms.resolve_entry`
    :param entry: As in :func:`benchmarks.algorithms.resolve_entry`
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
    path, key = resolve_entry(algo, env_id, hyperparams_dir, zoo_v4_entries, entry)
    log_folder = tempfile.TemporaryDirectory(prefix="sb3_pcl_benchmarks_", ignore_cleanup_errors=True)
    config = Path(log_folder.name) / "config.yml"
    chosen = (yaml.safe_load(path.read_text()) or {}).get(key)
    # n_timesteps is required by rl-zoo3, unused (the harness sets the budget); without an entry rl-zoo3 says so
    config.write_text(yaml.safe_dump({"": None} if chosen is None else {env_id: {"n_timesteps": 1, **chosen}}))

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
    manager.save_path = None  # type: ignore[assignment]  # no monitor files: the harness records the episodes
    with contextlib.redirect_stdout(io.StringIO()):  # rl-zoo3 prints the hyperparameters it reads
        setup = manager.setup_experiment()
    assert setup is not None, "setup_experiment returns no model only when optimising hyperparameters"
    model, saved = setup
    if chosen is not None and "n_timesteps" not in chosen:
        saved.pop("n_timesteps")
    try:
        if not isinstance(model, algo_class):
            raise TypeError(f"rl-zoo3 built a {type(model).__name__} for {algo!r}, expected a {algo_class.__name__}")
        manager.eval_env_kwargs = manager.env_kwargs  # the manager keeps its constructor's: use the entry's for both
        manager.seed = seed + EVAL_SEED_OFFSET
        evaluation = manager.create_envs(1, eval_env=True) if eval_env else None
    except BaseException:
        model.get_env().close()  # type: ignore[union-attr]
        raise
    return Experiment(model, evaluation, list(manager.callbacks), dict(saved), source, manager.n_envs, log_folder)


def curriculum_length(env: VecEnv | None) -> float:
    """:return: The curriculum length of a training env (:func:`sb3_pcl.envs.curriculum_length`), NaN without one"""
    from sb3_pcl.envs import curriculum_length as length_of

    length = None if env is None else length_of(env)
    return math.nan if length is None else float(length)


@dataclasses.dataclass(frozen=True)
class RunTask:
    """
    One (algo, env, seed) run, as sent to a worker process; the other fields are the options of ``python -m
    benchmarks.run`` (``threshold``: default the env's ``spec.reward_threshold``; ``steps`` is a cap with a
    ``cpu_budget``; ``checkpoint_dir``: the run's checkpoint folder, ``None`` for no checkpoints), used by
    :func:`make_experiment` and :class:`BudgetEvalCallback`.
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
        for name in ("steps", "eval_freq", "n_eval_episodes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("cpu_budget", "eval_cpu_seconds", "checkpoint_every"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.vec_env is not None and self.vec_env not in VEC_ENV_TYPES:
            raise ValueError(f"vec_env must be one of {VEC_ENV_TYPES}, got {self.vec_env!r}")
        if self.cpu_budget is not None and self.vec_env == "subproc":
            raise ValueError(
                "cpu_budget with vec_env 'subproc': the process CPU time of a run does not count its env worker "
                "processes, so the budget would leave out the env stepping; use 'dummy' (or 'algorithmic')"
            )
        if self.stop_below is not None and (len(self.stop_below) != 2 or not self.stop_below[0] > 0):
            raise ValueError(f"stop_below must be (by_steps > 0, best_return), got {self.stop_below!r}")

    @property
    def name(self) -> str:
        """:return: The run's file name stem ``<algo>__<env>__seed<seed>``"""
        return run_name(self.algo, self.env, self.seed)


class BudgetEvalCallback(BaseCallback):
    """
    Train a :class:`RunTask` within its budgets, evaluating it at step 0 (``eval_at_start``), at each multiple of
    ``eval_freq`` env steps (summed over the parallel envs), of ``eval_cpu_seconds`` and at the :data:`TIME_FRACTIONS`
    of a ``cpu_budget``. It stops when ``steps`` or the ``cpu_budget`` are spent, at the first evaluation after step 0
    reaching ``stop_threshold``, or (``stop_below`` ``(by_steps, value)``) at the first evaluation past ``by_steps`` if
    the best after step 0 is below ``value``. Progress-based schedules follow whichever budget ends the run: for one
    ``learn``, the model's ``_update_current_progress_remaining`` is shadowed on the instance. The clock is read between
    env steps, so marks are overshot by up to one env step or update phase; the records hold the actual times.

    The recorded training wall-clock and CPU time (``time.process_time()`` of this process: no ``SubprocVecEnv``
    workers) leave out evaluations and checkpoints (:meth:`excluded`). A checkpoint holds :meth:`state`;
    :meth:`load_state` continues from one (:class:`CPUTimeCheckpointCallback` writes them).

    :param task: The run
    :param eval_env: Evaluation env (``metric="eval"``); ``VecNormalize`` statistics are copied from the training env
    :param stop_threshold: Stop at the first evaluation after step 0 reaching it (``None``: spend the budget)
    :param progress: Where the records so far go after every evaluation: a CSV path (rewritten) or a callable taking
        them as a ``DataFrame``
    :param zoo_folder: rl-zoo3's log folder where the run's ``evaluations.npz`` goes after every evaluation
        (:func:`zoo_evaluations_path`; ``None``: none)
    """

    def __init__(
        self,
        task: RunTask,
        eval_env: VecEnv | None = None,
        stop_threshold: float | None = None,
        progress: str | Path | Callable[[pd.DataFrame], None] | None = None,
        zoo_folder: Path | None = None,
    ):
        super().__init__(verbose=0)
        self.task, self.eval_env, self.stop_threshold, self.zoo_folder = task, eval_env, stop_threshold, zoo_folder
        self.progress = Path(progress) if isinstance(progress, (str, Path)) else progress
        self.records: list[dict[str, float]] = []
        #: each evaluation's episode returns and lengths (``None``: not kept, by a checkpoint of an earlier version)
        self.episodes: list[tuple[list[float], list[int]]] | None = []
        self.stopped_at_threshold = self.stopped_at_cpu_budget = self.stopped_by_rule = False
        self._wall_offset = self._cpu_offset = 0.0  # continued from a checkpoint
        self._start, self._cpu_start, self._excluded_wall, self._excluded_cpu = 0.0, 0.0, 0.0, 0.0
        self._next_eval, self._next_time_eval = task.eval_freq, self._time_mark_after(0.0)
        self._resumed_cpu_mark: float | None = None

    def train_time(self) -> float:
        """:return: Seconds of training wall-clock (over all sessions of a resumed run), evaluation excluded"""
        return self._wall_offset + time.perf_counter() - self._start - self._excluded_wall

    def train_cpu_time(self) -> float:
        """:return: Process CPU seconds of training (over all sessions of a resumed run), evaluation excluded"""
        return self._cpu_offset + time.process_time() - self._cpu_start - self._excluded_cpu

    @contextlib.contextmanager
    def excluded(self) -> Iterator[None]:
        """Keep the time spent inside (evaluation, checkpoints) out of the training time."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self._excluded_wall += time.perf_counter() - wall
            self._excluded_cpu += time.process_time() - cpu

    def _time_mark_after(self, seconds: float) -> float:
        """:return: The first CPU-time evaluation mark after ``seconds`` of training (``inf`` without one)"""
        marks, every, budget = [math.inf], self.task.eval_cpu_seconds, self.task.cpu_budget
        if every is not None:
            marks.append((math.floor(seconds / every) + 1) * every)
        if budget is not None:
            marks += [fraction * budget for fraction in TIME_FRACTIONS if fraction * budget > seconds]
        return min(mark for mark in marks if mark > seconds)

    def _set_next_marks(self, seconds: float) -> None:
        """Set the next step and CPU-time evaluation marks after the current step and ``seconds`` of training."""
        self._next_eval = (self.model.num_timesteps // self.task.eval_freq + 1) * self.task.eval_freq
        self._next_time_eval = self._time_mark_after(seconds)

    def state(self) -> dict[str, Any]:
        """:return: What a checkpoint holds of the run besides the model: counters and the evaluation history"""
        return {
            "timesteps": int(self.model.num_timesteps),
            "cpu_time_s": self.train_cpu_time(),
            "wall_time_s": self.train_time(),
            "next_cpu_mark": self._next_time_eval,  # the CPU time may pass a mark between the last step and now
            "records": self.records,
            "episodes": self.episodes,
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from a checkpoint's :meth:`state`: the training times go on from its counters, the records follow."""
        self.records = [dict(record) for record in state["records"]]
        episodes = state.get("episodes")
        self.episodes = None if episodes is None else [(list(returns), list(lengths)) for returns, lengths in episodes]
        self._wall_offset, self._cpu_offset = float(state["wall_time_s"]), float(state["cpu_time_s"])
        self._resumed_cpu_mark = float(state["next_cpu_mark"])

    def cpu_budget_spent(self) -> bool:
        """:return: Whether the CPU budget was spent before this session (a run resumed from its last checkpoint)"""
        return self.task.cpu_budget is not None and self._cpu_offset >= self.task.cpu_budget

    def _on_training_start(self) -> None:
        self._start, self._cpu_start = time.perf_counter(), time.process_time()
        self._excluded_wall = self._excluded_cpu = 0.0
        self._set_next_marks(self.train_cpu_time())
        self._next_time_eval = self._resumed_cpu_mark or self._next_time_eval  # a resumed run keeps its checkpoint's
        if self.task.cpu_budget is not None:
            self._follow_cpu_budget(self.task.cpu_budget)
        if self.task.eval_at_start and not self.records:
            self.evaluate()

    def _follow_cpu_budget(self, cpu_budget: float) -> None:
        """Shadow the model's ``_update_current_progress_remaining`` so that the progress also counts CPU time."""
        model = self.model
        by_steps = type(model)._update_current_progress_remaining

        def update_progress(num_timesteps: int, total_timesteps: int) -> None:
            by_steps(model, num_timesteps, total_timesteps)
            by_cpu = 1.0 - self.train_cpu_time() / cpu_budget
            model._current_progress_remaining = max(0.0, min(model._current_progress_remaining, by_cpu))

        model._update_current_progress_remaining = update_progress  # type: ignore[method-assign]

    def _on_training_end(self) -> None:
        self.model.__dict__.pop("_update_current_progress_remaining", None)

    @property
    def next_cpu_mark(self) -> float:
        """:return: The CPU time of the next CPU-time evaluation (``inf`` without one)"""
        return self._next_time_eval

    def _on_step(self) -> bool:
        seconds, stop_below = self.train_cpu_time(), self.task.stop_below
        if self.model.num_timesteps >= self._next_eval or seconds >= self._next_time_eval:
            record = self.evaluate()
            self._set_next_marks(seconds)
            if self.stop_threshold is not None and record["mean_return"] >= self.stop_threshold:
                self.stopped_at_threshold = True
                return False
            if stop_below is not None and record["timesteps"] >= stop_below[0]:
                best = max((row["mean_return"] for row in self.records if row["timesteps"] > 0), default=-math.inf)
                if not best >= stop_below[1]:
                    self.stopped_by_rule = True
                    return False
        if self.task.cpu_budget is not None and seconds >= self.task.cpu_budget:
            self.stopped_at_cpu_budget = True
            return False
        return self.model.num_timesteps < self.task.steps

    def evaluate(self) -> dict[str, float]:
        """:return: The new record (:data:`EVAL_COLUMNS` after ``seed``)"""
        train_time, train_cpu_time = self.train_time(), self.train_cpu_time()
        with self.excluded():
            returns, lengths = self._returns()
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
        if self.episodes is not None:
            self.episodes.append((returns, lengths))
        with self.excluded():  # writing the records is not training either
            if isinstance(self.progress, Path):
                write_atomically(self.progress, self.evaluations().to_csv(index=False))
            elif self.progress is not None:
                self.progress(self.evaluations())
            if self.zoo_folder is not None:
                path = zoo_evaluations_path(self.zoo_folder, self.task.algo, self.task.env, self.task.seed)
                write_zoo_evaluations(path, self.records, self.episodes)
        return record

    def evaluations(self) -> pd.DataFrame:
        """:return: The records so far, after the task's ``algo``, ``env`` and ``seed``"""
        columns = {"algo": self.task.algo, "env": self.task.env, "seed": self.task.seed}
        return pd.DataFrame([{**columns, **row} for row in self.records])

    def _returns(self) -> tuple[list[float], list[int]]:
        """:return: The episode returns and lengths of this evaluation (:data:`METRICS`)"""
        if self.task.metric == "train":
            infos = list(self.model.ep_info_buffer or [])
            return [float(info["r"]) for info in infos], [int(info["l"]) for info in infos]
        assert self.eval_env is not None, "metric 'eval' needs an evaluation env"
        train_norm, eval_norm = self.model.get_vec_normalize_env(), unwrap_vec_normalize(self.eval_env)
        if isinstance(train_norm, VecNormalize) and eval_norm is not None:
            eval_norm.obs_rms = copy.deepcopy(train_norm.obs_rms)
            eval_norm.training = False
        episode_returns, episode_lengths = evaluate_policy(
            self.model, self.eval_env, self.task.n_eval_episodes, deterministic=True, return_episode_rewards=True, warn=False
        )
        return [float(value) for value in episode_returns], [int(value) for value in episode_lengths]  # type: ignore[union-attr]


class CPUTimeCheckpointCallback(CheckpointCallback):
    """
    SB3's ``CheckpointCallback`` for the run of a :class:`BudgetEvalCallback`, by CPU time and in the files of
    :mod:`benchmarks.checkpoint` (npz and JSON, never pickle; the random states; each checkpoint whole or absent): a
    checkpoint every ``every`` CPU seconds of training instead of every ``save_freq`` calls, at the start of a collection
    (after the last update, so that every step counted was trained on; one collection later when a CPU-time evaluation
    is due, so that it holds that evaluation). Its time is left out of the run's training time.

    :param budget: The run's budget callback: its clock, its evaluation marks and the :meth:`BudgetEvalCallback.state`
        a checkpoint holds (put this callback right after it)
    :param save_path: The run's checkpoint folder
    :param every: CPU seconds of training between checkpoints
    """

    def __init__(self, budget: BudgetEvalCallback, save_path: str, every: float):
        super().__init__(save_freq=1, save_path=save_path, name_prefix="ckpt", save_replay_buffer=True, save_vecnormalize=True)
        self.budget, self.every = budget, every
        #: CPU seconds of training at the last checkpoint (a resumed run: its checkpoint's)
        self.last_checkpoint = 0.0
        self._waited = False

    def _on_step(self) -> bool:
        return True  # checkpoints come at the start of a collection (_on_rollout_start), not every save_freq steps

    def _on_rollout_start(self) -> None:
        seconds = self.budget.train_cpu_time()
        if seconds - self.last_checkpoint < self.every:
            return
        if seconds >= self.budget.next_cpu_mark and not self._waited:
            # the mark's evaluation comes at the next step: wait one collection so that the checkpoint holds its row
            self._waited = True
            return
        self._waited = False
        self.save()

    def save(self) -> Path:
        """:return: The folder of a new checkpoint of the run (model, buffers, random states, the budget's state)"""
        with self.budget.excluded():
            state = self.budget.state()
            folder = save_checkpoint(self.save_path, self.model, state)
        self.last_checkpoint = state["cpu_time_s"]
        return folder


def zoo_evaluations_path(log_folder: str | Path, algo: str, env_id: str, seed: int) -> Path:
    """:return: Where a run's ``evaluations.npz`` goes in rl-zoo3's layout, ``<log folder>/<algo>/<env>_<seed>/``
    (the seed in place of rl-zoo3's experiment number; a results folder's log folder is ``<out>/zoo``)"""
    return Path(log_folder) / safe_name(algo) / f"{safe_name(env_id)}_{seed}" / "evaluations.npz"


def write_zoo_evaluations(
    path: Path, records: Sequence[Mapping[str, float]], episodes: Sequence[tuple[Sequence[float], Sequence[int]]] | None
) -> None:
    """
    Write a run's evaluations as SB3's ``EvalCallback`` writes them (``timesteps``; ``results`` and ``ep_lengths``, one
    row per evaluation, one column per episode), through a temporary file and a rename.

    :param records: The evaluations (``timesteps``, ``mean_return``), as in ``evaluations.csv``
    :param episodes: Each evaluation's episode returns and lengths; ``None`` (not kept) or a varying number of episodes
        (the ``train`` metric): ``results`` holds two columns, ``mean_return - std_return`` and ``mean_return +
        std_return``, whose mean and standard deviation are the recorded ones (rl-zoo3's plots need two episodes or
        more), and ``ep_lengths`` NaN
    """
    counts = {len(returns) for returns, _ in episodes or []}
    if episodes is not None and len(episodes) == len(records) and len(counts) == 1 and 0 not in counts:
        results = np.array([returns for returns, _ in episodes], dtype=np.float64)
        lengths = np.array([lengths for _, lengths in episodes], dtype=np.float64).astype(np.int64)
    else:
        spread = [(record["mean_return"], record.get("std_return", math.nan)) for record in records]
        results = np.array([[mean - std, mean + std] for mean, std in spread], dtype=np.float64).reshape(-1, 2)
        lengths = np.full(results.shape, np.nan)
    timesteps = np.array([record["timesteps"] for record in records], dtype=np.int64)
    archive = io.BytesIO()
    np.savez(archive, timesteps=timesteps, results=results, ep_lengths=lengths)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, archive.getvalue())


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


#: Fields of :class:`RunTask` passed on under their name to :func:`make_experiment`
EXPERIMENT_OPTIONS = ("hyperparams_dir", "device", "env_packages", "vec_env", "zoo_v4_entries", "entry")


def run_experiment(
    task: RunTask,
    progress_path: str | Path | Callable[[pd.DataFrame], None] | None = None,
    callbacks: Sequence[BaseCallback] = (),
    zoo_folder: Path | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """
    Train one run in the current process (one torch thread), evaluating along the way. With ``task.checkpoint_dir``,
    it resumes from the run's last checkpoint there if there is one (counters, schedules, replay buffer and evaluation
    history continue; the episodes that were running restart) and writes checkpoints, which stay after the run.

    :param task: The run
    :param progress_path: Where the evaluations so far go after each evaluation: a CSV rewritten, or a callable
    :param callbacks: More callbacks for ``learn`` (after the harness's own and the entry's)
    :param zoo_folder: rl-zoo3's log folder where the run's ``evaluations.npz`` goes after each evaluation (``None``:
        none; a results folder's is ``<out>/zoo``)
    :return: Its evaluations (columns :data:`EVAL_COLUMNS`) and metadata (``resumed_from``: the step count of the
        checkpoint it started from, 0 for a fresh start)
    """
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    options = {name: getattr(task, name) for name in EXPERIMENT_OPTIONS}
    experiment = make_experiment(task.algo, task.env, task.seed, eval_env=task.metric == "eval", **options)
    model, train_env, resumed_from = experiment.model, experiment.model.get_env(), 0
    try:
        threshold = task.threshold if task.threshold is not None else _spec_reward_threshold(task.env)
        if task.stop_at_threshold and threshold is None:
            raise ValueError(f"stop_at_threshold needs a reward threshold and {task.env} has none: give one (--threshold)")
        stop_threshold = threshold if task.stop_at_threshold else None
        callback = BudgetEvalCallback(task, experiment.eval_env, stop_threshold, progress_path, zoo_folder)
        checkpoints = (
            [CPUTimeCheckpointCallback(callback, task.checkpoint_dir, task.checkpoint_every)] if task.checkpoint_dir else []
        )
        restored = restore_checkpoint(task.checkpoint_dir, model) if task.checkpoint_dir is not None else None
        if restored is not None:
            model, state = restored
            callback.load_state(state)
            checkpoints[0].last_checkpoint = float(state["cpu_time_s"])
            resumed_from = int(model.num_timesteps)
            assert train_env is not None
            train_env.seed(task.seed + RESUME_SEED_OFFSET + resumed_from)  # the restarted episodes are new ones
        remaining = task.steps - model.num_timesteps
        if remaining > 0 and not callback.cpu_budget_spent():
            callbacks = [callback, *checkpoints, *experiment.callbacks, *callbacks]
            model.learn(total_timesteps=remaining, callback=callbacks, reset_num_timesteps=resumed_from == 0)
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
        "cpu": cpu_model(),  # where the run trained (its last part, if it resumed elsewhere)
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
    """:return: Short commit of the repository (``+dirty`` with uncommitted changes to tracked files that can change
    a run: not ``benchmarks/results/``, the data that runs write, nor Markdown, where reports rewrite their docs
    blocks), or ``unknown``"""
    try:
        git = ["git", "-C", str(REPO_ROOT)]
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout
        data_and_docs = [":(top,exclude)benchmarks/results", ":(top,exclude,glob)**/*.md"]
        status = [*git, "status", "--porcelain", "--untracked-files=no", "--", *data_and_docs]
        dirty = subprocess.run(status, capture_output=True, text=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit.strip() + ("+dirty" if dirty.strip() else "")


def cpu_model() -> str:
    """:return: The CPU's model name (``/proc/cpuinfo``), else what :func:`platform.processor` says, else ``unknown``"""
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return cpu


def machine_info() -> dict[str, str]:
    """:return: Platform, CPU model, core count, Python and library versions, git revision"""
    info = {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
    }
    for package in ("torch", "stable-baselines3", "sb3-contrib", "rl_zoo3", "gymnasium", "numpy"):
        info[package] = package_version(package)
    info["git"] = git_revision()
    return info


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def read_json(path: Path, default: Any) -> Any:
    """:return: The content of the JSON file ``path`` (``default`` when there is none)

    :raises BadFileError: naming the file if it is torn or holds another type of value than ``default``"""
    if not path.is_file():
        return default
    with reading(path, "JSON"):
        content = json.loads(path.read_text())
    if not isinstance(content, type(default)):
        raise BadFileError(f"{path}: holds a {type(content).__name__}, expected a {type(default).__name__}")
    return content
