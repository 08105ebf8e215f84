"""
Unified PCL: one network, ``pi = softmax(logits)``, ``V(s) = (ent_coef + lambda) * logsumexp(logits)``.

For ``MultiDiscrete`` actions ``pi`` is a product of categoricals and
``V(s) = (ent_coef + lambda) * sum_k logsumexp(l_k)``; ``UnifiedMlpPolicy`` is the feed-forward policy (PCL, TrustPCL),
``UnifiedMlpLstmPolicy`` the recurrent one (RecurrentPCL, RecurrentTrustPCL).
"""

import re

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from pcl_testing import FAST

from sb3_pcl import PCL, RecurrentPCL, RecurrentTrustPCL, TrustPCL
from sb3_pcl.pcl.consistency import pcl_value_loss
from sb3_pcl.pcl.policies import UnifiedPolicy, UnifiedValue
from sb3_pcl.recurrent_pcl.policies import UnifiedLstmPolicy

th.set_num_threads(1)


def np_logsumexp(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=-1, keepdims=True)
    return (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))[..., 0]


def raw_logits(policy: UnifiedPolicy, obs: th.Tensor) -> np.ndarray:
    """The policy MLP's logits, recomputed layer by layer (``distribution.logits`` are normalised: logsumexp 0)."""
    with th.no_grad():
        return policy.action_net(policy.mlp_extractor.forward_actor(policy.extract_features(obs))).numpy()


def test_unified_lstm_refuses_a_critic_lstm() -> None:
    with pytest.raises(ValueError, match="enable_critic_lstm must be False"):
        UnifiedLstmPolicy(spaces.Discrete(3), spaces.Discrete(4), lambda _: 1e-3, enable_critic_lstm=True)


@pytest.fixture
def model() -> PCL:
    model = PCL("UnifiedMlpPolicy", "CartPole-v1", ent_coef=0.05, relative_entropy_coef=0.02, seed=0, **FAST)
    model.learn(200)
    return model


def sample_obs(model: PCL, n: int = 8) -> th.Tensor:
    return th.as_tensor(np.stack([model.observation_space.sample() for _ in range(n)]))


def test_value_is_temperature_times_logsumexp(model: PCL) -> None:
    policy = model.policy
    assert isinstance(policy, UnifiedPolicy)
    assert policy.temperature == pytest.approx(0.05 + 0.02)
    assert model.policy_target.temperature == policy.temperature  # type: ignore[attr-defined]
    obs = sample_obs(model)
    logits = raw_logits(policy, obs)
    with th.no_grad():
        values = policy.predict_values(obs).numpy()[:, 0]
        normalised = policy.get_distribution(obs).distribution.logits.numpy()  # type: ignore[union-attr]
        forward_values = policy(obs)[1].numpy()[:, 0]
        evaluated = policy.evaluate_actions(obs, th.zeros(len(obs), dtype=th.long))[0].numpy()[:, 0]
    expected = 0.07 * np_logsumexp(logits)
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(forward_values, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(evaluated, expected, rtol=1e-5, atol=1e-6)
    # pi = softmax of the same logits
    np.testing.assert_allclose(normalised, logits - np_logsumexp(logits)[:, None], rtol=1e-5, atol=1e-5)


def test_trains_and_value_gradient_reaches_policy_mlp() -> None:
    model = PCL("UnifiedMlpPolicy", "CartPole-v1", seed=1, **FAST)
    before = model.policy.action_net.weight.detach().clone()
    value_head = model.policy.value_net.weight.detach().clone()
    model.learn(300)
    assert model._n_updates > 0
    assert not th.allclose(model.policy.action_net.weight, before)
    assert th.equal(model.policy.value_net.weight, value_head)  # unused value head

    batch = model.replay_buffer.sample(4)
    values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
    model.policy.zero_grad(set_to_none=True)
    pcl_value_loss(model._consistency(batch, values, log_prob, final_values, 0.01), None).backward()
    for layer in (model.policy.action_net, model.policy.mlp_extractor.policy_net[0]):
        assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    assert model.policy.value_net.weight.grad is None


@pytest.mark.parametrize("algo, policy", [(PCL, "UnifiedMlpPolicy"), (RecurrentPCL, "UnifiedMlpLstmPolicy")])
def test_box_action_space_raises(algo: type[PCL], policy: str) -> None:
    with pytest.raises(ValueError, match=r"Discrete and MultiDiscrete action spaces, got Box\(-2\.0, 2\.0, \(1,\)"):
        algo(policy, "Pendulum-v1", **FAST)


def test_save_load_round_trip(model: PCL, tmp_path) -> None:
    obs = sample_obs(model)
    model.save(tmp_path / "unified")
    loaded = PCL.load(tmp_path / "unified")
    assert isinstance(loaded.policy, UnifiedPolicy)
    assert loaded.policy.temperature == model.policy.temperature  # type: ignore[attr-defined]
    with th.no_grad():
        np.testing.assert_allclose(loaded.policy.predict_values(obs).numpy(), model.policy.predict_values(obs).numpy())


@pytest.mark.parametrize("value_fit", ["grad", "best_fit", "lbfgs"])
def test_separate_value_fit_raises(value_fit: str) -> None:
    """The soft value has no parameters of its own: only the joint fit applies."""
    match = re.escape(f"value_fit={value_fit!r} is not supported with UnifiedPolicy") + ".*use value_fit='joint'"
    with pytest.raises(ValueError, match=match):
        PCL("UnifiedMlpPolicy", gym.make("CartPole-v1"), value_fit=value_fit, **FAST)


# ----------------------------------------------------------------------------------------------
# MultiDiscrete actions and the recurrent UnifiedLstmPolicy
# ----------------------------------------------------------------------------------------------

ACTION_SPACES = [spaces.Discrete(4), spaces.MultiDiscrete([2, 3, 5])]
LSTM = {"lstm_hidden_size": 16}


def naive_soft_value(logits: np.ndarray, nvec: list[int], temperature: float) -> np.ndarray:
    """``temperature * sum_k logsumexp(l_k)``, one row and one component at a time, in float64."""
    values = np.zeros(len(logits))
    for row in range(len(logits)):
        start = 0
        for n in nvec:
            component = logits[row, start : start + n].astype(np.float64)
            values[row] += temperature * np.log(np.sum(np.exp(component)))
            start += n
    return values


def nvec_of(action_space: spaces.Space) -> list[int]:
    if isinstance(action_space, spaces.Discrete):
        return [int(action_space.n)]
    return [int(n) for n in action_space.nvec]


def uniform_value(action_space: spaces.Space, temperature: float) -> float:
    """The soft value of all-equal logits, ``temperature * sum_k log(n_k)``."""
    return temperature * float(np.sum(np.log(nvec_of(action_space))))


def scramble_action_head(policy: UnifiedValue) -> None:
    """Large random action-head weights: logits far from the near-uniform ones of the orthogonal init (gain 0.01)."""
    with th.no_grad():
        policy.action_net.weight.normal_(0.0, 2.0)
        policy.action_net.bias.normal_(0.0, 1.0)


def check_categoricals(distribution, logits: np.ndarray, nvec: list[int]) -> None:
    """pi is the product of softmax(l_k): each component's normalised logits are l_k - logsumexp(l_k)."""
    categoricals = distribution.distribution
    categoricals = categoricals if isinstance(categoricals, list) else [categoricals]
    assert len(categoricals) == len(nvec)
    start = 0
    for categorical, n in zip(categoricals, nvec, strict=True):
        component = logits[:, start : start + n]
        expected = component - naive_soft_value(component, [n], 1.0)[:, None]
        np.testing.assert_allclose(categorical.logits.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
        start += n


@pytest.mark.parametrize("action_space", ACTION_SPACES, ids=["Discrete", "MultiDiscrete"])
def test_mlp_unified_value_matches_naive_loop(action_space: spaces.Space) -> None:
    obs_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    policy = UnifiedPolicy(obs_space, action_space, lambda _: 1e-3, temperature=0.3)
    scramble_action_head(policy)
    obs = th.as_tensor(np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32))
    logits = raw_logits(policy, obs)
    expected = naive_soft_value(logits, nvec_of(action_space), 0.3)
    assert np.abs(expected - uniform_value(action_space, 0.3)).max() > 0.05  # the logits matter
    actions = th.as_tensor(np.stack([action_space.sample() for _ in range(len(obs))]))
    with th.no_grad():
        forward_actions, forward_values, _ = policy(obs)
        values = {
            "predict_values": policy.predict_values(obs),
            "forward": forward_values,
            "evaluate_actions": policy.evaluate_actions(obs, actions)[0],
        }
        check_categoricals(policy.get_distribution(obs), logits, nvec_of(action_space))
    assert forward_actions.shape == (len(obs), *action_space.shape)
    for name, value in values.items():
        assert value.shape == (len(obs), 1), name
        np.testing.assert_allclose(value.numpy()[:, 0], expected, rtol=1e-5, atol=1e-5, err_msg=name)


def test_mlp_unified_pcl_learns_multi_discrete() -> None:
    model = PCL("UnifiedMlpPolicy", "sb3_pcl/Copy-v0", ent_coef=0.05, relative_entropy_coef=0.02, seed=0, **FAST)
    model.learn(200)
    policy = model.policy
    assert isinstance(policy, UnifiedPolicy) and isinstance(model.action_space, spaces.MultiDiscrete)
    assert model._n_updates > 0
    assert policy.temperature == pytest.approx(0.07)
    obs = th.arange(int(model.observation_space.n))  # type: ignore[attr-defined]
    expected = naive_soft_value(raw_logits(policy, obs), nvec_of(model.action_space), policy.temperature)
    with th.no_grad():
        np.testing.assert_allclose(policy.predict_values(obs).numpy()[:, 0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("action_space", ACTION_SPACES, ids=["Discrete", "MultiDiscrete"])
def test_recurrent_unified_value_matches_naive_loop(action_space: spaces.Space) -> None:
    obs_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    policy = UnifiedLstmPolicy(obs_space, action_space, lambda _: 1e-3, temperature=0.3, **LSTM)
    scramble_action_head(policy)
    rng = np.random.default_rng(1)
    n_steps, n_seq = 5, 3
    obs = th.as_tensor(rng.normal(size=(n_steps, n_seq, 3)).astype(np.float32))
    actions = th.as_tensor(np.stack([[action_space.sample() for _ in range(n_seq)] for _ in range(n_steps)]))
    with th.no_grad():
        latent = policy.sequence_latent(obs, actions).reshape(n_steps * n_seq, -1)
        logits = policy.action_net(policy.mlp_extractor.forward_actor(latent)).numpy()
        distribution, head_values = policy.latent_heads(latent)
        check_categoricals(distribution, logits, nvec_of(action_space))  # before SB3 reuses the distribution object
        _, sequence_values, _ = policy.evaluate_sequence(obs, actions, th.zeros(n_steps, n_seq))
        first_values = policy.predict_values(obs[0], policy.initial_state(n_seq), th.ones(n_seq))
    expected = naive_soft_value(logits, nvec_of(action_space), 0.3)
    assert np.abs(expected - uniform_value(action_space, 0.3)).max() > 0.05
    assert head_values.shape == (n_steps * n_seq, 1)
    np.testing.assert_allclose(head_values.numpy()[:, 0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sequence_values.numpy().reshape(-1), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(first_values.numpy()[:, 0], expected[:n_seq], rtol=1e-5, atol=1e-5)
    # the value head of MlpLstmPolicy plays no part
    with th.no_grad():
        policy.value_net.weight.add_(1.0)
        np.testing.assert_allclose(policy.latent_heads(latent)[1].numpy()[:, 0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy_class", [UnifiedPolicy, UnifiedLstmPolicy])
def test_multi_binary_action_space_raises(policy_class: type[UnifiedValue]) -> None:
    with pytest.raises(ValueError, match=rf"{policy_class.__name__} supports only .* got MultiBinary\(2\)"):
        policy_class(spaces.Box(-1.0, 1.0, (3,), np.float32), spaces.MultiBinary(2), lambda _: 1e-3)


@pytest.fixture
def recurrent_model() -> RecurrentPCL:
    model = RecurrentPCL(
        "UnifiedMlpLstmPolicy",
        "sb3_pcl/Copy-v0",
        ent_coef=0.05,
        relative_entropy_coef=0.02,
        seed=0,
        policy_kwargs=LSTM,
        **FAST,
    )
    model.learn(300)
    return model


def test_recurrent_unified_pcl_learns_and_round_trips(recurrent_model: RecurrentPCL, tmp_path) -> None:
    model = recurrent_model
    policy = model.policy
    assert isinstance(policy, UnifiedLstmPolicy)
    assert isinstance(model.action_space, spaces.MultiDiscrete)
    assert model._n_updates > 0
    assert policy.temperature == pytest.approx(0.05 + 0.02)
    assert model.policy_target.temperature == policy.temperature  # type: ignore[attr-defined]
    assert policy._get_constructor_parameters()["temperature"] == policy.temperature

    model.save(tmp_path / "unified_lstm")
    loaded = RecurrentPCL.load(tmp_path / "unified_lstm")
    assert isinstance(loaded.policy, UnifiedLstmPolicy)
    assert loaded.policy.temperature == policy.temperature
    assert loaded.policy_target.temperature == policy.temperature  # type: ignore[attr-defined]

    obs_rng = np.random.default_rng(0)
    state = loaded_state = None
    episode_start = np.array([True])
    for _ in range(6):
        obs = obs_rng.integers(0, model.observation_space.n, size=(1,))  # type: ignore[attr-defined]
        action, state = model.predict(obs, state=state, episode_start=episode_start, deterministic=True)
        loaded_action, loaded_state = loaded.predict(obs, state=loaded_state, episode_start=episode_start, deterministic=True)
        np.testing.assert_array_equal(loaded_action, action)
        assert state is not None and loaded_state is not None
        for part, loaded_part in zip(state, loaded_state, strict=True):
            np.testing.assert_allclose(loaded_part, part, rtol=1e-6, atol=1e-6)
        episode_start = np.array([False])

    obs_tensor = th.as_tensor(obs_rng.integers(0, model.observation_space.n, size=(4,)))  # type: ignore[attr-defined]
    with th.no_grad():
        args = (model.policy.initial_state(4), th.ones(4))  # type: ignore[attr-defined]
        values = model.policy.predict_values(obs_tensor, *args)  # type: ignore[call-arg]
        loaded_values = loaded.policy.predict_values(obs_tensor, *args)  # type: ignore[call-arg]
    np.testing.assert_allclose(loaded_values.numpy(), values.numpy(), rtol=1e-6, atol=1e-6)


def test_recurrent_unified_value_gradient_reaches_the_lstm(recurrent_model: RecurrentPCL) -> None:
    model = recurrent_model
    batch = model.replay_buffer.sample(4)
    values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
    model.policy.zero_grad(set_to_none=True)
    pcl_value_loss(model._consistency(batch, values, log_prob, final_values, 0.01), None).backward()
    for parameter in (model.policy.action_net.weight, model.policy.lstm_actor.weight_ih_l0):  # type: ignore[attr-defined]
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0
    assert model.policy.value_net.weight.grad is None


SEPARATE_VALUE = [
    ({"value_fit": "grad"}, "value_fit='grad' is not supported by {}"),
    (
        {"policy_step": "trust_region", "policy_step_kwargs": {"loss": "surrogate"}, "value_fit": "grad"},
        "policy_step='trust_region' is not supported by {}",
    ),
]


@pytest.mark.parametrize("algo", [RecurrentPCL, RecurrentTrustPCL])
@pytest.mark.parametrize("kwargs, match", SEPARATE_VALUE)
def test_recurrent_unified_rejects_separate_value_settings(algo: type[RecurrentPCL], kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match.format(algo.__name__))):
        algo("UnifiedMlpLstmPolicy", "sb3_pcl/Copy-v0", policy_kwargs=LSTM, **kwargs, **FAST)


def test_the_unified_aliases() -> None:
    """Feed-forward PCL and Trust-PCL take ``UnifiedMlpPolicy``; their recurrent variants take ``UnifiedMlpLstmPolicy``."""
    for algo in (PCL, TrustPCL):
        assert algo.policy_aliases["UnifiedMlpPolicy"] is UnifiedPolicy
        assert "UnifiedMlpLstmPolicy" not in algo.policy_aliases
    for algo in (RecurrentPCL, RecurrentTrustPCL):
        assert algo.policy_aliases["UnifiedMlpLstmPolicy"] is UnifiedLstmPolicy
        assert "UnifiedMlpPolicy" not in algo.policy_aliases
