"""
Gymnasium ports of OpenAI Gym's algorithmic tasks, with expert demonstrations.

Call :func:`register_algorithmic_envs` (done on ``import sb3_pcl``) to register the ids
``sb3_pcl/Copy-v0``, ``sb3_pcl/DuplicatedInput-v0``, ``sb3_pcl/RepeatCopy-v0``, ``sb3_pcl/Reverse-v0``,
``sb3_pcl/ReversedAddition-v0`` and ``sb3_pcl/ReversedAddition3-v0``. :class:`SharedCurriculum` makes all
envs of a VecEnv share one curriculum (as gym <= 0.17.2 did); :class:`CurriculumLogCallback` logs its length.
"""

from __future__ import annotations

from sb3_pcl.envs.algorithmic import (
    AlgorithmicEnv,
    CopyEnv,
    DuplicatedInputEnv,
    GridAlgorithmicEnv,
    RepeatCopyEnv,
    ReversedAddition3Env,
    ReversedAdditionEnv,
    ReverseEnv,
    TapeAlgorithmicEnv,
    duplicated_input_data,
    duplicated_input_target,
    reversed_addition_target,
)
from sb3_pcl.envs.curriculum import CurriculumLogCallback, SharedCurriculum, curriculum_length, has_curriculum
from sb3_pcl.envs.expert import (
    ExpertPathsCallback,
    expert_actions,
    expert_episodes_for_vec_env,
    expert_task,
    generate_expert_episodes,
    load_episodes,
    save_episodes,
)
from sb3_pcl.envs.registration import ALGORITHMIC_ENV_IDS, MAX_EPISODE_STEPS, register_algorithmic_envs
from sb3_pcl.envs.vec_env import AlgorithmicVecEnv, make_algorithmic_vec_env
from sb3_pcl.envs.wrappers import CombinedActionWrapper

__all__ = [
    "ALGORITHMIC_ENV_IDS",
    "MAX_EPISODE_STEPS",
    "AlgorithmicEnv",
    "AlgorithmicVecEnv",
    "CombinedActionWrapper",
    "CopyEnv",
    "CurriculumLogCallback",
    "DuplicatedInputEnv",
    "ExpertPathsCallback",
    "GridAlgorithmicEnv",
    "RepeatCopyEnv",
    "ReverseEnv",
    "ReversedAddition3Env",
    "ReversedAdditionEnv",
    "SharedCurriculum",
    "TapeAlgorithmicEnv",
    "curriculum_length",
    "duplicated_input_data",
    "duplicated_input_target",
    "expert_actions",
    "expert_episodes_for_vec_env",
    "expert_task",
    "generate_expert_episodes",
    "has_curriculum",
    "load_episodes",
    "make_algorithmic_vec_env",
    "register_algorithmic_envs",
    "reversed_addition_target",
    "save_episodes",
]
