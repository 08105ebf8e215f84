"""
Benchmark harness: run a grid algorithm x environment x seed with a fixed step budget, evaluate at fixed step intervals,
and report the results (CSV of all evaluations, markdown summary, PNG learning curves).

Overview
--------
* :data:`ALGORITHMS` maps a benchmark name to the algorithm class and its rl-zoo3 style hyperparameter file.
  ``ppo``/``a2c`` (Stable-Baselines3) and ``trpo``/``recurrentppo`` (sb3-contrib) read the YAML files shipped inside
  the installed ``rl_zoo3`` package (``rl_zoo3/hyperparams/<file>.yml``, ``recurrentppo`` -> ``ppo_lstm.yml``);
  the algorithms of this project (``pcl``, ``trust_pcl``, ``urex``, ``reinforce``) are imported lazily from
  ``sb3_pcl`` and read ``hyperparams/<algo>.yml`` at the repository root.  A ``hyperparams_dir`` overrides both
  (``<dir>/<algo>.yml``, then ``<dir>/<zoo file>.yml``; the default file is used when neither exists there).
* :func:`run_grid` runs every (algo, env, seed) in its own task of a ``ProcessPoolExecutor`` ("spawn" context), writes
  ``out_dir/runs/<run>.csv`` (+ ``.json`` metadata) as soon as a run finishes, a traceback to ``out_dir/runs/<run>.err``
  when it fails (``runs/<run>.csv.partial`` holds a running run's evaluations so far, and stays if it dies), merges
  everything into ``out_dir/evaluations.csv`` and calls :func:`write_summary`.
* :func:`write_summary` writes ``out_dir/results.md`` and one ``out_dir/<env>.png`` per environment.

Hyperparameter loading
----------------------
The entry for an environment is selected by :func:`load_hyperparams`: the env id, else the ``atari`` entry for Atari
envs, else a fallback to the algorithm defaults with ``n_envs=1`` (merged with the file's ``default`` entry when it
has one; the fallback is logged and shown in ``results.md``).

The entry is then turned into a model by :func:`make_experiment` with rl-zoo3's own preprocessing: an
``rl_zoo3.exp_manager.ExperimentManager`` is created (the algorithm is registered in ``rl_zoo3.ALGOS`` under its YAML
file name) and only its preprocessing and env-creation methods are used:

* ``_preprocess_hyperparams``: ``n_envs``, ``n_timesteps`` (ignored: the budget comes from the CLI), ``lin_<float>``
  schedules (``learning_rate``, ``clip_range``, ``clip_range_vf``), ``normalize`` (bool, dict or dict string),
  ``policy_kwargs`` / ``replay_buffer_kwargs`` strings (evaluated with ``nn`` = ``torch.nn`` in scope), ``env_kwargs``,
  ``monitor_kwargs``, ``frame_stack``, ``env_wrapper``, ``vec_env_wrapper``, ``callback``, policy class paths;
* ``_preprocess_action_noise`` (``noise_type`` / ``noise_std`` for off-policy algorithms);
* ``create_envs(n_envs, no_log=True)`` for the training env and ``create_envs(1, eval_env=True)`` for the evaluation
  env (same wrappers; a ``VecNormalize`` eval env has ``training=False`` and ``norm_reward=False``).

``setup_experiment()`` / ``learn()`` are deliberately *not* used: they always create a log folder with monitor files,
``config.yml``/``args.yml``/``command.txt``, an ``EvalCallback`` with its own schedule, ``evaluations.npz`` and best-model
checkpoints.  With ``no_log=True`` and without those two methods nothing is written to disk.  Two additions of the
harness: a ``vec_env_class`` key (``"dummy"``, ``"subproc"`` or ``"algorithmic"``, default ``"dummy"``; ``--vec-env``
overrides it for every run) selects the VecEnv class (``"algorithmic"``: :class:`sb3_pcl.envs.AlgorithmicVecEnv`, the
same results as ``"dummy"`` for the algorithmic tasks, faster), and a
policy name the algorithm does not know (e.g. ``MlpPolicy`` for ``RecurrentPPO`` in ``ppo_lstm.yml``'s ``default``
entry), or a missing ``policy``, is replaced by the algorithm's alias for the observation space (``Mlp*``, ``Cnn*``,
``MultiInput*``).

Runs and evaluation
-------------------
Each run calls ``torch.set_num_threads(1)``, builds the model with ``seed=seed`` (training envs seeded ``seed + i``)
and an evaluation env seeded ``seed + 1000``.  :class:`BudgetEvalCallback` evaluates at step 0 and whenever the total
number of env steps (summed over the parallel envs) reaches the next multiple of ``eval_freq``, and stops training
when the budget is spent; a final evaluation is added if the last step was not evaluated.  Evaluation runs
``n_eval_episodes`` deterministic episodes; ``VecNormalize`` observation statistics are copied from the training env
before each evaluation and are not updated during it.  Each evaluation records ``algo, env, seed, timesteps,
mean_return, std_return, wall_time_s, fps`` where ``wall_time_s`` is the training time since ``learn()`` started,
evaluation time excluded (model construction excluded), and ``fps = timesteps / wall_time_s``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import dataclasses
import datetime
import functools
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import math
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, unwrap_vec_normalize, unwrap_vec_wrapper

from sb3_pcl.common.schedules import parse_schedule

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
REPO_HYPERPARAMS_DIR = REPO_ROOT / "hyperparams"
#: Default folder of the variants' override files (``<algo>+<variant>.yml``)
VARIANTS_HYPERPARAMS_DIR = REPO_ROOT / "benchmarks" / "hyperparams"
#: Separator of a variant name: ``pcl+expert`` is the algorithm ``pcl`` with the overrides of ``pcl+expert.yml``
VARIANT_SEPARATOR = "+"
EVAL_SEED_OFFSET = 1000
EVAL_COLUMNS = ("algo", "env", "seed", "timesteps", "mean_return", "std_return", "wall_time_s", "fps", "curriculum_length")
#: What ``mean_return`` measures: ``"eval"`` deterministic evaluation episodes on a separate env, ``"train"`` the
#: training episodes (mean of the model's ``ep_info_buffer``: the last ``stats_window_size`` = 100 episodes by default,
#: gym's definition of "solved" for the algorithmic tasks)
METRICS = ("eval", "train")
RUNS_DIRNAME = "runs"
EVALUATIONS_FILENAME = "evaluations.csv"
#: VecEnv classes of the ``vec_env_class`` key and ``--vec-env`` (``"algorithmic"``: :class:`sb3_pcl.envs.AlgorithmicVecEnv`)
VEC_ENV_TYPES = ("dummy", "subproc", "algorithmic")
#: Suffix of a run's in-progress evaluations (``runs/<run>.csv.partial``; not ``*.csv``, so never taken for a result)
PROGRESS_SUFFIX = ".csv.partial"
RUN_METADATA_FILENAME = "run_metadata.json"
CONFIG_FILENAME = "config.json"
SUMMARY_FILENAME = "results.md"


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """
    Where to find an algorithm class and its hyperparameter file.

    :param module: Module that defines the algorithm class (imported lazily)
    :param attribute: Name of the class in ``module``
    :param hyperparams_file: Name of the rl-zoo3 style YAML file, without ``.yml``
        (also the name under which the class is registered in ``rl_zoo3.ALGOS``)
    :param zoo_hyperparams: ``True`` when the YAML file ships with the ``rl_zoo3`` package,
        ``False`` when it lives in this repository's ``hyperparams/`` folder
    """

    module: str
    attribute: str
    hyperparams_file: str
    zoo_hyperparams: bool


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "ppo": AlgorithmSpec("stable_baselines3", "PPO", "ppo", True),
    "a2c": AlgorithmSpec("stable_baselines3", "A2C", "a2c", True),
    "trpo": AlgorithmSpec("sb3_contrib", "TRPO", "trpo", True),
    "recurrentppo": AlgorithmSpec("sb3_contrib", "RecurrentPPO", "ppo_lstm", True),
    "pcl": AlgorithmSpec("sb3_pcl", "PCL", "pcl", False),
    "trust_pcl": AlgorithmSpec("sb3_pcl", "TrustPCL", "trust_pcl", False),
    "urex": AlgorithmSpec("sb3_pcl", "UREX", "urex", False),
    "reinforce": AlgorithmSpec("sb3_pcl", "Reinforce", "reinforce", False),
}


def split_variant(name: str) -> tuple[str, str | None]:
    """
    Split a benchmark name into the algorithm and the variant.

    A variant ``<algo>+<variant>`` (e.g. ``pcl+expert``) runs the algorithm ``<algo>`` with its usual hyperparameter
    entry updated by the entry of the same env in the override file ``<algo>+<variant>.yml`` (see
    :func:`load_hyperparams`); it is reported as an algorithm of its own.

    :param name: Benchmark name (``pcl`` or ``pcl+expert``)
    :return: ``(algorithm, variant)``, the variant ``None`` for a plain algorithm
    :raises ValueError: if the algorithm is unknown or the variant is not made of letters, digits, ``_`` and ``-``
    """
    base, separator, variant = name.partition(VARIANT_SEPARATOR)
    if base not in ALGORITHMS:
        raise ValueError(f"Unknown algorithm {base!r} in {name!r}. Known algorithms: {', '.join(sorted(ALGORITHMS))}")
    if not separator:
        return base, None
    if not re.fullmatch(r"[A-Za-z0-9_-]+", variant):
        raise ValueError(
            f"Invalid variant name {name!r}: expected <algo>+<variant> with a variant of letters, digits, _ and -"
        )
    return base, variant


def _algorithm_spec(name: str) -> AlgorithmSpec:
    """
    :param name: Benchmark name of the algorithm or of a variant (``pcl+expert``)
    :return: The entry of :data:`ALGORITHMS` of its algorithm
    """
    return ALGORITHMS[split_variant(name)[0]]


def get_algorithm_class(name: str) -> type[BaseAlgorithm]:
    """
    Import the algorithm class registered under ``name`` in :data:`ALGORITHMS`.

    :param name: Benchmark name of the algorithm (e.g. ``"ppo"``, ``"pcl"``)
    :return: The algorithm class
    :raises ValueError: if the name is unknown
    :raises ImportError: if its module cannot be imported or does not define the class (yet)
    """
    spec = _algorithm_spec(name)
    try:
        module = importlib.import_module(spec.module)
    except ImportError as exc:
        raise ImportError(f"Algorithm {name!r} needs the module {spec.module!r}, which cannot be imported: {exc}") from exc
    algo_class = getattr(module, spec.attribute, None)
    if algo_class is None:
        raise ImportError(f"Algorithm {name!r} is not available: {spec.module}.{spec.attribute} does not exist")
    if not (isinstance(algo_class, type) and issubclass(algo_class, BaseAlgorithm)):
        raise TypeError(f"Algorithm {name!r}: {spec.module}.{spec.attribute} is not a BaseAlgorithm subclass")
    return algo_class


def default_hyperparams_dir(algo: str) -> Path:
    """
    :param algo: Benchmark name of the algorithm
    :return: The folder holding its default YAML file (the ``rl_zoo3`` package data or the repository's ``hyperparams/``)
    """
    spec = _algorithm_spec(algo)
    if not spec.zoo_hyperparams:
        return REPO_HYPERPARAMS_DIR
    # find_spec does not execute rl_zoo3/__init__.py (which patches gymnasium's TimeLimit)
    zoo_spec = importlib.util.find_spec("rl_zoo3")
    if zoo_spec is None or zoo_spec.origin is None:
        raise ImportError(f"Algorithm {algo!r} takes its hyperparameters from rl_zoo3, which is not installed")
    return Path(zoo_spec.origin).parent / "hyperparams"


def hyperparams_path(algo: str, hyperparams_dir: str | Path | None = None) -> Path:
    """
    :param algo: Benchmark name of the algorithm
    :param hyperparams_dir: Folder searched first for ``<algo>.yml`` then ``<zoo file name>.yml`` (``.yaml`` too)
    :return: The YAML file to read (it may not exist)
    """
    algo = split_variant(algo)[0]
    spec = _algorithm_spec(algo)
    if hyperparams_dir is not None:
        for stem in dict.fromkeys((algo, spec.hyperparams_file)):
            for suffix in (".yml", ".yaml"):
                candidate = Path(hyperparams_dir) / f"{stem}{suffix}"
                if candidate.is_file():
                    return candidate
    return default_hyperparams_dir(algo) / f"{spec.hyperparams_file}.yml"


def _display_path(path: Path) -> str:
    """
    :param path: A file path
    :return: The path relative to the repository (``hyperparams/pcl.yml``) or to the folder holding the ``rl_zoo3``
        package (``rl_zoo3/hyperparams/ppo.yml``) when possible, else the absolute path
    """
    path = path.resolve()
    bases = [REPO_ROOT]
    zoo_spec = importlib.util.find_spec("rl_zoo3")
    if zoo_spec is not None and zoo_spec.origin is not None:
        bases.append(Path(zoo_spec.origin).resolve().parents[1])
    for base in bases:
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


@dataclasses.dataclass
class HyperparamsEntry:
    """
    The raw hyperparameters of one (algorithm, env) pair.

    :param values: The unprocessed rl-zoo3 style entry
    :param path: YAML file it was read from (``None`` if the file does not exist)
    :param key: Key of the entry in the file (env id, ``"atari"`` or ``"default"``), ``None`` for pure defaults
    :param fell_back: Whether the env has no entry of its own (algorithm defaults with ``n_envs=1`` are used)
    :param notes: Human-readable remarks about the lookup (fallbacks), also logged
    """

    values: dict[str, Any]
    path: Path | None
    key: str | None
    fell_back: bool
    notes: list[str] = dataclasses.field(default_factory=list)
    override_path: Path | None = None
    override_key: str | None = None

    @property
    def source(self) -> str:
        """
        :return: Short description of where the hyperparameters come from
        """
        if self.path is None:
            base = "algorithm defaults (n_envs=1; no hyperparameter file)"
        elif not self.fell_back:
            base = f"{_display_path(self.path)} [{self.key}]"
        elif self.key is not None:
            base = f"algorithm defaults (n_envs=1) + {_display_path(self.path)} [{self.key}]"
        else:
            base = f"algorithm defaults (n_envs=1; no entry in {_display_path(self.path)})"
        if self.override_path is None:
            return base
        return f"{base} + {_display_path(self.override_path)} [{self.override_key}]"


def _is_atari(env_id: str) -> bool:
    """
    :param env_id: Gymnasium env id
    :return: Whether it is an ALE (Atari) environment
    """
    try:
        import gymnasium as gym

        return "AtariEnv" in str(gym.spec(env_id).entry_point)
    except Exception:
        return False


def _read_yaml_mapping(path: Path) -> dict[str, Any]:
    """
    :param path: A YAML file mapping env ids to hyperparameter entries
    :return: Its content (an empty file gives ``{}``)
    :raises ValueError: if the file does not hold a mapping
    """
    content = yaml.safe_load(path.read_text()) or {}
    if not isinstance(content, dict):
        raise ValueError(f"{path} must contain a mapping from env ids to hyperparameters, got {type(content).__name__}")
    return content


def variant_overrides_path(name: str, hyperparams_dir: str | Path | None = None) -> Path:
    """
    :param name: Benchmark name of a variant (``pcl+expert``)
    :param hyperparams_dir: Folder searched first for ``<name>.yml`` (``.yaml`` too); then :data:`VARIANTS_HYPERPARAMS_DIR`
    :return: The variant's override file
    :raises FileNotFoundError: if there is none
    """
    folders = [Path(hyperparams_dir)] if hyperparams_dir is not None else []
    folders.append(VARIANTS_HYPERPARAMS_DIR)
    candidates = [folder / f"{name}{suffix}" for folder in folders for suffix in (".yml", ".yaml")]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"The variant {name!r} needs an override file, none of these exists: {', '.join(map(str, candidates))}"
    )


def load_hyperparams(algo: str, env_id: str, hyperparams_dir: str | Path | None = None) -> HyperparamsEntry:
    """
    Select the rl-zoo3 style hyperparameter entry of ``env_id`` for ``algo``.

    Lookup order: the env id, the ``atari`` entry (Atari envs only), then a fallback to the algorithm defaults with
    ``n_envs=1`` merged with the file's ``default`` entry if present.  A missing file also falls back to the defaults.
    For a variant ``<algo>+<variant>``, the entry of ``<algo>`` is then updated key by key with the env's entry (else
    the ``default`` entry) of the override file :func:`variant_overrides_path`; an env with neither is an error.

    :param algo: Benchmark name of the algorithm or of a variant
    :param env_id: Gymnasium env id
    :param hyperparams_dir: Optional folder overriding the default YAML location (see :func:`hyperparams_path`)
    :return: The raw entry and where it comes from
    """
    base, variant = split_variant(algo)
    entry = _load_base_hyperparams(base, env_id, hyperparams_dir)
    if variant is None:
        return entry
    path = variant_overrides_path(algo, hyperparams_dir)
    content = _read_yaml_mapping(path)
    key = env_id if env_id in content else "default" if "default" in content else None
    if key is None:
        raise ValueError(f"{path}: the variant {algo!r} has no entry for {env_id!r} and no 'default' entry")
    overrides = copy.deepcopy(content[key]) or {}
    if not isinstance(overrides, dict):
        raise ValueError(f"{path}: the entry {key!r} must be a mapping, got {type(overrides).__name__}")
    entry.values.update(overrides)
    entry.override_path, entry.override_key = path, key
    return entry


def _load_base_hyperparams(algo: str, env_id: str, hyperparams_dir: str | Path | None = None) -> HyperparamsEntry:
    """:func:`load_hyperparams` of a plain algorithm (no variant)."""
    path = hyperparams_path(algo, hyperparams_dir)
    notes: list[str] = []
    if hyperparams_dir is not None and path.parent.resolve() != Path(hyperparams_dir).resolve():
        notes.append(f"{algo}: no hyperparameter file for it in {hyperparams_dir}, using {_display_path(path)}")
    if not path.is_file():
        notes.append(f"{algo}/{env_id}: {_display_path(path)} does not exist, falling back to algorithm defaults (n_envs=1)")
        return HyperparamsEntry({"n_envs": 1}, None, None, True, notes)
    content = _read_yaml_mapping(path)
    key = env_id if env_id in content else "atari" if "atari" in content and _is_atari(env_id) else None
    if key is not None:
        values = copy.deepcopy(content[key]) or {}
        if not isinstance(values, dict):
            raise ValueError(f"{path}: the entry {key!r} must be a mapping, got {type(values).__name__}")
        return HyperparamsEntry(values, path, key, False, notes)
    values = {"n_envs": 1}
    default_key = None
    if isinstance(content.get("default"), dict):
        values.update(copy.deepcopy(content["default"]))
        default_key = "default"
    notes.append(
        f"{algo}/{env_id}: no entry in {_display_path(path)}, falling back to algorithm defaults (n_envs=1)"
        + (" with its 'default' entry" if default_key else "")
    )
    return HyperparamsEntry(values, path, default_key, True, notes)


def _resolve_policy(algo_class: type[BaseAlgorithm], policy: Any, observation_space: spaces.Space) -> tuple[Any, str | None]:
    """
    Replace a missing policy, or a policy alias the algorithm does not define, by its alias for the observation space.

    :param algo_class: The algorithm class
    :param policy: Policy from the hyperparameters (alias string, class or ``None``)
    :param observation_space: Observation space of the training env
    :return: The policy to use and a note when it was replaced
    """
    aliases = list(getattr(algo_class, "policy_aliases", {}) or {})
    if policy is not None and (not isinstance(policy, str) or policy in aliases or not aliases):
        return policy, None
    if isinstance(observation_space, spaces.Dict):
        prefix = "MultiInput"
    elif is_image_space(observation_space, check_channels=False):
        prefix = "Cnn"
    else:
        prefix = "Mlp"
    for alias in aliases:
        if alias.startswith(prefix):
            what = "no policy given" if policy is None else f"policy {policy!r} is unknown to {algo_class.__name__}"
            return alias, f"{what}, using {alias!r}"
    raise ValueError(f"{algo_class.__name__}: cannot choose a policy for {observation_space} (known: {', '.join(aliases)})")


@dataclasses.dataclass
class Experiment:
    """
    A model ready to train, with its evaluation env.

    :param model: The freshly constructed model (its training env attached)
    :param eval_env: Evaluation env with the same wrappers (``VecNormalize`` not training, no reward normalization)
    :param hyperparams: The raw hyperparameter entry
    :param hyperparams_source: Where the entry comes from
    :param n_envs: Number of parallel training envs
    :param callbacks: Callbacks requested by the hyperparameters (``callback`` key)
    :param notes: Remarks about fallbacks and substitutions
    """

    model: BaseAlgorithm
    eval_env: VecEnv
    hyperparams: dict[str, Any]
    hyperparams_source: str
    n_envs: int
    callbacks: list[BaseCallback]
    notes: list[str]


def make_experiment(
    algo: str,
    env_id: str,
    seed: int,
    hyperparams_dir: str | Path | None = None,
    device: str = "cpu",
    env_packages: Sequence[str] = (),
    verbose: int = 0,
    vec_env: str | None = None,
) -> Experiment:
    """
    Build the model and evaluation env of one run from its rl-zoo3 style hyperparameters, using rl-zoo3's
    ``ExperimentManager`` preprocessing (see the module docstring); nothing is written to disk.

    :param algo: Benchmark name of the algorithm
    :param env_id: Gymnasium env id
    :param seed: Seed of the model and training envs; the evaluation env is seeded ``seed + 1000``
    :param hyperparams_dir: Optional folder overriding the default YAML location
    :param device: PyTorch device of the model
    :param env_packages: Modules to import first (e.g. to register custom envs)
    :param verbose: Verbosity of the model
    :param vec_env: VecEnv class (one of :data:`VEC_ENV_TYPES`), replacing the entry's ``vec_env_class``
    :return: The experiment
    """
    for package in env_packages:
        importlib.import_module(package)
    algo_class = get_algorithm_class(algo)
    spec = _algorithm_spec(algo)
    entry = load_hyperparams(algo, env_id, hyperparams_dir)
    notes = list(entry.notes)

    # Imported here: rl_zoo3 patches gymnasium's TimeLimit on import and pulls in optuna
    import rl_zoo3
    from rl_zoo3.exp_manager import ExperimentManager

    rl_zoo3.ALGOS.setdefault(spec.hyperparams_file, algo_class)

    values = copy.deepcopy(entry.values)
    # rl-zoo3 reads only "lin_<start>" learning rates; our other schedule strings (lin_<start>_<end>, exp_<start>_<end>)
    # are kept out of its preprocessing and passed to the model as schedules
    learning_rate_schedule = None
    if isinstance(values.get("learning_rate"), str) and not re.fullmatch(r"lin_[^_]+", values["learning_rate"]):
        learning_rate_schedule = parse_schedule("learning_rate", values.pop("learning_rate"))
    vec_env_type = values.pop("vec_env_class", "dummy")
    if vec_env is not None:
        vec_env_type = vec_env
    if vec_env_type not in VEC_ENV_TYPES:
        raise ValueError(f"vec_env_class must be one of {VEC_ENV_TYPES}, got {vec_env_type!r}")
    # n_timesteps is required by the preprocessing but ignored: the budget comes from the harness
    values.setdefault("n_timesteps", 1)
    unused_log_folder = Path(tempfile.gettempdir()) / "sb3_pcl_benchmarks_never_written"
    manager = ExperimentManager(
        argparse.Namespace(),
        spec.hyperparams_file,
        env_id,
        log_folder=str(unused_log_folder),
        n_timesteps=int(values["n_timesteps"]),
        eval_freq=-1,
        seed=seed,
        verbose=0,
        vec_env_type="dummy" if vec_env_type == "algorithmic" else vec_env_type,
        device=device,
        config=str(entry.path) if entry.path is not None else None,
    )
    if vec_env_type == "algorithmic":
        from sb3_pcl.envs import AlgorithmicVecEnv

        manager.vec_env_class = AlgorithmicVecEnv
    processed = manager._preprocess_hyperparams(values)
    hyperparams, manager.env_wrapper, callbacks = processed[0], processed[1], list(processed[2])
    if learning_rate_schedule is not None:
        hyperparams["learning_rate"] = learning_rate_schedule
    if len(processed) > 3:
        manager.vec_env_wrapper = processed[3]
    # ExperimentManager keeps the eval env kwargs of its constructor; use the entry's env_kwargs for both envs
    manager.eval_env_kwargs = manager.env_kwargs

    env = manager.create_envs(manager.n_envs, no_log=True)
    eval_env: VecEnv | None = None
    try:
        hyperparams = manager._preprocess_action_noise(hyperparams, dict(entry.values), env)
        hyperparams["policy"], note = _resolve_policy(algo_class, hyperparams.get("policy"), env.observation_space)
        if note:
            notes.append(f"{algo}/{env_id}: {note}")
        model = algo_class(env=env, seed=seed, verbose=verbose, device=device, **hyperparams)
        manager.seed = seed + EVAL_SEED_OFFSET
        eval_env = manager.create_envs(1, eval_env=True)
    except BaseException:
        env.close()
        raise
    return Experiment(model, eval_env, copy.deepcopy(entry.values), entry.source, manager.n_envs, callbacks, notes)


class BudgetEvalCallback(BaseCallback):
    """
    Evaluate the policy at step 0 and every ``eval_freq`` env steps, and stop training once ``budget`` steps are spent.

    Steps are counted in total timesteps over all parallel envs (``model.num_timesteps``); an evaluation happens as soon
    as that count reaches the next multiple of ``eval_freq``.  The time spent evaluating is excluded from the recorded
    training time.

    :param eval_env: Evaluation env (``VecNormalize`` observation statistics are copied from the training env)
    :param eval_freq: Evaluation interval in env steps
    :param n_eval_episodes: Episodes per evaluation
    :param budget: Step budget; ``_on_step`` returns ``False`` once it is reached
    :param eval_at_start: Evaluate the untrained policy at step 0
    :param deterministic: Use deterministic actions for evaluation
    :param metric: ``"eval"``: run ``n_eval_episodes`` episodes on ``eval_env``; ``"train"``: record the mean return
        of the model's recent training episodes (``ep_info_buffer``, NaN before the first one ends) instead
    :param stop_threshold: stop training at the first evaluation after step 0 whose mean return reaches this value
        (``None``: always spend the budget)
    :param progress_path: rewrite this CSV file (atomically) with the records so far after every evaluation, with
        the columns of ``progress_columns`` first, to follow a long run or see how far a killed one got
    :param progress_columns: constant columns written first in the progress file (e.g. algo, env, seed)
    """

    def __init__(
        self,
        eval_env: VecEnv,
        eval_freq: int,
        n_eval_episodes: int,
        budget: int,
        eval_at_start: bool = True,
        deterministic: bool = True,
        metric: str = "eval",
        stop_threshold: float | None = None,
        progress_path: str | Path | None = None,
        progress_columns: dict[str, Any] | None = None,
    ):
        super().__init__(verbose=0)
        if eval_freq <= 0 or n_eval_episodes <= 0 or budget <= 0:
            raise ValueError("eval_freq, n_eval_episodes and budget must be positive")
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
        self.metric = metric
        self.stop_threshold = stop_threshold
        self.stopped_at_threshold = False
        self.eval_env = eval_env
        self.eval_freq = eval_freq
        self.n_eval_episodes = n_eval_episodes
        self.budget = budget
        self.eval_at_start = eval_at_start
        self.deterministic = deterministic
        self.records: list[dict[str, float]] = []
        self.progress_path = Path(progress_path) if progress_path is not None else None
        self.progress_columns = dict(progress_columns or {})
        self._start = time.perf_counter()
        self._eval_time = 0.0
        self._next_eval = eval_freq

    def _on_training_start(self) -> None:
        self._start = time.perf_counter()
        self._eval_time = 0.0
        self._next_eval = (self.model.num_timesteps // self.eval_freq + 1) * self.eval_freq
        if self.eval_at_start:
            self.evaluate()

    def _on_step(self) -> bool:
        if self.model.num_timesteps >= self._next_eval:
            record = self.evaluate()
            self._next_eval = (self.model.num_timesteps // self.eval_freq + 1) * self.eval_freq
            if self.stop_threshold is not None and record["mean_return"] >= self.stop_threshold:
                self.stopped_at_threshold = True
                return False
        return self.model.num_timesteps < self.budget

    @property
    def training_time(self) -> float:
        """
        :return: Seconds since training started, evaluation time excluded
        """
        return time.perf_counter() - self._start - self._eval_time

    def evaluate(self) -> dict[str, float]:
        """
        Evaluate the current policy and append a record.

        :return: The record (``timesteps``, ``mean_return``, ``std_return``, ``wall_time_s``, ``fps``,
            ``curriculum_length``)
        """
        eval_start = time.perf_counter()
        train_time = eval_start - self._start - self._eval_time
        if self.metric == "train":
            returns = [float(info["r"]) for info in self.model.ep_info_buffer or []]
        else:
            train_norm = self.model.get_vec_normalize_env()
            eval_norm = unwrap_vec_normalize(self.eval_env)
            if isinstance(train_norm, VecNormalize) and eval_norm is not None:
                eval_norm.obs_rms = copy.deepcopy(train_norm.obs_rms)
                eval_norm.training = False
            episode_returns, _ = evaluate_policy(
                self.model,
                self.eval_env,
                n_eval_episodes=self.n_eval_episodes,
                deterministic=self.deterministic,
                return_episode_rewards=True,
                warn=False,
            )
            returns = [float(value) for value in episode_returns]  # type: ignore[union-attr]
        self._eval_time += time.perf_counter() - eval_start
        timesteps = int(self.model.num_timesteps)
        record = {
            "timesteps": timesteps,
            "mean_return": float(np.mean(returns)) if len(returns) else math.nan,
            "std_return": float(np.std(returns)) if len(returns) else math.nan,
            "wall_time_s": float(train_time),
            "fps": timesteps / train_time if timesteps > 0 and train_time > 0 else math.nan,
            "curriculum_length": curriculum_length(self.model.get_env()),
        }
        self.records.append(record)
        if self.progress_path is not None:
            progress = pd.DataFrame.from_records([{**self.progress_columns, **row} for row in self.records])
            _atomic_write_csv(progress, self.progress_path)
        return record

    def evaluate_final(self) -> None:
        """
        Evaluate once more after training unless the last step was already evaluated.
        """
        if not self.records or self.records[-1]["timesteps"] != self.model.num_timesteps:
            self.evaluate()


def curriculum_length(env: VecEnv | None) -> float:
    """
    :param env: A training env
    :return: The current ``min_length`` of the algorithmic tasks' curriculum (:mod:`sb3_pcl.envs`): the shared one when
        the env is wrapped in ``SharedCurriculum``, else the mean over the envs; NaN for envs without a curriculum
    """
    if env is None:
        return math.nan
    from sb3_pcl.envs.curriculum import SharedCurriculum

    shared = unwrap_vec_wrapper(env, SharedCurriculum)
    if isinstance(shared, SharedCurriculum):
        return float(shared.min_length)
    try:
        lengths = env.get_attr("min_length")
    except AttributeError:
        return math.nan
    values = [float(length) for length in lengths if isinstance(length, (int, float, np.integer))]
    return float(np.mean(values)) if values else math.nan


def _jsonable(value: Any) -> Any:
    """
    :param value: Any object
    :return: A JSON-serializable version (containers converted recursively, other objects by ``repr``)
    """
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    return repr(value)


def _spec_reward_threshold(env_id: str) -> float | None:
    """
    :param env_id: Gymnasium env id
    :return: ``spec.reward_threshold`` of the env, ``None`` if it has none or the env is not registered here
    """
    try:
        import gymnasium as gym

        threshold = gym.spec(env_id).reward_threshold
    except Exception:
        return None
    return None if threshold is None else float(threshold)


def run_experiment(
    algo: str,
    env_id: str,
    seed: int,
    steps: int,
    eval_freq: int,
    n_eval_episodes: int = 10,
    hyperparams_dir: str | Path | None = None,
    device: str = "cpu",
    env_packages: Sequence[str] = (),
    eval_at_start: bool = True,
    metric: str = "eval",
    stop_at_threshold: bool = False,
    threshold: float | None = None,
    progress_path: str | Path | None = None,
    vec_env: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """
    Train one (algo, env, seed) run for ``steps`` env steps in the current process, evaluating along the way.

    :param algo: Benchmark name of the algorithm
    :param env_id: Gymnasium env id
    :param seed: Random seed
    :param steps: Step budget (total env steps over all parallel envs)
    :param eval_freq: Evaluation interval in env steps
    :param n_eval_episodes: Deterministic episodes per evaluation
    :param hyperparams_dir: Optional folder overriding the default YAML location
    :param device: PyTorch device
    :param env_packages: Modules to import first (e.g. to register custom envs)
    :param eval_at_start: Also evaluate the untrained policy at step 0
    :param metric: What an evaluation measures (see :data:`METRICS`)
    :param stop_at_threshold: End the run at the first evaluation (after step 0) that reaches the threshold
    :param threshold: Reward threshold (default: the env's ``spec.reward_threshold``)
    :param progress_path: Rewrite this CSV file with the evaluations so far after each evaluation (same columns)
    :param vec_env: VecEnv class replacing the entry's ``vec_env_class`` (see :func:`make_experiment`)
    :return: The evaluations (columns :data:`EVAL_COLUMNS`) and the run metadata
    """
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    experiment = make_experiment(algo, env_id, seed, hyperparams_dir, device, env_packages, vec_env=vec_env)
    if threshold is None:
        threshold = _spec_reward_threshold(env_id)
    if stop_at_threshold and threshold is None:
        raise ValueError(f"stop_at_threshold needs a reward threshold, and {env_id} has none (give one explicitly)")
    callback = BudgetEvalCallback(
        experiment.eval_env,
        eval_freq,
        n_eval_episodes,
        steps,
        eval_at_start=eval_at_start,
        metric=metric,
        stop_threshold=threshold if stop_at_threshold else None,
        progress_path=progress_path,
        progress_columns={"algo": algo, "env": env_id, "seed": seed},
    )
    try:
        experiment.model.learn(total_timesteps=steps, callback=[callback, *experiment.callbacks])
        callback.evaluate_final()
    finally:
        experiment.eval_env.close()
        train_env = experiment.model.get_env()
        vec_env_name = type(train_env.unwrapped).__name__ if train_env is not None else None
        if train_env is not None:
            train_env.close()
    frame = pd.DataFrame.from_records(callback.records)
    frame.insert(0, "seed", seed)
    frame.insert(0, "env", env_id)
    frame.insert(0, "algo", algo)
    frame = frame.reindex(columns=list(EVAL_COLUMNS))
    metadata = {
        "algo": algo,
        "env": env_id,
        "seed": seed,
        "steps": steps,
        "eval_freq": eval_freq,
        "n_eval_episodes": n_eval_episodes,
        "metric": metric,
        "algorithm_class": f"{type(experiment.model).__module__}.{type(experiment.model).__qualname__}",
        "n_envs": experiment.n_envs,
        "vec_env": vec_env_name,
        "hyperparams_source": experiment.hyperparams_source,
        "hyperparams": _jsonable(experiment.hyperparams),
        "reward_threshold": threshold,
        "stopped_at_threshold": callback.stopped_at_threshold,
        "final_timesteps": int(frame["timesteps"].iloc[-1]),
        "final_mean_return": float(frame["mean_return"].iloc[-1]),
        "final_curriculum_length": float(frame["curriculum_length"].iloc[-1]),
        "train_time_s": float(frame["wall_time_s"].iloc[-1]),
        "total_time_s": time.perf_counter() - start,
        "notes": experiment.notes,
    }
    return frame, metadata


def run_name(algo: str, env_id: str, seed: int) -> str:
    """
    :param algo: Benchmark name of the algorithm
    :param env_id: Gymnasium env id
    :param seed: Random seed
    :return: File-name-safe identifier of the run (``<algo>__<env>__seed<seed>``)
    """
    return f"{_safe_name(algo)}__{_safe_name(env_id)}__seed{seed}"


def _safe_name(text: str) -> str:
    """
    :param text: Any string (e.g. ``ALE/Pong-v5``)
    :return: The string with characters other than letters, digits, ``.``, ``_`` and ``-`` replaced by ``-``
    """
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


@dataclasses.dataclass(frozen=True)
class RunTask:
    """
    One (algo, env, seed) run of a grid, as sent to a worker process.

    :param algo: Benchmark name of the algorithm
    :param env: Gymnasium env id
    :param seed: Random seed
    :param steps: Step budget
    :param eval_freq: Evaluation interval in env steps
    :param n_eval_episodes: Episodes per evaluation
    :param out_dir: Output folder of the grid
    :param hyperparams_dir: Optional folder overriding the default YAML location
    :param device: PyTorch device
    :param env_packages: Modules to import first
    :param eval_at_start: Also evaluate at step 0
    :param metric: What an evaluation measures (see :data:`METRICS`)
    :param stop_at_threshold: End the run once an evaluation reaches the threshold
    :param threshold: Reward threshold override (``None``: the env's spec)
    :param vec_env: VecEnv class replacing the entries' ``vec_env_class`` (``None``: theirs)
    """

    algo: str
    env: str
    seed: int
    steps: int
    eval_freq: int
    n_eval_episodes: int
    out_dir: str
    hyperparams_dir: str | None = None
    device: str = "cpu"
    env_packages: tuple[str, ...] = ()
    eval_at_start: bool = True
    metric: str = "eval"
    stop_at_threshold: bool = False
    threshold: float | None = None
    vec_env: str | None = None

    @property
    def name(self) -> str:
        """
        :return: The run's file-name-safe identifier
        """
        return run_name(self.algo, self.env, self.seed)


def _atomic_write_text(path: Path, text: str) -> None:
    """
    :param path: Destination file (replaced atomically)
    :param text: Content
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _atomic_write_csv(frame: pd.DataFrame, path: Path) -> None:
    """
    :param frame: Data to write (without index)
    :param path: Destination file (replaced atomically)
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _record_failure(task: RunTask, message: str) -> dict[str, Any]:
    """
    Write ``runs/<run>.err`` and remove stale results of the run.

    :param task: The failed run
    :param message: Traceback or explanation
    :return: The result dictionary reported to the main process
    """
    runs_dir = Path(task.out_dir) / RUNS_DIRNAME
    runs_dir.mkdir(parents=True, exist_ok=True)
    header = f"run {task.name}: algo={task.algo} env={task.env} seed={task.seed} steps={task.steps}\n"
    err_path = runs_dir / f"{task.name}.err"
    _atomic_write_text(err_path, header + message)
    for suffix in (".csv", ".json"):
        (runs_dir / f"{task.name}{suffix}").unlink(missing_ok=True)
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return {"name": task.name, "ok": False, "error": lines[-1] if lines else "unknown error", "err_path": str(err_path)}


def _run_task(task: RunTask) -> dict[str, Any]:
    """
    Worker entry point: run one task, write its CSV/metadata (or ``.err``) immediately, never raise.

    :param task: The run
    :return: A small result dictionary for progress reporting
    """
    runs_dir = Path(task.out_dir) / RUNS_DIRNAME
    runs_dir.mkdir(parents=True, exist_ok=True)
    try:
        frame, metadata = run_experiment(
            task.algo,
            task.env,
            task.seed,
            task.steps,
            task.eval_freq,
            task.n_eval_episodes,
            task.hyperparams_dir,
            task.device,
            task.env_packages,
            task.eval_at_start,
            task.metric,
            task.stop_at_threshold,
            task.threshold,
            progress_path=runs_dir / f"{task.name}{PROGRESS_SUFFIX}",
            vec_env=task.vec_env,
        )
    except Exception:
        return _record_failure(task, traceback.format_exc())
    _atomic_write_text(runs_dir / f"{task.name}.json", json.dumps(metadata, indent=2) + "\n")
    # The CSV is written last: its presence marks a completed run (--skip-existing)
    _atomic_write_csv(frame, runs_dir / f"{task.name}.csv")
    (runs_dir / f"{task.name}.err").unlink(missing_ok=True)
    (runs_dir / f"{task.name}{PROGRESS_SUFFIX}").unlink(missing_ok=True)
    return {
        "name": task.name,
        "ok": True,
        "final_timesteps": metadata["final_timesteps"],
        "final_mean_return": metadata["final_mean_return"],
        "total_time_s": metadata["total_time_s"],
        "notes": metadata["notes"],
    }


def _run_isolated(task: RunTask, context: multiprocessing.context.BaseContext) -> dict[str, Any]:
    """
    Run one task alone in a fresh worker process, so that a dying process can be attributed to it.

    :param task: The run
    :param context: Multiprocessing context
    :return: The result dictionary
    """
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
        try:
            return executor.submit(_run_task, task).result()
        except BrokenProcessPool:
            return _record_failure(
                task, "The worker process running this run died (killed by the OS, out of memory, or a native crash).\n"
            )


def _log_result(result: dict[str, Any], index: int, total: int) -> None:
    """
    :param result: Result dictionary of a run
    :param index: How many runs have finished
    :param total: Number of runs of this invocation
    """
    for note in result.get("notes", []):
        logger.info("%s: %s", result["name"], note)
    if result["ok"]:
        logger.info(
            "[%d/%d] %s: final mean return %.2f at %d steps (%.1f s)",
            index,
            total,
            result["name"],
            result["final_mean_return"],
            result["final_timesteps"],
            result["total_time_s"],
        )
    else:
        logger.warning("[%d/%d] %s FAILED: %s (see %s)", index, total, result["name"], result["error"], result["err_path"])


def _execute(tasks: Sequence[RunTask], workers: int, fresh_process_per_run: bool) -> list[dict[str, Any]]:
    """
    Run the tasks in a process pool; runs hit by a dying worker process are re-run, each in its own process.

    :param tasks: Runs to execute
    :param workers: Number of worker processes
    :param fresh_process_per_run: Start a new worker process for every run (Python >= 3.11)
    :return: Result dictionaries of all runs
    """
    if not tasks:
        return []
    context = multiprocessing.get_context("spawn")
    workers = max(1, min(workers, len(tasks)))
    pool_kwargs: dict[str, Any] = {}
    if fresh_process_per_run:
        if sys.version_info < (3, 11):
            raise RuntimeError("fresh_process_per_run needs Python >= 3.11 (ProcessPoolExecutor max_tasks_per_child)")
        pool_kwargs["max_tasks_per_child"] = 1
    results: list[dict[str, Any]] = []
    retry: list[RunTask] = []
    executor = concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context, **pool_kwargs)
    try:
        futures = {executor.submit(_run_task, task): task for task in tasks}
        for future in concurrent.futures.as_completed(futures):
            task = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool:
                retry.append(task)
                continue
            except Exception:
                result = _record_failure(task, traceback.format_exc())
            results.append(result)
            _log_result(result, len(results), len(tasks))
    except BaseException:
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown(wait=True)
    if retry:
        logger.warning("A worker process died; re-running %d run(s), each in its own process", len(retry))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as threads:
            for result in threads.map(functools.partial(_run_isolated, context=context), retry):
                results.append(result)
                _log_result(result, len(results), len(tasks))
    return results


def _cpu_model() -> str:
    """
    :return: CPU model name from ``/proc/cpuinfo`` (or ``platform.processor()``)
    """
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _package_version(name: str) -> str:
    """
    :param name: Distribution name
    :return: Installed version or ``"not installed"``
    """
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_revision() -> str:
    """
    :return: Short commit hash of the repository (``+dirty`` with uncommitted changes), or ``"unknown"``
    """
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if status else "")


def machine_info() -> dict[str, str]:
    """
    :return: Platform, CPU model, core count, Python and library versions, git revision
    """
    info = {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
    }
    for package in ("torch", "stable-baselines3", "sb3-contrib", "rl_zoo3", "gymnasium", "numpy"):
        info[package] = _package_version(package)
    info["git"] = _git_revision()
    return info


def _now() -> str:
    """
    :return: Current UTC time, ISO format, seconds precision
    """
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _read_json(path: Path, default: Any) -> Any:
    """
    :param path: JSON file
    :param default: Returned when the file does not exist
    :return: Parsed content
    """
    return json.loads(path.read_text()) if path.is_file() else default


def _frame_run_names(frame: pd.DataFrame) -> pd.Series:
    """
    :param frame: Evaluations
    :return: The run name of every row
    """
    if frame.empty:
        return pd.Series([], dtype=str)
    names = [run_name(str(a), str(e), int(s)) for a, e, s in zip(frame["algo"], frame["env"], frame["seed"], strict=True)]
    return pd.Series(names, index=frame.index)


def completed_runs(out_dir: str | Path) -> set[str]:
    """
    :param out_dir: Output folder of a grid
    :return: Names of the runs with results (a CSV in ``runs/`` or rows in ``evaluations.csv``)
    """
    out = Path(out_dir)
    names = {path.stem for path in (out / RUNS_DIRNAME).glob("*.csv")}
    merged = out / EVALUATIONS_FILENAME
    if merged.is_file():
        names.update(_frame_run_names(pd.read_csv(merged)))
    return names


def merge_runs(out_dir: str | Path, drop: Iterable[str] = ()) -> pd.DataFrame:
    """
    Merge ``runs/*.csv`` into ``evaluations.csv`` (and ``runs/*.json`` into ``run_metadata.json``).

    Runs already in ``evaluations.csv`` but without a CSV in ``runs/`` are kept (``runs/`` is git-ignored, so a fresh
    checkout only has the merged file); a CSV in ``runs/`` replaces the rows of its run.

    :param out_dir: Output folder of a grid
    :param drop: Run names whose rows are removed (runs that failed in this invocation)
    :return: All evaluations, sorted by env, algo, seed, timesteps
    """
    out = Path(out_dir)
    runs_dir = out / RUNS_DIRNAME
    drop = set(drop)
    frames = [pd.read_csv(path) for path in sorted(runs_dir.glob("*.csv"))]
    fresh = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(EVAL_COLUMNS))
    merged_path = out / EVALUATIONS_FILENAME
    if merged_path.is_file():
        old = pd.read_csv(merged_path)
        replaced = set(_frame_run_names(fresh)) | drop
        old = old[~_frame_run_names(old).isin(replaced)]
        if not old.empty:
            fresh = pd.concat([old, fresh], ignore_index=True) if not fresh.empty else old
    fresh = fresh.reindex(columns=list(EVAL_COLUMNS))  # CSVs written before a column existed get NaN there
    if not fresh.empty:
        fresh = fresh.astype({"seed": int, "timesteps": int})
        fresh = fresh.sort_values(["env", "algo", "seed", "timesteps"], kind="stable").reset_index(drop=True)
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write_csv(fresh, merged_path)

    metadata_path = out / RUN_METADATA_FILENAME
    metadata = {name: meta for name, meta in _read_json(metadata_path, {}).items() if name not in drop}
    for path in sorted(runs_dir.glob("*.json")):
        if (runs_dir / f"{path.stem}.csv").is_file():
            metadata[path.stem] = json.loads(path.read_text())
    _atomic_write_text(metadata_path, json.dumps(dict(sorted(metadata.items())), indent=2) + "\n")
    return fresh


def _record_finished_invocation(config_path: Path, invocation: dict[str, Any], failed: list[str]) -> None:
    """
    Mark an invocation finished in ``config.json``, re-reading the file first: other invocations writing to the
    same folder meanwhile keep their entries (the file is read again rather than overwritten from memory).

    :param config_path: The folder's ``config.json``
    :param invocation: The entry appended at the start of this invocation (updated in place)
    :param failed: Names of the runs that failed
    """
    invocation["finished"] = _now()
    invocation["runs_failed"] = failed
    config = _read_json(config_path, {"invocations": []})
    entries = config.setdefault("invocations", [])
    for index, entry in enumerate(entries):
        if entry.get("started") == invocation["started"] and entry.get("command") == invocation["command"]:
            entries[index] = invocation
            break
    else:
        entries.append(invocation)
    _atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")


def run_grid(
    algos: Sequence[str],
    envs: Sequence[str],
    seeds: Sequence[int],
    steps: int,
    eval_freq: int,
    n_eval_episodes: int = 10,
    workers: int | None = None,
    out_dir: str | Path = "benchmarks/results/latest",
    hyperparams_dir: str | Path | None = None,
    device: str = "cpu",
    skip_existing: bool = False,
    env_packages: Sequence[str] = (),
    thresholds: Mapping[str, float] | None = None,
    command: str | None = None,
    eval_at_start: bool = True,
    fresh_process_per_run: bool = False,
    write_report: bool = True,
    metric: str = "eval",
    stop_at_threshold: bool = False,
    vec_env: str | None = None,
) -> pd.DataFrame:
    """
    Run every (algo, env, seed) of the grid in worker processes and write the results to ``out_dir``.

    :param algos: Benchmark names of the algorithms (keys of :data:`ALGORITHMS`)
    :param envs: Gymnasium env ids
    :param seeds: Random seeds
    :param steps: Step budget of every run (total env steps over all parallel envs)
    :param eval_freq: Evaluation interval in env steps
    :param n_eval_episodes: Deterministic episodes per evaluation
    :param workers: Number of worker processes (default: ``os.cpu_count()``)
    :param out_dir: Output folder
    :param hyperparams_dir: Optional folder overriding the default YAML locations
    :param device: PyTorch device
    :param skip_existing: Do not re-run runs that already have results in ``out_dir``
    :param env_packages: Modules imported by the workers before creating envs (custom env registration)
    :param thresholds: Reward threshold overrides per env id (stored for later ``--summary-only`` calls)
    :param command: Command line recorded in ``results.md`` (default: this process's command line)
    :param eval_at_start: Also evaluate the untrained policy at step 0
    :param fresh_process_per_run: Use a new worker process for every run instead of reusing workers
    :param write_report: Write ``results.md`` and the plots at the end
    :param metric: ``"eval"`` (deterministic evaluation episodes) or ``"train"`` (mean return of the last 100 training
        episodes, with the curriculum length of the algorithmic tasks)
    :param stop_at_threshold: End each run at its first evaluation reaching the threshold (steps to threshold only;
        the final return is then the return at that point)
    :param vec_env: VecEnv class of every run (one of :data:`VEC_ENV_TYPES`; ``None``: each entry's ``vec_env_class``)
    :return: All evaluations in ``out_dir`` (columns :data:`EVAL_COLUMNS`)
    """
    algos, envs, seeds = list(algos), list(envs), [int(seed) for seed in seeds]
    if not algos or not envs or not seeds:
        raise ValueError("algos, envs and seeds must not be empty")
    for name, values in (("algos", algos), ("envs", envs), ("seeds", seeds)):
        if len(set(values)) != len(values):
            raise ValueError(f"duplicate entries in {name}: {values}")
    if steps <= 0 or eval_freq <= 0 or n_eval_episodes <= 0:
        raise ValueError("steps, eval_freq and n_eval_episodes must be positive")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if vec_env is not None and vec_env not in VEC_ENV_TYPES:
        raise ValueError(f"vec_env must be one of {VEC_ENV_TYPES}, got {vec_env!r}")
    for algo in algos:  # fail fast with a clear error instead of one failing run per task
        get_algorithm_class(algo)

    out = Path(out_dir)
    (out / RUNS_DIRNAME).mkdir(parents=True, exist_ok=True)
    tasks = [
        RunTask(
            algo,
            env,
            seed,
            steps,
            eval_freq,
            n_eval_episodes,
            str(out),
            None if hyperparams_dir is None else str(hyperparams_dir),
            device,
            tuple(env_packages),
            eval_at_start,
            metric,
            stop_at_threshold,
            (thresholds or {}).get(env),
            vec_env,
        )
        for env in envs
        for algo in algos
        for seed in seeds
    ]
    existing = completed_runs(out) if skip_existing else set()
    todo = [task for task in tasks if task.name not in existing]
    if len(todo) < len(tasks):
        logger.info("Skipping %d run(s) with existing results", len(tasks) - len(todo))
    workers = workers or os.cpu_count() or 1

    config_path = out / CONFIG_FILENAME
    config = _read_json(config_path, {"invocations": []})
    invocation: dict[str, Any] = {
        "command": command if command is not None else _current_command(),
        "algos": algos,
        "envs": envs,
        "seeds": seeds,
        "steps": steps,
        "eval_freq": eval_freq,
        "n_eval_episodes": n_eval_episodes,
        "eval_at_start": eval_at_start,
        "metric": metric,
        "stop_at_threshold": stop_at_threshold,
        "vec_env": vec_env,
        "workers": workers,
        "device": device,
        "hyperparams_dir": None if hyperparams_dir is None else str(hyperparams_dir),
        "skip_existing": skip_existing,
        "thresholds": dict(thresholds or {}),
        "machine": machine_info(),
        "started": _now(),
        "finished": None,
        "runs_executed": len(todo),
        "runs_failed": [],
    }
    config["invocations"].append(invocation)
    _atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")

    logger.info("Running %d run(s) with %d worker(s), results in %s", len(todo), min(workers, max(len(todo), 1)), out)
    results = _execute(todo, workers, fresh_process_per_run)
    failed = sorted(result["name"] for result in results if not result["ok"])
    _record_finished_invocation(config_path, invocation, failed)

    frame = merge_runs(out, drop=failed)
    if write_report:
        write_summary(out, thresholds)
    if failed:
        logger.warning("%d run(s) failed: %s (tracebacks in %s)", len(failed), ", ".join(failed), out / RUNS_DIRNAME)
    return frame


def _current_command() -> str:
    """
    :return: The command line of this process, shell-quoted
    """
    import shlex

    return shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))


def threshold_crossings(frame: pd.DataFrame, threshold: float | None, exclude_initial: bool = True) -> pd.DataFrame:
    """
    First evaluation of every run whose mean return reaches the threshold (``mean_return >= threshold``).

    :param frame: Evaluations (columns :data:`EVAL_COLUMNS`)
    :param threshold: Reward threshold (``None``: no run reaches it)
    :param exclude_initial: Ignore the evaluation of the untrained policy at step 0 (a lucky initialization, e.g. a
        deterministic policy that balances CartPole, says nothing about sample efficiency)
    :return: One row per (algo, env, seed) with ``reached`` and the ``timesteps`` / ``wall_time_s`` of the first
        crossing (NaN when not reached)
    """
    rows = []
    for (algo, env, seed), run in frame.groupby(["algo", "env", "seed"], sort=True):
        run = run.sort_values("timesteps")
        if exclude_initial:
            run = run[run["timesteps"] > 0]
        hits = run[run["mean_return"] >= threshold] if threshold is not None else run.iloc[0:0]
        first = hits.iloc[0] if not hits.empty else None
        rows.append(
            {
                "algo": algo,
                "env": env,
                "seed": seed,
                "reached": first is not None,
                "timesteps": float(first["timesteps"]) if first is not None else math.nan,
                "wall_time_s": float(first["wall_time_s"]) if first is not None else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["algo", "env", "seed", "reached", "timesteps", "wall_time_s"])


def summarize_results(frame: pd.DataFrame, thresholds: Mapping[str, float | None]) -> pd.DataFrame:
    """
    Aggregate the evaluations per (env, algo) over seeds.

    Columns: ``env, algo, n_seeds, final_mean, final_std`` (mean and population std over seeds of the last evaluation),
    ``best_mean`` (mean over seeds of each seed's best evaluation), ``fps`` (mean over seeds of the final fps),
    ``wall_time_s`` (mean over seeds of the final training wall-clock), ``threshold``, ``n_reached`` (seeds whose
    evaluation reached the threshold), ``steps_to_threshold`` / ``wall_to_threshold`` (median over seeds of the first
    crossing after step 0, NaN unless all seeds reach it), ``curriculum_final`` / ``curriculum_min`` /
    ``curriculum_max`` (mean, min and max over seeds of the last recorded curriculum length; NaN without curriculum).

    :param frame: Evaluations (columns :data:`EVAL_COLUMNS`)
    :param thresholds: Reward threshold per env id (missing or ``None``: no threshold)
    :return: One row per (env, algo)
    """
    rows = []
    for (env, algo), group in frame.groupby(["env", "algo"], sort=True):
        group = group.sort_values(["seed", "timesteps"])
        finals = group.groupby("seed").tail(1)
        best = group.groupby("seed")["mean_return"].max()
        threshold = thresholds.get(env)
        crossings = threshold_crossings(group, threshold)
        n_seeds = len(finals)
        n_reached = int(crossings["reached"].sum())
        all_reached = threshold is not None and n_reached == n_seeds
        rows.append(
            {
                "env": env,
                "algo": algo,
                "n_seeds": n_seeds,
                "final_mean": float(finals["mean_return"].mean()),
                "final_std": float(finals["mean_return"].std(ddof=0)),
                "best_mean": float(best.mean()),
                "fps": float(finals["fps"].mean()),
                "wall_time_s": float(finals["wall_time_s"].mean()),
                "threshold": math.nan if threshold is None else float(threshold),
                "n_reached": n_reached,
                "steps_to_threshold": float(crossings["timesteps"].median()) if all_reached else math.nan,
                "wall_to_threshold": float(crossings["wall_time_s"].median()) if all_reached else math.nan,
                **_curriculum_summary(group),
            }
        )
    return pd.DataFrame(rows)


def _curriculum_summary(group: pd.DataFrame) -> dict[str, float]:
    """
    :param group: Evaluations of one (env, algo), sorted by seed and timesteps
    :return: Mean, min and max over seeds of each seed's last recorded curriculum length (NaN without curriculum)
    """
    column = group["curriculum_length"] if "curriculum_length" in group else pd.Series(math.nan, index=group.index)
    finals = column.groupby(group["seed"]).agg(lambda values: values.dropna().iloc[-1] if values.notna().any() else math.nan)
    finals = finals.dropna()
    if finals.empty:
        return {"curriculum_final": math.nan, "curriculum_min": math.nan, "curriculum_max": math.nan}
    return {
        "curriculum_final": float(finals.mean()),
        "curriculum_min": float(finals.min()),
        "curriculum_max": float(finals.max()),
    }


def format_threshold_cell(value: float, n_reached: int, n_seeds: int, has_threshold: bool = True, decimals: int = 0) -> str:
    """
    :param value: Median over seeds (NaN unless all seeds reached the threshold)
    :param n_reached: Number of seeds that reached the threshold
    :param n_seeds: Number of seeds
    :param has_threshold: Whether the env has a threshold at all
    :param decimals: Decimals of the value
    :return: The value, ``"n/a (k/N seeds)"`` when not all seeds reached the threshold, ``"-"`` without threshold
    """
    if not has_threshold:
        return "-"
    if n_reached < n_seeds or math.isnan(value):
        return f"n/a ({n_reached}/{n_seeds} seeds)"
    return f"{value:.{decimals}f}"


def _format_number(value: float) -> str:
    """
    :param value: A return or rate
    :return: Compact representation (1 decimal for magnitudes >= 1, 3 significant digits below)
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if abs(value) >= 1 or value == 0:
        return f"{value:.1f}"
    return f"{value:.3g}"


def resolve_thresholds(
    envs: Sequence[str],
    overrides: Mapping[str, float] | None = None,
    run_metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, tuple[float | None, str]]:
    """
    :param envs: Env ids
    :param overrides: Thresholds given explicitly (e.g. ``--threshold ENV=VALUE``)
    :param run_metadata: Metadata of the runs (``reward_threshold`` recorded by the workers)
    :return: For every env, its threshold and where it comes from (``"override"``, ``"env spec"`` or ``"none"``)
    """
    overrides = overrides or {}
    recorded: dict[str, float] = {}
    for meta in (run_metadata or {}).values():
        if meta.get("reward_threshold") is not None:
            recorded[meta["env"]] = float(meta["reward_threshold"])
    resolved: dict[str, tuple[float | None, str]] = {}
    for env in envs:
        if env in overrides:
            resolved[env] = (float(overrides[env]), "override")
            continue
        threshold = recorded.get(env, _spec_reward_threshold(env))
        resolved[env] = (threshold, "env spec") if threshold is not None else (None, "none")
    return resolved


def plot_learning_curves(
    frame: pd.DataFrame,
    out_dir: str | Path,
    thresholds: Mapping[str, float | None],
    steps: int | None = None,
    algo_order: Sequence[str] | None = None,
    ylabel: str = "evaluation return",
    grid: int | None = None,
) -> list[Path]:
    """
    Write one PNG per env (``out_dir/<env>.png``): mean evaluation return over seeds vs timesteps with a min-max band,
    one line per algorithm, the threshold as a dashed line.

    :param frame: Evaluations (columns :data:`EVAL_COLUMNS`)
    :param out_dir: Output folder
    :param thresholds: Reward threshold per env id
    :param steps: Step budget shown in the titles (default: the largest timesteps of the env)
    :param algo_order: Order of the algorithms in the legends
    :param ylabel: What the returns are (y axis label)
    :param grid: The evaluation interval: each record is placed on the multiple of ``grid`` it was taken for (an
        evaluation happens at the first step count at or past each multiple, so the seeds of algorithms whose step
        count grows by uneven amounts line up), and a run that ended early (``--stop-at-threshold``) keeps its last
        value until the end of the plot. ``None``: the raw step counts
    :return: Paths of the written files
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for env, env_frame in frame.groupby("env", sort=True):
        algos = _ordered(env_frame["algo"].unique(), algo_order)
        seeds = sorted(int(seed) for seed in env_frame["seed"].unique())
        fig, ax = plt.subplots(figsize=(7, 4.5))
        last_step = int(env_frame["timesteps"].max())
        for algo in algos:
            runs = env_frame[env_frame["algo"] == algo]
            if grid:
                placed = runs.assign(timesteps=(runs["timesteps"] // grid) * grid)
                per_seed = placed.groupby(["timesteps", "seed"])["mean_return"].last().unstack("seed")
                per_seed = per_seed.reindex(range(0, (last_step // grid) * grid + 1, grid)).ffill()
                curve = pd.DataFrame({"mean": per_seed.mean(axis=1), "min": per_seed.min(axis=1), "max": per_seed.max(axis=1)})
            else:
                curve = runs.groupby("timesteps")["mean_return"].agg(["mean", "min", "max"])
            n_seeds = env_frame.loc[env_frame["algo"] == algo, "seed"].nunique()
            marker = "." if len(curve) < 30 else None
            (line,) = ax.plot(curve.index, curve["mean"], label=f"{algo} ({n_seeds} seeds)", marker=marker)
            ax.fill_between(curve.index, curve["min"], curve["max"], color=line.get_color(), alpha=0.2, linewidth=0)
        threshold = thresholds.get(env)
        if threshold is not None:
            ax.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        budget = steps if steps is not None else int(env_frame["timesteps"].max())
        ax.set_title(f"{env}: {budget} steps, seeds {', '.join(map(str, seeds))}")
        ax.set_xlabel("timesteps")
        ax.set_ylabel(f"{ylabel}\n(mean over seeds, min-max band)")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        path = Path(out_dir) / f"{_safe_name(str(env))}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def _ordered(values: Iterable[str], order: Sequence[str] | None) -> list[str]:
    """
    :param values: Names
    :param order: Preferred order (names not in it come after, sorted)
    :return: The names ordered
    """
    values = set(values)
    preferred = [value for value in (order or []) if value in values]
    return preferred + sorted(values - set(preferred))


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """
    :param header: Column names
    :param rows: Cells
    :return: A GitHub-flavoured markdown table
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_summary(out_dir: str | Path, thresholds: Mapping[str, float] | None = None) -> Path:
    """
    Write ``out_dir/results.md`` and the learning-curve PNGs from the CSVs in ``out_dir`` (``runs/*.csv`` are merged
    into ``evaluations.csv`` first).

    :param out_dir: Output folder of a grid
    :param thresholds: Reward threshold overrides per env id; they take precedence over the overrides stored with the
        grid (``config.json``) and over ``spec.reward_threshold``
    :return: Path of ``results.md``
    """
    out = Path(out_dir)
    frame = merge_runs(out)
    config = _read_json(out / CONFIG_FILENAME, {"invocations": []})
    invocations = config.get("invocations", [])
    last = invocations[-1] if invocations else {}
    run_metadata = _read_json(out / RUN_METADATA_FILENAME, {})
    overrides: dict[str, float] = {}
    for invocation in invocations:
        overrides.update(invocation.get("thresholds") or {})
    overrides.update(thresholds or {})

    envs = _ordered(frame["env"].unique(), last.get("envs"))
    algos = _ordered(frame["algo"].unique(), last.get("algos"))
    resolved = resolve_thresholds(envs, overrides, run_metadata)
    threshold_values = {env: value for env, (value, _) in resolved.items()}
    seeds = sorted(int(seed) for seed in frame["seed"].unique())
    steps = last.get("steps")

    lines = ["# Benchmark results", ""]
    commands = [invocation["command"] for invocation in invocations] or ["unknown (no config.json in this folder)"]
    lines += ["Command" + ("s (in order; later ones resumed or extended the grid)" if len(commands) > 1 else "") + ":", ""]
    lines += ["```bash", *commands, "```", ""]
    machine = last.get("machine") or machine_info()
    eval_freq, n_episodes = last.get("eval_freq"), last.get("n_eval_episodes")
    metric = last.get("metric", "eval")
    when = f"every {eval_freq} env steps{' and at step 0' if last.get('eval_at_start', True) else ''}"
    if not last:
        eval_text = "unknown"
    elif metric == "train":
        eval_text = (
            f"{when}: mean return of the last 100 training episodes (the model's ep_info_buffer; gym's definition of "
            "solved), no separate evaluation"
        )
    else:
        eval_text = f"{when}, {n_episodes} deterministic episodes on a separate env seeded seed+{EVAL_SEED_OFFSET}"
    returns_of = "training return (last 100 episodes)" if metric == "train" else "evaluation return"
    settings = [
        ("Algorithms", ", ".join(algos)),
        ("Environments", ", ".join(envs)),
        ("Seeds", ", ".join(map(str, seeds))),
        ("Step budget", f"{steps} env steps per run (total over parallel envs)" if steps else "unknown"),
        ("Evaluation", eval_text),
        ("Workers", str(last.get("workers", "unknown"))),
        ("Device", str(last.get("device", "unknown"))),
        ("Machine", f"{machine.get('platform')}; {machine.get('cpu')}; {machine.get('cores')} cores"),
        (
            "Versions",
            ", ".join(
                f"{name} {machine.get(name, 'unknown')}"
                for name in ("python", "torch", "stable-baselines3", "sb3-contrib", "rl_zoo3", "gymnasium", "numpy")
            ),
        ),
        ("Git revision", machine.get("git", "unknown")),
        ("Date (UTC)", f"started {last.get('started', 'unknown')}, finished {last.get('finished', 'unknown')}"),
        ("Summary written (UTC)", _now()),
    ]
    lines += [_markdown_table(["Setting", "Value"], [[name, value] for name, value in settings]), ""]
    lines += [
        f"Return: {returns_of}. "
        "Final return: last evaluation, mean ± std over seeds. Best eval: mean over seeds of each seed's best evaluation. "
        "FPS and train wall-clock: training only (evaluation excluded), final value, mean over seeds. "
        "Steps / wall-clock to threshold: first evaluation after step 0 with mean return >= threshold, median over "
        "seeds (n/a unless every seed reaches it). "
        + ("Runs stop at their first evaluation reaching the threshold. " if last.get("stop_at_threshold") else "")
        + "Curriculum length (algorithmic tasks only): the curriculum's "
        "min_length at the last evaluation, mean over seeds [min, max].",
        "",
    ]

    summary = summarize_results(frame, threshold_values)
    header = [
        "Algorithm",
        "Seeds",
        "Final return",
        "Best eval",
        "FPS",
        "Train wall-clock (s)",
        "Steps to threshold",
        "Wall-clock to threshold (s)",
        "Seeds reaching threshold",
        "Hyperparameters",
    ]
    for env in envs:
        threshold, source = resolved[env]
        title = f"threshold {threshold:g} ({source})" if threshold is not None else "no reward threshold"
        lines += [f"## {env} ({title})", ""]
        rows = []
        env_summary = summary[summary["env"] == env].set_index("algo")
        with_curriculum = bool(env_summary["curriculum_final"].notna().any())
        for algo in _ordered(env_summary.index, algos):
            row = env_summary.loc[algo]
            sources = sorted(
                {
                    str(meta.get("hyperparams_source"))
                    for meta in run_metadata.values()
                    if meta.get("algo") == algo and meta.get("env") == env
                }
            )
            has_threshold = threshold is not None
            n_reached, n_seeds = int(row["n_reached"]), int(row["n_seeds"])
            rows.append(
                [
                    algo,
                    str(n_seeds),
                    f"{_format_number(row['final_mean'])} ± {_format_number(row['final_std'])}",
                    _format_number(row["best_mean"]),
                    f"{row['fps']:.0f}" if not math.isnan(row["fps"]) else "-",
                    f"{row['wall_time_s']:.1f}",
                    format_threshold_cell(row["steps_to_threshold"], n_reached, n_seeds, has_threshold),
                    format_threshold_cell(row["wall_to_threshold"], n_reached, n_seeds, has_threshold, decimals=1),
                    f"{n_reached}/{n_seeds}" if has_threshold else "-",
                    "; ".join(sources) if sources else "unknown",
                ]
            )
            if with_curriculum:
                rows[-1].insert(
                    -1,
                    "-"
                    if math.isnan(row["curriculum_final"])
                    else f"{row['curriculum_final']:.1f} [{row['curriculum_min']:.0f}, {row['curriculum_max']:.0f}]",
                )
        env_header = [*header[:-1], "Curriculum length", header[-1]] if with_curriculum else header
        lines += [_markdown_table(env_header, rows), ""]
        lines += [f"![{env}]({_safe_name(env)}.png)", ""]

    errors = sorted((out / RUNS_DIRNAME).glob("*.err"))
    if errors:
        lines += ["## Failed runs", ""]
        for path in errors:
            error_lines = [line for line in path.read_text().splitlines() if line.strip()]
            last_line = error_lines[-1] if error_lines else "unknown error"
            lines.append(f"- `{path.stem}`: {last_line} (`{RUNS_DIRNAME}/{path.name}`)")
        lines.append("")

    plot_learning_curves(
        frame, out, threshold_values, steps=steps, algo_order=algos, ylabel=returns_of, grid=last.get("eval_freq")
    )
    path = out / SUMMARY_FILENAME
    _atomic_write_text(path, "\n".join(lines))
    return path
