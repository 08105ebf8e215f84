"""Schedule strings of our coefficients (``tau: "exp_0.1_0.001"`` in a YAML file)."""

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import PCL, Reinforce
from sb3_pcl.common.schedules import ExponentialSchedule, parse_schedule
from tests.pcl_testing import FAST


def test_parse_schedule_values():
    assert parse_schedule("tau", 0.3) == 0.3
    linear = parse_schedule("tau", "lin_0.5")
    assert linear(1.0) == pytest.approx(0.5) and linear(0.5) == pytest.approx(0.25) and linear(0.0) == pytest.approx(0.0)
    linear = parse_schedule("tau", "lin_0.5_0.1")
    assert linear(1.0) == pytest.approx(0.5) and linear(0.25) == pytest.approx(0.2) and linear(0.0) == pytest.approx(0.1)
    exp = parse_schedule("tau", "exp_0.1_0.001")
    assert isinstance(exp, ExponentialSchedule)
    for progress in np.linspace(0.0, 1.0, 11):
        # the original tau_decay: 0.1 times 0.1 per 100 of 200 iterations -> geometric from 0.1 to 0.001
        iteration = (1.0 - progress) * 200
        assert exp(progress) == pytest.approx(0.1 * 0.1 ** (iteration / 100))


@pytest.mark.parametrize("text", ["exp_0.1", "lin_", "lin_a", "cos_0.1_0.2", "lin_1_2_3", "exp_0_0.1", "0.1"])
def test_bad_schedule_strings(text):
    with pytest.raises(ValueError, match="tau"):
        parse_schedule("tau", text)


@pytest.mark.parametrize("algo_class, env_id", [(PCL, "CartPole-v1"), (Reinforce, "CartPole-v1")])
def test_algorithms_take_schedule_strings(algo_class, env_id, tmp_path):
    env = make_vec_env(env_id, n_envs=2)
    kwargs = FAST if algo_class is PCL else {"num_samples": 2}
    model = algo_class("MlpPolicy", env, ent_coef="exp_0.1_0.001", seed=0, **kwargs)
    schedule = "ent_coef_schedule"
    model.learn(64)
    assert getattr(model, schedule)(1.0) == pytest.approx(0.1) and getattr(model, schedule)(0.0) == pytest.approx(0.001)
    model.save(tmp_path / "model")
    loaded = algo_class.load(tmp_path / "model")
    assert getattr(loaded, schedule)(0.5) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="cannot read the schedule 'fast'"):
        algo_class("MlpPolicy", env, ent_coef="fast")


@pytest.mark.parametrize("algo", ["pcl", "reinforce"])
def test_a_budget_overshot_by_the_last_collection_ends_the_schedules_at_their_end_value(algo: str) -> None:
    # rl-zoo3's lin_<x>: p * x, negative for p < 0 (a collection of n_envs * train_freq steps ends past the budget)
    from sb3_pcl import PCL, Reinforce

    def rl_zoo3_linear(progress_remaining: float) -> float:
        return progress_remaining * 1e-3

    if algo == "pcl":
        model = PCL("MlpPolicy", "CartPole-v1", learning_rate=rl_zoo3_linear, learning_starts=0, train_freq=8, seed=0)
        model.learn(1003)  # 126 collections of 8 steps: 1008 steps
    else:
        model = Reinforce("MlpPolicy", "CartPole-v1", learning_rate=rl_zoo3_linear, num_samples=2, seed=0)
        model.learn(101)
    assert model.num_timesteps > model._total_timesteps
    assert model._current_progress_remaining == 0.0
