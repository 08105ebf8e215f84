"""
Dict observations (SB3's ``MultiInputPolicy``): how the replay and the episode batches hold them.

A ``spaces.Dict`` observation is stored as SB3's ``DictReplayBuffer`` stores it: one array per sub-space, keyed like
the space. :class:`ObsDict` is that dict of arrays, with one addition: indexing it with anything but a key (an int, a
slice, an index array, a tuple of them) indexes the rows of every array, and assigning to such an index writes every
array. The code that stores and gathers ``Box`` observations in one array therefore stores and gathers dict ones
unchanged. The functions below do the few other operations (reshaping, concatenating, masking) on either kind.
"""

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.preprocessing import get_obs_shape

T = TypeVar("T", np.ndarray, th.Tensor)


class ObsDict(dict):  # type: ignore[type-arg]
    """
    Dict observations: a ``dict`` of arrays keyed like the ``Dict`` space, whose non-key indexing indexes rows.

    ``obs["image"]`` is the image array; ``obs[3]``, ``obs[slots]`` or ``obs[:t, col]`` is an :class:`ObsDict` of
    the same rows of every array (views where NumPy gives views), and ``obs[slots] = other`` writes ``other[key]``
    into every array. ``copy()`` copies the arrays.
    """

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            return dict.__getitem__(self, index)
        return ObsDict({key: value[index] for key, value in self.items()})

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, str):
            dict.__setitem__(self, index, value)
            return
        for key, array in self.items():
            array[index] = value[key]

    def copy(self) -> "ObsDict":  # type: ignore[override]
        """:return: a copy of every array"""
        return ObsDict({key: np.array(value) for key, value in self.items()})

    def __deepcopy__(self, memo: dict[int, Any]) -> "ObsDict":
        return self.copy()


def dict_subspaces(observation_space: spaces.Dict) -> dict[str, spaces.Space]:
    """
    :param observation_space: a ``Dict`` observation space
    :return: its sub-spaces by key, in the space's order
    :raises ValueError: for a key that is not a string, or a sub-space that is itself a ``Dict`` or a ``Tuple``
        (SB3's ``CombinedExtractor`` takes neither)
    """
    subspaces: dict[str, spaces.Space] = {}
    for key, subspace in observation_space.spaces.items():
        if not isinstance(key, str):
            raise ValueError(f"Dict observation space keys must be strings, got {key!r} in {observation_space}")
        if isinstance(subspace, (spaces.Dict, spaces.Tuple)):
            raise ValueError(
                f"nested observation spaces are not supported: key {key!r} of {observation_space} is a "
                f"{type(subspace).__name__} space (flatten it, e.g. with gymnasium.wrappers.FlattenObservation)"
            )
        subspaces[key] = subspace
    return subspaces


def storage_dtype(space: spaces.Space) -> np.dtype:
    """:return: the dtype a (sub-)space's observations are stored in (the space's, float32 without one)"""
    return np.dtype(space.dtype if space.dtype is not None else np.float32)


def map_obs(function: Callable[[Any], Any], obs: Any) -> Any:
    """
    :param function: applied to an array or tensor
    :param obs: one array or tensor, or a dict of them
    :return: ``function(obs)``, or a dict (the same keys) of ``function`` applied to each value
    """
    if isinstance(obs, Mapping):
        return {key: function(value) for key, value in obs.items()}
    return function(obs)


def merge_leading(obs: Any, n_rows: int) -> Any:
    """
    :param obs: ``(T, B, ...)`` tensors (one, or a dict of them)
    :param n_rows: ``T * B``
    :return: the same, reshaped to ``(T * B, ...)``
    """
    return map_obs(lambda value: value.reshape(n_rows, *value.shape[2:]), obs)


def cat_obs(first: Any, second: Any) -> Any:
    """
    :param first: ``(n, ...)`` tensors (one, or a dict of them)
    :param second: ``(m, ...)`` tensors, the same kind and keys
    :return: their concatenation along the first axis ``(n + m, ...)``
    """
    if isinstance(first, Mapping):
        return {key: th.cat((value, second[key])) for key, value in first.items()}
    return th.cat((first, second))


def obs_batch_size(obs: Any) -> int:
    """:return: the length of the first axis (of the first array of a dict)"""
    return len(next(iter(obs.values()))) if isinstance(obs, Mapping) else len(obs)


def obs_layout(observation_space: spaces.Space) -> dict[str | None, tuple[tuple[int, ...], np.dtype]]:
    """
    How observations of a space are stored: ``{None: (shape, dtype)}`` for one array, ``{key: (shape, dtype)}`` per
    sub-space of a ``Dict`` space.

    :param observation_space: the observation space
    :return: the shape of one observation and its storage dtype, per stored array
    """
    if isinstance(observation_space, spaces.Dict):
        return {key: _layout_of(subspace) for key, subspace in dict_subspaces(observation_space).items()}
    return {None: _layout_of(observation_space)}


def _layout_of(space: spaces.Space) -> tuple[tuple[int, ...], np.dtype]:
    return tuple(int(n) for n in get_obs_shape(space)), storage_dtype(space)  # type: ignore[union-attr]


def obs_member(name: str, key: str | None) -> str:
    """:return: the name of the array holding sub-space ``key`` of the observations ``name`` in our ``.npz`` files"""
    return name if key is None else f"{name}.{key}"


def zeros_obs(observation_space: spaces.Space, lead: tuple[int, ...]) -> Any:
    """
    :param observation_space: the observation space
    :param lead: the leading dimensions (``(n,)``, ``(T, B)``)
    :return: zero observations ``(*lead, *obs_shape)`` in the storage dtype: one array, or an :class:`ObsDict`
    """
    layout = obs_layout(observation_space)
    if None in layout:
        shape, dtype = layout[None]
        return np.zeros((*lead, *shape), dtype=dtype)
    return ObsDict({key: np.zeros((*lead, *shape), dtype=dtype) for key, (shape, dtype) in layout.items()})


def as_obs_arrays(obs: Any) -> Any:
    """:return: ``obs`` as one array, or as an :class:`ObsDict` of arrays for dict observations"""
    if isinstance(obs, Mapping):
        return ObsDict({key: np.asarray(value) for key, value in obs.items()})
    return np.asarray(obs)


def copy_obs(obs: Any) -> Any:
    """:return: a copy of an array, or of every array of an :class:`ObsDict`"""
    return obs.copy() if isinstance(obs, ObsDict) else np.array(obs, copy=True)


def stack_obs(observations: list[Any]) -> Any:
    """:return: the observations stacked along a new first axis (per key for :class:`ObsDict` ones)"""
    if observations and isinstance(observations[0], ObsDict):
        return ObsDict({key: np.stack([obs[key] for obs in observations]) for key in observations[0]})
    return np.stack(observations)


def flat_rows(obs: Any) -> np.ndarray:
    """
    :param obs: observations ``(n, ...)``: one array, or a dict of them
    :return: ``(n, d)``, each row one observation's values (a dict's arrays concatenated in key order), for comparisons
    """
    if isinstance(obs, Mapping):
        arrays = [np.asarray(value) for value in obs.values()]
        return np.concatenate([array.reshape(len(array), -1) for array in arrays], axis=1)
    array = np.asarray(obs)
    return array.reshape(len(array), -1)
