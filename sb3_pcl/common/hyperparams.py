"""
Read the tuned hyperparameters of ``hyperparams/<algo>.yml`` (rl-zoo3's format).

The files live at the top of the repository and are shipped inside the package as
``sb3_pcl/hyperparams`` (see ``pyproject.toml``), so they are found from any working
directory, editable install or not.
"""

import ast
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from torch import nn

from sb3_pcl.common.schedules import parse_schedule

# Keys of an rl-zoo3 entry that describe the experiment, not the algorithm's constructor.
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
    packaged = Path(__file__).resolve().parents[1] / "hyperparams"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "hyperparams"


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
    )
