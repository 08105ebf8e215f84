"""
Checking episodes against a model's spaces: what :meth:`sb3_pcl.PCL.add_demonstrations` and the Minari writer do
before they store an episode (the episode format: :mod:`sb3_pcl.common.demonstrations`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces

from sb3_pcl.common.validation import check_storable

#: keys every episode dict must have (``truncated`` is optional, ``False`` when absent)
EPISODE_KEYS = ("observations", "actions", "rewards", "terminated")
#: the dtype kinds an episode's arrays may have (booleans, integers, floats)
NUMERIC_KINDS = "biuf"
#: what :func:`check_episodes` tells the user when a value cannot be stored
STORAGE_HINT = (
    "The replay stores demonstrations as it stores collected steps: rewards as float32, observations and actions "
    "in their space's dtype."
)


class Demonstration(NamedTuple):
    """An episode checked against a model's spaces (see :func:`check_episodes`)."""

    observations: np.ndarray
    """``(T + 1, *observation_space.shape)`` in the observation space's dtype"""
    actions: np.ndarray
    """``(T, *action_space.shape)`` in the action space's dtype"""
    rewards: np.ndarray
    """``(T,)`` float64"""
    terminated: bool
    """whether the last observation is terminal"""


def episode_arrays(episode: Any, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool, bool]:
    """
    :param episode: an episode dict
    :param index: its position, for the error messages
    :return: observations, actions, rewards, terminated, truncated
    :raises ValueError: when a key is missing, an array is not numeric or the lengths disagree
    """
    if not isinstance(episode, Mapping):
        raise ValueError(f"Episode {index} is a {type(episode).__name__}, expected a dict with keys {EPISODE_KEYS}")
    missing = [key for key in EPISODE_KEYS if key not in episode]
    if missing:
        raise ValueError(f"Episode {index} lacks {missing} (an episode needs {EPISODE_KEYS}, optionally 'truncated')")
    arrays = {key: np.asarray(episode[key]) for key in ("observations", "actions", "rewards")}
    for key, array in arrays.items():
        if array.dtype.kind not in NUMERIC_KINDS:
            raise ValueError(f"Episode {index}: {key} must be a numeric array, got dtype {array.dtype}")
    rewards = arrays["rewards"]
    if rewards.ndim != 1:
        raise ValueError(f"Episode {index}: rewards must have shape (T,), got {rewards.shape}")
    length = len(rewards)
    observations, actions = arrays["observations"], arrays["actions"]
    if observations.ndim < 1 or len(observations) != length + 1:
        raise ValueError(
            f"Episode {index}: {length} rewards need T + 1 = {length + 1} observations (the last one is the final state), "
            f"got observations of shape {observations.shape}"
        )
    if actions.ndim < 1 or len(actions) != length:
        raise ValueError(f"Episode {index}: {length} rewards need {length} actions, got actions of shape {actions.shape}")
    truncated = bool(episode.get("truncated", False))
    return observations, actions, rewards.astype(np.float64), bool(episode["terminated"]), truncated


def _space_violation(values: np.ndarray, space: spaces.Space) -> str | None:
    """
    :param values: ``(n, *space.shape)`` finite elements of ``space`` (shape already checked)
    :param space: a ``Box``, ``Discrete``, ``MultiDiscrete`` or ``MultiBinary`` space
    :return: why some value is not in ``space`` (``None`` when all are)
    """
    if isinstance(space, spaces.Discrete):
        low, high = int(space.start), int(space.start) + int(space.n) - 1
    elif isinstance(space, spaces.MultiDiscrete):
        low, high = space.start, space.start + space.nvec - 1  # type: ignore[assignment]
    elif isinstance(space, spaces.MultiBinary):
        low, high = 0, 1
    elif isinstance(space, spaces.Box):
        low, high = space.low, space.high  # type: ignore[assignment]
    else:
        raise ValueError(f"Demonstrations need Box, Discrete, MultiDiscrete or MultiBinary spaces, got {space}")
    if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
        values = values.astype(space.dtype)  # compared as the env and the replay see them (float64 -> float32)
    elif values.dtype.kind == "f" and not np.all(values == np.round(values)):
        return f"non-integer values (the space {space} holds integers)"
    if np.any(values < low) or np.any(values > high):
        return f"values outside {space}"
    return None


def _storable(values: np.ndarray, dtype: Any, what: str, index: int) -> np.ndarray:
    """
    :param values: an episode's rewards, observations or actions
    :param dtype: the dtype the replay stores them in
    :param what: ``"rewards"``, ``"observations"`` or ``"actions"``, for the error message
    :param index: the episode's position, for the error message
    :return: the values in ``dtype``
    :raises ValueError: naming the episode, when a value is NaN or inf, or overflows ``dtype``
        (:func:`~sb3_pcl.common.validation.check_storable`)
    """
    try:
        return check_storable(values, dtype, what, "step", STORAGE_HINT)
    except ValueError as error:
        raise ValueError(f"Episode {index}: {error}") from None


def _check_values(values: np.ndarray, space: spaces.Space, what: str, index: int, check_float_bounds: bool) -> np.ndarray:
    """
    :param values: ``(n, *space.shape)`` array
    :param space: the space the values must belong to
    :param what: ``"observations"`` or ``"actions"``, for the error message
    :param index: the episode's position, for the error message
    :param check_float_bounds: check the bounds of a floating-point ``Box`` too (else only that the values are finite
        in its dtype)
    :return: the values in the space's dtype
    :raises ValueError: when a value is NaN, inf, overflows the space's dtype or is not in ``space``
    """
    if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
        stored = _storable(values, space.dtype, what, index)  # a float64 of 1e39 is refused, not stored as inf
        problem = _space_violation(stored, space) if check_float_bounds else None
    else:  # integer spaces: NaN is a non-integer value, inf or an overflow a value outside the space
        problem = _space_violation(values, space)
        stored = values.astype(space.dtype) if space.dtype is not None else values
    if problem is not None:
        raise ValueError(f"Episode {index}: {what} have {problem}")
    return stored


def check_episodes(
    episodes: Sequence[Mapping[str, Any]], observation_space: spaces.Space, action_space: spaces.Space
) -> list[Demonstration]:
    """
    Validate episodes against a model's spaces.

    Checked: the keys, at least one step per episode, ``observations`` of shape ``(T + 1, *observation_space.shape)``,
    ``actions`` of shape ``(T, *action_space.shape)`` (``(T, 1)`` is accepted for ``Discrete``), finite rewards
    and observations, actions in the action space (bounds of ``Box`` included), observations of discrete or
    integer spaces in the observation space (the bounds of a floating-point ``Box`` observation space are not
    checked: many environments declare loose or wrong ones).

    :param episodes: episode dicts (see the module docstring)
    :param observation_space: the model's observation space
    :param action_space: the model's action space
    :return: the episodes, in the spaces' dtypes and shapes
    :raises ValueError: naming the first episode and the problem found
    """
    if isinstance(episodes, Mapping):
        raise ValueError("Expected a list of episode dicts, got a single dict (wrap it in a list)")
    obs_shape: tuple[int, ...] = observation_space.shape or ()
    action_shape: tuple[int, ...] = action_space.shape or ()
    checked = []
    for index, episode in enumerate(episodes):
        observations, actions, rewards, terminated, _ = episode_arrays(episode, index)
        length = len(rewards)
        if length == 0:
            raise ValueError(f"Episode {index} is empty (no transition): a demonstration needs at least one step")
        if observations.shape != (length + 1, *obs_shape):
            raise ValueError(
                f"Episode {index}: observations have shape {observations.shape}, expected {(length + 1, *obs_shape)} "
                f"(T + 1 states of the observation space {observation_space})"
            )
        if isinstance(action_space, spaces.Discrete) and actions.shape == (length, 1):
            actions = actions.reshape(length)
        if actions.shape != (length, *action_shape):
            raise ValueError(
                f"Episode {index}: actions have shape {actions.shape}, expected {(length, *action_shape)} "
                f"(T actions of the action space {action_space})"
            )
        _storable(rewards, np.float32, "rewards", index)  # as the replay stores them (Demonstration keeps float64)
        observations = _check_values(observations, observation_space, "observations", index, check_float_bounds=False)
        actions = _check_values(actions, action_space, "actions", index, check_float_bounds=True)
        checked.append(Demonstration(observations, actions, rewards, terminated))
    return checked
