"""
Hyperparameters, over every class: an invalid one is refused when the model is built (a schedule's value when it is
used), by an exception naming it; the arguments a class takes over from its parent are in its own signature.

The saved hyperparameters checked at load are in ``test_save_load.py``.
"""

import inspect
import re
from typing import Any

import pytest
import torch as th
from pcl_testing import ALGOS, FAST, IDS, build
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import PCL, UREX, RecurrentPCL, RecurrentReinforce, RecurrentTrustPCL, RecurrentUREX, Reinforce, TrustPCL
from sb3_pcl.common.path_buffer import PathReplayBuffer

NAN, INF = float("nan"), float("inf")


def cartpole(n_envs: int = 4) -> Any:
    return make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)


# ----------------------------------------------------------------------------------------------
# every class: the argument is named
# ----------------------------------------------------------------------------------------------

COMMON_BAD = [
    ("learning_rate", NAN),
    ("ent_coef", -1.0),
    ("ent_coef", NAN),
    ("ent_coef", "oops"),
    ("max_grad_norm", NAN),
    ("max_grad_norm", -1.0),
    ("max_grad_norm", 0.0),
    ("gamma", 1.5),
    ("gamma", -0.1),
    ("gamma", NAN),
]
OFF_POLICY_BAD = [
    ("gamma", "0.99"),
    ("n_steps", 0),
    ("n_steps", 2.5),
    ("vf_coef", INF),
    ("vf_coef", NAN),
    ("vf_coef", -1.0),
    ("clip_adv", NAN),
    ("clip_adv", 0.0),
    ("target_network_lag", NAN),
    ("target_network_lag", 1.5),
    ("batch_size", 0),
    ("max_segment_length", 0),
    ("value_fit", "newton"),
    ("value_fit_kwargs", {"mix": 0.5}),  # the joint fit has no settings
    ("policy_step", "adam"),
    ("sample_from", "both"),
]
EPISODES_BAD = [
    ("num_samples", 1),
    ("num_samples", NAN),
    ("max_steps", 0),
    ("adam_eps", NAN),
]


def bad_cases() -> list[Any]:
    cases = []
    for algo in ALGOS:
        own = EPISODES_BAD if issubclass(algo, Reinforce) else OFF_POLICY_BAD
        for name, value in COMMON_BAD + own:
            cases.append(pytest.param(algo, name, value, id=f"{algo.__name__}-{name}={value!r}"))
    return cases


@pytest.mark.parametrize("algo, name, value", bad_cases())
def test_invalid_hyperparameters_are_refused_naming_them(algo: type, name: str, value: Any) -> None:
    with pytest.raises((ValueError, TypeError), match=name):
        build(algo, **{name: value})


OFF_POLICY = [PCL, TrustPCL, RecurrentPCL, RecurrentTrustPCL]


@pytest.mark.parametrize("algo", OFF_POLICY, ids=[algo.__name__ for algo in OFF_POLICY])
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch_size": 64, "buffer_size": 10}, "batch_size"),
        ({"replay_buffer_kwargs": {"alpha": -1.0}}, "alpha"),
        ({"replay_buffer_kwargs": {"priority": "foo"}}, "priority"),
        ({"replay_buffer_kwargs": {"eviction": "foo"}}, "eviction"),
    ],
)
def test_invalid_replay_settings_are_refused_naming_them(algo: type, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build(algo, **kwargs)


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
@pytest.mark.parametrize("name, bad", [("ent_coef", -1.0), ("learning_rate", NAN)])
def test_a_schedule_that_leaves_its_range_fails_when_it_is_used(algo: type, name: str, bad: float) -> None:
    model = build(algo, **{name: lambda progress: 1e-3 if progress > 0.5 else bad})
    with pytest.raises(ValueError, match=name):
        model.learn(400)


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_the_old_tau_argument_is_gone(algo: type) -> None:
    """``tau`` was our name of ``ent_coef``: refused, not silently read as SB3's polyak coefficient."""
    with pytest.raises(TypeError, match="tau"):
        build(algo, tau=0.1)


# ----------------------------------------------------------------------------------------------
# the PCL family: the policy step, the value fits and their settings
# ----------------------------------------------------------------------------------------------

TRUST_REGION = {"policy_step": "trust_region", "value_fit": "grad"}


def _trust_region(**policy_step_kwargs: Any) -> dict[str, Any]:
    return {**TRUST_REGION, "policy_step_kwargs": policy_step_kwargs}


def _fit(value_fit: str, **value_fit_kwargs: Any) -> dict[str, Any]:
    return {"value_fit": value_fit, "value_fit_kwargs": value_fit_kwargs}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"policy_step": "sgd"}, "policy_step must be one of ('gradient', 'trust_region')"),
        ({"policy_step": "adam"}, "policy_step must be one of"),  # the old name of the gradient step
        (_trust_region(loss="kl"), "policy_step_kwargs['loss']"),
        (_trust_region(target_kl=0.0), "policy_step_kwargs['target_kl']"),
        (_trust_region(target_kl=-0.01), "policy_step_kwargs['target_kl']"),
        (_trust_region(target_kl=INF), "policy_step_kwargs['target_kl']"),
        (_trust_region(target_kl=NAN), "policy_step_kwargs['target_kl']"),
        (_trust_region(cg_max_steps=0), "policy_step_kwargs['cg_max_steps']"),
        (_trust_region(cg_max_steps=2.5), "policy_step_kwargs['cg_max_steps']"),
        (_trust_region(cg_damping=-0.1), "policy_step_kwargs['cg_damping']"),
        (_trust_region(cg_damping=NAN), "policy_step_kwargs['cg_damping']"),
        (_trust_region(line_search_max_iter=0), "policy_step_kwargs['line_search_max_iter']"),
        (_trust_region(line_search_shrinking_factor=0.0), "policy_step_kwargs['line_search_shrinking_factor']"),
        (_trust_region(line_search_shrinking_factor=1.0), "policy_step_kwargs['line_search_shrinking_factor']"),
        (_fit("best_fit", reg_coef=0.0), "value_fit_kwargs['reg_coef']"),
        (_fit("best_fit", reg_coef=NAN), "value_fit_kwargs['reg_coef']"),
        (_fit("grad", mix=0.0), "value_fit_kwargs['mix']"),
        (_fit("best_fit", mix=1.5), "value_fit_kwargs['mix']"),
        (_fit("lbfgs", mix=NAN), "value_fit_kwargs['mix']"),
        (_fit("grad", learning_rate=0.0), "value_fit_kwargs['learning_rate']"),
        (_fit("grad", gradient_steps=0), "value_fit_kwargs['gradient_steps']"),
        (_fit("grad", steps=3), "value_fit_kwargs"),
        (_fit("lbfgs", max_iter=0), "value_fit_kwargs['max_iter']"),
        ({"value_fit": "newton"}, "value_fit must be one of ('joint', 'grad', 'best_fit', 'lbfgs')"),
        ({"value_fit": None}, "value_fit must be one of"),  # the old spelling of the joint fit
        ({"policy_step": "trust_region"}, "value_fit must be one of"),  # the value needs a separate fit
        ({**TRUST_REGION, "ent_coef": 0.0}, "policy_step_kwargs['loss']='consistency' needs ent_coef"),
    ],
)
def test_invalid_policy_step_and_value_fit_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        PCL("MlpPolicy", "CartPole-v1", **kwargs)


@pytest.mark.parametrize("algo", [PCL, TrustPCL])
@pytest.mark.parametrize(
    "kwargs, argument, key",
    [
        ({"value_fit": "grad", "value_fit_kwargs": {"reg_coef": 1e-3}}, "value_fit_kwargs", "reg_coef"),  # best_fit's
        ({"value_fit": "lbfgs", "value_fit_kwargs": {"gradient_steps": 10}}, "value_fit_kwargs", "gradient_steps"),
        ({"value_fit_kwargs": {"mix": 0.5}}, "value_fit_kwargs", "mix"),  # the joint fit takes no settings
        ({"value_fit": "grad", "value_fit_kwargs": {"value_mix": 0.5}}, "value_fit_kwargs", "value_mix"),  # old name
        ({"policy_step_kwargs": {"target_kl": 0.01}}, "policy_step_kwargs", "target_kl"),  # the gradient step takes none
        (
            {**TRUST_REGION, "policy_step_kwargs": {"trust_region_loss": "surrogate"}},
            "policy_step_kwargs",
            "trust_region_loss",
        ),
        ({"value_fit": "grad", "value_fit_kwargs": [("mix", 0.5)]}, "value_fit_kwargs must be None or a dict", "mix"),
        ({**TRUST_REGION, "policy_step_kwargs": "surrogate"}, "policy_step_kwargs must be None or a dict", "surrogate"),
    ],
)
def test_unknown_settings_of_a_part_are_rejected(algo: type, kwargs: dict[str, Any], argument: str, key: str) -> None:
    with pytest.raises(ValueError, match=re.escape(argument)) as error:
        algo("MlpPolicy", "CartPole-v1", **kwargs)
    assert key in str(error.value)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (TRUST_REGION, "value_fit='grad' is not supported with UnifiedPolicy"),
        ({"policy_step": "trust_region"}, "with policy_step='trust_region'"),  # and the joint fit does not suit the step
    ],
)
def test_unified_policy_rejects_trust_region(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        PCL("UnifiedMlpPolicy", "CartPole-v1", **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_divergence": 0.0}, "max_divergence"),
        ({"max_divergence": -1e-3}, "max_divergence"),
        ({"lambda_smoothing": 1.0}, "lambda_smoothing"),
        ({"lambda_smoothing": -0.1}, "lambda_smoothing"),
        ({"lambda_window": 0}, "lambda_window"),
        ({"lambda_window": 2.5}, "lambda_window"),
        ({"relative_entropy_coef": -1.0}, "relative_entropy_coef"),
    ],
)
def test_invalid_trust_pcl_hyperparameters(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        TrustPCL("MlpPolicy", "CartPole-v1", **kwargs)


class PlainSubclass(PathReplayBuffer):
    """A replay buffer subclass whose batches carry no path history."""


@pytest.mark.parametrize("algo", [RecurrentPCL, RecurrentTrustPCL])
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"value_fit": "grad"}, "value_fit='grad' is not supported by {}"),
        ({"value_fit": "best_fit"}, "value_fit='best_fit' is not supported by {}"),
        (
            {"policy_step": "trust_region", "policy_step_kwargs": {"loss": "surrogate"}, "value_fit": "grad"},
            "policy_step='trust_region' is not supported by {}",
        ),
        ({"replay_buffer_kwargs": {"replay_from_start": True}}, "replay_buffer_kwargs ['replay_from_start']: no longer"),
        ({"replay_buffer_class": PlainSubclass}, "replay_buffer_class must be a RecurrentPathReplayBuffer subclass"),
    ],
)
def test_unsupported_recurrent_combinations_are_rejected(algo: type, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match.format(algo.__name__))):
        algo("MlpPrevActionLstmPolicy", "CartPole-v1", **kwargs)


# ----------------------------------------------------------------------------------------------
# Reinforce and UREX: the message names the value as passed
# ----------------------------------------------------------------------------------------------

#: every numeric argument with its message, for a NaN, an infinite and a string value
NUMERIC_ARGUMENTS = {
    "learning_rate": "learning_rate must be a finite float >= 0 or a schedule",
    "num_samples": r"num_samples must be an integer >= 2 \(the K-sample baseline needs K episodes per start state\)",
    "max_steps": "max_steps must be an integer >= 1",
    "max_grad_norm": "max_grad_norm must be None or a finite float > 0",
    "adam_eps": "adam_eps must be a finite float > 0",
    "stats_window_size": "stats_window_size must be an integer >= 1",
    "verbose": "verbose must be an integer >= 0",
    "seed": r"seed must be None or an integer in \[0, 2\*\*32\)",
}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_samples": 1}, "num_samples must be an integer >= 2"),
        ({"num_samples": 2.0}, "num_samples must be an integer >= 2"),
        ({"max_steps": 0}, "max_steps must be an integer >= 1, got 0"),
        ({"max_steps": True}, "max_steps must be an integer >= 1, got True"),
        ({"max_grad_norm": 0.0}, "max_grad_norm must be None or a finite float > 0, got 0.0"),
        ({"ent_coef": "fast"}, "ent_coef: cannot read the schedule 'fast'"),
        ({"ent_coef": "0.1"}, "ent_coef: cannot read the schedule '0.1'"),
        ({"ent_coef": None}, r"ent_coef must be a finite float >=? 0 or a schedule, got None"),
        ({"learning_rate": -0.1}, "learning_rate must be a finite float >= 0 or a schedule, got -0.1"),
        ({"learning_rate": "lin_0.01"}, "learning_rate must be a finite float >= 0 or a schedule, got 'lin_0.01'"),
        ({"adam_eps": 0.0}, "adam_eps must be a finite float > 0, got 0.0"),
        ({"check_seeding": "yes"}, "check_seeding must be True or False, got 'yes'"),
        ({"seed": -1}, r"seed must be None or an integer in \[0, 2\*\*32\), got -1"),
        ({"stats_window_size": 0}, "stats_window_size must be an integer >= 1, got 0"),
        *[
            ({name: value}, f"{message}, got {value!r}")
            for name, message in NUMERIC_ARGUMENTS.items()
            for value in (NAN, INF, "1")
        ],
    ],
)
@pytest.mark.parametrize("algo", [Reinforce, UREX])
def test_invalid_hyperparameters_are_named_as_passed(algo: type, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}"):
        algo("MlpPolicy", cartpole(), **kwargs)


@pytest.mark.parametrize("value", [-0.1, NAN, INF, -INF])
def test_ent_coef_must_be_finite_and_non_negative(value: float) -> None:
    with pytest.raises(ValueError, match=rf"^ent_coef must be a finite float >= 0 or a schedule, got {value!r}$"):
        Reinforce("MlpPolicy", cartpole(), ent_coef=value)
    with pytest.raises(ValueError, match=rf"^ent_coef must be a finite float > 0 or a schedule, got {value!r}$"):
        UREX("MlpPolicy", cartpole(), ent_coef=value)


def test_urex_needs_positive_ent_coef() -> None:
    with pytest.raises(ValueError, match=r"^ent_coef must be a finite float > 0 or a schedule, got 0.0$"):
        UREX("MlpPolicy", cartpole(), ent_coef=0.0)
    assert Reinforce("MlpPolicy", cartpole(), ent_coef=0.0).ent_coef == 0.0
    # A schedule reaching 0 passes the constructor; training refuses the value when it uses it.
    model = UREX("MlpPolicy", cartpole(), num_samples=2, max_steps=5, ent_coef=lambda progress: 0.1 * (progress > 0.5), seed=0)
    message = r"^ent_coef must be a finite float > 0 \(the value of its schedule at progress_remaining=0\.[0-9]+\), got 0\.0$"
    with pytest.raises(ValueError, match=message):
        model.learn(400, log_interval=None)
    assert model._n_updates > 0 and model.num_timesteps >= 200


@pytest.mark.parametrize("algo", [Reinforce, UREX])
@pytest.mark.parametrize(("name", "bad"), [("ent_coef", -1.0), ("ent_coef", NAN), ("ent_coef", "x"), ("learning_rate", NAN)])
def test_schedule_values_are_checked_when_used(algo: type, name: str, bad: Any) -> None:
    """A schedule that leaves the allowed range half-way raises, naming the argument, before the bad value is used."""
    good = 0.1 if name == "ent_coef" else 1e-3
    model = algo("MlpPolicy", cartpole(), num_samples=2, max_steps=5, seed=0, **{name: lambda p: good if p > 0.5 else bad})
    bound = "> 0" if name == "ent_coef" and algo is UREX else ">= 0"
    message = rf"^{name} must be a finite float {bound} \(the value of its schedule at progress_remaining=0\.[0-9]+\), got "
    with pytest.raises(ValueError, match=message + re.escape(repr(bad))):
        model.learn(400, log_interval=None)
    assert model._n_updates > 0 and all(th.isfinite(p).all() for p in model.policy.parameters())


@pytest.mark.parametrize("algo", [Reinforce, UREX])
def test_the_old_shared_curriculum_argument_is_gone(algo: type) -> None:
    with pytest.raises(TypeError, match="shared_curriculum"):
        algo("MlpPolicy", cartpole(), shared_curriculum=True)


# ----------------------------------------------------------------------------------------------
# signatures: a subclass lists its parent's arguments (help(), IDEs, a typo's message), as DDPG repeats TD3's
# ----------------------------------------------------------------------------------------------


def test_trust_pcl_repeats_pcl_s_signature_and_forwards_every_argument() -> None:
    pcl = inspect.signature(PCL.__init__).parameters
    trust = inspect.signature(TrustPCL.__init__).parameters
    own = {"max_divergence", "lambda_smoothing", "lambda_window", "lambda_fallback"}
    changed_defaults = {"learning_rate", "ent_coef", "target_network_lag"}  # learning rate: a constant 3e-3
    assert set(trust) == set(pcl) | own and not any(p.kind is p.VAR_KEYWORD for p in trust.values())
    assert {name for name in pcl if trust[name].default != pcl[name].default} == changed_defaults
    assert all(trust[name].annotation == pcl[name].annotation for name in pcl)
    with pytest.raises(TypeError, match=r"TrustPCL\.__init__"):
        TrustPCL("MlpPolicy", "CartPole-v1", max_divergense=0.01)
    # every other PCL argument reaches the model unchanged
    forwarded = {
        "n_steps": 3,
        "vf_coef": 0.7,
        "value_fit": "grad",
        "value_fit_kwargs": {"mix": 0.5},
        "sample_from": "target",
        "use_target_values": True,
        "relative_entropy_coef": 0.2,
        "start_windows": False,
        "clip_adv": 2.0,
    }
    model = TrustPCL("MlpPolicy", "CartPole-v1", **{**FAST, "learning_starts": 10_000, **forwarded})
    for name, value in forwarded.items():
        assert getattr(model, name) == value, name
    assert model._value_fit_settings.mix == 0.5


def test_urex_repeats_reinforce_s_signature_with_its_own_ent_coef() -> None:
    parameters = inspect.signature(UREX.__init__).parameters
    reinforce = inspect.signature(Reinforce.__init__).parameters
    assert list(parameters) == list(reinforce) and not any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    assert {name for name in reinforce if parameters[name].default != reinforce[name].default} == {"ent_coef"}
    assert parameters["ent_coef"].default == 0.1 and reinforce["ent_coef"].default == 0.01
    # everything else is Reinforce's, forwarded
    model = UREX("MlpPolicy", cartpole(), num_samples=4, max_steps=7, max_grad_norm=None, adam_eps=1e-5, check_seeding=False)
    assert (model.num_samples, model.max_steps, model.max_grad_norm, model.adam_eps) == (4, 7, None, 1e-5)
    assert model.ent_coef == 0.1 and not model.check_seeding and model.policy.optimizer.defaults["eps"] == 1e-5
    with pytest.raises(TypeError, match=r"UREX\.__init__\(\) got an unexpected keyword argument 'not_an_argument'"):
        UREX("MlpPolicy", cartpole(), not_an_argument=1)


@pytest.mark.parametrize(("recurrent", "feed_forward"), [(RecurrentReinforce, Reinforce), (RecurrentUREX, UREX)])
def test_recurrent_episode_classes_repeat_the_feed_forward_signature(recurrent: type, feed_forward: type) -> None:
    parameters = inspect.signature(recurrent.__init__).parameters
    expected = inspect.signature(feed_forward.__init__).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    assert [(p.name, p.default) for p in parameters.values()] == [(p.name, p.default) for p in expected.values()]
    with pytest.raises(TypeError, match=rf"{recurrent.__name__}\.__init__\(\) got an unexpected keyword argument 'typo'"):
        recurrent("MlpPrevActionLstmPolicy", make_vec_env("sb3_pcl/Copy-v0", n_envs=4, seed=0), typo=1)
