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


def fail_hyperparameter(owner: Any, name: str, allowed: str) -> None:
    """Deprecated form of :func:`check`, removed once every algorithm uses :func:`check`."""
    check(False, name, getattr(owner, name), allowed)
