"""
Benchmark harness: train every (algorithm, env, seed) of a grid with a step budget in local worker processes (or
Ray tasks, on one machine or several), evaluate at fixed step intervals, and write ``evaluations.csv``,
``run_metadata.json``, ``config.json``, ``results.md`` and one PNG of learning curves per env into an output folder.

Models are built by rl-zoo3's public ``ExperimentManager.setup_experiment()`` (the algorithms registered with
:func:`sb3_pcl.zoo.register_algorithms`): it reads the YAML entry of the env (``hyperparams/<algo>.yml``
for this package's algorithms, the files shipped with ``rl_zoo3`` for the baselines), applies a variant's overrides
as custom hyperparameters, preprocesses the entry (``lin_<x>`` schedules, ``normalize``, ``policy_kwargs`` strings,
``env_wrapper``, ``vec_env_wrapper``, ``callback``, ``frame_stack``, ``env_kwargs``, action noise) and creates the
training env and the evaluation env. Only rl-zoo3's ``learn()`` is replaced, by :class:`BudgetEvalCallback`: it
stops at the step budget and evaluates every ``eval_freq`` env steps (summed over the parallel envs), with the
evaluation time kept out of the training wall-clock and CPU time. With a CPU-time budget (``cpu_budget``) it stops at
that much process CPU time of training instead (or at the step cap, whichever comes first), also evaluating at fixed
CPU-time marks (``eval_cpu_seconds``), progress-based schedules follow that budget, and the summary reports the return
against steps and against CPU seconds. With ``checkpoint_every``, a run saves a checkpoint (:mod:`benchmarks.checkpoint`)
every that many CPU seconds, outside the output folder, and a run started again resumes from it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import copy
import dataclasses
import datetime
import hashlib
import importlib
import importlib.metadata
import importlib.util
import io
import json
import logging
import math
import multiprocessing
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize, unwrap_vec_wrapper

from benchmarks.checkpoint import remove_checkpoints, restore_checkpoint, save_checkpoint

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
REPO_HYPERPARAMS_DIR = REPO_ROOT / "hyperparams"
#: Folder of the variants' override files ``<algo>+<variant>.yml`` (and of baseline files used with --hyperparams-dir)
VARIANTS_HYPERPARAMS_DIR = REPO_ROOT / "benchmarks" / "hyperparams"
VARIANT_SEPARATOR = "+"
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
#: Where the runs execute: ``local`` worker processes, or ``ray`` tasks (a local Ray instance or a cluster)
BACKENDS = ("local", "ray")
RUNS_DIRNAME = "runs"
PROGRESS_SUFFIX = ".csv.partial"
EVALUATIONS_FILENAME = "evaluations.csv"
RUN_METADATA_FILENAME = "run_metadata.json"
CONFIG_FILENAME = "config.json"
SUMMARY_FILENAME = "results.md"
#: ``<env><suffix>.png``: the learning curves against training seconds of the envs with time-budget runs
SECONDS_PLOT_SUFFIX = "_seconds"
#: The options of a grid's runs recorded with each invocation in ``config.json``
RUN_OPTIONS: tuple[str, ...] = (
    "steps",
    "eval_freq",
    "n_eval_episodes",
    "hyperparams_dir",
    "device",
    "env_packages",
    "eval_at_start",
)
RUN_OPTIONS += ("metric", "stop_at_threshold", "vec_env")


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """
    :param module: Module defining the algorithm class (imported lazily)
    :param attribute: Name of the class in ``module``
    :param hyperparams_file: Name of its YAML file without ``.yml``
    :param zoo_hyperparams: Whether that file ships with ``rl_zoo3`` (else it is in this repository's ``hyperparams/``)
    """

    module: str
    attribute: str
    hyperparams_file: str
    zoo_hyperparams: bool


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "ppo": AlgorithmSpec("stable_baselines3", "PPO", "ppo", True),
    "a2c": AlgorithmSpec("stable_baselines3", "A2C", "a2c", True),
    "sac": AlgorithmSpec("stable_baselines3", "SAC", "sac", True),
    "td3": AlgorithmSpec("stable_baselines3", "TD3", "td3", True),
    "trpo": AlgorithmSpec("sb3_contrib", "TRPO", "trpo", True),
    "recurrentppo": AlgorithmSpec("sb3_contrib", "RecurrentPPO", "ppo_lstm", True),
    "pcl": AlgorithmSpec("sb3_pcl", "PCL", "pcl", False),
    "trust_pcl": AlgorithmSpec("sb3_pcl", "TrustPCL", "trust_pcl", False),
    "recurrent_pcl": AlgorithmSpec("sb3_pcl", "RecurrentPCL", "recurrent_pcl", False),
    "recurrent_trust_pcl": AlgorithmSpec("sb3_pcl", "RecurrentTrustPCL", "recurrent_trust_pcl", False),
    "reinforce": AlgorithmSpec("sb3_pcl", "Reinforce", "reinforce", False),
    "urex": AlgorithmSpec("sb3_pcl", "UREX", "urex", False),
}


def split_variant(name: str) -> tuple[str, str | None]:
    """
    :param name: ``<algo>`` or a variant ``<algo>+<variant>`` (the entry of ``<algo>`` updated by ``<algo>+<variant>.yml``)
    :return: ``(algo, variant)``, the variant ``None`` for a plain algorithm
    :raises ValueError: for an unknown algorithm or a variant name other than letters, digits, ``_`` and ``-``
    """
    base, separator, variant = name.partition(VARIANT_SEPARATOR)
    if base not in ALGORITHMS:
        raise ValueError(f"Unknown algorithm {base!r} in {name!r}. Known algorithms: {', '.join(sorted(ALGORITHMS))}")
    if separator and not re.fullmatch(r"[A-Za-z0-9_-]+", variant):
        raise ValueError(f"Invalid variant name {name!r}: expected <algo>+<variant>, the variant of letters, digits, _, -")
    return base, (variant if separator else None)


def get_algorithm_class(name: str) -> type[BaseAlgorithm]:
    """
    :param name: Benchmark name of an algorithm or variant
    :return: The algorithm class
    :raises ImportError: if its module cannot be imported or does not define it
    """
    spec = ALGORITHMS[split_variant(name)[0]]
    try:
        module = importlib.import_module(spec.module)
    except ImportError as exc:
        raise ImportError(f"Algorithm {name!r} needs the module {spec.module!r}, which cannot be imported: {exc}") from exc
    algo_class = getattr(module, spec.attribute, None)
    if not (isinstance(algo_class, type) and issubclass(algo_class, BaseAlgorithm)):
        raise ImportError(f"Algorithm {name!r} is not available: {spec.module}.{spec.attribute} is not an algorithm class")
    return algo_class


def _zoo_hyperparams_dir() -> Path:
    # find_spec does not run rl_zoo3/__init__.py (which patches gymnasium's TimeLimit and imports optuna)
    zoo_spec = importlib.util.find_spec("rl_zoo3")
    if zoo_spec is None or zoo_spec.origin is None:
        raise ImportError("the baselines take their hyperparameters from rl_zoo3, which is not installed")
    return Path(zoo_spec.origin).parent / "hyperparams"


def hyperparams_path(algo: str, hyperparams_dir: str | Path | None = None) -> Path:
    """
    :param algo: Benchmark name of an algorithm or variant
    :param hyperparams_dir: Folder searched first for ``<algo>.yml``, then for ``<its YAML file name>.yml``
    :return: The YAML file of the algorithm
    """
    base = split_variant(algo)[0]
    spec = ALGORITHMS[base]
    if hyperparams_dir is not None:
        for stem in dict.fromkeys((base, spec.hyperparams_file)):
            if (Path(hyperparams_dir) / f"{stem}.yml").is_file():
                return Path(hyperparams_dir) / f"{stem}.yml"
    folder = _zoo_hyperparams_dir() if spec.zoo_hyperparams else REPO_HYPERPARAMS_DIR
    return folder / f"{spec.hyperparams_file}.yml"


def variant_overrides_path(name: str, hyperparams_dir: str | Path | None = None) -> Path:
    """
    :param name: Benchmark name of a variant (``recurrent_pcl+expert``)
    :param hyperparams_dir: Folder searched before :data:`VARIANTS_HYPERPARAMS_DIR`
    :return: The variant's override file
    :raises FileNotFoundError: if there is none
    """
    folders = [Path(hyperparams_dir)] if hyperparams_dir is not None else []
    candidates = [folder / f"{name}.yml" for folder in [*folders, VARIANTS_HYPERPARAMS_DIR]]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"The variant {name!r} needs an override file; none of these exists: {', '.join(map(str, candidates))}"
    )


def _display_path(path: Path) -> str:
    """:return: ``path`` relative to the repository or to the folder holding ``rl_zoo3`` when inside one of them"""
    path = path.resolve()
    for base in (REPO_ROOT, _zoo_hyperparams_dir().parents[1]):
        if path.is_relative_to(base.resolve()):
            return str(path.relative_to(base.resolve()))
    return str(path)


def _entry_key(path: Path, env_id: str, fallback: str | None = None) -> str:
    """
    :param fallback: Key read when ``path`` has no entry for ``env_id`` but has one for it (``--zoo-v4-entries``)
    :return: The key rl-zoo3 reads for ``env_id`` in ``path``: the env id, else ``fallback``, else ``atari`` / ``default``
    """
    content = yaml.safe_load(path.read_text()) or {}
    if env_id in content:
        return env_id
    if fallback is not None and fallback in content:
        return fallback
    return "atari" if "atari" in content and env_id.startswith("ALE/") else "default"


def zoo_v4_id(env_id: str) -> str | None:
    """:return: The ``-v4`` id of a ``-v5`` env id (``HalfCheetah-v5`` -> ``HalfCheetah-v4``), else ``None``"""
    match = re.fullmatch(r"(.+)-v5", env_id)
    return f"{match.group(1)}-v4" if match else None


def resolve_entry(
    algo: str,
    env_id: str,
    hyperparams_dir: str | Path | None = None,
    zoo_v4_entries: bool = False,
    entry: str | None = None,
) -> tuple[Path, str]:
    """
    :param algo: Benchmark name of an algorithm or variant
    :param env_id: Gymnasium env id
    :param hyperparams_dir: Folder searched first for the algorithm's file
    :param zoo_v4_entries: For a baseline (its file ships with rl-zoo3) whose file has no entry for a ``-v5`` env id:
        read its ``-v4`` entry (rl-zoo3 publishes tuned MuJoCo settings of SAC, TD3, TRPO... for the v4 tasks only)
    :param entry: Read this key of the file whatever the env (one recipe on several tasks, e.g. ``Ant-v5``)
    :return: The YAML file and the key of the entry rl-zoo3 reads (the env id, the v4 id, ``entry``, ``atari`` or
        ``default``)
    :raises ValueError: if the file has no entry ``entry``
    """
    path = hyperparams_path(algo, hyperparams_dir)
    if entry is not None:
        if entry not in (yaml.safe_load(path.read_text()) or {}):
            raise ValueError(f"{_display_path(path)} has no entry {entry!r} (asked for {algo} on {env_id})")
        return path, entry
    fallback = zoo_v4_id(env_id) if zoo_v4_entries and ALGORITHMS[split_variant(algo)[0]].zoo_hyperparams else None
    return path, _entry_key(path, env_id, fallback)


def load_hyperparams(
    algo: str,
    env_id: str,
    hyperparams_dir: str | Path | None = None,
    zoo_v4_entries: bool = False,
    entry: str | None = None,
) -> tuple[dict[str, Any], str]:
    """
    :param algo: Benchmark name of an algorithm or variant
    :param env_id: Gymnasium env id
    :param hyperparams_dir: Folder searched first for the algorithm's and the variant's files
    :param zoo_v4_entries: Read a baseline's ``-v4`` entry for a ``-v5`` env without one (:func:`resolve_entry`)
    :param entry: Read this key of the algorithm's file whatever the env (:func:`resolve_entry`)
    :return: The variant's overrides for the env (its env entry, else its ``default`` entry; ``{}`` for a plain
        algorithm) and where the hyperparameters come from (``hyperparams/pcl.yml [CartPole-v1] + ...``; an entry of
        another env id says so: ``rl_zoo3/hyperparams/sac.yml [HalfCheetah-v4 for HalfCheetah-v5]``)
    """
    path, key = resolve_entry(algo, env_id, hyperparams_dir, zoo_v4_entries, entry)
    source = f"{_display_path(path)} [{key}{f' for {env_id}' if key not in (env_id, 'default', 'atari') else ''}]"
    if split_variant(algo)[1] is None:
        return {}, source
    override_path = variant_overrides_path(algo, hyperparams_dir)
    content = yaml.safe_load(override_path.read_text()) or {}
    key = env_id if env_id in content else "default"
    if not isinstance(content.get(key), dict):
        raise ValueError(f"{override_path}: the variant {algo!r} has no entry for {env_id!r} and no 'default' entry")
    return copy.deepcopy(content[key]), f"{source} + {_display_path(override_path)} [{key}]"


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
    manager.save_path = None  # no monitor files (the harness records the episodes; AlgorithmicVecEnv writes none)
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
                frame = pd.DataFrame([{**self.progress_columns, **row} for row in self.records])
                if isinstance(self.progress, Path):
                    _atomic_write_csv(frame, self.progress)
                else:
                    self.progress(frame)
        return record

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
    key = f"{_safe_name(out.name)}-{hashlib.sha256(where.as_posix().encode()).hexdigest()[:10]}"
    return str(Path(root).expanduser().resolve() / key / run_name(algo, env_id, seed))


def run_name(algo: str, env_id: str, seed: int) -> str:
    """:return: File-name-safe identifier of a run (``+`` and ``/`` become ``-``)"""
    return f"{_safe_name(algo)}__{_safe_name(env_id)}__seed{seed}"


def _safe_name(text: str) -> str:
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
    frame = pd.DataFrame.from_records(callback.records)
    frame.insert(0, "seed", task.seed)
    frame.insert(0, "env", task.env)
    frame.insert(0, "algo", task.algo)
    frame = frame.reindex(columns=list(EVAL_COLUMNS))
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


def _atomic_write_text(path: Path, text: str, newline: str | None = None) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, newline=newline)
    os.replace(tmp, path)


def _atomic_write_csv(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _record_failure(task: RunTask, message: str) -> dict[str, Any]:
    """Write ``runs/<run>.err`` (and remove the run's stale results); :return: the result reported to the main process"""
    runs_dir = Path(task.out_dir) / RUNS_DIRNAME
    runs_dir.mkdir(parents=True, exist_ok=True)
    err_path = runs_dir / f"{task.name}.err"
    _atomic_write_text(err_path, f"run {task.name}: algo={task.algo} env={task.env} seed={task.seed}\n{message}")
    for suffix in (".csv", ".json"):
        (runs_dir / f"{task.name}{suffix}").unlink(missing_ok=True)
    lines = [line for line in message.splitlines() if line.strip()]
    return {"name": task.name, "ok": False, "error": lines[-1] if lines else "unknown error", "err_path": str(err_path)}


def _write_run(runs_dir: Path, name: str, csv_text: str, metadata: Mapping[str, Any]) -> None:
    """Write a finished run's ``runs/<run>.json``, then ``runs/<run>.csv`` (it marks a completed run); drop its ``.err``"""
    _atomic_write_text(runs_dir / f"{name}.json", json.dumps(metadata, indent=2) + "\n")
    _atomic_write_text(runs_dir / f"{name}.csv", csv_text, newline="")  # as DataFrame.to_csv writes it
    (runs_dir / f"{name}.err").unlink(missing_ok=True)


def _success(name: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """:return: The result of a finished run reported to the main process"""
    return {"name": name, "ok": True, "final": metadata["final_mean_return"], "steps": metadata["final_timesteps"]}


@contextlib.contextmanager
def _single_threaded_libraries() -> Iterator[None]:
    """Set ``OMP/MKL/OPENBLAS_NUM_THREADS=1`` while the pool starts its workers (spawned processes inherit them)."""
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_task(task: RunTask) -> dict[str, Any]:
    """Worker entry point: run one task and write its CSV and JSON (or ``.err``) at once; never raises."""
    runs_dir = Path(task.out_dir) / RUNS_DIRNAME
    runs_dir.mkdir(parents=True, exist_ok=True)
    progress = runs_dir / f"{task.name}{PROGRESS_SUFFIX}"
    try:
        frame, metadata = run_experiment(task, progress)
    except Exception:
        return _record_failure(task, traceback.format_exc())
    _write_run(runs_dir, task.name, frame.to_csv(index=False), metadata)
    progress.unlink(missing_ok=True)
    if task.checkpoint_dir is not None:
        remove_checkpoints(task.checkpoint_dir)
    return _success(task.name, metadata)


def _log_result(result: Mapping[str, Any], done: int, total: int) -> None:
    if result["ok"]:
        where = f" (on {result['node']})" if "node" in result else ""
        logger.info("[%d/%d] %s: %.2f at %d steps%s", done, total, result["name"], result["final"], result["steps"], where)
    else:
        logger.warning("[%d/%d] %s FAILED: %s (%s)", done, total, result["name"], result["error"], result["err_path"])


def _execute(
    tasks: Sequence[RunTask],
    workers: int,
    fresh_process_per_run: bool,
    backend: str = "local",
    worker: Callable[[RunTask], dict[str, Any]] | None = None,
    store: Callable[[RunTask, str, Mapping[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """
    Run the tasks and write their files into ``runs/`` of their output folder (or as ``worker`` / ``store`` do).
    The local workers start with one OpenMP / MKL / OpenBLAS thread (and each run uses one torch thread), so that a
    run's CPU time is that of one core's work.

    :param tasks: The runs
    :param workers: Size of the local process pool (``local``)
    :param fresh_process_per_run: Start a new process for every run
    :param backend: ``local``: a pool of spawned processes on this machine; ``ray``: one Ray task per run on the Ray
        instance this process is connected to (:func:`_ray_session`)
    :param worker: (``local``) Module-level function running one task in a worker process and writing its files;
        never raises (default :func:`_run_task`)
    :param store: (``ray``) Writes a finished run's evaluations (CSV text) and metadata here (default: into ``runs/``)
    :return: One result per run (``ok``, and ``error`` / ``err_path`` for a failed run)
    """
    if backend == "ray":
        return _execute_ray(tasks, fresh_process_per_run, store)
    if backend != "local":
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    context = multiprocessing.get_context("spawn")
    pool_kwargs: dict[str, Any] = {"max_tasks_per_child": 1} if fresh_process_per_run else {}
    results: list[dict[str, Any]] = []
    todo = list(tasks)
    while todo:
        with (
            _single_threaded_libraries(),
            concurrent.futures.ProcessPoolExecutor(min(workers, len(todo)), mp_context=context, **pool_kwargs) as pool,
        ):
            futures = {pool.submit(worker or _run_task, task): task for task in todo}
            broken: list[RunTask] = []
            for future in concurrent.futures.as_completed(futures):
                try:
                    result = future.result()
                except concurrent.futures.process.BrokenProcessPool:
                    broken.append(futures[future])
                    continue
                results.append(result)
                _log_result(result, len(results), len(tasks))
        # a dying worker breaks the whole pool: blame the first unfinished run, retry the others in a fresh pool
        if broken:
            results.append(
                _record_failure(broken[0], "The worker process running this run died (out of memory or a crash).\n")
            )
        todo = broken[1:]
    return results


# --------------------------------------------------------------------------------------------------------------------
# Ray backend: one Ray task per run, on a local Ray instance or a cluster of several machines


def _import_ray() -> Any:
    """:return: The ``ray`` module; :raises ImportError: naming the extra to install when it is missing"""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f'The Ray backend needs Ray, which cannot be imported ({exc}): pip install -e ".[ray]"') from exc
    return ray


def parse_ray_address(address: str) -> tuple[str, int] | None:
    """
    :param address: ``auto`` or ``HOST:PORT`` of a Ray head's GCS (``ray start --head --port=PORT``; ``ray://`` allowed)
    :return: ``(host, port)``, ``None`` for ``auto``
    :raises ValueError: for anything else
    """
    if address == "auto":
        return None
    host, separator, port = address.removeprefix("ray://").rpartition(":")
    if not separator or not host.strip("[]") or not port.isdigit():
        raise ValueError(f"--address expects auto or HOST:PORT of a Ray head (ray start --head), got {address!r}")
    return host.strip("[]"), int(port)


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """
    Fail fast on an address no Ray head listens on (``ray.init`` would retry for minutes).

    :param address: As for :func:`parse_ray_address`
    :param timeout: Seconds to wait for the TCP connection
    :raises ConnectionError: if nothing accepts a TCP connection there
    """
    host_port = parse_ray_address(address)
    if host_port is None:
        return
    try:
        with socket.create_connection(host_port, timeout=timeout):
            pass
    except OSError as exc:
        raise ConnectionError(
            f"No Ray cluster answers at {address} ({exc}): start its head with 'ray start --head --port={host_port[1]}' "
            "or check the address"
        ) from exc


@contextlib.contextmanager
def _ray_session(workers: int, address: str | None = None) -> Iterator[dict[str, Any]]:
    """
    Connect this process to Ray for :func:`_execute`: to the running instance when Ray is already initialised, to the
    cluster at ``address`` when given, else to a new local instance of ``workers`` CPUs (shut down on exit).

    :param workers: CPUs of a new local instance
    :param address: ``auto`` (the cluster started on this machine by ``ray start``) or ``HOST:PORT`` of its head
    :return: A description of the cluster for ``config.json`` (``address``, ``nodes``, ``cpus``)
    :raises ImportError: without Ray
    :raises ConnectionError: if no cluster answers at ``address``
    """
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        if address is None:
            ray.init(address="local", num_cpus=workers, include_dashboard=False, logging_level=logging.WARNING)
        else:
            _check_reachable(address)
            try:
                ray.init(address=address, logging_level=logging.WARNING)
            except ConnectionError as exc:
                raise ConnectionError(
                    f"Cannot connect to the Ray cluster at {address!r}: {exc} (a cluster started with token authentication "
                    "needs RAY_AUTH_MODE=token and its token in ~/.ray/auth_token here too)"
                ) from exc
        started = True
    try:
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        info = {
            "address": address or ("local" if started else "already connected"),
            "nodes": len(nodes),
            "cpus": int(sum(node.get("Resources", {}).get("CPU", 0) for node in nodes)),
            "ray": _package_version("ray"),
        }
        logger.info("Ray: %d node(s), %d CPU(s)", info["nodes"], info["cpus"])
        yield info
    finally:
        if started:
            ray.shutdown()


def _run_task_remote(task: RunTask, cwd: str) -> dict[str, Any]:
    """
    Ray task: run one task and return its files' content instead of writing them (the machine running it may not see
    the output folder); never raises.

    :param task: The run
    :param cwd: The driver's working directory, where relative paths of the options are resolved
    :return: ``name``, ``ok``, then ``csv`` (text of ``runs/<run>.csv``) and ``metadata`` or ``traceback``, and ``node``
    """
    result: dict[str, Any] = {"name": task.name, "node": platform.node()}
    try:
        if not Path(cwd).is_dir():
            message = f"{cwd} (the driver's working directory) is not on {platform.node()}"
            raise FileNotFoundError(f"{message}: every machine needs the checkout at the same path")
        os.chdir(cwd)
        frame, metadata = run_experiment(task)
        if task.checkpoint_dir is not None:
            remove_checkpoints(task.checkpoint_dir)
    except Exception:
        return {**result, "ok": False, "traceback": traceback.format_exc()}
    return {**result, "ok": True, "csv": frame.to_csv(index=False), "metadata": metadata}


def _execute_ray(
    tasks: Sequence[RunTask],
    fresh_process_per_run: bool,
    store: Callable[[RunTask, str, Mapping[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """
    Run each task as a Ray task asking for one CPU and write its files here as it finishes (``store``: how, default
    ``runs/<run>.csv`` and ``.json``). A run whose Ray task fails (its worker or node died twice, it could not be
    deserialised) is recorded as failed like one that raised.
    """
    ray = _import_ray()
    options: dict[str, Any] = {"num_cpus": 1, "max_retries": 1}  # a lost node gets one retry elsewhere
    if fresh_process_per_run:
        options["max_calls"] = 1
    remote = ray.remote(**options)(_run_task_remote)
    cwd = os.getcwd()
    pending = {remote.remote(task, cwd): task for task in tasks}
    results: list[dict[str, Any]] = []
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        task = pending.pop(ref)
        runs_dir = Path(task.out_dir) / RUNS_DIRNAME
        runs_dir.mkdir(parents=True, exist_ok=True)
        try:
            outcome = ray.get(ref)
        except ray.exceptions.RayError as exc:
            result = _record_failure(
                task, f"Ray could not run this run (worker or machine lost twice, or no checkout there):\n{exc}\n"
            )
        else:
            if outcome["ok"]:
                if store is None:
                    _write_run(runs_dir, task.name, outcome["csv"], outcome["metadata"])
                else:
                    store(task, outcome["csv"], outcome["metadata"])
                result = {**_success(task.name, outcome["metadata"]), "node": outcome["node"]}
            else:
                result = _record_failure(task, f"Ray node: {outcome['node']}\n{outcome['traceback']}")
        results.append(result)
        _log_result(result, len(results), len(tasks))
    return results


def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_revision() -> str:
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
        info[package] = _package_version(package)
    info["git"] = _git_revision()
    return info


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _read_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.is_file() else default


def _run_names(frame: pd.DataFrame) -> pd.Series:
    names = [run_name(str(a), str(e), int(s)) for a, e, s in zip(frame["algo"], frame["env"], frame["seed"], strict=True)]
    return pd.Series(names, index=frame.index, dtype=object)


def completed_runs(out_dir: str | Path) -> set[str]:
    """:return: Names of the runs with results in ``out_dir`` (a CSV in ``runs/`` or rows in ``evaluations.csv``)"""
    out = Path(out_dir)
    names = {path.stem for path in (out / RUNS_DIRNAME).glob("*.csv")}
    if (out / EVALUATIONS_FILENAME).is_file():
        names.update(_run_names(pd.read_csv(out / EVALUATIONS_FILENAME)))
    return names


def merge_runs(out_dir: str | Path, drop: Iterable[str] = ()) -> pd.DataFrame:
    """
    Merge ``runs/*.csv`` into ``evaluations.csv`` and ``runs/*.json`` into ``run_metadata.json``: a run's CSV replaces
    its rows, runs only in ``evaluations.csv`` (``runs/`` is git-ignored) are kept, runs named in ``drop`` are removed.

    :return: All evaluations, sorted by env, algo, seed, timesteps
    """
    out = Path(out_dir)
    runs_dir, drop = out / RUNS_DIRNAME, set(drop)
    frames = [pd.read_csv(path) for path in sorted(runs_dir.glob("*.csv"))]
    if (out / EVALUATIONS_FILENAME).is_file():
        old = pd.read_csv(out / EVALUATIONS_FILENAME)
        fresh = {path.stem for path in runs_dir.glob("*.csv")} | drop
        frames.insert(0, old[~_run_names(old).isin(fresh)] if len(old) else old)
    frames = [frame for frame in frames if len(frame)]
    merged = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(EVAL_COLUMNS))
    merged = merged.reindex(columns=list(EVAL_COLUMNS))
    if len(merged):
        merged = merged.astype({"seed": int, "timesteps": int}).sort_values(
            ["env", "algo", "seed", "timesteps"], kind="stable"
        )
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write_csv(merged.reset_index(drop=True), out / EVALUATIONS_FILENAME)

    metadata = {name: meta for name, meta in _read_json(out / RUN_METADATA_FILENAME, {}).items() if name not in drop}
    for path in sorted(runs_dir.glob("*.json")):
        if path.with_suffix(".csv").is_file():
            metadata[path.stem] = json.loads(path.read_text())
    _atomic_write_text(out / RUN_METADATA_FILENAME, json.dumps(dict(sorted(metadata.items())), indent=2) + "\n")
    return merged.reset_index(drop=True)


def _record_finished_invocation(config_path: Path, invocation: dict[str, Any], failed: list[str]) -> None:
    """Mark an invocation finished in ``config.json``, re-reading the file so that concurrent invocations keep theirs."""
    invocation.update(finished=_now(), runs_failed=failed)
    config = _read_json(config_path, {"invocations": []})
    entries = config.setdefault("invocations", [])
    same = [
        i
        for i, e in enumerate(entries)
        if (e.get("started"), e.get("command")) == (invocation["started"], invocation["command"])
    ]
    if same:
        entries[same[0]] = invocation
    else:
        entries.append(invocation)
    _atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")


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
    Run every (algo, env, seed) in ``workers`` processes, record the invocation in ``config.json``, merge the results
    and write ``results.md`` and the plots (:func:`write_summary`).

    :param backend: ``local``: a pool of ``workers`` processes on this machine; ``ray``: one Ray task of one CPU per
        run, on a new local Ray instance of ``workers`` CPUs or on the cluster at ``address`` (results and failures are
        written here either way)
    :param address: With ``ray``: ``auto`` or ``HOST:PORT`` of a running cluster's head
    :param checkpoint_root: Give every run checkpoints under this folder (:func:`run_checkpoint_dir`), written every
        ``checkpoint_every`` CPU seconds; a run started again resumes from its last one
    :param settings: The run options of :class:`RunTask` (``steps`` and ``eval_freq`` required). With ``cpu_budget``
        (CPU seconds of training per run), ``steps`` is a cap (:data:`TIME_BUDGET_STEP_CAP` for none)
    :return: All evaluations in ``out_dir``
    :raises ValueError: for bad settings, before anything is written
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if address is not None and backend != "ray":
        raise ValueError(f"address {address!r} is only used by the ray backend, not by {backend!r}")
    if backend == "ray" and settings.get("device", "cpu") != "cpu":
        raise ValueError(f"the ray backend gives each run one CPU and no GPU: device must be cpu, not {settings['device']!r}")
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
    tasks = [
        dataclasses.replace(
            template,
            algo=algo,
            env=env,
            seed=seed,
            threshold=(thresholds or {}).get(env),
            checkpoint_dir=None if checkpoint_root is None else run_checkpoint_dir(checkpoint_root, out, algo, env, seed),
        )
        for env in envs
        for algo in algos
        for seed in seeds
    ]
    existing = completed_runs(out) if skip_existing else set()
    todo = [task for task in tasks if task.name not in existing]
    workers = workers or os.cpu_count() or 1
    invocation: dict[str, Any] = {
        "command": command or shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
        "algos": algos,
        "envs": envs,
        "seeds": seeds,
    }
    invocation.update((key, value) for key, value in _task_options(template).items() if key in RUN_OPTIONS + TIME_OPTIONS)
    invocation.update(workers=workers, skip_existing=skip_existing, thresholds=dict(thresholds or {}), backend=backend)
    with contextlib.ExitStack() as stack:
        if backend == "ray" and todo:  # connect before recording the invocation: a bad address leaves no trace
            invocation["ray"] = stack.enter_context(_ray_session(workers, address))
        invocation.update(machine=machine_info(), started=_now(), finished=None, runs_executed=len(todo), runs_failed=[])
        (out / RUNS_DIRNAME).mkdir(parents=True, exist_ok=True)
        config_path = out / CONFIG_FILENAME
        config = _read_json(config_path, {"invocations": []})
        config.setdefault("invocations", []).append(invocation)
        _atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")

        where = f"Ray ({invocation['ray']['address']})" if "ray" in invocation else f"{workers} worker(s)"
        logger.info("Running %d run(s) (%d skipped) on %s into %s", len(todo), len(tasks) - len(todo), where, out)
        results = _execute(todo, workers, fresh_process_per_run, backend)
    failed = sorted(result["name"] for result in results if not result["ok"])
    _record_finished_invocation(config_path, invocation, failed)
    frame = merge_runs(out, drop=failed)
    write_summary(out, thresholds)
    if failed:
        logger.warning("%d run(s) failed: %s (tracebacks in %s)", len(failed), ", ".join(failed), out / RUNS_DIRNAME)
    return frame


# --------------------------------------------------------------------------------------------------------------------
# Summary: results.md and the plots


def threshold_crossings(frame: pd.DataFrame, threshold: float | None, exclude_initial: bool = True) -> pd.DataFrame:
    """
    :param frame: Evaluations
    :param threshold: Reward threshold (``None``: never reached)
    :param exclude_initial: Ignore the evaluation at step 0 (a lucky untrained policy says nothing about learning)
    :return: Per (algo, env, seed): ``reached`` and the ``timesteps`` / ``wall_time_s`` of the first evaluation
        with ``mean_return >= threshold`` (NaN when not reached)
    """
    rows = []
    for (algo, env, seed), run in frame.groupby(["algo", "env", "seed"], sort=True):
        run = run.sort_values("timesteps")
        run = run[run["timesteps"] > 0] if exclude_initial else run
        hits = run[run["mean_return"] >= threshold] if threshold is not None else run.iloc[0:0]
        first = hits.iloc[0] if len(hits) else None
        rows.append(
            {
                "algo": algo,
                "env": env,
                "seed": seed,
                "reached": first is not None,
                "timesteps": math.nan if first is None else float(first["timesteps"]),
                "wall_time_s": math.nan if first is None else float(first["wall_time_s"]),
            }
        )
    return pd.DataFrame(rows, columns=["algo", "env", "seed", "reached", "timesteps", "wall_time_s"])


def summarize_results(frame: pd.DataFrame, thresholds: Mapping[str, float | None]) -> pd.DataFrame:
    """
    Aggregate the evaluations per (env, algo) over seeds: ``n_seeds``, ``finals`` (each seed's last evaluation, by
    seed), ``final_mean`` / ``final_std`` (population std), ``best_mean`` (mean of each seed's best evaluation),
    ``fps`` and ``wall_time_s`` (final, mean over seeds), ``n_reached``, ``steps_to_threshold`` /
    ``wall_to_threshold`` (median over seeds of the first crossing after step 0; NaN unless every seed reaches it),
    ``curriculum_final`` / ``curriculum_min`` / ``curriculum_max`` (last recorded curriculum length; NaN without one).
    """
    rows = []
    for (env, algo), group in frame.groupby(["env", "algo"], sort=True):
        group = group.sort_values(["seed", "timesteps"])
        finals = group.groupby("seed").tail(1).set_index("seed")
        threshold = thresholds.get(env)
        crossings = threshold_crossings(group, threshold)
        n_reached = int(crossings["reached"].sum())
        everyone = threshold is not None and n_reached == len(finals)
        curricula = group.dropna(subset=["curriculum_length"]).groupby("seed")["curriculum_length"].last()
        rows.append(
            {
                "env": env,
                "algo": algo,
                "n_seeds": len(finals),
                "finals": finals["mean_return"].to_dict(),
                "final_mean": float(finals["mean_return"].mean()),
                "final_std": float(finals["mean_return"].std(ddof=0)),
                "best_mean": float(group.groupby("seed")["mean_return"].max().mean()),
                "fps": float(finals["fps"].mean()),
                "wall_time_s": float(finals["wall_time_s"].mean()),
                "threshold": math.nan if threshold is None else float(threshold),
                "n_reached": n_reached,
                "crossings": dict(zip(crossings["seed"], crossings["timesteps"], strict=True)),
                "steps_to_threshold": float(crossings["timesteps"].median()) if everyone else math.nan,
                "wall_to_threshold": float(crossings["wall_time_s"].median()) if everyone else math.nan,
                "curriculum_final": float(curricula.mean()) if len(curricula) else math.nan,
                "curriculum_min": float(curricula.min()) if len(curricula) else math.nan,
                "curriculum_max": float(curricula.max()) if len(curricula) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def _number(value: float) -> str:
    """:return: 0 decimals from 1000 on, 1 from 1, 3 significant digits below; ``-`` for NaN"""
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"


def _steps(value: float) -> str:
    """:return: A step count as ``140k`` or ``2.16M``; ``-`` for NaN"""
    if math.isnan(value):
        return "-"
    return f"{value / 1e6:.3g}M" if value >= 1e6 else f"{value / 1e3:.3g}k" if value >= 1e3 else f"{value:.0f}"


def _ordered(values: Iterable[str], order: Sequence[str] | None = None) -> list[str]:
    """:return: ``values`` in the order of ``order``, the others after it, sorted"""
    values = set(values)
    first = [value for value in dict.fromkeys(order or []) if value in values]
    return first + sorted(values - set(first))


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]


def resolve_thresholds(
    envs: Sequence[str],
    overrides: Mapping[str, float] | None = None,
    run_metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, tuple[float | None, str]]:
    """:return: Per env its threshold and the source: ``override``, ``env spec`` (or recorded with the runs) or ``none``"""
    recorded = {
        meta["env"]: float(meta["reward_threshold"])
        for meta in (run_metadata or {}).values()
        if meta.get("reward_threshold") is not None
    }
    resolved: dict[str, tuple[float | None, str]] = {}
    for env in envs:
        if env in (overrides or {}):
            resolved[env] = (float(overrides[env]), "override")  # type: ignore[index]
        else:
            threshold = recorded.get(env, _spec_reward_threshold(env))
            resolved[env] = (threshold, "env spec") if threshold is not None else (None, "none")
    return resolved


def _invocation_row(invocation: Mapping[str, Any]) -> list[str]:
    """
    :param invocation: An entry of ``config.json``; in a curated folder its ``kept`` blocks say which of its runs the
        folder holds and under which name (``{"algo", "reported_as", "envs", "seeds"}``)
    :return: Its cells in the *Runs* table of ``results.md``
    """
    machine = invocation.get("machine") or {}
    blocks = invocation.get("kept") or [
        {"algo": algo, "envs": invocation.get("envs", [])} for algo in invocation.get("algos", [])
    ]
    algos = []
    for block in blocks:
        name = block["algo"] + (
            f" as {block['reported_as']}" if block.get("reported_as", block["algo"]) != block["algo"] else ""
        )
        partial = set(block["envs"]) != set(invocation.get("envs", []))
        algos.append(name + (f" ({', '.join(block['envs'])})" if partial else ""))
    envs = _ordered({env for block in blocks for env in block["envs"]}, invocation.get("envs"))
    seeds = sorted({seed for block in blocks for seed in block.get("seeds", invocation.get("seeds", []))})
    eval_freq, cap = invocation.get("eval_freq") or 0, invocation.get("steps") or TIME_BUDGET_STEP_CAP
    budget = _time_budget(invocation)
    no_step_evaluations = budget is not None and eval_freq >= cap  # none before the step cap
    schedule = [] if no_step_evaluations else [f"{invocation.get('eval_freq')} steps"]
    if budget is not None:
        schedule.append(", ".join(f"{fraction:.0%}" for fraction in TIME_FRACTIONS if fraction < 1) + " of the budget")
    for key, unit in (("eval_cpu_seconds", "CPU-s"), ("eval_seconds", "s")):
        if invocation.get(key) is not None:
            schedule.append(f"{invocation[key]:g} {unit}")
    evaluation = f"every {' and '.join(schedule)}, " + (
        "last 100 training episodes"
        if invocation.get("metric", "eval") == "train"
        else f"{invocation.get('n_eval_episodes')} deterministic episodes"
    )
    if invocation.get("stop_at_threshold"):
        evaluation += ", stop at threshold"
    versions = [f"{name} {machine[name]}" for name in ("torch", "stable-baselines3", "rl_zoo3") if name in machine]
    return [
        f"`{invocation.get('command', 'unknown')}`",
        "; ".join(algos),
        ", ".join(envs),
        " ".join(map(str, seeds)),
        _budget(invocation.get("steps"), budget),
        evaluation,
        f"{machine.get('cpu', 'unknown')}; {machine.get('cores', '?')} cores",
        ", ".join([f"git {machine.get('git', 'unknown')}", *versions]),
        f"{invocation.get('started', '?')} - {invocation.get('finished') or 'not recorded'}",
    ]


def _time_budget(options: Mapping[str, Any]) -> tuple[float, str] | None:
    """
    :param options: A run's metadata or an invocation of ``config.json``
    :return: Its time budget and the column of the clock it counts on: ``cpu_budget`` on ``cpu_time_s``, or the
        wall-clock ``time_budget`` of the results made before CPU budgets replaced it, on ``wall_time_s``; ``None``
    """
    if options.get("cpu_budget"):
        return float(options["cpu_budget"]), "cpu_time_s"
    if options.get("time_budget"):
        return float(options["time_budget"]), "wall_time_s"
    return None


def _time_budgets(metas: Iterable[Mapping[str, Any]]) -> list[tuple[float, str]]:
    """:return: The distinct time budgets of runs (:func:`_time_budget`), sorted"""
    return sorted({budget for budget in map(_time_budget, metas) if budget is not None})


def _evaluated_on_a_clock(meta: Mapping[str, Any]) -> bool:
    """:return: Whether a run was evaluated at time marks (``eval_cpu_seconds``, or the older ``eval_seconds``)"""
    return bool(meta.get("eval_cpu_seconds") or meta.get("eval_seconds"))


def _seconds_unit(clock: str) -> str:
    """:return: The unit of a clock column in the tables: ``CPU-s`` for ``cpu_time_s``, ``s`` for the wall-clock"""
    return "CPU-s" if clock == "cpu_time_s" else "s"


def _budget(steps: Any, budget: tuple[float, str] | None) -> str:
    """:return: A budget as ``512`` (steps), ``3600 CPU-s of training`` or ``3600 CPU-s of training, at most 1M steps``"""
    if budget is None:
        return str(steps)
    cap = f", at most {_steps(float(steps))} steps" if steps is not None and int(steps) < TIME_BUDGET_STEP_CAP else ""
    return f"{budget[0]:g} {_seconds_unit(budget[1])} of training{cap}"


def time_budget_evaluations(frame: pd.DataFrame, run_metadata: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """
    The evaluations of the time-budget runs at the fractions :data:`TIME_FRACTIONS` of their budget.

    A run is evaluated at the first env step past each fraction of its budget (and stops at the first past the whole
    budget, then evaluated), so the evaluation for fraction ``f`` is its first at or after ``f * budget`` seconds of
    training on its clock (:func:`_time_budget`). A run that ended before (its step cap, ``--stop-at-threshold``)
    gives its last evaluation there, marked ``ended_early``.

    :param frame: Evaluations (columns :data:`EVAL_COLUMNS`)
    :param run_metadata: Metadata of the runs by run name; runs without a time budget are left out
    :return: One row per (env, algo, seed, fraction): ``time_budget``, ``clock`` (``cpu_time_s`` or ``wall_time_s``),
        ``timesteps``, ``seconds`` (on that clock), ``mean_return``, ``ended_early``
    """
    budgets = {name: _time_budget(meta) for name, meta in run_metadata.items() if _time_budget(meta) is not None}
    columns = ["env", "algo", "seed", "fraction", "time_budget", "clock", "timesteps", "seconds", "mean_return"]
    rows = []
    for (env, algo, seed), run in frame.groupby(["env", "algo", "seed"], sort=True):
        found = budgets.get(run_name(str(algo), str(env), int(seed)))
        if found is None:
            continue
        budget, clock = found
        run = run.sort_values(clock)
        for fraction in TIME_FRACTIONS:
            after = run[run[clock] >= fraction * budget]
            record = after.iloc[0] if len(after) else run.iloc[-1]
            steps, seconds, value = int(record["timesteps"]), float(record[clock]), float(record["mean_return"])
            rows.append([env, algo, int(seed), fraction, budget, clock, steps, seconds, value, not len(after)])
    return pd.DataFrame(rows, columns=[*columns, "ended_early"])


def _equal_wall_clock_lines(evaluations: pd.DataFrame, algos: Sequence[str]) -> list[str]:
    """:return: The equal-time tables of one env's time-budget runs (``evaluations``: :func:`time_budget_evaluations`):
    ``Equal CPU time`` for CPU budgets, ``Equal wall-clock`` for the wall-clock budgets of older results"""
    lines = []
    for clock, title in (("cpu_time_s", "Equal CPU time"), ("wall_time_s", "Equal wall-clock")):
        on_clock = evaluations[evaluations["clock"] == clock]
        if len(on_clock):
            lines += [f"### {title}", "", *_equal_time_table(on_clock, algos, _seconds_unit(clock)), ""]
    return lines


def _equal_time_table(evaluations: pd.DataFrame, algos: Sequence[str], unit: str) -> list[str]:
    """:return: The rows of one equal-time table (runs of one clock, whose budgets are in ``unit``)"""
    rows = []
    for algo in [algo for algo in algos if algo in set(evaluations["algo"])]:
        runs = evaluations[evaluations["algo"] == algo]
        budgets = ", ".join(f"{value:g} {unit}" for value in sorted(set(runs["time_budget"])))
        cells = [algo, str(runs["seed"].nunique()), budgets]
        for fraction in TIME_FRACTIONS:
            at = runs[runs["fraction"] == fraction]
            returns = at["mean_return"]
            cells.append(f"{_number(float(returns.mean()))} ± {_number(float(returns.std(ddof=0)))}")
        final = runs[runs["fraction"] == TIME_FRACTIONS[-1]]
        steps = final["timesteps"].astype(float)
        cells.append(f"{_steps(float(steps.mean()))} [{_steps(float(steps.min()))}, {_steps(float(steps.max()))}]")
        cells.append(_number(float(final["seconds"].mean())))
        cells.append(str(int(final["ended_early"].sum())))
        rows.append(cells)
    header = ["Algorithm", "Seeds", "Budget", *(f"Return at {fraction:.0%}" for fraction in TIME_FRACTIONS)]
    header += ["Steps reached", "CPU seconds" if unit == "CPU-s" else "Seconds", "Ended early"]
    return _markdown_table(header, rows)


def _algo_order(name: str) -> tuple[bool, int, str]:
    """:return: Sort key of a benchmark name: this package's algorithms first, in :data:`ALGORITHMS` order, variants after"""
    base, variant = split_variant(name) if name.partition(VARIANT_SEPARATOR)[0] in ALGORITHMS else (name, name)
    spec = ALGORITHMS.get(base)
    return (spec is None or spec.zoo_hyperparams, list(ALGORITHMS).index(base) if spec else 0, variant or "")


def write_summary(out_dir: str | Path, thresholds: Mapping[str, float] | None = None) -> Path:
    """
    Write ``out_dir/results.md`` (one table per env, then the invocations of ``config.json``) and ``out_dir/<env>.png``.

    :param out_dir: Output folder of a grid
    :param thresholds: Threshold overrides per env id; stored in ``config.json`` for later summaries, they take
        precedence over those stored with the invocations and over the envs' ``spec.reward_threshold``
    :return: Path of ``results.md``
    """
    out = Path(out_dir)
    frame = merge_runs(out)
    config = _read_json(out / CONFIG_FILENAME, {"invocations": []})
    if thresholds:
        config["thresholds"] = {**config.get("thresholds", {}), **thresholds}
        _atomic_write_text(out / CONFIG_FILENAME, json.dumps(config, indent=2) + "\n")
    invocations = config.get("invocations", [])
    metadata = _read_json(out / RUN_METADATA_FILENAME, {})
    overrides: dict[str, float] = {}
    for invocation in [*invocations, config]:
        overrides.update(invocation.get("thresholds") or {})
    envs = _ordered(frame["env"].unique(), [env for invocation in invocations for env in invocation.get("envs", [])])
    algos = sorted(frame["algo"].unique(), key=_algo_order)
    resolved = resolve_thresholds(envs, overrides, metadata)
    summary = summarize_results(frame, {env: value for env, (value, _) in resolved.items()})

    lines = [f"# Benchmark results: `{out.name}`", ""] + ([config["notes"], ""] if config.get("notes") else [])
    lines += [
        "Final: last evaluation (eval: deterministic episodes on a separate env; train: mean of the last 100 training "
        "episodes), mean ± std over seeds, then per seed. Best: mean over seeds of each seed's best evaluation. To "
        "threshold: first evaluation after step 0 reaching it, median over seeds (n/a unless every seed does). "
        "Reached: how many seeds did, and when, per seed. FPS: "
        "training steps per second (evaluation excluded), mean over seeds; it compares only runs made on the same "
        "machine. Curriculum (algorithmic tasks): the curriculum length at the last evaluation, mean [min, max] over seeds.",
        "",
    ]
    budget_evaluations = time_budget_evaluations(frame, metadata)
    timed_envs = {meta["env"] for meta in metadata.values() if _time_budget(meta) or _evaluated_on_a_clock(meta)}
    if len(budget_evaluations):
        lines += [
            "Equal CPU time (runs with a budget of process CPU time of training, env stepping included, evaluation "
            "excluded; Steps then gives it in CPU-s) or, in results made before CPU budgets, equal wall-clock (in s): "
            "the return at 25%, 50% and 100% of the budget is each run's first evaluation at or after that much "
            "training time (the runs are evaluated there), mean ± std over seeds; a run that ended before (its "
            "step cap) counts with its last evaluation (Ended early). Steps reached: mean [min, max] over seeds at the "
            "end; Seconds: mean training seconds at the end (the budget plus the last env step or update).",
            "",
        ]
    for env in envs:
        threshold, source = resolved[env]
        lines += [f"## {env} ({f'threshold {threshold:g}, {source}' if threshold is not None else 'no reward threshold'})", ""]
        env_summary = summary[summary["env"] == env].set_index("algo")
        with_curriculum = bool(env_summary["curriculum_final"].notna().any())
        rows = []
        for algo in [algo for algo in algos if algo in env_summary.index]:
            row = env_summary.loc[algo]
            runs = [meta for meta in metadata.values() if meta.get("algo") == algo and meta.get("env") == env]
            n_reached, n_seeds = int(row["n_reached"]), int(row["n_seeds"])
            cells = [
                algo,
                str(n_seeds),
                ", ".join(
                    [
                        _steps(steps)
                        for steps in sorted(
                            {int(meta["steps"]) for meta in runs if meta.get("steps") and not _time_budget(meta)}
                        )
                    ]
                    + [f"{budget:g} {_seconds_unit(clock)}" for budget, clock in _time_budgets(runs)]
                )
                or "?",
                ", ".join(sorted({meta.get("metric", "eval") for meta in runs})) or "?",
                f"{_number(row['final_mean'])} ± {_number(row['final_std'])}",
                " / ".join(_number(value) for value in row["finals"].values()),
                _number(row["best_mean"]),
                _steps(row["steps_to_threshold"]) if n_reached == n_seeds else "n/a" if threshold is not None else "-",
                f"{n_reached}/{n_seeds}: {', '.join(map(_steps, row['crossings'].values()))}"
                if threshold is not None
                else "-",
                "-" if math.isnan(row["fps"]) else f"{row['fps']:.0f}",
            ]
            if with_curriculum:
                final, low, high = row["curriculum_final"], row["curriculum_min"], row["curriculum_max"]
                cells.append("-" if math.isnan(final) else f"{final:.1f} [{low:.0f}, {high:.0f}]")
            cells.append("; ".join(sorted({str(meta.get("hyperparams_source")) for meta in runs})) or "unknown")
            rows.append(cells)
        columns = ["Algorithm", "Seeds", "Steps", "Metric", "Final", "Final per seed", "Best", "To threshold", "Reached"]
        columns += ["FPS"] + ["Curriculum"] * with_curriculum + ["Hyperparameters"]
        lines += [*_markdown_table(columns, rows), "", f"![{env}]({_safe_name(env)}.png)", ""]
        env_budgets = budget_evaluations[budget_evaluations["env"] == env]
        if len(env_budgets):
            lines += _equal_wall_clock_lines(env_budgets, algos)
        if env in timed_envs:
            lines += [f"![{env} against training seconds]({_safe_name(env)}{SECONDS_PLOT_SUFFIX}.png)", ""]

    errors = sorted((out / RUNS_DIRNAME).glob("*.err"))
    if errors:
        lines += ["## Failed runs", ""]
        for path in errors:
            last = [line for line in path.read_text().splitlines() if line.strip()][-1:] or ["unknown error"]
            lines.append(f"- `{path.stem}`: {last[0]} (`{RUNS_DIRNAME}/{path.name}`)")
        lines.append("")
    header = ["Command", "Algorithms", "Envs", "Seeds", "Steps", "Evaluation", "Machine", "Software", "Date (UTC)"]
    lines += ["## Runs", "", *_markdown_table(header, [_invocation_row(invocation) for invocation in invocations]), ""]
    plot_learning_curves(frame, out, {env: value for env, (value, _) in resolved.items()}, metadata, algos)
    if timed_envs:
        plot_against_seconds(
            frame[frame["env"].isin(timed_envs)], out, {env: value for env, (value, _) in resolved.items()}, metadata, algos
        )
    _atomic_write_text(out / SUMMARY_FILENAME, "\n".join(lines))
    return out / SUMMARY_FILENAME


def plot_learning_curves(
    frame: pd.DataFrame,
    out_dir: str | Path,
    thresholds: Mapping[str, float | None],
    run_metadata: Mapping[str, Mapping[str, Any]] | None = None,
    algo_order: Sequence[str] | None = None,
) -> list[Path]:
    """
    Write ``out_dir/<env>.png`` per env: per algorithm the mean over seeds with a min-max band, the threshold dashed.

    rl-zoo3's ``rl_zoo3.plots`` scripts read its own log folders (``evaluations.npz``, monitor files) from the command
    line, not a table of evaluations, so the curves are drawn with matplotlib. Each record is placed on the multiple
    of its run's ``eval_freq`` it was taken for (an evaluation happens at the first step count at or past it), so that
    seeds line up, and a run stopped at the threshold keeps its last value to the end of its algorithm's curve. The
    x axis is logarithmic when the budgets in one plot differ more than tenfold.

    :return: Paths of the written files
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    freqs = {  # the runs evaluated at wall-clock marks too have records off the step grid
        (meta["algo"], meta["env"]): int(meta["eval_freq"])
        for meta in (run_metadata or {}).values()
        if meta.get("eval_freq") and not (_time_budget(meta) or _evaluated_on_a_clock(meta))
    }
    paths = []
    for env, env_frame in frame.groupby("env", sort=True):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ends = []
        metrics = {meta.get("metric", "eval") for meta in (run_metadata or {}).values() if meta.get("env") == env}
        for algo in _ordered(env_frame["algo"].unique(), algo_order):
            runs = env_frame[env_frame["algo"] == algo]
            grid = freqs.get((algo, str(env)))
            if grid:
                per_seed = runs.assign(timesteps=runs["timesteps"] // grid * grid)
                per_seed = per_seed.groupby(["timesteps", "seed"])["mean_return"].last().unstack("seed")
                per_seed = per_seed.reindex(range(0, int(per_seed.index.max()) + 1, grid)).ffill()
            else:
                per_seed = runs.groupby(["timesteps", "seed"])["mean_return"].last().unstack("seed").ffill()
            mean = per_seed.mean(axis=1)
            (line,) = ax.plot(
                mean.index, mean, label=f"{algo} ({runs['seed'].nunique()} seeds)", marker="." if len(mean) < 30 else None
            )
            ax.fill_between(
                mean.index, per_seed.min(axis=1), per_seed.max(axis=1), color=line.get_color(), alpha=0.2, linewidth=0
            )
            ends.append(int(mean.index.max()))
        threshold = thresholds.get(str(env))
        if threshold is not None:
            ax.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        if ends and max(ends) > 10 * max(min(ends), 1):  # budgets far apart: log scale (step 0 is not shown)
            ax.set_xscale("log")
            ax.set_xlim(left=min(freqs.get((algo, str(env)), 1) for algo in env_frame["algo"].unique()))
        paths.append(_save_plot(fig, ax, str(env), "env steps", metrics, Path(out_dir) / f"{_safe_name(str(env))}.png"))
    return paths


def _save_plot(fig: Any, ax: Any, env: str, xlabel: str, metrics: set[str], path: Path) -> Path:
    """Title, labels, grid and legend of a learning-curve plot, then write it to ``path`` and close it."""
    import matplotlib.pyplot as plt

    ax.set_title(env)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{'training' if metrics == {'train'} else 'evaluation'} return\n(mean over seeds, min-max band)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_against_seconds(
    frame: pd.DataFrame,
    out_dir: str | Path,
    thresholds: Mapping[str, float | None],
    run_metadata: Mapping[str, Mapping[str, Any]] | None = None,
    algo_order: Sequence[str] | None = None,
) -> list[Path]:
    """
    Write ``out_dir/<env>_seconds.png`` per env: the return against seconds of training (evaluation excluded), per
    algorithm the mean over seeds with a min-max band (:func:`curves_on_clock`); time budgets are dotted. The clock is
    the CPU time (``cpu_time_s``) when a run of the env has a CPU budget or CPU-time evaluations, else the wall-clock.

    :return: Paths of the written files
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for env, env_frame in frame.groupby("env", sort=True):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        runs_meta = [meta for meta in (run_metadata or {}).values() if meta.get("env") == env]
        on_cpu = any(meta.get("cpu_budget") or meta.get("eval_cpu_seconds") for meta in runs_meta)
        clock = "cpu_time_s" if on_cpu else "wall_time_s"
        for algo in _ordered(env_frame["algo"].unique(), algo_order):
            runs = env_frame[env_frame["algo"] == algo]
            times, stacked = curves_on_clock(runs, clock)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns before every seed's first evaluation
                mean, low, high = np.nanmean(stacked, 0), np.nanmin(stacked, 0), np.nanmax(stacked, 0)
            (line,) = ax.plot(times, mean, drawstyle="steps-post", label=f"{algo} ({runs['seed'].nunique()} seeds)")
            ax.fill_between(times, low, high, step="post", color=line.get_color(), alpha=0.2, linewidth=0)
        for budget, _ in [found for found in _time_budgets(runs_meta) if found[1] == clock]:
            ax.axvline(budget, color="gray", linestyle=":", linewidth=1)
        threshold = thresholds.get(str(env))
        if threshold is not None:
            ax.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        metrics = {meta.get("metric", "eval") for meta in runs_meta}
        path = Path(out_dir) / f"{_safe_name(str(env))}{SECONDS_PLOT_SUFFIX}.png"
        xlabel = f"training {'CPU ' if on_cpu else ''}seconds (evaluation excluded)"
        paths.append(_save_plot(fig, ax, str(env), xlabel, metrics, path))
    return paths


def curves_on_clock(runs: pd.DataFrame, clock: str = "cpu_time_s") -> tuple[np.ndarray, np.ndarray]:
    """
    :param runs: Evaluations of the seeds of one (algo, env)
    :param clock: ``cpu_time_s`` or ``wall_time_s``
    :return: The times at which some seed was evaluated, sorted, and per seed (rows, in seed order) its return at each
        of them: a step function (its last evaluation so far), NaN before its first evaluation, kept at its last value
        after it ends
    """
    runs = runs.dropna(subset=[clock])
    times = np.unique(runs[clock].to_numpy(dtype=float))
    curves = []
    for _, run in runs.groupby("seed"):
        run = run.sort_values(clock)
        seconds, values = run[clock].to_numpy(dtype=float), run["mean_return"].to_numpy(dtype=float)
        index = np.searchsorted(seconds, times, side="right") - 1
        curves.append(np.where(index >= 0, values[np.maximum(index, 0)], np.nan))
    return times, np.vstack(curves) if curves else np.empty((0, len(times)))
