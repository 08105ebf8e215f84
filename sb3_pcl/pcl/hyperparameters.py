"""
PCL's hyperparameters: their checks (:func:`check_hyperparameters`) and the settings of the update options they select
(:func:`build_update_options`).
"""

from typing import Any

from sb3_pcl.common.validation import build_part, check, is_int, is_real
from sb3_pcl.pcl.actor import SAMPLE_FROM
from sb3_pcl.pcl.trust_region import TrustRegion
from sb3_pcl.pcl.value_fits import VALUE_FITS, BestFit, GradFit, LBFGSFit


def check_hyperparameters(model: Any) -> None:
    """
    Raise a ``ValueError`` naming the first invalid hyperparameter of a :class:`~sb3_pcl.PCL` model (called at
    construction and at load, by its ``_check_hyperparameters``).

    :param model: the model, its hyperparameters set (its policy need not be built)
    """

    def non_negative(name: str, value: Any) -> None:
        check(is_real(value) and value >= 0, name, value, "a finite float >= 0")

    def none_or_positive(name: str, value: Any) -> None:
        check(value is None or (is_real(value) and value > 0), name, value, "None or a finite float > 0")

    check(is_int(model.n_steps) and model.n_steps >= 1, "n_steps", model.n_steps, "an integer >= 1")
    check(is_real(model.gamma) and 0.0 <= model.gamma <= 1.0, "gamma", model.gamma, "in [0, 1]")
    # >= 0: rl-zoo3's enjoy loads models with a learning rate of 0
    lr_ok = callable(model.learning_rate) or (is_real(model.learning_rate) and model.learning_rate >= 0)
    check(lr_ok, "learning_rate", model.learning_rate, "a finite float >= 0 (or a schedule)")
    ent_ok = callable(model.ent_coef) or (is_real(model.ent_coef) and model.ent_coef >= 0)
    check(ent_ok, "ent_coef", model.ent_coef, "a finite float >= 0 (or a schedule)")
    check(is_int(model.batch_size) and model.batch_size >= 1, "batch_size", model.batch_size, "an integer >= 1")
    check(is_int(model.buffer_size) and model.buffer_size >= 1, "buffer_size", model.buffer_size, "an integer >= 1")
    check(model.batch_size <= model.buffer_size, "batch_size", model.batch_size, f"<= buffer_size ({model.buffer_size})")
    check(is_int(model.learning_starts) and model.learning_starts >= 0, "learning_starts", model.learning_starts, ">= 0")
    check(
        model.max_segment_length is None or (is_int(model.max_segment_length) and model.max_segment_length >= 1),
        "max_segment_length",
        model.max_segment_length,
        "None or an integer >= 1",
    )
    check(is_int(model.gradient_steps) and model.gradient_steps >= -1, "gradient_steps", model.gradient_steps, ">= -1")
    non_negative("vf_coef", model.vf_coef)
    none_or_positive("clip_adv", model.clip_adv)
    none_or_positive("max_grad_norm", model.max_grad_norm)
    non_negative("relative_entropy_coef", model.relative_entropy_coef)
    check(model.sample_from in SAMPLE_FROM, "sample_from", model.sample_from, f"one of {SAMPLE_FROM}")
    for name in ("clip_actions", "use_policy_at_warmup"):
        check(isinstance(getattr(model, name), bool), name, getattr(model, name), "True or False")
    check(
        model.min_batch_transitions is None or (is_int(model.min_batch_transitions) and model.min_batch_transitions >= 1),
        "min_batch_transitions",
        model.min_batch_transitions,
        "None or an integer >= 1",
    )
    policy_step = build_update_options(model)[1]
    if policy_step is not None:
        policy_step.check_model(model.value_fit, model.ent_coef, model.relative_entropy_coef)


def build_update_options(model: Any) -> "tuple[GradFit | BestFit | LBFGSFit | None, TrustRegion | None]":
    """
    :param model: a :class:`~sb3_pcl.PCL` model, its hyperparameters set
    :return: the settings of the separate value fit and of the trust-region step its arguments select, checked, or
        ``None`` for the defaults that :meth:`sb3_pcl.PCL.train` takes itself (the joint value fit, the gradient step)
    """
    value_fit: GradFit | BestFit | LBFGSFit | None = None
    policy_step: TrustRegion | None = None
    if model.value_fit == "joint":
        check(not model.value_fit_kwargs, "value_fit_kwargs", model.value_fit_kwargs, "None or {} with value_fit='joint'")
    else:
        names = ("joint", *VALUE_FITS)
        check(isinstance(model.value_fit, str) and model.value_fit in names, "value_fit", model.value_fit, f"one of {names}")
        value_fit = build_part("value_fit", VALUE_FITS, model.value_fit, model.value_fit_kwargs)
    if model.policy_step == "gradient":
        check(
            not model.policy_step_kwargs,
            "policy_step_kwargs",
            model.policy_step_kwargs,
            "None or {} with policy_step='gradient' (one step of the policy's optimiser has no settings)",
        )
    else:
        names = ("gradient", TrustRegion.name)
        check(
            isinstance(model.policy_step, str) and model.policy_step in names,
            "policy_step",
            model.policy_step,
            f"one of {names}",
        )
        policy_step = build_part("policy_step", {TrustRegion.name: TrustRegion}, model.policy_step, model.policy_step_kwargs)
    return value_fit, policy_step
