"""
Tests of :class:`sb3_pcl.envs.curriculum.SharedCurriculum` (one curriculum for all envs of a VecEnv, as in
gym <= 0.17.2) and of its use by Reinforce / UREX.
"""

import hashlib

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecMonitor, VecNormalize, is_vecenv_wrapped

import sb3_pcl  # noqa: F401  (registers the algorithmic tasks)
from sb3_pcl.envs import CurriculumLogCallback, SharedCurriculum, curriculum_length, expert_actions, has_curriculum
from sb3_pcl.recurrent_reinforce import RecurrentUREX
from sb3_pcl.reinforce import Reinforce
from sb3_pcl.urex import UREX

WRONG = "wrong"


def copy_vec(n_envs: int = 4, vec_env_cls: type[VecEnv] = DummyVecEnv, **env_kwargs) -> VecEnv:
    """``gym.make`` envs (TimeLimit, OrderEnforcing, PassiveEnvChecker) in SB3's Monitor."""
    vec_env_kwargs = {"start_method": "fork"} if vec_env_cls is SubprocVecEnv else None
    return make_vec_env(
        "sb3_pcl/Copy-v0",
        n_envs=n_envs,
        seed=0,
        env_kwargs={"render_mode": "ansi", **env_kwargs},
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
    )


class ExpertDriver:
    """Plays expert episodes in every env of a VecEnv (or a wrong first write in the envs told to fail)."""

    def __init__(self, venv: VecEnv):
        self.venv = venv
        venv.reset()
        self.queues = [self._plan(i) for i in range(venv.num_envs)]

    def _plan(self, index: int, fail: bool = False) -> list[np.ndarray]:
        base_env = self.venv.get_attr("unwrapped", [index])[0]  # a copy for SubprocVecEnv: only read
        actions = list(expert_actions(base_env))
        if fail:
            wrong = (int(base_env.target[0]) + 1) % base_env.base
            actions = [np.array([1, 1, wrong])]
        return actions

    def step(self, fail: set[int] | None = None) -> list[float]:
        """One vectorised step; envs that end an episode get a new plan. :return: the shortfalls of the step."""
        actions = np.stack([queue[0] for queue in self.queues])
        _, _, dones, infos = self.venv.step(actions)
        shortfalls = []
        for i in range(self.venv.num_envs):
            self.queues[i].pop(0)
            if dones[i]:
                shortfalls.append(infos[i]["shortfall"])
                self.queues[i] = self._plan(i, fail=fail is not None and i in fail)
        return shortfalls

    def fail_next(self, index: int) -> None:
        """Replace env ``index``'s current plan (it must be fresh) by a wrong first write."""
        self.queues[index] = self._plan(index, fail=True)


def min_lengths(venv: VecEnv) -> list[int]:
    return list(venv.get_attr("min_length"))


# ----------------------------------------------------------------------------------------------
# The wrapper
# ----------------------------------------------------------------------------------------------


def test_settings_come_from_the_envs_and_disable_their_own_curricula():
    venv = copy_vec(3, last=5)
    assert has_curriculum(venv) and not has_curriculum(make_vec_env("CartPole-v1", n_envs=2))
    curriculum = SharedCurriculum(venv)
    assert (curriculum.last, curriculum.min_reward_threshold, curriculum.max_min_length, curriculum.min_length) == (
        5,
        -1.0,
        30,
        2,
    )
    # env_method / get_attr reach the base envs through gym.make's wrappers and Monitor
    assert venv.get_attr("external_curriculum") == [True] * 3
    curriculum.reset()
    assert venv.get_attr("reward_shortfalls") == [[]] * 3  # no phantom episode recorded
    assert curriculum.reward_shortfalls == []
    overridden = SharedCurriculum(copy_vec(2), last=7, min_reward_threshold=-2.0, min_length=4)
    assert (overridden.last, overridden.min_reward_threshold, overridden.min_length) == (7, -2.0, 4)
    assert min_lengths(overridden) == [4, 4]


def test_rejects_envs_without_curriculum_and_disagreeing_settings():
    with pytest.raises(TypeError, match="curriculum_settings"):
        SharedCurriculum(make_vec_env("CartPole-v1", n_envs=2))
    mixed = DummyVecEnv([lambda: gym.make("sb3_pcl/Copy-v0", last=3), lambda: gym.make("sb3_pcl/Copy-v0", last=4)])
    with pytest.raises(ValueError, match="last"):
        SharedCurriculum(mixed)
    assert SharedCurriculum(mixed, last=3).last == 3
    with pytest.raises(ValueError, match="min_length"):
        SharedCurriculum(copy_vec(2), min_length=0)


@pytest.mark.parametrize("vec_env_cls", [DummyVecEnv, SubprocVecEnv])
def test_promotes_all_envs_together_after_last_perfect_episodes_in_total(vec_env_cls):
    last = 6
    venv = copy_vec(4, vec_env_cls, last=last)
    try:
        curriculum = SharedCurriculum(venv)
        driver = ExpertDriver(curriculum)
        recorded = 0
        while recorded < last:
            shortfalls = driver.step()
            assert all(value == 0.0 for value in shortfalls)
            recorded += len(shortfalls)
            promoted = recorded >= last
            assert curriculum.min_length == 2 + int(promoted)
            assert min_lengths(venv) == [2 + int(promoted)] * 4
        # several envs can end in the promoting step: those after the promotion start the new list
        assert curriculum.reward_shortfalls == [0.0] * (recorded - last)
        assert venv.get_attr("reward_shortfalls") == [[]] * 4  # the envs record nothing themselves
        # every env's next reset uses the new length
        venv.seed(123)
        curriculum.reset()
        assert [info["min_length"] for info in venv.reset_infos] == [3] * 4
        assert all(3 <= len(tape) <= 5 for tape in venv.get_attr("input_data"))
    finally:
        venv.close()


def reference_min_length(shortfalls: list[float], last: int, threshold: float = -1.0, min_length: int = 2) -> int:
    """The curriculum rule applied to a sequence of shortfalls."""
    window: list[float] = []
    for value in shortfalls:
        window = [*window, value][-last:]
        if len(window) == last and min(window) >= threshold and min_length < 30:
            min_length, window = min_length + 1, []
    return min_length


def test_an_imperfect_episode_delays_the_promotion_of_all_envs():
    venv = copy_vec(2, last=3)
    curriculum = SharedCurriculum(venv)
    driver = ExpertDriver(curriculum)
    driver.fail_next(1)
    recorded: list[float] = []
    while curriculum.min_length < 4:
        recorded += driver.step(fail={1} if len(recorded) < 6 else None)
        assert curriculum.min_length == reference_min_length(recorded, 3)
        assert min_lengths(venv) == [curriculum.min_length] * 2
    assert sum(value <= -1.5 for value in recorded) >= 2
    assert len(recorded) > 6


def test_interrupted_and_auto_reset_episodes():
    venv = copy_vec(2, last=100)
    every = SharedCurriculum(venv)
    driver = ExpertDriver(every)
    for _ in range(40):
        driver.step()
    n_recorded = len(every.reward_shortfalls)
    assert n_recorded > 2  # every finished episode counts, auto-reset ones included
    every.reset()  # interrupts the running episodes: nothing recorded
    assert len(every.reward_shortfalls) == n_recorded

    first_only = SharedCurriculum(copy_vec(2, last=100), first_episode_only=True)
    driver = ExpertDriver(first_only)
    for _ in range(40):
        driver.step()
    assert len(first_only.reward_shortfalls) == 2  # one episode per env since the reset
    first_only.reset()
    driver.queues = [driver._plan(i) for i in range(2)]
    for _ in range(40):
        driver.step()
    assert len(first_only.reward_shortfalls) == 4


def test_first_episode_only_records_the_batch_in_env_order():
    # env 0 fails at its first write (its episode ends first), env 1 plays its expert episode: in the order of
    # ending the failure would come first; gym appended shortfalls at the resets, in env order
    curriculum = SharedCurriculum(copy_vec(2, last=100), first_episode_only=True)
    driver = ExpertDriver(curriculum)
    driver.fail_next(0)
    ended: list[float] = []
    ended += driver.step()
    assert len(ended) == 1 and ended[0] <= -1.5 and curriculum.reward_shortfalls == []  # held until env 1 ends
    while len(ended) < 3:  # env 0's auto-reset episode ends too; it is not counted
        ended += driver.step()
    assert curriculum.reward_shortfalls == [ended[0], 0.0]


def test_first_episode_only_cut_batch_recorded_at_reset_and_promotes_before_it():
    # with last=1, one perfect episode promotes; env 1's episode is still running when the VecEnv is reset
    venv = copy_vec(2, last=1)
    curriculum = SharedCurriculum(venv, first_episode_only=True)
    driver = ExpertDriver(curriculum)
    driver.queues[1] = driver.queues[1] + [np.array([0, 0, 0])] * 5  # env 1 idles on the way (no write)
    shortfalls: list[float] = []
    while not shortfalls:
        shortfalls += driver.step()
    assert curriculum.min_length == 2  # env 1 is still counting: nothing recorded yet
    curriculum.reset()  # interrupts env 1 (records nothing) and records env 0's episode first
    assert curriculum.min_length == 3 and min_lengths(venv) == [3, 3]
    assert curriculum.reward_shortfalls == []


@pytest.mark.parametrize("order", ["normalize_on_top", "normalize_below"])
def test_with_vec_normalize_on_top_or_below(order):
    venv = copy_vec(2, last=2)
    if order == "normalize_on_top":
        curriculum = SharedCurriculum(venv)
        wrapped: VecEnv = VecNormalize(curriculum, norm_obs=False)
    else:
        curriculum = SharedCurriculum(VecNormalize(venv, norm_obs=False))
        wrapped = curriculum
    driver = ExpertDriver(wrapped)
    while curriculum.min_length == 2:
        driver.step()
    assert min_lengths(venv) == [3, 3]
    assert is_vecenv_wrapped(wrapped, SharedCurriculum)


# ----------------------------------------------------------------------------------------------
# Reinforce / UREX
# ----------------------------------------------------------------------------------------------


def params_digest(model: BaseAlgorithm) -> str:
    params = th.cat([p.detach().reshape(-1).double() for p in model.policy.parameters()]).numpy()
    return hashlib.sha256(params.tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("algo", [Reinforce, UREX])
def test_reinforce_urex_with_promotions_mid_training(algo):
    # every finished episode passes the threshold: with last=2, promotions happen in the middle of the batches
    env = copy_vec(4, last=2, min_reward_threshold=-100.0)
    shared = SharedCurriculum(env, first_episode_only=True)
    model = algo("MlpPolicy", shared, num_samples=2, max_steps=100, seed=0, policy_kwargs={"net_arch": [8]})
    assert model.env is shared
    lengths = []

    class LengthRecorder(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            lengths.append(self.logger.name_to_value[CurriculumLogCallback.KEY])

    model.learn(300, callback=[CurriculumLogCallback(), LengthRecorder()], log_interval=10**6)  # no ValueError
    assert shared.min_length >= 4
    assert min_lengths(env) == [shared.min_length] * 4
    # one value per batch, the shared length at the end of the batch
    assert len(lengths) >= 2 and lengths == sorted(lengths) and lengths[-1] == shared.min_length
    assert model.logger.name_to_value["rollout/min_length"] == shared.min_length


# Recorded with sb3_pcl 0.1.0, whose Reinforce and UREX wrapped the env in SharedCurriculum(venv, first_episode_only=True)
# by default (shared_curriculum=True): the parameters' digest after 120 steps with promotions mid-batch (one per kind
# of CPU, as the golden runs': tests/test_golden.py), the final length and the step count.
OLD_DEFAULT = {
    "Reinforce": ("MlpPolicy", {"net_arch": [8]}, {"AMD EPYC": "4b794d49c061aab3", "Intel Xeon": "d95ba4c2bf0323ff"}, 20, 120),
    "RecurrentUREX": (  # UREX("MlpLstmPolicy") then
        "MlpPrevActionLstmPolicy",
        {"lstm_hidden_size": 8},
        {"AMD EPYC": "d97045eb286c38d9", "Intel Xeon": "8f22104de6c65ef3"},
        14,
        124,
    ),
}


@pytest.mark.parametrize("algo", [Reinforce, RecurrentUREX])
def test_wrapping_by_hand_gives_the_numbers_of_the_old_default(algo):
    policy, policy_kwargs, digests, final_length, n_steps = OLD_DEFAULT[algo.__name__]
    env = copy_vec(4, last=2, min_reward_threshold=-100.0)
    model = algo(
        policy,
        SharedCurriculum(env, first_episode_only=True),
        num_samples=2,
        max_steps=100,
        seed=0,
        policy_kwargs=policy_kwargs,
    )
    model.learn(120, log_interval=10**6)
    assert params_digest(model) in digests.values()
    assert (model.env.min_length, model.num_timesteps) == (final_length, n_steps)
    assert min_lengths(env) == [final_length] * 4


def test_without_shared_curriculum_diverging_envs_break_the_groups():
    env = copy_vec(4)
    model = Reinforce("MlpPolicy", env, num_samples=2, max_steps=20, policy_kwargs={"net_arch": [8]})
    assert model.env is env
    env.env_method("set_min_length", 5, external=False, indices=[0])  # as a per-env promotion would
    with pytest.raises(ValueError, match=r"different .*SharedCurriculum\(venv, first_episode_only=True\)"):
        model.learn(40)
    # the per-batch check too (check_seeding=False skips only the one at the start of learn)
    model = Reinforce("MlpPolicy", env, num_samples=2, max_steps=20, check_seeding=False, policy_kwargs={"net_arch": [8]})
    with pytest.raises(ValueError, match=r"sb3_pcl\.envs\.SharedCurriculum"):
        model.learn(40)


def test_algorithms_never_wrap_and_keep_the_user_wrapper(tmp_path):
    env = copy_vec(2)
    assert Reinforce("MlpPolicy", env).env is env
    user = SharedCurriculum(copy_vec(2), first_episode_only=True)
    model = UREX("MlpPolicy", user, policy_kwargs={"net_arch": [8]})
    assert model.env is user
    plain = copy_vec(2)
    model.set_env(plain)
    assert model.env is plain
    model.save(tmp_path / "model")
    again = SharedCurriculum(copy_vec(2), first_episode_only=True)
    loaded = UREX.load(tmp_path / "model", env=again)
    assert loaded.env is again and not hasattr(loaded, "shared_curriculum")


def test_curriculum_length_and_its_callback():
    assert curriculum_length(make_vec_env("CartPole-v1", n_envs=2)) is None
    env = copy_vec(3)
    env.env_method("set_min_length", 5, indices=[0])
    assert curriculum_length(env) == pytest.approx(3.0)  # per-env curricula: the mean
    shared = SharedCurriculum(env, min_length=4)
    assert curriculum_length(shared) == 4 and curriculum_length(VecMonitor(shared)) == 4
    # no curriculum: the callback logs nothing
    model = Reinforce("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), num_samples=2, max_steps=5, seed=0)
    model.learn(20, callback=CurriculumLogCallback())
    assert CurriculumLogCallback.KEY not in model.logger.name_to_value


def test_pcl_shared_curriculum_counts_every_episode(tmp_path):
    from sb3_pcl.pcl import PCL
    from sb3_pcl.trust_pcl import TrustPCL

    kwargs = {"learning_starts": 0, "batch_size": 4, "policy_kwargs": {"net_arch": [8]}}
    # Every ended episode promotes (last=1, any shortfall passes): the shared length rises with the episode count.
    env = copy_vec(4, last=1, min_reward_threshold=-100.0)
    model = PCL("MlpPolicy", SharedCurriculum(env), **kwargs)
    assert isinstance(model.env, SharedCurriculum) and not model.env.first_episode_only
    model.learn(60)
    assert model.env.min_length > 5
    assert min_lengths(env) == [model.env.min_length] * 4
    model.save(tmp_path / "model")
    again = SharedCurriculum(copy_vec(2))
    assert PCL.load(tmp_path / "model", env=again).env is again
    # The algorithms never wrap by themselves: per-env curricula unless the user wraps.
    assert not isinstance(PCL("MlpPolicy", copy_vec(2), **kwargs).env, SharedCurriculum)
    assert isinstance(TrustPCL("MlpPolicy", SharedCurriculum(copy_vec(2)), **kwargs).env, SharedCurriculum)
