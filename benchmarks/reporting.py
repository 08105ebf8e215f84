"""Statistics and formatting shared by the benchmark reports (light: NumPy only)."""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: Resamples of :func:`bootstrap_interval`
BOOTSTRAP_REPS = 10_000
#: Above this many splits of the pooled values, :func:`permutation_p_value` draws this many at random (fixed seed)
EXACT_PERMUTATION_LIMIT = 500_000


def bootstrap_interval(
    values: npt.ArrayLike, reps: int = BOOTSTRAP_REPS, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """
    :param values: One value per seed
    :param reps: Bootstrap resamples
    :param seed: Seed of the resampling (the interval is reproducible)
    :param level: Coverage of the interval
    :return: The percentile bootstrap interval of the mean
    :raises ValueError: No values, or a non-finite one
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0 or not np.all(np.isfinite(data)):
        raise ValueError(f"bootstrap_interval needs finite values, got {list(data)}")
    means = data[np.random.default_rng(seed).integers(0, data.size, size=(reps, data.size))].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def permutation_p_value(first: npt.ArrayLike, second: npt.ArrayLike, seed: int = 0) -> float:
    """
    :param first: One value per seed of the first algorithm
    :param second: One value per seed of the second
    :param seed: Seed of the random splits drawn when there are more than :data:`EXACT_PERMUTATION_LIMIT`
    :return: Two-sided p-value of the difference of the means: the fraction of the splits of the pooled values into
        groups of the same sizes (all of them when few enough) whose difference is at least as large in magnitude
    """
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.size == 0 or b.size == 0 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError(f"permutation_p_value needs finite values in both groups, got {list(a)} and {list(b)}")
    pooled = np.concatenate([a, b])
    observed = abs(a.mean() - b.mean())
    if math.comb(pooled.size, a.size) <= EXACT_PERMUTATION_LIMIT:
        groups = np.array(list(itertools.combinations(range(pooled.size), a.size)))
    else:
        rng = np.random.default_rng(seed)
        groups = np.argsort(rng.random((EXACT_PERMUTATION_LIMIT, pooled.size)), axis=1)[:, : a.size]
    sums = pooled[groups].sum(axis=1)
    differences = np.abs(sums / a.size - (pooled.sum() - sums) / b.size)
    return float(np.mean(differences >= observed - 1e-9 * max(1.0, observed)))


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
