"""
Schedules of a hyperparameter over a ``learn`` call, given as a float, a callable or a string.

SB3 schedules are callables of the *remaining progress* ``p`` (1 at the start of ``learn``, 0 at its
end). rl-zoo3 only turns ``lin_<value>`` strings into schedules for a few keys (``learning_rate``,
``clip_range``); :func:`parse_schedule` lets our algorithms take a schedule string for their own
coefficients (the entropy ``ent_coef``, the papers' ``tau``) from a YAML file:

* ``"lin_<start>"``: linear from ``start`` to 0 (rl-zoo3's meaning);
* ``"lin_<start>_<end>"``: linear from ``start`` to ``end``;
* ``"exp_<start>_<end>"``: geometric from ``start`` to ``end``, ``start * (end / start) ** (1 - p)``.
  The original code's ``--tau_start --tau_decay --tau`` (``tau`` multiplied by ``tau_decay`` every 100
  training iterations, floored at ``tau``) is this schedule over a run whose floor is not reached, with
  ``end`` the value at the last iteration.
"""

from collections.abc import Callable
from typing import Any

from stable_baselines3.common.utils import LinearSchedule


class ExponentialSchedule:
    """
    Geometric interpolation ``start * (end / start) ** (1 - progress_remaining)``.

    :param start: value at the start (``progress_remaining = 1``), > 0
    :param end: value at the end (``progress_remaining = 0``), > 0
    """

    def __init__(self, start: float, end: float):
        if not (start > 0 and end > 0):
            raise ValueError(f"An exponential schedule needs start > 0 and end > 0, got start={start}, end={end}")
        self.start = float(start)
        self.end = float(end)

    def __call__(self, progress_remaining: float) -> float:
        return self.start * (self.end / self.start) ** (1.0 - progress_remaining)

    def __repr__(self) -> str:
        return f"ExponentialSchedule(start={self.start}, end={self.end})"


def parse_schedule(name: str, value: Any) -> Any:
    """
    :param name: the hyperparameter's name (for error messages)
    :param value: a float, a callable schedule, or a string ``lin_<start>``, ``lin_<start>_<end>``, ``exp_<start>_<end>``
    :return: the value itself unless it is a string, else the schedule the string describes
    :raises ValueError: for a string of another form
    """
    if not isinstance(value, str):
        return value
    kind, _, numbers = value.partition("_")
    try:
        bounds = [float(number) for number in numbers.split("_")] if numbers else []
    except ValueError:
        bounds = []
    schedule: Callable[[float], float] | None = None
    if kind == "lin" and len(bounds) in (1, 2):
        schedule = LinearSchedule(bounds[0], bounds[1] if len(bounds) == 2 else 0.0, 1.0)
    elif kind == "exp" and len(bounds) == 2:
        try:
            schedule = ExponentialSchedule(bounds[0], bounds[1])
        except ValueError as exc:
            raise ValueError(f"{name}: {value!r}: {exc}") from None
    if schedule is None:
        raise ValueError(
            f"{name}: cannot read the schedule {value!r}; expected a number, 'lin_<start>', 'lin_<start>_<end>' "
            "or 'exp_<start>_<end>'"
        )
    return schedule
