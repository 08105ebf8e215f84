"""
Trust-PCL's choice of the relative-entropy coefficient ``lambda`` from recent episode returns.

Trust-PCL regularises the policy toward the lagged target policy ``pi'`` with the penalty
``lambda * KL(pi || pi')``. The policy that is optimal for that objective weights an episode
of return ``R`` by ``pi'(episode) * exp(R / lambda)``, so on ``n`` episodes sampled from (roughly)
``pi'`` it is, up to normalisation, the *exponentially tilted* distribution

``p_lambda(i) = exp(R_i / lambda) / sum_j exp(R_j / lambda)``

and its divergence from the behaviour that produced them is ``KL(p_lambda || uniform)``.
Instead of fixing ``lambda``, Trust-PCL fixes a divergence per step, ``max_divergence``, and picks
the ``lambda`` whose tilted distribution is ``max_divergence * mean episode length`` away from
uniform. The KL falls monotonically from ``log(n / n_max)`` at ``lambda -> 0`` (``n_max``: how many
episodes share the best return) to 0 at ``lambda -> inf`` (its derivative in ``1 / lambda`` is
``Var_p(R) / lambda >= 0``), so a bisection finds it.

====================================  ==================================================  ===================================
quantity                              definition                                          function
====================================  ==================================================  ===================================
tilted log-probabilities              ``log p_lambda(i) = R_i / lambda - logsumexp_j``    :func:`tilted_log_probs`
divergence from uniform               ``KL = sum_i p_i log p_i + log n``                  :func:`tilted_kl`
relative-entropy coefficient          smallest ``lambda`` with ``KL <= eps * mean(T)``    :func:`find_relative_entropy_coef`
====================================  ==================================================  ===================================
"""

import math
from collections.abc import Sequence

import numpy as np

#: the bisection interval of the original code
LAMBDA_LOW = 0.0
LAMBDA_HIGH = 1000.0
#: fewest episodes from which lambda is estimated (the original code needed more than 8)
MIN_EPISODES = 9


def _as_returns(returns: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(returns, dtype=np.float64).reshape(-1)
    if array.size == 0:
        raise ValueError("returns must hold at least one episode return")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"returns must be finite, got {array[~np.isfinite(array)][:5]}")
    return array


def tilted_log_probs(returns: Sequence[float] | np.ndarray, lam: float) -> np.ndarray:
    """
    ``log p_lambda(i)`` of the exponentially tilted distribution ``p_lambda(i) ~ exp(R_i / lambda)``.

    Computed with a log-sum-exp (no overflow for tiny ``lambda`` or huge returns). At ``lambda = 0``
    the limit: uniform over the episodes with the best return, ``-inf`` elsewhere.

    :param returns: ``(n,)`` episode returns
    :param lam: ``lambda >= 0``
    :return: ``(n,)`` log-probabilities
    """
    values = _as_returns(returns)
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    if lam == 0:
        best = values == values.max()
        return np.where(best, -math.log(best.sum()), -np.inf)
    shifted = (values - values.max()) / lam  # <= 0, exactly 0 for the best episodes (no cancellation)
    return shifted - math.log(np.exp(shifted).sum())


def tilted_kl(returns: Sequence[float] | np.ndarray, lam: float) -> float:
    """
    ``KL(p_lambda || uniform) = sum_i p_lambda(i) log p_lambda(i) + log n``.

    :param returns: ``(n,)`` episode returns
    :param lam: ``lambda >= 0`` (0 gives the limit ``log(n / n_max)``)
    :return: the divergence, in ``[0, log n]``
    """
    log_p = tilted_log_probs(returns, lam)
    probs = np.exp(log_p)
    finite = probs > 0  # 0 * log 0 = 0
    kl = float((probs[finite] * log_p[finite]).sum()) + math.log(len(log_p))
    return max(kl, 0.0)  # rounding can give -1e-16


def find_relative_entropy_coef(
    returns: Sequence[float] | np.ndarray,
    lengths: Sequence[float] | np.ndarray,
    max_divergence: float,
    low: float = LAMBDA_LOW,
    high: float = LAMBDA_HIGH,
    tol: float = 1e-6,
    min_episodes: int = MIN_EPISODES,
) -> float | None:
    """
    The smallest ``lambda`` in ``[low, high]`` whose tilted distribution satisfies ``KL <= max_divergence * mean(lengths)``.

    Inside the interval that is the ``lambda`` at which the KL equals the target (found by
    bisection to ``tol``; the returned end of the final bracket always satisfies the constraint).
    Edge cases, each by the same rule:

    - the constraint holds already at ``low`` (all returns equal, so the KL is 0 for every
      ``lambda``; or a target at least ``log(n / n_max)``): ``low``;
    - the KL still exceeds the target at ``high`` (target unreachable): ``high`` (clipped);
    - fewer than ``min_episodes`` episodes: ``None``, no estimate (the caller keeps its current
      ``lambda``; the original code returned the middle of the interval, 500).

    :param returns: ``(n,)`` returns of the recent episodes
    :param lengths: ``(n,)`` their lengths in steps
    :param max_divergence: allowed divergence per step ``epsilon > 0``
    :param low: lower end of the search interval (``>= 0``)
    :param high: upper end of the search interval (``> low``)
    :param tol: width of the final bisection bracket
    :param min_episodes: fewest episodes to estimate from
    :return: ``lambda``, or ``None`` with too few episodes
    """
    if not max_divergence > 0:
        raise ValueError(f"max_divergence must be > 0, got {max_divergence}")
    if not 0 <= low < high:
        raise ValueError(f"the search interval must satisfy 0 <= low < high, got [{low}, {high}]")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    lengths_array = np.asarray(lengths, dtype=np.float64).reshape(-1)
    if len(np.asarray(returns).reshape(-1)) != len(lengths_array):
        raise ValueError(f"returns and lengths must describe the same episodes, got {len(returns)} and {len(lengths_array)}")
    if len(lengths_array) < max(min_episodes, 1):
        return None
    values = _as_returns(returns)
    target = max_divergence * float(lengths_array.mean())
    if tilted_kl(values, low) <= target:
        return float(low)
    if tilted_kl(values, high) > target:
        return float(high)
    # Invariant: KL(left) > target >= KL(right).
    left, right = float(low), float(high)
    while right - left > tol:
        mid = 0.5 * (left + right)
        if mid in (left, right):  # floating-point resolution reached
            break
        if tilted_kl(values, mid) > target:
            left = mid
        else:
            right = mid
    return right
