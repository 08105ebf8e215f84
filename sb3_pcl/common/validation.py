"""
Checks shared by the algorithms: hyperparameters (one helper, whose message names the argument the user passed), data
entering storage, env outputs entering the policy, and the finiteness of every update before the optimiser steps.
"""

import math
import os
import sys
import warnings
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy

from sb3_pcl.common.dict_obs import dict_subspaces


def is_int(value: Any) -> bool:
    """:return: whether ``value`` is an integer (a Python or NumPy int, not a bool)"""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    """:return: whether ``value`` is a finite real number (int or float, not a bool, not NaN or infinite)"""
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and (math.isfinite(float(value)))
    )


def check(ok: bool, name: str, value: Any, allowed: str) -> None:
    """
    Raise the ``ValueError`` every algorithm uses for an invalid hyperparameter unless ``ok``.

    :param ok: whether the value is valid
    :param name: the argument's name, as the user passed it (e.g. ``"value_fit_kwargs['mix']"``)
    :param value: the value the user passed
    :param allowed: the allowed values, in words (e.g. ``"an integer >= 1"``)
    """
    if not ok:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def build_part(argument: str, parts: dict[str, type], name: Any, kwargs: dict[str, Any] | None) -> Any:
    """
    Build the part of an algorithm (a value fit, a policy step, ...) an argument selects, from its ``<argument>_kwargs``.

    :param argument: the argument that selects the part (e.g. ``"value_fit"``)
    :param parts: the part classes by the argument's values
    :param name: the argument's value
    :param kwargs: the settings the user passed (``None``: the defaults)
    :return: ``parts[name](**kwargs)``
    :raises ValueError: when ``name`` is not a key of ``parts``, ``kwargs`` is not a dict, or it holds a setting the part
        does not take
    """
    check(isinstance(name, str) and name in parts, argument, name, f"one of {tuple(parts)}")
    kwargs = {} if kwargs is None else kwargs
    check(isinstance(kwargs, dict), f"{argument}_kwargs", kwargs, "None or a dict")
    part = parts[name]
    try:
        return part(**kwargs)
    except TypeError as error:
        raise ValueError(
            f"{argument}_kwargs {kwargs!r} has a setting {argument}={name!r} does not take ({error}); "
            f"see the docstring of {part.__module__}.{part.__name__}"
        ) from None


def check_storable(
    values: Any, dtype: Any, what: str, index_name: str = "row", hint: str = "", refusal: str = "refusing to store it"
) -> np.ndarray:
    """
    Convert data entering storage (a replay, an episode batch) to its storage ``dtype``, refusing what is not finite there.

    The check runs on the converted values, so a finite float64 that overflows float32 (a reward of 1e39) is refused
    like a NaN or an inf, instead of being stored as ``inf``.

    :param values: the data, ``(n, ...)`` with one row per env / step
    :param dtype: the storage dtype (float values bound for an integer dtype must be finite too)
    :param what: what the data is, for the message (``"reward"``, ``"observation"``, ...)
    :param index_name: what a row is, for the message (``"env index"``, ``"step"``)
    :param hint: a sentence appended to the message (what to check)
    :param refusal: what is refused, for the message
    :return: the converted values
    :raises ValueError: naming ``what``, the rows, and whether the values overflow ``dtype`` or are NaN / inf
    """
    array = np.asarray(values)
    target = np.dtype(dtype)
    if array.dtype.kind != "f":
        return array.astype(target, copy=False)
    # Fast path (every add of a replay comes here): no cast that could overflow, no NumPy error-state context.
    if target.kind == "f" and target.itemsize < array.dtype.itemsize:
        fits = bool(np.all(np.abs(array) <= np.finfo(target).max))  # False for NaN and inf too
    else:
        fits = bool(np.all(np.isfinite(array)))
    if fits:
        return array.astype(target, copy=False)
    if target.kind in "iub":
        dtype = array.dtype  # NaN / inf would become arbitrary integers: check (and report) them as floats
    with np.errstate(over="ignore", invalid="ignore"):
        stored = array.astype(dtype, copy=False)
    if stored.dtype.kind != "f" or np.all(np.isfinite(stored)):
        return stored
    flat_stored = stored.reshape(max(len(stored), 1) if stored.ndim else 1, -1)
    bad = ~np.isfinite(flat_stored)
    rows = sorted(set(np.argwhere(bad)[:, 0].tolist()))
    original = array.reshape(flat_stored.shape)[bad] if array.dtype.kind == "f" else np.array([])
    overflow = original.size > 0 and bool(np.all(np.isfinite(original)))
    problem = f"too large for {np.dtype(dtype).name}, max {np.finfo(dtype).max:.3g}" if overflow else "NaN or inf"
    raise ValueError(f"Non-finite {what} ({problem}) at {index_name} {rows[:10]}: {refusal}. {hint}".rstrip())


def check_budget(total_timesteps: Any) -> None:
    """
    :param total_timesteps: the step budget passed to ``learn()``
    :raises ValueError: unless it is a finite number > 0 (SB3 would silently run no step)
    """
    check(is_real(total_timesteps) and total_timesteps > 0, "total_timesteps", total_timesteps, "a finite number > 0")


#: the dtype the policies compute in: a float observation must be finite in it to reach them
POLICY_DTYPE = np.dtype(np.float32)


def check_env_outputs(observations: Any, rewards: Any = None, where: str = "step", hint: str = "") -> None:
    """
    Refuse env outputs the algorithm cannot use, where they enter it (after ``reset`` and after each ``step``).

    One vectorised pass: float observations must be finite in float32, the dtype the policy computes in (a float64
    observation of 1e39 is finite in the env but ``inf`` in the network), rewards finite in float32. Integer
    observations are not checked (they cannot be NaN). Cheap enough to run on every vectorised step.

    :param observations: the observations of every env, ``(n_envs, ...)`` (SB3's VecEnv output; a dict of such
        arrays for a Dict space)
    :param rewards: the rewards of every env, ``(n_envs,)`` (``None``: after a reset)
    :param where: ``"reset"`` or ``"step"``, for the message
    :param hint: a sentence appended to the message (what to check)
    :raises ValueError: naming the observation or reward, the env indices, and whether the values are NaN / inf or
        overflow float32
    """
    refusal = f"returned by the env's {where}(), refusing to act on it"
    obs_what = "observation" if where == "reset" else "next observation"
    if isinstance(observations, dict):  # Dict observations: each key's array
        checked = [(value, f"{obs_what} {key!r}") for key, value in observations.items()]
    else:
        checked = [(observations, obs_what)]
    for values, what in (*checked, (rewards, "reward")):
        if values is None or isinstance(values, (dict, tuple)):
            continue
        array = np.asarray(values)
        if array.dtype.kind != "f":
            continue
        if array.dtype.itemsize > POLICY_DTYPE.itemsize:
            ok = bool(np.all(np.abs(array) <= np.finfo(POLICY_DTYPE).max))  # False for NaN and inf too
        else:
            ok = bool(np.all(np.isfinite(array)))
        if not ok:
            check_storable(array, POLICY_DTYPE, what, "env index", hint, refusal)


#: why an update is not finite, and what helps (docs/troubleshooting.md says more)
NON_FINITE_UPDATE_ADVICE = (
    "Likely causes: rewards too large to discount (sums of rewards and squared consistencies overflow float32; "
    "rewards of 1e30 do), Box action bounds too wide to sample uniformly (warm-up actions drawn uniformly in +-1e10 "
    "have log-probabilities near -5e19), or a collapsed std (a log std driven to -inf by a too large learning rate). "
    "Scale the rewards (VecNormalize(venv, norm_reward=True) or gymnasium.wrappers.TransformReward), normalise the "
    "observations (VecNormalize), rescale wide Box actions to [-1, 1] (gymnasium.wrappers.RescaleAction), or lower "
    "learning_rate; see the Troubleshooting page, 'Training'"
)


def gradient_norm(parameters: list[th.nn.Parameter]) -> th.Tensor:
    """:return: the global L2 norm of the parameters' gradients (those without a gradient are skipped), as a tensor"""
    norms = [p.grad.detach().norm() for p in parameters if p.grad is not None]
    return th.linalg.vector_norm(th.stack(norms)) if norms else th.zeros(())


def check_finite_update(algorithm: str, step: str, loss: th.Tensor, grad_norm: th.Tensor | float | None = None) -> None:
    """
    Refuse an update whose loss or gradient norm is not finite, right before the optimiser steps.

    One host synchronisation (``loss + grad_norm`` is finite only when both are); the message is built only on failure.

    :param algorithm: the algorithm's name, for the message
    :param step: which update (``"policy step"``, ``"value fit"``, ...), for the message
    :param loss: the loss about to be minimised (a scalar tensor)
    :param grad_norm: the global norm of its gradient (``None``: the loss alone is checked)
    :raises ValueError: naming the update, the non-finite values, the likely causes and the remedies; the parameters
        have not changed
    """
    total = loss.detach() if grad_norm is None else loss.detach() + grad_norm
    if bool(th.isfinite(total).all()):
        return
    values = f"loss {float(loss.detach()):.4g}" + ("" if grad_norm is None else f", gradient norm {float(grad_norm):.4g}")
    raise ValueError(
        f"{algorithm}: non-finite update in the {step} ({values}): the parameters were not changed. {NON_FINITE_UPDATE_ADVICE}"
    )


#: the model attribute that records which class saved a model (saved with it, read back by ``load``)
SAVED_BY = "_saved_by"


def check_saved_by(model: Any) -> None:
    """
    Refuse a model loaded from a file another algorithm class saved (``PCL.load`` on a ``TrustPCL`` file, ...).

    Every algorithm sets ``model._saved_by = type(model).__name__`` when it is constructed; ``load`` overwrites it with
    the value stored in the file, and ``_setup_model`` calls this function. Files saved before the attribute existed
    are accepted.

    :param model: the model, after ``load`` restored its attributes
    :raises ValueError: naming the class that saved the file and the one asked to load it
    """
    saved_by = getattr(model, SAVED_BY, None)
    expected = type(model).__name__
    if saved_by is not None and saved_by != expected:
        raise ValueError(
            f"The file holds a {saved_by} model, not a {expected} one: load it with {saved_by}.load "
            f"(loading it as {expected} would silently change the algorithm)"
        )


#: what to do with an observation space an algorithm does not take
FLATTEN_HINT = (
    "flatten the observations with gymnasium.wrappers.FlattenObservation, or wrap the VecEnv so that it returns one array"
)


def check_env_spaces(algorithm: str, env: Any, dict_supported: bool = False) -> None:
    """
    Refuse, before SB3 builds anything, the spaces our algorithms do not take (their ``_wrap_env`` calls this on the
    env given to the constructor, ``set_env`` and ``load``).

    ``Tuple`` observation spaces are never supported. ``Dict`` spaces (SB3's ``MultiInputPolicy``) are where
    ``dict_supported`` (the replay and the episode batches store one array per key), if none of their sub-spaces is
    itself a ``Dict`` or a ``Tuple`` (SB3's ``CombinedExtractor`` takes neither). Discrete observations and actions
    must start at 0 (:func:`check_zero_based`).

    :param algorithm: the algorithm's name, for the message
    :param env: the env (its ``observation_space`` and ``action_space``)
    :param dict_supported: whether the algorithm takes ``Dict`` observation spaces
    :raises ValueError: for an unsupported space, naming it and saying what to do instead
    """
    observation_space = env.observation_space
    if isinstance(observation_space, spaces.Tuple) or (isinstance(observation_space, spaces.Dict) and not dict_supported):
        supported = "Tuple" if dict_supported else "Dict or Tuple"
        raise ValueError(
            f"{algorithm} does not support {supported} observation spaces (got {observation_space}): {FLATTEN_HINT}"
        )
    subspaces = {"": observation_space}
    if isinstance(observation_space, spaces.Dict):
        try:
            subspaces = {f" (key {key!r})": space for key, space in dict_subspaces(observation_space).items()}
        except ValueError as error:
            raise ValueError(f"{algorithm}: {error}") from None
    for where, space in subspaces.items():
        if isinstance(space, spaces.Box) and space.shape == ():
            raise ValueError(
                f"{algorithm} does not support scalar Box observation spaces (shape ()){where}, got {space}: SB3's "
                "feature extractors need at least one axis; reshape the observations to shape (1,), e.g. with "
                "gymnasium.wrappers.ReshapeObservation(env, (1,))"
            )
    check_zero_based(algorithm, observation_space, "observation")
    check_zero_based(algorithm, env.action_space, "action")


def check_zero_based(algorithm: str, space: spaces.Space, what: str) -> None:
    """
    Refuse ``Discrete`` and ``MultiDiscrete`` spaces whose values do not start at 0 (``start`` of Gymnasium's spaces):
    SB3's policies read such observations as one-hot vectors of ``0 .. n - 1`` (a value ``>= n`` fails inside torch)
    and sample such actions in ``0 .. n - 1`` (values outside the env's space).

    :param algorithm: the algorithm's name, for the message
    :param space: an observation or action space (the sub-spaces of a ``Dict`` are checked too)
    :param what: ``"observation"`` or ``"action"``, for the message
    :raises ValueError: naming the space and what to do instead
    """
    if isinstance(space, spaces.Dict):
        for subspace in space.spaces.values():
            check_zero_based(algorithm, subspace, what)
        return
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)) and np.any(np.asarray(space.start) != 0):
        raise ValueError(
            f"{algorithm} does not support {what} spaces whose values do not start at 0 (got {space}): SB3's policies "
            f"{'read' if what == 'observation' else 'send'} the values 0 .. n - 1. Shift the {what}s by the space's "
            "start with a wrapper (e.g. gymnasium.wrappers.Transform"
            f"{'Observation' if what == 'observation' else 'Action'}) and give it a space with start=0"
        )


def check_policy_observation_space(algorithm: str, policy_class: type, observation_space: spaces.Space) -> None:
    """
    Refuse a policy that cannot read the observation space: ``MultiInputPolicy`` needs a ``Dict`` space, and the
    recurrent policies take no ``Dict`` space (SB3 itself refuses ``MlpPolicy`` and ``CnnPolicy`` for one).

    :param algorithm: the algorithm's name, for the message
    :param policy_class: the policy class the model builds
    :param observation_space: the model's observation space
    :raises ValueError: naming the policy, the space and what to use instead
    """
    is_dict = isinstance(observation_space, spaces.Dict)
    if issubclass(policy_class, MultiInputActorCriticPolicy) and not is_dict:
        raise ValueError(
            f"{algorithm}: {policy_class.__name__} (MultiInputPolicy) reads Dict observations, but the observation space "
            f"is {observation_space}: use MlpPolicy (or CnnPolicy for images)"
        )
    if issubclass(policy_class, RecurrentActorCriticPolicy) and is_dict:
        raise ValueError(
            f"{algorithm}: the recurrent policy {policy_class.__name__} does not support Dict observation spaces (got "
            f"{observation_space}): use MultiInputPolicy (feed-forward), or {FLATTEN_HINT}"
        )


def check_policy_class(algorithm: str, policy_class: type, policy_aliases: dict[str, type]) -> None:
    """
    Refuse a recurrent policy (an sb3-contrib ``RecurrentActorCriticPolicy``) for an algorithm none of whose named
    policies is recurrent: each has its recurrent variant (:data:`RECURRENT_VARIANTS`).

    :param algorithm: the algorithm's name, for the message
    :param policy_class: the policy class the model builds
    :param policy_aliases: the algorithm's named policies
    :raises ValueError: naming the policy and the algorithm to use instead
    """
    recurrent = isinstance(policy_class, type) and issubclass(policy_class, RecurrentActorCriticPolicy)
    if recurrent and not any(issubclass(alias, RecurrentActorCriticPolicy) for alias in policy_aliases.values()):
        raise ValueError(f"{policy_class.__name__} is a recurrent policy: {recurrent_hint(algorithm)}")


#: the recurrent variant of each feed-forward algorithm (as sb3-contrib splits PPO / RecurrentPPO)
RECURRENT_VARIANTS = {
    "PCL": "RecurrentPCL",
    "TrustPCL": "RecurrentTrustPCL",
    "Reinforce": "RecurrentReinforce",
    "UREX": "RecurrentUREX",
}

#: the names under which the algorithms took our LSTM policies before these had their own (sb3-contrib's names for
#: its ``RecurrentActorCriticPolicy``): accepted, with a ``DeprecationWarning``, where the class has the new name
FORMER_LSTM_NAMES = {"MlpLstmPolicy": "MlpPrevActionLstmPolicy", "CnnLstmPolicy": "CnnPrevActionLstmPolicy"}


def recurrent_hint(algorithm: str) -> str:
    """:return: what to use instead of a recurrent policy with the feed-forward class ``algorithm``"""
    variant = RECURRENT_VARIANTS.get(algorithm)
    if variant is None:
        return f"use the recurrent variant of the algorithm ({', '.join(RECURRENT_VARIANTS.values())})"
    return (
        f"use sb3_pcl.{variant}('MlpPrevActionLstmPolicy', env) (or 'CnnPrevActionLstmPolicy'), and {variant}.load "
        "for a model saved with a recurrent policy"
    )


def _non_finite_tensors(value: Any, name: str) -> list[str]:
    """:return: ``name.key[index] (n of m values NaN or inf)`` for each float tensor in ``value`` (nested dicts, lists)"""
    if isinstance(value, th.Tensor):
        if not value.is_floating_point():
            return []
        n_bad = int((~th.isfinite(value.detach())).sum())
        return [f"{name} ({n_bad} of {value.numel()} values NaN or inf)"] if n_bad else []
    items: Any = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    return [
        bad
        for key, item in items
        for bad in _non_finite_tensors(item, f"{name}.{key}" if isinstance(key, str) else f"{name}[{key}]")
    ]


def check_finite_parameters(model: Any, path: Any) -> None:
    """
    Refuse a model whose saved tensors (network parameters and buffers, optimizer states, PyTorch variables) hold NaN
    or inf: predicting or training with them fails later, deep inside torch, or gives NaN actions.

    :param model: the model, after ``load`` restored its tensors
    :param path: the file ``load`` read them from (a path or an open file), for the message
    :raises ValueError: naming the file and the tensors that are not finite
    """
    bad = [item for name, state in model.get_parameters().items() for item in _non_finite_tensors(state, name)]
    for name in model._get_torch_save_params()[1]:
        variable = model
        for part in name.split("."):
            variable = getattr(variable, part, None)
        bad.extend(_non_finite_tensors(variable, name))
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        source = f"The model file {str(path)!r}" if isinstance(path, (str, os.PathLike)) else "The model file"
        raise ValueError(
            f"{source} holds non-finite saved parameters: {shown}. The model diverged before it was saved (or the "
            "file was altered): load an earlier checkpoint, or train again with a smaller learning rate or clipping"
        )


def _outside_libraries() -> int:
    """:return: the ``stacklevel`` of the caller's first frame outside sb3_pcl and SB3 (the user's code, where Python
    shows a ``DeprecationWarning``)"""
    frame, level = sys._getframe(2), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(("sb3_pcl.", "stable_baselines3.")):
        frame, level = frame.f_back, level + 1
    return level


def resolve_policy_name(algorithm: str, policy_name: str, policy_aliases: dict[str, Any]) -> str:
    """
    :param algorithm: the algorithm's class name
    :param policy_name: the policy name passed to it
    :param policy_aliases: its policy names
    :return: the name to look up in ``policy_aliases``: ``policy_name``, or the current name of a former one
        (:data:`FORMER_LSTM_NAMES`, with a ``DeprecationWarning``)
    :raises ValueError: for a recurrent policy or ``MultiInputPolicy`` name the class has not (SB3's own lookup then
        reports any other unknown name)
    """
    current = FORMER_LSTM_NAMES.get(policy_name)
    if current is not None and current in policy_aliases:
        warnings.warn(
            f"The policy name {policy_name!r} is deprecated for {algorithm} and will be removed in the next release: "
            f"use {current!r} (sb3-contrib's {policy_name} is another policy)",
            DeprecationWarning,
            stacklevel=_outside_libraries(),
        )
        return current
    if policy_name.endswith("LstmPolicy") and policy_name not in policy_aliases:
        raise ValueError(f"{policy_name} is a recurrent policy: {recurrent_hint(algorithm)}")
    if policy_name == "MultiInputPolicy" and policy_name not in policy_aliases:
        raise ValueError(
            f"{algorithm} has no MultiInputPolicy (it does not support Dict observation spaces): use PCL, "
            f"TrustPCL, Reinforce or UREX with MultiInputPolicy, or {FLATTEN_HINT}"
        )
    return policy_name
