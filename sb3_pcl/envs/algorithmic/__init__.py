"""
Gymnasium port of OpenAI Gym's algorithmic tasks (``Copy``, ``DuplicatedInput``, ``RepeatCopy``,
``Reverse``, ``ReversedAddition`` and ``ReversedAddition3``).

The package holds the base class (:mod:`~sb3_pcl.envs.algorithmic.base`: read head, rewards, curriculum,
gymnasium API), the tape tasks (:mod:`~sb3_pcl.envs.algorithmic.tape`) and the grid tasks
(:mod:`~sb3_pcl.envs.algorithmic.grid`); every name is importable from ``sb3_pcl.envs.algorithmic``.

Gym removed these environments in release 0.20. This package reproduces the behaviour of the last gym
releases that shipped them (0.7.3 to 0.19.0); the rules are written down in ``ALGORITHMIC_TASKS.md``.
The differences with gym are in the interface, except one in what the curriculum records (interrupted episodes):

* the ``Tuple(move, write, symbol)`` action space is exposed as ``MultiDiscrete([moves, 2, base])``
  (Stable-Baselines3 has no ``Tuple`` action support); the single ``Discrete`` encoding used by the
  original PCL/UREX code is available through :class:`sb3_pcl.envs.wrappers.CombinedActionWrapper`;
* the gymnasium API: ``reset(seed=...)`` returns ``(obs, info)``, ``step`` returns
  ``(obs, reward, terminated, truncated, info)``. An episode ended by the task rules (wrong symbol,
  whole target written, or the task's own time limit) is ``terminated=True``: the time limit is part of
  the task, it is not a truncation. ``truncated`` is always ``False`` (the registered 200-step
  ``TimeLimit`` never binds);
* the curriculum (``min_length`` and the list of reward shortfalls) is stored **per instance**.
  gym <= 0.17.2 kept it in class attributes shared by every instance of a task in a process,
  later gym versions per instance, which is the behaviour reproduced here. The shared curriculum of
  the old releases (the one the original UREX/PCL code trained with) is available across processes
  as the VecEnv wrapper :class:`sb3_pcl.envs.curriculum.SharedCurriculum`, which drives the envs
  through :meth:`AlgorithmicEnv.set_min_length` and reads the ``"shortfall"`` entry that the step
  info carries when an episode ends;
* only episodes that **ended** by the task's rules (a wrong write, the whole target written or the
  time limit) are recorded at the next reset; an episode interrupted by ``reset()`` is not. gym
  recorded interrupted episodes too (as a failure, about ``-len(target)``), which made no difference
  with gym's own trainers, whose episodes always ended before a reset, but blocks the curriculum
  forever under SB3's VecEnvs: they reset finished envs automatically and the next seeded reset
  interrupts that extra episode. The first reset after construction still records the shortfall of
  an unplayed episode (``-len(target)``), as in gym;
* the curriculum settings are constructor arguments (``last``, ``min_reward_threshold``,
  ``starting_min_length``). Note that setting an attribute such as ``last`` on a gymnasium wrapper
  does not reach the base environment: use ``gym.make(env_id, last=100)`` or ``env.unwrapped.last``.
"""

from sb3_pcl.envs.algorithmic.base import AlgorithmicEnv, UnsupportedRenderModeError, record_shortfall
from sb3_pcl.envs.algorithmic.grid import (
    GridAlgorithmicEnv,
    ReversedAddition3Env,
    ReversedAdditionEnv,
    reversed_addition_target,
)
from sb3_pcl.envs.algorithmic.tape import (
    CopyEnv,
    DuplicatedInputEnv,
    RepeatCopyEnv,
    ReverseEnv,
    TapeAlgorithmicEnv,
    duplicated_input_data,
    duplicated_input_target,
)

__all__ = [
    "AlgorithmicEnv",
    "CopyEnv",
    "DuplicatedInputEnv",
    "GridAlgorithmicEnv",
    "RepeatCopyEnv",
    "ReverseEnv",
    "ReversedAddition3Env",
    "ReversedAdditionEnv",
    "TapeAlgorithmicEnv",
    "UnsupportedRenderModeError",
    "duplicated_input_data",
    "duplicated_input_target",
    "record_shortfall",
    "reversed_addition_target",
]
