"""Hyperparameter validation shared by the algorithms: one helper, whose message names the argument the user passed."""

import math
from typing import Any

import numpy as np


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
