"""Full-episode losses against naive per-episode NumPy references, and synchronized episode batches."""

import re

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecEnvWrapper, VecNormalize

import sb3_pcl  # noqa: F401  (registers the algorithmic tasks)
from sb3_pcl import RecurrentReinforce
from sb3_pcl.reinforce.episodes import (
    EpisodeBatch,
    batch_layout,
    check_group_sync,
    check_num_samples,
    check_seeded_resets,
    collect_episode_batch,
    group_seeds,
    original_observations,
    set_reset_seeds,
)
from sb3_pcl.reinforce.losses import episode_totals, full_episode_policy_loss, k_sample_baseline, ment_bonus
from sb3_pcl.urex.urex import urex_bonus

# ----------------------------------------------------------------------------------------------
# Naive per-episode references
# ----------------------------------------------------------------------------------------------


def naive_losses(rewards: np.ndarray, log_probs: np.ndarray, tau: float, urex: bool):
    """Per-episode loops: bonus, baseline and loss of every episode, as written in the papers."""
    n_groups, k = rewards.shape
    bonus = np.zeros_like(rewards)
    for g in range(n_groups):
        if urex:
            logits = [rewards[g, j] / tau - log_probs[g, j] for j in range(k)]
            top = max(logits)
            weights = [np.exp(x - top) for x in logits]
            for j in range(k):
                bonus[g, j] = tau * k * weights[j] / sum(weights)
        else:
            for j in range(k):
                bonus[g, j] = -tau * log_probs[g, j]
    baseline = np.zeros(n_groups)
    for g in range(n_groups):
        baseline[g] = sum(rewards[g, j] + bonus[g, j] for j in range(k)) / k
    advantages = np.zeros_like(rewards)
    loss = 0.0
    for g in range(n_groups):
        for j in range(k):
            advantages[g, j] = rewards[g, j] + bonus[g, j] - baseline[g]
            loss += -advantages[g, j] * log_probs[g, j]
    return bonus, baseline, advantages, loss / (n_groups * k)


def random_episodes(seed: int, n_groups: int = 3, k: int = 4):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(2.0, 3.0, size=(n_groups, k))
    log_probs = -rng.uniform(0.5, 20.0, size=(n_groups, k))
    return rewards, log_probs


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [0.01, 0.1, 1.0])
def test_ment_bonus_matches_reference(seed, tau):
    rewards, log_probs = random_episodes(seed)
    expected, _, _, _ = naive_losses(rewards, log_probs, tau, urex=False)
    np.testing.assert_allclose(ment_bonus(th.as_tensor(log_probs), tau).numpy(), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [0.01, 0.1, 1.0])
def test_urex_bonus_matches_reference(seed, tau):
    rewards, log_probs = random_episodes(seed)
    expected, _, _, _ = naive_losses(rewards, log_probs, tau, urex=True)
    bonus = urex_bonus(th.as_tensor(rewards), th.as_tensor(log_probs), tau).numpy()
    np.testing.assert_allclose(bonus, expected, atol=1e-6, rtol=0)
    # The weights are a softmax scaled by K: they average to tau in every group.
    np.testing.assert_allclose(bonus.mean(axis=1), tau, atol=1e-9)


@pytest.mark.parametrize("ent_coef", [0.0, -0.1, float("nan"), float("inf")])
def test_urex_bonus_needs_a_positive_finite_ent_coef(ent_coef):
    with pytest.raises(ValueError, match=rf"^ent_coef must be > 0 for the UREX bonus, got {ent_coef!r}$"):
        urex_bonus(th.zeros(1, 2), th.zeros(1, 2), ent_coef)


@pytest.mark.parametrize("urex", [False, True])
@pytest.mark.parametrize("seed", [0, 3])
def test_baseline_and_loss_match_reference(urex, seed):
    tau = 0.1
    rewards, log_probs = random_episodes(seed, n_groups=4, k=3)
    _, baseline_ref, advantages_ref, loss_ref = naive_losses(rewards, log_probs, tau, urex)
    r = th.as_tensor(rewards)
    log_p = th.as_tensor(log_probs).requires_grad_(True)
    bonus = urex_bonus(r, log_p.detach(), tau) if urex else ment_bonus(log_p.detach(), tau)
    np.testing.assert_allclose(k_sample_baseline(r + bonus).numpy()[:, 0], baseline_ref, atol=1e-6, rtol=0)
    loss = full_episode_policy_loss(r, log_p, bonus)
    assert loss.item() == pytest.approx(loss_ref, abs=1e-6)
    # The advantage is a constant: d loss / d L = -(R + b - baseline) / n_episodes.
    loss.backward()
    assert log_p.grad is not None
    np.testing.assert_allclose(log_p.grad.numpy(), -advantages_ref / rewards.size, atol=1e-6, rtol=0)


def test_loss_stops_the_gradient_through_the_bonus():
    # If the bonus (computed from L) were not detached, the gradient would differ from -advantage / N.
    rewards, log_probs = random_episodes(5, n_groups=2, k=2)
    log_p = th.as_tensor(log_probs).requires_grad_(True)
    full_episode_policy_loss(th.as_tensor(rewards), log_p, ment_bonus(log_p, 0.5)).backward()
    _, _, advantages, _ = naive_losses(rewards, log_probs, 0.5, urex=False)
    np.testing.assert_allclose(log_p.grad.numpy(), -advantages / rewards.size, atol=1e-6)


def test_episode_totals_from_padded_steps():
    """Totals from time-major padded steps equal the per-episode sums, whatever the padding holds."""
    rng = np.random.default_rng(0)
    lengths = [1, 4, 2, 6]
    n_steps = 6
    x = rng.normal(size=(n_steps, len(lengths)))
    mask = np.zeros_like(x)
    for i, length in enumerate(lengths):
        mask[:length, i] = 1.0
        x[length:, i] = np.nan  # padding must never leak into the totals
    totals = episode_totals(th.as_tensor(x), th.as_tensor(mask)).numpy()
    for i, length in enumerate(lengths):
        assert totals[i] == pytest.approx(sum(x[t, i] for t in range(length)), abs=1e-12)


def test_padded_batch_loss_matches_per_episode_reference():
    """The whole computation from padded (T, N) steps to the loss, against per-episode loops."""
    rng = np.random.default_rng(7)
    k, n_groups, n_steps = 3, 2, 5
    n_envs = k * n_groups
    lengths = rng.integers(1, n_steps + 1, size=n_envs)
    step_rewards = rng.normal(size=(n_steps, n_envs))
    step_log_probs = -rng.uniform(0.1, 2.0, size=(n_steps, n_envs))
    mask = (np.arange(n_steps)[:, None] < lengths[None, :]).astype(float)
    for tau, urex in [(0.1, True), (0.01, False)]:
        totals_r = np.array([step_rewards[: lengths[i], i].sum() for i in range(n_envs)]).reshape(n_groups, k)
        totals_l = np.array([step_log_probs[: lengths[i], i].sum() for i in range(n_envs)]).reshape(n_groups, k)
        _, _, _, loss_ref = naive_losses(totals_r, totals_l, tau, urex)
        r = episode_totals(th.as_tensor(step_rewards), th.as_tensor(mask)).reshape(n_groups, k)
        log_p = episode_totals(th.as_tensor(step_log_probs), th.as_tensor(mask)).reshape(n_groups, k)
        bonus = urex_bonus(r, log_p, tau) if urex else ment_bonus(log_p, tau)
        assert full_episode_policy_loss(r, log_p, bonus).item() == pytest.approx(loss_ref, abs=1e-6)


# ----------------------------------------------------------------------------------------------
# Environments
# ----------------------------------------------------------------------------------------------


class SeededLengthEnv(gym.Env):
    """Episodes of ``1 + seed % 5`` steps (from the last seed given to reset), reward = step index + 1."""

    observation_space = spaces.Box(-10.0, 10.0, shape=(2,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, fixed_length: int | None = None):
        self.fixed_length = fixed_length
        self.length = 1
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.noise], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.length = 1 + seed % 5
        if self.fixed_length is not None:
            self.length = self.fixed_length
        self.t = 0
        self.noise = float(self.np_random.uniform(-1, 1))
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(self.t), self.t >= self.length, False, {}


class UnseededEnv(SeededLengthEnv):
    """Ignores the reset seed: its start state comes from a private, unseeded generator."""

    def __init__(self):
        super().__init__(fixed_length=3)
        self._rng = np.random.default_rng()

    def reset(self, *, seed=None, options=None):
        _, info = super().reset(seed=seed)
        self.noise = float(self._rng.uniform(-1, 1))
        return self._obs(), info


class ResetCounterEnv(SeededLengthEnv):
    """Seeds correctly but carries state across episodes: the first observation counts the resets."""

    def __init__(self):
        super().__init__(fixed_length=3)
        self.n_resets = 0

    def reset(self, *, seed=None, options=None):
        _, info = super().reset(seed=seed)
        self.n_resets += 1
        self.noise = float(self.n_resets)
        return self._obs(), info


def copy_env() -> gym.Env:
    return Monitor(gym.make("sb3_pcl/Copy-v0"))


def make_vec(kind: str, env_fn, n_envs: int) -> VecEnv:
    if kind == "subproc":
        return SubprocVecEnv([env_fn] * n_envs, start_method="fork")
    return DummyVecEnv([env_fn] * n_envs)


def mlp_policy(env: VecEnv) -> ActorCriticPolicy:
    return ActorCriticPolicy(env.observation_space, env.action_space, lambda _: 1e-3)


# ----------------------------------------------------------------------------------------------
# Synchronized resets
# ----------------------------------------------------------------------------------------------


def test_group_seeds():
    assert group_seeds(100, 6, 3) == [100, 100, 100, 101, 101, 101]
    assert group_seeds(7, 4, 2) == [7, 7, 8, 8]


@pytest.mark.parametrize("kind", ["dummy", "subproc"])
def test_groups_share_the_tape(kind):
    k, n_groups = 3, 3
    env = make_vec(kind, copy_env, k * n_groups)
    try:
        for base_seed in (11, 12345):
            set_reset_seeds(env, group_seeds(base_seed, env.num_envs, k))
            env.reset()
            tapes = [np.asarray(tape) for tape in env.get_attr("input_data")]
            groups = [tapes[g * k : (g + 1) * k] for g in range(n_groups)]
            for group in groups:
                for tape in group[1:]:
                    np.testing.assert_array_equal(tape, group[0])
            # Different start states for different groups.
            firsts = [group[0].tolist() for group in groups]
            assert len({tuple(tape) for tape in firsts}) == n_groups
            # The seeds reach the envs: a fresh env reset with the group's seed draws the same tape.
            for g in range(n_groups):
                single = gym.make("sb3_pcl/Copy-v0")
                single.reset(seed=base_seed + g)
                np.testing.assert_array_equal(single.unwrapped.input_data, groups[g][0])
    finally:
        env.close()


def replay(seed: int, actions: np.ndarray, env_fn=copy_env):
    env = env_fn()
    obs, _ = env.reset(seed=seed)
    observations, rewards = [obs], []
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            break
    return np.asarray(observations), np.asarray(rewards)


@pytest.mark.parametrize(
    ("kind", "n_envs", "k"), [("dummy", 6, 2), ("subproc", 6, 2), ("dummy", 1, 2), ("dummy", 3, 2), ("subproc", 4, 3)]
)
@pytest.mark.parametrize("recurrent", [False, True])
def test_batch_is_reproduced_by_seeded_replays(kind, n_envs, k, recurrent):
    """
    Every recorded episode is exactly the episode a fresh env plays from its seed with the recorded actions, whether
    the groups play side by side (one pass) or their copies one after another (several passes over the envs).
    """
    n_groups, _ = batch_layout(n_envs, k)
    env = make_vec(kind, copy_env, n_envs)
    try:
        if recurrent:  # the LSTM state carried through each episode
            model = RecurrentReinforce("MlpPrevActionLstmPolicy", env, num_samples=k, check_seeding=False)
            batch = collect_episode_batch(env, model.policy, k, max_steps=100, base_seed=2024, play_step=model._play_step)
        else:
            batch = collect_episode_batch(env, mlp_policy(env), k, max_steps=100, base_seed=2024)
    finally:
        env.close()
    assert batch is not None and batch.n_envs == n_groups * k and batch.n_groups == n_groups
    np.testing.assert_array_equal(batch.seeds, np.repeat(2024 + np.arange(n_groups), k))
    assert batch.ended.all() and batch.terminated.all()
    for i in range(batch.n_envs):
        length = batch.lengths[i]
        np.testing.assert_array_equal(batch.mask[:length, i], 1.0)
        np.testing.assert_array_equal(batch.mask[length:, i], 0.0)
        observations, rewards = replay(int(batch.seeds[i]), batch.actions[:length, i])
        assert len(rewards) == length  # the episode ends exactly where the mask ends
        np.testing.assert_array_equal(batch.observations[:length, i], observations[:-1])
        np.testing.assert_array_equal(batch.rewards[:length, i], rewards)
        assert batch.final_observations[i] == observations[-1]
    # Same start state within a group.
    first = batch.observations[0].reshape(n_groups, k)
    assert (first == first[:, :1]).all()


def test_masking_after_done_and_episode_starts():
    # Episode lengths 1 + seed % 5 with group seeds 10, 11, 12: lengths 1, 2, 3.
    k, n_groups = 2, 3
    env = DummyVecEnv([SeededLengthEnv] * (k * n_groups))
    batch = collect_episode_batch(env, mlp_policy(env), k, max_steps=50, base_seed=10)
    assert batch is not None
    expected_lengths = np.repeat([1, 2, 3], k)
    np.testing.assert_array_equal(batch.lengths, expected_lengths)
    assert batch.n_steps == 3
    expected_mask = (np.arange(3)[:, None] < expected_lengths[None, :]).astype(np.float32)
    np.testing.assert_array_equal(batch.mask, expected_mask)
    # Rewards are 1, 2, ... within an episode: the returns count no step after the first done.
    np.testing.assert_array_equal(batch.returns, np.repeat([1.0, 3.0, 6.0], k))
    # Envs that finished keep running (auto-reset) but those steps are masked; their starts are flagged.
    np.testing.assert_array_equal(batch.episode_starts[0], 1.0)
    np.testing.assert_array_equal(batch.episode_starts[1], [1, 1, 0, 0, 0, 0])
    assert batch.ended.all() and batch.terminated.all()
    np.testing.assert_array_equal(batch.final_observations[:, 0], expected_lengths)


def test_max_steps_cap_cuts_and_keeps_the_episodes():
    k = 2
    env = DummyVecEnv([lambda: SeededLengthEnv(fixed_length=50)] * (2 * k))
    batch = collect_episode_batch(env, mlp_policy(env), k, max_steps=5, base_seed=0)
    assert batch is not None
    assert batch.n_steps == 5
    np.testing.assert_array_equal(batch.mask, 1.0)
    assert not batch.ended.any() and not batch.terminated.any()
    np.testing.assert_array_equal(batch.returns, 15.0)
    # The final observation is the one after the 5th step (the state the episode was cut in).
    np.testing.assert_array_equal(batch.final_observations[:, 0], 5.0)


def test_time_limit_truncation_is_not_termination():
    k = 2
    env = DummyVecEnv([lambda: gym.wrappers.TimeLimit(SeededLengthEnv(fixed_length=50), max_episode_steps=4)] * k)
    batch = collect_episode_batch(env, mlp_policy(env), k, max_steps=10, base_seed=0)
    assert batch is not None
    assert batch.ended.all() and not batch.terminated.any()
    np.testing.assert_array_equal(batch.lengths, 4)
    np.testing.assert_array_equal(batch.final_observations[:, 0], 4.0)


def test_on_step_hook_sees_every_step_and_can_abort():
    k = 2
    env = DummyVecEnv([SeededLengthEnv] * (2 * k))
    seen = []

    def hook(step):
        seen.append(step.valid.copy())
        return True

    batch = collect_episode_batch(env, mlp_policy(env), k, max_steps=50, base_seed=13, on_step=hook)
    assert batch is not None
    np.testing.assert_array_equal(np.stack(seen), batch.mask.astype(bool))
    assert collect_episode_batch(env, mlp_policy(env), k, max_steps=50, base_seed=13, on_step=lambda _: False) is None


def test_works_through_vec_env_wrappers():
    k = 2
    env = VecNormalize(DummyVecEnv([SeededLengthEnv] * (2 * k)))
    batch = collect_episode_batch(env, mlp_policy(env), k, max_steps=50, base_seed=3)
    assert isinstance(batch, EpisodeBatch)
    np.testing.assert_array_equal(batch.lengths, np.repeat([4, 5], k))


@pytest.mark.parametrize("n_envs", [1, 3, 4])
def test_vec_normalize_passes_the_seeding_checks(n_envs):
    """
    VecNormalize's statistics change at every reset: the checks compare the env's own observations, so two resets
    with the same seeds agree, and the copies of a group played in different passes start identically.
    """
    env = VecNormalize(DummyVecEnv([SeededLengthEnv] * n_envs), norm_obs=True, norm_reward=True)
    for base_seed in (0, 7):
        check_seeded_resets(env, 2, base_seed=base_seed)
    batch = collect_episode_batch(env, mlp_policy(env), 2, max_steps=50, base_seed=3)
    assert batch is not None
    # The normalised first observations of a group differ across passes, the original ones do not.
    original = original_observations(env, env.reset())
    assert original.shape == (n_envs, 2) and np.all(original[:, 0] == 0)
    np.testing.assert_array_equal(batch.lengths.reshape(-1, 2)[:, 0], batch.lengths.reshape(-1, 2)[:, 1])


@pytest.mark.parametrize(
    ("n_envs", "k", "layout"), [(4, 2, (2, 1)), (6, 3, (2, 1)), (1, 2, (1, 2)), (1, 5, (1, 5)), (3, 2, (3, 2)), (5, 3, (3, 2))]
)
def test_batch_layout(n_envs, k, layout):
    """One pass of n_envs / K groups when K divides n_envs, else the fewest passes holding max(n_envs, K) episodes."""
    n_groups, n_passes = batch_layout(n_envs, k)
    assert (n_groups, n_passes) == layout
    assert n_groups * k >= max(n_envs, k) and n_groups * k <= n_passes * n_envs < n_groups * k + n_envs


def test_several_passes_play_the_copies_one_after_another():
    """With 3 envs and K = 2: 3 groups in 2 passes; the hook sees each pass, with the slot each env plays."""
    k = 2
    env = DummyVecEnv([SeededLengthEnv] * 3)
    slots = []

    def hook(step):
        slots.append(step.slots.tolist())
        return True

    batch = collect_episode_batch(env, mlp_policy(env), k, max_steps=50, base_seed=10, on_step=hook)
    assert batch is not None and batch.n_envs == 6 and batch.n_groups == 3
    # Group g is reset with seed 10 + g: episodes of length 1 + seed % 5, the same for both copies.
    np.testing.assert_array_equal(batch.seeds, [10, 10, 11, 11, 12, 12])
    np.testing.assert_array_equal(batch.lengths, [1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(batch.returns, [1.0, 1.0, 3.0, 3.0, 6.0, 6.0])
    np.testing.assert_array_equal(batch.observations[0].reshape(3, k, -1)[:, 0], batch.observations[0].reshape(3, k, -1)[:, 1])
    assert batch.n_steps == 3 and batch.mask.sum() == batch.lengths.sum()
    # Pass 1 (slots 0-2: seeds 10, 10, 11, lengths 1, 1, 2) takes 2 steps, pass 2 (slots 3-5) 3 steps.
    assert slots == [[0, 1, 2]] * 2 + [[3, 4, 5]] * 3


def test_envs_without_a_slot_are_masked_out():
    """5 envs, K = 3: 3 groups (9 episodes) in 2 passes; the last pass's fifth env plays an episode that is not used."""
    env = DummyVecEnv([SeededLengthEnv] * 5)
    seen = []
    batch = collect_episode_batch(
        env, mlp_policy(env), 3, max_steps=50, base_seed=0, on_step=lambda step: seen.append(step) or True
    )
    assert batch is not None and batch.n_envs == 9
    np.testing.assert_array_equal(batch.seeds, np.repeat([0, 1, 2], 3))
    np.testing.assert_array_equal(batch.lengths, np.repeat([1, 2, 3], 3))
    # Pass 2 plays slots 5-8 (lengths 2, 3, 3, 3); the fifth env's steps are never valid and do not lengthen the pass.
    assert [step.slots.tolist() for step in seen[-3:]] == [[5, 6, 7, 8, -1]] * 3 and len(seen) == 2 + 3
    assert not any(step.valid[4] for step in seen[2:])


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_samples", [1, 0, -2, 2.0, True, np.float64("nan")])
def test_num_samples_must_be_at_least_two(num_samples):
    message = rf"^num_samples must be an integer >= 2 \(.*\), got {re.escape(repr(num_samples))}$"
    with pytest.raises(ValueError, match=message):
        check_num_samples(num_samples)
    with pytest.raises(ValueError, match=message):
        batch_layout(4, num_samples)
    env = DummyVecEnv([SeededLengthEnv] * 4)
    with pytest.raises(ValueError, match=message):
        collect_episode_batch(env, mlp_policy(env), num_samples, max_steps=5, base_seed=0)


@pytest.mark.parametrize("max_steps", [0, -1, 2.5, float("nan"), None])
def test_max_steps_must_be_a_positive_integer(max_steps):
    env = DummyVecEnv([SeededLengthEnv] * 2)
    with pytest.raises(ValueError, match=rf"^max_steps must be an integer >= 1, got {max_steps!r}$"):
        collect_episode_batch(env, mlp_policy(env), 2, max_steps=max_steps, base_seed=0)


def test_env_ignoring_the_seed_is_rejected():
    env = DummyVecEnv([UnseededEnv] * 4)
    with pytest.raises(ValueError, match="cannot be reset to a given seed"):
        collect_episode_batch(env, mlp_policy(env), 2, max_steps=5, base_seed=0)
    with pytest.raises(ValueError, match="cannot be reset to a given seed"):
        check_seeded_resets(env, 2, base_seed=0)


@pytest.mark.parametrize("env_class", [UnseededEnv, ResetCounterEnv])
def test_copies_played_one_after_another_need_a_seeded_env(env_class):
    """With one env, a group's copies come from successive resets: an env ignoring the seed or carrying state fails."""
    env = DummyVecEnv([env_class])
    with pytest.raises(ValueError, match=r"groups \[0\] have different first observations.*one after another"):
        collect_episode_batch(env, mlp_policy(env), 2, max_steps=5, base_seed=0)
    with pytest.raises(ValueError, match="two resets with the same seeds gave different first observations"):
        check_seeded_resets(env, 2, base_seed=0)


class Inject(VecEnvWrapper):
    """
    Turns env 1's reward, observation or terminal observation ``step`` steps after a reset (0: the reset) into
    ``value``; passes rewards and observations on as float64, as SubprocVecEnv does (DummyVecEnv stores its rewards
    in float32).
    """

    def __init__(self, venv: VecEnv, what: str, value: float, step: int):
        super().__init__(venv)
        self.what, self.value, self.at, self.t = what, value, step, 0

    def reset(self):
        self.t = 0
        obs = np.asarray(self.venv.reset(), dtype=np.float64)
        if self.at == 0:
            obs[1, 1] = self.value
        return obs

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        obs, rewards = np.asarray(obs, dtype=np.float64), rewards.astype(np.float64)
        self.t += 1
        if self.t == self.at and self.what == "reward":
            rewards[1] = self.value
        elif self.t == self.at and self.what == "observation":
            obs[1, 1] = self.value
        elif self.t == self.at:
            assert dones[1]
            infos[1]["terminal_observation"] = np.array([3.0, self.value])
        return obs, rewards, dones, infos


@pytest.mark.parametrize(
    ("what", "value", "step", "message"),
    [
        ("reward", np.nan, 2, r"^Non-finite reward \(NaN or inf\) at env index \[1\]"),
        ("reward", -np.inf, 1, r"^Non-finite reward \(NaN or inf\) at env index \[1\]"),
        ("reward", 1e39, 2, r"^Non-finite reward \(too large for float32, max 3.4e\+38\) at env index \[1\]"),
        ("observation", np.nan, 0, r"^Non-finite observation \(NaN or inf\) at env index \[1\]"),
        ("observation", np.nan, 1, r"^Non-finite observation \(NaN or inf\) at env index \[1\]"),
        ("observation", 1e39, 2, r"^Non-finite observation \(too large for float32, max 3.4e\+38\) at env index \[1\]"),
        ("terminal", np.inf, 3, r"^Non-finite terminal observation \(NaN or inf\) at env index \[1\]"),
    ],
)
def test_non_finite_env_outputs_are_refused_naming_the_env(what, value, step, message):
    """Every reward and observation entering the batch is checked in float32 (a float64 1e39 would be stored as inf)."""
    env = Inject(DummyVecEnv([lambda: SeededLengthEnv(fixed_length=3)] * 2), what, value, step)
    with pytest.raises(ValueError, match=message + r".*refusing to store it\. Reinforce and UREX train on finite"):
        collect_episode_batch(env, mlp_policy(env), 2, max_steps=10, base_seed=0, check_sync=False)
    # The same env without the bad value plays its batch.
    env.at = -1
    assert collect_episode_batch(env, mlp_policy(env), 2, max_steps=10, base_seed=0) is not None


def test_env_carrying_state_across_resets_is_rejected_by_the_second_reset():
    env = DummyVecEnv([ResetCounterEnv] * 4)
    # The copies agree with each other (same reset count) ...
    set_reset_seeds(env, group_seeds(0, 4, 2))
    check_group_sync(env.reset(), 2, env.unwrapped.reset_infos)
    # ... but the same seeds do not give the same start state twice.
    with pytest.raises(ValueError, match="two resets with the same seeds"):
        check_seeded_resets(env, 2, base_seed=0)


def test_reset_infos_are_compared():
    obs = np.zeros((4, 1))
    check_group_sync(obs, 2, [{"a": 1}, {"a": 1}, {"a": np.arange(2)}, {"a": np.arange(2)}])
    with pytest.raises(ValueError, match=r"groups \[1\] have different reset infos"):
        check_group_sync(obs, 2, [{"a": 1}, {"a": 1}, {"a": 1}, {"a": 2}])


def test_seeded_resets_of_a_seedable_env_pass():
    env = make_vec("dummy", copy_env, 4)
    obs = check_seeded_resets(env, 2, base_seed=5)
    assert obs[0] == obs[1] and obs[2] == obs[3]
