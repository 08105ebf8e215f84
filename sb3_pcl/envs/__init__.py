"""
Gymnasium ports of OpenAI Gym's algorithmic tasks, with expert demonstrations.

Call :func:`register_algorithmic_envs` (done on ``import sb3_pcl``) to register the ids
``sb3_pcl/Copy-v0``, ``sb3_pcl/DuplicatedInput-v0``, ``sb3_pcl/RepeatCopy-v0``, ``sb3_pcl/Reverse-v0``,
``sb3_pcl/ReversedAddition-v0`` and ``sb3_pcl/ReversedAddition3-v0``. :class:`SharedCurriculum` makes all
envs of a VecEnv share one curriculum (as gym <= 0.17.2 did); :class:`CurriculumLogCallback` logs its length.
"""

from __future__ import annotations

import gymnasium as gym

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
from sb3_pcl.envs.vec_env import AlgorithmicVecEnv, make_algorithmic_vec_env
from sb3_pcl.envs.wrappers import CombinedActionWrapper

__all__ = [
    "ALGORITHMIC_ENV_IDS",
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

#: Gym's 200-step limit, wrapped around every algorithmic task; it never binds (the tasks' own limits are shorter).
MAX_EPISODE_STEPS = 200

# (id, entry point, gym's reward_threshold)
_ALGORITHMIC_ENVS: tuple[tuple[str, str, float], ...] = (
    ("sb3_pcl/Copy-v0", "sb3_pcl.envs.algorithmic:CopyEnv", 25.0),
    ("sb3_pcl/DuplicatedInput-v0", "sb3_pcl.envs.algorithmic:DuplicatedInputEnv", 9.0),
    ("sb3_pcl/RepeatCopy-v0", "sb3_pcl.envs.algorithmic:RepeatCopyEnv", 75.0),
    ("sb3_pcl/Reverse-v0", "sb3_pcl.envs.algorithmic:ReverseEnv", 25.0),
    ("sb3_pcl/ReversedAddition-v0", "sb3_pcl.envs.algorithmic:ReversedAdditionEnv", 25.0),
    ("sb3_pcl/ReversedAddition3-v0", "sb3_pcl.envs.algorithmic:ReversedAddition3Env", 25.0),
)

#: The registered ids of the algorithmic tasks.
ALGORITHMIC_ENV_IDS: tuple[str, ...] = tuple(env_id for env_id, _, _ in _ALGORITHMIC_ENVS)


def register_algorithmic_envs() -> list[str]:
    """
    Register the algorithmic tasks in gymnasium (idempotent: ids already registered are skipped).

    :return: The ids registered by this call.
    """
    registered = []
    for env_id, entry_point, reward_threshold in _ALGORITHMIC_ENVS:
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=entry_point,
            reward_threshold=reward_threshold,
            max_episode_steps=MAX_EPISODE_STEPS,
        )
        registered.append(env_id)
    return registered
