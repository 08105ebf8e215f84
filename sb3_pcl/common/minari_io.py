"""
Minari datasets as demonstrations: reading them into PCL's replay, and writing a trained agent's episodes as one.

`Minari <https://minari.farama.org>`_ is the Farama Foundation's format for offline RL datasets. It is an optional
dependency (``pip install -e ".[minari]"``), imported only when a Minari dataset is read or written.

Reading: :meth:`sb3_pcl.PCL.add_demonstrations` and
:class:`~sb3_pcl.common.demonstrations.DemonstrationsCallback` take a :class:`minari.MinariDataset`, the id of a
*local* dataset (``"sb3_pcl/cartpole-expert-v0"``, found in ``MINARI_DATASETS_PATH``, default
``~/.minari/datasets``) or the path of a dataset folder. Each Minari episode (``observations`` ``T + 1``,
``actions``, ``rewards``, ``terminations``, ``truncations`` ``T``) becomes an episode dict
(:mod:`sb3_pcl.common.demonstrations`) with ``terminated = terminations[-1]`` and ``truncated = truncations[-1]``,
then goes through the same checks as any demonstration. Nothing is ever downloaded: fetch remote datasets with
Minari's own tools first.

Writing: :func:`save_minari_dataset` writes episode dicts as a local dataset, :func:`record_minari_dataset` plays a
trained agent (:func:`~sb3_pcl.common.demonstrations.record_episodes`) and writes its episodes.

Only array spaces are supported (``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``): datasets with ``Dict``,
``Tuple`` or other nested spaces are refused.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.vec_env import VecEnv

from sb3_pcl.common.episode_checks import check_episodes
from sb3_pcl.common.recording import record_episodes

if TYPE_CHECKING:
    from types import ModuleType

    from minari import MinariDataset

__all__ = [
    "INSTALL_HINT",
    "check_dataset_id",
    "check_dataset_sizes",
    "datasets_root",
    "import_minari",
    "is_minari_dataset",
    "is_minari_source",
    "minari_episodes",
    "open_minari_dataset",
    "record_minari_dataset",
    "save_minari_dataset",
]

#: how to install the optional dependency
INSTALL_HINT = 'pip install -e ".[minari]"'
#: ``[namespace/...]name-v<version>``: segments of letters, digits, ``-`` and ``_``, a version number at the end
_DATASET_ID = re.compile(r"(?:[-\w]+/)*[-\w]+-v\d+")
_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def import_minari() -> ModuleType:
    """
    :return: the ``minari`` module
    :raises ImportError: naming the extra to install, when Minari (or its HDF5 storage) is missing
    """
    try:
        import minari  # optional dependency, imported when needed
    except ImportError as error:
        raise ImportError(f"Minari datasets need the optional package minari: {INSTALL_HINT} ({error})") from error
    return minari


def is_minari_dataset(value: Any) -> bool:
    """:return: whether ``value`` is a :class:`minari.MinariDataset` (without importing Minari when it is not loaded)"""
    module = sys.modules.get("minari")
    return module is not None and isinstance(value, module.MinariDataset)


def check_dataset_id(dataset_id: Any) -> str:
    """
    :param dataset_id: a Minari dataset id, ``[namespace/]name-v<version>`` (e.g. ``"sb3_pcl/cartpole-expert-v0"``)
    :return: the id
    :raises ValueError: when it does not follow Minari's naming rule
    """
    if not isinstance(dataset_id, str) or _DATASET_ID.fullmatch(dataset_id) is None:
        raise ValueError(
            f"Invalid Minari dataset id {dataset_id!r}: ids are '[namespace/]name-v<version>', made of letters, digits, "
            "'-' and '_' (e.g. 'sb3_pcl/cartpole-expert-v0')"
        )
    return dataset_id


def datasets_root() -> str:
    """:return: the folder of the local Minari datasets: ``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``"""
    return os.environ.get("MINARI_DATASETS_PATH") or os.path.join(os.path.expanduser("~"), ".minari", "datasets")


def is_minari_source(source: Any) -> bool:
    """
    :param source: what was given as demonstrations
    :return: whether it stands for a Minari dataset: a ``MinariDataset``, an existing folder, or a string that is not
        an existing file and has the form of a dataset id
    """
    if is_minari_dataset(source):
        return True
    if not isinstance(source, (str, os.PathLike)):
        return False
    path = os.fspath(source)
    if os.path.isdir(path):
        return True
    return isinstance(source, str) and not os.path.exists(path) and _DATASET_ID.fullmatch(path) is not None


def _read(minari: ModuleType, data_path: str, name: str) -> MinariDataset:
    """
    :param minari: the module
    :param data_path: a dataset's ``data`` folder
    :param name: what the user gave, for the error message
    :return: the dataset
    :raises ValueError: when the folder does not hold a readable dataset
    """
    try:
        return minari.MinariDataset(data_path)
    except ImportError:
        raise
    except Exception as error:  # Minari raises ValueError, KeyError, OSError or AssertionError on broken folders
        problem = f"{type(error).__name__}: {error}"
        raise ValueError(f"{name!r} is not a readable Minari dataset ({data_path}): {problem}") from error


#: the largest ``metadata.json`` of a dataset read
MAX_METADATA_BYTES = 1 << 20


def check_dataset_sizes(data_path: str, name: str, max_steps: int | None) -> None:
    """
    Check a dataset folder's declared sizes before Minari's reader allocates anything.

    Minari reads whole episodes into memory, at the sizes the data file declares. This reads ``metadata.json`` (at most
    :data:`MAX_METADATA_BYTES`) and, for the HDF5 format, the shape of every array (h5py reads headers, not data): the
    episode and step counts must be non-negative integers, at most ``max_steps`` steps, and no array may have more rows
    than an episode of the declared steps holds (``total_steps + 1``). Other formats are checked on their metadata.

    :param data_path: the dataset's ``data`` folder
    :param name: what the user gave, for the messages
    :param max_steps: the most steps the dataset may hold (``None``: no limit)
    :raises ValueError: naming the dataset and the size that does not fit
    """
    metadata_path = os.path.join(data_path, "metadata.json")
    if not os.path.isfile(metadata_path):
        return  # Minari's reader says what is missing
    if os.path.getsize(metadata_path) > MAX_METADATA_BYTES:
        raise ValueError(f"{name!r} is not a readable Minari dataset: its metadata.json exceeds {MAX_METADATA_BYTES} bytes")
    try:
        with open(metadata_path, encoding="utf-8") as file:
            metadata = json.load(file)
    except (OSError, ValueError) as error:
        raise ValueError(f"{name!r} is not a readable Minari dataset: unreadable metadata.json ({error})") from None
    counts: dict[str, int] = {}
    for key in ("total_episodes", "total_steps"):
        value = metadata.get(key) if isinstance(metadata, dict) else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name!r} is not a readable Minari dataset: metadata.json's {key} is {value!r}")
        counts[key] = value
    n_steps = counts["total_steps"]
    if max_steps is not None and max(n_steps, counts["total_episodes"]) > max_steps:
        raise ValueError(
            f"Minari dataset {name!r} holds {counts['total_episodes']} episodes of {n_steps} steps in all, more than the "
            f"{max_steps} steps the replay has room for (refused before reading it): raise buffer_size or seed fewer "
            "episodes"
        )
    data_file = os.path.join(data_path, "main_data.hdf5")
    if metadata.get("data_format", "hdf5") != "hdf5" or not os.path.isfile(data_file):
        return
    try:
        import h5py
    except ImportError:  # Minari's HDF5 reader needs it: it will say so
        return
    try:
        with h5py.File(data_file, "r") as data:
            if len(data) > counts["total_episodes"]:
                raise ValueError(f"{len(data)} episodes stored, {counts['total_episodes']} declared in metadata.json")
            arrays: list[Any] = []
            data.visititems(lambda _, item: arrays.append(item) if isinstance(item, h5py.Dataset) else None)
            for array in arrays:  # shapes only: no data is read
                if array.ndim < 1 or array.shape[0] > n_steps + 1:
                    raise ValueError(
                        f"the array {array.name} has shape {array.shape}, more rows than the {n_steps} steps declared"
                    )
    except ValueError as error:
        raise ValueError(f"{name!r} is not a valid Minari dataset (refused before reading it): {error}") from None
    except (OSError, KeyError, TypeError, AttributeError):
        return  # not a readable HDF5 file: Minari's reader reports it in its own words


def open_minari_dataset(source: Any, max_steps: int | None = None) -> tuple[MinariDataset, str]:
    """
    Open a local Minari dataset (never downloading it).

    A dataset folder's declared sizes are checked first (:func:`check_dataset_sizes`).

    :param source: a ``MinariDataset``, a dataset folder (the one holding ``data/``, or ``data/`` itself) or the id of a
        dataset in :func:`datasets_root`
    :param max_steps: the most steps the dataset may hold, checked before Minari reads it (``None``: no limit)
    :return: the dataset and its name (its id) for messages
    :raises FileNotFoundError: when no such local dataset exists
    :raises ValueError: when the folder does not hold a readable dataset
    :raises ImportError: when Minari is not installed
    """
    if is_minari_dataset(source):
        return source, str(source.spec.dataset_id)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"Expected a Minari dataset, a dataset folder or a dataset id, got {type(source).__name__}")
    path = os.fspath(source)
    if os.path.isdir(path):
        data_path = os.path.join(path, "data") if os.path.isdir(os.path.join(path, "data")) else path
        check_dataset_sizes(data_path, path, max_steps)
        return _read(import_minari(), data_path, path), path
    if isinstance(source, str) and _DATASET_ID.fullmatch(path) is not None:
        folder = os.path.join(datasets_root(), path)
        if not os.path.isdir(os.path.join(folder, "data")):
            raise FileNotFoundError(
                f"{path!r} is neither an episodes file, a dataset folder nor a local Minari dataset: no {folder}/data "
                "(local datasets live in MINARI_DATASETS_PATH, default ~/.minari/datasets; sb3_pcl never downloads "
                "any: write one with save_minari_dataset / record_minari_dataset, or fetch it with Minari first)"
            )
        check_dataset_sizes(os.path.join(folder, "data"), path, max_steps)
        return _read(import_minari(), os.path.join(folder, "data"), path), path
    raise FileNotFoundError(f"No episodes file, Minari dataset folder or local Minari dataset at {path!r}")


def _check_space(space: spaces.Space, model_space: spaces.Space | None, what: str, name: str) -> None:
    """
    :param space: the dataset's observation or action space
    :param model_space: the model's (``None``: not compared)
    :param what: ``"observation"`` or ``"action"``
    :param name: the dataset's name, for the messages
    :raises ValueError: when ``space`` is not an array space, or differs from the model's in kind or shape (the bounds
        of a ``Box`` are not compared: the values are checked step by step instead)
    """
    if not isinstance(space, _ARRAY_SPACES):
        raise ValueError(
            f"Minari dataset {name!r} has the {what} space {space}: demonstrations need Box, Discrete, MultiDiscrete "
            "or MultiBinary spaces (Dict, Tuple and other nested spaces are not supported)"
        )
    if model_space is None:
        return
    same = type(space) is type(model_space) and space.shape == model_space.shape
    if same and isinstance(space, spaces.Discrete):
        same = int(space.n) == int(model_space.n) and int(space.start) == int(model_space.start)  # type: ignore[attr-defined]
    if same and isinstance(space, spaces.MultiDiscrete):
        same = bool(np.array_equal(space.nvec, model_space.nvec))  # type: ignore[attr-defined]
    if not same:
        raise ValueError(f"Minari dataset {name!r} has the {what} space {space}, but the model's is {model_space}")


def minari_episodes(
    source: Any,
    observation_space: spaces.Space | None = None,
    action_space: spaces.Space | None = None,
    max_steps: int | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """
    Read a local Minari dataset as episode dicts (see :mod:`sb3_pcl.common.demonstrations`).

    :param source: a ``MinariDataset``, a dataset folder or a local dataset id (see :func:`open_minari_dataset`)
    :param observation_space: the model's, compared with the dataset's (kind and shape) when given
    :param action_space: the model's, compared with the dataset's (kind and shape; ``n`` of ``Discrete``) when given
    :param max_steps: the most steps a dataset folder may hold, checked before Minari reads it (``None``: no limit)
    :return: the episodes (``terminated = terminations[-1]``, ``truncated = truncations[-1]``) and the dataset's name
    :raises ValueError: naming the dataset, when a space is not supported or differs from the model's, or an episode
        is malformed (an episode that ends before its last step, arrays of different lengths)
    """
    dataset, name = open_minari_dataset(source, max_steps)
    _check_space(dataset.observation_space, observation_space, "observation", name)
    _check_space(dataset.action_space, action_space, "action", name)
    episodes = []
    try:
        for index, data in enumerate(dataset.iterate_episodes()):
            episodes.append(_episode_dict(data, index, name))
    except (ValueError, ImportError):
        raise
    except Exception as error:  # h5py / pyarrow errors of a damaged data file
        raise ValueError(f"Minari dataset {name!r} could not be read: {type(error).__name__}: {error}") from error
    return episodes, name


def _episode_dict(data: Any, index: int, name: str) -> dict[str, Any]:
    """
    :param data: a ``minari.EpisodeData``
    :param index: its position in the dataset, for the messages
    :param name: the dataset's name, for the messages
    :return: the episode dict
    """
    where = f"Minari dataset {name!r}, episode {index} (id {data.id})"
    rewards = np.asarray(data.rewards)
    terminations = np.asarray(data.terminations, dtype=bool).reshape(-1)
    truncations = np.asarray(data.truncations, dtype=bool).reshape(-1)
    if rewards.ndim != 1 or len(terminations) != len(rewards) or len(truncations) != len(rewards):
        raise ValueError(
            f"{where}: rewards {rewards.shape}, terminations {terminations.shape} and truncations {truncations.shape} "
            "must all have shape (T,)"
        )
    ended_early = np.flatnonzero(terminations[:-1] | truncations[:-1])
    if ended_early.size:
        raise ValueError(
            f"{where} ends at step {ended_early[0]} (terminated or truncated) but goes on until step {len(rewards) - 1}"
        )
    return {
        "observations": np.asarray(data.observations),
        "actions": np.asarray(data.actions),
        "rewards": rewards,
        "terminated": bool(terminations[-1]) if len(rewards) else False,
        "truncated": bool(truncations[-1]) if len(rewards) else False,
    }


# ---------------------------------------------------------------------------------------------- writing
@contextlib.contextmanager
def _datasets_path(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Point ``MINARI_DATASETS_PATH`` at ``path`` (absolute) for the duration of the block (nothing when ``None``)."""
    if path is None:
        yield
        return
    previous = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = os.path.abspath(os.fspath(path))
    try:
        yield
    finally:
        if previous is None:
            del os.environ["MINARI_DATASETS_PATH"]
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous


def save_minari_dataset(
    episodes: Sequence[Mapping[str, Any]],
    dataset_id: str,
    env: str | gym.Env | EnvSpec | None = None,
    *,
    observation_space: spaces.Space | None = None,
    action_space: spaces.Space | None = None,
    algorithm_name: str | None = None,
    author: str | None = None,
    author_email: str | None = None,
    code_permalink: str | None = None,
    description: str | None = None,
    datasets_path: str | os.PathLike[str] | None = None,
) -> MinariDataset:
    """
    Write episodes as a new local Minari dataset (with :func:`minari.create_dataset_from_buffers`).

    Every episode is checked against the spaces first (:func:`~sb3_pcl.common.demonstrations.check_episodes`):
    nothing is written when one is invalid. Each step's ``terminations`` / ``truncations`` are ``False`` but the last,
    which holds the episode's ``terminated`` / ``truncated``. Image observations are stored losslessly (no JPEG), where
    the installed Minari offers the choice. Minari warns about the metadata left out (author, email, code permalink,
    description).

    :param episodes: episode dicts (see :mod:`sb3_pcl.common.demonstrations`), at least one
    :param dataset_id: the new dataset's id, ``[namespace/]name-v<version>``; it must not exist yet
    :param env: the environment that produced the episodes (an id, an env or an ``EnvSpec``), stored in the metadata so
        that ``dataset.recover_environment()`` works; ``None``: give both spaces instead
    :param observation_space: the dataset's observation space (default: the env's)
    :param action_space: the dataset's action space (default: the env's)
    :param algorithm_name: Minari metadata: the algorithm that produced the episodes
    :param author: Minari metadata
    :param author_email: Minari metadata
    :param code_permalink: Minari metadata: a link to the code that produced the dataset
    :param description: Minari metadata
    :param datasets_path: write under this folder instead of Minari's (``MINARI_DATASETS_PATH``, else
        ``~/.minari/datasets``); read it back with the dataset's folder ``datasets_path/dataset_id``
    :return: the new dataset
    :raises ValueError: when the id is invalid or taken, the spaces are missing or not array spaces, or an episode does
        not fit them
    """
    check_dataset_id(dataset_id)
    if isinstance(episodes, Mapping):
        raise ValueError("Expected a list of episode dicts, got a single dict (wrap it in a list)")
    if len(episodes) == 0:
        raise ValueError("A Minari dataset needs at least one episode")
    minari = import_minari()
    made = gym.make(env) if isinstance(env, (str, EnvSpec)) else None
    try:
        source_env = made if made is not None else env
        if source_env is not None and not isinstance(source_env, gym.Env):
            raise ValueError(f"env must be an env id, a gymnasium Env or an EnvSpec, got {type(env).__name__}")
        if source_env is not None:  # (an empty Dict space is falsy: compare with None)
            observation_space = source_env.observation_space if observation_space is None else observation_space
            action_space = source_env.action_space if action_space is None else action_space
        if observation_space is None or action_space is None:
            raise ValueError("save_minari_dataset needs env, or both observation_space and action_space")
        _check_space(observation_space, None, "observation", dataset_id)
        _check_space(action_space, None, "action", dataset_id)
        checked = check_episodes(episodes, observation_space, action_space)
        buffers = []
        for demo, episode in zip(checked, episodes, strict=True):
            flags = np.zeros(len(demo.rewards), dtype=bool)
            terminations, truncations = flags.copy(), flags.copy()
            terminations[-1] = demo.terminated
            truncations[-1] = bool(episode.get("truncated", False))
            buffers.append(
                minari.data_collector.EpisodeBuffer(
                    observations=demo.observations,
                    actions=demo.actions,
                    rewards=demo.rewards,
                    terminations=terminations,
                    truncations=truncations,
                )
            )
        options: dict[str, Any] = {}
        if "jpeg_encoding" in inspect.signature(minari.create_dataset_from_buffers).parameters:
            options["jpeg_encoding"] = False
        spec = source_env.spec if source_env is not None else None
        with _datasets_path(datasets_path):
            return minari.create_dataset_from_buffers(
                dataset_id,
                buffers,
                env=source_env,
                eval_env=spec,
                algorithm_name=algorithm_name,
                author=author,
                author_email=author_email,
                code_permalink=code_permalink,
                observation_space=observation_space,
                action_space=action_space,
                description=description,
                **options,
            )
    finally:
        if made is not None:
            made.close()


def record_minari_dataset(
    model: BaseAlgorithm | BasePolicy,
    env: str | gym.Env | VecEnv,
    n_episodes: int,
    dataset_id: str,
    *,
    deterministic: bool = True,
    seed: int | None = None,
    algorithm_name: str | None = None,
    author: str | None = None,
    author_email: str | None = None,
    code_permalink: str | None = None,
    description: str | None = None,
    datasets_path: str | os.PathLike[str] | None = None,
) -> MinariDataset:
    """
    Play a trained agent (:func:`~sb3_pcl.common.demonstrations.record_episodes`) and write its episodes as a new local
    Minari dataset (:func:`save_minari_dataset`).

    :param model: the agent (any SB3 / sb3-contrib model or policy)
    :param env: the environment (an id, an env, or a VecEnv, with ``VecNormalize`` outermost when present: the raw
        observations and rewards are recorded)
    :param n_episodes: number of episodes (at least one)
    :param dataset_id: the new dataset's id, ``[namespace/]name-v<version>``
    :param deterministic: act deterministically
    :param seed: seed of the env's first reset
    :param algorithm_name: Minari metadata (default: ``sb3_pcl.<model class>``)
    :param author: Minari metadata
    :param author_email: Minari metadata
    :param code_permalink: Minari metadata
    :param description: Minari metadata (default: says how the episodes were recorded)
    :param datasets_path: write under this folder instead of Minari's (see :func:`save_minari_dataset`)
    :return: the new dataset
    """
    check_dataset_id(dataset_id)
    import_minari()
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}")
    episodes = record_episodes(model, env, n_episodes, deterministic=deterministic, seed=seed)
    agent = type(model).__name__
    if algorithm_name is None:
        algorithm_name = f"sb3_pcl.{agent}"
    if description is None:
        mode = "deterministic" if deterministic else "stochastic"
        description = f"{n_episodes} episodes of a trained {agent} agent ({mode} actions), recorded with sb3_pcl"
    source: str | gym.Env | EnvSpec | None = None
    observation_space = action_space = None
    if isinstance(env, VecEnv):
        spec = env.get_attr("spec", indices=[0])[0]
        source = spec if isinstance(spec, EnvSpec) else None
        observation_space, action_space = env.observation_space, env.action_space
    else:
        source = env
    return save_minari_dataset(
        episodes,
        dataset_id,
        source,
        observation_space=observation_space,
        action_space=action_space,
        algorithm_name=algorithm_name,
        author=author,
        author_email=author_email,
        code_permalink=code_permalink,
        description=description,
        datasets_path=datasets_path,
    )
