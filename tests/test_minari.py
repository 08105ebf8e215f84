"""Minari datasets as demonstrations: reading them into PCL's replay, writing a trained agent's episodes as one."""

import json
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from pcl_testing import FAST

from sb3_pcl import PCL
from sb3_pcl.common.demonstrations import DemonstrationsCallback, load_demonstrations, record_episodes
from sb3_pcl.common.minari_io import (
    check_dataset_id,
    minari_episodes,
    record_minari_dataset,
    save_minari_dataset,
)

minari = pytest.importorskip("minari")
pytest.importorskip("h5py")  # Minari's default (HDF5) storage

METADATA = {"author": "sb3_pcl tests", "author_email": "tests@example.org", "code_permalink": "tests/test_minari.py"}
#: CartPole cut by a time limit of this many steps: the balancing policy is truncated, the others terminate
TIME_LIMIT = 15


def balance(obs: np.ndarray) -> int:
    return int(obs[2] + obs[3] > 0)


def push_left(obs: np.ndarray) -> int:
    return 0


@pytest.fixture(autouse=True)
def datasets_path(tmp_path, monkeypatch):
    """Every test reads and writes its Minari datasets in its own folder (never ~/.minari)."""
    path = tmp_path / "minari_datasets"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(path))
    return path


def collect(dataset_id: str, env: gym.Env, policies, seed: int = 0):
    """Play one episode per policy through Minari's own DataCollector and write the dataset."""
    pytest.importorskip("jax")  # DataCollector's episode buffers need it (minari[create])
    collector = minari.DataCollector(env)
    for index, policy in enumerate(policies):
        obs, _ = collector.reset(seed=seed + index)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = collector.step(policy(obs))
            done = terminated or truncated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Minari's advice on metadata (eval_env, ...)
        dataset = collector.create_dataset(dataset_id, algorithm_name="scripted", description="test", **METADATA)
    collector.close()
    return dataset


@pytest.fixture
def cartpole_dataset():
    """Four CartPole episodes: two truncated by the time limit, two terminated."""
    env = gym.make("CartPole-v1", max_episode_steps=TIME_LIMIT)
    dataset = collect("tests/cartpole-scripted-v0", env, [balance, push_left, balance, push_left])
    episodes = list(dataset.iterate_episodes())
    assert [bool(ep.truncations[-1]) for ep in episodes] == [True, False, True, False]
    assert [bool(ep.terminations[-1]) for ep in episodes] == [False, True, False, True]
    return dataset


def cartpole_model(**kwargs) -> PCL:
    return PCL("MlpPolicy", "CartPole-v1", seed=0, **{**FAST, **kwargs})


def assert_paths_hold(model: PCL, episodes) -> None:
    """The model's seeded paths are exactly the Minari episodes, in order (transitions and path ends)."""
    buffer = model.replay_buffer
    seeds = sorted((path for path in buffer.paths.values() if path.is_seed), key=lambda path: path.path_id)
    assert len(seeds) == len(episodes)
    for path, ep in zip(seeds, episodes, strict=True):
        length = len(ep.rewards)
        assert len(path) == length
        np.testing.assert_array_equal(buffer.observations[path.slots].reshape(length, -1), ep.observations[:-1])
        np.testing.assert_array_equal(np.asarray(path.final_obs).reshape(-1), ep.observations[-1])
        np.testing.assert_array_equal(buffer.actions[path.slots].reshape(length), ep.actions)
        np.testing.assert_array_equal(buffer.rewards[path.slots], ep.rewards.astype(np.float32))
        assert path.done and path.terminated == bool(ep.terminations[-1])


# ----------------------------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------------------------


def test_dataset_episodes_become_seeded_paths(cartpole_dataset, datasets_path):
    episodes = list(cartpole_dataset.iterate_episodes())
    sources = [
        "tests/cartpole-scripted-v0",  # a local id
        cartpole_dataset,  # the object
        datasets_path / "tests" / "cartpole-scripted-v0",  # the dataset's folder
        str(datasets_path / "tests" / "cartpole-scripted-v0" / "data"),  # its data folder
    ]
    for source in sources:
        model = cartpole_model()
        assert model.add_demonstrations(source) == 4
        assert_paths_hold(model, episodes)

    # A truncated episode bootstraps from its last state, a terminated one does not.
    transitions = model.replay_buffer.transitions()
    ends = np.flatnonzero(transitions["dones"])
    assert len(ends) == 4
    np.testing.assert_array_equal(transitions["timeouts"][ends], [True, False, True, False])
    np.testing.assert_array_equal(transitions["next_observations"][ends], [ep.observations[-1] for ep in episodes])
    batch = model.replay_buffer.sample(64, max_segment_length=1000)
    whole = 0
    for column, path_id in enumerate(batch.path_ids):
        ep = episodes[sorted(model.replay_buffer.paths).index(int(path_id))]
        if batch.mask[:, column].sum().item() == len(ep.rewards):  # a window that reaches the path's end
            whole += 1
            assert batch.terminated[column].item() == float(ep.terminations[-1])
            np.testing.assert_array_equal(batch.final_observations[column].numpy(), ep.observations[-1])
    assert whole > 32


def test_load_demonstrations_gives_the_episode_dicts(cartpole_dataset):
    episodes = load_demonstrations("tests/cartpole-scripted-v0")
    for episode, ep in zip(episodes, cartpole_dataset.iterate_episodes(), strict=True):
        np.testing.assert_array_equal(episode["observations"], ep.observations)
        np.testing.assert_array_equal(episode["actions"], ep.actions)
        np.testing.assert_array_equal(episode["rewards"], ep.rewards)
        assert episode["terminated"] == bool(ep.terminations[-1]) and episode["truncated"] == bool(ep.truncations[-1])


def test_seeded_dataset_paths_survive_training(cartpole_dataset):
    episodes = list(cartpole_dataset.iterate_episodes())
    n_demo = sum(len(ep.rewards) for ep in episodes)
    # a replay of 120 transitions, about half of it the demonstrations: collected paths are evicted many times over
    model = cartpole_model(buffer_size=120, learning_starts=0)
    callback = DemonstrationsCallback("tests/cartpole-scripted-v0")
    model.learn(400, callback=callback)
    buffer = model.replay_buffer
    assert model._n_updates > 0 and buffer.n_seeded_paths == 4 and buffer.n_seeded_transitions == n_demo
    assert buffer.next_path_id > 4 + 400 // (120 - n_demo)  # collected paths came and went
    assert_paths_hold(model, episodes)
    model.learn(50, reset_num_timesteps=False, callback=callback)  # already seeded: not added twice
    assert buffer.n_seeded_paths == 4


# ----------------------------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------------------------


def test_round_trip_from_a_trained_agent(datasets_path):
    agent = cartpole_model().learn(200)
    # the barely trained agent's episodes last 8 to 10 steps: a time limit of 9 cuts some of them
    dataset = record_minari_dataset(agent, gym.make("CartPole-v1", max_episode_steps=9), 4, "tests/pcl-v0", seed=5, **METADATA)
    recorded = record_episodes(agent, gym.make("CartPole-v1", max_episode_steps=9), 4, seed=5)
    assert any(episode["truncated"] for episode in recorded)

    metadata = json.loads((datasets_path / "tests" / "pcl-v0" / "data" / "metadata.json").read_text())
    assert metadata["algorithm_name"] == "sb3_pcl.PCL" and metadata["author"] == ["sb3_pcl tests"]
    assert metadata["description"].startswith("4 episodes of a trained PCL agent (deterministic actions)")
    assert dataset.spec.env_spec.id == "CartPole-v1" and dataset.total_episodes == 4

    episodes, name = minari_episodes("tests/pcl-v0")
    assert name == "tests/pcl-v0"
    for loaded, original in zip(episodes, recorded, strict=True):
        for key in ("observations", "actions", "rewards"):
            np.testing.assert_array_equal(loaded[key], original[key])
        assert (loaded["terminated"], loaded["truncated"]) == (original["terminated"], original["truncated"])

    learner = cartpole_model()
    assert learner.add_demonstrations(dataset) == 4
    assert learner.replay_buffer.n_seeded_transitions == sum(len(episode["rewards"]) for episode in recorded)


def test_save_keeps_the_path_ends(datasets_path):
    def episode(length: int, terminated: bool, truncated: bool) -> dict:
        return {
            "observations": np.random.default_rng(length).normal(size=(length + 1, 4)).astype(np.float32),
            "actions": np.arange(length) % 2,
            "rewards": np.ones(length),
            "terminated": terminated,
            "truncated": truncated,
        }

    written = [episode(3, True, False), episode(4, False, True), episode(5, False, False)]  # the last one cut
    save_minari_dataset(written, "tests/ends-v1", "CartPole-v1", algorithm_name="test", description="ends", **METADATA)
    loaded, _ = minari_episodes("tests/ends-v1")
    assert [(ep["terminated"], ep["truncated"]) for ep in loaded] == [(True, False), (False, True), (False, False)]
    for ep, original in zip(loaded, written, strict=True):
        np.testing.assert_array_equal(ep["observations"], original["observations"])
        np.testing.assert_array_equal(ep["actions"], original["actions"])
    with pytest.raises(ValueError, match="already exists"):
        save_minari_dataset(written, "tests/ends-v1", "CartPole-v1", **METADATA)

    # another root, read back through the folder
    other = datasets_path.parent / "elsewhere"
    save_minari_dataset(
        written[:1], "ends-v0", "CartPole-v1", datasets_path=other, algorithm_name="test", description="x", **METADATA
    )
    assert len(load_demonstrations(other / "ends-v0")) == 1
    assert not (datasets_path / "ends-v0").exists()


@pytest.mark.parametrize("dataset_id", ["cartpole", "cartpole-v", "a b-v0", "../up-v0", "/abs-v0", "ns//x-v0", 3])
def test_invalid_dataset_ids(dataset_id):
    with pytest.raises(ValueError, match="Invalid Minari dataset id"):
        check_dataset_id(dataset_id)
    with pytest.raises(ValueError, match="Invalid Minari dataset id"):
        save_minari_dataset([{}], dataset_id, "CartPole-v1")


def test_save_refuses_bad_episodes_before_writing(datasets_path):
    good = {"observations": np.zeros((3, 4), np.float32), "actions": [0, 1], "rewards": [1.0, 1.0], "terminated": True}
    with pytest.raises(ValueError, match="actions have values outside"):
        save_minari_dataset([good, {**good, "actions": [0, 2]}], "tests/bad-v0", "CartPole-v1")
    with pytest.raises(ValueError, match="at least one episode"):
        save_minari_dataset([], "tests/bad-v0", "CartPole-v1")
    with pytest.raises(ValueError, match="needs env, or both"):
        save_minari_dataset([good], "tests/bad-v0")
    with pytest.raises(ValueError, match="Dict, Tuple and other nested spaces"):
        save_minari_dataset([good], "tests/bad-v0", observation_space=spaces.Dict(), action_space=spaces.Discrete(2))
    assert not (datasets_path / "tests" / "bad-v0").exists()


# ----------------------------------------------------------------------------------------------
# bad datasets
# ----------------------------------------------------------------------------------------------


class DictObsEnv(gym.Env):
    observation_space = spaces.Dict({"position": spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)})
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 1.0, self.t >= 3, False, {}


def test_a_dataset_of_another_env_is_refused():
    collect("tests/pendulum-v0", gym.make("Pendulum-v1", max_episode_steps=5), [lambda obs: np.zeros(1, np.float32)])
    model = cartpole_model()
    with pytest.raises(ValueError, match=r"Minari dataset 'tests/pendulum-v0' has the observation space Box.*model's is Box"):
        model.add_demonstrations("tests/pendulum-v0")
    assert model.replay_buffer.n_paths == 0


def test_a_dict_observation_dataset_is_refused():
    collect("tests/dict-obs-v0", DictObsEnv(), [push_left])
    with pytest.raises(ValueError, match=r"'tests/dict-obs-v0' has the observation space Dict.*not supported"):
        cartpole_model().add_demonstrations("tests/dict-obs-v0")


def test_missing_datasets(datasets_path):
    model = cartpole_model()
    with pytest.raises(FileNotFoundError, match="never downloads"):
        model.add_demonstrations("tests/absent-v0")
    with pytest.raises(FileNotFoundError, match=r"DemonstrationsCallback: .*'tests/absent-v0'"):
        DemonstrationsCallback("tests/absent-v0")
    with pytest.raises(FileNotFoundError, match="No episodes file"):
        model.add_demonstrations(str(datasets_path / "absent-v0"))  # a path: not an id


def test_corrupt_dataset_folders(cartpole_dataset, datasets_path, tmp_path):
    model = cartpole_model()
    data = datasets_path / "tests" / "cartpole-scripted-v0" / "data"
    (data / "main_data.hdf5").write_bytes(b"this is not an HDF5 file")
    with pytest.raises(ValueError, match="'tests/cartpole-scripted-v0' could not be read"):
        model.add_demonstrations("tests/cartpole-scripted-v0")
    (data / "metadata.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable Minari dataset"):
        model.add_demonstrations("tests/cartpole-scripted-v0")
    with pytest.raises(ValueError, match=r"DemonstrationsCallback: .*not a readable Minari dataset"):
        DemonstrationsCallback("tests/cartpole-scripted-v0")
    empty = tmp_path / "empty_folder"
    empty.mkdir()
    with pytest.raises(ValueError, match="not a readable Minari dataset"):
        model.add_demonstrations(empty)
    assert model.replay_buffer.n_paths == 0


def test_bad_episodes_name_the_dataset():
    buffer = minari.data_collector.EpisodeBuffer
    obs = np.zeros((4, 4), dtype=np.float32)
    ended_early = buffer(
        observations=obs,
        actions=np.zeros(3, np.int64),
        rewards=[1.0] * 3,
        terminations=[True, False, False],
        truncations=[False] * 3,
    )
    nan_reward = buffer(
        observations=obs,
        actions=np.zeros(3, np.int64),
        rewards=[1.0, np.nan, 1.0],
        terminations=[False] * 2 + [True],
        truncations=[False] * 3,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minari.create_dataset_from_buffers("tests/early-v0", [ended_early], env="CartPole-v1", **METADATA)
        minari.create_dataset_from_buffers("tests/nan-v0", [nan_reward], env="CartPole-v1", **METADATA)
    model = cartpole_model()
    with pytest.raises(ValueError, match=r"'tests/early-v0', episode 0 \(id 0\) ends at step 0 .* until step 2"):
        model.add_demonstrations("tests/early-v0")
    with pytest.raises(ValueError, match=r"Minari dataset 'tests/nan-v0': Episode 0: Non-finite rewards"):
        model.add_demonstrations("tests/nan-v0")


def test_without_minari_the_error_names_the_extra(cartpole_dataset, datasets_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "minari", None)  # import minari now raises ImportError
    with pytest.raises(ImportError, match=r'pip install -e "\.\[minari\]"'):
        cartpole_model().add_demonstrations("tests/cartpole-scripted-v0")
    with pytest.raises(ImportError, match=r'pip install -e "\.\[minari\]"'):
        save_minari_dataset([{}], "tests/x-v0", "CartPole-v1")


@pytest.mark.experiments
def test_benchmark_script_writes_its_report(tmp_path):
    pytest.importorskip("matplotlib")
    from benchmarks.experiments import demonstrations

    out = tmp_path / "report"
    tiny = "--seeds 0 --steps 200 --eval-freq 100 --eval-episodes 1 --teacher-steps 200 --n-demos 1 --out"
    assert demonstrations.main([*tiny.split(), str(out)]) == 0
    assert sorted(path.name for path in out.iterdir()) == ["demonstrations.png", "evaluations.csv", "results.md"]
    report = (out / "results.md").read_text()
    assert "| no demonstrations |" in report and "| 1 demonstrations (Minari dataset) |" in report
    rows = (out / "evaluations.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 3  # two learners, evaluated at 0, 100 and 200 steps
