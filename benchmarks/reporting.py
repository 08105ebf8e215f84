"""Statistics and formatting shared by the benchmark reports (NumPy, and ``scipy.stats`` for the tests and intervals).

p-values follow scipy's convention for a two-sided test: twice the smaller one-sided p-value, at most 1.
:func:`permutation_p_value` is ``scipy.stats.permutation_test`` of the difference of the means with
``alternative="two-sided"``; :func:`stratified_rank_test` (scipy has no test that shuffles within strata) computes its
exact null distribution and takes the same two-sided p-value. With equal group sizes the permutation null is symmetric
and this p-value equals the share of splits whose absolute difference is at least the observed one; with unequal sizes
it can differ from that share.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: The fewest seeds for which a report prints a 95% interval of the mean: an interval from the seeds' own values lies
#: within their range, and the range of n seeds holds the median of their distribution with probability 1 - 2^(1-n),
#: below 95% up to 5 seeds (75% for 3: a "95% bootstrap interval" of 3 seeds is about their min-max)
MIN_SEEDS_FOR_INTERVAL = 6
#: How the reports state the p-values' convention (:func:`permutation_p_value`, :func:`stratified_rank_test`)
P_VALUE_CONVENTION = "p two-sided as scipy defines it: twice the smaller one-sided p-value, at most 1"
#: Resamples of :func:`bootstrap_interval`
BOOTSTRAP_REPS = 10_000
#: Above this many splits of the pooled values, :func:`permutation_p_value` draws this many at random (fixed seed)
EXACT_PERMUTATION_LIMIT = 500_000


def bootstrap_interval(values: npt.ArrayLike) -> tuple[float, float]:
    """
    :param values: One value per seed
    :return: The percentile bootstrap 95% interval of the mean (:data:`BOOTSTRAP_REPS` resamples, NumPy seed 0: the
        interval is reproducible)
    :raises ValueError: No values, or a non-finite one
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0 or not np.all(np.isfinite(data)):
        raise ValueError(f"bootstrap_interval needs finite values, got {list(data)}")
    if np.all(data == data[0]):  # scipy warns on degenerate data; every resample's mean is that value
        return float(data[0]), float(data[0])
    from scipy import stats

    rng = np.random.default_rng(0)
    result = stats.bootstrap((data,), np.mean, n_resamples=BOOTSTRAP_REPS, method="percentile", confidence_level=0.95, rng=rng)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def interval_of_mean(values: npt.ArrayLike) -> tuple[float, float]:
    """:return: :func:`bootstrap_interval` where the seed count supports a 95% interval (at least
    :data:`MIN_SEEDS_FOR_INTERVAL` values, all finite), else NaN"""
    data = np.asarray(values, dtype=float)
    if data.size < MIN_SEEDS_FOR_INTERVAL or not np.all(np.isfinite(data)):
        return math.nan, math.nan
    return bootstrap_interval(data)


def mean_cell(values: npt.ArrayLike, show: Callable[[float], str] | None = None) -> str:
    """
    :param values: One value per seed
    :param show: How to write a value (default :func:`number`)
    :return: The mean with its 95% interval, ``6.4k [6k, 7k]``, where the seed count supports one
        (:func:`interval_of_mean`), else the mean with the seed count and the range, ``3373 (5 seeds: 3304 to 3447)``;
        one value as it is
    """
    show = show or number
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return "-"
    low, high = interval_of_mean(data)
    if not math.isnan(low):
        return f"{show(float(data.mean()))} [{show(low)}, {show(high)}]"
    if data.size == 1:
        return show(float(data[0]))
    return f"{show(float(data.mean()))} ({data.size} seeds: {show(float(data.min()))} to {show(float(data.max()))})"


def range_coverage(n_seeds: int) -> float:
    """:return: The probability that the range (min-max) of ``n_seeds`` independent values holds their distribution's
    median, ``1 - 2^(1-n)``: an upper bound on the coverage of any interval drawn from the values' own range"""
    return 1.0 - 2.0 ** (1 - n_seeds) if n_seeds >= 1 else 0.0


def permutation_p_value(first: npt.ArrayLike, second: npt.ArrayLike) -> float:
    """
    :param first: One value per seed of the first algorithm
    :param second: One value per seed of the second
    :return: Two-sided p-value of the difference of the means over the splits of the pooled values into groups of the
        same sizes (all of them when few enough): twice the smaller of the shares of splits whose difference is at least
        and at most the observed one, at most 1 (scipy's ``alternative="two-sided"``)
    """
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.size == 0 or b.size == 0 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError(f"permutation_p_value needs finite values in both groups, got {list(a)} and {list(b)}")
    from scipy import stats

    def difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(x, axis=axis) - np.mean(y, axis=axis)

    # exact (every split) when there are at most EXACT_PERMUTATION_LIMIT of them, else that many random ones (seed 0)
    result = stats.permutation_test(
        (a, b),
        difference,
        permutation_type="independent",
        alternative="two-sided",
        n_resamples=EXACT_PERMUTATION_LIMIT,
        vectorized=True,
        rng=np.random.default_rng(0),
    )
    return float(result.pvalue)


def separation(first: npt.ArrayLike, second: npt.ArrayLike) -> tuple[int, int]:
    """:return: How many values of ``first`` lie above every value of ``second``, and how many of ``second`` above
    every value of ``first`` (3 and 0 for three seeds all above three others: a complete separation)"""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    return int(np.sum(a > b.max())), int(np.sum(b > a.max()))


def stratified_rank_test(strata: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]]) -> tuple[float, float, float]:
    """
    The exact stratified permutation test of ranks (van Elteren's statistic unweighted): within each stratum (a task)
    the values of both groups are ranked together (ties: mean ranks), and the statistic is the sum over strata of the
    first group's rank sums; its null distribution shuffles the group labels within each stratum, independently.

    :param strata: Per stratum, the first group's values and the second's (at least one each)
    :return: The two-sided p-value (twice the smaller one-sided one, at most 1, as ``scipy.stats.permutation_test``),
        the observed statistic and its expectation under the null
    """
    from scipy import stats

    total: dict[float, int] = {0.0: 1}  # exact null distribution of the statistic: value -> number of label shuffles
    observed = expected = 0.0
    for first, second in strata:
        a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
        if a.size == 0 or b.size == 0:
            raise ValueError("stratified_rank_test needs values of both groups in every stratum")
        ranks = stats.rankdata(np.concatenate([a, b]))
        observed += float(ranks[: a.size].sum())
        expected += a.size * float(ranks.mean())
        groups = itertools.combinations(range(ranks.size), a.size)
        sums = collections.Counter(float(ranks[list(group)].sum()) for group in groups)
        combined: collections.Counter[float] = collections.Counter()
        for value, count in total.items():
            for add, times in sums.items():
                combined[value + add] += count * times
        total = dict(combined)
    count = sum(total.values())
    tolerance = 1e-9 * max(1.0, abs(observed))
    upper = sum(times for value, times in total.items() if value >= observed - tolerance) / count
    lower = sum(times for value, times in total.items() if value <= observed + tolerance) / count
    return min(1.0, 2 * min(upper, lower)), observed, expected


def number(value: float | None) -> str:
    """:return: A return or a statistic: 0 decimals from 1000 on, 1 from 1, 3 significant digits below; ``-`` for NaN"""
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"


def steps(value: float) -> str:
    """:return: A step count as ``140k`` or ``2.16M`` (3 significant digits); ``-`` for NaN"""
    if math.isnan(value):
        return "-"
    return f"{value / 1e6:.3g}M" if value >= 1e6 else f"{value / 1e3:.3g}k" if value >= 1e3 else f"{value:.0f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """:return: The lines of a markdown table (``|`` inside a cell escaped)"""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]


@contextlib.contextmanager
def saved_figure(path: str | Path, *grid: int, dpi: int = 100, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """
    A matplotlib figure (Agg backend) for the block, then laid out, saved to ``path`` and closed.

    :param grid: ``plt.subplots``' rows and columns
    :param subplots: ``plt.subplots``' keyword arguments (``figsize``, ``squeeze``, ...)
    :return: ``plt.subplots``' ``(figure, axes)``
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(*grid, **subplots)
    try:
        yield fig, axes
        fig.tight_layout()
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
