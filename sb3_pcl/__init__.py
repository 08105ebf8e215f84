"""sb3_pcl: path-consistency learning and under-appreciated-reward exploration for Stable-Baselines3."""

from stable_baselines3.common.base_class import BaseAlgorithm

from sb3_pcl.envs import register_algorithmic_envs
from sb3_pcl.pcl import PCL
from sb3_pcl.reinforce import Reinforce
from sb3_pcl.trust_pcl import TrustPCL
from sb3_pcl.urex import UREX

__version__ = "0.1.0"

register_algorithmic_envs()

#: our algorithms by their rl-zoo3 name
ALGOS: dict[str, type[BaseAlgorithm]] = {"pcl": PCL, "trust_pcl": TrustPCL, "reinforce": Reinforce, "urex": UREX}

__all__ = ["ALGOS", "PCL", "UREX", "Reinforce", "TrustPCL", "__version__"]
