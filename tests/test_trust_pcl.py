"""Tests of Trust-PCL: the lambda search, the relative-entropy consistency on TrustPCL's code path, targets, time limits."""

import copy
import math
from collections import deque

import gymnasium as gym
import numpy as np
import pytest
import torch as th
import yaml
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit
from pcl_testing import FAST, accepted_arguments
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from test_consistency import ref_consistency

from sb3_pcl.hyperparams_files import hyperparams_dir, load_hyperparams
from sb3_pcl.trust_pcl import TrustPCL
from sb3_pcl.trust_pcl import trust_pcl as trust_pcl_module
from sb3_pcl.trust_pcl.lambda_search import MIN_EPISODES, find_relative_entropy_coef, tilted_kl, tilted_log_probs
from sb3_pcl.zoo.samplers import CONVERTERS, SAMPLERS

# ----------------------------------------------------------------------------------------------
# 1. The lambda search
# ----------------------------------------------------------------------------------------------


def naive_kl(returns, lam):
    """KL(p || uniform) with p_i = exp(R_i / lam) / sum_j exp(R_j / lam), term by term (no overflow protection)."""
    weights = [math.exp(r / lam) for r in returns]
    total = sum(weights)
    n = len(returns)
    return sum(w / total * math.log(w / total * n) for w in weights if w > 0)


@pytest.mark.parametrize("lam", [0.5, 1.0, 3.0, 50.0])
def test_tilted_kl_matches_the_definition(lam):
    rng = np.random.default_rng(0)
    returns = rng.normal(scale=2.0, size=30)
    assert tilted_kl(returns, lam) == pytest.approx(naive_kl(returns, lam), rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(np.exp(tilted_log_probs(returns, lam)).sum(), 1.0)


def test_tilted_kl_limits_and_stability():
    returns = np.array([1e6, 1e6, 0.0, -3e6, 5.0])
    # lambda -> 0: uniform over the 2 best episodes; no overflow for huge returns and tiny lambda
    assert tilted_kl(returns, 0.0) == pytest.approx(math.log(5 / 2))
    assert tilted_kl(returns, 1e-3) == pytest.approx(math.log(5 / 2))
    assert np.isfinite(tilted_log_probs(returns, 1e-3)[:2]).all()
    # lambda -> inf: uniform
    assert tilted_kl(returns, 1e12) == pytest.approx(0.0, abs=1e-6)
    lams = np.geomspace(1e-2, 1e8, 200)
    kls = [tilted_kl(returns, lam) for lam in lams]
    assert np.all(np.diff(kls) <= 1e-12)  # non-increasing in lambda


def brute_force_lambda(returns, target, low, high):
    """Smallest point of a dense grid on [low, high] with KL <= target, and the grid point before it."""
    grid = np.unique(np.concatenate([[low], np.geomspace(max(low, 1e-6), high, 8_001), [high]]))
    kls = np.array([tilted_kl(returns, lam) for lam in grid])
    meets = np.flatnonzero(kls <= target)
    if len(meets) == 0:
        return None, None
    first = meets[0]
    return grid[first], grid[first - 1] if first > 0 else grid[0]


@pytest.mark.parametrize("scale", [0.1, 1.0, 20.0, 200.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lambda_bisection_against_brute_force_grid(seed, scale):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(MIN_EPISODES, 120))
    returns = rng.normal(loc=rng.uniform(-5, 5) * scale, scale=scale, size=n)
    lengths = rng.integers(10, 1000, size=n)
    max_divergence = float(rng.choice([0.0005, 0.001, 0.005]))
    target = max_divergence * lengths.mean()
    tol = 1e-6
    result = find_relative_entropy_coef(returns, lengths, max_divergence, tol=tol)
    grid_hit, grid_before = brute_force_lambda(returns, target, 0.0, 1000.0)
    if grid_hit is None:  # unreachable within [0, 1000]: clipped
        assert result == 1000.0
        return
    assert grid_before - tol <= result <= grid_hit + tol
    assert tilted_kl(returns, result) <= target
    if result > tol:  # an interior solution: just below it the constraint fails, and KL = target there
        assert tilted_kl(returns, result - tol) > target
        assert tilted_kl(returns, result) == pytest.approx(target, rel=1e-3)


def test_lambda_scales_with_the_returns():
    rng = np.random.default_rng(5)
    returns, lengths = rng.normal(size=50), np.full(50, 100)
    small = find_relative_entropy_coef(returns, lengths, 0.001)
    assert small is not None and 0 < small < 100
    assert find_relative_entropy_coef(3.0 * returns + 7.0, lengths, 0.001) == pytest.approx(3.0 * small, rel=1e-4)


def test_lambda_search_edge_cases():
    lengths = np.full(20, 50)
    spread = np.linspace(0.0, 1.0, 20)
    # too few episodes: no estimate (the caller keeps its lambda)
    assert find_relative_entropy_coef(spread[: MIN_EPISODES - 1], lengths[: MIN_EPISODES - 1], 0.001) is None
    assert find_relative_entropy_coef([], [], 0.001) is None
    assert find_relative_entropy_coef(spread[:MIN_EPISODES], lengths[:MIN_EPISODES], 0.001) is not None
    # all returns equal: KL = 0 for every lambda, the smallest lambda meeting the constraint is `low`
    assert find_relative_entropy_coef(np.full(20, 3.0), lengths, 0.001) == 0.0
    assert find_relative_entropy_coef(np.full(20, 3.0), lengths, 0.001, low=2.0) == 2.0
    # a target above the largest possible KL log(n / n_max): `low`
    assert find_relative_entropy_coef(spread, lengths, math.log(20) / 50 * 1.01) == 0.0
    # unreachable within [low, high]: clipped to `high`
    wide = np.linspace(0.0, 1e7, 20)
    assert find_relative_entropy_coef(wide, lengths, 0.001) == 1000.0
    assert find_relative_entropy_coef(wide, lengths, 0.001, high=50.0) == 50.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_divergence": 0.0}, "max_divergence"),
        ({"max_divergence": float("nan")}, "max_divergence"),
        ({"low": 5.0, "high": 1.0}, "low < high"),
        ({"tol": 0.0}, "tol"),
        ({"lengths": np.ones(9)}, "same episodes"),
        ({"returns": np.r_[np.ones(9), np.nan]}, "finite"),
    ],
)
def test_lambda_search_rejects_bad_input(kwargs, match):
    args = {"returns": np.arange(10.0), "lengths": np.ones(10), "max_divergence": 0.001, **kwargs}
    with pytest.raises(ValueError, match=match):
        find_relative_entropy_coef(**args)


# ----------------------------------------------------------------------------------------------
# 2. The relative-entropy consistency on TrustPCL's own code path, against the naive reference
# ----------------------------------------------------------------------------------------------


def perturb(module: th.nn.Module, scale: float = 0.3, seed: int = 0) -> None:
    gen = th.Generator().manual_seed(seed)
    with th.no_grad():
        for param in module.parameters():
            param.add_(scale * th.randn(param.shape, generator=gen))


def reference_inputs(model: TrustPCL, batch):
    """The model's own values and log-probabilities, as float64 NumPy arrays for the naive reference."""
    with th.no_grad():
        values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
        target_values, target_log_prob, target_final, _ = model._evaluate(model.policy_target, batch)
    inputs = {
        "rewards": batch.rewards,
        "log_probs": log_prob,
        "target_log_probs": target_log_prob,
        "values": values,
        "final_values": target_final if model.use_target_values else final_values,
        "mask": batch.mask,
    }
    if model.use_target_values:
        inputs["far_values"] = target_values
    return {k: v.double().numpy() for k, v in inputs.items()}, (values, log_prob, final_values)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("use_target_values", [False, True])
def test_relative_entropy_consistency_matches_naive_reference(env_id, use_target_values):
    gamma, n_steps, tau, lam = 0.9, 3, 0.05, 0.7
    model = TrustPCL(
        "MlpPolicy",
        env_id,
        seed=0,
        gamma=gamma,
        ent_coef=tau,
        max_divergence=None,
        relative_entropy_coef=lam,
        use_target_values=use_target_values,
        **{**FAST, "n_steps": n_steps, "max_segment_length": 8, "learning_starts": 10_000},
    )
    model.learn(120)
    perturb(model.policy_target)  # a target really different from the online networks
    batch = model.replay_buffer.sample(6)
    if env_id == "CartPole-v1":
        assert batch.terminated.sum() > 0  # terminated (final value 0) and cut segments in one batch
        assert batch.terminated.sum() < len(batch.terminated)
    ref_in, (values, log_prob, final_values) = reference_inputs(model, batch)
    consistency = model._consistency(batch, values, log_prob, final_values, tau)
    ref = ref_consistency(ref_in, gamma, n_steps, tau, lam, start_windows=True)
    np.testing.assert_allclose(consistency.residual.detach().numpy(), ref["residual"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(consistency.bootstrap.detach().numpy(), ref["bootstrap"], rtol=1e-4, atol=1e-4)
    # lambda really enters: without the relative-entropy term the residual differs
    plain = ref_consistency(ref_in, gamma, n_steps, tau, 0.0, start_windows=True)
    assert not np.allclose(plain["residual"], ref["residual"], atol=1e-3)


# ----------------------------------------------------------------------------------------------
# 3. Target networks
# ----------------------------------------------------------------------------------------------


def test_polyak_update_of_target_policy_and_value_networks():
    lag = 0.8
    model = TrustPCL(
        "MlpPolicy",
        "CartPole-v1",
        seed=0,
        target_network_lag=lag,
        value_fit="grad",
        **{**FAST, "learning_starts": 10_000},
    )
    model.learn(100)
    perturb(model.policy_target, scale=1.0)
    online_before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    target_before = {k: v.clone() for k, v in model.policy_target.state_dict().items()}
    model.train(gradient_steps=2, batch_size=4)
    after = model.policy_target.state_dict()
    assert any(k.startswith("value_net") for k in after) and any(k.startswith("action_net") for k in after)
    for name, value in after.items():
        th.testing.assert_close(value, lag * target_before[name] + (1 - lag) * online_before[name], atol=1e-6, rtol=0)
    value_params = {
        id(p) for module in (model.policy.value_net, model.policy.mlp_extractor.value_net) for p in module.parameters()
    }
    assert any(not th.equal(p, online_before[n]) for n, p in model.policy.named_parameters() if id(p) in value_params)


@pytest.mark.parametrize("use_target_values", [False, True])
def test_use_target_values_bootstraps_from_the_target_value_net(use_target_values):
    model = TrustPCL(
        "MlpPolicy",
        "CartPole-v1",
        seed=0,
        max_divergence=None,
        use_target_values=use_target_values,
        **{**FAST, "learning_starts": 10_000},
    )
    model.learn(120)
    batch = model.replay_buffer.sample(6)
    values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
    before = model._consistency(batch, values, log_prob, final_values, 0.0)
    with th.no_grad():
        model.policy_target.value_net.bias.add_(5.0)  # only the target value head changes
    after = model._consistency(batch, values, log_prob, final_values, 0.0)
    th.testing.assert_close(after.values, before.values)  # V(s_t) is always the online value
    changed = not th.allclose(after.residual, before.residual)
    assert changed == use_target_values
    if use_target_values:
        # the far end moved by gamma^k * 5 wherever it is not a terminal state
        shift = (after.bootstrap - before.bootstrap)[after.mask.bool()]
        assert (shift > 0).any() and th.all(shift >= -1e-5)


# ----------------------------------------------------------------------------------------------
# 4. Time limits: truncation bootstraps, termination does not
# ----------------------------------------------------------------------------------------------


class StepCounterEnv(gym.Env):
    """Observation: the step count. Terminates after ``terminate_at`` steps when given, else runs forever."""

    observation_space = spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, terminate_at: int | None = None):
        self.terminate_at = terminate_at
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return np.array([self.t], dtype=np.float32), 1.0, terminated, False, {}


@pytest.mark.parametrize(
    "make_env, terminated",
    [
        (lambda: TimeLimit(StepCounterEnv(), max_episode_steps=5), False),
        (lambda: StepCounterEnv(terminate_at=5), True),
        (lambda: TimeLimit(StepCounterEnv(terminate_at=5), max_episode_steps=5), True),  # both: termination wins
    ],
    ids=["truncated", "terminated", "both"],
)
@pytest.mark.parametrize("use_target_values", [False, True])
def test_truncation_bootstraps_and_termination_does_not(make_env, terminated, use_target_values):
    gamma = 0.9
    model = TrustPCL(
        "MlpPolicy",
        make_vec_env(make_env, n_envs=1),
        seed=0,
        gamma=gamma,
        use_target_values=use_target_values,
        **{**FAST, "max_segment_length": None, "learning_starts": 10_000, "train_freq": 10},
    )
    model.learn(20)
    perturb(model.policy_target)
    finished = [p for p in model.replay_buffer.paths.values() if p.done]
    assert len(finished) == 4 and all(len(p) == 5 for p in finished)
    assert all(p.terminated == terminated for p in finished)
    np.testing.assert_array_equal(finished[0].final_obs, [5.0])  # the last state, not the next reset

    batch = model.replay_buffer.sample(4)  # whole 5-step paths (the running one is empty: 20 = 4 x 5)
    assert th.equal(batch.terminated, th.full((4,), float(terminated)))
    np.testing.assert_array_equal(batch.final_observations.numpy(), np.full((4, 1), 5.0))
    values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
    consistency = model._consistency(batch, values, log_prob, final_values, 0.0)
    last_row = consistency.offset + 4  # the window of the last step reaches V(s_5) one step later
    bootstrapper = model.policy_target if use_target_values else model.policy
    with th.no_grad():
        v_final = bootstrapper.predict_values(batch.final_observations).reshape(-1)
    expected = th.zeros(4) if terminated else gamma * v_final
    th.testing.assert_close(consistency.bootstrap[last_row], expected)
    assert terminated or (expected.abs() > 0).all()


def test_mujoco_v5_time_limit_truncates_and_falling_terminates(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warnings to MUJOCO_LOG.TXT in the working directory
    cheetah = TrustPCL(
        "MlpPolicy", gym.make("HalfCheetah-v5", max_episode_steps=30), seed=0, **{**FAST, "learning_starts": 10_000}
    )
    cheetah.learn(60)
    hopper = TrustPCL("MlpPolicy", gym.make("Hopper-v5"), seed=0, **{**FAST, "learning_starts": 10_000})
    hopper.learn(300)  # random actions make the hopper fall well within 300 steps
    cheetah_done = [p for p in cheetah.replay_buffer.paths.values() if p.done]
    hopper_done = [p for p in hopper.replay_buffer.paths.values() if p.done]
    assert len(cheetah_done) == 2 and not any(p.terminated for p in cheetah_done)
    assert hopper_done and all(p.terminated for p in hopper_done)


# ----------------------------------------------------------------------------------------------
# 5. Lambda adaptation
# ----------------------------------------------------------------------------------------------


def fake_episodes(n, seed=0, scale=10.0):
    rng = np.random.default_rng(seed)
    return [
        {"r": float(r), "l": int(length), "t": 0.0}
        for r, length in zip(rng.normal(scale=scale, size=n), rng.integers(20, 200, n), strict=True)
    ]


def feed(model: TrustPCL, episodes: list[dict]) -> None:
    """Report ended episodes to the model as a Monitor does (``info["episode"]``), after forgetting earlier ones."""
    model.ep_info_buffer, model.ep_success_buffer = deque(maxlen=100), deque(maxlen=100)
    model._lambda_episodes.clear()
    model._update_info_buffer([{"episode": episode} for episode in episodes])


def test_lambda_moves_toward_the_bisection_result_with_smoothing():
    smoothing, window = 0.8, 30
    model = TrustPCL(
        "MlpPolicy",
        "CartPole-v1",
        max_divergence=0.002,
        lambda_smoothing=smoothing,
        lambda_window=window,
        relative_entropy_coef=1.0,
    )
    model.set_logger(configure(folder=None, format_strings=[]))
    episodes = fake_episodes(50)
    feed(model, episodes)
    recent = episodes[-window:]  # only the last `lambda_window` episodes count
    target = find_relative_entropy_coef([e["r"] for e in recent], [e["l"] for e in recent], 0.002)
    assert target is not None and abs(target - 1.0) > 1.0
    lam = 1.0
    for _ in range(5):
        model._before_training_iteration()
        lam = smoothing * lam + (1 - smoothing) * target
        assert model.relative_entropy_coef == pytest.approx(lam)
        assert model.lambda_target == pytest.approx(target)
        assert model.logger.name_to_value["train/lambda"] == pytest.approx(lam)
        assert model.logger.name_to_value["train/lambda_target"] == pytest.approx(target)
    assert abs(model.relative_entropy_coef - target) < 0.5 * abs(1.0 - target)

    # too few episodes: lambda is kept
    feed(model, episodes[: MIN_EPISODES - 1])
    model._before_training_iteration()
    assert model.relative_entropy_coef == pytest.approx(lam)
    # fixed lambda
    fixed = TrustPCL("MlpPolicy", "CartPole-v1", max_divergence=None, relative_entropy_coef=0.3)
    fixed.set_logger(configure(folder=None, format_strings=[]))
    feed(fixed, episodes)
    fixed._before_training_iteration()
    assert fixed.relative_entropy_coef == 0.3


def test_lambda_uses_returns_in_vec_normalize_units():
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=1), norm_obs=False, norm_reward=True)
    model = TrustPCL("MlpPolicy", env, lambda_smoothing=0.0)
    model.set_logger(configure(folder=None, format_strings=[]))
    env.ret_rms.var = np.array(16.0)
    episodes = fake_episodes(40)
    feed(model, episodes)
    model._before_training_iteration()
    scaled = np.array([e["r"] for e in episodes]) / np.sqrt(16.0 + env.epsilon)
    expected = find_relative_entropy_coef(scaled, [e["l"] for e in episodes], model.max_divergence)
    assert model.relative_entropy_coef == pytest.approx(expected)


def test_lambda_adapts_during_learning_and_is_logged(tmp_path):
    model = TrustPCL("MlpPolicy", "CartPole-v1", seed=0, tensorboard_log=str(tmp_path), **{**FAST, "learning_starts": 250})
    model.learn(400)
    assert model._n_updates > 0 and len(model.ep_info_buffer) >= MIN_EPISODES
    assert model.lambda_target is not None and model.lambda_target > 0
    assert 0 < model.relative_entropy_coef < model.lambda_target  # smoothed up from 0 toward the estimate
    assert "train/kl_to_target" in model.logger.name_to_value
    assert [p.name for p in tmp_path.iterdir()] == ["TrustPCL_1"]


def test_unmonitored_env_warns_that_lambda_cannot_adapt():
    env = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    with pytest.warns(UserWarning, match="Monitor"):
        TrustPCL("MlpPolicy", env, **{**FAST, "learning_starts": 10_000}).learn(10)


# ----------------------------------------------------------------------------------------------
# 6. Action spaces, save / load, hyperparameters
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_discrete_and_box_actions_train(env_id):
    model = TrustPCL("MlpPolicy", env_id, seed=0, value_fit="grad", use_target_values=True, **FAST)
    model.learn(300)
    assert model._n_updates > 0
    for param in model.policy.parameters():
        assert th.isfinite(param).all()
    action, _ = model.predict(model.observation_space.sample(), deterministic=False)
    assert model.action_space.contains(np.asarray(action, dtype=model.action_space.dtype))


@pytest.mark.parametrize("squash", [False, True])
def test_gsde_with_the_relative_entropy_term(squash):
    """gSDE in Trust-PCL: the target policy's noise distribution follows the online one; KL and entropy are logged."""
    model = TrustPCL(
        "MlpPolicy",
        "Pendulum-v1",
        seed=0,
        use_sde=True,
        sde_sample_freq=4,
        max_divergence=None,
        relative_entropy_coef=1.0,
        ent_coef=0.01,
        target_network_lag=0.5,
        policy_kwargs={"squash_output": squash, "log_std_init": -2.0},
        **FAST,
    )
    model.set_logger(configure(None, []))
    model.learn(300)
    assert model._n_updates > 0
    logged = model.logger.name_to_value
    assert math.isfinite(logged["train/entropy"]) and logged["train/kl_to_target"] > 0
    online, target = model.policy.log_std.detach(), model.policy_target.log_std.detach()
    assert online.shape == target.shape == (64, 1) and not th.equal(online, target)  # polyak-averaged, not copied
    assert th.isfinite(online).all()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"], ids=["Discrete", "Box"])
def test_trust_region_policy_step_with_the_relative_entropy_term(env_id):
    """PCL's natural-gradient policy step on Trust-PCL's consistency: bounded in KL, and it lowers that consistency."""
    target_kl = 0.005
    model = TrustPCL(
        "MlpPolicy",
        env_id,
        seed=0,
        policy_step="trust_region",
        policy_step_kwargs={"target_kl": target_kl, "cg_damping": 0.05},
        value_fit="grad",
        max_divergence=None,
        relative_entropy_coef=2.0,
        **FAST,
    )
    model.learn(300)
    assert model._n_updates > 0 and model.policy_step == "trust_region"
    # the policy moved away from its lagged target, so the relative-entropy term takes part in the step
    online, target = model.policy.state_dict(), model.policy_target.state_dict()
    assert any(not th.equal(online[name], target[name]) for name in online)
    accepted = 0
    for _ in range(5):
        batch = model.replay_buffer.sample(8)
        obs = batch.observations.reshape(-1, *batch.observations.shape[2:])[batch.mask.reshape(-1).bool()]
        with th.no_grad():
            old = copy.copy(model.policy.get_distribution(obs))
        values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
        consistency = model._consistency(batch, values, log_prob, final_values, 0.0)
        before = float((0.5 * consistency.residual.detach() ** 2 * consistency.mask).sum(0).mean())
        stats = model._trust_region_step(batch, consistency, 0.0, None)
        with th.no_grad():
            kl = kl_divergence(old, model.policy.get_distribution(obs))
            kl = float((kl.sum(dim=-1) if kl.dim() > 1 else kl).mean())
            after_c = model._consistency(batch, *model._evaluate(model.policy, batch)[:3], 0.0)
        after = float((0.5 * after_c.residual**2 * after_c.mask).sum(0).mean())
        assert kl <= target_kl * (1 + 1e-5), (kl, stats)
        if stats["line_search_success"]:
            accepted += 1
            assert after < before
        else:
            assert after == before
    assert accepted >= 2


def test_save_load_keeps_lambda(tmp_path):
    model = TrustPCL("MlpPolicy", "CartPole-v1", seed=0, **{**FAST, "learning_starts": 250})
    model.learn(300)
    model.relative_entropy_coef = 12.345
    model.save(tmp_path / "trust_pcl.zip")
    loaded = TrustPCL.load(tmp_path / "trust_pcl.zip", env=make_vec_env("CartPole-v1", n_envs=1, seed=1))
    assert loaded.relative_entropy_coef == 12.345
    assert (loaded.max_divergence, loaded.lambda_smoothing, loaded.lambda_window) == (0.001, 0.95, 100)
    assert loaded.lambda_target == model.lambda_target
    for name, value in model.policy_target.state_dict().items():
        assert th.equal(loaded.policy_target.state_dict()[name], value), name
    # the episode window is saved too: the next update continues from it
    episodes = list(loaded._lambda_episodes)
    assert episodes == list(model._lambda_episodes) and len(episodes) >= MIN_EPISODES
    new = find_relative_entropy_coef([r for r, _ in episodes], [length for _, length in episodes], 0.001)
    loaded.set_logger(configure(folder=None, format_strings=[]))
    loaded._before_training_iteration()
    assert loaded.relative_entropy_coef == pytest.approx(0.95 * 12.345 + 0.05 * new)
    loaded.learn(64, reset_num_timesteps=False)
    assert loaded._n_updates > model._n_updates


def test_shipped_hyperparameters_and_sampler_build_the_algorithm():
    entries = yaml.safe_load((hyperparams_dir() / "trust_pcl.yml").read_text())
    assert {"CartPole-v1", "Acrobot-v1", "Pendulum-v1", "HalfCheetah-v5", "Hopper-v5"} <= set(entries)
    accepted = accepted_arguments(TrustPCL)
    for env_id in entries:
        kwargs = load_hyperparams("trust_pcl", env_id).kwargs
        assert set(kwargs) <= accepted, env_id
        if env_id in ("CartPole-v1", "Acrobot-v1", "Pendulum-v1"):
            assert TrustPCL(env=env_id, **kwargs).max_divergence is not None
    hopper = load_hyperparams("trust_pcl", "Hopper-v5").kwargs
    assert (hopper["batch_size"], hopper["max_segment_length"], hopper["train_freq"]) == (25, 100, 100)
    # HalfCheetah's entry takes three policy settings of rl-zoo3's PPO entry (ReLU, SB3's init, log std -1) from a string
    cheetah = TrustPCL(env="HalfCheetah-v5", **{**load_hyperparams("trust_pcl", "HalfCheetah-v5").kwargs, "buffer_size": 1000})
    assert cheetah.policy.activation_fn is th.nn.ReLU and not cheetah.policy.ortho_init
    assert th.allclose(cheetah.policy.log_std, th.full((6,), -1.0))
    # ... with gamma 0.99 and the policy's learning rate annealed from 2e-3 to 0 (the value fit keeps 2e-3)
    assert cheetah.gamma == 0.99 and cheetah._value_fit_settings.learning_rate == 2e-3
    assert [cheetah.lr_schedule(p) for p in (1.0, 0.5, 0.0)] == pytest.approx([2e-3, 1e-3, 0.0])

    import optuna

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(3):
        trial = study.ask()
        kwargs = SAMPLERS["trust_pcl"](trial, 0, 1, {})
        assert CONVERTERS["trust_pcl"](trial.params) == kwargs
        assert TrustPCL("MlpPolicy", "CartPole-v1", **kwargs).max_divergence in (0.0005, 0.001, 0.002, 0.005)
        study.tell(trial, 0.0)


class NeverEnds(gym.Env):
    """An env whose episodes never end (no time limit)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), 1.0, False, False, {}


def test_a_warning_says_when_lambda_cannot_adapt_because_no_episode_ends(monkeypatch):
    monkeypatch.setattr(trust_pcl_module, "LAMBDA_PATIENCE", 200)
    model = TrustPCL("MlpPolicy", make_vec_env(NeverEnds, n_envs=1), seed=0, **FAST)
    with pytest.warns(UserWarning, match=r"0 episodes have ended .* lambda stays at 0\.0.*time limit"):
        model.learn(400)
    assert model.lambda_target is None
