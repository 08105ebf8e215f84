"""
Tests of :class:`sb3_pcl.envs.AlgorithmicVecEnv`: step for step the same results as SB3's ``DummyVecEnv`` of the
same envs, on every task, with the shared curriculum, seeded resets, time limits and env method calls.
"""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

import sb3_pcl  # noqa: F401  (registers the algorithmic tasks)
from sb3_pcl import RecurrentUREX
from sb3_pcl.envs import (
    ALGORITHMIC_ENV_IDS,
    AlgorithmicVecEnv,
    CombinedActionWrapper,
    SharedCurriculum,
    make_algorithmic_vec_env,
)
from sb3_pcl.reinforce.episodes import set_reset_seeds


def pair(env_id: str, n_envs: int, **env_kwargs: Any) -> tuple[VecEnv, VecEnv]:
    """The same envs (``make_vec_env``: ``gym.make`` + ``Monitor``) in a ``DummyVecEnv`` and an ``AlgorithmicVecEnv``."""
    kwargs = {"render_mode": "ansi", **env_kwargs}
    dummy = make_vec_env(env_id, n_envs=n_envs, seed=3, env_kwargs=kwargs, vec_env_cls=DummyVecEnv)
    fast = make_vec_env(env_id, n_envs=n_envs, seed=3, env_kwargs=kwargs, vec_env_cls=AlgorithmicVecEnv)  # type: ignore[arg-type]
    return dummy, fast


def random_actions(rng: np.random.Generator, env: VecEnv, write_probability: float) -> np.ndarray:
    """Random actions that write with the given probability, and the right symbol half of the times they write."""
    nvec = env.action_space.nvec
    n = env.num_envs
    actions = np.stack([rng.integers(nvec[0], size=n), rng.random(n) < write_probability, rng.integers(nvec[2], size=n)], 1)
    return actions.astype(np.int64)


def assert_same_infos(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> None:
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        assert set(want) == set(got)
        for key, value in want.items():
            if key == "episode":
                assert {k: v for k, v in got[key].items() if k != "t"} == {k: v for k, v in value.items() if k != "t"}
                assert set(got[key]) == set(value)
            elif key == "terminal_observation":
                assert np.array_equal(got[key], value) and np.asarray(got[key]).dtype == np.asarray(value).dtype
            else:
                assert got[key] == value, key


def run_both(dummy: VecEnv, fast: VecEnv, steps: int, seed: int = 0, write_probability: float = 0.5) -> dict[str, int]:
    """Step both VecEnvs with the same random actions and compare everything; return what happened."""
    rng = np.random.default_rng(seed)
    obs_d, obs_f = dummy.reset(), fast.reset()
    assert np.array_equal(obs_d, obs_f) and obs_d.dtype == obs_f.dtype
    counts = {"dones": 0, "rewards": 0, "truncations": 0}
    for _ in range(steps):
        actions = random_actions(rng, dummy, write_probability)
        obs_d, rew_d, done_d, info_d = dummy.step(actions)
        obs_f, rew_f, done_f, info_f = fast.step(actions)
        assert np.array_equal(obs_d, obs_f) and obs_d.dtype == obs_f.dtype
        assert np.array_equal(rew_d, rew_f) and rew_d.dtype == rew_f.dtype
        assert np.array_equal(done_d, done_f) and done_d.dtype == done_f.dtype
        assert_same_infos(info_d, info_f)
        assert_same_infos(dummy.unwrapped.reset_infos, fast.unwrapped.reset_infos)
        counts["dones"] += int(done_d.sum())
        counts["rewards"] += int(np.count_nonzero(rew_d))
        counts["truncations"] += sum(bool(info["TimeLimit.truncated"]) for info in info_d)
    return counts


@pytest.mark.parametrize("env_id", ALGORITHMIC_ENV_IDS)
def test_same_steps_as_dummy_vec_env_with_per_env_curricula(env_id):
    # every finished episode promotes its env's curriculum: the inputs grow past the arrays' first size
    dummy, fast = pair(env_id, 5, last=1, min_reward_threshold=-100.0)
    counts = run_both(dummy, fast, 400)
    assert counts["dones"] > 50 and counts["rewards"] > 200
    lengths = dummy.get_attr("min_length")
    assert lengths == fast.get_attr("min_length") and max(lengths) > 10


@pytest.mark.parametrize("env_id", ["sb3_pcl/Copy-v0", "sb3_pcl/ReversedAddition-v0"])
def test_same_steps_under_the_shared_curriculum(env_id):
    dummy, fast = pair(env_id, 6, last=2, min_reward_threshold=-1.5)
    dummy, fast = SharedCurriculum(dummy), SharedCurriculum(fast)
    run_both(dummy, fast, 300, write_probability=0.8)
    assert dummy.min_length == fast.min_length > 2
    assert dummy.reward_shortfalls == fast.reward_shortfalls


def test_time_limit_truncation_and_seeded_resets():
    # a 6-step TimeLimit cuts episodes that only move; seeds given through VecEnv.seed and set_reset_seeds
    def make(index: int) -> gym.Env:
        return Monitor(gym.make("sb3_pcl/RepeatCopy-v0", max_episode_steps=6, starting_min_length=4))

    dummy = DummyVecEnv([lambda i=i: make(i) for i in range(4)])
    fast = AlgorithmicVecEnv([lambda i=i: make(i) for i in range(4)])
    assert fast.max_episode_steps == 6 and fast.monitored
    for env in (dummy, fast):
        env.seed(7)
    counts = run_both(dummy, fast, 60, write_probability=0.0)
    assert counts["truncations"] > 0
    for env in (dummy, fast):
        set_reset_seeds(env, [11, 11, 12, 12])
    run_both(dummy, fast, 60, seed=1)
    for env in (dummy, fast):
        set_reset_seeds(env, [5, 5, 5, 5])
    obs = fast.reset()
    assert [task.input_data.tolist() for task in fast.tasks[1:]] == [fast.tasks[0].input_data.tolist()] * 3
    assert np.array_equal(obs, dummy.reset())


def test_env_objects_are_up_to_date_for_get_attr_env_method_and_render():
    dummy, fast = pair("sb3_pcl/ReversedAddition3-v0", 3)
    rng = np.random.default_rng(0)
    dummy.reset(), fast.reset()
    for _ in range(7):
        actions = random_actions(rng, dummy, 0.5)
        dummy.step(actions), fast.step(actions)
        for name in ("read_head_position", "time", "write_head_position", "written", "episode_total_reward", "last_action"):
            assert dummy.get_attr(name) == fast.get_attr(name), name
        assert dummy.env_method("render") == fast.env_method("render")
    # calls that change the episode are taken back into the arrays: both reset env 1 and move env 2 by hand
    assert dummy.env_method("reset", seed=4, indices=1)[0][0] == fast.env_method("reset", seed=4, indices=1)[0][0]
    assert dummy.env_method("step", (1, 0, 0), indices=2)[0][:4] == fast.env_method("step", (1, 0, 0), indices=2)[0][:4]
    for _ in range(5):
        actions = random_actions(rng, dummy, 0.5)
        obs_d, rew_d, done_d, _ = dummy.step(actions)
        obs_f, rew_f, done_f, _ = fast.step(actions)
        assert np.array_equal(obs_d, obs_f) and np.array_equal(rew_d, rew_f) and np.array_equal(done_d, done_f)
    fast.set_attr("note", 7, indices=[0, 2])
    assert fast.get_attr("note", indices=[0, 2]) == [7, 7]


def test_urex_trains_identically_on_both_vec_envs():
    def train(vec_env_cls: type[VecEnv]) -> list[th.Tensor]:
        venv = make_vec_env("sb3_pcl/Copy-v0", n_envs=20, seed=0, vec_env_cls=vec_env_cls)  # type: ignore[arg-type]
        env = SharedCurriculum(venv, first_episode_only=True)
        model = RecurrentUREX(
            "MlpPrevActionLstmPolicy", env, num_samples=10, learning_rate=0.01, seed=0, policy_kwargs={"lstm_hidden_size": 8}
        )
        model.learn(2000)
        rewards = [info["r"] for info in model.ep_info_buffer]
        assert len(rewards) > 20
        return [*(p.detach().clone() for p in model.policy.parameters()), th.tensor(rewards), th.tensor(model.num_timesteps)]

    for expected, actual in zip(train(DummyVecEnv), train(AlgorithmicVecEnv), strict=True):
        assert th.equal(expected, actual)


def test_make_algorithmic_vec_env_and_images():
    env = make_algorithmic_vec_env("sb3_pcl/DuplicatedInput-v0", n_envs=2, seed=0, env_kwargs={"render_mode": "ansi"})
    assert isinstance(env, AlgorithmicVecEnv) and env.num_envs == 2 and env.monitored and env.max_episode_steps == 200
    assert env.env_is_wrapped(Monitor) == [True, True]
    assert env.get_images() == [None, None]
    assert env.render_mode == "ansi"


def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="at least one env"):
        AlgorithmicVecEnv([])
    with pytest.raises(ValueError, match="cannot apply the wrapper CombinedActionWrapper"):
        AlgorithmicVecEnv([lambda: CombinedActionWrapper(gym.make("sb3_pcl/Copy-v0"))])
    with pytest.raises(ValueError, match="needs the algorithmic tasks"):
        AlgorithmicVecEnv([lambda: gym.make("CartPole-v1")])
    with pytest.raises(ValueError, match="monitor file"):
        AlgorithmicVecEnv([lambda: Monitor(gym.make("sb3_pcl/Copy-v0"), filename=str(tmp_path / "monitor"))])
    with pytest.raises(ValueError, match="different task"):
        AlgorithmicVecEnv([lambda: gym.make("sb3_pcl/Copy-v0"), lambda: gym.make("sb3_pcl/Reverse-v0")])
    with pytest.raises(ValueError, match="different TimeLimits"):
        AlgorithmicVecEnv([lambda: gym.make("sb3_pcl/Copy-v0"), lambda: gym.make("sb3_pcl/Copy-v0", max_episode_steps=9)])
    env = make_algorithmic_vec_env("sb3_pcl/Copy-v0", n_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((2, 3), dtype=np.int64))
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((3, 3), dtype=np.int64))
    with pytest.raises(ValueError, match=r"invalid action \[0, 2, 0\] for env 1"):
        env.step(np.array([[0, 1, 0], [0, 2, 0]]))
