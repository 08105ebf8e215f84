"""
Read the tuned hyperparameters of ``hyperparams/<algo>.yml`` (rl-zoo3's format).

The files live at the top of the repository and are shipped inside the package as
``sb3_pcl/hyperparams`` (see ``pyproject.toml``), so they are found from any working
directory, editable install or not.
"""

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from torch import nn

from sb3_pcl.common.schedules import parse_schedule

# Keys of an rl-zoo3 entry that describe the experiment, not the algorithm's constructor: each one is read into a field
# of :class:`Hyperparams` (every other key is a constructor argument, which the algorithm checks)
EXPERIMENT_KEYS = (
    "n_timesteps",
    "n_envs",
    "normalize",
    "env_wrapper",
    "frame_stack",
    "callback",
    "vec_env_wrapper",
    "env_kwargs",
)


def hyperparams_dir() -> Path:
    """:return: the folder holding ``<algo>.yml`` (packaged copy first, then the repository's)"""
    packaged = Path(__file__).resolve().parent / "hyperparams"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[1] / "hyperparams"


def _parse_value(key: str, value: Any) -> Any:
    if key == "policy_kwargs" and isinstance(value, str):
        return eval(value, {"nn": nn, "dict": dict})
    if key == "train_freq" and isinstance(value, list):  # YAML has no tuples: [25, "episode"] as rl-zoo3 reads it
        return tuple(value)
    if isinstance(value, str) and value.startswith(("lin_", "exp_")):
        return parse_schedule(key, value)
    return value


class Hyperparams(NamedTuple):
    """An rl-zoo3 entry split into the algorithm's arguments and the experiment settings."""

    kwargs: dict[str, Any]
    """constructor keyword arguments (``policy`` included, ``"MlpPolicy"`` when absent)"""
    n_timesteps: int | None
    """training budget of the entry, if any"""
    n_envs: int
    """number of parallel envs (default 1)"""
    normalize: dict[str, Any] | None
    """``VecNormalize`` keyword arguments when the entry normalises, else ``None``"""
    env_kwargs: dict[str, Any]
    """keyword arguments of the env constructor"""
    vec_env_wrappers: list[tuple[Callable[..., Any], dict[str, Any]]]
    """the entry's ``vec_env_wrapper`` classes with their keyword arguments, applied in order before ``VecNormalize``"""
    callbacks: list[tuple[Callable[..., Any], dict[str, Any]]]
    """the entry's ``callback`` classes with their keyword arguments"""
    env_wrappers: list[tuple[Callable[..., Any], dict[str, Any]]] = []
    """the entry's ``env_wrapper`` classes (Gymnasium wrappers of each env) with their keyword arguments, in order"""
    frame_stack: int | None = None
    """the entry's ``frame_stack``: the number of observations a ``VecFrameStack`` stacks, or ``None``"""

    def wrap_env(self, env: Any) -> Any:
        """
        :param env: one Gymnasium env
        :return: it wrapped in the entry's ``env_wrapper`` classes, in order (``make_vec_env``'s ``wrapper_class``)
        """
        for wrapper, wrapper_kwargs in self.env_wrappers:
            env = wrapper(env, **wrapper_kwargs)
        return env


def _parse_normalize(value: Any) -> dict[str, Any] | None:
    """``normalize`` as rl-zoo3 reads it: a bool, a mapping, or a string of one (``"dict(norm_obs=True)"`` too)."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            # rl-zoo3 evaluates the string; allow its usual "dict(...)" spelling and nothing else
            try:
                value = eval(value, {"__builtins__": {}, "dict": dict, "True": True, "False": False})
            except Exception as error:
                raise ValueError(f"normalize: cannot read {value!r} ({error})") from error
        if not isinstance(value, (bool, dict)):
            raise ValueError(f"normalize must be a bool or a dict of VecNormalize arguments, got {value!r}")
    if isinstance(value, dict):
        return dict(value)
    return {} if value else None


def _import(name: str) -> Callable[..., Any]:
    """:return: the object a dotted ``module.Name`` names"""
    module, _, attribute = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"cannot import {name!r} ({error})") from error


def _parse_classes(key: str, value: Any) -> list[tuple[Callable[..., Any], dict[str, Any]]]:
    """
    ``env_wrapper`` / ``vec_env_wrapper`` / ``callback`` as rl-zoo3 writes them: ``"module.Class"``,
    ``{"module.Class": kwargs}`` or a list of those.

    :param key: the entry's key (for the error message)
    :param value: its value
    :return: the classes with their keyword arguments
    """
    if value is None:
        return []
    parsed: list[tuple[Callable[..., Any], dict[str, Any]]] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            parsed.append((_import(item), {}))
        elif isinstance(item, dict) and len(item) == 1:
            ((name, kwargs),) = item.items()
            parsed.append((_import(name), dict(kwargs or {})))
        else:
            raise ValueError(f"{key}: expected 'module.Class', {{'module.Class': kwargs}} or a list of them, got {item!r}")
    return parsed


def _parse_frame_stack(value: Any) -> int | None:
    """``frame_stack`` as rl-zoo3 reads it: a positive number of stacked observations (``False`` / ``None``: none)."""
    if value is None or value is False:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"frame_stack must be a positive number of observations to stack, got {value!r}")
    return value


def load_hyperparams(algo: str, env_id: str, folder: str | Path | None = None) -> Hyperparams:
    """
    Constructor keyword arguments and experiment settings for ``algo`` on ``env_id``.

    :param algo: algorithm name (file stem), e.g. ``"pcl"``
    :param env_id: Gymnasium id, e.g. ``"CartPole-v1"``
    :param folder: folder of the yml files (default: :func:`hyperparams_dir`)
    :return: the parsed entry (the algorithm's defaults when the env has none)
    """
    path = Path(folder or hyperparams_dir()) / f"{algo}.yml"
    entries: dict[str, Any] = {}
    if path.is_file():
        with open(path) as file:
            entries = yaml.safe_load(file) or {}
        if not isinstance(entries, dict):
            raise ValueError(f"{path} must map env ids to hyperparameter dicts")
    entry = dict(entries.get(env_id) or {})
    n_timesteps = entry.get("n_timesteps")
    n_envs = int(entry.get("n_envs", 1))
    kwargs = {key: _parse_value(key, value) for key, value in entry.items() if key not in EXPERIMENT_KEYS}
    kwargs.setdefault("policy", "MlpPolicy")
    return Hyperparams(
        kwargs=kwargs,
        n_timesteps=int(float(n_timesteps)) if n_timesteps is not None else None,
        n_envs=n_envs,
        normalize=_parse_normalize(entry.get("normalize", False)),
        env_kwargs=dict(entry.get("env_kwargs") or {}),
        vec_env_wrappers=_parse_classes("vec_env_wrapper", entry.get("vec_env_wrapper")),
        callbacks=_parse_classes("callback", entry.get("callback")),
        env_wrappers=_parse_classes("env_wrapper", entry.get("env_wrapper")),
        frame_stack=_parse_frame_stack(entry.get("frame_stack")),
    )
