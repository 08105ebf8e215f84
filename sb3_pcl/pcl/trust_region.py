"""
The *trust-region policy step* that PCL can use instead of Adam (``PCL(policy_step="trust_region")``, taken by
:meth:`sb3_pcl.PCL._trust_region_step` with the settings :class:`TrustRegion`, the original code's ``trust_region_p``).
With ``g`` the gradient of
the policy objective ``L`` over the policy parameters ``theta`` and ``F`` the Hessian of the mean
``KL(pi_old || pi_theta)`` over the batch's states at ``theta_old`` (the Fisher matrix), plus ``damping * I``:

====================================  ==================================================  ===================================
quantity                              definition                                          function
====================================  ==================================================  ===================================
squared-consistency objective         ``mean_b sum_t h(C(t))``, ``h = C^2 / 2`` (Huber)   :func:`squared_consistency_objective`
per-state divergence                  ``KL(p || q)`` of the joint action distribution     ``common.statistics.state_kl``
Fisher-vector product                 ``v -> (F + damping I) v`` (double backward)        :func:`fisher_vector_product_fn`
natural-gradient step                 ``s = -beta x``, ``F x = g`` (conjugate gradient),  :func:`natural_gradient_step`
                                      ``beta = sqrt(2 delta / x^T F x)``
backtracking line search              first ``theta_old + c^i s`` with ``L`` lower and    :func:`backtracking_line_search`
                                      measured ``KL <= delta``, else ``theta_old``
the whole step                        the three above                                     :func:`trust_region_step`
====================================  ==================================================  ===================================
"""

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

import torch as th
from sb3_contrib.common.utils import conjugate_gradient_solver, flat_grad

from sb3_pcl.common.validation import check, is_int, is_real
from sb3_pcl.pcl.consistency import Consistency

TRUST_REGION_LOSSES = ("consistency", "surrogate")


@dataclasses.dataclass(frozen=True)
class TrustRegion:
    """
    The settings of ``policy_step="trust_region"`` (``policy_step_kwargs``): one natural-gradient step of the policy
    parameters per batch. The loss is re-evaluated on the batch at every trial point; the divergence is the mean
    ``KL(pi_old || pi)`` over the batch's valid steps. ``learning_rate`` and ``max_grad_norm`` do not apply. It needs
    a separate value fit (the step moves only the policy parameters).

    :param loss: ``"consistency"``, PCL's objective ``mean_b sum_t C(t)^2 / 2`` (Huber with ``clip_adv``; needs
        ``ent_coef + relative_entropy_coef > 0``, else it does not depend on the policy), or ``"surrogate"``,
        ``-mean_b sum_t C_old(t) sum_i gamma^i log pi`` with ``C`` fixed at the old parameters. Both have the same
        gradient at the old parameters
    :param target_kl: the largest mean ``KL(pi_old || pi_new)`` of a step
    :param cg_max_steps: conjugate-gradient iterations
    :param cg_damping: damping added to the Fisher matrix, ``(F + cg_damping I) x = g``
    :param line_search_max_iter: trials of the backtracking line search
    :param line_search_shrinking_factor: factor in ``(0, 1)`` shrinking the step between trials
    """

    name: ClassVar[str] = "trust_region"
    loss: str = "consistency"
    target_kl: float = 0.01
    cg_max_steps: int = 10
    cg_damping: float = 0.1
    line_search_max_iter: int = 10
    line_search_shrinking_factor: float = 0.5

    def __post_init__(self) -> None:
        key = "policy_step_kwargs[{!r}]".format
        check(self.loss in TRUST_REGION_LOSSES, key("loss"), self.loss, f"one of {TRUST_REGION_LOSSES}")
        check(is_real(self.target_kl) and self.target_kl > 0, key("target_kl"), self.target_kl, "a finite float > 0")
        steps_ok = is_int(self.cg_max_steps) and self.cg_max_steps >= 1
        check(steps_ok, key("cg_max_steps"), self.cg_max_steps, "an integer >= 1")
        check(is_real(self.cg_damping) and self.cg_damping >= 0, key("cg_damping"), self.cg_damping, "a finite float >= 0")
        trials_ok = is_int(self.line_search_max_iter) and self.line_search_max_iter >= 1
        check(trials_ok, key("line_search_max_iter"), self.line_search_max_iter, "an integer >= 1")
        factor = self.line_search_shrinking_factor
        check(is_real(factor) and 0.0 < factor < 1.0, key("line_search_shrinking_factor"), factor, "in (0, 1)")

    def check_model(self, value_fit: str, ent_coef: Any, relative_entropy_coef: float) -> None:
        """
        :param value_fit: the model's ``value_fit``
        :param ent_coef: its ``ent_coef`` (a schedule counts as positive)
        :param relative_entropy_coef: its ``relative_entropy_coef``
        :raises ValueError: when the model's other hyperparameters do not suit the step
        """
        if value_fit == "joint":
            raise ValueError(
                "value_fit must be one of 'grad', 'best_fit', 'lbfgs' with policy_step='trust_region' "
                "(the natural-gradient step moves only the policy parameters), got 'joint'"
            )
        no_entropy = not callable(ent_coef) and ent_coef == 0 and relative_entropy_coef == 0
        if self.loss == "consistency" and no_entropy:
            raise ValueError(
                "policy_step_kwargs['loss']='consistency' needs ent_coef + relative_entropy_coef > 0 (with both 0 the "
                "squared consistency does not depend on the policy); use policy_step_kwargs={'loss': 'surrogate'}"
            )


def squared_consistency_objective(consistency: Consistency, clip_adv: float | None = None) -> th.Tensor:
    """
    PCL's objective, differentiable: ``mean over paths of sum_t h(C(t))``.

    ``h(C) = C^2 / 2``, or with ``clip_adv`` the Huber function of threshold ``clip_adv``
    (``C^2 / 2`` inside ``[-clip_adv, clip_adv]``, linear outside), whose derivative is the clipped
    ``C`` the surrogate losses use as their weight. Over the policy parameters its gradient is
    ``(tau + lambda)`` times the gradient of :func:`~sb3_pcl.pcl.consistency.pcl_policy_loss`
    (``C`` depends on the policy only through ``-(tau + lambda) sum_i gamma^i log pi``).

    :param consistency: output of :func:`~sb3_pcl.pcl.consistency.path_consistency`
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
