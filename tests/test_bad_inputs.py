"""
The bad-input matrix (#32): bad environment outputs (NaN / inf / float32 overflow, wrong shapes), rewards too large to
train on and envs that cannot be seeded, over every algorithm, fail early with an exception that names them. Cases
that should work (chunked training, small logging windows) assert that they work.

The other bad inputs have their contract files: hyperparameters ``test_hyperparameters.py``, spaces
``test_spaces.py``, model, replay and demonstration files ``test_save_load.py``.
"""

import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from pcl_testing import ALGOS, IDS, SpaceEnv, build
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import PCL, UREX, RecurrentPCL, Reinforce, TrustPCL

# ----------------------------------------------------------------------------------------------
# environment outputs
# ----------------------------------------------------------------------------------------------


class BadOutput(gym.Wrapper):
    """Replace the reward or the observation of step ``at`` (and later ones) by ``value``."""

    def __init__(self, env: gym.Env, what: str, value: float, at: int = 3):
        super().__init__(env)
        self.what, self.value, self.at, self.t = what, value, at, 0

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if self.t >= self.at:
            if self.what == "reward":
                reward = self.value
            else:
                obs = np.full_like(obs, self.value, dtype=np.float64)
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
@pytest.mark.parametrize("what", ["reward", "observation"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e39], ids=["nan", "inf", "overflow"])
def test_non_finite_env_outputs_are_refused(algo: type, what: str, value: float) -> None:
    _, _, n_envs = ALGOS[algo]
    env = make_vec_env(lambda: BadOutput(gym.make("CartPole-v1"), what, value), n_envs=n_envs, seed=0)
    model = build(algo, env)
    with pytest.raises(ValueError, match=rf"(?i)non-finite (next )?{what}"):
        model.learn(200)


class WrongShape(gym.Wrapper):
    """An env whose observations do not have the shape of its observation space."""

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        return np.concatenate([obs, obs]), info

    def step(self, action: Any) -> Any:
        obs, *rest = self.env.step(action)
        return (np.concatenate([obs, obs]), *rest)


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_observations_of_the_wrong_shape_are_refused(algo: type) -> None:
    _, _, n_envs = ALGOS[algo]
    model = build(algo, make_vec_env(lambda: WrongShape(gym.make("CartPole-v1")), n_envs=n_envs, seed=0))
    with pytest.raises(ValueError, match=r"shape|reshape|size"):
        model.learn(100)


# ----------------------------------------------------------------------------------------------
# what must work: small logging windows
# ----------------------------------------------------------------------------------------------


def test_trust_pcls_episode_window_does_not_depend_on_the_logging_window() -> None:
    model = build(TrustPCL, stats_window_size=1, lambda_window=20, max_divergence=0.01)
    model.learn(600)
    assert model.lambda_target is not None and len(model._lambda_episodes) > 9


# ----------------------------------------------------------------------------------------------
# numbers too large to train on: refused before the parameters change
# ----------------------------------------------------------------------------------------------


class Scaled(gym.Env):
    """Ten steps of constant reward ``reward`` with Box actions in ``[-bound, bound]``; reset observations ``obs``."""

    def __init__(self, reward: float = 1.0, bound: float = 1.0, obs: float = 0.1):
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = spaces.Box(-bound, bound, (1,), np.float32)
        self.reward, self.obs, self.t = reward, obs, 0

    def reset(self, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.full(2, self.obs), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return np.full(2, 0.1), self.reward * (1 + 0.1 * float(np.tanh(action[0]))), False, self.t >= 10, {}


PCL_UPDATES = [
    ("gradient", "joint", {}),
    ("gradient", "grad", {}),
    ("gradient", "lbfgs", {}),
    ("gradient", "best_fit", {}),
    ("trust_region", "grad", {"loss": "surrogate"}),
]


@pytest.mark.parametrize("algo", [PCL, TrustPCL, RecurrentPCL], ids=["PCL", "TrustPCL", "RecurrentPCL"])
@pytest.mark.parametrize("scale", [{"reward": 1e30}, {"reward": 1e37}, {"bound": 1e10}], ids=["r1e30", "r1e37", "a1e10"])
def test_non_finite_updates_are_refused_naming_the_causes(algo: type, scale: dict[str, float]) -> None:
    model = build(algo, make_vec_env(lambda: Scaled(**scale), n_envs=1, seed=0))
    before = [p.detach().clone() for p in model.policy.parameters()]
    with pytest.raises(ValueError, match=r"non-finite update in the policy step.*rewards too large.*VecNormalize"):
        model.learn(200)
    assert all(th.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))


@pytest.mark.parametrize("policy_step, value_fit, step_kwargs", PCL_UPDATES, ids=[f"{p}-{v}" for p, v, _ in PCL_UPDATES])
def test_every_pcl_update_checks_finiteness(policy_step: str, value_fit: str, step_kwargs: dict[str, Any]) -> None:
    model = build(
        PCL,
        make_vec_env(lambda: Scaled(reward=1e37), n_envs=1, seed=0),
        policy_step=policy_step,
        value_fit=value_fit,
        policy_step_kwargs=step_kwargs or None,
        ent_coef=0.01,
    )
    with pytest.raises(ValueError, match=r"non-finite update in the (policy|trust-region) step"):
        model.learn(200)


def test_a_non_finite_value_fit_is_refused() -> None:
    model = build(PCL, value_fit="grad")
    model.learn(100)
    batch = model.replay_buffer.sample(2)
    batch = batch._replace(rewards=th.full_like(batch.rewards, float("inf")))
    with pytest.raises(ValueError, match=r"non-finite update in the value fit"):
        values, _, final_values, _ = model._evaluate(model.policy, batch)
        model._fit_value(batch, values, final_values, 0.01, None)


@pytest.mark.parametrize("algo", [Reinforce, UREX], ids=["Reinforce", "UREX"])
def test_non_finite_episode_updates_are_refused(algo: type) -> None:
    model = build(algo, make_vec_env(lambda: Scaled(reward=3e37), n_envs=2, seed=0))
    before = [p.detach().clone() for p in model.policy.parameters()]
    with pytest.raises(ValueError, match=r"non-finite update in the policy step.*rewards too large"):
        model.learn(200)
    assert all(th.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_a_reset_observation_that_overflows_float32_is_refused_before_acting(algo: type) -> None:
    model = build(algo, make_vec_env(lambda: Scaled(obs=1e39), n_envs=ALGOS[algo][2], seed=0))
    with pytest.raises(ValueError, match=r"Non-finite observation.*too large for float32.*env index \[0"):
        model.learn(100)


# ----------------------------------------------------------------------------------------------
# demonstrations and unseedable envs
# ----------------------------------------------------------------------------------------------


def test_demonstrations_are_stored_in_a_squashing_policys_action_space() -> None:
    env = make_vec_env(lambda: SpaceEnv(spaces.Box(-1, 1, (2,)), spaces.Box(-2, 2, (1,))), n_envs=1, seed=0)
    model = PCL("MlpPolicy", env, use_sde=True, policy_kwargs={"squash_output": True}, buffer_size=100)
    episode = {
        "observations": np.zeros((3, 2), dtype=np.float32),
        "actions": np.array([[2.0], [-2.0]], dtype=np.float32),
        "rewards": np.zeros(2, dtype=np.float32),
        "terminated": True,
    }
    model.add_demonstrations([episode])
    path = next(iter(model.replay_buffer.paths.values()))
    np.testing.assert_allclose(model.replay_buffer.actions[path.slots, 0], [1.0, -1.0])


class DrawsFromNumPy(gym.Env):
    """An env whose reset ignores its seed: the start state comes from NumPy's global generator."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: Any = None) -> Any:
        self.t = 0
        return np.random.uniform(-1, 1, 2).astype(np.float32), {"noise": float("nan")}

    def step(self, action: Any) -> Any:
        self.t += 1
        return np.random.uniform(-1, 1, 2).astype(np.float32), float(action), self.t >= 5, False, {}


@pytest.mark.parametrize("algo", [Reinforce, UREX], ids=["Reinforce", "UREX"])
@pytest.mark.parametrize("env_id", ["IdentityEnv", "IdentityEnvBox", "numpy"])
def test_reinforce_and_urex_learn_on_envs_whose_reset_ignores_the_seed(algo: type, env_id: str) -> None:
    from stable_baselines3.common.envs import IdentityEnv, IdentityEnvBox

    makers = {
        "IdentityEnv": lambda: IdentityEnv(dim=4, ep_length=5),
        "IdentityEnvBox": lambda: IdentityEnvBox(ep_length=5),
        "numpy": DrawsFromNumPy,
    }
    model = build(algo, make_vec_env(makers[env_id], n_envs=2, seed=0))
    with pytest.warns(UserWarning, match=r"cannot be reset to a given seed.*unsynchronized groups"):
        model.learn(100)
    assert model._n_updates >= 2


def test_reset_infos_holding_nan_compare_equal() -> None:
    from sb3_pcl.reinforce.episodes import GroupSyncError, check_group_sync

    same = [{"x": float("nan"), "y": np.array([np.nan])} for _ in range(2)]  # equal objects, NaN != NaN elementwise
    check_group_sync(np.zeros((2, 1)), 2, same)  # no GroupSyncError: NaN in the same place counts as equal
    with pytest.raises(GroupSyncError, match="different reset infos"):
        check_group_sync(np.zeros((2, 1)), 2, [same[0], {"x": float("nan"), "y": np.array([0.0])}])


# ----------------------------------------------------------------------------------------------
# the replay's memory grows with what it stores
# ----------------------------------------------------------------------------------------------


def resident_bytes() -> int:
    """:return: this process's resident memory (Linux)"""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident memory from /proc")
def test_replay_memory_grows_with_what_is_stored() -> None:
    """A buffer_size of 10**7 used to cost 399 MiB for 60 transitions (a Python list of every free slot)."""
    before = resident_bytes()
    model = build(PCL, buffer_size=10**7)
    model.learn(60)
    grown = resident_bytes() - before
    assert model.replay_buffer.size() == model.num_timesteps and model.replay_buffer.free_slots == []
    assert model.replay_buffer.next_fresh_slot == model.num_timesteps
    # the storage (np.zeros, 240 MiB) is mapped lazily: only the pages written become resident
    assert grown < 64 << 20, f"{grown / 2**20:.0f} MiB"


# ----------------------------------------------------------------------------------------------
# Reinforce's discount, unseedable envs and groups that differ
# ----------------------------------------------------------------------------------------------


def test_reinforces_gamma_discounts_the_episode_return() -> None:
    """With reward 1 per step, gamma=0.5 bounds every return by 2, so advantages (ent_coef=0) stay below 2."""
    advantages = {}
    for gamma in (1.0, 0.5):
        model = build(Reinforce, gamma=gamma, ent_coef=0.0, num_samples=4, max_steps=200)
        model.learn(400, log_interval=None)
        advantages[gamma] = model.logger.name_to_value["train/advantage_abs_mean"]
    assert advantages[0.5] < 2.0 < advantages[1.0]


def test_an_unseedable_env_found_during_training_falls_back_too() -> None:
    """check_seeding=False skips the check at the start of learn: the first batch's group check finds it."""
    model = build(UREX, make_vec_env(DrawsFromNumPy, n_envs=4, seed=0), check_seeding=False)
    with pytest.warns(UserWarning, match=r"UREX: the env cannot be reset to a given seed: two resets.*unsynchronized groups"):
        model.learn(100)
    assert not model._synchronized and model._n_updates >= 2


class Offset(DrawsFromNumPy):
    """Seeded, but each env starts elsewhere for the same seed (as per-env curricula that drifted apart)."""

    def __init__(self, offset: float):
        self.offset = offset

    def reset(self, seed: int | None = None, options: Any = None) -> Any:
        gym.Env.reset(self, seed=seed)
        self.t = 0
        return (self.np_random.uniform(-0.5, 0.5, 2) + self.offset).astype(np.float32), {}


@pytest.mark.parametrize("check_seeding", [True, False])
def test_a_seeded_env_whose_groups_differ_is_still_refused(check_seeding: bool) -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = DummyVecEnv([lambda i=i: Offset(0.1 * i) for i in range(2)])
    model = build(Reinforce, env, check_seeding=check_seeding)
    with pytest.raises(ValueError, match=r"copies of groups \[0\] have different first observations.*SharedCurriculum"):
        model.learn(100)
