"""The ids of the algorithmic tasks, and their registration in gymnasium."""

from __future__ import annotations

import gymnasium as gym

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
