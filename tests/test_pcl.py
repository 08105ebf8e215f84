"""Behaviour tests of the ``PCL`` algorithm as a Stable-Baselines3 ``OffPolicyAlgorithm``.

The contracts every class shares are in ``test_run.py``, ``test_save_load.py``, ``test_spaces.py`` and
``test_hyperparameters.py``.
"""

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from pcl_testing import FAST, BigObsEnv
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl import PCL
from sb3_pcl.common.path_buffer import PathReplayBuffer
from sb3_pcl.pcl import actor as actor_module

# ----------------------------------------------------------------------------------------------
# Tiny environments and wrappers
# ----------------------------------------------------------------------------------------------


class _TinyEnv(gym.Env):
    """Episodes of ``length`` steps, 2-d observations, reward 1 when the first action component is 0."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)

    def __init__(self, action_space: spaces.Space, length: int = 10):
        self.action_space = action_space
        self.length = length
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t / self.length, self.np_random.uniform(-1, 1)], dtype=np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype)), action
        self.t += 1
        reward = float(np.asarray(action).reshape(-1)[0] == 0)
        return self._obs(), reward, self.t >= self.length, False, {}


class MultiDiscreteEnv(_TinyEnv):
    def __init__(self):
        super().__init__(spaces.MultiDiscrete([3, 2]))


class CounterEnv(gym.Env):
    """Observation = number of steps taken in the episode; the episode never ends by itself."""

    observation_space = spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=np.float32), 1.0, False, self.t >= 10_000, {}


class RecordActions(gym.Wrapper):
    """Keeps every action the wrapped env receives."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.received: list[np.ndarray] = []

    def step(self, action):
        self.received.append(np.array(action, copy=True))
        return self.env.step(action)


class NaNAtStep(gym.Wrapper):
    """Returns a NaN reward (or observation) at the given step of the first episode."""

    def __init__(self, env: gym.Env, step: int = 3, what: str = "reward"):
        super().__init__(env)
        self.nan_step, self.what, self.n_steps = step, what, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.n_steps += 1
        if self.n_steps == self.nan_step:
            if self.what == "reward":
                reward = float("nan")
            else:
                obs = np.full_like(obs, np.nan)
        return obs, reward, terminated, truncated, info


def params_of(module: th.nn.Module) -> dict[str, th.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def stored_actions(model: PCL) -> np.ndarray:
    buffer = model.replay_buffer
    return np.concatenate([buffer.actions[path.slots] for path in buffer.paths.values()])


def stored_observations(model: PCL) -> np.ndarray:
    buffer = model.replay_buffer
    return np.concatenate([buffer.observations[path.slots] for path in buffer.paths.values()])


# ----------------------------------------------------------------------------------------------
# 1. save / load: the target network, learning on
# ----------------------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, target_network_lag=0.9, ent_coef=0.05, **{**FAST, "n_steps": 3})
    model.learn(300)
    assert model._n_updates > 0
    obs = np.stack([model.observation_space.sample() for _ in range(20)])
    actions, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "pcl.zip")

    loaded = PCL.load(tmp_path / "pcl.zip")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], actions)
    for name, value in params_of(model.policy_target).items():
        assert th.equal(loaded.policy_target.state_dict()[name], value), name
    # the target network is really distinct from the online one (so the check above is not trivial)
    assert any(not th.equal(value, model.policy.state_dict()[name]) for name, value in params_of(model.policy_target).items())
    assert (loaded.n_steps, loaded.ent_coef, loaded.target_network_lag) == (3, 0.05, 0.9)
    assert loaded.tau == pytest.approx(0.1)  # SB3's meaning: the polyak coefficient, 1 - target_network_lag
    assert loaded.policy_target is not loaded.policy

    # load with an env and continue training without resetting the counter
    loaded = PCL.load(tmp_path / "pcl.zip", env=gym.make("CartPole-v1"))
    assert loaded.num_timesteps == model.num_timesteps
    loaded.learn(100, reset_num_timesteps=False)
    assert loaded.num_timesteps >= model.num_timesteps + 100

    # set_env with a new env of the same spaces
    before = model.num_timesteps
    model.set_env(make_vec_env("CartPole-v1", n_envs=1, seed=3))
    model.learn(64, reset_num_timesteps=False)
    assert model.num_timesteps >= before + 64


# ----------------------------------------------------------------------------------------------
# 2. Box actions: the replay keeps the sampled action, the env gets the clipped one
# ----------------------------------------------------------------------------------------------


def test_box_actions_stored_unclipped_and_env_gets_clipped_actions():
    env = RecordActions(gym.make("Pendulum-v1"))
    model = PCL("MlpPolicy", env, seed=0, policy_kwargs={"log_std_init": 2.0}, **{**FAST, "learning_starts": 0})
    model.learn(200)
    stored = stored_actions(model)
    assert len(stored) == model.replay_buffer.size() == model.num_timesteps
    assert np.abs(stored).max() > 2.0
    received = np.concatenate([a.reshape(-1) for a in env.received])
    assert len(received) == model.num_timesteps
    assert np.all(np.abs(received) <= 2.0)
    assert np.any(np.abs(received) == 2.0)  # some were clipped
    # each stored action clips to what the env received (one env, nothing evicted: slots are in order)
    order = np.concatenate([model.replay_buffer.paths[pid].slots for pid in sorted(model.replay_buffer.paths)])
    np.testing.assert_allclose(np.clip(model.replay_buffer.actions[order, 0], -2.0, 2.0), received, rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# 3. NaN rewards / observations
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("what", ["reward", "observation"])
@pytest.mark.parametrize("learning_starts", [0, 100])
def test_nan_from_env_is_rejected(what, learning_starts):
    env = NaNAtStep(gym.make("CartPole-v1"), step=3, what=what)
    model = PCL("MlpPolicy", env, seed=0, **{**FAST, "learning_starts": learning_starts})
    with pytest.raises(ValueError, match="NaN"):
        model.learn(50)
    assert model.num_timesteps == 3


# ----------------------------------------------------------------------------------------------
# 4. VecNormalize
# ----------------------------------------------------------------------------------------------


def test_vec_normalize_buffer_stores_original_observations():
    venv = VecNormalize(make_vec_env(BigObsEnv, n_envs=2, seed=0), clip_obs=10.0)
    model = PCL("MlpPolicy", venv, seed=0, **{**FAST, "train_freq": 8})
    model.learn(200)
    assert model._n_updates > 0
    obs = stored_observations(model)
    assert obs.min() > 900.0  # raw observations, not normalised ones (those lie in [-10, 10])
    # the last stored observation of each running path is the previous original observation
    batch = model.replay_buffer.sample(4, env=model._vec_normalize_env)
    assert batch.observations.abs().max() <= 10.0 + 1e-5
    assert batch.final_observations.abs().max() <= 10.0 + 1e-5
    for env_idx in range(2):
        path = model.replay_buffer.paths[model.replay_buffer.open_paths[env_idx]]
        np.testing.assert_allclose(model.replay_buffer.last_next_obs[env_idx], venv.get_original_obs()[env_idx])
        assert np.all(model.replay_buffer.observations[path.slots[-1]] > 900.0)


# ----------------------------------------------------------------------------------------------
# 5. tensorboard
# ----------------------------------------------------------------------------------------------


def test_tensorboard_logging(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = PCL(
        "MlpPolicy", "CartPole-v1", seed=0, tensorboard_log=str(tmp_path), **{**FAST, "learning_starts": 20, "train_freq": 4}
    )
    model.learn(300, log_interval=1)
    run_dir = tmp_path / "PCL_1"
    assert run_dir.is_dir()
    events = list(run_dir.glob("events.out.tfevents.*"))
    assert events
    accumulator = EventAccumulator(str(run_dir))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    expected = {
        "train/consistency_loss",
        "train/policy_loss",
        "train/value_loss",
        "train/entropy",
        "train/ent_coef",
        "train/grad_norm",
        "train/explained_variance",
        "train/buffer_size",
    }
    assert expected <= tags, expected - tags
    assert "train/n_updates" not in tags  # excluded from tensorboard
    assert all(np.isfinite(e.value) for e in accumulator.Scalars("train/consistency_loss"))
    model.learn(50, log_interval=1)
    assert (tmp_path / "PCL_2").is_dir()


# ----------------------------------------------------------------------------------------------
# 6. target network
# ----------------------------------------------------------------------------------------------


def test_target_network_polyak_update_before_gradient_steps():
    lag = 0.8
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, target_network_lag=lag, **{**FAST, "learning_starts": 10_000})
    model.learn(100)
    assert model._n_updates == 0
    # make target and online differ so the check is not trivial
    with th.no_grad():
        for param in model.policy_target.parameters():
            param.add_(th.randn_like(param))
    online_before = [p.detach().clone() for p in model.policy.parameters()]
    target_before = [p.detach().clone() for p in model.policy_target.parameters()]
    model.train(gradient_steps=3, batch_size=4)
    assert model._n_updates == 3
    online_after = list(model.policy.parameters())
    assert any(not th.equal(a, b) for a, b in zip(online_after, online_before, strict=True))
    for target, t_before, o_before in zip(model.policy_target.parameters(), target_before, online_before, strict=True):
        th.testing.assert_close(target, lag * t_before + (1 - lag) * o_before, atol=1e-6, rtol=0)
        assert not target.requires_grad


def test_target_network_lag_one_freezes_and_zero_copies():
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, target_network_lag=1.0, **FAST)
    initial = params_of(model.policy_target)
    model.learn(200)
    assert model._n_updates > 0
    for name, value in params_of(model.policy_target).items():
        assert th.equal(value, initial[name]), name

    model = PCL("MlpPolicy", "CartPole-v1", seed=0, target_network_lag=0.0, **{**FAST, "learning_starts": 10_000})
    model.learn(50)
    online_before = params_of(model.policy)
    model.train(gradient_steps=1, batch_size=4)
    for name, value in params_of(model.policy_target).items():
        th.testing.assert_close(value, online_before[name], atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------------------------
# 7. separate value fit
# ----------------------------------------------------------------------------------------------


def test_value_fit_grad(tmp_path):
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, value_fit="grad", **{**FAST, "learning_starts": 10_000})
    value_ids = {id(p) for p in model._value_parameters}
    assert value_ids
    policy_opt_ids = {id(p) for group in model.policy.optimizer.param_groups for p in group["params"]}
    assert not value_ids & policy_opt_ids
    assert policy_opt_ids | value_ids == {id(p) for p in model.policy.parameters()}
    assert model.value_optimizer is not None
    assert {id(p) for group in model.value_optimizer.param_groups for p in group["params"]} == value_ids

    model.learn(100)
    value_before = [p.detach().clone() for p in model._value_parameters]
    model.train(gradient_steps=1, batch_size=4)
    assert any(not th.equal(p, b) for p, b in zip(model._value_parameters, value_before, strict=True))

    model.save(tmp_path / "grad.zip")
    loaded = PCL.load(tmp_path / "grad.zip")
    assert loaded.value_optimizer is not None
    state = loaded.value_optimizer.state_dict()["state"]
    assert state
    original = model.value_optimizer.state_dict()["state"]
    for key in original:
        assert th.equal(state[key]["exp_avg"], original[key]["exp_avg"])
    loaded_value_ids = {id(p) for p in loaded._value_parameters}
    loaded_policy_ids = {id(p) for group in loaded.policy.optimizer.param_groups for p in group["params"]}
    assert not loaded_value_ids & loaded_policy_ids


# ----------------------------------------------------------------------------------------------
# 8. online batch
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_online_batch", [False, True])
def test_online_batch_adds_one_update_per_iteration(use_online_batch, monkeypatch):
    gradient_steps = 2
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, use_online_batch=use_online_batch, gradient_steps=gradient_steps, **FAST)
    calls = []
    original_train = model.train

    def counting_train(*args, **kwargs):
        calls.append(model._n_updates)
        return original_train(*args, **kwargs)

    monkeypatch.setattr(model, "train", counting_train)
    model.learn(200)
    assert len(calls) > 0
    per_iteration = gradient_steps + int(use_online_batch)
    assert model._n_updates == len(calls) * per_iteration
    assert calls == [i * per_iteration for i in range(len(calls))]


@pytest.mark.parametrize("use_online_batch", [False, True])
def test_zero_gradient_steps_trains_on_the_online_batch_only(use_online_batch, monkeypatch):
    """gradient_steps=0: no replay batch; with use_online_batch one on-policy update per iteration on exactly the new steps."""
    model = PCL(
        "MlpPolicy",
        MultiDiscreteEnv(),  # 10-step episodes
        seed=0,
        use_online_batch=use_online_batch,
        **{**FAST, "gradient_steps": 0, "train_freq": (3, "episode"), "learning_starts": 0},
    )
    monkeypatch.setattr(model.replay_buffer, "sample", _raise)
    covered = []
    recent_segments = model.replay_buffer.recent_segments

    def recording(n_steps, env=None):
        batch = recent_segments(n_steps, env=env)
        covered.append((n_steps, int(batch.mask.sum()), batch.mask.shape[1]))
        return batch

    model.replay_buffer.recent_segments = recording
    model.learn(90)
    if use_online_batch:
        assert covered == [(30, 30, 3)] * 3 and model._n_updates == 3
    else:
        assert covered == [] and model._n_updates == 0


# ----------------------------------------------------------------------------------------------
# 9. acting with the target policy
# ----------------------------------------------------------------------------------------------


def _raise(*args, **kwargs):
    raise RuntimeError("the online policy must not act")


def test_sample_from_target_uses_target_policy(monkeypatch):
    acting = []
    sample_actions = actor_module.sample_actions

    def recording(policy, observation):
        acting.append(policy)
        return sample_actions(policy, observation)

    monkeypatch.setattr(actor_module, "sample_actions", recording)
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, sample_from="target", **FAST)
    model.learn(150)
    assert model._n_updates > 0
    assert len(acting) == model.num_timesteps - FAST["learning_starts"]
    assert all(policy is model.policy_target for policy in acting)

    acting.clear()
    online = PCL("MlpPolicy", "CartPole-v1", seed=0, **FAST)
    online.learn(150)
    assert acting and all(policy is online.policy for policy in acting)


# ----------------------------------------------------------------------------------------------
# Regression tests of bugs found while writing these tests
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["reset_num_timesteps", "set_env"])
def test_new_learn_does_not_stitch_episodes(how):
    model = PCL("MlpPolicy", CounterEnv(), seed=0, **{**FAST, "learning_starts": 10_000, "train_freq": 10})
    model.learn(30)
    if how == "set_env":
        model.set_env(CounterEnv())
        model.learn(30, reset_num_timesteps=False)
    else:
        model.learn(30)
    buffer = model.replay_buffer
    assert buffer.size() == 60
    for path in buffer.paths.values():
        obs = buffer.observations[path.slots, 0]
        # the observation counts the steps of the episode: a path must be one contiguous piece of one episode
        np.testing.assert_array_equal(np.diff(obs), 1.0)
    assert buffer.n_paths == 2
    # the interrupted episode is closed as a cut path that bootstraps from the state it reached
    first = buffer.paths[min(buffer.paths)]
    assert first.done and not first.terminated
    np.testing.assert_array_equal(first.final_obs, [30.0])


def test_train_with_zero_gradient_steps_and_target_sampling():
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, sample_from="target", **{**FAST, "learning_starts": 10_000})
    model.learn(50)
    model.train(gradient_steps=0, batch_size=4)
    assert model._n_updates == 0


def test_online_batch_covers_every_step_since_the_last_iteration():
    model = PCL(
        "MlpPolicy",
        MultiDiscreteEnv(),  # 10-step episodes: 100 steps per iteration span 10 paths
        seed=0,
        use_online_batch=True,
        **{**FAST, "train_freq": 100, "learning_starts": 0},
    )
    covered = []
    recent_segments = model.replay_buffer.recent_segments

    def recording(n_steps, env=None):
        batch = recent_segments(n_steps, env=env)
        covered.append((n_steps, int(batch.mask.sum())))
        return batch

    model.replay_buffer.recent_segments = recording
    model.learn(200)
    assert covered == [(100, 100), (100, 100)]


def test_distinct_paths_reaches_the_buffer_and_batches_hold_different_paths(monkeypatch):
    """``replay_buffer_kwargs={"distinct_paths": True}``: every replay batch holds each path at most once."""
    model = PCL(
        "MlpPolicy",
        "CartPole-v1",
        seed=0,
        replay_buffer_kwargs={"distinct_paths": True},
        **{**FAST, "batch_size": 8, "max_segment_length": None},
    )
    batches = []
    original_sample = model.replay_buffer.sample

    def recording_sample(*args, **kwargs):
        batch = original_sample(*args, **kwargs)
        batches.append(batch.path_ids.tolist())
        return batch

    monkeypatch.setattr(model.replay_buffer, "sample", recording_sample)
    model.learn(600)
    assert model.replay_buffer.distinct_paths and batches
    assert all(len(ids) == len(set(ids)) for ids in batches)
    assert max(len(ids) for ids in batches) == 8  # enough paths stored later on: full batches


# ----------------------------------------------------------------------------------------------
# 10. generalised state-dependent exploration (gSDE)
# ----------------------------------------------------------------------------------------------


def _count_noise_resets(monkeypatch, model: PCL) -> dict[str, list[int]]:
    calls: dict[str, list[int]] = {"policy": [], "policy_target": []}
    for name in calls:
        policy = getattr(model, name)
        original = policy.reset_noise

        def counting(n_envs: int = 1, _name: str = name, _original=original) -> None:
            calls[_name].append(n_envs)
            _original(n_envs)

        monkeypatch.setattr(policy, "reset_noise", counting)
    return calls


@pytest.mark.parametrize("sde_sample_freq, per_collection", [(-1, 1), (4, 5)])
def test_gsde_noise_is_redrawn_for_both_policies(monkeypatch, sde_sample_freq, per_collection):
    """One draw per collection of ``train_freq`` steps, plus one every ``sde_sample_freq`` steps, one matrix per env."""
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = PCL("MlpPolicy", env, seed=0, use_sde=True, sde_sample_freq=sde_sample_freq, **FAST)
    calls = _count_noise_resets(monkeypatch, model)
    model.learn(160)  # 80 vectorised steps: 5 collections of 16
    assert calls["policy"] == calls["policy_target"] == [2] * (5 * per_collection)
    assert model.policy.action_dist.exploration_matrices.shape == (2, 64, 1)


def test_gsde_actions_change_only_when_the_noise_is_redrawn():
    """The noise of a gSDE action is ``latent(s) @ M``: with ``M`` fixed, the same state gets the same action."""
    model = PCL("MlpPolicy", "Pendulum-v1", seed=0, use_sde=True, **{**FAST, "learning_starts": 0})
    model.policy.reset_noise(1)
    model._last_obs = np.array([[1.0, 0.0, 0.5]], dtype=np.float32)
    first = model._sample_action(0, n_envs=1)[1]
    np.testing.assert_array_equal(model._sample_action(0, n_envs=1)[1], first)
    model.actor.reset_noise(1)
    assert not np.array_equal(model._sample_action(0, n_envs=1)[1], first)
    assert model.actor.get_std().shape == (64, 1)
    # SB3's meaning: the acting network, a module (here the online and the target policy, either of which acts)
    assert isinstance(model.actor, th.nn.Module)
    assert {id(p) for p in model.actor.parameters()} == {
        id(p) for p in [*model.policy.parameters(), *model.policy_target.parameters()]
    }


@pytest.mark.parametrize("sample_from", ["online", "target"])
def test_the_actor_acts_with_the_policy_sample_from_names(sample_from):
    """``model.actor`` is what collection acts through: the online policy's or the target's sampled actions."""
    model = PCL("MlpPolicy", "Pendulum-v1", seed=0, sample_from=sample_from, **{**FAST, "learning_starts": 0})
    with th.no_grad():
        model.policy_target.action_net.bias.add_(5.0)  # the two policies' actions far apart
    obs = np.array([[1.0, 0.0, 0.5]], dtype=np.float32)
    model._last_obs = obs
    acting = model.policy_target if sample_from == "target" else model.policy
    actions = {}
    for name, act in [
        ("actor", lambda: model.actor(obs, sample_from)),
        ("acting", lambda: acting._predict(th.as_tensor(obs), deterministic=False).detach()),
        ("collection", lambda: th.as_tensor(model._sample_action(0, n_envs=1)[1])),
    ]:
        th.manual_seed(3)
        actions[name] = act().numpy()
    np.testing.assert_array_equal(actions["actor"], actions["acting"])
    np.testing.assert_array_equal(actions["collection"], actions["actor"])
    assert (float(actions["actor"].mean()) > 2.0) == (sample_from == "target")


def test_gsde_squashed_actions_are_stored_in_the_unit_box_and_unscaled_for_the_env():
    env = RecordActions(gym.make("Pendulum-v1"))  # actions in [-2, 2]
    model = PCL(
        "MlpPolicy",
        env,
        seed=0,
        use_sde=True,
        policy_kwargs={"squash_output": True, "log_std_init": 1.0},
        **{**FAST, "learning_starts": 40},
    )
    model.learn(200)
    order = np.concatenate([model.replay_buffer.paths[pid].slots for pid in sorted(model.replay_buffer.paths)])
    stored = model.replay_buffer.actions[order, 0]
    received = np.concatenate([a.reshape(-1) for a in env.received])
    assert np.all(np.abs(stored) <= 1.0) and np.abs(stored).max() > 0.9  # wide noise: squashed near the bounds
    np.testing.assert_allclose(2.0 * stored, received, rtol=1e-5)  # warm-up (uniform) and policy actions alike
    action, _ = model.predict(np.zeros(3, dtype=np.float32), deterministic=True)
    assert np.abs(action).max() <= 2.0


@pytest.mark.parametrize("squash", [False, True])
def test_gsde_log_prob_matches_naive_state_dependent_gaussian(squash):
    """``log pi(a|s)`` in the consistency: a Gaussian of variance ``sum_i latent_i(s)^2 sigma_ij^2``, tanh-corrected."""
    model = PCL(
        "MlpPolicy", "Pendulum-v1", seed=0, use_sde=True, policy_kwargs={"squash_output": squash, "log_std_init": -2.0}, **FAST
    )
    model.learn(120)
    batch = model.replay_buffer.sample(3, env=model._vec_normalize_env)
    _, log_prob, _, _ = model._evaluate(model.policy, batch)

    obs = batch.observations.reshape(-1, 3)
    actions = batch.actions.reshape(-1, 1).double()
    with th.no_grad():
        latent = model.policy.mlp_extractor.forward_actor(model.policy.extract_features(obs)).double()
        mean = model.policy.action_net(latent.float()).double()
        sigma = th.exp(model.policy.log_std.detach()).double()
    expected = np.zeros(len(obs))
    for n in range(len(obs)):
        for j in range(actions.shape[1]):
            std = np.sqrt(sum(latent[n, i].item() ** 2 * sigma[i, j].item() ** 2 for i in range(latent.shape[1])))
            a = actions[n, j].item()
            if squash:
                a_eps = np.clip(a, -1.0 + 1e-6, 1.0 - 1e-6)
                x = 0.5 * np.log((1 + a_eps) / (1 - a_eps))
                correction = np.log(1.0 - np.tanh(x) ** 2 + 1e-6)
            else:
                x, correction = a, 0.0
            expected[n] += -0.5 * ((x - mean[n, j].item()) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi) - correction
    actual = log_prob.detach().reshape(-1).numpy()
    assert np.isfinite(actual).all()
    # near the bounds atanh amplifies float32 rounding: compare exactly where the squashing is not saturated
    unsaturated = np.abs(actions.numpy()).max(axis=1) < 0.999 if squash else np.ones(len(obs), dtype=bool)
    assert unsaturated.sum() >= len(obs) // 2
    np.testing.assert_allclose(actual[unsaturated], expected[unsaturated], rtol=1e-4, atol=1e-4)


def test_gsde_save_load_round_trip(tmp_path):
    model = PCL(
        "MlpPolicy", "Pendulum-v1", seed=0, use_sde=True, sde_sample_freq=8, policy_kwargs={"squash_output": True}, **FAST
    )
    model.learn(100)
    model.save(tmp_path / "model.zip")
    loaded = PCL.load(tmp_path / "model.zip", env=gym.make("Pendulum-v1"))
    assert loaded.use_sde and loaded.sde_sample_freq == 8 and loaded.policy.squash_output
    obs = np.array([[0.3, -0.2, 1.0]], dtype=np.float32)
    np.testing.assert_allclose(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    loaded.learn(50, reset_num_timesteps=False)


def test_gsde_rejects_discrete_actions():
    with pytest.raises(ValueError, match="State-Dependent Exploration"):
        PCL("MlpPolicy", "CartPole-v1", use_sde=True)


@pytest.mark.parametrize(
    "policy, env_id, policy_kwargs",
    [
        ("MlpPolicy", "CartPole-v1", {}),
        ("MlpPolicy", "Pendulum-v1", {"share_features_extractor": False}),
        ("UnifiedMlpPolicy", "CartPole-v1", {}),
    ],
)
def test_distribution_and_values_is_one_pass_of_the_policy_heads(policy: str, env_id: str, policy_kwargs: dict) -> None:
    from sb3_pcl.pcl.policies import distribution_and_values

    model = PCL(policy, env_id, policy_kwargs=policy_kwargs, seed=0)
    obs = th.as_tensor(np.stack([model.observation_space.sample() for _ in range(7)]), dtype=th.float32)
    with th.no_grad():
        distribution, values = distribution_and_values(model.policy, obs, 5)
        expected = model.policy.get_distribution(obs[:5])
        actions = expected.get_actions()
        th.testing.assert_close(distribution.log_prob(actions), expected.log_prob(actions))
        th.testing.assert_close(values, model.policy.predict_values(obs))
    assert values.shape == (7, 1)


def test_adam_runs_fused_unless_the_user_picks_an_implementation() -> None:
    model = PCL("MlpPolicy", "CartPole-v1", seed=0)
    assert model.policy.optimizer.defaults["fused"] is True
    assert model.policy.optimizer.defaults["eps"] == 1e-5  # SB3's default for Adam
    model = PCL("MlpPolicy", "CartPole-v1", policy_kwargs={"optimizer_kwargs": {"foreach": True, "eps": 1e-3}}, seed=0)
    assert model.policy.optimizer.defaults["foreach"] is True and not model.policy.optimizer.defaults["fused"]
    model = PCL("MlpPolicy", "CartPole-v1", policy_kwargs={"optimizer_class": th.optim.SGD}, seed=0)
    assert isinstance(model.policy.optimizer, th.optim.SGD)


def test_learn_says_when_learning_starts_is_not_below_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """In the logs at verbose >= 1 (SB3 gives no warning there, so neither do we: tests asserting none pass)."""
    model = PCL("MlpPolicy", "CartPole-v1", learning_starts=200, seed=0, verbose=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.learn(100)
        assert "learning_starts=200 is not below the step budget" in capsys.readouterr().out
        model.learn(300, reset_num_timesteps=False)  # budget 100 + 300 = 400 > 200
        assert "learning_starts" not in capsys.readouterr().out
    quiet = PCL("MlpPolicy", "CartPole-v1", learning_starts=200, seed=0)
    quiet.learn(100)
    assert "learning_starts" not in capsys.readouterr().out


def test_rollout_is_the_deprecated_name_of_n_steps(tmp_path):
    with pytest.warns(DeprecationWarning, match="n_steps"):
        model = PCL("MlpPolicy", "CartPole-v1", rollout=3, seed=0, **{k: v for k, v in FAST.items() if k != "n_steps"})
    assert model.n_steps == 3 and not hasattr(model, "rollout")
    # a model saved before the rename records rollout: it loads as n_steps
    model.__dict__["rollout"] = model.__dict__.pop("n_steps")
    model.save(tmp_path / "old")
    loaded = PCL.load(tmp_path / "old")
    assert loaded.n_steps == 3 and "rollout" not in loaded.__dict__


def test_sb3_s_n_step_replay_warning_does_not_apply(recwarn):
    """SB3's OffPolicyAlgorithm reads n_steps for its NStepReplayBuffer and warns with a custom buffer; PCL's path
    replay takes the d-step windows itself, so the warning would only mislead."""
    model = PCL("MlpPolicy", "CartPole-v1", n_steps=5, seed=0)
    assert model.n_steps == 5 and isinstance(model.replay_buffer, PathReplayBuffer)
    assert not [w for w in recwarn.list if "n_steps" in str(w.message)]
