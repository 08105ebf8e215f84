"""Behaviour tests of ``Reinforce`` and ``UREX`` as SB3 algorithms, and of the LSTM policy with previous-action input.

The contracts every class shares are in ``test_run.py``, ``test_save_load.py``, ``test_spaces.py`` and
``test_hyperparameters.py``.
"""

import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.save_util import load_from_zip_file, save_to_zip_file
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnvWrapper, VecNormalize

import sb3_pcl  # noqa: F401  (registers the algorithmic tasks)
from sb3_pcl.common.recurrent import MlpPrevActionLstmPolicy, encode_actions
from sb3_pcl.recurrent_reinforce import RecurrentReinforce, RecurrentUREX
from sb3_pcl.reinforce import Reinforce
from sb3_pcl.reinforce.episodes import EpisodeBatch, collect_episode_batch
from sb3_pcl.urex import UREX

ALGOS = [Reinforce, UREX]
RECURRENT_ALGOS = [RecurrentReinforce, RecurrentUREX]


def cartpole(n_envs: int = 4, seed: int = 0):
    return make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)


def copy_env() -> gym.Env:
    return Monitor(gym.make("sb3_pcl/Copy-v0"))


def copy_vec(n_envs: int = 4):
    return DummyVecEnv([copy_env] * n_envs)


class Recorder(BaseCallback):
    """Counts the calls and keeps the batches."""

    def __init__(self):
        super().__init__()
        self.n_steps = 0
        self.n_rollouts = 0
        self.batches = []

    def _on_step(self) -> bool:
        self.n_steps += 1
        return True

    def _on_rollout_end(self) -> None:
        self.n_rollouts += 1
        self.batches.append(self.locals["batch"])


# ----------------------------------------------------------------------------------------------
# learn / save / load / predict
# ----------------------------------------------------------------------------------------------


def test_lstm_predict_state_and_episode_start():
    policy = MlpPrevActionLstmPolicy(spaces.Discrete(5), spaces.MultiDiscrete([2, 2, 4]), lambda _: 1e-3, lstm_hidden_size=8)
    obs = np.array([1, 3])
    _, fresh = policy.predict(obs, None, np.array([True, True]))
    _, state = policy.predict(obs, fresh, np.array([False, False]))
    # A non-zero state changes the distribution; episode_start=True resets all of it (LSTM and previous action).
    obs_t = th.as_tensor(obs)
    state_t = tuple(th.as_tensor(part) for part in state)
    logits = []
    for start_state, starts in [(policy.initial_state(2), th.zeros(2)), (state_t, th.ones(2)), (state_t, th.zeros(2))]:
        with th.no_grad():
            dist, _ = policy.get_distribution(obs_t, start_state, starts)
        # SB3's distribution objects are reused between calls: read the logits now.
        logits.append(th.cat([d.logits for d in dist.distribution], dim=1))
    th.testing.assert_close(logits[0], logits[1], atol=1e-7, rtol=0)
    assert (logits[0] - logits[2]).abs().max() > 1e-5
    # A single (non-vectorised) observation.
    action, single_state = policy.predict(np.int64(2))
    assert action.shape == (3,) and single_state[0].shape == (1, 1, 8)


def test_previous_action_is_an_input():
    policy = MlpPrevActionLstmPolicy(spaces.Discrete(3), spaces.Discrete(4), lambda _: 1e-3, lstm_hidden_size=8)
    h, c, _ = policy.initial_state(2)
    previous = th.zeros(1, 2, 4)
    previous[0, 0, 1] = 1.0
    previous[0, 1, 3] = 1.0
    with th.no_grad():
        dist, _ = policy.get_distribution(th.tensor([0, 0]), (h, c, previous), th.zeros(2))
    assert (dist.distribution.logits[0] - dist.distribution.logits[1]).abs().max() > 1e-5
    # Without the input, the same observation and state give the same distribution.
    blind = MlpPrevActionLstmPolicy(
        spaces.Discrete(3), spaces.Discrete(4), lambda _: 1e-3, lstm_hidden_size=8, prev_action_input=False
    )
    with th.no_grad():
        dist, _ = blind.get_distribution(th.tensor([0, 0]), blind.initial_state(2), th.zeros(2))
    th.testing.assert_close(dist.distribution.probs[0], dist.distribution.probs[1])


@pytest.mark.parametrize(
    "action_space", [spaces.Discrete(3), spaces.MultiDiscrete([2, 2, 5]), spaces.Box(-1.0, 1.0, shape=(2,))], ids=str
)
def test_value_gradient_reaches_the_lstm_unless_detached(action_space):
    for detach_value, reaches in [(False, True), (True, False)]:
        policy = MlpPrevActionLstmPolicy(
            spaces.Discrete(4), action_space, lambda _: 1e-3, lstm_hidden_size=8, detach_value=detach_value
        )
        values = policy.predict_values(th.tensor([1, 2]), policy.initial_state(2), th.ones(2))
        values.sum().backward()
        grad = policy.lstm_actor.weight_ih_l0.grad
        assert (grad is not None and grad.abs().sum() > 0) == reaches


def test_critic_lstm_is_separate_and_carried_in_the_state():
    """enable_critic_lstm: the value trains only the critic LSTM, the policy only the actor's; both states are carried."""
    policy = MlpPrevActionLstmPolicy(
        spaces.Discrete(4), spaces.Discrete(3), lambda _: 1e-3, lstm_hidden_size=8, enable_critic_lstm=True
    )
    assert policy.lstm_critic is not None and policy.state_size == 16
    assert policy.initial_state(2)[0].shape == (1, 2, 16)
    critic_params = set(policy.lstm_critic.parameters())
    assert critic_params <= {param for group in policy.optimizer.param_groups for param in group["params"]}
    assert policy.lstm_critic.weight_ih_l0.shape[1] == policy.lstm_actor.weight_ih_l0.shape[1] == 4 + 3
    assert MlpPrevActionLstmPolicy(**policy._get_constructor_parameters()).lstm_critic is not None  # what save / load rebuild

    values = policy.predict_values(th.tensor([1, 2]), policy.initial_state(2), th.ones(2))
    values.sum().backward()

    def reached(lstm: th.nn.LSTM) -> bool:
        return lstm.weight_ih_l0.grad is not None and bool(lstm.weight_ih_l0.grad.abs().sum() > 0)

    assert reached(policy.lstm_critic) and not reached(policy.lstm_actor)
    policy.zero_grad(set_to_none=True)
    dist, _ = policy.get_distribution(th.tensor([1, 2]), policy.initial_state(2), th.ones(2))
    dist.log_prob(th.tensor([0, 2])).sum().backward()
    assert reached(policy.lstm_actor) and not reached(policy.lstm_critic)

    # Each half of the state belongs to one LSTM: changing the critic's half leaves the policy as it was.
    _, state = policy.predict(np.array([1, 3]), None, np.array([True, True]))
    state_t = [th.as_tensor(part) for part in state]
    assert state_t[0][..., :8].abs().sum() > 0 and state_t[0][..., 8:].abs().sum() > 0
    changed = [part.clone() for part in state_t]
    changed[0][..., 8:] += 1.0
    with th.no_grad():
        probs = [
            policy.get_distribution(th.tensor([0, 1]), tuple(s), th.zeros(2))[0].distribution.probs.clone()
            for s in (state_t, changed)
        ]
        values = [policy.predict_values(th.tensor([0, 1]), tuple(s), th.zeros(2)) for s in (state_t, changed)]
    th.testing.assert_close(probs[0], probs[1])
    assert (values[0] - values[1]).abs().max() > 1e-5


def _episodes(observations: np.ndarray, actions: np.ndarray, mask: np.ndarray) -> EpisodeBatch:
    """:return: a batch of these time-major steps (one group of ``N`` samples, the other fields unused)"""
    n_steps, n_envs = mask.shape
    return EpisodeBatch(
        observations=observations,
        actions=actions,
        rewards=np.zeros((n_steps, n_envs), dtype=np.float32),
        mask=mask.astype(np.float32),
        episode_starts=np.zeros((n_steps, n_envs), dtype=np.float32),
        log_probs=np.zeros((n_steps, n_envs), dtype=np.float32),
        ended=np.ones(n_envs, dtype=bool),
        terminated=np.ones(n_envs, dtype=bool),
        final_observations=observations[-1],
        seeds=np.zeros(n_envs, dtype=np.int64),
        num_samples=n_envs,
    )


class BoxObservations(gym.Env):
    """Observations in ``Box(-1, 1, (3,))``, the given action space; episodes of 5 steps."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(3,))

    def __init__(self, action_space: spaces.Space):
        self.action_space = action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(3, dtype=np.float32), {}

    def step(self, action):
        self._t += 1
        return np.zeros(3, dtype=np.float32), 0.0, self._t >= 5, False, {}


@pytest.mark.parametrize("action_space", [spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(2,))], ids=str)
def test_recurrent_batch_evaluation_matches_step_by_step_evaluation(action_space):
    """Episode batches (time-major, zero initial state) evaluate as the policy's step-by-step sequence evaluation."""
    model = RecurrentReinforce("MlpPrevActionLstmPolicy", BoxObservations(action_space), policy_kwargs={"lstm_hidden_size": 8})
    policy = model.policy
    rng = np.random.default_rng(0)
    n_steps, n_envs = 5, 3
    observations = rng.uniform(-1, 1, size=(n_steps, n_envs, 3)).astype(np.float32)
    actions = np.stack([[action_space.sample() for _ in range(n_envs)] for _ in range(n_steps)])
    with th.no_grad():
        log_prob, entropy = model._evaluate_batch(_episodes(observations, actions, np.ones((n_steps, n_envs))))
        expected = policy.evaluate_sequence(th.as_tensor(observations), th.as_tensor(actions), th.zeros(n_steps, n_envs))
        # step by step: step t of env i sees the actions of steps < t only
        state = policy.initial_state(n_envs)
        for t in range(n_steps):
            taken = th.as_tensor(actions[t])
            _, step_log_prob, state = policy.act(th.as_tensor(observations[t]), state, th.zeros(n_envs), actions=taken)
            th.testing.assert_close(log_prob[t], step_log_prob)
    assert log_prob.shape == entropy.shape == (n_steps, n_envs)
    th.testing.assert_close(log_prob, expected[0])
    th.testing.assert_close(entropy, expected[2])


def test_feed_forward_steps_carry_nothing_and_evaluate_the_valid_steps_only():
    """A feed-forward policy plays each step on its own and evaluates the valid steps only, in one batch."""
    n_envs = 3
    model = Reinforce("MlpPolicy", cartpole(n_envs=n_envs))
    obs = th.as_tensor(np.random.default_rng(0).uniform(-1, 1, size=(n_envs, 4)).astype(np.float32))
    starts = np.ones(n_envs, dtype=np.float32)
    with th.no_grad():
        actions, log_prob, state = model._play_step(obs, None, starts)
    assert state is None and actions.shape == log_prob.shape == (n_envs,)
    observations = np.stack([obs.numpy()] * 2)
    mask = np.array([[1, 1, 1], [1, 0, 0]], dtype=np.float32)
    log_prob, entropy = model._evaluate_batch(_episodes(observations, np.stack([actions.numpy()] * 2), mask))
    _, expected, expected_entropy = model.policy.evaluate_actions(th.as_tensor(observations[0]), actions)
    th.testing.assert_close(log_prob[0], expected)
    th.testing.assert_close(entropy[1, :1], expected_entropy[:1])
    assert (log_prob[1, 1:] == 0).all() and (entropy[1, 1:] == 0).all()


def test_critic_lstm_refuses_detached_values():
    with pytest.raises(ValueError, match="detach_value must be False"):
        MlpPrevActionLstmPolicy(
            spaces.Discrete(4), spaces.Discrete(3), lambda _: 1e-3, enable_critic_lstm=True, detach_value=True
        )


@pytest.mark.parametrize("kind", ["dummy", "subproc"])
def test_evaluate_sequence_reproduces_collection_log_probs(kind):
    """Log-probs recorded step by step while acting equal those of the whole padded sequence, at every step."""
    n_envs = 4
    env = copy_vec(n_envs) if kind == "dummy" else SubprocVecEnv([copy_env] * n_envs, start_method="fork")
    model = RecurrentUREX("MlpPrevActionLstmPolicy", env, num_samples=2, seed=3, policy_kwargs={"lstm_hidden_size": 16})
    try:
        batch = collect_episode_batch(env, model.policy, 2, max_steps=40, base_seed=99, play_step=model._play_step)
    finally:
        env.close()
    assert batch is not None and batch.episode_starts[1:].any()  # some envs auto-reset inside the batch
    with th.no_grad():
        log_prob, values, entropy = model.policy.evaluate_sequence(
            th.as_tensor(batch.observations),
            th.as_tensor(batch.actions),
            th.as_tensor(batch.episode_starts),
        )
    assert log_prob.shape == values.shape == entropy.shape == batch.mask.shape
    np.testing.assert_allclose(log_prob.numpy(), batch.log_probs, atol=1e-5, rtol=0)
    # The training path (one fused LSTM call, no resets) agrees on the valid steps.
    with th.no_grad():
        train_log_prob, _ = model._evaluate_batch(batch)
    valid = batch.mask > 0
    np.testing.assert_allclose(train_log_prob.numpy()[valid], batch.log_probs[valid], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(train_log_prob.numpy()[~valid], 0.0)


def test_evaluate_sequence_from_a_mid_episode_state():
    """A segment evaluated from the state reached by the prefix matches the whole sequence (what PCL needs)."""
    policy = MlpPrevActionLstmPolicy(spaces.Discrete(5), spaces.MultiDiscrete([2, 3]), lambda _: 1e-3, lstm_hidden_size=8)
    rng = np.random.default_rng(0)
    n_steps, n_seq, cut = 6, 3, 2
    obs = th.as_tensor(rng.integers(0, 5, size=(n_steps, n_seq)))
    actions = th.as_tensor(
        np.stack([rng.integers(0, 2, size=(n_steps, n_seq)), rng.integers(0, 3, size=(n_steps, n_seq))], -1)
    )
    starts = th.zeros(n_steps, n_seq)
    with th.no_grad():
        full, _, _ = policy.evaluate_sequence(obs, actions, starts)
        state = policy.initial_state(n_seq)
        for t in range(cut):
            _, state = policy.get_distribution(obs[t], state, starts[t])
            state = (*state, encode_actions(actions[t], policy.action_space).reshape(1, n_seq, -1))
        tail, _, _ = policy.evaluate_sequence(obs[cut:], actions[cut:], starts[cut:], initial_state=state)
    th.testing.assert_close(tail, full[cut:])


def test_box_actions_with_both_policies():
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    for algo, policy in [(Reinforce, "MlpPolicy"), (RecurrentReinforce, "MlpPrevActionLstmPolicy")]:
        model = algo(policy, env, num_samples=2, max_steps=10, seed=0)
        callback = Recorder()
        model.learn(40, callback=callback)
        batch = callback.batches[0]
        assert batch.n_steps == 10 and not batch.ended.any()
        assert np.isfinite(model.logger.name_to_value["train/loss"])


# ----------------------------------------------------------------------------------------------
# The training step
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ALGOS)
def test_logged_loss_matches_a_per_episode_reference(algo):
    """The first update's loss, recomputed by hand from the batch's recorded log-probs (the policy has not moved)."""
    env = cartpole(n_envs=6)
    model = algo("MlpPolicy", env, num_samples=3, ent_coef=0.2, max_steps=15, seed=4)
    callback = Recorder()
    model.learn(1, callback=callback)
    batch = callback.batches[0]
    rewards = batch.returns.reshape(2, 3)
    log_probs = np.array([batch.log_probs[: batch.lengths[i], i].sum() for i in range(6)]).reshape(2, 3)
    loss = 0.0
    for g in range(2):
        if algo is UREX:
            weights = np.exp(rewards[g] / 0.2 - log_probs[g] - np.max(rewards[g] / 0.2 - log_probs[g]))
            bonus = 0.2 * 3 * weights / weights.sum()
        else:
            bonus = -0.2 * log_probs[g]
        baseline = np.mean(rewards[g] + bonus)
        loss += sum(-(rewards[g, k] + bonus[k] - baseline) * log_probs[g, k] for k in range(3))
    assert model.logger.name_to_value["train/loss"] == pytest.approx(loss / 6, abs=1e-4)
    assert model.logger.name_to_value["train/batch_return_mean"] == pytest.approx(batch.returns.mean())


def test_gradient_clipping_and_adam_eps():
    env = cartpole()
    model = Reinforce("MlpPolicy", env, num_samples=2, max_steps=20, seed=0, max_grad_norm=1e-3)
    assert model.policy.optimizer.defaults["eps"] == 2e-4
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(1)
    assert model.logger.name_to_value["train/grad_norm"] > 1e-3  # the unclipped norm is logged
    assert any(not th.equal(p, q) for p, q in zip(before, model.policy.parameters(), strict=True))
    custom = Reinforce("MlpPolicy", env, num_samples=2, policy_kwargs={"optimizer_kwargs": {"eps": 1e-8}})
    assert custom.policy.optimizer.defaults["eps"] == 1e-8


def test_ent_coef_schedule_is_followed():
    env = cartpole()
    values = []

    class EntCoefRecorder(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            if "train/ent_coef" in self.model.logger.name_to_value:
                values.append(self.model.logger.name_to_value["train/ent_coef"])

    model = UREX("MlpPolicy", env, num_samples=2, max_steps=5, ent_coef=lambda progress: 0.1 + progress, seed=0)
    model.learn(200, callback=EntCoefRecorder(), log_interval=1000)
    assert len(values) >= 2 and values == sorted(values, reverse=True)
    assert all(0.1 < value <= 1.1 for value in values)
    assert "train/tau" not in model.logger.name_to_value


# ----------------------------------------------------------------------------------------------
# SB3 integration
# ----------------------------------------------------------------------------------------------


def test_callback_can_stop_training():
    class StopNow(BaseCallback):
        def _on_step(self) -> bool:
            return False

    model = Reinforce("MlpPolicy", cartpole(), num_samples=2, seed=0)
    model.learn(10_000, callback=StopNow())
    assert model.num_timesteps == 4 and model._n_updates == 0


def test_rollout_logs_count_only_the_batch_episodes():
    env = copy_vec()
    model = RecurrentReinforce("MlpPrevActionLstmPolicy", env, num_samples=2, seed=0, policy_kwargs={"lstm_hidden_size": 8})
    callback = Recorder()
    model.learn(30, callback=callback)
    assert len(model.ep_info_buffer) == sum(int(batch.ended.sum()) for batch in callback.batches)


def test_episode_statistics_in_env_order_not_end_order():
    # the episodes of a batch end at different steps; the statistics list them by env, so that the most
    # recent ones are not just the longest
    env = copy_vec()
    model = RecurrentReinforce("MlpPrevActionLstmPolicy", env, num_samples=2, seed=0, policy_kwargs={"lstm_hidden_size": 8})
    callback = Recorder()
    model.learn(1, callback=callback)
    batch = callback.batches[-1]
    lengths = batch.mask.sum(axis=0)
    assert len(set(lengths[batch.ended].tolist())) > 1  # the episodes end at different steps
    returns = (batch.rewards * batch.mask).sum(axis=0)
    np.testing.assert_allclose([info["r"] for info in model.ep_info_buffer], returns[batch.ended], atol=1e-5)
    assert [info["l"] for info in model.ep_info_buffer] == lengths[batch.ended].astype(int).tolist()


# ----------------------------------------------------------------------------------------------
# Base class and constructor
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ALGOS)
def test_base_algorithm_without_rollout_buffer(algo):
    assert issubclass(algo, BaseAlgorithm) and not issubclass(algo, OnPolicyAlgorithm)
    model = algo("MlpPolicy", cartpole(), num_samples=2, max_steps=10, seed=0)
    model.learn(20)
    # none of the on-policy machinery: no rollout buffer, no GAE / value-loss settings
    for name in ("rollout_buffer", "n_steps", "gae_lambda", "vf_coef", "tau"):
        assert not hasattr(model, name), name
    assert model.gamma == 1.0  # SB3 code and callbacks read it: the episodes' returns are undiscounted by default
    assert set(algo.policy_aliases) == {"MlpPolicy", "CnnPolicy", "MultiInputPolicy"}


class KeyRecorder(KVWriter):
    """Keeps the keys (and values) of every dump."""

    def __init__(self) -> None:
        self.dumps: list[dict[str, Any]] = []

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
        self.dumps.append({**key_values, "step": step})

    def close(self) -> None:
        pass


@pytest.mark.parametrize("log_interval", [1, 2])
def test_logs_of_the_learn_loop(log_interval):
    model = Reinforce("MlpPolicy", cartpole(), num_samples=2, max_steps=10, seed=0)
    recorder = KeyRecorder()
    model.set_logger(Logger(folder=None, output_formats=[recorder]))
    callback = Recorder()
    model.learn(200, callback=callback, log_interval=log_interval)
    n_batches = len(callback.batches)
    assert len(recorder.dumps) == n_batches // log_interval > 1
    first, last = recorder.dumps[0], recorder.dumps[-1]
    # The logs are written before each batch's update: the first dump has the values of log_interval - 1 updates.
    if log_interval == 1:
        assert not any(key.startswith("train/") for key in first)
    else:
        assert first["train/n_updates"] == log_interval - 1
    expected = {"time/iterations", "time/fps", "time/time_elapsed", "time/total_timesteps", "rollout/ep_rew_mean"}
    assert expected | {"rollout/ep_len_mean"} <= set(last)
    assert {"train/loss", "train/ent_coef", "train/learning_rate", "train/n_updates", "train/grad_norm"} <= set(last)
    assert last["time/iterations"] == n_batches - n_batches % log_interval
    assert (
        last["time/total_timesteps"]
        == last["step"]
        == sum(batch.n_steps * 4 for batch in callback.batches[: last["time/iterations"]])
    )
    assert last["train/n_updates"] == last["time/iterations"] - 1
    if n_batches % log_interval == 0:  # the last batch was logged: the statistics are the final ones
        assert last["rollout/ep_len_mean"] == pytest.approx(np.mean([info["l"] for info in model.ep_info_buffer]))
    model.learn(50, log_interval=None)  # no dump at all
    assert len(recorder.dumps) == n_batches // log_interval


def test_callbacks_see_the_training_loop():
    events = []

    class Events(BaseCallback):
        def _on_training_start(self) -> None:
            events.append(("start", self.locals["total_timesteps"]))

        def _on_rollout_start(self) -> None:
            events.append("rollout_start")

        def _on_step(self) -> bool:
            assert {"actions", "clipped_actions", "new_obs", "rewards", "dones", "infos"} <= set(self.locals)
            events.append("step")
            return True

        def _on_rollout_end(self) -> None:
            events.append(("rollout_end", self.locals["batch"].n_steps))

        def _on_training_end(self) -> None:
            events.append("end")

    model = Reinforce("MlpPolicy", cartpole(), num_samples=2, max_steps=5, seed=0)
    model.learn(40, callback=Events())
    assert events[0] == ("start", 40) and events[-1] == "end"
    # on_step once per vectorised step of the batches
    assert events[1:-1] == ["rollout_start", *["step"] * 5, ("rollout_end", 5)] * 2
    assert model.num_timesteps == 5 * 2 * model.n_envs


def test_models_saved_by_0_1_0_load_with_their_tau(tmp_path):
    """A 0.1.0 save holds ``tau`` (the coefficient), a dummy ``ent_coef`` of 0 and OnPolicyAlgorithm's attributes."""
    model = UREX("MlpPolicy", cartpole(), ent_coef=0.3, num_samples=2, max_steps=10, seed=0)
    model.learn(20)
    model.save(tmp_path / "new")
    data, params, variables = load_from_zip_file(tmp_path / "new")
    assert data is not None
    data.update(ent_coef=0.0, tau=0.3, tau_schedule=data.pop("ent_coef_schedule"), shared_curriculum=True, n_steps=10)
    data.update(gamma=0.99, gae_lambda=1.0, vf_coef=0.0, rollout_buffer_class=None, rollout_buffer_kwargs={})
    save_to_zip_file(tmp_path / "old", data=data, params=params, pytorch_variables=variables)
    loaded = UREX.load(tmp_path / "old", env=cartpole())
    assert loaded.ent_coef == 0.3 and loaded.ent_coef_schedule(0.5) == 0.3
    for name in ("tau", "tau_schedule", "shared_curriculum", "n_steps", "gae_lambda", "vf_coef"):
        assert not hasattr(loaded, name), name
    assert loaded.gamma == 1.0  # 0.1.0's unused on-policy gamma is not read: its episodes were undiscounted
    loaded.learn(20)
    assert loaded.logger.name_to_value["train/ent_coef"] == 0.3


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ALGOS)
def test_default_construction_on_a_single_env_learns(algo):
    """``algo("MlpPolicy", "CartPole-v1")``: one env plays the K copies of a start state one after another."""
    model = algo("MlpPolicy", "CartPole-v1", max_steps=50, seed=0)
    assert model.n_envs == 1 and model.num_samples == 2
    callback = Recorder()
    model.learn(300, callback=callback)
    assert model.num_timesteps >= 300 and model._n_updates == len(callback.batches) >= 2
    assert np.isfinite(model.logger.name_to_value["train/loss"])
    for batch in callback.batches:
        assert batch.n_envs == 2 and batch.n_groups == 1 and batch.seeds[0] == batch.seeds[1]
        np.testing.assert_array_equal(batch.observations[0, 0], batch.observations[0, 1])
    assert callback.n_steps == sum(int(batch.lengths.sum()) for batch in callback.batches)  # the passes, step by step
    assert len({int(batch.seeds[0]) for batch in callback.batches}) == len(callback.batches)  # a new start state each batch


@pytest.mark.parametrize("algo", ALGOS)
def test_n_envs_not_a_multiple_of_num_samples_learns(algo):
    """3 envs, K = 2: 3 start states per batch, played in 2 passes, each with its 2 copies starting identically."""
    model = algo("MlpPolicy", cartpole(n_envs=3), num_samples=2, max_steps=20, seed=0)
    callback = Recorder()
    model.learn(200, callback=callback)
    assert np.isfinite(model.logger.name_to_value["train/loss"])
    for batch in callback.batches:
        assert batch.n_envs == 6 and batch.n_groups == 3
        first = batch.observations[0].reshape(3, 2, -1)
        np.testing.assert_array_equal(first[:, 0], first[:, 1])
        assert not np.array_equal(first[0, 0], first[1, 0])
    # Every episode of a batch that ended enters the episode statistics once.
    assert len(model.ep_info_buffer) == min(100, sum(int(batch.ended.sum()) for batch in callback.batches))


NAN, INF = float("nan"), float("inf")


class NanRewardAfter(VecEnvWrapper):
    """Gives env 1 a NaN reward once the VecEnv has made ``n_steps`` steps (the last batch of a short run)."""

    def __init__(self, venv, n_steps: int):
        super().__init__(venv)
        self.n_steps, self.t = n_steps, 0

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self.t += 1
        if self.t >= self.n_steps:
            rewards = rewards.copy()
            rewards[1] = np.nan
        return obs, rewards, dones, infos


@pytest.mark.parametrize("algo", ALGOS)
def test_nan_reward_in_the_last_batch_raises_and_leaves_the_model_finite(algo):
    """A NaN reward used to make learn() return normally with all-NaN parameters."""
    model = algo("MlpPolicy", NanRewardAfter(cartpole(), 15), num_samples=2, max_steps=10, seed=0)
    with pytest.raises(ValueError, match=r"^Non-finite reward \(NaN or inf\) at env index \[1\]: refusing to store it"):
        model.learn(80)
    assert model._n_updates == 1  # the first batch trained, the second was refused
    assert all(th.isfinite(p).all() for p in model.policy.parameters())


@pytest.mark.parametrize("n_envs", [4, 1])
@pytest.mark.parametrize("algo", ALGOS)
def test_learn_with_vec_normalize(algo, n_envs):
    """VecNormalize (observations and rewards) changes its statistics between resets; learn() trains anyway."""
    env = VecNormalize(cartpole(n_envs=n_envs), norm_obs=True, norm_reward=True)
    model = algo("MlpPolicy", env, num_samples=2, max_steps=20, seed=0)
    callback = Recorder()
    model.learn(200, callback=callback)
    assert model._n_updates >= 2 and np.isfinite(model.logger.name_to_value["train/loss"])
    assert env.obs_rms.count > 200 and all(th.isfinite(p).all() for p in model.policy.parameters())
    if n_envs == 4:  # one pass: the copies of a group see the same normalised first observation
        for batch in callback.batches:
            first = batch.observations[0].reshape(2, 2, -1)
            np.testing.assert_array_equal(first[:, 0], first[:, 1])


def test_unseedable_env_falls_back_to_unsynchronized_groups_with_a_warning():
    class Unseeded(gym.Env):
        observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        action_space = spaces.Discrete(2)

        def __init__(self):
            self._rng = np.random.default_rng()

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self._rng.uniform(-1, 1, size=1).astype(np.float32), {}

        def step(self, action):
            return np.zeros(1, dtype=np.float32), 0.0, True, False, {}

    model = Reinforce("MlpPolicy", DummyVecEnv([Unseeded] * 4), num_samples=2)
    with pytest.warns(UserWarning, match="cannot be reset to a given seed.*unsynchronized groups"):
        model.learn(10)
    assert model.num_timesteps >= 10 and model._n_updates >= 1


class CoinEnv(gym.Env):
    """An env whose reset ignores the seed and has only two distinct first observations (drawn from np.random)."""

    observation_space = spaces.Discrete(2)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return int(np.random.randint(2)), {}

    def step(self, action):
        self._t += 1
        return int(np.random.randint(2)), float(action), self._t >= 3, False, {}


@pytest.mark.parametrize("algo", ALGOS)
def test_unseedable_env_under_vec_frame_stack_falls_back(algo):
    # VecFrameStack returns its one stacking buffer at every reset: the probe must compare copies of it.
    from stable_baselines3.common.vec_env import VecFrameStack

    class Unseeded(gym.Env):
        observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            self._t = 0
            return np.random.uniform(-1, 1, size=2).astype(np.float32), {}

        def step(self, action):
            self._t += 1
            return np.random.uniform(-1, 1, size=2).astype(np.float32), 1.0, self._t >= 4, False, {}

    model = algo("MlpPolicy", VecFrameStack(DummyVecEnv([Unseeded] * 2), 3), seed=0)
    with pytest.warns(UserWarning, match="unsynchronized groups"):
        model.learn(40)
    assert model._synchronized is False and model._n_updates >= 1


@pytest.mark.parametrize("n_envs", [1, 2, 4])
def test_unseedable_env_with_two_first_observations_always_falls_back(n_envs):
    # Two resets of such an env agree by chance half the time (per env): every learn() must still fall back.
    for seed in range(12):
        model = Reinforce("MlpPolicy", DummyVecEnv([CoinEnv] * n_envs), seed=seed)
        with pytest.warns(UserWarning, match="unsynchronized groups"):
            model.learn(60)
        assert model._synchronized is False


def test_group_sync_error_of_a_seedable_env_is_still_raised():
    # The stronger probe must not hide groups that really drift apart on an env whose reset honours the seed.
    from sb3_pcl.reinforce.episodes import GroupSyncError

    class Drifting(gym.Env):
        observation_space = spaces.Box(0.0, 100.0, shape=(1,), dtype=np.float32)
        action_space = spaces.Discrete(2)

        def __init__(self, offset):
            self.offset = offset

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.array([self.offset], dtype=np.float32), {}

        def step(self, action):
            return np.array([self.offset], dtype=np.float32), 0.0, True, False, {}

    model = Reinforce("MlpPolicy", DummyVecEnv([lambda: Drifting(0.0), lambda: Drifting(1.0)]), seed=0)
    with pytest.raises(GroupSyncError, match="copies of groups \\[0\\] have different first observations"):
        model.learn(10)


class MatrixActionEnv(gym.Env):
    """Box actions of shape (2, 2), checked in ``step``."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    action_space = spaces.Box(-1.0, 1.0, shape=(2, 2), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.uniform(-1, 1, size=3).astype(np.float32), {}

    def step(self, action):
        assert np.shape(action) == (2, 2)
        self._t += 1
        return self.np_random.uniform(-1, 1, size=3).astype(np.float32), -float(np.sum(action**2)), self._t >= 4, False, {}


@pytest.mark.parametrize(
    ("algo", "policy"),
    [(algo, "MlpPolicy") for algo in ALGOS] + [(algo, "MlpPrevActionLstmPolicy") for algo in RECURRENT_ALGOS],
)
def test_matrix_box_actions_learn_and_predict(algo, policy):
    model = algo(policy, DummyVecEnv([MatrixActionEnv] * 2), seed=0)
    model.learn(40)
    batch = model._batch
    assert batch.actions.shape[2:] == (2, 2)
    # the log-probabilities evaluated for the loss are those of the collection
    log_prob, _ = model._evaluate_batch(batch)
    assert th.all(th.isfinite(log_prob))
    actions, _ = model.predict(np.zeros(3, dtype=np.float32))
    assert actions.shape == (2, 2)


def test_matrix_box_actions_evaluate_to_the_collected_log_probs():
    model = Reinforce("MlpPolicy", DummyVecEnv([MatrixActionEnv] * 2), seed=0, learning_rate=0.0)
    model.learn(20)
    batch = model._batch
    log_prob, _ = model._evaluate_batch(batch)
    expected = np.where(batch.mask > 0, batch.log_probs, 0.0)
    np.testing.assert_allclose(log_prob.detach().numpy(), expected, rtol=1e-5, atol=1e-5)


class KeepRewardAxis(VecEnvWrapper):
    """Returns the rewards as ``(n_envs, 1)`` (or another shape) as some wrappers do."""

    def __init__(self, venv, shape_of):
        super().__init__(venv)
        self.shape_of = shape_of

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        return obs, np.resize(rewards, self.shape_of(len(rewards))), dones, infos


@pytest.mark.parametrize("algo", ALGOS)
def test_rewards_of_shape_n_envs_by_1_train_as_flat_rewards(algo):
    flat = algo("MlpPolicy", cartpole(2), seed=3, max_steps=20).learn(40)  # each model seeds the global RNGs
    column = algo("MlpPolicy", KeepRewardAxis(cartpole(2), lambda n: (n, 1)), seed=3, max_steps=20).learn(40)
    np.testing.assert_array_equal(column._batch.rewards, flat._batch.rewards)
    for a, b in zip(flat.policy.parameters(), column.policy.parameters(), strict=True):
        assert th.equal(a, b)


@pytest.mark.parametrize("algo", ALGOS)
def test_rewards_of_another_shape_are_refused_naming_the_shape(algo):
    model = algo("MlpPolicy", KeepRewardAxis(cartpole(2), lambda n: (n, 2)), seed=3)
    with pytest.raises(ValueError, match=re.escape("rewards of shape (2, 2): expected one scalar reward per env")):
        model.learn(10)


# ----------------------------------------------------------------------------------------------
# Learning
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_reinforce_improves_cartpole():
    callback = Recorder()
    model = Reinforce("MlpPolicy", cartpole(n_envs=8), num_samples=2, seed=0)
    model.learn(20_000, callback=callback)
    returns = [float(batch.returns.mean()) for batch in callback.batches]
    assert np.mean(returns[-3:]) > 2 * np.mean(returns[:3]) and np.mean(returns[-3:]) > 80
