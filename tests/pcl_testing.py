"""
The fast settings of the tests, and envs shared by the PCL-family test modules (pytest puts ``tests/`` on the path:
``import pcl_testing``; the ``fast_settings`` fixture of ``conftest.py`` gives a copy of :data:`FAST`).

The one definition of the settings that make a test train fast: :data:`FAST` for the PCL family, :data:`TINY` and
:data:`TINY_EPISODES` for the tests that train every algorithm a few hundred steps. The golden runs train with
:data:`FAST` (``golden_runs.py``): a change to it changes their digests.
"""

import inspect
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

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


def accepted_arguments(algo_class: type) -> set[str]:
    """:return: the constructor arguments of an algorithm, those it forwards to its base classes with ``**kwargs`` included"""
    return {
        name
        for cls in algo_class.__mro__
        if "__init__" in vars(cls)
        for name, parameter in inspect.signature(cls.__init__).parameters.items()
        if parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
    }
