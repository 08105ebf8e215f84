"""PCL with a trust-region policy step (``policy_step="trust_region"``) and the separate value fits (grad, best_fit, lbfgs)."""

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from pcl_testing import FAST as PCL_FAST
from stable_baselines3.common.distributions import CategoricalDistribution, DiagGaussianDistribution, kl_divergence
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure

from sb3_pcl import PCL
from sb3_pcl.common.statistics import state_kl
from sb3_pcl.pcl.consistency import pcl_policy_loss, value_targets
from sb3_pcl.pcl.trust_region import (
    TrustRegion,
    backtracking_line_search,
    fisher_vector_product_fn,
    natural_gradient_step,
    squared_consistency_objective,
    trust_region_step,
)
from sb3_pcl.pcl.value_fits import BestFit, LBFGSFit, ridge_regression

#: the shared fast settings with bigger batches (the trust-region step needs a few paths) and PCL's learning rate
FAST = {**PCL_FAST, "learning_rate": 3e-3, "learning_starts": 100, "batch_size": 8, "train_freq": 32, "buffer_size": 5_000}
TRUST_REGION = {"policy_step": "trust_region", "value_fit": "grad"}


def fit_value(model: PCL, batch, ent_coef: float):
    """The model's separate value fit on one batch, from the values of a fresh pass (the values before the fit)."""
    values, _, final_values, _ = model._evaluate(model.policy, batch)
    return model._fit_value(batch, values, final_values, ent_coef, None)


def flat_params(params) -> th.Tensor:
    return th.cat([p.detach().reshape(-1) for p in params]).clone()


def batch_kl(model: PCL, old_distribution, batch) -> float:
    """Mean KL(pi_old || pi) over the valid steps, from the policy's own ``get_distribution`` (not PCL's closures)."""
    obs = batch.observations.reshape(-1, *batch.observations.shape[2:])[batch.mask.reshape(-1).bool()]
    with th.no_grad():
        kl = kl_divergence(old_distribution, model.policy.get_distribution(obs))
    return float((kl.sum(dim=-1) if kl.dim() > 1 else kl).mean())


def valid_distribution(model: PCL, batch):
    obs = batch.observations.reshape(-1, *batch.observations.shape[2:])[batch.mask.reshape(-1).bool()]
    with th.no_grad():
        return copy.copy(model.policy.get_distribution(obs))


def filled_model(env_id: str, **kwargs) -> PCL:
    model = PCL("MlpPolicy", env_id, seed=0, **{**FAST, **kwargs})
    model.learn(400)
    assert model._n_updates > 0
    return model


# ----------------------------------------------------------------------------------------------
# 1. the pure numerics against naive references
# ----------------------------------------------------------------------------------------------


def _categorical_problem(seed: int = 0):
    """A linear softmax policy on random states (float64), its KL closure and the explicit Fisher matrix."""
    rng = np.random.default_rng(seed)
    n_states, n_features, n_actions = 12, 3, 4
    states = rng.normal(size=(n_states, n_features))
    weight = th.tensor(rng.normal(size=(n_features, n_actions)), requires_grad=True)
    bias = th.tensor(rng.normal(size=n_actions), requires_grad=True)
    x = th.tensor(states)

    def logits() -> th.Tensor:
        return x @ weight + bias

    old = th.distributions.Categorical(logits=logits().detach())

    def kl_fn() -> th.Tensor:
        return th.distributions.kl_divergence(old, th.distributions.Categorical(logits=logits())).mean()

    # Naive Fisher: mean over states of sum_a p(a) grad log p(a) grad log p(a)^T, with
    # d log p(a) / d logits = e_a - p, d logits / d W[i, j] = x_i [j], d logits / d b[j] = [j].
    probs = old.probs.numpy()
    n_params = n_features * n_actions + n_actions
    fisher = np.zeros((n_params, n_params))
    for s in range(n_states):
        for a in range(n_actions):
            dlogits = np.eye(n_actions)[a] - probs[s]
            grad = np.concatenate([np.outer(states[s], dlogits).reshape(-1), dlogits])
            fisher += probs[s, a] * np.outer(grad, grad)
    fisher /= n_states
    return [weight, bias], kl_fn, fisher


def _gaussian_problem(seed: int = 0):
    """A linear Gaussian policy with state-independent log std, its KL closure and the explicit Fisher matrix."""
    rng = np.random.default_rng(seed)
    n_states, n_features, n_actions = 10, 3, 2
    states = rng.normal(size=(n_states, n_features))
    weight = th.tensor(rng.normal(size=(n_features, n_actions)), requires_grad=True)
    log_std = th.tensor(rng.normal(scale=0.3, size=n_actions), requires_grad=True)
    x = th.tensor(states)

    def dist(mean: th.Tensor, log_std_: th.Tensor) -> th.distributions.Normal:
        return th.distributions.Normal(mean, log_std_.exp().expand_as(mean))

    old = dist((x @ weight).detach(), log_std.detach())

    def kl_fn() -> th.Tensor:
        return th.distributions.kl_divergence(old, dist(x @ weight, log_std)).sum(dim=-1).mean()

    # Fisher of a diagonal Gaussian: mean_s x x^T / sigma_j^2 for the mean weights of action j, 2 for each log std.
    sigma2 = np.exp(2 * log_std.detach().numpy())
    n_w = n_features * n_actions
    fisher = np.zeros((n_w + n_actions, n_w + n_actions))
    gram = states.T @ states / n_states
    for i in range(n_features):
        for k in range(n_features):
            for j in range(n_actions):
                fisher[i * n_actions + j, k * n_actions + j] = gram[i, k] / sigma2[j]
    fisher[n_w:, n_w:] = 2.0 * np.eye(n_actions)
    return [weight, log_std], kl_fn, fisher


@pytest.mark.parametrize("problem", [_categorical_problem, _gaussian_problem], ids=["categorical", "gaussian"])
@pytest.mark.parametrize("damping", [0.0, 0.1])
def test_fisher_vector_product_matches_explicit_fisher(problem, damping):
    params, kl_fn, fisher = problem()
    product = fisher_vector_product_fn(kl_fn(), params, damping)
    rng = np.random.default_rng(1)
    for _ in range(3):
        vector = rng.normal(size=fisher.shape[0])
        expected = (fisher + damping * np.eye(len(vector))) @ vector
        np.testing.assert_allclose(product(th.tensor(vector)).numpy(), expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("problem", [_categorical_problem, _gaussian_problem], ids=["categorical", "gaussian"])
def test_natural_gradient_step_solves_fisher_system(problem):
    params, kl_fn, fisher = problem()
    damping, max_kl = 0.1, 0.02
    n = fisher.shape[0]
    gradient = th.tensor(np.random.default_rng(2).normal(size=n))
    product = fisher_vector_product_fn(kl_fn(), params, damping)
    th.manual_seed(0)
    step = natural_gradient_step(gradient, product, max_kl, cg_max_steps=4 * n)
    assert step is not None
    damped = fisher + damping * np.eye(n)
    direction = np.linalg.solve(damped, gradient.numpy())  # F x = g, naive
    expected = -np.sqrt(2 * max_kl / (direction @ damped @ direction)) * direction
    np.testing.assert_allclose(step.numpy(), expected, rtol=1e-4, atol=1e-6)  # CG stops at |r|^2 < 1e-10
    # the quadratic KL estimate of the step is max_kl, and the step goes downhill
    assert 0.5 * step.numpy() @ damped @ step.numpy() == pytest.approx(max_kl, rel=1e-6)
    assert float(gradient @ step) < 0
    # a truncated conjugate gradient is not the exact solution (so the check above is not trivial)
    th.manual_seed(0)
    short = natural_gradient_step(gradient, product, max_kl, cg_max_steps=1)
    assert short is not None and not np.allclose(short.numpy(), expected, rtol=1e-3)


def test_trust_region_step_on_softmax_policy_respects_bound_and_lowers_loss():
    params, kl_fn, _ = _categorical_problem()
    target = th.tensor(np.random.default_rng(3).normal(size=(12, 4)))
    x_weight, x_bias = params

    def loss_fn() -> th.Tensor:  # any smooth loss of the policy parameters
        return ((x_weight.sum(0) + x_bias - target.mean(0)) ** 2).sum() + (x_weight**2).sum()

    before, start = float(loss_fn().detach()), flat_params(params)
    stats = trust_region_step(loss_fn, kl_fn, params, max_kl=0.01)
    assert stats.accepted
    assert stats.loss_after < stats.loss_before == pytest.approx(before)
    assert float(loss_fn().detach()) == pytest.approx(stats.loss_after)
    assert 0 < float(kl_fn().detach()) <= 0.01
    assert float(kl_fn().detach()) == pytest.approx(stats.kl)
    assert float(th.linalg.vector_norm(flat_params(params) - start)) == pytest.approx(stats.step_norm, rel=1e-6)


def test_line_search_shrinks_until_the_measured_kl_fits():
    """The quadratic model underestimates this KL: the full step violates the bound, a shorter one is accepted."""
    theta = th.zeros(3, dtype=th.float64, requires_grad=True)
    max_kl = 0.01

    def kl_fn() -> th.Tensor:
        squared = (theta**2).sum()
        return 0.5 * squared + 100.0 * squared**2  # Hessian at 0: identity

    def loss_fn() -> th.Tensor:
        return theta.sum()

    stats = trust_region_step(loss_fn, kl_fn, [theta], max_kl=max_kl, cg_damping=0.0, line_search_shrinking_factor=0.8)
    assert stats.accepted
    assert stats.n_trials > 1 and stats.step_size == pytest.approx(0.8 ** (stats.n_trials - 1))
    assert float(kl_fn().detach()) <= max_kl
    assert stats.loss_after < stats.loss_before
    # the full step of the quadratic model has |s|^2 = 2 max_kl; the trials before the accepted one broke the bound
    for trial in range(stats.n_trials - 1):
        squared = 2 * max_kl * 0.8 ** (2 * trial)
        assert 0.5 * squared + 100.0 * squared**2 > max_kl
    assert stats.n_trials == 4  # 0.8^3: the first fraction whose KL fits (by hand: 0.0054)


def test_line_search_keeps_the_old_parameters_when_no_step_lowers_the_loss():
    theta = th.tensor([0.3, -0.2], dtype=th.float64, requires_grad=True)
    start = theta.detach().clone()

    def loss_fn() -> th.Tensor:  # gradient (1, 1) at the start, but a huge curvature: every tried step overshoots
        delta = theta - start
        return delta.sum() + 1e4 * (delta**2).sum()

    def kl_fn() -> th.Tensor:
        return 0.5 * ((theta - start) ** 2).sum()

    stats = trust_region_step(loss_fn, kl_fn, [theta], max_kl=0.01, line_search_max_iter=4)
    assert not stats.accepted
    assert stats.n_trials == 4 and stats.step_size == 0.0 and stats.kl == 0.0
    assert th.equal(theta.detach(), start)
    assert stats.loss_after == stats.loss_before


def test_line_search_direct_rejects_kl_violations():
    theta = th.zeros(2, dtype=th.float64, requires_grad=True)
    result = backtracking_line_search(
        [theta],
        th.tensor([1.0, 0.0], dtype=th.float64),
        loss_fn=lambda: -theta.sum(),
        kl_fn=lambda: (theta**2).sum(),  # KL of the trials: 1, 0.25, 0.0625
        loss_before=0.0,
        max_kl=0.1,
        max_iter=3,
        shrinking_factor=0.5,
    )
    assert result.accepted and result.n_trials == 3 and result.fraction == 0.25
    assert theta.detach().tolist() == [0.25, 0.0]


def test_zero_gradient_takes_no_step():
    params, kl_fn, _ = _categorical_problem()
    start = flat_params(params)
    stats = trust_region_step(lambda: 0.0 * (params[0].sum() + params[1].sum()), kl_fn, params, max_kl=0.01)
    assert not stats.accepted and stats.n_trials == 0 and stats.grad_norm == 0.0
    assert th.equal(flat_params(params), start)


def test_state_kl_matches_naive_reference():
    """Diagonal Gaussian: sum over action dimensions of the closed-form 1-d KL; categorical: sum_a p log(p / q)."""
    rng = np.random.default_rng(0)
    mu_p, mu_q = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    log_std_p, log_std_q = rng.normal(scale=0.3, size=3), rng.normal(scale=0.3, size=3)
    p, q = DiagGaussianDistribution(3), DiagGaussianDistribution(3)
    p.proba_distribution(th.as_tensor(mu_p), th.as_tensor(log_std_p))
    q.proba_distribution(th.as_tensor(mu_q), th.as_tensor(log_std_q))
    expected = []
    for i in range(5):
        total = 0.0
        for j in range(3):
            sp, sq = math.exp(log_std_p[j]), math.exp(log_std_q[j])
            total += math.log(sq / sp) + (sp**2 + (mu_p[i, j] - mu_q[i, j]) ** 2) / (2 * sq**2) - 0.5
        expected.append(total)
    np.testing.assert_allclose(state_kl(p, q).numpy(), expected, rtol=1e-10)

    logits_p, logits_q = rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    c_p, c_q = CategoricalDistribution(5), CategoricalDistribution(5)
    c_p.proba_distribution(th.as_tensor(logits_p))
    c_q.proba_distribution(th.as_tensor(logits_q))
    probs_p = np.exp(logits_p) / np.exp(logits_p).sum(axis=1, keepdims=True)
    probs_q = np.exp(logits_q) / np.exp(logits_q).sum(axis=1, keepdims=True)
    expected = [sum(probs_p[i, a] * math.log(probs_p[i, a] / probs_q[i, a]) for a in range(5)) for i in range(4)]
    np.testing.assert_allclose(state_kl(c_p, c_q).numpy(), expected, rtol=1e-10)


def test_ridge_regression_matches_numpy():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(50, 6))
    targets = features @ rng.normal(size=6) + 0.3 + 0.1 * rng.normal(size=50)
    reg = 1e-2
    weight, bias = ridge_regression(th.tensor(features), th.tensor(targets), reg_coef=reg)
    # reference 1: the regularised normal equations
    design = np.hstack([features, np.ones((50, 1))])
    expected = np.linalg.solve(design.T @ design + reg * np.eye(7), design.T @ targets)
    # reference 2: ordinary least squares on the augmented system [X; sqrt(reg) I] w = [y; 0]
    augmented = np.vstack([design, np.sqrt(reg) * np.eye(7)])
    lstsq = np.linalg.lstsq(augmented, np.concatenate([targets, np.zeros(7)]), rcond=None)[0]
    np.testing.assert_allclose(expected, lstsq, rtol=1e-8)
    np.testing.assert_allclose(weight.numpy(), expected[:-1], rtol=1e-8)
    assert float(bias) == pytest.approx(expected[-1], rel=1e-8)
    # non-finite data: no solution, and bad arguments fail clearly
    features[0, 0] = np.nan
    assert ridge_regression(th.tensor(features), th.tensor(targets)) is None
    with pytest.raises(ValueError, match="reg_coef"):
        ridge_regression(th.tensor(features), th.tensor(targets), reg_coef=0.0)
    with pytest.raises(ValueError, match="features"):
        ridge_regression(th.tensor(features), th.tensor(targets[:10]))


def test_squared_consistency_objective_gradient_is_the_clipped_residual():
    from sb3_pcl.pcl.consistency import path_consistency

    rng = np.random.default_rng(0)
    rewards = th.tensor(rng.normal(size=(6, 2)))
    log_probs = th.tensor(rng.normal(size=(6, 2)), requires_grad=True)
    values = th.tensor(rng.normal(size=(6, 2)) * 3)
    mask = th.ones(6, 2, dtype=th.float64)
    mask[4:, 1] = 0
    consistency = path_consistency(rewards, log_probs, values, th.zeros(2, dtype=th.float64), mask, 0.9, 3, ent_coef=0.5)
    residual = consistency.residual.detach().numpy()
    valid = consistency.mask.numpy()
    plain = float(squared_consistency_objective(consistency).detach())
    assert plain == pytest.approx((0.5 * residual**2 * valid).sum(0).mean())
    clip = 1.0
    huber = np.where(np.abs(residual) <= clip, 0.5 * residual**2, clip * (np.abs(residual) - 0.5 * clip))
    objective = squared_consistency_objective(consistency, clip_adv=clip)
    assert float(objective.detach()) == pytest.approx((huber * valid).sum(0).mean())
    # its gradient in log pi is (tau + lambda) times the one of PCL's clipped policy surrogate
    (grad_objective,) = th.autograd.grad(objective, log_probs, retain_graph=True)
    (grad_surrogate,) = th.autograd.grad(pcl_policy_loss(consistency, clip), log_probs)
    np.testing.assert_allclose(grad_objective.numpy(), 0.5 * grad_surrogate.numpy(), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# 2. the trust-region step inside PCL
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"], ids=["Discrete", "Box"])
@pytest.mark.parametrize(
    "settings",
    [{"target_kl": 0.01}, {"target_kl": 0.1, "cg_damping": 0.01, "line_search_shrinking_factor": 0.8}],
    ids=["default", "large-lightly-damped"],
)
def test_trust_region_updates_respect_the_kl_bound(env_id, settings):
    model = filled_model(env_id, **TRUST_REGION, policy_step_kwargs=settings)
    target_kl = settings["target_kl"]
    assert model._trust_region.target_kl == target_kl
    kls, accepted = [], 0
    for _ in range(6):
        batch = model.replay_buffer.sample(8)
        old = valid_distribution(model, batch)
        before = flat_params(model._policy_parameters)
        values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
        consistency = model._consistency(batch, values, log_prob, final_values, 0.01)
        stats = model._trust_region_step(batch, consistency, 0.01, None)
        kl = batch_kl(model, old, batch)
        assert kl <= target_kl * (1 + 1e-5), (kl, stats)
        assert kl == pytest.approx(stats["kl"], rel=1e-3, abs=1e-7)
        moved = not th.equal(flat_params(model._policy_parameters), before)
        assert moved == bool(stats["line_search_success"])
        accepted += int(stats["line_search_success"])
        kls.append(kl)
    assert accepted >= 3
    assert max(kls) > 0.1 * target_kl  # real steps, not vanishing ones


def _objective(model: PCL, batch, ent_coef: float, loss: str, old_residual: th.Tensor) -> float:
    """The trust-region loss at the current parameters, written out here (not PCL's closure)."""
    with th.no_grad():
        current = model._consistency(batch, *model._evaluate(model.policy, batch)[:3], ent_coef)
    if loss == "consistency":
        return float((0.5 * current.residual**2 * current.mask).sum(0).mean())
    return float(-(old_residual * current.window_log_probs * current.mask).sum(0).mean())


@pytest.mark.parametrize("loss", ["consistency", "surrogate"])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"], ids=["Discrete", "Box"])
def test_accepted_trust_region_step_decreases_the_loss(env_id, loss):
    model = filled_model(env_id, **TRUST_REGION, policy_step_kwargs={"loss": loss})
    assert isinstance(model._trust_region, TrustRegion) and model._trust_region.loss == loss
    ent_coef = 0.05
    n_accepted = 0
    for _ in range(4):
        batch = model.replay_buffer.sample(8)
        values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
        consistency = model._consistency(batch, values, log_prob, final_values, ent_coef)
        old_residual = consistency.residual.detach()

        before = _objective(model, batch, ent_coef, loss, old_residual)
        stats = model._trust_region_step(batch, consistency, ent_coef, None)
        after = _objective(model, batch, ent_coef, loss, old_residual)
        if stats["line_search_success"]:
            n_accepted += 1
            assert after < before
            assert before - after == pytest.approx(stats["trust_region_improvement"], rel=1e-3, abs=1e-6)
        else:
            assert after == before
    assert n_accepted >= 2


def test_trust_region_moves_only_policy_parameters_and_logs():
    # a deterministic value fit that cannot touch the policy
    model = filled_model("CartPole-v1", policy_step="trust_region", value_fit="best_fit")
    model.set_logger(configure(None, []))
    value_before = flat_params(model._value_parameters)
    policy_before = flat_params(model._policy_parameters)
    value_ids = {id(p) for p in model._value_parameters}
    model.train(gradient_steps=2, batch_size=16)
    logged = model.logger.name_to_value
    for key in ("train/kl", "train/line_search_success", "train/step_size", "train/line_search_trials", "train/grad_norm"):
        assert key in logged, key
    assert "train/value_fit_loss" in logged
    assert 0 <= logged["train/kl"] <= model._trust_region.target_kl
    assert not th.equal(flat_params(model._policy_parameters), policy_before)
    assert not th.equal(flat_params(model._value_parameters), value_before)  # the value fit ran
    # the policy parameters of the step exclude the value parameters, and cover all the others
    assert {id(p) for p in model._value_parameters} == value_ids
    assert not value_ids & {id(p) for p in model._policy_parameters}
    assert {id(p) for p in model._policy_parameters} | value_ids == {id(p) for p in model.policy.parameters()}


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["consistency", "surrogate"])
def test_trust_region_pcl_learns_cartpole(loss):
    """About 5 s each on a quiet CPU; seeds 0-3 reach 126-480 (deterministic evaluation) with either loss."""
    model = PCL(
        "MlpPolicy",
        "CartPole-v1",
        seed=0,
        policy_step="trust_region",
        policy_step_kwargs={"loss": loss, "target_kl": 0.01},
        value_fit="grad",
        learning_starts=500,
        train_freq=64,
        batch_size=32,
    )
    model.learn(6_000)
    mean_return, _ = evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=10, deterministic=True)
    assert mean_return > 100  # a uniformly random policy gets about 22


# ----------------------------------------------------------------------------------------------
# 3. value fits
# ----------------------------------------------------------------------------------------------


def test_best_fit_is_the_least_squares_solution_of_the_last_layer():
    model = filled_model("Pendulum-v1", value_fit="best_fit", value_fit_kwargs={"mix": 0.5, "reg_coef": 1e-3})
    assert model._value_fit_settings == BestFit(reg_coef=1e-3, mix=0.5)
    ent_coef = model.ent_coef
    batch = model.replay_buffer.sample(16)
    policy = model.policy
    n_steps, n_paths = batch.mask.shape
    obs = batch.observations.reshape(n_steps * n_paths, -1)
    with th.no_grad():
        # features of the last hidden layer, computed here by hand from the policy's modules
        features = policy.mlp_extractor.forward_critic(policy.extract_features(obs, policy.vf_features_extractor))
        values, log_prob, final_values, _ = model._evaluate(policy, batch)
        targets = value_targets(model._consistency(batch, values, log_prob, final_values, ent_coef))
    valid = batch.mask.reshape(-1).bool().numpy()
    y = (0.5 * targets + 0.5 * values).reshape(-1).numpy()[valid].astype(np.float64)
    x = np.hstack([features.numpy()[valid], np.ones((valid.sum(), 1))]).astype(np.float64)
    expected = np.linalg.solve(x.T @ x + 1e-3 * np.eye(x.shape[1]), x.T @ y)
    hidden_before = flat_params(policy.mlp_extractor.value_net.parameters())

    fit_loss = fit_value(model, batch, ent_coef)
    np.testing.assert_allclose(policy.value_net.weight.detach().numpy().reshape(-1), expected[:-1], rtol=2e-3, atol=2e-3)
    assert float(policy.value_net.bias.detach()) == pytest.approx(expected[-1], rel=2e-3, abs=2e-3)
    assert fit_loss == pytest.approx(np.mean((x @ expected - y) ** 2), rel=1e-3)
    assert th.equal(flat_params(policy.mlp_extractor.value_net.parameters()), hidden_before)  # hidden layers untouched
    with th.no_grad():  # the values of the batch are now the least-squares predictions
        fitted = policy.predict_values(obs).reshape(-1).numpy()[valid]
    np.testing.assert_allclose(fitted, x @ expected, rtol=1e-3, atol=1e-2 * np.abs(y).mean())


def test_lbfgs_reduces_the_value_loss_and_leaves_the_policy():
    model = filled_model("Pendulum-v1", value_fit="lbfgs", value_fit_kwargs={"max_iter": 10})
    assert model._value_fit_settings == LBFGSFit(max_iter=10)
    batch = model.replay_buffer.sample(16)
    n_steps, n_paths = batch.mask.shape
    obs = batch.observations.reshape(n_steps * n_paths, -1)
    with th.no_grad():  # mix 1: the targets V + C, fixed before the fit
        values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
        intended = value_targets(model._consistency(batch, values, log_prob, final_values, model.ent_coef))

    def regression_loss() -> float:
        with th.no_grad():
            prediction = model.policy.predict_values(obs).reshape(n_steps, n_paths)
            return float((batch.mask * (prediction - intended) ** 2).sum() / batch.mask.sum())

    before = regression_loss()
    policy_before = flat_params(model._policy_parameters)
    fit_loss = fit_value(model, batch, model.ent_coef)
    after = regression_loss()
    assert after < 0.5 * before
    assert fit_loss == pytest.approx(after, rel=1e-5)
    assert th.equal(flat_params(model._policy_parameters), policy_before)


def test_best_fit_warns_when_the_batch_has_fewer_steps_than_parameters():
    model = filled_model("Pendulum-v1", value_fit="best_fit")
    batch = model.replay_buffer.sample(2)  # at most 2 x 16 valid steps for 64 + 1 parameters
    with pytest.warns(UserWarning, match="interpolates"):
        fit_value(model, batch, model.ent_coef)


@pytest.mark.filterwarnings("ignore:value_fit='best_fit' fits")
@pytest.mark.parametrize("value_fit", ["best_fit", "lbfgs"])
def test_stateless_value_fits_train_with_the_gradient_policy_step(value_fit):
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, value_fit=value_fit, **FAST)
    assert model.policy_step == "gradient"
    value_ids = {id(p) for p in model._value_parameters}
    assert model.value_optimizer is None
    policy_opt_ids = {id(p) for group in model.policy.optimizer.param_groups for p in group["params"]}
    assert not value_ids & policy_opt_ids  # the policy's Adam does not move the value
    value_before = flat_params(model._value_parameters)
    model.learn(300)
    assert not th.equal(flat_params(model._value_parameters), value_before)


# ----------------------------------------------------------------------------------------------
# 4. save / load, hyperparameters
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value_fit, value_fit_kwargs",
    [("grad", {"learning_rate": 5e-4, "gradient_steps": 3, "mix": 0.8}), ("lbfgs", {"max_iter": 3, "mix": 0.7})],
)
def test_save_load_round_trip(tmp_path, value_fit, value_fit_kwargs):
    settings = {"target_kl": 0.02, "cg_max_steps": 7, "cg_damping": 0.05, "line_search_max_iter": 6}
    model = filled_model(
        "CartPole-v1",
        policy_step="trust_region",
        policy_step_kwargs={"loss": "surrogate", **settings},
        value_fit=value_fit,
        value_fit_kwargs=value_fit_kwargs,
    )
    obs = np.stack([model.observation_space.sample() for _ in range(20)])
    actions, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "tr.zip")

    loaded = PCL.load(tmp_path / "tr.zip", env=gym.make("CartPole-v1"))
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], actions)
    assert (loaded.policy_step, loaded.value_fit) == ("trust_region", value_fit)
    assert loaded._trust_region == TrustRegion(loss="surrogate", **settings)
    assert loaded.value_fit_kwargs == value_fit_kwargs
    for name, value in value_fit_kwargs.items():
        assert getattr(loaded._value_fit_settings, name) == value, name
    if value_fit == "grad":
        assert loaded.value_optimizer is not None
        assert loaded.value_optimizer.param_groups[0]["lr"] == value_fit_kwargs["learning_rate"]
        original = model.value_optimizer.state_dict()["state"]
        assert original
        for key, state in loaded.value_optimizer.state_dict()["state"].items():
            assert th.equal(state["exp_avg"], original[key]["exp_avg"])
    else:
        assert loaded.value_optimizer is None
    before = flat_params(loaded._policy_parameters)
    loaded.learn(200, reset_num_timesteps=False)
    assert loaded._n_updates > model._n_updates
    assert not th.equal(flat_params(loaded._policy_parameters), before)


def test_trust_region_with_zero_entropy_works_with_the_surrogate():
    model = PCL(
        "MlpPolicy", "CartPole-v1", seed=0, ent_coef=0.0, policy_step_kwargs={"loss": "surrogate"}, **TRUST_REGION, **FAST
    )
    model.learn(300)
    assert model._n_updates > 0
