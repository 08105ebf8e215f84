"""
How PCL moves its policy on each batch, when not by the default step.

The default, ``policy_step="gradient"``, is one step of the policy's optimiser (Adam by default, ``learning_rate``) on
the loss, the global gradient norm clipped to ``max_grad_norm``: :meth:`sb3_pcl.PCL.train` takes it inline. The other
steps are in :data:`POLICY_STEPS`, with their settings in ``policy_step_kwargs``:

- ``"trust_region"`` (:class:`TrustRegionStep`): the original code's ``trust_region_p``: conjugate gradient on the
  Fisher matrix of the mean ``KL(pi_old || pi)`` over the batch's valid states, a step whose quadratic KL estimate
  is ``target_kl``, then a backtracking line search (:func:`~sb3_pcl.pcl.trust_region.trust_region_step`).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Protocol

import torch as th

from sb3_pcl.common.consistency import Consistency, pcl_policy_loss
from sb3_pcl.common.path_buffer import PathBatch
from sb3_pcl.common.statistics import state_kl
from sb3_pcl.common.validation import check, check_finite_update, is_int, is_real
from sb3_pcl.pcl.trust_region import squared_consistency_objective, trust_region_step
from sb3_pcl.pcl.value_fits import PCLModel, ValueFit


class PolicyStepModel(PCLModel, Protocol):
    """What a policy step reads of the :class:`~sb3_pcl.PCL` model, beyond what a value fit reads."""

    @property
    def value_fit(self) -> str: ...

    @property
    def ent_coef(self) -> Any: ...

    @property
    def relative_entropy_coef(self) -> float: ...

    @property
    def clip_adv(self) -> float | None: ...

    @property
    def _value_fit(self) -> ValueFit | None: ...

    def _valid_observations(self, batch: PathBatch) -> Any: ...


TRUST_REGION_LOSSES = ("consistency", "surrogate")


class PolicyStep:
    """Base class of the policy steps; a subclass declares its settings as keyword arguments of ``__init__``."""

    #: the name ``PCL(policy_step=...)`` selects it by
    name: ClassVar[str] = ""
    model: PolicyStepModel

    def setup(self, model: PolicyStepModel) -> None:
        """
        Attach to a model whose policy and value fit exist; check that they suit the step.

        :param model: the PCL model
        """
        self.model = model

    def check_model(self, model: PolicyStepModel) -> None:
        """
        Raise a ``ValueError`` when the model's other hyperparameters do not suit the step (called at construction).

        :param model: the PCL model (hyperparameters set, policy not yet built)
        """

    def step(
        self, batch: PathBatch, loss: th.Tensor, consistency: Consistency, ent_coef: float
    ) -> dict[str, float | th.Tensor]:
        """
        Move the policy on one batch.

        :param batch: the path segments
        :param loss: the policy surrogate at the current parameters (a separate value fit follows the step)
        :param consistency: the consistency at the current parameters
        :param ent_coef: the current entropy coefficient
        :return: statistics to log, ``grad_norm`` included (floats, or 0-d tensors that the model moves to the
            host once per training iteration)
        """
        raise NotImplementedError


class TrustRegionStep(PolicyStep):
    """
    ``policy_step="trust_region"``: one natural-gradient step of the policy parameters per batch.

    The loss is re-evaluated on the batch at every trial point; the divergence is the mean ``KL(pi_old || pi)``
    over the batch's valid steps. ``learning_rate`` and ``max_grad_norm`` do not apply. It needs a separate value
    fit (the step moves only the policy parameters).

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

    name = "trust_region"

    def __init__(
        self,
        loss: str = "consistency",
        target_kl: float = 0.01,
        cg_max_steps: int = 10,
        cg_damping: float = 0.1,
        line_search_max_iter: int = 10,
        line_search_shrinking_factor: float = 0.5,
    ):
        key = "policy_step_kwargs[{!r}]".format
        check(loss in TRUST_REGION_LOSSES, key("loss"), loss, f"one of {TRUST_REGION_LOSSES}")
        check(is_real(target_kl) and target_kl > 0, key("target_kl"), target_kl, "a finite float > 0")
        check(is_int(cg_max_steps) and cg_max_steps >= 1, key("cg_max_steps"), cg_max_steps, "an integer >= 1")
        check(is_real(cg_damping) and cg_damping >= 0, key("cg_damping"), cg_damping, "a finite float >= 0")
        check(
            is_int(line_search_max_iter) and line_search_max_iter >= 1,
            key("line_search_max_iter"),
            line_search_max_iter,
            "an integer >= 1",
        )
        check(
            is_real(line_search_shrinking_factor) and 0.0 < line_search_shrinking_factor < 1.0,
            key("line_search_shrinking_factor"),
            line_search_shrinking_factor,
            "in (0, 1)",
        )
        self.loss = loss
        self.target_kl = target_kl
        self.cg_max_steps = cg_max_steps
        self.cg_damping = cg_damping
        self.line_search_max_iter = line_search_max_iter
        self.line_search_shrinking_factor = line_search_shrinking_factor

    def check_model(self, model: PolicyStepModel) -> None:
        if model.value_fit == "joint":
            raise ValueError(
                "value_fit must be one of 'grad', 'best_fit', 'lbfgs' with policy_step='trust_region' "
                "(the natural-gradient step moves only the policy parameters), got 'joint'"
            )
        no_entropy = not callable(model.ent_coef) and model.ent_coef == 0 and model.relative_entropy_coef == 0
        if self.loss == "consistency" and no_entropy:
            raise ValueError(
                "policy_step_kwargs['loss']='consistency' needs ent_coef + relative_entropy_coef > 0 (with both 0 the "
                "squared consistency does not depend on the policy); use policy_step_kwargs={'loss': 'surrogate'}"
            )

    def step(
        self, batch: PathBatch, loss: th.Tensor, consistency: Consistency, ent_coef: float
    ) -> dict[str, float | th.Tensor]:
        model = self.model
        policy = model.policy
        value_fit = model._value_fit
        assert value_fit is not None, "a separate value fit (check_model)"
        valid_obs = model._valid_observations(batch)
        with th.no_grad():  # pi_old, a constant; copied because the policy reuses its distribution object
            old_distribution = copy.copy(policy.get_distribution(valid_obs))
        old_residual = consistency.residual.detach()

        def loss_fn() -> th.Tensor:
            values, log_prob, final_values, _ = model._evaluate(policy, batch)
            current = model._consistency(batch, values, log_prob, final_values, ent_coef)
            if self.loss == "consistency":
                return squared_consistency_objective(current, model.clip_adv)
            return pcl_policy_loss(current._replace(residual=old_residual), model.clip_adv)

        def kl_fn() -> th.Tensor:
            return state_kl(old_distribution, policy.get_distribution(valid_obs)).mean()

        result = trust_region_step(
            loss_fn,
            kl_fn,
            value_fit.policy_parameters(),
            max_kl=self.target_kl,
            cg_max_steps=self.cg_max_steps,
            cg_damping=self.cg_damping,
            line_search_max_iter=self.line_search_max_iter,
            line_search_shrinking_factor=self.line_search_shrinking_factor,
        )
        # trust_region_step leaves the parameters unchanged on a non-finite loss or gradient: say so
        check_finite_update(type(model).__name__, "trust-region step", th.tensor(result.loss_before), result.grad_norm)
        if not result.accepted and model.verbose >= 2:
            print(f"PCL trust region: no step accepted after {result.n_trials} trials, policy unchanged")
        return {
            "grad_norm": result.grad_norm,
            "kl": result.kl,
            "line_search_success": float(result.accepted),
            "step_size": result.step_size,
            "step_norm": result.step_norm,
            "line_search_trials": float(result.n_trials),
            "trust_region_improvement": result.loss_before - result.loss_after,
        }


#: the policy steps other than the default by their ``policy_step`` name
POLICY_STEPS: dict[str, type[PolicyStep]] = {step.name: step for step in (TrustRegionStep,)}
