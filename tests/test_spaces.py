"""
Spaces, over every class: the unsupported ones are refused when the model is built, naming the space (and, where
the check is ours, the class); the supported ones of unusual shapes train.

Learning on each supported space is in ``test_run.py``.
"""

import re

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from pcl_testing import ALGOS, IDS, RECURRENT, SpaceEnv, build
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import PCL, Reinforce

BOX = spaces.Box(-1.0, 1.0, (2,), np.float32)
DICT = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(3)})
TUPLE = spaces.Tuple((spaces.Box(-1, 1, (2,)), spaces.Discrete(3)))
FEED_FORWARD = [algo for algo in ALGOS if algo not in RECURRENT]


def vec_env(algo: type, observation_space: spaces.Space, action_space: spaces.Space | None = None) -> gym.Env:
    """:return: a :class:`SpaceEnv` of the given spaces, in a VecEnv of the env count ``algo`` needs"""
    return make_vec_env(lambda: SpaceEnv(observation_space, action_space), n_envs=ALGOS[algo][2])


# ----------------------------------------------------------------------------------------------
# observation spaces
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
@pytest.mark.parametrize("policy", ["default", "MultiInputPolicy"])
def test_tuple_observations_get_one_clear_message_naming_the_space(algo: type, policy: str) -> None:
    default_policy, settings, _ = ALGOS[algo]
    supported = "Dict or Tuple" if algo in RECURRENT else "Tuple"
    message = rf"{algo.__name__} does not support {supported} observation spaces \(got Tuple\(Box.*FlattenObservation"
    with pytest.raises(ValueError, match=message):
        algo(default_policy if policy == "default" or algo in RECURRENT else policy, vec_env(algo, TUPLE), **settings)


@pytest.mark.parametrize("algo", RECURRENT, ids=[algo.__name__ for algo in RECURRENT])
def test_recurrent_classes_refuse_dict_observations_naming_the_space(algo: type) -> None:
    default_policy, settings, _ = ALGOS[algo]
    env = vec_env(algo, DICT)
    with pytest.raises(ValueError, match=rf"{algo.__name__} does not support Dict or Tuple .*\(got Dict\('a': Box"):
        algo(default_policy, env, **settings)
    with pytest.raises(ValueError, match=rf"{algo.__name__} has no MultiInputPolicy \(it does not support Dict"):
        algo("MultiInputPolicy", env, **settings)


@pytest.mark.parametrize("algo", FEED_FORWARD, ids=[algo.__name__ for algo in FEED_FORWARD])
def test_policy_and_dict_observation_space_must_match(algo: type) -> None:
    _, settings, _ = ALGOS[algo]
    with pytest.raises(ValueError, match="You must use `MultiInputPolicy`"):  # SB3's own check
        algo("MlpPolicy", vec_env(algo, DICT), **settings)
    with pytest.raises(ValueError, match=r"MultiInputPolicy\) reads Dict observations, but the observation space is Box"):
        algo("MultiInputPolicy", vec_env(algo, spaces.Box(-1, 1, (2,))), **settings)
    nested = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "inner": DICT})  # (SB3's VecEnvs refuse it too)
    with pytest.raises(ValueError, match=rf"{algo.__name__}: nested observation spaces .*key 'inner'"):
        algo("MultiInputPolicy", SpaceEnv(nested), **settings)


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
@pytest.mark.parametrize(
    "obs_space, action_space, message",
    [
        (spaces.Discrete(3, start=1), spaces.Discrete(2), "observation spaces whose values do not start at 0"),
        (BOX, spaces.Discrete(3, start=-1), "action spaces whose values do not start at 0"),
        (BOX, spaces.MultiDiscrete([2, 3], start=[0, 1]), "action spaces whose values do not start at 0"),
        (spaces.Box(-1.0, 1.0, (), np.float32), spaces.Discrete(2), r"scalar Box observation spaces \(shape \(\)\)"),
    ],
    ids=["discrete-obs-start", "discrete-action-start", "multidiscrete-action-start", "scalar-box-obs"],
)
def test_spaces_sb3s_policies_misread_are_refused_naming_them(
    algo: type, obs_space: spaces.Space, action_space: spaces.Space, message: str
) -> None:
    # Without the check: a one-hot index out of range inside torch, actions outside the env's space, or nn.Flatten
    # failing on a batch of scalars.
    with pytest.raises(ValueError, match=f"{algo.__name__} does not support {message}"):
        build(algo, vec_env(algo, obs_space, action_space))


@pytest.mark.parametrize("algo", [PCL, Reinforce], ids=["PCL", "Reinforce"])
def test_unbounded_box_observations_train(algo: type) -> None:
    model = build(algo, vec_env(algo, spaces.Box(-np.inf, np.inf, (3,), dtype=np.float32)))
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(100)
    assert model.num_timesteps >= 100 and model._n_updates > 0
    after = list(model.policy.parameters())
    assert all(th.isfinite(p).all() for p in after)
    assert any(not th.equal(old, new) for old, new in zip(before, after, strict=True))  # the updates changed the policy


# ----------------------------------------------------------------------------------------------
# action spaces
# ----------------------------------------------------------------------------------------------

EPISODIC = [algo for algo in ALGOS if issubclass(algo, Reinforce)]
#: the action spaces SB3's check refuses (its message names the space, not the class), for each class refusing them
UNSUPPORTED_ACTIONS = [
    *[(algo, space) for algo in ALGOS for space in (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), DICT)],
    *[(algo, spaces.MultiBinary(2)) for algo in EPISODIC],
]


@pytest.mark.parametrize(
    "algo, action_space", UNSUPPORTED_ACTIONS, ids=[f"{a.__name__}-{type(s).__name__}" for a, s in UNSUPPORTED_ACTIONS]
)
def test_unsupported_action_spaces_are_refused_by_sb3s_check(algo: type, action_space: spaces.Space) -> None:
    with pytest.raises(AssertionError, match=rf"as action spaces but {re.escape(str(action_space))} was provided"):
        build(algo, vec_env(algo, BOX, action_space))


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_unbounded_box_actions_are_refused_by_sb3s_check(algo: type) -> None:
    with pytest.raises(AssertionError, match="finite lower and upper bound"):
        build(algo, vec_env(algo, BOX, spaces.Box(-np.inf, np.inf, (1,))))


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_box_actions_of_any_shape_learn_and_predict(algo: type) -> None:
    """(2, 2) actions: the recurrent classes' uniform warm-up actions, scored by the LSTM policy, failed in log_prob."""
    model = build(algo, vec_env(algo, BOX, spaces.Box(-1.0, 1.0, (2, 2), np.float32))).learn(120)
    assert model._n_updates > 0 and all(th.isfinite(p).all() for p in model.policy.parameters())
    assert model.predict(np.zeros(2, dtype=np.float32))[0].shape == (2, 2)
