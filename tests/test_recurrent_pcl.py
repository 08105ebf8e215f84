"""
RecurrentPCL and RecurrentTrustPCL: PCL and Trust-PCL with the recurrent ``MlpPrevActionLstmPolicy``.

The replay evaluates each sampled segment by replaying its path from the path's first step
(``PathBatch.history``), so the recurrent state at the segment is exact for the current parameters.
The key check: log-probabilities recorded step by step while collecting (random warm-up actions,
several envs, several episodes per env) are reproduced by the training code's replay to 1e-5.
"""

import base64
import dataclasses
import json
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
import yaml
from gymnasium import spaces
from sb3_contrib.ppo_recurrent.policies import MlpLstmPolicy as ContribMlpLstmPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_pcl import PCL, RecurrentPCL, RecurrentTrustPCL, TrustPCL
from sb3_pcl.common.path_buffer import PathBatch, PathReplayBuffer
from sb3_pcl.common.recurrent import MlpPrevActionLstmPolicy, encode_actions
from sb3_pcl.common.recurrent.buffers import RecurrentPathBatch, RecurrentPathReplayBuffer
from sb3_pcl.pcl.consistency import path_consistency

LSTM = {"lstm_hidden_size": 16}


# ----------------------------------------------------------------------------------------------
# environments
# ----------------------------------------------------------------------------------------------


class RandomPathsEnv(gym.Env):
    """Random observations and rewards; episodes end at random (terminated) or at ``max_steps`` (truncated)."""

    def __init__(self, action_space: spaces.Space | None = None, max_steps: int = 9, p_end: float = 0.15):
        self.observation_space = spaces.Box(-3.0, 3.0, (3,), np.float32)
        self.action_space = action_space if action_space is not None else spaces.Discrete(3)
        self.max_steps = max_steps
        self.p_end = p_end
        self.n_steps = 0

    def _obs(self) -> np.ndarray:
        return self.np_random.normal(size=3).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.n_steps = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.n_steps += 1
        terminated = bool(self.np_random.random() < self.p_end)
        truncated = not terminated and self.n_steps >= self.max_steps
        return self._obs(), float(self.np_random.normal()), terminated, truncated, {}


class CueRecallEnv(gym.Env):
    """
    A memory task: a cue (one of two) is shown at step 0 only; after ``delay`` blank steps a query
    observation asks for it, and naming it (action = cue) pays 1. Any memoryless policy sees the same
    query observation whatever the cue, so its expected return is at most 0.5.
    """

    def __init__(self, delay: int = 1):
        self.observation_space = spaces.Box(0.0, 1.0, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.delay = delay
        self.cue = 0
        self.n_steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.cue = int(self.np_random.integers(2))
        self.n_steps = 0
        obs = np.zeros(3, dtype=np.float32)
        obs[self.cue] = 1.0
        return obs, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.n_steps += 1
        obs = np.zeros(3, dtype=np.float32)
        if self.n_steps > self.delay:
            return obs, float(int(action) == self.cue), True, False, {}
        if self.n_steps == self.delay:
            obs[2] = 1.0  # the query
        return obs, 0.0, False, False, {}


def random_paths_env(n_envs: int, action_space: spaces.Space | None = None, seed: int = 0) -> DummyVecEnv:
    return make_vec_env(lambda: RandomPathsEnv(action_space), n_envs=n_envs, seed=seed)


def perturb(module: th.nn.Module, scale: float = 0.3, seed: int = 0) -> None:
    generator = th.Generator().manual_seed(seed)
    with th.no_grad():
        for param in module.parameters():
            param.add_(scale * th.randn(param.shape, generator=generator))


# ----------------------------------------------------------------------------------------------
# the buffer's path histories
# ----------------------------------------------------------------------------------------------


def test_buffer_history_holds_each_segment_path_from_its_start() -> None:
    buffer = RecurrentPathReplayBuffer(
        100, spaces.Box(-100, 100, (1,)), spaces.Box(-100, 100, (1,)), device="cpu", max_segment_length=3
    )
    lengths = [7, 2, 5]
    for path_idx, length in enumerate(lengths):
        observations = 100.0 * path_idx + np.arange(length + 1, dtype=np.float32).reshape(-1, 1)  # the last one is final
        buffer.add_path(observations, -observations[:-1], np.ones(length), terminated=path_idx != 1)
    np.random.seed(0)
    batch = buffer.sample(40)
    assert isinstance(batch, RecurrentPathBatch)
    history = batch.history
    assert history.observations.shape[0] == max(lengths) + 1
    assert int(history.offsets.max()) > 0
    for col, path_id in enumerate(batch.path_ids):
        length = int(batch.mask[:, col].sum())
        offset = int(history.offsets[col])
        base = 100.0 * int(path_id)
        end = offset + length
        column = history.observations[:, col, 0].numpy()
        np.testing.assert_array_equal(column[: end + 1], base + np.arange(end + 1))  # path prefix, segment, final state
        np.testing.assert_array_equal(column[end + 1 :], base + end)  # padding repeats the final state
        np.testing.assert_array_equal(history.actions[:end, col, 0].numpy(), -(base + np.arange(end)))
        assert float(batch.observations[0, col, 0]) == base + offset
        assert float(batch.final_observations[col, 0]) == base + end
    plain = PathReplayBuffer(100, spaces.Box(-1, 1, (1,)), spaces.Discrete(2), device="cpu")
    plain.add_path(np.zeros((3, 1)), np.zeros(2), np.ones(2))
    assert type(plain.sample(2)) is PathBatch and not hasattr(plain.sample(2), "history")


# ----------------------------------------------------------------------------------------------
# (a) replay from the path start reproduces the log-probabilities of collection
# ----------------------------------------------------------------------------------------------


class StepByStepRecorder(BaseCallback):
    """
    Re-runs the acting policy step by step during collection, with its own recurrent state, on the
    observations and actions of every env (sb3-contrib's ``get_distribution`` / ``predict_values``
    API, independent of the replay code): records ``log pi(a_t | history)`` and ``V(s_t)`` per env and
    the largest gap between its state and the model's collection state.
    """

    def __init__(self, acting: MlpPrevActionLstmPolicy):
        super().__init__()
        self.acting = acting
        self.log_probs: list[list[float]] = []
        self.values: list[list[float]] = []
        self.state_gap = 0.0
        self.episode_ends = 0

    def _on_training_start(self) -> None:
        n_envs = self.training_env.num_envs
        self.state = self.acting.initial_state(n_envs)
        self.starts = np.ones(n_envs, dtype=np.float32)
        self.log_probs = [[] for _ in range(n_envs)]
        self.values = [[] for _ in range(n_envs)]

    def _on_step(self) -> bool:
        n_envs = self.training_env.num_envs
        policy = self.acting
        # The transition is stored after this callback: ``_last_obs`` is still the observation acted on.
        obs, _ = policy.obs_to_tensor(self.model._last_obs)
        actions = th.as_tensor(self.locals["buffer_actions"])
        starts = th.as_tensor(self.starts)
        with th.no_grad():
            distribution, (h, c) = policy.get_distribution(obs, self.state, starts)
            values = policy.predict_values(obs, self.state, starts)
            if isinstance(policy.action_space, spaces.Discrete):
                log_prob = distribution.log_prob(actions.long().reshape(-1))
            elif isinstance(policy.action_space, spaces.MultiDiscrete):
                log_prob = distribution.log_prob(actions.long())
            else:
                log_prob = distribution.log_prob(actions.float())
        previous = encode_actions(actions, policy.action_space).reshape(1, n_envs, -1)
        self.state = (h, c, previous)
        collection_state = self.model._collection_state
        assert collection_state is not None
        gap = max(float((mine - theirs).abs().max()) for mine, theirs in zip(self.state, collection_state, strict=True))
        self.state_gap = max(self.state_gap, gap)
        for env_idx in range(n_envs):
            self.log_probs[env_idx].append(float(log_prob[env_idx]))
            self.values[env_idx].append(float(values[env_idx]))
        dones = np.asarray(self.locals["dones"])
        self.episode_ends += int(dones.sum())
        self.starts = dones.astype(np.float32)
        return True


def collect_without_learning(
    model: RecurrentPCL, acting: MlpPrevActionLstmPolicy, total_timesteps: int, learning_starts: int
) -> StepByStepRecorder:
    """Collect with frozen parameters (no gradient step: ``gradient_steps=0`` never calls ``train``)."""
    recorder = StepByStepRecorder(acting)
    model.learning_starts = learning_starts
    model.learn(total_timesteps, callback=recorder)
    return recorder


def check_batch_against_recording(
    model: RecurrentPCL, policy: MlpPrevActionLstmPolicy, batch: PathBatch, recorder: StepByStepRecorder
) -> int:
    """
    Assert that ``model._evaluate(policy, batch)`` reproduces the recorded log-probabilities and values.

    :return: the number of segments that start inside their path (their state comes from the replayed prefix)
    """
    assert isinstance(batch, RecurrentPathBatch)
    with th.no_grad():
        values, log_prob, final_values, _ = model._evaluate(policy, batch)
    buffer = model.replay_buffer
    inside = 0
    for col, path_id in enumerate(batch.path_ids):
        path = buffer.paths[int(path_id)]
        assert not path.dropped_head
        length = int(batch.mask[:, col].sum())
        offset = int(batch.history.offsets[col])
        inside += offset > 0
        # Transition k of a path was added by the buffer's (first_step + k)-th ``add``, the recorder's step first_step + k - 1.
        first = path.first_step - 1 + offset
        expected = recorder.log_probs[path.env_idx][first : first + length]
        np.testing.assert_allclose(log_prob[:length, col].numpy(), expected, atol=1e-5, rtol=0)
        np.testing.assert_allclose(
            values[:length, col].numpy(), recorder.values[path.env_idx][first : first + length], atol=1e-5
        )
        end = offset + length
        if end < len(path):  # the segment bootstraps from the value of the path's next state
            np.testing.assert_allclose(float(final_values[col]), recorder.values[path.env_idx][first + length], atol=1e-5)
        elif path.done and path.terminated:
            assert float(final_values[col]) == 0.0
    return inside


@pytest.mark.parametrize("sample_from", ["online", "target"])
@pytest.mark.parametrize(
    "action_space, critic_lstm",
    [
        (spaces.Discrete(3), False),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), False),
        (spaces.MultiDiscrete([2, 3]), False),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), True),
    ],
    ids=str,
)
def test_replay_from_path_start_reproduces_collected_log_probs(
    sample_from: str, action_space: spaces.Space, critic_lstm: bool
) -> None:
    env = random_paths_env(3, action_space)
    model = RecurrentPCL(
        "MlpPrevActionLstmPolicy",
        env,
        gradient_steps=0,
        sample_from=sample_from,
        max_segment_length=4,
        batch_size=64,
        seed=0,
        policy_kwargs={**LSTM, "enable_critic_lstm": critic_lstm},
    )
    # Online and target policies differ: the acting one must carry its own state.
    perturb(model.policy_target)
    acting = model.policy_target if sample_from == "target" else model.policy
    other = model.policy if sample_from == "target" else model.policy_target
    # 12 random warm-up steps per env, then the acting policy's own actions.
    recorder = collect_without_learning(model, acting, total_timesteps=3 * 40, learning_starts=3 * 12)

    assert recorder.state_gap < 1e-5, "the collection state is not the acting policy's step-by-step state"
    assert recorder.episode_ends >= 6 and len(model.replay_buffer.paths) >= 9  # several episodes in every env
    assert isinstance(model.replay_buffer, RecurrentPathReplayBuffer)

    np.random.seed(0)
    batch = model.replay_buffer.sample(64)
    assert check_batch_against_recording(model, acting, batch, recorder) >= 10
    # The online batch (recent_segments, use_online_batch) carries its history too.
    recent = model.replay_buffer.recent_segments(5)
    assert recent is not None
    check_batch_against_recording(model, acting, recent, recorder)

    # The check is sharp: a zero state at the segment start, or the other network, does not reproduce them.
    with th.no_grad():
        zero_start, _, _ = acting.evaluate_sequence(batch.observations, batch.actions, th.zeros(batch.mask.shape))
        _, other_log_prob, _, _ = model._evaluate(other, batch)
        own_log_prob = model._evaluate(acting, batch)[1]
    assert isinstance(batch, RecurrentPathBatch)
    mid_path = (batch.history.offsets > 0).unsqueeze(0) & (batch.mask > 0)
    assert (zero_start - own_log_prob)[mid_path].abs().max() > 1e-3
    assert (other_log_prob - own_log_prob)[batch.mask > 0].abs().max() > 1e-3


# ----------------------------------------------------------------------------------------------
# (b) learning: a memory task a memoryless policy cannot solve
# ----------------------------------------------------------------------------------------------


def test_pcl_lstm_learns_a_memory_task() -> None:
    env = make_vec_env(CueRecallEnv, n_envs=4, seed=0)
    model = RecurrentPCL(
        "MlpPrevActionLstmPolicy",
        env,
        learning_rate=3e-3,
        learning_starts=200,
        batch_size=16,
        train_freq=2,
        n_steps=3,
        gamma=1.0,
        seed=0,
        policy_kwargs=LSTM,
    )
    model.learn(1500)
    eval_env = make_vec_env(CueRecallEnv, n_envs=1, seed=100)
    mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=100)
    assert mean_return >= 0.9, f"{mean_return} (a memoryless policy gets 0.5 in expectation)"


@pytest.mark.slow
def test_mlp_pcl_stays_at_the_memoryless_bound() -> None:
    """The same recipe with a feed-forward policy cannot beat 0.5 by much (the task does need memory)."""
    env = make_vec_env(CueRecallEnv, n_envs=4, seed=0)
    model = PCL(
        "MlpPolicy", env, learning_rate=3e-3, learning_starts=200, batch_size=16, train_freq=2, n_steps=3, gamma=1.0, seed=0
    )
    model.learn(3000)
    mean_return, _ = evaluate_policy(model, make_vec_env(CueRecallEnv, n_envs=1, seed=100), n_eval_episodes=200)
    assert mean_return < 0.7


# ----------------------------------------------------------------------------------------------
# (c) Trust-PCL: the relative-entropy term uses the target's recurrent evaluation
# ----------------------------------------------------------------------------------------------


def target_log_probs_by_full_replay(policy: MlpPrevActionLstmPolicy, batch: PathBatch) -> th.Tensor:
    """``log pi'`` of the segment steps from sb3-contrib's ``evaluate_actions`` over the whole path (independent code path)."""
    assert isinstance(batch, RecurrentPathBatch)
    history = batch.history
    with th.no_grad():
        full, _, _ = policy.evaluate_sequence(history.observations, history.actions, th.zeros(history.observations.shape[:2]))
    lengths = batch.mask.sum(0).long()
    steps = th.arange(batch.mask.shape[0]).unsqueeze(1)
    rows = history.offsets.unsqueeze(0) + th.minimum(steps, (lengths - 1).unsqueeze(0))
    return full[rows, th.arange(batch.mask.shape[1]).unsqueeze(0)]


def test_trust_pcl_relative_entropy_uses_the_target_replay() -> None:
    env = random_paths_env(2, seed=1)
    model = RecurrentTrustPCL(
        "MlpPrevActionLstmPolicy",
        env,
        learning_starts=60,
        train_freq=4,
        max_segment_length=5,
        relative_entropy_coef=0.5,
        max_divergence=None,
        seed=1,
        policy_kwargs=LSTM,
    )
    model.learn(200)  # runs, with the LSTM target network
    assert model.logger.name_to_value["train/kl_to_target"] >= 0.0
    perturb(model.policy_target, seed=1)
    batch = model.replay_buffer.sample(16)
    assert isinstance(batch, RecurrentPathBatch) and int(batch.history.offsets.max()) > 0
    ent_coef = 0.01
    with th.no_grad():
        values, log_prob, final_values, _ = model._evaluate(model.policy, batch)
        residual = model._consistency(batch, values, log_prob, final_values, ent_coef).residual
        expected_target = target_log_probs_by_full_replay(model.policy_target, batch)

        def consistency_with(target_log_probs: th.Tensor) -> th.Tensor:
            return path_consistency(
                batch.rewards,
                log_prob,
                values,
                final_values,
                batch.mask,
                gamma=model.gamma,
                n_steps=model.n_steps,
                ent_coef=ent_coef,
                target_log_probs=target_log_probs,
                relative_entropy_coef=model.relative_entropy_coef,
                start_windows=model.start_windows,
            ).residual

        th.testing.assert_close(residual, consistency_with(expected_target), atol=1e-5, rtol=0)
        # Not the online log-probabilities, nor the target evaluated from a zero state at the segment start.
        assert (residual - consistency_with(log_prob)).abs().max() > 1e-3
        stale, _, _ = model.policy_target.evaluate_sequence(batch.observations, batch.actions, th.zeros(batch.mask.shape))
        assert (residual - consistency_with(stale)).abs().max() > 1e-3

        # KL to the target: both policies replayed from the path starts.
        target_distribution = model._evaluate(model.policy_target, batch)[3]
        online_distribution = model._evaluate(model.policy, batch)[3]
        expected_kl = kl_divergence(target_distribution, online_distribution)[batch.mask.reshape(-1) > 0].mean()
    assert model._kl_to_target(batch) == pytest.approx(float(expected_kl), rel=1e-5)
    assert model._kl_to_target(batch) > 1e-4


def test_trust_pcl_lstm_target_values_and_sampling_from_target() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = RecurrentTrustPCL(
        "MlpPrevActionLstmPolicy",
        env,
        learning_starts=100,
        train_freq=8,
        sample_from="target",
        use_target_values=True,
        use_online_batch=True,
        seed=0,
        policy_kwargs=LSTM,
    )
    model.learn(300)
    # the first iteration trains on one online batch + one replay batch, the others too
    n_iterations = (300 - 100) // (8 * 2) + 1
    assert model._n_updates >= 2 * (n_iterations - 1)
    assert np.isfinite(model.logger.name_to_value["train/consistency_loss"])


# ----------------------------------------------------------------------------------------------
# (d) predict with state, evaluate_policy, save / load, VecNormalize
# ----------------------------------------------------------------------------------------------


def zip_data(path: Path) -> dict[str, Any]:
    """:return: the ``data`` entry (JSON) of a saved model"""
    with zipfile.ZipFile(path) as saved:
        return json.loads(saved.read("data"))


def rewrite_zip_data(source: Path, target: Path, data: dict[str, Any]) -> None:
    """Copy the saved model ``source`` to ``target`` with ``data`` as its ``data`` entry (as an earlier version saved it)."""
    with zipfile.ZipFile(source) as new, zipfile.ZipFile(target, "w") as old:
        for name in new.namelist():
            old.writestr(name, json.dumps(data).encode() if name == "data" else new.read(name))


def test_load_model_saved_with_the_single_module_policy_path(tmp_path: Path) -> None:
    # The policy class as SB3 serialised it when sb3_pcl.common.recurrent was one module (cloudpickle of the class
    # by reference: sb3_pcl.common.recurrent.MlpLstmPolicy); the package resolves that former class name, so such zips
    # load (with a DeprecationWarning).
    old_policy_class = "gAWVLgAAAAAAAACMGHNiM19wY2wuY29tbW9uLnJlY3VycmVudJSMDU1scExzdG1Qb2xpY3mUk5Qu"
    assert pickle.loads(base64.b64decode(old_policy_class)) is MlpPrevActionLstmPolicy
    model = RecurrentPCL(
        "MlpPrevActionLstmPolicy", "CartPole-v1", learning_starts=50, train_freq=4, seed=0, policy_kwargs=LSTM
    )
    model.save(tmp_path / "new.zip")
    data = zip_data(tmp_path / "new.zip")
    assert data["policy_class"][":serialized:"] != old_policy_class  # saved under the new module path
    data["policy_class"][":serialized:"] = old_policy_class
    rewrite_zip_data(tmp_path / "new.zip", tmp_path / "old.zip", data)
    loaded = RecurrentPCL.load(tmp_path / "old.zip")
    assert type(loaded.policy) is MlpPrevActionLstmPolicy
    for key, value in model.policy.state_dict().items():
        th.testing.assert_close(loaded.policy.state_dict()[key], value)


def test_load_model_saved_with_the_retired_replay_from_start(tmp_path: Path) -> None:
    """Earlier versions saved ``replay_buffer_class=PathReplayBuffer`` and ``replay_from_start`` in the kwargs."""
    model = RecurrentPCL(
        "MlpPrevActionLstmPolicy", "CartPole-v1", learning_starts=50, train_freq=4, seed=0, policy_kwargs=LSTM
    )
    model.save(tmp_path / "new.zip")
    data = zip_data(tmp_path / "new.zip")
    data["replay_buffer_class"][":serialized:"] = base64.b64encode(pickle.dumps(PathReplayBuffer)).decode()
    data["replay_buffer_kwargs"] = {**data["replay_buffer_kwargs"], "replay_from_start": True}
    rewrite_zip_data(tmp_path / "new.zip", tmp_path / "old.zip", data)
    loaded = RecurrentPCL.load(tmp_path / "old.zip", env=make_vec_env("CartPole-v1", n_envs=1, seed=0))
    assert loaded.replay_buffer_class is RecurrentPathReplayBuffer and type(loaded.replay_buffer) is RecurrentPathReplayBuffer
    assert "replay_from_start" not in loaded.replay_buffer_kwargs
    loaded.learn(80)
    assert isinstance(loaded.replay_buffer.sample(2), RecurrentPathBatch)


def test_predict_with_state_save_load_round_trip(tmp_path: Path) -> None:
    model = RecurrentPCL(
        "MlpPrevActionLstmPolicy", "CartPole-v1", learning_starts=50, train_freq=4, seed=0, policy_kwargs=LSTM
    )
    model.learn(200)
    perturb(model.policy_target, seed=2)  # make the target distinguishable from the online policy
    model.save(tmp_path / "model")
    loaded = RecurrentPCL.load(tmp_path / "model")
    assert isinstance(loaded.policy, MlpPrevActionLstmPolicy) and isinstance(loaded.policy_target, MlpPrevActionLstmPolicy)
    for mine, theirs in [(model.policy, loaded.policy), (model.policy_target, loaded.policy_target)]:
        for key, value in mine.state_dict().items():
            th.testing.assert_close(theirs.state_dict()[key], value)

    rng = np.random.default_rng(0)
    observations = rng.normal(size=(6, 2, 4)).astype(np.float32)
    states: list[Any] = [None, None]
    starts = np.array([True, True])
    for obs in observations:
        actions = []
        for i, algo in enumerate([model, loaded]):
            action, states[i] = algo.predict(obs, state=states[i], episode_start=starts, deterministic=True)
            actions.append(action)
        np.testing.assert_array_equal(actions[0], actions[1])
        assert len(states[0]) == 3
        for mine, theirs in zip(states[0], states[1], strict=True):
            np.testing.assert_allclose(mine, theirs, atol=1e-6)
        starts = np.array([False, False])

    # The state matters, and episode_start resets it.
    policy = loaded.policy
    obs = observations[0]
    with th.no_grad():
        fresh = policy.get_distribution(th.as_tensor(obs), policy.initial_state(2), th.zeros(2))[0].distribution.probs
        carried_state = tuple(th.as_tensor(part) for part in states[1])
        carried = policy.get_distribution(th.as_tensor(obs), carried_state, th.zeros(2))[0].distribution.probs
        reset = policy.get_distribution(th.as_tensor(obs), carried_state, th.ones(2))[0].distribution.probs
    assert (fresh - carried).abs().max() > 1e-4
    th.testing.assert_close(reset, fresh)

    mean_return, _ = evaluate_policy(loaded, make_vec_env("CartPole-v1", n_envs=2, seed=3), n_eval_episodes=4)
    assert mean_return >= 8
    # A replay buffer saved by a feed-forward model gets the path histories once loaded by a recurrent one.
    mlp = PCL("MlpPolicy", "CartPole-v1", learning_starts=50, gradient_steps=0, seed=0)
    mlp.learn(60)
    mlp.save_replay_buffer(tmp_path / "buffer")
    loaded.load_replay_buffer(tmp_path / "buffer")
    assert type(loaded.replay_buffer) is RecurrentPathReplayBuffer
    assert isinstance(loaded.replay_buffer.sample(4), RecurrentPathBatch)
    # and the other way round
    loaded.save_replay_buffer(tmp_path / "recurrent_buffer")
    mlp.load_replay_buffer(tmp_path / "recurrent_buffer")
    assert type(mlp.replay_buffer) is PathReplayBuffer and type(mlp.replay_buffer.sample(4)) is PathBatch

    # The collection state is not saved: it is rebuilt for the new envs (another number of them here).
    assert loaded._collection_state is None
    loaded = RecurrentPCL.load(tmp_path / "model", env=make_vec_env("CartPole-v1", n_envs=3, seed=4))
    loaded.learn(120)
    assert loaded._collection_state is not None and loaded._collection_state[0].shape[1] == 3


def test_a_pickled_plain_buffer_loads_as_the_recurrent_buffer(tmp_path: Path) -> None:
    """``allow_pickle=True`` (trusted files of earlier versions): the buffer comes back as the loading model's class."""
    mlp = PCL("MlpPolicy", "CartPole-v1", learning_starts=50, gradient_steps=0, seed=0)
    mlp.learn(80)
    with open(tmp_path / "buffer.pkl", "wb") as file:
        pickle.dump(mlp.replay_buffer, file)
    model = RecurrentPCL("MlpPrevActionLstmPolicy", "CartPole-v1", seed=0, policy_kwargs=LSTM)
    with pytest.warns(UserWarning, match="Unpickling"):
        model.load_replay_buffer(tmp_path / "buffer.pkl", allow_pickle=True)
    assert type(model.replay_buffer) is RecurrentPathReplayBuffer
    np.random.seed(0)
    batch = model.replay_buffer.sample(4)
    np.random.seed(0)
    assert isinstance(batch, RecurrentPathBatch)
    np.testing.assert_array_equal(batch.path_ids, mlp.replay_buffer.sample(4).path_ids)


def test_vec_normalize_history_is_normalized_like_the_batch() -> None:
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_obs=True, norm_reward=True)
    model = RecurrentPCL("MlpPrevActionLstmPolicy", env, learning_starts=60, train_freq=8, seed=0, policy_kwargs=LSTM)
    model.learn(200)
    batch = model.replay_buffer.sample(8, env=model.get_vec_normalize_env())
    assert isinstance(batch, RecurrentPathBatch)
    rows = batch.history.offsets.unsqueeze(0) + th.arange(batch.mask.shape[0]).unsqueeze(1)
    for col in range(batch.mask.shape[1]):
        length = int(batch.mask[:, col].sum())
        th.testing.assert_close(batch.history.observations[rows[:length, col], col], batch.observations[:length, col])
        th.testing.assert_close(
            batch.history.observations[int(batch.history.offsets[col]) + length, col], batch.final_observations[col]
        )
    raw = np.concatenate([model.replay_buffer.observations[p.slots] for p in model.replay_buffer.paths.values()])
    assert np.abs(raw).max() > 1.5  # raw observations are stored, batches are normalised
    assert not th.allclose(batch.observations, th.as_tensor(model.replay_buffer.observations[:1]))


@pytest.mark.slow
def test_zoo_train_and_enjoy_with_the_lstm_policy(tmp_path: Path) -> None:
    """rl-zoo3's train and enjoy (which passes the recurrent state to ``predict``) with ``MlpPrevActionLstmPolicy``."""

    def run_module(module: str, args: list[str], cwd: Path) -> str:
        result = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{module} exited with {result.returncode}:\n{output[-6000:]}"
        return output

    conf = tmp_path / "recurrent_pcl.yml"
    entry = {
        "policy": "MlpPrevActionLstmPolicy",
        "n_timesteps": 400,
        "learning_starts": 100,
        "policy_kwargs": "dict(lstm_hidden_size=16)",
    }
    conf.write_text(yaml.safe_dump({"CartPole-v1": entry}))
    common = [
        "--algo",
        "recurrent_pcl",
        "--env",
        "CartPole-v1",
        "--seed",
        "0",
        "--num-threads",
        "1",
        "-f",
        str(tmp_path / "logs"),
    ]
    run_module("sb3_pcl.zoo.train", [*common, "--conf-file", str(conf), "--eval-freq", "-1"], cwd=tmp_path)
    enjoy_args = ["--algo", "recurrent_pcl", "--env", "CartPole-v1", "-f", str(tmp_path / "logs"), "--no-render", "-n", "150"]
    output = run_module("sb3_pcl.zoo.enjoy", [*enjoy_args, "--num-threads", "1"], cwd=tmp_path)
    assert "Episode Reward" in output


# ----------------------------------------------------------------------------------------------
# (e) unsupported combinations fail clearly; the other policies are unaffected
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", [RecurrentPCL, RecurrentTrustPCL])
def test_other_recurrent_policies_are_rejected(algo: type[RecurrentPCL]) -> None:
    with pytest.raises(ValueError, match=rf"{algo.__name__} supports one recurrent policy, 'MlpPrevActionLstmPolicy'"):
        algo(ContribMlpLstmPolicy, "CartPole-v1")


def test_recurrent_trust_pcl_takes_trust_pcl_defaults() -> None:
    model = RecurrentTrustPCL("MlpPrevActionLstmPolicy", "CartPole-v1", policy_kwargs=LSTM)
    assert isinstance(model, TrustPCL) and isinstance(model, RecurrentPCL)
    assert (model.ent_coef, model.target_network_lag, model.max_divergence) == (0.0, 0.99, 0.001)
    assert model.tau == pytest.approx(0.01)  # SB3's meaning: 1 - target_network_lag
    assert (model.value_fit, model.policy_step) == ("joint", "gradient")
    assert type(model.replay_buffer) is RecurrentPathReplayBuffer


def test_batch_without_history_is_rejected() -> None:
    model = RecurrentPCL(
        "MlpPrevActionLstmPolicy", random_paths_env(1), learning_starts=20, gradient_steps=0, policy_kwargs=LSTM
    )
    model.learn(30)
    batch = model.replay_buffer.sample(4)
    plain = PathBatch(**{field.name: getattr(batch, field.name) for field in dataclasses.fields(PathBatch)})
    with pytest.raises(ValueError, match=r"needs batches that carry the path history .*got a PathBatch"):
        model._evaluate(model.policy, plain)


@pytest.mark.parametrize("policy", ["MlpPolicy", "UnifiedMlpPolicy"])
def test_feed_forward_policies_get_no_history(policy: str) -> None:
    model = PCL(policy, "CartPole-v1", learning_starts=50, train_freq=4, seed=0)
    model.learn(100)
    assert type(model.replay_buffer) is PathReplayBuffer
    assert type(model.replay_buffer.sample(4)) is PathBatch
    assert getattr(model, "_collection_state", None) is None
    assert "MlpPrevActionLstmPolicy" in RecurrentTrustPCL.policy_aliases and "UnifiedMlpPolicy" in PCL.policy_aliases


class MultiDiscreteObservations(gym.Env):
    """Observations from a MultiDiscrete space (SB3 sizes their features with a NumPy integer)."""

    observation_space = spaces.MultiDiscrete([3, 4])
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.integers(0, [3, 4]), {}

    def step(self, action):
        return self.np_random.integers(0, [3, 4]), 1.0, bool(self.np_random.random() < 0.1), False, {}


def test_multidiscrete_observations_train_with_the_lstm() -> None:
    settings = {"learning_starts": 20, "batch_size": 2, "train_freq": 8, "max_segment_length": 8, "policy_kwargs": LSTM}
    model = RecurrentPCL("MlpPrevActionLstmPolicy", MultiDiscreteObservations(), seed=0, **settings)
    model.learn(200)
    assert model._n_updates > 0 and model.policy.features_dim == 7 and isinstance(model.policy.features_dim, int)
