"""
Which algorithm and which hyperparameter entry a benchmark run uses: an algorithm's benchmark name
(:data:`ALGORITHMS`), or a variant ``<algo>+<name>`` (the entry of ``<algo>`` updated by ``<algo>+<name>.yml``).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import importlib.util
import re
from pathlib import Path
from typing import Any

import yaml
from stable_baselines3.common.base_class import BaseAlgorithm

REPO_ROOT = Path(__file__).resolve().parents[1]
REPO_HYPERPARAMS_DIR = REPO_ROOT / "hyperparams"
#: Folder of the variants' override files ``<algo>+<variant>.yml`` (and of baseline files used with --hyperparams-dir)
VARIANTS_HYPERPARAMS_DIR = REPO_ROOT / "benchmarks" / "hyperparams"
VARIANT_SEPARATOR = "+"


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """An algorithm class (``module.attribute``, imported lazily) and its YAML file ``hyperparams_file.yml``, which
    ships with rl-zoo3 when ``zoo_hyperparams`` (else it is in this repository's ``hyperparams/``)."""

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
    "recurrent_reinforce": AlgorithmSpec("sb3_pcl", "RecurrentReinforce", "recurrent_reinforce", False),
    "recurrent_urex": AlgorithmSpec("sb3_pcl", "RecurrentUREX", "recurrent_urex", False),
}


def split_variant(name: str) -> tuple[str, str | None]:
    """
    :param name: ``<algo>`` or a variant ``<algo>+<variant>``
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
    """:return: rl-zoo3's ``hyperparams`` folder (found without running ``rl_zoo3/__init__.py``, which patches gymnasium)"""
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
    :param zoo_v4_entries: A baseline (file shipped with rl-zoo3) without an entry for a ``-v5`` env reads its ``-v4``
        entry (rl-zoo3 publishes tuned MuJoCo settings for the v4 tasks only)
    :param entry: Read this key of the file whatever the env (one recipe on several tasks)
    :return: The YAML file and the key rl-zoo3 reads: ``entry``, else the env id, the v4 id, ``atari`` or ``default``
    :raises ValueError: if the file has no entry ``entry``
    """
    path = hyperparams_path(algo, hyperparams_dir)
    content = yaml.safe_load(path.read_text()) or {}
    if entry is not None:
        if entry not in content:
            raise ValueError(f"{_display_path(path)} has no entry {entry!r} (asked for {algo} on {env_id})")
        return path, entry
    fallback = zoo_v4_id(env_id) if zoo_v4_entries and ALGORITHMS[split_variant(algo)[0]].zoo_hyperparams else None
    if env_id in content:
        return path, env_id
    if fallback is not None and fallback in content:
        return path, fallback
    return path, "atari" if "atari" in content and env_id.startswith("ALE/") else "default"


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
    :param zoo_v4_entries: As in :func:`resolve_entry`
    :param entry: As in :func:`resolve_entry`
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
