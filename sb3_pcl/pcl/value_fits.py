"""
How PCL fits its value function separately, after each policy step (the original code's ``value_opt``).

The default, ``value_fit="joint"``, fits the value with the policy: the value surrogate is added to the policy loss with
weight ``vf_coef`` and both move in one optimiser step (the PCL paper), in :meth:`sb3_pcl.PCL.train` itself. The
other fits regress the value, after the policy step, toward ``y_t = mix * (V(s_t) + C(t)) + (1 - mix) * V_old(s_t)``
on the batch's valid steps (``V(s_t) + C(t)`` is :func:`~sb3_pcl.pcl.consistency.value_targets`;
:meth:`sb3_pcl.PCL._fit_value` computes ``y`` and calls one of the functions below). Their settings,
``value_fit_kwargs``, are checked by the classes of :data:`VALUE_FITS`:

====================  ==============================================================  =============================
``value_fit``         what it does on each batch                                      function
====================  ==============================================================  =============================
``"grad"``            ``gradient_steps`` optimiser steps on the value parameters       :func:`fit_by_gradient`
``"best_fit"``        ridge least squares for the value's last linear layer            :func:`fit_last_layer`
``"lbfgs"``           L-BFGS (strong-Wolfe line search) on the value parameters        :func:`fit_by_lbfgs`
====================  ==============================================================  =============================
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import ClassVar

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy

from sb3_pcl.common.validation import check, check_finite_update, gradient_norm, is_int, is_real


def _check_mix(mix: float) -> None:
    check(is_real(mix) and 0.0 < mix <= 1.0, "value_fit_kwargs['mix']", mix, "in (0, 1]")


@dataclasses.dataclass(frozen=True)
class GradFit:
    """
    ``value_fit="grad"``: ``gradient_steps`` steps of the policy's optimiser class on the value parameters per batch.

    :param learning_rate: the value optimiser's learning rate
    :param gradient_steps: optimiser steps per batch
    :param mix: weight of the consistency target, in ``(0, 1]``
    """

    name: ClassVar[str] = "grad"
    learning_rate: float = 1e-3
    gradient_steps: int = 5
    mix: float = 1.0

    def __post_init__(self) -> None:
        _check_mix(self.mix)
        rate_ok = is_real(self.learning_rate) and self.learning_rate > 0
        check(rate_ok, "value_fit_kwargs['learning_rate']", self.learning_rate, "> 0")
        steps_ok = is_int(self.gradient_steps) and self.gradient_steps >= 1
        check(steps_ok, "value_fit_kwargs['gradient_steps']", self.gradient_steps, ">= 1")


@dataclasses.dataclass(frozen=True)
class BestFit:
    """
    ``value_fit="best_fit"``: ridge least squares for the weight and bias of the value's last linear layer.

    :param reg_coef: the ridge coefficient ``rho > 0``
    :param mix: weight of the consistency target, in ``(0, 1]``
    """

    name: ClassVar[str] = "best_fit"
    reg_coef: float = 1e-5
    mix: float = 1.0

    def __post_init__(self) -> None:
        _check_mix(self.mix)
        reg_ok = is_real(self.reg_coef) and self.reg_coef > 0
        check(reg_ok, "value_fit_kwargs['reg_coef']", self.reg_coef, "a finite float > 0")


@dataclasses.dataclass(frozen=True)
class LBFGSFit:
    """
    ``value_fit="lbfgs"``: ``torch.optim.LBFGS`` (strong-Wolfe line search) on the value parameters, a fresh optimiser
    per batch (its curvature memory belongs to one regression problem).

    :param max_iter: L-BFGS iterations per batch
    :param mix: weight of the consistency target, in ``(0, 1]``
    """

    name: ClassVar[str] = "lbfgs"
    max_iter: int = 5
    mix: float = 1.0

    def __post_init__(self) -> None:
        _check_mix(self.mix)
        check(is_int(self.max_iter) and self.max_iter >= 1, "value_fit_kwargs['max_iter']", self.max_iter, ">= 1")


#: the settings of the separate value fits by their ``value_fit`` name
VALUE_FITS: dict[str, type[GradFit | BestFit | LBFGSFit]] = {fit.name: fit for fit in (GradFit, BestFit, LBFGSFit)}


def value_parameters(policy: ActorCriticPolicy) -> list[th.nn.Parameter]:
    """:return: the parameters only the value uses (the value MLP and head; a shared feature extractor excluded)"""
    modules: list[th.nn.Module] = [policy.value_net]
    if hasattr(policy.mlp_extractor, "value_net"):
        modules.append(policy.mlp_extractor.value_net)
    if not policy.share_features_extractor:
        modules.append(policy.vf_features_extractor)
    return [p for module in modules for p in module.parameters()]


def split_parameters(policy: ActorCriticPolicy) -> tuple[list[th.nn.Parameter], list[th.nn.Parameter], bool]:
    """
    :return: the value's own parameters (:func:`value_parameters`, which a separate fit moves), all the others (which
        the policy step moves), and whether the values depend on some of the others (a shared feature extractor with
        parameters: then the values change with the policy step)
    """
    value = value_parameters(policy)
    value_ids = {id(p) for p in value}
    others = [p for p in policy.parameters() if id(p) not in value_ids]
    value_modules = [policy.value_net, policy.vf_features_extractor, policy.mlp_extractor]
    actor_only = {id(p) for p in getattr(policy.mlp_extractor, "policy_net", th.nn.Module()).parameters()}
    value_path = {id(p) for module in value_modules for p in module.parameters()} - actor_only
    return value, others, bool(value_path & {id(p) for p in others})


def regression_loss(policy: ActorCriticPolicy, obs: th.Tensor, intended: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """:return: the mean squared error of ``V(obs)`` to ``intended`` ``(T, B)`` over the valid steps of ``mask``"""
    prediction = policy.predict_values(obs).reshape(mask.shape)
    return (mask * (prediction - intended) ** 2).sum() / mask.sum()


def fit_by_gradient(
    policy: ActorCriticPolicy,
    optimizer: th.optim.Optimizer,
    parameters: list[th.nn.Parameter],
    obs: th.Tensor,
    intended: th.Tensor,
    mask: th.Tensor,
    gradient_steps: int,
    algorithm: str = "PCL",
) -> th.Tensor:
    """
    ``gradient_steps`` steps of ``optimizer`` (over ``parameters``, the value's) on :func:`regression_loss`.

    :return: the loss of the last step, a 0-d tensor
    :raises FloatingPointError: on a non-finite loss or gradient, before the step
    """
    loss = th.zeros((), device=intended.device)
    for _ in range(gradient_steps):
        loss = regression_loss(policy, obs, intended, mask)
        optimizer.zero_grad()
        loss.backward()
        check_finite_update(algorithm, "value fit", loss, gradient_norm(parameters))
        optimizer.step()
    return loss.detach()


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


def check_last_layer(policy: ActorCriticPolicy) -> None:
    """:raises ValueError: unless ``policy.value_net`` is a ``torch.nn.Linear(n, 1)`` with a bias (``best_fit``'s layer)"""
    layer = policy.value_net
    if not (isinstance(layer, th.nn.Linear) and layer.out_features == 1 and layer.bias is not None):
        raise ValueError(
            f"value_fit='best_fit' needs a policy whose value_net is a torch.nn.Linear(n, 1) with a bias, got {layer}"
        )


def fit_last_layer(
    policy: ActorCriticPolicy,
    obs: th.Tensor,
    intended: th.Tensor,
    mask: th.Tensor,
    reg_coef: float,
    algorithm: str = "PCL",
    verbose: int = 0,
) -> float:
    """
    Solve :func:`ridge_regression` for ``policy.value_net`` on its inputs at the valid steps, and set the layer to the
    solution (kept when none is finite; the hidden layers are not trained).

    :return: the mean squared error after the fit
    """
    captured: list[th.Tensor] = []
    layer = policy.value_net
    hook = layer.register_forward_hook(lambda _module, inputs, _output: captured.append(inputs[0]))
    try:
        with th.no_grad():
            policy.predict_values(obs)
    finally:
        hook.remove()
    valid = mask.reshape(-1).bool()
    features = captured[-1].detach()[valid]
    targets = intended.reshape(-1)[valid]
    check_finite_update(algorithm, "value fit", targets.sum() + features.sum())
    if features.shape[0] <= features.shape[1] + 1:
        warnings.warn(
            f"value_fit='best_fit' fits {features.shape[1] + 1} parameters on only {features.shape[0]} valid steps: "
            "the least-squares solution interpolates the batch; sample more steps per batch "
            "(batch_size * max_segment_length well above the value network's last hidden size)",
            stacklevel=2,
        )
    solution = ridge_regression(features, targets, reg_coef=reg_coef)
    if solution is not None:
        with th.no_grad():
            layer.weight.copy_(solution[0].reshape(layer.weight.shape))
            layer.bias.copy_(solution[1].reshape(layer.bias.shape))
    elif verbose >= 1:
        print(f"{algorithm} best_fit: no finite least-squares solution, value layer unchanged")
    with th.no_grad():
        return float(((layer(features).reshape(-1) - targets) ** 2).mean())


def fit_by_lbfgs(
    policy: ActorCriticPolicy,
    parameters: list[th.nn.Parameter],
    obs: th.Tensor,
    intended: th.Tensor,
    mask: th.Tensor,
    max_iter: int,
    algorithm: str = "PCL",
) -> float:
    """
    A fresh ``torch.optim.LBFGS`` (strong-Wolfe line search, ``max_iter`` iterations) on :func:`regression_loss` over
    ``parameters``.

    :return: the loss after the fit
    :raises FloatingPointError: on a non-finite loss or gradient at the starting point
    """
    optimizer = th.optim.LBFGS(parameters, lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")
    first = [True]

    def closure() -> th.Tensor:
        optimizer.zero_grad()
        loss = regression_loss(policy, obs, intended, mask)
        loss.backward()
        if first[0]:  # at the starting point, before L-BFGS moves anything
            first[0] = False
            check_finite_update(algorithm, "value fit", loss, gradient_norm(parameters))
        return loss

    optimizer.step(closure)  # type: ignore[no-untyped-call]
    with th.no_grad():
        return float(regression_loss(policy, obs, intended, mask))
