"""
The fast settings of the tests, and envs shared by the PCL-family test modules (pytest puts ``tests/`` on the path:
``import pcl_testing``; the ``fast_settings`` fixture of ``conftest.py`` gives a copy of :data:`FAST`).

The one definition of the settings that make a test train fast: :data:`FAST` for the PCL family, :data:`TINY` and
:data:`TINY_EPISODES` for the tests that train every algorithm a few hundred steps, and :data:`ALGOS` with
:func:`build` for the contract tests parametrised over every class (``test_run.py``, ``test_save_load.py``,
``test_spaces.py``, ``test_hyperparameters.py``). The golden runs train with :data:`FAST` (``golden_runs.py``): a
change to it changes their digests.
"""

import inspect
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import PCL, UREX, RecurrentPCL, RecurrentReinforce, RecurrentTrustPCL, RecurrentUREX, Reinforce, TrustPCL

#: Small, fast PCL settings shared by most tests.
FAST: dict[str, Any] = {
    "learning_rate": 1e-3,
    "learning_starts": 50,
    "batch_size": 4,
    "train_freq": 16,
    "buffer_size": 2_000,
    "max_segment_length": 16,
    "n_steps": 4,
}
#: :data:`FAST`, smaller still: a few hundred steps train
TINY: dict[str, Any] = {**FAST, "learning_starts": 20, "batch_size": 2, "train_freq": 8, "max_segment_length": 8}
#: the episodic algorithms' (Reinforce, UREX) counterpart of :data:`TINY`
TINY_EPISODES: dict[str, Any] = {"num_samples": 2, "max_steps": 16}

_OFF_POLICY = {**TINY, "buffer_size": 500}
_LSTM = {"policy_kwargs": {"lstm_hidden_size": 8}}
#: every class, with its default policy, the settings that make a few hundred steps train, and the env count its
#: batches need
ALGOS: dict[type[BaseAlgorithm], tuple[str, dict[str, Any], int]] = {
    PCL: ("MlpPolicy", _OFF_POLICY, 1),
    TrustPCL: ("MlpPolicy", _OFF_POLICY, 1),
    RecurrentPCL: ("MlpPrevActionLstmPolicy", {**_OFF_POLICY, **_LSTM}, 1),
    RecurrentTrustPCL: ("MlpPrevActionLstmPolicy", {**_OFF_POLICY, **_LSTM}, 1),
    Reinforce: ("MlpPolicy", TINY_EPISODES, 2),
    UREX: ("MlpPolicy", TINY_EPISODES, 2),
    RecurrentReinforce: ("MlpPrevActionLstmPolicy", {**TINY_EPISODES, **_LSTM}, 2),
    RecurrentUREX: ("MlpPrevActionLstmPolicy", {**TINY_EPISODES, **_LSTM}, 2),
}
#: the test ids of :data:`ALGOS`
IDS = [algo.__name__ for algo in ALGOS]
#: the classes with an LSTM policy
RECURRENT = (RecurrentPCL, RecurrentTrustPCL, RecurrentReinforce, RecurrentUREX)


def build(algo: type[BaseAlgorithm], env: Any = "CartPole-v1", **kwargs: Any) -> Any:
    """
    :param algo: a class of :data:`ALGOS`
    :param env: an env id or env maker (made into a VecEnv of the env count ``algo`` needs), or an env
    :param kwargs: the arguments that replace or add to the fast settings
    :return: ``algo`` with its default policy and fast settings, seeded
    """
    policy, settings, n_envs = ALGOS[algo]
    if isinstance(env, str) or callable(env):
        env = make_vec_env(env, n_envs=n_envs, seed=0)
    return algo(policy, env, **{"seed": 0, **settings, **kwargs})


class BigObsEnv(gym.Env):
    """Observations around 1000 (far outside VecNormalize's clip range once normalised); reward = the action."""

    observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
    action_space: spaces.Space = spaces.Discrete(2)
    episode_length = 20

    def _obs(self) -> np.ndarray:
        return (1000.0 + self.t + self.np_random.normal(size=2)).astype(np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(np.asarray(action).reshape(-1)[0]), self.t >= self.episode_length, False, {}


class BigObsBoxEnv(BigObsEnv):
    """:class:`BigObsEnv` with a continuous action in [-1, 1] and 5-step episodes."""

    action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    episode_length = 5


class SpaceEnv(gym.Env):
    """Episodes of 4 steps in the given spaces: observations sampled from the space (seeded by ``reset``), reward 1,
    and each action checked to lie in the action space."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space | None = None):
        """
        :param observation_space: the observation space
        :param action_space: the action space (``Discrete(2)`` if ``None``)
        """
        self.observation_space = observation_space
        self.action_space = action_space or spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        assert self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype)), action
        self._t += 1
        return self.observation_space.sample(), 1.0, self._t >= 4, False, {}


def accepted_arguments(algo_class: type) -> set[str]:
    """:return: the constructor arguments of an algorithm, those it forwards to its base classes with ``**kwargs`` included"""
    return {
        name
        for cls in algo_class.__mro__
        if "__init__" in vars(cls)
        for name, parameter in inspect.signature(cls.__init__).parameters.items()
        if parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
    }
