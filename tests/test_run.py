"""
Learning, over every class: on each supported action space, on a ``SubprocVecEnv``, with SB3's callbacks and
progress bar, in several ``learn`` calls, the same run for the same seed, and SB3's conventions.

The spaces refused are in ``test_spaces.py``.
"""

import inspect
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from pcl_testing import ALGOS, IDS, SpaceEnv, build
from stable_baselines3.common.callbacks import (
    BaseCallback,
    CheckpointCallback,
    EvalCallback,
    StopTrainingOnRewardThreshold,
)
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import SubprocVecEnv

from sb3_pcl import PCL, Reinforce, TrustPCL

EPISODIC = [algo for algo in ALGOS if issubclass(algo, Reinforce)]
ACTION_SPACES = {
    "Discrete": spaces.Discrete(3),
    "Box": spaces.Box(-2.0, 2.0, (2,), np.float32),
    "MultiDiscrete": spaces.MultiDiscrete([3, 2]),
    "MultiBinary": spaces.MultiBinary(3),  # PCL's family only: SB3's distributions give Reinforce none
}
SPACE_CASES = [(algo, space) for algo in ALGOS for space in ACTION_SPACES if not (space == "MultiBinary" and algo in EPISODIC)]


def parameters_of(model: Any) -> th.Tensor:
    """:return: the parameters of the policy and, for PCL's family, of the target policy, in one vector"""
    policies = [model.policy, *([model.policy_target] if hasattr(model, "policy_target") else [])]
    return th.cat([p.detach().flatten() for policy in policies for p in policy.parameters()])


@pytest.mark.parametrize("algo, space", SPACE_CASES, ids=[f"{a.__name__}-{s}" for a, s in SPACE_CASES])
def test_every_class_learns_on_each_supported_action_space(algo: type, space: str) -> None:
    """The env checks every action it gets lies in its space (Box actions are clipped to it)."""
    action_space = ACTION_SPACES[space]
    model = build(algo, lambda: SpaceEnv(spaces.Box(-1.0, 1.0, (2,), np.float32), action_space))
    before = parameters_of(model)
    model.learn(120)
    assert model.num_timesteps >= 120 and model._n_updates > 0
    after = parameters_of(model)
    assert th.isfinite(after).all() and not th.equal(before, after)
    if algo not in EPISODIC:
        assert model.replay_buffer.size() > 0
    action, _ = model.predict(model.observation_space.sample(), deterministic=False)
    assert action_space.contains(np.asarray(action, dtype=action_space.dtype))


class Batches(BaseCallback):
    """Keeps the episode batches of Reinforce's family."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[Any] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if "batch" in self.locals:
            self.batches.append(self.locals["batch"])


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_every_class_learns_on_a_subproc_vec_env(algo: type) -> None:
    n_envs = 4 if algo in EPISODIC else 2  # Reinforce's family: 2 groups of 2 copies
    env = make_vec_env(
        "CartPole-v1", n_envs=n_envs, seed=0, vec_env_cls=SubprocVecEnv, vec_env_kwargs={"start_method": "fork"}
    )
    try:
        callback = Batches()
        model = build(algo, env).learn(200, callback=callback)
        assert model.num_timesteps >= 200 and model._n_updates > 0
        if algo in EPISODIC:  # the copies of a group start from the same state, the groups from different ones
            assert callback.batches
            for batch in callback.batches:
                first = batch.observations[0].reshape(2, 2, -1)
                np.testing.assert_array_equal(first[:, 0], first[:, 1])
                assert not np.array_equal(first[0, 0], first[1, 0])
        else:  # every env's paths are in the replay
            assert {path.env_idx for path in model.replay_buffer.paths.values()} == {0, 1}
            assert model.replay_buffer.size() == model.num_timesteps
    finally:
        env.close()


class Locals(BaseCallback):
    """Counts the calls of ``on_step`` and checks the locals SB3's callbacks read."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _on_step(self) -> bool:
        self.calls += 1
        for key in ("rewards", "dones", "infos", "actions", "new_obs"):
            assert key in self.locals, key
        assert len(self.locals["rewards"]) == self.training_env.num_envs
        return True


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_sb3_callbacks_and_progress_bar(algo: type, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """On two envs: every vectorised step seen once; evaluations and checkpoints every 48 of them."""
    evaluation = EvalCallback(Monitor(gym.make("CartPole-v1")), eval_freq=48, n_eval_episodes=2, log_path=str(tmp_path))
    checkpoints = CheckpointCallback(save_freq=48, save_path=str(tmp_path / "ckpt"), name_prefix="model")
    counter = Locals()
    model = build(algo, make_vec_env("CartPole-v1", n_envs=2, seed=0))
    model.learn(192, callback=[evaluation, checkpoints, counter], progress_bar=True)
    assert counter.calls * 2 == model.num_timesteps
    if algo not in EPISODIC:  # (Reinforce's family ends its last batch past the budget)
        assert model.num_timesteps == 192 and "192/192" in capsys.readouterr().out  # SB3's bar counts env steps

    data = np.load(tmp_path / "evaluations.npz")
    timesteps = [96 * (k + 1) for k in range(model.num_timesteps // 96)]
    assert list(data["timesteps"]) == timesteps and data["results"].shape == (len(timesteps), 2)
    assert {p.name for p in (tmp_path / "ckpt").glob("*.zip")} == {f"model_{t}_steps.zip" for t in timesteps}
    assert algo.load(tmp_path / "ckpt" / f"model_{timesteps[-1]}_steps.zip").num_timesteps == timesteps[-1]


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_stop_training_on_reward_threshold(algo: type) -> None:
    stop = StopTrainingOnRewardThreshold(reward_threshold=-1e9)
    evaluation = EvalCallback(Monitor(gym.make("CartPole-v1")), callback_on_new_best=stop, eval_freq=30, n_eval_episodes=1)
    model = build(algo, make_vec_env("CartPole-v1", n_envs=2, seed=0))
    model.learn(1_000, callback=evaluation)
    assert model.num_timesteps == 60


@pytest.mark.parametrize("algo", [PCL, TrustPCL, Reinforce], ids=["PCL", "TrustPCL", "Reinforce"])
def test_chunked_training_keeps_the_default_learning_rate(algo: type) -> None:
    model = build(algo)
    for _ in range(3):
        model.learn(150, reset_num_timesteps=False)
        rates = {group["lr"] for group in model.policy.optimizer.param_groups}
        assert rates == {model.learning_rate}, rates  # a constant default: no sawtooth across learn calls


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_same_seed_same_run(algo: type) -> None:
    first, second, other = (parameters_of(build(algo, seed=seed).learn(100)) for seed in (0, 0, 1))
    assert th.equal(first, second) and not th.equal(first, other)


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_tensorboard_run_names_are_sb3s(algo: type, tmp_path: Any) -> None:
    assert inspect.signature(algo.learn).parameters["tb_log_name"].default == algo.__name__
    model = build(algo, tensorboard_log=str(tmp_path))
    model.learn(10, tb_log_name="run")
    model.learn(10)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["run_1", f"{algo.__name__}_1"])


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_sb3_conventions(algo: type) -> None:
    model = build(algo)
    assert 0 <= model.gamma <= 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SB3 gives none: neither do we (a short budget below learning_starts included)
        model.learn(10)
    for budget in (-1, 0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="total_timesteps must be a finite number > 0"):
            model.learn(budget)
