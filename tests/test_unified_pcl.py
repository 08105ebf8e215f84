"""Unified PCL: one network, ``pi = softmax(logits)``, ``V(s) = (tau + lambda) * logsumexp(logits)``."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from pcl_testing import FAST

from sb3_pcl import PCL
from sb3_pcl.common.consistency import pcl_value_loss
from sb3_pcl.pcl.policies import UnifiedPolicy

th.set_num_threads(1)


def np_logsumexp(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=-1, keepdims=True)
    return (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))[..., 0]


def raw_logits(policy: UnifiedPolicy, obs: th.Tensor) -> np.ndarray:
    """The policy MLP's logits, recomputed layer by layer (``distribution.logits`` are normalised: logsumexp 0)."""
    with th.no_grad():
        return policy.action_net(policy.mlp_extractor.forward_actor(policy.extract_features(obs))).numpy()


@pytest.fixture
def model() -> PCL:
    model = PCL("UnifiedMlpPolicy", "CartPole-v1", tau=0.05, relative_entropy_coef=0.02, seed=0, **FAST)
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


def test_box_action_space_raises() -> None:
    with pytest.raises(ValueError, match="Box"):
        PCL("UnifiedMlpPolicy", "Pendulum-v1", **FAST)


def test_save_load_round_trip(model: PCL, tmp_path) -> None:
    obs = sample_obs(model)
    model.save(tmp_path / "unified")
    loaded = PCL.load(tmp_path / "unified")
    assert isinstance(loaded.policy, UnifiedPolicy)
    assert loaded.policy.temperature == model.policy.temperature  # type: ignore[attr-defined]
    with th.no_grad():
        np.testing.assert_allclose(loaded.policy.predict_values(obs).numpy(), model.policy.predict_values(obs).numpy())


def test_grad_value_optimizer_raises() -> None:
    with pytest.raises(ValueError, match="value_optimizer"):
        PCL("UnifiedMlpPolicy", gym.make("CartPole-v1"), value_optimizer="grad", **FAST)
