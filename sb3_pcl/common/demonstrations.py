"""
Demonstrations: episode files, recording episodes from any agent, and checking them against a model's spaces.

An *episode* is a dict of NumPy arrays, the format of :func:`sb3_pcl.envs.expert.generate_expert_episodes`:

=================  ==============================================================================
key                value
=================  ==============================================================================
``observations``   ``(T + 1, *obs_shape)``: the ``T`` visited states, then the state reached at the end
``actions``        ``(T, *action_shape)``: the actions taken, in the environment's action space
``rewards``        ``(T,)`` float64
``terminated``     bool: the last state is terminal (no bootstrapping from it)
``truncated``      bool: the episode was cut (time limit); then the last state is bootstrapped from
=================  ==============================================================================

Observations and rewards are the environment's raw ones (never ``VecNormalize``-d), which is what
:class:`~sb3_pcl.common.path_buffer.PathReplayBuffer` stores for the transitions it collects.

:func:`save_episodes` writes a list of episodes to one ``.npz`` file (concatenated arrays plus the
episode lengths; no pickle), :func:`load_episodes` reads it back with ``allow_pickle=False``.
:func:`record_episodes` plays any trained agent (``predict``, recurrent policies included) and returns
such episodes; :func:`check_episodes` validates them against an observation and an action space, as
:meth:`sb3_pcl.PCL.add_demonstrations` does before seeding its replay.

Demonstrations can also come from a local `Minari <https://minari.farama.org>`_ dataset (a ``MinariDataset``, a
dataset id or a dataset folder: :mod:`sb3_pcl.common.minari_io`, optional extra ``minari``); :func:`load_demonstrations`
turns any of these sources into episode dicts.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeAlias

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback

from sb3_pcl.common import minari_io
from sb3_pcl.common.episode_checks import EPISODE_KEYS, NUMERIC_KINDS, Demonstration, check_episodes, episode_arrays
from sb3_pcl.common.npz_files import check_header, npz_member_names, read_npz_headers
from sb3_pcl.common.path_buffer import PathReplayBuffer
from sb3_pcl.common.recording import record_episodes

if TYPE_CHECKING:
    from minari import MinariDataset

__all__ = [
    "EPISODE_KEYS",
    "Demonstration",
    "DemonstrationSource",
    "DemonstrationsCallback",
    "check_episodes",
    "load_demonstrations",
    "load_episodes",
    "record_episodes",
    "save_episodes",
    "seed_replay",
]

#: arrays stored in an episodes file
_FILE_KEYS = ("observations", "actions", "rewards", "lengths", "terminated", "truncated")
#: version 1: algorithmic tasks only (scalar observations, (T, 3) actions); version 2: any array shapes
_FORMAT_VERSION = 2

#: what :meth:`sb3_pcl.PCL.add_demonstrations` takes: episode dicts, an episodes ``.npz`` file, or a local Minari dataset
#: (a ``minari.MinariDataset``, a dataset id or a dataset folder)
DemonstrationSource: TypeAlias = "Sequence[Mapping[str, Any]] | str | os.PathLike[str] | MinariDataset"


# ---------------------------------------------------------------------------------------------- files
# ---------------------------------------------------------------------------------------------- files
def save_episodes(path: str | os.PathLike[str], episodes: Sequence[Mapping[str, Any]]) -> None:
    """
    Save episodes to a single ``.npz`` file (concatenated arrays plus per-episode lengths, no pickle).

    The file is written at ``path`` exactly (no ``.npz`` suffix is appended). Observations and actions keep
    their dtype (the common one of all episodes) and per-step shape, which must be the same in every episode.

    :param path: destination file
    :param episodes: episodes as returned by :func:`record_episodes` or
        :func:`~sb3_pcl.envs.expert.generate_expert_episodes`
    :raises ValueError: when an episode is malformed or the episodes' shapes differ
    """
    checked = [episode_arrays(episode, index) for index, episode in enumerate(episodes)]
    if checked:
        obs_shape, action_shape = checked[0][0].shape[1:], checked[0][1].shape[1:]
        for index, (observations, actions, *_) in enumerate(checked):
            if observations.shape[1:] != obs_shape or actions.shape[1:] != action_shape:
                raise ValueError(
                    f"Episode {index}: observations of shape {observations.shape[1:]} and actions of shape "
                    f"{actions.shape[1:]} per step differ from episode 0's ({obs_shape} and {action_shape})"
                )
        observations = np.concatenate([episode[0] for episode in checked])
        actions = np.concatenate([episode[1] for episode in checked])
        rewards = np.concatenate([episode[2] for episode in checked])
    else:
        observations = np.zeros(0, dtype=np.int64)
        actions = np.zeros(0, dtype=np.int64)
        rewards = np.zeros(0, dtype=np.float64)
    with open(path, "wb") as file:
        np.savez_compressed(
            file,
            observations=observations,
            actions=actions,
            rewards=rewards,
            lengths=np.asarray([len(episode[2]) for episode in checked], dtype=np.int64),
            terminated=np.asarray([episode[3] for episode in checked], dtype=bool),
            truncated=np.asarray([episode[4] for episode in checked], dtype=bool),
            format_version=np.asarray(_FORMAT_VERSION, dtype=np.int64),
        )


def load_episodes(path: str | os.PathLike[str], max_steps: int | None = None) -> list[dict[str, Any]]:
    """
    Load episodes written by :func:`save_episodes` (``allow_pickle=False``).

    The archive's members and every array's header are checked before anything is read
    (:func:`~sb3_pcl.common.npz_files.read_npz_headers`: unexpected members are refused unread, declared sizes must
    agree), then the arrays' dtypes and their shapes against each other, and the number of steps against ``max_steps``.

    :param path: the ``.npz`` file
    :param max_steps: the most steps the file may hold (``None``: no limit; ``add_demonstrations`` passes the room
        left in the replay)
    :return: the episodes; observations and actions in their stored dtype, rewards float64, flags bool
    :raises FileNotFoundError: when the file does not exist
    :raises ValueError: when the file is not a valid episodes file (corrupt, missing keys, unexpected members,
        inconsistent shapes, more steps than ``max_steps``)
    """
    name = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No episodes file at {name!r}")
    try:
        with open(path, "rb") as file:
            _check_episode_headers(file, name, max_steps)
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: np.asarray(data[key]) for key in _FILE_KEYS}
            version = int(data["format_version"]) if "format_version" in data.files else 1
    except (OSError, EOFError, KeyError, ValueError, TypeError, zipfile.BadZipFile, zlib.error) as error:
        if str(error).startswith(f"{name!r} is not a valid episodes .npz file"):  # from the header checks
            raise
        raise ValueError(f"{name!r} is not a valid episodes .npz file: {error}") from error
    if version > _FORMAT_VERSION:
        raise ValueError(f"{name!r} has format version {version}; this sb3_pcl reads versions up to {_FORMAT_VERSION}")

    try:
        steps = _episode_lengths(arrays)
    except ValueError as error:
        raise ValueError(f"{name!r} is not a valid episodes .npz file: {error}") from None
    observations, actions, rewards = arrays["observations"], arrays["actions"], arrays["rewards"]

    episodes = []
    step_start = obs_start = 0
    for index, length in enumerate(steps):
        episodes.append(
            {
                "observations": observations[obs_start : obs_start + length + 1].copy(),
                "actions": actions[step_start : step_start + length].copy(),
                "rewards": rewards[step_start : step_start + length].astype(np.float64),
                "terminated": bool(arrays["terminated"][index]),
                "truncated": bool(arrays["truncated"][index]),
            }
        )
        step_start += length
        obs_start += length + 1
    return episodes


def _check_episode_headers(file: IO[bytes], name: str, max_steps: int | None) -> None:
    """
    Check an episodes file's members and array headers, before any array is read.

    :param file: the file, open for reading
    :param name: its name, for the messages
    :param max_steps: the most steps it may hold (``None``: no limit)
    :raises ValueError: naming the file and the problem
    """
    what = "episodes"
    members = npz_member_names(file, repr(name), what)
    missing = [key for key in _FILE_KEYS if key not in members]
    if missing:
        raise ValueError(f"{name!r} is not a valid episodes .npz file: missing keys {missing}")
    headers = read_npz_headers(file, repr(name), what, (*_FILE_KEYS, "format_version"))
    n_steps = check_header(headers, "rewards", None, (None,), repr(name), what).shape[0]
    n_episodes = check_header(headers, "lengths", None, (None,), repr(name), what).shape[0]
    if max_steps is not None and max(n_steps, n_episodes) > max_steps:
        raise ValueError(
            f"{name!r} holds {n_episodes} episodes of {n_steps} steps in all, more than the {max_steps} steps the replay "
            "has room for (refused before reading it): raise buffer_size or seed fewer episodes"
        )
    for key, rows in (("observations", n_steps + n_episodes), ("actions", n_steps)):
        header = headers[key]
        if header.shape[:1] != (rows,) and (n_episodes or header.shape[:1] != (0,)):
            raise ValueError(
                f"{name!r} is not a valid episodes .npz file: inconsistent array shapes: {n_steps} rewards and "
                f"{n_episodes} episode lengths need {rows} {key}, but the file declares {header.shape} (refused before "
                "reading it)"
            )
    for key in ("terminated", "truncated"):
        check_header(headers, key, bool, (n_episodes,), repr(name), what)
    if "format_version" in headers:
        check_header(headers, "format_version", None, (), repr(name), what)
    for key, header in headers.items():
        if header.dtype.kind not in NUMERIC_KINDS:
            raise ValueError(f"{name!r} is not a valid episodes .npz file: {key} has the non-numeric dtype {header.dtype}")


def _episode_lengths(arrays: Mapping[str, np.ndarray]) -> list[int]:
    """
    Check the arrays of an episodes file against its ``lengths``, in exact integer arithmetic.

    The lengths are summed as Python ints: an int64 sum could wrap around (lengths near 2**62 summing to the number
    of stored steps) and slice the arrays into malformed episodes.

    :param arrays: the arrays of the file (every key of ``_FILE_KEYS`` present)
    :return: the episode lengths
    :raises ValueError: naming the problem (without the file name)
    """
    lengths = arrays["lengths"]
    if lengths.ndim != 1 or (lengths.size > 0 and lengths.dtype.kind not in "iu"):
        raise ValueError(f"'lengths' must be a 1-d array of integers, got dtype {lengths.dtype} and shape {lengths.shape}")
    steps = [int(value) for value in lengths.tolist()]
    negative = next((index for index, length in enumerate(steps) if length < 0), None)
    if negative is not None:
        raise ValueError(f"episode {negative} has a negative length ({steps[negative]})")
    n_episodes, total = len(steps), sum(steps)
    for key, expected in (("observations", total + n_episodes), ("actions", total), ("rewards", total)):
        array = arrays[key]
        if array.ndim < 1 or array.dtype.kind not in NUMERIC_KINDS or (key == "rewards" and array.ndim != 1):
            raise ValueError(f"{key} must be a numeric array, got dtype {array.dtype} and shape {array.shape}")
        if len(array) != expected:
            raise ValueError(
                f"inconsistent array shapes: the {n_episodes} episode lengths sum to {total} steps, which need "
                f"{expected} {key}, but the file holds {len(array)}"
            )
    for key in ("terminated", "truncated"):
        if arrays[key].shape != (n_episodes,):
            raise ValueError(f"inconsistent array shapes: {key} has shape {arrays[key].shape}, expected ({n_episodes},)")
    return steps


def load_demonstrations(
    source: DemonstrationSource,
    observation_space: spaces.Space | None = None,
    action_space: spaces.Space | None = None,
    max_steps: int | None = None,
) -> list[dict[str, Any]]:
    """
    Turn any demonstrations source into episode dicts.

    A path is read as an episodes file (:func:`load_episodes`) when it is a file, as a Minari dataset folder when it is
    a folder; a string that is neither, of the form ``[namespace/]name-v<version>``, is the id of a local Minari dataset
    (:func:`sb3_pcl.common.minari_io.open_minari_dataset`: never downloaded). A ``minari.MinariDataset`` is read as it
    is, and episode dicts are returned as they are.

    :param source: episode dicts, an episodes file, or a Minari dataset (object, id or folder)
    :param observation_space: the model's: a Minari dataset's observation space is compared with it (kind and shape)
    :param action_space: the model's: a Minari dataset's action space is compared with it
    :param max_steps: the most steps a file or a Minari dataset folder may hold, checked before its arrays are read
        (``None``: no limit)
    :return: the episode dicts (unchecked: see :func:`check_episodes`)
    :raises FileNotFoundError: when a path or id leads to nothing
    :raises ValueError: when the file or dataset is invalid (errors about a Minari dataset name it)
    :raises ImportError: when a Minari dataset is given and Minari is not installed
    """
    if minari_io.is_minari_source(source):
        return minari_io.minari_episodes(source, observation_space, action_space, max_steps)[0]
    if isinstance(source, (str, os.PathLike)):
        return load_episodes(source, max_steps)
    if isinstance(source, Mapping):
        raise ValueError("Expected a list of episode dicts, got a single dict (wrap it in a list)")
    return list(source)


def _checked_demonstrations(
    source: DemonstrationSource, observation_space: spaces.Space, action_space: spaces.Space, max_steps: int | None
) -> list[Demonstration]:
    """:func:`load_demonstrations` then :func:`check_episodes`, whose errors name the Minari dataset when there is one"""
    if not minari_io.is_minari_source(source):
        return check_episodes(load_demonstrations(source, max_steps=max_steps), observation_space, action_space)
    episodes, name = minari_io.minari_episodes(source, observation_space, action_space, max_steps)
    try:
        return check_episodes(episodes, observation_space, action_space)
    except ValueError as error:
        raise ValueError(f"Minari dataset {name!r}: {error}") from None


def seed_replay(
    buffer: PathReplayBuffer,
    episodes: DemonstrationSource,
    observation_space: spaces.Space,
    action_space: spaces.Space,
    scale_action: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[int, int]:
    """
    Add demonstrations to a path replay as seeded paths (never evicted, sampled with the top priority).

    Every episode is checked first (:func:`check_episodes`); nothing is added when one is invalid. The actions are
    stored as the policy samples them: for a policy that squashes its output (``use_sde=True`` with
    ``squash_output=True``), pass its ``scale_action``, which maps the env's bounds to ``[-1, 1]`` as for the
    collected actions.

    :param buffer: the replay
    :param episodes: episode dicts, the path of a file written by :func:`save_episodes`, or a local Minari dataset
        (a ``minari.MinariDataset``, a dataset id or a dataset folder: see :func:`load_demonstrations`)
    :param observation_space: the model's observation space
    :param action_space: the model's action space
    :param scale_action: maps env actions to the policy's action space (``None``: stored as they are)
    :return: the number of paths and of transitions added
    :raises ValueError: when an episode does not fit the spaces, or the replay would have no room left for one
        collected transition per env; for a Dict observation space (episodes files and Minari datasets hold one
        observation array: add such paths with ``buffer.add_path``, which takes a dict of arrays)
    """
    if isinstance(observation_space, spaces.Dict):
        raise ValueError(
            f"Demonstrations of Dict observations ({observation_space}) are not supported: episodes files and Minari "
            "datasets hold one observation array per step. Add such paths with model.replay_buffer.add_path("
            "observations, actions, rewards, seed=True), whose observations are a dict of (T + 1, ...) arrays"
        )
    room = buffer.buffer_size - buffer.n_seeded_transitions - buffer.n_envs
    # a file or dataset folder larger than the room is refused from its declared sizes, before it is read
    checked = _checked_demonstrations(episodes, observation_space, action_space, max(room, 0))
    n_transitions = sum(len(episode.rewards) for episode in checked)
    if n_transitions > room:
        raise ValueError(
            f"The demonstrations hold {n_transitions} transitions but the replay (buffer_size={buffer.buffer_size}, "
            f"{buffer.n_seeded_transitions} already seeded) has room for {max(room, 0)} with one slot "
            "per env left for collection: raise buffer_size or seed fewer episodes"
        )
    for episode in checked:
        actions = episode.actions.reshape((len(episode.rewards), buffer.action_dim))
        if scale_action is not None:  # the env's units -> the policy's (a squashing policy's [-1, 1])
            actions = scale_action(episode.actions).reshape(actions.shape)
        buffer.add_path(
            episode.observations.reshape((len(episode.observations), *buffer.obs_shape)),
            actions.astype(np.float32),
            episode.rewards,
            terminated=episode.terminated,
            seed=True,
        )
    return len(checked), n_transitions


class DemonstrationsCallback(BaseCallback):
    """
    Seed an off-policy PCL model's replay with demonstrations when training starts (e.g. from an rl-zoo3 YAML file).

    At the start of every ``learn`` whose replay holds no seeded path yet, the episodes are added with
    :meth:`sb3_pcl.PCL.add_demonstrations` (checked against the model's spaces first): a fresh replay, or one reset
    or replaced since, is seeded again.

    :param episodes: an episodes ``.npz`` file written by :func:`save_episodes`, a list of episode dicts, or a local
        Minari dataset (a ``minari.MinariDataset``, a dataset id or a dataset folder; opened here to fail early, read
        again at each seeding)
    :param verbose: 0 no output, 1 info
    """

    def __init__(self, episodes: DemonstrationSource, verbose: int = 0):
        super().__init__(verbose)
        if minari_io.is_minari_source(episodes):
            try:
                minari_io.open_minari_dataset(episodes)
            except (FileNotFoundError, ValueError) as error:
                raise type(error)(f"DemonstrationsCallback: {error}") from None
        elif isinstance(episodes, (str, os.PathLike)) and not os.path.isfile(episodes):
            raise FileNotFoundError(f"DemonstrationsCallback: no episodes file at {os.fspath(episodes)!r}")
        self.episodes = episodes

    def demonstrations(self) -> DemonstrationSource:
        """:return: what to seed the replay with (subclasses generate it from the model's env)"""
        return self.episodes

    def _on_training_start(self) -> None:
        add_demonstrations = getattr(self.model, "add_demonstrations", None)
        if add_demonstrations is None:
            raise TypeError(
                f"{type(self).__name__} needs a model with a path replay (PCL, TrustPCL, ...), not {type(self.model).__name__}"
            )
        if self.model.replay_buffer.n_seeded_paths == 0:  # type: ignore[attr-defined]
            n_added = add_demonstrations(self.demonstrations())
            if self.verbose >= 1:
                print(f"{type(self).__name__}: seeded the replay with {n_added} paths")

    def _on_step(self) -> bool:
        return True
