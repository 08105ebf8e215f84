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

The second half of the module holds the *trust-region policy step* that PCL can use instead of Adam
(``PCL(policy_step="trust_region")``, :class:`~sb3_pcl.pcl.policy_steps.TrustRegionStep`, the original code's
``trust_region_p``), and the closed-form value fit (``value_fit="best_fit"``). With ``g`` the gradient of the policy
objective ``L`` over the policy parameters ``theta`` and ``F`` the Hessian of the mean
``KL(pi_old || pi_theta)`` over the batch's states at ``theta_old`` (the Fisher matrix), plus
``damping * I``:

====================================  ==================================================  ===================================
quantity                              definition                                          function
====================================  ==================================================  ===================================
squared-consistency objective         ``mean_b sum_t h(C(t))``, ``h = C^2 / 2`` (Huber)   :func:`squared_consistency_objective`
per-state divergence                  ``KL(p || q)`` of the joint action distribution     :func:`state_kl`
Fisher-vector product                 ``v -> (F + damping I) v`` (double backward)        :func:`fisher_vector_product_fn`
natural-gradient step                 ``s = -beta x``, ``F x = g`` (conjugate gradient),  :func:`natural_gradient_step`
                                      ``beta = sqrt(2 delta / x^T F x)``
backtracking line search              first ``theta_old + c^i s`` with ``L`` lower and    :func:`backtracking_line_search`
                                      measured ``KL <= delta``, else ``theta_old``
the whole step                        the three above                                     :func:`trust_region_step`
ridge fit of the value's last layer   ``[w; b] = (X^T X + rho I)^-1 X^T y``, ``X = [h, 1]``  :func:`ridge_regression`
====================================  ==================================================  ===================================
"""

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import torch as th
from sb3_contrib.common.utils import conjugate_gradient_solver, flat_grad
from stable_baselines3.common.distributions import Distribution, kl_divergence

from sb3_pcl.common.consistency import Consistency

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


# ----------------------------------------------------------------------------------------------
# The trust-region (natural-gradient) policy step
# ----------------------------------------------------------------------------------------------


def state_kl(p: Distribution, q: Distribution) -> th.Tensor:
    """
    ``KL(p || q)`` per state, one value per row of the distributions' batch.

    SB3's ``kl_divergence`` returns one column per action dimension for the factorised
    distributions (diagonal Gaussian); those are summed, the KL of the joint action distribution.

    :param p: the first distribution (e.g. the old or the target policy)
    :param q: the second distribution, of the same type and batch size
    :return: ``(batch,)``
    """
    kl = kl_divergence(p, q)
    return kl.sum(dim=-1) if kl.dim() > 1 else kl


def squared_consistency_objective(consistency: Consistency, clip_adv: float | None = None) -> th.Tensor:
    """
    PCL's objective, differentiable: ``mean over paths of sum_t h(C(t))``.

    ``h(C) = C^2 / 2``, or with ``clip_adv`` the Huber function of threshold ``clip_adv``
    (``C^2 / 2`` inside ``[-clip_adv, clip_adv]``, linear outside), whose derivative is the clipped
    ``C`` the surrogate losses use as their weight. Over the policy parameters its gradient is
    ``(tau + lambda)`` times the gradient of :func:`~sb3_pcl.common.consistency.pcl_policy_loss`
    (``C`` depends on the policy only through ``-(tau + lambda) sum_i gamma^i log pi``).

    :param consistency: output of :func:`~sb3_pcl.common.consistency.path_consistency`
    :param clip_adv: Huber threshold, ``None`` or 0 for the plain square
    :return: scalar, differentiable in everything ``C`` depends on
    """
    residual = consistency.residual
    if clip_adv:
        per_step = th.nn.functional.huber_loss(residual, th.zeros_like(residual), reduction="none", delta=clip_adv)
    else:
        per_step = 0.5 * residual**2
    return (per_step * consistency.mask).sum(dim=0).mean()


def _flat_gradient(output: th.Tensor, params: Sequence[th.Tensor], what: str, **kwargs: bool) -> th.Tensor:
    """``flat_grad`` (sb3-contrib) that checks every parameter got a gradient, so the flat vectors line up."""
    gradient = flat_grad(output, params, **kwargs)  # type: ignore[arg-type]
    n_params = sum(p.numel() for p in params)
    if gradient.numel() != n_params:
        raise ValueError(
            f"{what} does not depend on every policy parameter ({gradient.numel()} of {n_params} entries have a "
            "gradient): the trust-region step needs a gradient for each of them"
        )
    return gradient


def fisher_vector_product_fn(kl: th.Tensor, params: Sequence[th.Tensor], damping: float) -> Callable[[th.Tensor], th.Tensor]:
    """
    Products with the damped Fisher matrix ``(F + damping I) v``, ``F`` the Hessian of ``kl`` in ``params``.

    ``kl`` is the mean ``KL(pi_old || pi_theta)`` evaluated at ``theta = theta_old`` with ``pi_old``
    held constant: its value and gradient are 0 there and its Hessian is the Fisher information
    matrix. The product is a double backward pass: ``F v = grad_theta (grad_theta KL . v)``; ``F``
    itself is never formed.

    :param kl: scalar KL with its autograd graph
    :param params: the parameters ``theta`` (all must influence ``kl``)
    :param damping: ``>= 0``, added times ``v`` (keeps the system positive definite)
    :return: a function of a flat vector ``v`` (the size of ``params``) returning ``(F + damping I) v``
    """
    kl_gradient = _flat_gradient(kl, params, "the KL", create_graph=True, retain_graph=True)

    def product(vector: th.Tensor) -> th.Tensor:
        second = flat_grad(th.dot(kl_gradient, vector), params, retain_graph=True)  # type: ignore[arg-type]
        return second + damping * vector

    return product


def natural_gradient_step(
    loss_gradient: th.Tensor,
    fisher_product: Callable[[th.Tensor], th.Tensor],
    max_kl: float,
    cg_max_steps: int = 10,
) -> th.Tensor | None:
    """
    The full natural-gradient step ``s = -beta x`` on a loss, sized by the quadratic KL model.

    ``x ~ F^-1 g`` is found by conjugate gradient (sb3-contrib's ``conjugate_gradient_solver``,
    ``cg_max_steps`` iterations) and ``beta = sqrt(2 max_kl / x^T F x)``, so that the quadratic
    estimate of the divergence of the step, ``s^T F s / 2``, equals ``max_kl``.

    :param loss_gradient: flat gradient ``g`` of the loss (minimised: the step goes against it)
    :param fisher_product: ``v -> F v`` (see :func:`fisher_vector_product_fn`)
    :param max_kl: the trust-region size ``delta > 0``
    :param cg_max_steps: conjugate-gradient iterations
    :return: the flat step, or ``None`` when ``F`` is not positive along ``x`` or the numbers are not finite
    """
    direction = conjugate_gradient_solver(fisher_product, loss_gradient, max_iter=cg_max_steps)
    curvature = th.dot(direction, fisher_product(direction))
    if not th.isfinite(curvature) or curvature <= 0 or not th.all(th.isfinite(direction)):
        return None
    return -th.sqrt(2.0 * max_kl / curvature) * direction


def _assign_flat(params: Sequence[th.Tensor], flat: th.Tensor) -> None:
    """Copy a flat vector into the parameters, in place (the tensors, and any reference to them, are kept)."""
    offset = 0
    with th.no_grad():
        for param in params:
            size = param.numel()
            param.copy_(flat[offset : offset + size].view_as(param))
            offset += size


class LineSearchResult(NamedTuple):
    """Outcome of :func:`backtracking_line_search`."""

    accepted: bool
    """whether a step was taken (else the parameters are back at their start)"""
    fraction: float
    """fraction ``c^i`` of the full step taken (0 if rejected)"""
    loss: float
    """loss at the final parameters"""
    kl: float
    """measured divergence at the final parameters (0 if rejected)"""
    n_trials: int
    """number of steps tried"""


def backtracking_line_search(
    params: Sequence[th.Tensor],
    step: th.Tensor,
    loss_fn: Callable[[], th.Tensor],
    kl_fn: Callable[[], th.Tensor],
    loss_before: float,
    max_kl: float,
    max_iter: int = 10,
    shrinking_factor: float = 0.5,
) -> LineSearchResult:
    """
    Try ``theta_old + c^i s`` for ``i = 0 .. max_iter - 1``; keep the first with a lower loss and ``KL <= max_kl``.

    The loss and the divergence are measured (``loss_fn()``, ``kl_fn()`` without gradient) at each
    trial point. When no trial is accepted the parameters are set back to ``theta_old``.

    :param params: the parameters, at ``theta_old``; modified in place
    :param step: flat full step ``s``
    :param loss_fn: loss at the current parameters
    :param kl_fn: mean ``KL(pi_old || pi)`` at the current parameters
    :param loss_before: loss at ``theta_old``
    :param max_kl: the largest divergence accepted
    :param max_iter: number of trials
    :param shrinking_factor: ``c`` in ``(0, 1)``
    :return: what was accepted
    """
    start = th.nn.utils.parameters_to_vector(params).detach().clone()
    fraction = 1.0
    for trial in range(1, max_iter + 1):
        _assign_flat(params, start + fraction * step)
        with th.no_grad():
            loss, kl = float(loss_fn()), float(kl_fn())
        if math.isfinite(loss) and math.isfinite(kl) and loss < loss_before and kl <= max_kl:
            return LineSearchResult(True, fraction, loss, kl, trial)
        fraction *= shrinking_factor
    _assign_flat(params, start)
    return LineSearchResult(False, 0.0, loss_before, 0.0, max_iter)


class TrustRegionStats(NamedTuple):
    """What :func:`trust_region_step` did (logged by PCL under ``train/``)."""

    accepted: bool
    """a step was taken"""
    loss_before: float
    """loss at ``theta_old``"""
    loss_after: float
    """loss at the final parameters"""
    kl: float
    """measured ``KL(pi_old || pi_new)`` (0 if no step)"""
    step_size: float
    """fraction of the full natural-gradient step taken (0 if no step)"""
    step_norm: float
    """Euclidean norm of the parameter change"""
    grad_norm: float
    """norm of the loss gradient ``g``"""
    n_trials: int
    """line-search trials (0 when no direction could be computed)"""


def trust_region_step(
    loss_fn: Callable[[], th.Tensor],
    kl_fn: Callable[[], th.Tensor],
    params: Sequence[th.Tensor],
    max_kl: float,
    cg_max_steps: int = 10,
    cg_damping: float = 0.1,
    line_search_max_iter: int = 10,
    line_search_shrinking_factor: float = 0.5,
) -> TrustRegionStats:
    """
    One trust-region step on ``params``: natural gradient, quadratic step size, backtracking line search.

    1. ``g = grad L(theta_old)``;
    2. ``(F + damping I) x = g`` by conjugate gradient, ``F`` the Hessian of ``kl_fn()`` at
       ``theta_old`` (:func:`fisher_vector_product_fn`);
    3. full step ``s = -sqrt(2 max_kl / x^T F x) x`` (:func:`natural_gradient_step`);
    4. :func:`backtracking_line_search`: the first ``theta_old + c^i s`` that lowers ``L`` with a
       measured ``KL <= max_kl``, else no change.

    A zero or non-finite gradient, or a direction along which ``F`` is not positive, leaves the
    parameters unchanged (``accepted=False``, ``n_trials=0``).

    :param loss_fn: the loss ``L`` at the current parameters (with its autograd graph when gradients are enabled)
    :param kl_fn: ``KL(pi_old || pi)`` averaged over the states, ``pi_old`` the constant policy at ``theta_old``
    :param params: the parameters ``theta`` stepped (every one must influence the loss and the KL)
    :param max_kl: the trust-region size ``delta > 0``
    :param cg_max_steps: conjugate-gradient iterations
    :param cg_damping: damping added to the Fisher matrix
    :param line_search_max_iter: line-search trials
    :param line_search_shrinking_factor: step shrinking factor ``c`` between trials
    :return: statistics of the step
    """
    params = list(params)
    loss = loss_fn()
    loss_before = float(loss.detach())
    gradient = _flat_gradient(loss, params, "the loss").detach()
    grad_norm = float(th.linalg.vector_norm(gradient))
    unchanged = TrustRegionStats(False, loss_before, loss_before, 0.0, 0.0, 0.0, grad_norm, 0)
    if not math.isfinite(loss_before) or not math.isfinite(grad_norm) or grad_norm == 0.0:
        return unchanged
    step = natural_gradient_step(gradient, fisher_vector_product_fn(kl_fn(), params, cg_damping), max_kl, cg_max_steps)
    if step is None:
        return unchanged
    result = backtracking_line_search(
        params, step, loss_fn, kl_fn, loss_before, max_kl, line_search_max_iter, line_search_shrinking_factor
    )
    step_norm = result.fraction * float(th.linalg.vector_norm(step))
    return TrustRegionStats(
        result.accepted, loss_before, result.loss, result.kl, result.fraction, step_norm, grad_norm, result.n_trials
    )


# ----------------------------------------------------------------------------------------------
# Closed-form value fit
# ----------------------------------------------------------------------------------------------


def ridge_regression(
    features: th.Tensor, targets: th.Tensor, reg_coef: float = 1e-5, max_tries: int = 5
) -> tuple[th.Tensor, th.Tensor] | None:
    """
    Least squares fit of a linear layer ``y ~ h w + b``, regularised: ``[w; b] = (X^T X + rho I)^-1 X^T y``, ``X = [h, 1]``.

    Solved in float64. When the solution is not finite, ``rho`` is multiplied by 10 and the
    solve repeated, at most ``max_tries`` times in all (the original code's ``best_fit``).

    :param features: ``(N, F)`` inputs of the layer
    :param targets: ``(N,)`` regression targets
    :param reg_coef: ``rho > 0``, ridge coefficient (on the weight and the bias)
    :param max_tries: number of solves with growing ``rho``
    :return: ``(weight (F,), bias ())`` in the dtype of ``features``, or ``None`` if no finite solution was found
    """
    if features.dim() != 2 or targets.shape != features.shape[:1]:
        raise ValueError(f"features must be (N, F) and targets (N,), got {tuple(features.shape)} and {tuple(targets.shape)}")
    if not reg_coef > 0:
        raise ValueError(f"reg_coef must be > 0, got {reg_coef}")
    design = th.cat([features, th.ones_like(features[:, :1])], dim=1).double()
    gram = design.T @ design
    moment = design.T @ targets.double()
    identity = th.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    coef = reg_coef
    for _ in range(max_tries):
        try:
            solution = th.linalg.solve(gram + coef * identity, moment)
        except RuntimeError:  # torch.linalg.LinAlgError: singular even with the ridge term
            solution = None
        if solution is not None and th.all(th.isfinite(solution)):
            solution = solution.to(features.dtype)
            return solution[:-1], solution[-1]
        coef *= 10.0
    return None
