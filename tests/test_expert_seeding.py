"""Seeding PCL's replay with demonstrations: scripted experts, recorded agents, episode files."""

import csv
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from pcl_testing import FAST as PCL_FAST
from pcl_testing import BigObsBoxEnv
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize

from sb3_pcl import PCL, Reinforce, TrustPCL
from sb3_pcl.common.demonstrations import (
    DemonstrationsCallback,
    check_episodes,
    load_episodes,
    record_episodes,
    save_episodes,
)
from sb3_pcl.common.path_buffer import PathReplayBuffer
from sb3_pcl.envs import (
    ALGORITHMIC_ENV_IDS,
    CombinedActionWrapper,
    CopyEnv,
    expert_actions,
    expert_episodes_for_vec_env,
    generate_expert_episodes,
)
from sb3_pcl.envs import expert as expert_module
from sb3_pcl.envs.expert import SEED_EXPERT_MIN_LENGTHS, ExpertPathsCallback

FAST = {**PCL_FAST, "learning_starts": 0}

# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

OBS_SPACE = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
ACT_SPACE = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)


def episode(length: int, value: float, terminated: bool = True) -> dict:
    """A demonstration of ``length`` steps whose observations are (value + t, -value) and rewards ``value``."""
    steps = np.arange(length + 1, dtype=np.float32)
    return {
        "observations": np.stack([value + steps, np.full(length + 1, -value, dtype=np.float32)], axis=1),
        "actions": np.full((length, 1), 0.5, dtype=np.float32),
        "rewards": np.full(length, value, dtype=np.float64),
        "terminated": terminated,
        "truncated": not terminated,
    }


def add_collected_episode(buffer: PathReplayBuffer, length: int, reward: float) -> None:
    """One collected (non-seeded) episode of ``length`` steps through ``add``, every reward ``reward``."""
    for t in range(length):
        obs = np.array([[reward, t]], dtype=np.float32)
        done = np.array([t == length - 1])
        buffer.add(obs, obs + 1, np.zeros((1, 1)), np.array([reward]), done, [{}])


def seeded_paths(buffer: PathReplayBuffer) -> list:
    return [path for path in buffer.paths.values() if path.is_seed]


def assert_path_holds(buffer: PathReplayBuffer, path, demo: dict) -> None:
    """The stored path is exactly the demonstration (observations, final observation, actions, rewards, flags)."""
    assert buffer.observations is not None and buffer.actions is not None and buffer.rewards is not None
    length = len(demo["rewards"])
    assert len(path) == length
    obs = np.asarray(demo["observations"]).reshape(length + 1, -1)
    np.testing.assert_array_equal(buffer.observations[path.slots].reshape(length, -1), obs[:-1])
    np.testing.assert_array_equal(np.asarray(path.final_obs).reshape(-1), obs[-1])
    actions = np.asarray(demo["actions"]).reshape(length, -1)
    np.testing.assert_array_equal(buffer.actions[path.slots].reshape(length, -1), actions)
    np.testing.assert_array_equal(buffer.rewards[path.slots], np.asarray(demo["rewards"], dtype=np.float32))
    assert path.terminated == bool(demo["terminated"])
    assert path.total_return == pytest.approx(float(np.sum(demo["rewards"])))


# ----------------------------------------------------------------------------------------------
# 1. the replay keeps seeded paths
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eviction", ["fifo", "rand", "rank"])
def test_seeded_paths_survive_eviction(eviction):
    np.random.seed(0)
    # priority by return: seeded paths have the lowest return, so rank eviction would pick them first
    buffer = PathReplayBuffer(60, OBS_SPACE, ACT_SPACE, device="cpu", eviction=eviction, priority="return")
    demos = [episode(6, -5.0), episode(4, -7.0)]
    for demo in demos:
        buffer.add_path(demo["observations"], demo["actions"], demo["rewards"], terminated=True, seed=True)
    for index in range(40):  # 200 collected transitions through a 60-slot buffer
        add_collected_episode(buffer, 5, reward=float(index % 7))
    assert buffer.size() <= 60
    collected = [path for path in buffer.paths.values() if not path.is_seed]
    assert len(collected) < 40  # evictions did happen
    seeds = seeded_paths(buffer)
    assert len(seeds) == 2 and buffer.n_seeded_paths == 2 and buffer.n_seeded_transitions == 10
    for path, demo in zip(sorted(seeds, key=lambda p: p.path_id), demos, strict=True):
        assert_path_holds(buffer, path, demo)


def test_unseeded_copy_of_the_same_paths_is_evicted():
    """Control for the test above: the same paths added without ``seed=True`` go first under fifo."""
    buffer = PathReplayBuffer(60, OBS_SPACE, ACT_SPACE, device="cpu", eviction="fifo")
    demo = episode(6, -5.0)
    path_id = buffer.add_path(demo["observations"], demo["actions"], demo["rewards"], seed=False)
    for index in range(40):
        add_collected_episode(buffer, 5, reward=float(index))
    assert path_id not in buffer.paths and buffer.n_seeded_paths == 0


@pytest.mark.parametrize("priority", ["step", "return"])
def test_seeded_paths_keep_top_priority_and_are_sampled(priority):
    np.random.seed(1)
    buffer = PathReplayBuffer(500, OBS_SPACE, ACT_SPACE, device="cpu", alpha=1.0, priority=priority)
    demo = episode(3, -10.0)  # oldest and lowest return: the lowest priority if it were not seeded
    seed_id = buffer.add_path(demo["observations"], demo["actions"], demo["rewards"], seed=True)
    for index in range(8):
        add_collected_episode(buffer, 3, reward=float(index))
    ids = np.array(sorted(buffer.paths))
    prio = buffer.priorities(ids)
    others = prio[ids != seed_id]
    assert prio[ids == seed_id][0] == others.max() > others.min()
    probs = buffer.sampling_distribution(ids, max_segment_length=None)
    assert probs[ids == seed_id][0] == pytest.approx(probs.max())
    assert probs[ids == seed_id][0] > 2 * probs.min()

    counts = 0
    for _ in range(20):
        batch = buffer.sample(8, max_segment_length=None)
        for column in np.flatnonzero(batch.path_ids == seed_id):
            counts += 1
            np.testing.assert_array_equal(batch.observations[:3, column].numpy(), demo["observations"][:3])
            np.testing.assert_array_equal(batch.final_observations[column].numpy(), demo["observations"][3])
            np.testing.assert_allclose(batch.rewards[:3, column].numpy(), demo["rewards"])
            assert batch.terminated[column] == 1.0 and batch.at_path_start[column] == 1.0
    assert counts > 160 * probs.min()  # sampled at least as often as the least likely path, far more in fact


# ----------------------------------------------------------------------------------------------
# 2. scripted experts of the algorithmic tasks
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ALGORITHMIC_ENV_IDS)
def test_expert_episodes_for_vec_env_score_len_target(env_id):
    venv = DummyVecEnv([lambda: gym.make(env_id)])
    episodes = expert_episodes_for_vec_env(venv, 6, seed=11)
    assert len(episodes) == 6
    # Replay independently: same seed, same curriculum (the replayed episodes promote it the same way).
    replay = gym.make(env_id)
    for index, demo in enumerate(episodes):
        obs, _ = replay.reset(seed=11 if index == 0 else None)
        target = replay.unwrapped.target
        np.testing.assert_array_equal(demo["actions"], expert_actions(replay)[: len(demo["actions"])])
        observations = [obs]
        for action in demo["actions"]:
            obs, *_ = replay.step(action)
            observations.append(obs)
        np.testing.assert_array_equal(demo["observations"], observations)
        if "Addition3" not in env_id or demo["rewards"].min() >= 0:
            assert demo["rewards"].sum() == len(target) and demo["terminated"]
    # the VecEnv itself was not stepped
    assert venv.envs[0].unwrapped.time == 0


@pytest.mark.parametrize("env_id", ["sb3_pcl/Copy-v0", "sb3_pcl/Reverse-v0", "sb3_pcl/RepeatCopy-v0"])
def test_expert_episodes_with_drawn_lengths(env_id):
    """min_lengths (PCL's expert_paths: the original code's inputs of 2..10 symbols) spans the range, perfect episodes."""
    venv = DummyVecEnv([lambda: gym.make(env_id)])
    episodes = expert_episodes_for_vec_env(venv, 60, seed=3, min_lengths=SEED_EXPERT_MIN_LENGTHS)
    again = expert_episodes_for_vec_env(venv, 60, seed=3, min_lengths=SEED_EXPERT_MIN_LENGTHS)
    input_lengths = []
    for demo, same in zip(episodes, again, strict=True):
        np.testing.assert_array_equal(demo["actions"], same["actions"])
        blank = venv.envs[0].unwrapped.base  # the blank symbol ends the input on the tape
        observations = list(demo["observations"])
        input_lengths.append(observations.index(blank) if blank in observations else len(observations))
        assert demo["terminated"] and demo["rewards"].min() >= 0
    assert min(input_lengths) == 2 and max(input_lengths) == 10
    assert venv.envs[0].unwrapped.min_length == venv.envs[0].unwrapped.starting_min_length  # the VecEnv's env untouched
    with pytest.raises(ValueError, match="min_lengths"):
        expert_episodes_for_vec_env(venv, 1, min_lengths=(3, 2))


def test_expert_episodes_are_encoded_for_a_combined_action_env():
    wrapped = DummyVecEnv([lambda: CombinedActionWrapper(gym.make("sb3_pcl/ReversedAddition-v0"))])
    plain = DummyVecEnv([lambda: gym.make("sb3_pcl/ReversedAddition-v0")])
    encoded = expert_episodes_for_vec_env(wrapped, 4, seed=5)
    triples = expert_episodes_for_vec_env(plain, 4, seed=5)
    wrapper = wrapped.envs[0]
    assert isinstance(wrapper, CombinedActionWrapper)
    for first, second in zip(encoded, triples, strict=True):
        assert first["actions"].shape == (len(second["actions"]),)
        np.testing.assert_array_equal([wrapper.decode(a) for a in first["actions"]], second["actions"])
        np.testing.assert_array_equal(first["observations"], second["observations"])


@pytest.mark.parametrize("env_id", ALGORITHMIC_ENV_IDS)
def test_expert_paths_round_trip_through_the_buffer(env_id):
    model = PCL("MlpPolicy", env_id, seed=0, **FAST)
    episodes = expert_episodes_for_vec_env(model.env, 5, seed=3)
    assert model.add_demonstrations(episodes) == 5
    seeds = sorted(seeded_paths(model.replay_buffer), key=lambda p: p.path_id)
    assert len(seeds) == 5
    for path, demo in zip(seeds, episodes, strict=True):
        assert_path_holds(model.replay_buffer, path, demo)


@pytest.mark.parametrize("combined", [False, True])
def test_pcl_with_expert_paths_end_to_end(combined, tmp_path):
    env = CombinedActionWrapper(gym.make("sb3_pcl/Copy-v0")) if combined else "sb3_pcl/Copy-v0"
    # a 150-transition replay: collected paths are evicted many times over during 400 steps
    model = PCL("MlpPolicy", env, seed=0, **{**FAST, "buffer_size": 150})
    assert model.replay_buffer.n_seeded_paths == 0  # seeded at the first learn
    model.set_logger(configure(str(tmp_path), ["csv"]))
    seeding = ExpertPathsCallback(10)
    model.learn(400, callback=seeding)
    buffer = model.replay_buffer
    assert model._n_updates > 0 and buffer.n_seeded_paths == 10
    for path in seeded_paths(buffer):
        obs = buffer.observations[path.slots, 0]
        actions = buffer.actions[path.slots]
        if combined:
            wrapper = model.env.envs[0]  # type: ignore[attr-defined]
            actions = np.array([wrapper.get_wrapper_attr("decode")(int(a[0])) for a in actions])
        # Copy's expert: move right, write, the symbol under the head; every step earns +1
        np.testing.assert_array_equal(actions, np.stack([np.ones_like(obs), np.ones_like(obs), obs], axis=1))
        assert path.total_return == len(path) and path.terminated
    with open(tmp_path / "progress.csv") as file:
        rows = [row for row in csv.DictReader(file) if row.get("train/seeded_paths")]
    assert rows and all(float(row["train/seeded_paths"]) == 10 for row in rows)

    # Seeding happens once per replay: a second learn adds nothing.
    model.learn(100, reset_num_timesteps=False, callback=seeding)
    assert model.replay_buffer.n_seeded_paths == 10
    model.replay_buffer.reset()  # ... but a reset replay is seeded again
    model.learn(100, reset_num_timesteps=False, callback=seeding)
    assert model.replay_buffer.n_seeded_paths == 10


def test_seeding_after_save_and_load(tmp_path):
    model = PCL("MlpPolicy", "sb3_pcl/Copy-v0", seed=0, **FAST)
    model.learn(50, callback=ExpertPathsCallback(4))
    model.save(tmp_path / "model")
    model.save_replay_buffer(tmp_path / "replay")

    loaded = PCL.load(tmp_path / "model", env=make_vec_env("sb3_pcl/Copy-v0", n_envs=1))
    assert loaded.replay_buffer.n_paths == 0  # the replay is not saved
    loaded.learn(50, callback=ExpertPathsCallback(4))
    assert loaded.replay_buffer.n_seeded_paths == 4  # a fresh replay is seeded at its first learn

    restored = PCL.load(tmp_path / "model", env=make_vec_env("sb3_pcl/Copy-v0", n_envs=1))
    restored.load_replay_buffer(tmp_path / "replay")
    restored.learn(50, callback=ExpertPathsCallback(4))
    assert restored.replay_buffer.n_seeded_paths == 4  # the loaded replay had them: not seeded twice


def test_trust_pcl_with_expert_paths():
    model = TrustPCL("MlpPolicy", "sb3_pcl/DuplicatedInput-v0", seed=0, **FAST)
    model.learn(64, callback=ExpertPathsCallback(3))
    assert model.replay_buffer.n_seeded_paths == 3


def test_expert_paths_need_an_algorithmic_task():
    with pytest.raises(ValueError, match="only for the algorithmic tasks"):
        PCL("MlpPolicy", "CartPole-v1", **FAST).learn(10, callback=ExpertPathsCallback(3))
    for bad in (-1, 0, 2.5, True):
        with pytest.raises(ValueError, match="n_paths must be an integer >= 1"):
            ExpertPathsCallback(bad)
    with pytest.raises(TypeError, match="path replay"):
        Reinforce("MlpPolicy", make_vec_env("sb3_pcl/Copy-v0", n_envs=2)).learn(10, callback=ExpertPathsCallback(3))


def test_expert_paths_from_rl_zoo_yml(tmp_path):
    """The expert-seeding callback of a hyperparameter file reaches ``learn`` through rl-zoo3's ``train``."""
    conf = tmp_path / "pcl.yml"
    conf.write_text(
        "sb3_pcl/Copy-v0:\n  policy: 'MlpPolicy'\n  n_timesteps: 100\n  n_envs: 1\n  learning_starts: 0\n"
        "  callback:\n    - sb3_pcl.envs.ExpertPathsCallback:\n        n_paths: 5\n"
    )
    args = ["--algo", "pcl", "--env", "sb3_pcl/Copy-v0", "--conf-file", str(conf), "--num-threads", "1", "--seed", "0"]
    result = subprocess.run(
        [sys.executable, "-m", "sb3_pcl.zoo.train", *args, "-f", str(tmp_path / "logs"), "--verbose", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Seeded the replay with 5 demonstration paths" in output


def _evaluate_copy(model: PCL, n_episodes: int = 30) -> float:
    env = CopyEnv()
    total = 0.0
    obs, _ = env.reset(seed=123)
    for index in range(n_episodes):
        if index:
            obs, _ = env.reset()
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
    return total / n_episodes


def test_expert_paths_speed_up_learning_copy():
    """1000 steps of Copy: 20 expert paths make PCL (nearly) solve it, without them it is still near 0."""
    returns: dict[int, list[float]] = {0: [], 20: []}
    for n_paths in returns:
        for seed in range(3):
            model = PCL("MlpPolicy", "sb3_pcl/Copy-v0", seed=seed, learning_starts=0, buffer_size=5000)
            model.learn(1000, callback=ExpertPathsCallback(n_paths) if n_paths else None)
            returns[n_paths].append(_evaluate_copy(model))
    assert np.mean(returns[20]) > np.mean(returns[0]) + 1.0, returns


# ----------------------------------------------------------------------------------------------
# 3. recording any agent, episode files
# ----------------------------------------------------------------------------------------------


def test_record_save_load_seed_round_trip(tmp_path):
    agent = PCL("MlpPolicy", "CartPole-v1", seed=0, **FAST).learn(200)
    episodes = record_episodes(agent, "CartPole-v1", 3, seed=4)
    assert len(episodes) == 3
    env = gym.make("CartPole-v1")
    for index, demo in enumerate(episodes):
        length = len(demo["rewards"])
        assert demo["observations"].shape == (length + 1, 4) and demo["observations"].dtype == np.float32
        assert demo["actions"].shape == (length,) and demo["terminated"] is not demo["truncated"]
        # deterministic agent: the recorded actions are its greedy ones, and replaying them gives the observations
        np.testing.assert_array_equal(demo["actions"], agent.predict(demo["observations"][:-1], deterministic=True)[0])
        obs, _ = env.reset(seed=4 if index == 0 else None)
        np.testing.assert_array_equal(obs, demo["observations"][0])
        for step, action in enumerate(demo["actions"]):
            obs, *_ = env.step(int(action))
            np.testing.assert_array_equal(obs, demo["observations"][step + 1])

    path = tmp_path / "cartpole_demos.npz"
    save_episodes(path, episodes)
    loaded = load_episodes(path)
    for original, restored in zip(episodes, loaded, strict=True):
        for key in ("observations", "actions", "rewards"):
            np.testing.assert_array_equal(restored[key], original[key])
            assert restored[key].dtype == original[key].dtype
        assert restored["terminated"] == original["terminated"] and restored["truncated"] == original["truncated"]

    learner = PCL("MlpPolicy", "CartPole-v1", seed=1, **FAST)
    learner.learn(64, callback=DemonstrationsCallback(str(path)))
    seeds = sorted(seeded_paths(learner.replay_buffer), key=lambda p: p.path_id)
    assert len(seeds) == 3
    for stored, demo in zip(seeds, episodes, strict=True):
        assert_path_holds(learner.replay_buffer, stored, demo)
    # add_demonstrations also takes the file directly
    assert learner.add_demonstrations(path) == 3 and learner.replay_buffer.n_seeded_paths == 6


def test_record_truncated_episodes_and_several_envs():
    agent = PCL("MlpPolicy", "Pendulum-v1", seed=0, **FAST)
    venv = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    episodes = record_episodes(agent, venv, 3)
    assert [len(demo["rewards"]) for demo in episodes] == [200, 200, 200]
    assert all(demo["truncated"] and not demo["terminated"] for demo in episodes)
    for demo in episodes:
        assert demo["actions"].shape == (200, 1)
        assert np.all(np.abs(demo["actions"]) <= 2.0)  # predict clips to the action space
    learner = PCL("MlpPolicy", "Pendulum-v1", seed=0, **FAST)
    learner.add_demonstrations(episodes)
    assert all(not path.terminated for path in seeded_paths(learner.replay_buffer))  # bootstrap from the final state


def test_record_with_vec_normalize_stores_raw_observations():
    venv = VecNormalize(make_vec_env(BigObsBoxEnv, n_envs=1, seed=0), clip_obs=10.0)
    model = PCL("MlpPolicy", venv, seed=0, **FAST).learn(100)
    seen: list[np.ndarray] = []
    original_predict = model.predict

    def spy(obs, **kwargs):
        seen.append(np.array(obs))
        return original_predict(obs, **kwargs)

    model.predict = spy  # type: ignore[method-assign]
    venv.training = False
    episodes = record_episodes(model, venv, 2)
    assert all(np.all(demo["observations"] > 900.0) for demo in episodes)  # raw observations, final one included
    assert all(np.abs(obs).max() <= 10.0 + 1e-5 for obs in seen)  # the agent acted on normalised ones

    model.add_demonstrations(episodes)
    buffer = model.replay_buffer
    for path in seeded_paths(buffer):
        assert np.all(buffer.observations[path.slots] > 900.0)  # stored raw, like the collected transitions
    batch = buffer.sample(16, env=model._vec_normalize_env)
    assert batch.observations.abs().max() <= 10.0 + 1e-5  # normalised when sampled

    with pytest.raises(ValueError, match="outermost"):
        record_episodes(model, VecMonitor(VecNormalize(DummyVecEnv([BigObsBoxEnv]))), 1)


def test_record_recurrent_policy_threads_state_and_episode_start():
    agent = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", seed=0, n_steps=16, policy_kwargs={"lstm_hidden_size": 8})
    calls: list[tuple] = []
    original_predict = agent.predict

    def spy(obs, state=None, episode_start=None, deterministic=False):
        calls.append((None if state is None else state[0].copy(), np.array(episode_start)))
        return original_predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)

    agent.predict = spy  # type: ignore[method-assign]
    episodes = record_episodes(agent, "CartPole-v1", 2, seed=0)
    lengths = [len(demo["rewards"]) for demo in episodes]
    assert len(calls) == sum(lengths)
    assert calls[0][0] is None and calls[0][1].tolist() == [True]
    assert calls[1][0] is not None and calls[1][1].tolist() == [False]  # the state is passed back
    assert calls[lengths[0]][1].tolist() == [True]  # the second episode starts afresh


# ----------------------------------------------------------------------------------------------
# 4. bad inputs
# ----------------------------------------------------------------------------------------------


def box_model(**kwargs) -> PCL:
    return PCL("MlpPolicy", make_vec_env(BigObsBoxEnv, n_envs=1), seed=0, **{**FAST, **kwargs})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ep: ep.update(observations=ep["observations"][:, :1]), "observations have shape"),
        (lambda ep: ep.update(observations=ep["observations"][:-1]), "T \\+ 1"),
        (lambda ep: ep.update(actions=np.full((3, 1), 1.5, dtype=np.float32)), "actions have values outside"),
        (lambda ep: ep.update(actions=np.zeros((3, 2), dtype=np.float32)), "actions have shape"),
        (lambda ep: ep["rewards"].__setitem__(1, np.nan), r"Non-finite rewards \(NaN or inf\) at step \[1\]"),
        (lambda ep: ep["observations"].__setitem__((0, 0), np.inf), r"Non-finite observations \(NaN or inf\)"),
        # finite in float64 but not in the replay's float32: refused, not stored as inf (issue #32)
        (lambda ep: ep["rewards"].__setitem__(2, 1e39), r"Non-finite rewards \(too large for float32.*\) at step \[2\]"),
        (
            lambda ep: ep.update(observations=ep["observations"].astype(np.float64) * [[1.0, 1e39]]),
            r"Non-finite observations \(too large for float32",
        ),
        (lambda ep: ep.pop("terminated"), "lacks \\['terminated'\\]"),
        (lambda ep: ep.update(observations=np.array(["a"] * 4)), "numeric"),
    ],
)
def test_add_demonstrations_rejects_bad_episodes(change, message):
    model = box_model()
    good, bad = episode(3, 1.0), episode(3, 2.0)
    change(bad)
    with pytest.raises(ValueError, match=message) as error:
        model.add_demonstrations([good, bad])
    assert "Episode 1" in str(error.value)
    assert model.replay_buffer.n_paths == 0  # nothing added when one episode is invalid


def test_add_demonstrations_rejects_empty_episodes_and_bad_containers():
    model = box_model()
    empty = {
        "observations": np.zeros((1, 2), dtype=np.float32),
        "actions": np.zeros((0, 1)),
        "rewards": np.zeros(0),
        "terminated": True,
    }
    with pytest.raises(ValueError, match="Episode 0 is empty"):
        model.add_demonstrations([empty])
    with pytest.raises(ValueError, match="single dict"):
        model.add_demonstrations(episode(3, 1.0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected a dict"):
        model.add_demonstrations([np.zeros(3)])  # type: ignore[list-item]


def test_discrete_action_checks():
    space = spaces.Discrete(20)
    copy_episode = generate_expert_episodes("sb3_pcl/Copy-v0", 1, seed=0)[0]  # (T, 3) triples
    with pytest.raises(ValueError, match=r"actions have shape .* Discrete\(20\)"):
        check_episodes([copy_episode], spaces.Discrete(6), space)
    encoded = dict(copy_episode, actions=np.full(len(copy_episode["rewards"]), 20))
    with pytest.raises(ValueError, match="outside Discrete\\(20\\)"):
        check_episodes([encoded], spaces.Discrete(6), space)
    fractional = dict(copy_episode, actions=np.full(len(copy_episode["rewards"]), 1.5))
    with pytest.raises(ValueError, match="non-integer"):
        check_episodes([fractional], spaces.Discrete(6), space)
    bad_obs = dict(copy_episode, observations=np.full(len(copy_episode["observations"]), 6))
    with pytest.raises(ValueError, match="observations have values outside Discrete\\(6\\)"):
        check_episodes([bad_obs], spaces.Discrete(6), spaces.MultiDiscrete([2, 2, 5]))
    # (T, 1) is accepted for Discrete, and the result has the spaces' dtypes
    ok = dict(copy_episode, actions=np.ones((len(copy_episode["rewards"]), 1)))
    (checked,) = check_episodes([ok], spaces.Discrete(6), space)
    assert checked.actions.shape == (len(copy_episode["rewards"]),) and checked.actions.dtype == np.int64


def test_demonstrations_must_fit_in_the_replay():
    model = box_model(buffer_size=20, batch_size=4)
    with pytest.raises(ValueError, match="room for 19"):
        model.add_demonstrations([episode(10, 1.0), episode(10, 2.0)])
    assert model.replay_buffer.n_paths == 0
    model.add_demonstrations([episode(10, 1.0)])
    with pytest.raises(ValueError, match="10 already seeded"):
        model.add_demonstrations([episode(10, 1.0)])


def test_bad_episode_files(tmp_path):
    model = box_model()
    with pytest.raises(FileNotFoundError):
        model.add_demonstrations(tmp_path / "nowhere.npz")
    with pytest.raises(FileNotFoundError, match="DemonstrationsCallback"):
        DemonstrationsCallback(str(tmp_path / "nowhere.npz"))

    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not an npz file")
    with pytest.raises(ValueError, match="not a valid episodes"):
        model.add_demonstrations(garbage)

    missing = tmp_path / "missing.npz"
    np.savez(missing, observations=np.zeros((3, 2)), actions=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="missing keys"):
        model.add_demonstrations(missing)

    good = tmp_path / "good.npz"
    save_episodes(good, [episode(3, 1.0), episode(4, 2.0)])
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:-60])
    with pytest.raises(ValueError, match="not a valid episodes"):
        model.add_demonstrations(truncated)

    inconsistent = tmp_path / "inconsistent.npz"
    data = dict(np.load(good))
    data["lengths"] = data["lengths"] + 1
    np.savez(inconsistent, **data)
    with pytest.raises(ValueError, match="inconsistent"):
        model.add_demonstrations(inconsistent)

    newer = tmp_path / "newer.npz"
    np.savez(newer, **{**dict(np.load(good)), "format_version": np.asarray(99)})
    with pytest.raises(ValueError, match="format version 99"):
        load_episodes(newer)

    # a callback whose file went away before learn fails at learn, naming the file
    callback = DemonstrationsCallback(str(good))
    callback.episodes = str(tmp_path / "moved.npz")
    with pytest.raises(FileNotFoundError, match=r"moved\.npz"):
        model.learn(10, callback=callback)


def episodes_file(path, lengths, n_steps: int, n_episodes: int) -> None:
    """An episodes file whose ``lengths`` are given and whose arrays hold ``n_steps`` steps of ``n_episodes`` episodes."""
    np.savez(
        path,
        observations=np.zeros((n_steps + n_episodes, 2), dtype=np.float32),
        actions=np.zeros((n_steps, 1), dtype=np.float32),
        rewards=np.zeros(n_steps),
        lengths=lengths,
        terminated=np.ones(len(lengths), dtype=bool),
        truncated=np.zeros(len(lengths), dtype=bool),
        format_version=np.asarray(2),
    )


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        # int64 lengths whose sum wraps around to the 2 stored steps (4 * 2**62 = 2**64): malformed episodes before
        (
            np.array([2**62, 2**62, 2**62, 2**62 + 2], dtype=np.int64),
            r"the 4 episode lengths sum to 18446744073709551618 steps",
        ),
        (np.array([2**64 - 1, 3, 0, 0], dtype=np.uint64), r"the 4 episode lengths sum to 18446744073709551618 steps"),
        (np.array([3, -1, 0, 0], dtype=np.int64), r"episode 1 has a negative length \(-1\)"),
        (np.array([1, 0, 0, 0], dtype=np.int64), r"sum to 1 steps, which need 5 observations, but the file holds 6"),
        (np.array([1.0, 1.0, 0.0, 0.0]), r"'lengths' must be a 1-d array of integers, got dtype float64"),
    ],
)
def test_episode_files_with_bad_lengths_are_refused(tmp_path, lengths, message):
    """The lengths are checked in exact integer arithmetic: no overflow, no negative length, the arrays' sizes."""
    path = tmp_path / "bad_lengths.npz"
    episodes_file(path, lengths, n_steps=2, n_episodes=4)
    with pytest.raises(ValueError, match=rf"'.*bad_lengths\.npz' is not a valid episodes \.npz file: .*{message}"):
        load_episodes(path)
    episodes_file(path, np.array([2, 0, 0, 0]), n_steps=2, n_episodes=4)  # the same arrays with valid lengths load
    assert [len(episode["rewards"]) for episode in load_episodes(path)] == [2, 0, 0, 0]


def test_save_episodes_rejects_mixed_shapes_and_objects(tmp_path):
    with pytest.raises(ValueError, match="differ from episode 0"):
        save_episodes(tmp_path / "mixed.npz", [episode(3, 1.0), dict(episode(3, 1.0), actions=np.zeros((3, 2)))])
    with pytest.raises(ValueError, match="numeric"):
        save_episodes(tmp_path / "objects.npz", [dict(episode(3, 1.0), actions=np.array([None] * 3))])


def test_old_expert_module_names_still_work(tmp_path):
    """``sb3_pcl.envs.expert`` re-exports the shared file functions (one implementation)."""
    assert expert_module.save_episodes is save_episodes and expert_module.load_episodes is load_episodes
    episodes = generate_expert_episodes("sb3_pcl/ReversedAddition-v0", 3, seed=2)
    expert_module.save_episodes(tmp_path / "experts.npz", episodes)
    for original, restored in zip(episodes, load_episodes(tmp_path / "experts.npz"), strict=True):
        np.testing.assert_array_equal(original["actions"], restored["actions"])
        assert restored["observations"].dtype == np.int64 and restored["actions"].dtype == np.int64
