"""The fast paths of acting and training: they must compute what the plain paths compute (the golden runs pin the rest)."""

import copy
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.utils import explained_variance

from sb3_pcl import PCL, TrustPCL
from sb3_pcl.common.actions import sample_actions
from sb3_pcl.common.statistics import explained_variance_tensor, on_host, state_kl


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0"])
@pytest.mark.parametrize("use_sde", [False, True])
def test_sample_actions_draws_what_the_policy_samples(env_id: str, use_sde: bool, fast_settings: dict[str, Any]) -> None:
    if use_sde and env_id == "CartPole-v1":
        pytest.skip("gSDE needs Box actions")
    model = PCL("MlpPolicy", env_id, seed=0, use_sde=use_sde, **fast_settings)
    obs = np.stack([model.observation_space.sample() for _ in range(5)])
    th.manual_seed(1)
    with th.no_grad():
        expected = model.policy._predict(model.policy.obs_to_tensor(obs)[0], deterministic=False)
    th.manual_seed(1)
    actions = sample_actions(model.policy, obs)
    assert not actions.requires_grad
    th.testing.assert_close(actions, expected, rtol=0, atol=0)
    # the argument checks of torch.distributions are back on afterwards
    assert th.distributions.Distribution._validate_args is __debug__


def test_statistics_reach_the_host_once_with_the_values_of_item() -> None:
    values = th.tensor([0.1, 1 / 3, 2.5e-8], dtype=th.float32)
    history = {"a": [values[0], 2.0], "b": [values[1], values[2]]}
    assert on_host(history) == {"a": [values[0].item(), 2.0], "b": [values[1].item(), values[2].item()]}
    assert on_host({"c": [1.0]}) == {"c": [1.0]}
    y_true, y_pred = th.randn(50), th.randn(50)
    assert explained_variance_tensor(y_pred, y_true).item() == pytest.approx(
        float(explained_variance(y_pred.numpy(), y_true.numpy())), rel=1e-5
    )
    assert th.isnan(explained_variance_tensor(y_pred, th.ones(50)))


def test_the_logged_kl_reads_the_update_s_passes_and_equals_fresh_ones(fast_settings: dict[str, Any]) -> None:
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    kwargs = {**fast_settings, "value_fit": "grad", "max_divergence": None, "relative_entropy_coef": 1.0}
    model = TrustPCL("MlpPolicy", env, seed=0, **kwargs)
    calls = []
    kl_to_target = model._kl_to_target

    def recording(batch, distribution=None, target=None):
        calls.append((distribution is not None, target is not None))
        kl = kl_to_target(batch, distribution, target)
        with th.no_grad():  # against a fresh pass of the target network over the batch's T * B steps
            obs = batch.observations.reshape(-1, *batch.observations.shape[2:])
            per_state = state_kl(model.policy_target.get_distribution(obs), copy.copy(distribution))
            fresh = (per_state * batch.mask.reshape(-1)).sum() / batch.mask.sum()
        assert float(kl) == pytest.approx(float(fresh), rel=1e-3, abs=1e-7)
        return kl

    model._kl_to_target = recording
    model.learn(200)
    assert calls and all(distribution and target for distribution, target in calls)
