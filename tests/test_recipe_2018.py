"""
The options of the authors' 2018 Trust-PCL code (``hyperparams/trust_pcl.yml``'s ``mujoco-2018`` entry): unclipped
actions, acting with the policy before ``learning_starts``, a minimum of transitions per replay batch, the lambda used
before the first estimate, and the original value network and log-std initialisation of :class:`sb3_pcl.pcl.policies.
MlpPolicy`.
"""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.utils import ConstantSchedule

from sb3_pcl import PCL, TrustPCL
from sb3_pcl.hyperparams_files import load_hyperparams
from sb3_pcl.pcl.policies import MlpPolicy
from sb3_pcl.trust_pcl.lambda_search import MIN_EPISODES

FAST = {"learning_starts": 20, "batch_size": 4, "train_freq": 8, "buffer_size": 2_000, "max_segment_length": 8, "n_steps": 2}
MUJOCO_TASKS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5")


class ActionRecorder(gym.Env):
    """1-D observations, a Box action in [-1, 1] recorded as received; episodes of ``length`` steps."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)

    def __init__(self, length: int = 10) -> None:
        self.length = length
        self.received: list[np.ndarray] = []

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.full(3, 0.5, dtype=np.float32), {}

    def step(self, action):
        self.received.append(np.array(action, dtype=np.float64))
        self.t += 1
        return np.full(3, 0.5, dtype=np.float32), 0.0, self.t >= self.length, False, {}


def _received(model: PCL) -> np.ndarray:
    return np.array(model.get_env().envs[0].unwrapped.received)  # type: ignore[union-attr]


@pytest.mark.parametrize("clip_actions", [True, False])
def test_clip_actions_false_sends_the_sampled_action_outside_the_box(clip_actions):
    env = make_vec_env(ActionRecorder, n_envs=1, seed=0)
    # std e^1.5 = 4.5: most samples leave [-1, 1]
    model = PCL("MlpPolicy", env, clip_actions=clip_actions, policy_kwargs={"log_std_init": 1.5}, seed=0, **FAST)
    model.learn(60)
    received = np.abs(_received(model)[FAST["learning_starts"] :])
    if clip_actions:
        assert received.max() <= 1.0
    else:
        assert received.max() > 2.0
        # the replay holds exactly what the env received (the log-probabilities are of those actions)
        stored = model.replay_buffer.actions[: model.replay_buffer.size()]
        np.testing.assert_allclose(np.abs(stored[FAST["learning_starts"] :]), received, rtol=1e-6)
    # predict clips either way, as SB3's
    assert np.abs(model.predict(np.zeros(3, dtype=np.float32), deterministic=False)[0]).max() <= 1.0


def test_use_policy_at_warmup_acts_with_the_initial_policy():
    # a near-deterministic policy (std e^-12) acts like its mean; uniform random actions do not
    kwargs = {**FAST, "learning_starts": 50, "policy_kwargs": {"log_std_init": -12.0}, "seed": 1}
    for use_policy, spread_below in ((True, 1e-3), (False, None)):
        model = PCL("MlpPolicy", make_vec_env(ActionRecorder, n_envs=1, seed=0), use_policy_at_warmup=use_policy, **kwargs)
        model.learn(40)  # all before learning_starts
        received = _received(model)
        assert len(received) == 40 and model._n_updates == 0
        mean_action = model.policy.get_distribution(th.full((1, 3), 0.5)).distribution.mean.detach().numpy()[0]
        if spread_below is not None:
            np.testing.assert_allclose(received, np.broadcast_to(np.clip(mean_action, -1, 1), received.shape), atol=1e-3)
        else:
            assert received.std(axis=0).min() > 0.3  # uniform in [-1, 1]: std 0.58


def test_min_batch_transitions_redraws_larger_batches_until_they_hold_enough():
    env = make_vec_env(ActionRecorder, n_envs=1, seed=0, env_kwargs={"length": 3})  # 3-step episodes: short segments
    model = PCL("MlpPolicy", env, min_batch_transitions=40, **{**FAST, "batch_size": 4, "seed": 0})
    model.learn(100)
    batches = list(model._training_batches(gradient_steps=5, batch_size=4))
    for batch in batches:
        n_segments = batch.mask.shape[1]
        assert batch.mask.sum().item() >= 40
        # grown by 1.2 from 4 (then at least one more each time): 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, ...
        sizes = [4]
        while sizes[-1] < n_segments:
            sizes.append(max(sizes[-1] + 1, int(sizes[-1] * 1.2)))
        assert sizes[-1] == n_segments and n_segments > 4  # 4 segments of at most 3 steps never hold 40
    without = PCL("MlpPolicy", make_vec_env(ActionRecorder, n_envs=1, seed=0, env_kwargs={"length": 3}), **FAST)
    without.learn(100)
    assert all(batch.mask.shape[1] == 4 for batch in without._training_batches(3, 4))


def test_min_batch_transitions_stops_when_distinct_paths_cannot_grow():
    env = make_vec_env(ActionRecorder, n_envs=1, seed=0, env_kwargs={"length": 3})
    model = PCL(
        "MlpPolicy", env, min_batch_transitions=10_000, replay_buffer_kwargs={"distinct_paths": True}, **{**FAST, "seed": 0}
    )
    model.learn(60)  # 20 paths of 3 steps: never 10,000 transitions
    (batch,) = model._training_batches(gradient_steps=1, batch_size=4)
    assert batch.mask.shape[1] == model.replay_buffer.n_paths


@pytest.mark.parametrize("value", [0, -1, 2.5, "640", True])
def test_min_batch_transitions_is_checked(value):
    with pytest.raises(ValueError, match="min_batch_transitions"):
        PCL("MlpPolicy", "Pendulum-v1", min_batch_transitions=value)


@pytest.mark.parametrize("name", ["clip_actions", "use_policy_at_warmup"])
def test_boolean_options_are_checked(name):
    with pytest.raises(ValueError, match=name):
        PCL("MlpPolicy", "Pendulum-v1", **{name: "yes"})


def test_lambda_fallback_drifts_toward_500_before_the_ninth_episode_ends():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)  # 200-step episodes: 8 end within 1700 steps
    kwargs = {**FAST, "train_freq": 10, "lambda_smoothing": 0.99, "seed": 0}
    model = TrustPCL("MlpPolicy", env, lambda_fallback=500.0, **kwargs)
    model.set_logger(configure(None, []))
    model.learn(1_600)
    assert len(model._lambda_episodes) == 8 < MIN_EPISODES and model.lambda_target is None
    # smoothed in from the first iteration: lambda = 500 (1 - 0.99^k) after k iterations from lambda 0
    iterations = model._n_updates  # one batch per iteration
    assert model.relative_entropy_coef == pytest.approx(500.0 * (1 - 0.99**iterations), rel=1e-9)
    assert 300 < model.relative_entropy_coef < 500
    # the default keeps lambda (0, its initial value) until the first estimate
    default = TrustPCL("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1, seed=0), **kwargs)
    default.learn(1_600)
    assert default.relative_entropy_coef == 0.0
    # once nine episodes have ended, the bisection's estimate takes over
    model.learn(400, reset_num_timesteps=False)
    assert model.lambda_target is not None and model.lambda_target != 500.0


@pytest.mark.parametrize("value", [-1.0, math.nan, "500"])
def test_lambda_fallback_is_checked(value):
    with pytest.raises(ValueError, match="lambda_fallback"):
        TrustPCL("MlpPolicy", "Pendulum-v1", lambda_fallback=value)


def _policy(**kwargs) -> MlpPolicy:
    space = spaces.Box(-1.0, 1.0, shape=(5,), dtype=np.float32)
    actions = spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
    return MlpPolicy(space, actions, ConstantSchedule(1e-3), net_arch={"pi": [32, 32], "vf": [16, 16]}, **kwargs)


def test_the_default_mlp_policy_is_sb3s_parameter_for_parameter():
    th.manual_seed(0)
    ours = _policy()
    th.manual_seed(0)
    space = spaces.Box(-1.0, 1.0, shape=(5,), dtype=np.float32)
    actions = spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
    sb3 = ActorCriticPolicy(space, actions, ConstantSchedule(1e-3), net_arch={"pi": [32, 32], "vf": [16, 16]})
    assert ours.state_dict().keys() == sb3.state_dict().keys()
    for key, value in sb3.state_dict().items():
        assert th.equal(ours.state_dict()[key], value), key


def test_value_input_obs_squared_reads_one_obs_and_squares_without_biases():
    policy = _policy(value_input="obs_squared", value_bias=False)
    linears = [module for module in policy.mlp_extractor.value_net if isinstance(module, th.nn.Linear)]
    assert [layer.in_features for layer in linears] == [2 * 5 + 1, 16]
    assert all(layer.bias is None for layer in [*linears, policy.value_net])
    # the value of obs x is the MLP of [1, x, x^2]
    obs = th.randn(7, 5)
    expected = policy.value_net(policy.mlp_extractor.value_net[1:](th.cat([th.ones(7, 1), obs, obs**2], dim=1)))
    th.testing.assert_close(policy.predict_values(obs), expected)
    # the optimiser holds exactly the policy's parameters
    optimised = {id(p) for group in policy.optimizer.param_groups for p in group["params"]}
    assert optimised == {id(p) for p in policy.parameters()}
    # the policy side is untouched: biases as SB3's
    assert all(m.bias is not None for m in policy.mlp_extractor.policy_net if isinstance(m, th.nn.Linear))


def test_value_bias_alone_keeps_the_obs_input():
    policy = _policy(value_bias=False)
    first = policy.mlp_extractor.value_net[0]
    assert isinstance(first, th.nn.Linear) and first.in_features == 5 and first.bias is None


def test_glorot_uniform_log_std_lies_in_the_original_range():
    limit = math.sqrt(6 / (1 + 6))
    draws = th.stack([_policy(log_std_init_scheme="glorot_uniform").log_std.detach() for _ in range(20)])
    assert draws.abs().max() <= limit and draws.abs().max() > 0.8 * limit and draws.std() > 0.3
    assert th.equal(_policy().log_std.detach(), th.zeros(6))  # SB3's constant log_std_init


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"value_input": "squares"}, "value_input"),
        ({"value_bias": 0}, "value_bias"),
        ({"log_std_init_scheme": "glorot"}, "log_std_init_scheme"),
        ({"log_std_init_scheme": "glorot_uniform", "use_sde": True}, "use_sde"),
    ],
)
def test_policy_options_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _policy(**kwargs)


def test_glorot_log_std_needs_box_actions():
    with pytest.raises(ValueError, match="Box actions"):
        PCL("MlpPolicy", "CartPole-v1", policy_kwargs={"log_std_init_scheme": "glorot_uniform"})


def test_a_model_with_the_options_saves_and_loads(tmp_path):
    policy_kwargs = {"value_input": "obs_squared", "value_bias": False, "log_std_init_scheme": "glorot_uniform"}
    model = TrustPCL(
        "MlpPolicy", "Pendulum-v1", policy_kwargs=policy_kwargs, clip_actions=False, use_policy_at_warmup=True,
        min_batch_transitions=40, lambda_fallback=500.0, seed=0, **FAST,
    )  # fmt: skip
    model.learn(100)
    model.save(tmp_path / "model")
    loaded = TrustPCL.load(tmp_path / "model", env=make_vec_env("Pendulum-v1", n_envs=1, seed=1))
    assert (loaded.clip_actions, loaded.use_policy_at_warmup, loaded.min_batch_transitions, loaded.lambda_fallback) == (
        False, True, 40, 500.0,
    )  # fmt: skip
    assert loaded.policy.value_input == "obs_squared" and loaded.policy.value_net.bias is None
    for key, value in model.policy.state_dict().items():
        assert th.equal(loaded.policy.state_dict()[key], value), key
    loaded.learn(50, reset_num_timesteps=False)


def test_the_2018_entry_follows_the_authors_command():
    entry = load_hyperparams("trust_pcl", "mujoco-2018")
    kwargs = entry.kwargs
    # the README command's flags, as docs/trust_pcl.md maps them
    expected = {
        "n_steps": 1, "vf_coef": 1.0, "value_fit": "joint", "gamma": 0.995, "max_grad_norm": 40.0, "learning_rate": 1e-4,
        "buffer_size": 50_000, "batch_size": 64, "min_batch_transitions": 640, "train_freq": 10, "gradient_steps": 1,
        "max_segment_length": 10, "max_divergence": 0.001, "target_network_lag": 0.99, "sample_from": "online",
        "clip_adv": 1.0, "use_online_batch": False, "use_target_values": True, "lambda_smoothing": 0.99,
        "lambda_window": 20, "lambda_fallback": 500.0, "ent_coef": 0.0, "clip_actions": False,
        "use_policy_at_warmup": True, "learning_starts": 640,
    }  # fmt: skip
    assert {key: kwargs[key] for key in expected} == expected
    assert kwargs["replay_buffer_kwargs"] == {"alpha": 1e-4, "priority": "step", "eviction": "fifo"}
    assert kwargs["policy_kwargs"]["net_arch"] == {"pi": [256, 256], "vf": [256, 256]}
    assert kwargs["policy_kwargs"]["optimizer_kwargs"] == {"eps": 2e-4}
    assert entry.n_envs == 1 and entry.normalize is None and entry.n_timesteps == 10_000_000


@pytest.mark.parametrize("env_id", MUJOCO_TASKS)
def test_the_2018_entry_builds_for_the_five_tasks(env_id):
    pytest.importorskip("mujoco")
    kwargs = load_hyperparams("trust_pcl", "mujoco-2018").kwargs
    model = TrustPCL(env=make_vec_env(env_id, n_envs=1, seed=0), seed=0, **kwargs)
    obs_dim = model.observation_space.shape[0]
    first = model.policy.mlp_extractor.value_net[1]
    assert first.in_features == 2 * obs_dim + 1 and first.bias is None
    limit = math.sqrt(6 / (1 + model.action_space.shape[0]))
    assert model.policy.log_std.abs().max() <= limit
    model.learn(50)  # warm-up steps acted by the policy, unclipped
    assert model._n_updates == 0
