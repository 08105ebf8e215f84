"""
The path-consistency equations as small, pure torch functions.

Every function works on **time-major** batches: tensors of shape ``(T, B)`` hold ``B`` paths
(or path segments) of at most ``T`` steps. ``mask[t, b]`` is 1 while step ``t`` belongs to
path ``b`` and 0 on the padding after its end; valid steps always form a prefix, so the
length of path ``b`` is ``L_b = mask[:, b].sum()``.

``final_values[b]`` is the value of the state reached after the last valid step of path
``b``, ``V(s_{L_b})``. The caller zeroes it when that state is terminal (the episode
*terminated*); when the path was cut (time-limit truncation, end of a replay segment, or an
episode still running) it is the critic's estimate, so the consistency bootstraps from it.

Notation (see ``docs/pcl.md``): window ``d`` (the argument ``n_steps``, the original code's ``rollout``), discount
``gamma``, entropy ``tau`` (the argument ``ent_coef``), relative-entropy ``lambda`` (Trust-PCL). For ``t < L``,

``C(t) = -V(s_t) + gamma^k V(s_{t+k}) + sum_{i<k} gamma^i [r_{t+i} - tau log pi_{t+i}
- lambda (log pi_{t+i} - log pi'_{t+i})]``  with ``k = min(d, L - t)``.

The windows that run past the end of a path thus bootstrap from ``V(s_L)`` with the discount
of the real distance ``gamma^(L-t)`` (the original TF code used one factor less). The far-end
values ``V(s_{t+k})`` and ``V(s_L)`` may come from another network than ``V(s_t)`` (a lagged
target value network: ``path_consistency(..., far_values=...)``).
"""

from collections.abc import Sequence
from typing import NamedTuple

import torch as th


def discount_powers(n: int, gamma: float, like: th.Tensor) -> th.Tensor:
    """
    ``[1, gamma, gamma^2, ..., gamma^(n-1)]`` with the dtype and device of ``like``.

    :param n: number of powers
    :param gamma: discount factor
    :param like: tensor whose dtype and device are used
    :return: tensor of shape ``(n,)``
    """
    return gamma ** th.arange(n, dtype=like.dtype, device=like.device)


def discounted_window_sum(x: th.Tensor, mask: th.Tensor, gamma: float, n_steps: int) -> th.Tensor:
    """
    Discounted sum over the next ``n_steps`` valid steps: ``S[t] = sum_{i<d} gamma^i x[t+i] mask[t+i]``.

    Steps past the end of the batch (or on padding) contribute nothing. Differentiable in ``x``.

    :param x: time-major tensor ``(T, B)``, or ``(T, B, K)``: ``K`` series summed side by side
    :param mask: ``(T, B)`` (``(T, B, 1)`` with ``(T, B, K)`` series), 1 on valid steps, 0 on padding
    :param gamma: discount factor
    :param n_steps: window length ``d >= 1``
    :return: window sums shaped as ``x`` (zero on padding)
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    horizon = x.shape[0]
    xm = masked(x, mask)
    # Pad n_steps-1 zeros at the end, then build the d shifted views and weight them.
    padded = th.cat([xm, xm.new_zeros((n_steps - 1, *xm.shape[1:]))], dim=0)
    weights = discount_powers(n_steps, gamma, x)
    total = th.zeros_like(xm)
    for i in range(n_steps):
        total = total + weights[i] * padded[i : i + horizon]
    return total * mask


def masked(x: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """
    ``x`` on valid steps, exactly 0 on padding (even where the padding holds NaN or inf).

    :param x: time-major tensor
    :param mask: prefix mask of the same shape
    :return: the masked tensor
    """
    return th.where(mask > 0, x, th.zeros_like(x))


def path_lengths(mask: th.Tensor) -> th.Tensor:
    """
    Number of valid steps of each path.

    :param mask: ``(T, B)`` prefix mask
    :return: ``(B,)`` integer lengths
    """
    return mask.sum(dim=0).round().long()


def bootstrap_values(values: th.Tensor, final_values: th.Tensor, mask: th.Tensor, gamma: float, n_steps: int) -> th.Tensor:
    """
    The discounted value at the far end of each window: ``gamma^k V(s_{t+k})`` with ``k = min(d, L - t)``.

    ``V(s_L)`` is ``final_values`` (zero for terminated paths). Differentiable in both
    ``values`` and ``final_values``.

    :param values: ``(T, B)`` values ``V(s_t)`` of the visited states
    :param final_values: ``(B,)`` value of the state after the last valid step
    :param mask: ``(T, B)`` prefix mask
    :param gamma: discount factor
    :param n_steps: window length ``d``
    :return: ``(T, B)`` bootstrap terms (zero on padding)
    """
    horizon = values.shape[0]
    lengths = path_lengths(mask)  # (B,)
    t_index = th.arange(horizon, device=values.device).unsqueeze(1)  # (T, 1)
    end = th.minimum(t_index + n_steps, lengths.unsqueeze(0))  # (T, B), index of the far state
    end = th.maximum(end, t_index)  # padding rows: keep a harmless index
    # values extended by the final value at index L_b (write it in row T, gather row L_b).
    extended = th.cat([masked(values, mask), values.new_zeros((1, values.shape[1]))], dim=0)
    rows = th.arange(values.shape[1], device=values.device)
    extended = extended.index_put((lengths, rows), final_values, accumulate=False)
    far_value = th.gather(extended, 0, end.clamp(max=horizon))
    distance = (end - t_index).to(values.dtype)
    return masked((gamma**distance) * far_value, mask)


class StartWindows(NamedTuple):
    """A batch extended with the ``d - 1`` shorter windows that start at ``s_0``."""

    rewards: th.Tensor
    log_probs: th.Tensor
    relative_log_probs: th.Tensor
    values: th.Tensor
    mask: th.Tensor


def prepend_start_windows(
    rewards: th.Tensor,
    log_probs: th.Tensor,
    relative_log_probs: th.Tensor,
    values: th.Tensor,
    mask: th.Tensor,
    gamma: float,
    n_steps: int,
) -> StartWindows:
    """
    Add the ``d - 1`` extra windows that start at ``s_0`` (the original PCL code's behaviour).

    ``d - 1`` virtual steps are put before ``s_0``: zero reward and log-probabilities, and
    values ``gamma^(d-1) V(s_0), ..., gamma V(s_0)``. The consistency of virtual step ``-j``
    is ``gamma^j`` times the consistency of the ``d - j`` step window that starts at ``s_0``,
    so every state of a path (not only the first one) ends a full-weight window.

    :param rewards: ``(T, B)``
    :param log_probs: ``(T, B)`` ``log pi(a_t|s_t)``
    :param relative_log_probs: ``(T, B)`` ``log pi - log pi_target`` (zeros for plain PCL)
    :param values: ``(T, B)`` ``V(s_t)``
    :param mask: ``(T, B)`` prefix mask
    :param gamma: discount factor
    :param n_steps: window length ``d``
    :return: the five tensors with ``T + d - 1`` rows
    """
    extra = n_steps - 1
    if extra == 0:
        return StartWindows(rewards, log_probs, relative_log_probs, values, mask)
    n_paths = rewards.shape[1]
    zeros = rewards.new_zeros((extra, n_paths))
    scale = gamma ** th.arange(extra, 0, -1, dtype=values.dtype, device=values.device)  # gamma^(d-1) .. gamma^1
    start_values = scale.unsqueeze(1) * masked(values[:1], mask[:1])
    return StartWindows(
        rewards=th.cat([zeros, rewards], dim=0),
        log_probs=th.cat([zeros, log_probs], dim=0),
        relative_log_probs=th.cat([zeros, relative_log_probs], dim=0),
        values=th.cat([start_values, values], dim=0),
        mask=th.cat([mask[:1].expand(extra, n_paths), mask], dim=0),
    )


class Consistency(NamedTuple):
    """The pieces of the path-consistency computation, all ``(T', B)`` time-major."""

    residual: th.Tensor
    """``C(t)``; differentiable in the log-probabilities and values."""
    window_log_probs: th.Tensor
    """``sum_i gamma^i log pi(a_{t+i}|s_{t+i})`` (the policy term)."""
    values: th.Tensor
    """``V(s_t)`` (the baseline of each window)."""
    bootstrap: th.Tensor
    """``gamma^k V(s_{t+k})`` (the far end of each window)."""
    mask: th.Tensor
    """Valid windows."""
    offset: int
    """Number of prepended start-window rows (row ``offset + t`` belongs to step ``t``)."""


def path_consistency(
    rewards: th.Tensor,
    log_probs: th.Tensor,
    values: th.Tensor,
    final_values: th.Tensor,
    mask: th.Tensor,
    gamma: float,
    n_steps: int,
    ent_coef: float = 0.0,
    target_log_probs: th.Tensor | None = None,
    relative_entropy_coef: float = 0.0,
    start_windows: bool = True,
    far_values: th.Tensor | None = None,
) -> Consistency:
    """
    Path-consistency residuals ``C(t)`` of PCL / Trust-PCL for a batch of paths.

    :param rewards: ``(T, B)`` rewards
    :param log_probs: ``(T, B)`` ``log pi(a_t|s_t)`` (summed over action components)
    :param values: ``(T, B)`` ``V(s_t)``
    :param final_values: ``(B,)`` ``V(s_L)``, zero for terminated paths
    :param mask: ``(T, B)`` prefix mask of valid steps
    :param gamma: discount factor
    :param n_steps: window length ``d``
    :param ent_coef: entropy regularisation coefficient (the paper's ``tau``)
    :param target_log_probs: ``(T, B)`` log-probabilities of the (lagged) target policy;
        needed when ``relative_entropy_coef > 0``; treated as constants
    :param relative_entropy_coef: Trust-PCL's ``lambda``
    :param start_windows: add the ``d - 1`` shorter windows that start at ``s_0``
    :param far_values: ``(T, B)`` values used at the far end of the windows, ``gamma^k V'(s_{t+k})``,
        e.g. from a lagged target value network (``final_values`` should then come from the same
        network); ``None``: ``values``. ``V(s_t)`` at the start of each window is always ``values``
    :return: the residuals and the terms the surrogate losses need
    """
    if target_log_probs is None:
        if relative_entropy_coef != 0.0:
            raise ValueError("target_log_probs are required when relative_entropy_coef != 0")
        relative = th.zeros_like(log_probs)
    else:
        relative = log_probs - target_log_probs.detach()
    if start_windows:
        rewards, log_probs, relative, values, mask = prepend_start_windows(
            rewards, log_probs, relative, values, mask, gamma, n_steps
        )
        if far_values is not None:
            # The virtual start rows are never the far end of a window (the far end of every
            # window is a real step >= 1): their content only keeps the rows aligned.
            far_values = th.cat([values[: n_steps - 1], far_values], dim=0)
    # the window sums of rewards, log pi (and log pi - log pi') side by side in one call: the same arithmetic per element
    summed = [rewards, log_probs, relative] if relative_entropy_coef != 0.0 else [rewards, log_probs]
    window_sums = discounted_window_sum(th.stack(summed, dim=-1), mask.unsqueeze(-1), gamma, n_steps).unbind(-1)
    window_rewards, window_log_probs = window_sums[0], window_sums[1]
    bootstrap = bootstrap_values(values if far_values is None else far_values, final_values, mask, gamma, n_steps)
    values = masked(values, mask)
    residual = -values + bootstrap + window_rewards - ent_coef * window_log_probs
    if relative_entropy_coef != 0.0:
        residual = residual - relative_entropy_coef * window_sums[2]
    offset = n_steps - 1 if start_windows else 0
    return Consistency(masked(residual, mask), window_log_probs, values, bootstrap, mask, offset)


def clip_residual(residual: th.Tensor, clip_adv: float | None) -> th.Tensor:
    """
    Detached residual, optionally clipped to ``[-clip_adv, clip_adv]`` (the seed's ``clip_adv``).

    :param residual: ``C(t)``
    :param clip_adv: clipping bound, ``None`` or 0 for no clipping
    :return: a constant tensor used as the weight of the surrogate gradients
    """
    weight = residual.detach()
    if clip_adv:
        weight = weight.clamp(-clip_adv, clip_adv)
    return weight


def _sum_over_time_mean_over_paths(x: th.Tensor, mask: th.Tensor) -> th.Tensor:
    return (x * mask).sum(dim=0).mean()


def pcl_policy_loss(consistency: Consistency, clip_adv: float | None = None) -> th.Tensor:
    """
    Policy surrogate: its gradient is ``-C(t) * grad sum_i gamma^i log pi`` (summed over time, mean over paths).

    :param consistency: output of :func:`path_consistency`
    :param clip_adv: optional clipping of ``C``
    :return: scalar loss
    """
    weight = clip_residual(consistency.residual, clip_adv)
    return _sum_over_time_mean_over_paths(-weight * consistency.window_log_probs, consistency.mask)


def pcl_value_loss(consistency: Consistency, clip_adv: float | None = None) -> th.Tensor:
    """
    Value surrogate: its gradient is ``-C(t) * grad (V(s_t) - gamma^k V(s_{t+k}))``.

    :param consistency: output of :func:`path_consistency`
    :param clip_adv: optional clipping of ``C``
    :return: scalar loss
    """
    weight = clip_residual(consistency.residual, clip_adv)
    return _sum_over_time_mean_over_paths(-weight * (consistency.values - consistency.bootstrap), consistency.mask)


def consistency_loss(consistency: Consistency) -> th.Tensor:
    """
    The quantity PCL minimises, ``mean over paths of sum_t C(t)^2 / 2`` (for logging).

    :param consistency: output of :func:`path_consistency`
    :return: scalar
    """
    return _sum_over_time_mean_over_paths(0.5 * consistency.residual.detach() ** 2, consistency.mask)


def value_targets(consistency: Consistency) -> th.Tensor:
    """
    Regression targets for a separately optimised value function: ``V(s_t) + C(t)`` (detached).

    One target per visited state: the rows of the prepended start windows are dropped.

    :param consistency: output of :func:`path_consistency`
    :return: ``(T, B)`` targets, aligned with the input batch
    """
    offset = consistency.offset
    return (consistency.values[offset:] + consistency.residual[offset:]).detach()


def soft_value(logits: th.Tensor, temperature: float, action_dims: Sequence[int] | None = None) -> th.Tensor:
    """
    Unified PCL's value: ``V(s) = (tau + lambda) * logsumexp(logits)``.

    With a factorised (``MultiDiscrete``) policy ``pi(a) = prod_k softmax(l_k)(a_k)`` the logits are the
    concatenation of the components' ``l_k`` and ``Q(s, a) = temperature * sum_k l_k(a_k)`` (up to a constant)
    gives ``V(s) = temperature * sum_k logsumexp(l_k)``.

    :param logits: ``(..., n_actions)``, or ``(..., sum(action_dims))``
    :param temperature: ``tau + lambda``
    :param action_dims: sizes of the action components (``nvec`` of a ``MultiDiscrete`` space); ``None``: one component
    :return: ``(...)`` values
    """
    if action_dims is None or len(action_dims) == 1:
        return temperature * th.logsumexp(logits, dim=-1)
    components = th.split(logits, list(action_dims), dim=-1)
    return temperature * th.stack([th.logsumexp(component, dim=-1) for component in components], dim=-1).sum(dim=-1)
