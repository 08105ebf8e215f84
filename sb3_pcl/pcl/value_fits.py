"""
How PCL fits its value function separately, after each policy step (the original code's ``value_opt``).

The default, ``value_fit="joint"``, fits the value with the policy: the value surrogate is added to the policy loss with
weight ``vf_coef`` and both move in one optimiser step (the PCL paper), in :meth:`sb3_pcl.PCL.train` itself. The other
fits are in :data:`VALUE_FITS`, with their settings in ``value_fit_kwargs``:

- ``"grad"``, ``"best_fit"``, ``"lbfgs"``: after the policy step, the value regresses toward
  ``y_t = mix * (V(s_t) + C(t)) + (1 - mix) * V_old(s_t)`` on the batch's valid steps (the original code's
  ``value_opt``; ``V(s_t) + C(t)`` is :func:`~sb3_pcl.common.consistency.value_targets`):
  :class:`GradValueFit` takes a few optimiser steps, :class:`BestFitValueFit` solves ridge least squares for the
  last linear layer, :class:`LBFGSValueFit` runs L-BFGS.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Protocol

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import Schedule

from sb3_pcl.common.consistency import Consistency, value_targets
from sb3_pcl.common.dict_obs import merge_leading
from sb3_pcl.common.path_buffer import PathBatch
from sb3_pcl.common.validation import check, check_finite_update, gradient_norm, is_int, is_real


class PCLModel(Protocol):
    """What the value fits and the policy steps read of the :class:`~sb3_pcl.PCL` model they are attached to."""

    @property
    def policy(self) -> ActorCriticPolicy: ...

    @property
    def verbose(self) -> int: ...

    @property
    def supports_separate_value(self) -> bool: ...

    @property
    def lr_schedule(self) -> Schedule: ...

    def _evaluate(self, policy: ActorCriticPolicy, batch: PathBatch) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]: ...

    def _evaluate_after_policy_step(self, batch: PathBatch) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]: ...

    def _consistency(
        self, batch: PathBatch, values: th.Tensor, log_prob: th.Tensor, final_values: th.Tensor, ent_coef: float
    ) -> Consistency: ...


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


class ValueFit:
    """
    Base class of the value fits; a subclass declares its settings as keyword arguments of ``__init__``.

    The fit is built from ``value_fit_kwargs`` (which checks them) and attached to a model with :meth:`setup`.
    """

    #: the name ``PCL(value_fit=...)`` selects it by
    name: ClassVar[str] = ""
    model: PCLModel

    def setup(self, model: PCLModel) -> None:
        """
        Attach to a model whose policy exists; check that the policy suits the fit.

        :param model: the PCL model
        """
        self.model = model

    def value_parameters(self) -> list[th.nn.Parameter]:
        """:return: the parameters only the value uses (the value MLP and head; shared layers excluded)"""
        policy = self.model.policy
        modules: list[th.nn.Module] = [policy.value_net]
        if hasattr(policy.mlp_extractor, "value_net"):
            modules.append(policy.mlp_extractor.value_net)
        if not policy.share_features_extractor:
            modules.append(policy.vf_features_extractor)
        return [p for module in modules for p in module.parameters()]

    def policy_parameters(self) -> list[th.nn.Parameter]:
        """:return: the parameters the policy step moves (all but the value's)"""
        value_ids = {id(p) for p in self.value_parameters()}
        return [p for p in self.model.policy.parameters() if id(p) not in value_ids]

    @property
    def optimizer(self) -> th.optim.Optimizer | None:
        """:return: the fit's optimiser when it keeps state between batches (saved with the model), else ``None``"""
        return None

    def fit(self, batch: PathBatch, ent_coef: float) -> float | th.Tensor:
        """
        Fit the value on one batch, after the policy step.

        :param batch: the path segments
        :param ent_coef: the current entropy coefficient
        :return: the mean squared regression error after the fit
        """
        raise NotImplementedError


class _RegressionFit(ValueFit):
    """
    A separate fit toward ``mix * (V + C) + (1 - mix) * V_old``.

    :param mix: weight of the consistency target, in ``(0, 1]``
    """

    def __init__(self, mix: float = 1.0):
        check(is_real(mix) and 0.0 < mix <= 1.0, "value_fit_kwargs['mix']", mix, "in (0, 1]")
        self.mix = mix

    def setup(self, model: PCLModel) -> None:
        """
        Attach to the model, and rebuild its policy's optimiser on :meth:`policy_parameters`: the policy step then leaves
        the value parameters to this fit.

        :param model: the PCL model
        """
        super().setup(model)
        if not model.supports_separate_value:
            raise ValueError(
                f"value_fit={self.name!r} is not supported with {type(model.policy).__name__} (its value has no separate "
                "parameters): use value_fit='joint'"
            )
        optimizer_class: Any = model.policy.optimizer_class
        model.policy.optimizer = optimizer_class(
            self.policy_parameters(), lr=model.lr_schedule(1), **model.policy.optimizer_kwargs
        )

    def targets(self, batch: PathBatch, ent_coef: float) -> tuple[th.Tensor, th.Tensor]:
        """
        :param batch: the path segments
        :param ent_coef: the current entropy coefficient
        :return: the flat observations ``(T * B, ...)`` and the regression targets ``(T, B)`` (constants)
        """
        model = self.model
        with th.no_grad():
            values, log_prob, final_values, _ = model._evaluate_after_policy_step(batch)
            targets = value_targets(model._consistency(batch, values, log_prob, final_values, ent_coef))
            intended = self.mix * targets + (1.0 - self.mix) * values
        n_steps, n_paths = batch.mask.shape
        return merge_leading(batch.observations, n_steps * n_paths), intended

    def regression_loss(self, obs: th.Tensor, intended: th.Tensor, mask: th.Tensor) -> th.Tensor:
        """:return: the mean squared error of the current value to ``intended`` over the valid steps of ``mask``"""
        prediction = self.model.policy.predict_values(obs).reshape(mask.shape)
        return (mask * (prediction - intended) ** 2).sum() / mask.sum()


class GradValueFit(_RegressionFit):
    """
    ``value_fit="grad"``: ``gradient_steps`` steps of the policy's optimiser class on the value parameters per batch.

    :param learning_rate: the value optimiser's learning rate
    :param gradient_steps: optimiser steps per batch
    :param mix: weight of the consistency target (see :class:`_RegressionFit`)
    """

    name = "grad"

    def __init__(self, learning_rate: float = 1e-3, gradient_steps: int = 5, mix: float = 1.0):
        super().__init__(mix)
        check(is_real(learning_rate) and learning_rate > 0, "value_fit_kwargs['learning_rate']", learning_rate, "> 0")
        check(is_int(gradient_steps) and gradient_steps >= 1, "value_fit_kwargs['gradient_steps']", gradient_steps, ">= 1")
        self.learning_rate = learning_rate
        self.gradient_steps = gradient_steps
        self._optimizer: th.optim.Optimizer | None = None

    def setup(self, model: PCLModel) -> None:
        super().setup(model)
        optimizer_class: Any = model.policy.optimizer_class
        self._parameters = self.value_parameters()
        self._optimizer = optimizer_class(self._parameters, lr=self.learning_rate, **model.policy.optimizer_kwargs)

    @property
    def optimizer(self) -> th.optim.Optimizer | None:
        return self._optimizer

    def fit(self, batch: PathBatch, ent_coef: float) -> float | th.Tensor:
        assert self._optimizer is not None
        obs, intended = self.targets(batch, ent_coef)
        loss = th.zeros((), device=intended.device)
        for _ in range(self.gradient_steps):
            loss = self.regression_loss(obs, intended, batch.mask)
            self._optimizer.zero_grad()
            loss.backward()
            grad_norm = gradient_norm(self._parameters)
            check_finite_update(type(self.model).__name__, "value fit", loss, grad_norm)
            self._optimizer.step()
        return loss.detach()  # moved to the host with the iteration's other statistics


class BestFitValueFit(_RegressionFit):
    """
    ``value_fit="best_fit"``: ridge least squares for the weight and bias of the value's last linear layer.

    ``[w; b]`` solves ``(X^T X + reg_coef I) [w; b] = X^T y`` with ``X = [features, 1]``, the features being the
    input of ``policy.value_net`` (:func:`ridge_regression`); the hidden layers are not
    trained. When no finite solution exists the layer is kept.

    :param reg_coef: the ridge coefficient ``rho > 0``
    :param mix: weight of the consistency target (see :class:`_RegressionFit`)
    """

    name = "best_fit"

    def __init__(self, reg_coef: float = 1e-5, mix: float = 1.0):
        super().__init__(mix)
        check(is_real(reg_coef) and reg_coef > 0, "value_fit_kwargs['reg_coef']", reg_coef, "a finite float > 0")
        self.reg_coef = reg_coef

    def setup(self, model: PCLModel) -> None:
        super().setup(model)
        layer = model.policy.value_net
        if not (isinstance(layer, th.nn.Linear) and layer.out_features == 1 and layer.bias is not None):
            raise ValueError(
                f"value_fit='best_fit' needs a policy whose value_net is a torch.nn.Linear(n, 1) with a bias, got {layer}"
            )

    def _features(self, obs: th.Tensor) -> th.Tensor:
        """:return: the input of ``policy.value_net`` for each observation, ``(N, n_features)``, without gradient"""
        captured: list[th.Tensor] = []
        policy = self.model.policy
        hook = policy.value_net.register_forward_hook(lambda _module, inputs, _output: captured.append(inputs[0]))
        try:
            with th.no_grad():
                policy.predict_values(obs)
        finally:
            hook.remove()
        return captured[-1].detach()

    def fit(self, batch: PathBatch, ent_coef: float) -> float:
        obs, intended = self.targets(batch, ent_coef)
        valid = batch.mask.reshape(-1).bool()
        features = self._features(obs)[valid]
        targets = intended.reshape(-1)[valid]
        check_finite_update(type(self.model).__name__, "value fit", targets.sum() + features.sum())
        if features.shape[0] <= features.shape[1] + 1:
            warnings.warn(
                f"value_fit='best_fit' fits {features.shape[1] + 1} parameters on only {features.shape[0]} valid steps: "
                "the least-squares solution interpolates the batch; sample more steps per batch "
                "(batch_size * max_segment_length well above the value network's last hidden size)",
                stacklevel=2,
            )
        solution = ridge_regression(features, targets, reg_coef=self.reg_coef)
        layer = self.model.policy.value_net
        if solution is not None:
            with th.no_grad():
                layer.weight.copy_(solution[0].reshape(layer.weight.shape))
                layer.bias.copy_(solution[1].reshape(layer.bias.shape))
        elif self.model.verbose >= 1:
            print("PCL best_fit: no finite least-squares solution, value layer unchanged")
        with th.no_grad():
            return float(((layer(features).reshape(-1) - targets) ** 2).mean())


class LBFGSValueFit(_RegressionFit):
    """
    ``value_fit="lbfgs"``: ``torch.optim.LBFGS`` (strong-Wolfe line search) on the value parameters.

    A fresh optimiser serves each batch: its curvature memory belongs to one regression problem.

    :param max_iter: L-BFGS iterations per batch
    :param mix: weight of the consistency target (see :class:`_RegressionFit`)
    """

    name = "lbfgs"

    def __init__(self, max_iter: int = 5, mix: float = 1.0):
        super().__init__(mix)
        check(is_int(max_iter) and max_iter >= 1, "value_fit_kwargs['max_iter']", max_iter, ">= 1")
        self.max_iter = max_iter

    def fit(self, batch: PathBatch, ent_coef: float) -> float:
        obs, intended = self.targets(batch, ent_coef)
        parameters = self.value_parameters()
        optimizer = th.optim.LBFGS(parameters, lr=1.0, max_iter=self.max_iter, line_search_fn="strong_wolfe")
        first = [True]

        def closure() -> th.Tensor:
            optimizer.zero_grad()
            loss = self.regression_loss(obs, intended, batch.mask)
            loss.backward()
            if first[0]:  # at the starting point, before L-BFGS moves anything
                first[0] = False
                grad_norm = gradient_norm(parameters)
                check_finite_update(type(self.model).__name__, "value fit", loss, grad_norm)
            return loss

        optimizer.step(closure)  # type: ignore[no-untyped-call]
        with th.no_grad():
            return float(self.regression_loss(obs, intended, batch.mask))


#: the value fits by their ``value_fit`` name
VALUE_FITS: dict[str, type[ValueFit]] = {fit.name: fit for fit in (GradValueFit, BestFitValueFit, LBFGSValueFit)}
