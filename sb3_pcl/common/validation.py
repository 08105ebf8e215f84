"""Hyperparameter validation shared by the algorithms."""

from typing import Any, NoReturn


def fail_hyperparameter(owner: Any, name: str, allowed: str) -> NoReturn:
    """
    Raise the ``ValueError`` every algorithm uses for an invalid hyperparameter.

    :param owner: the object holding the hyperparameter as an attribute
    :param name: the attribute (and argument) name
    :param allowed: the allowed values, in words (e.g. ``"an integer >= 1"``)
    """
    raise ValueError(f"{name} must be {allowed}, got {getattr(owner, name)!r}")
