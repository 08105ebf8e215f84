"""sb3_pcl: path-consistency learning and under-appreciated-reward exploration for Stable-Baselines3."""

from pathlib import Path

from stable_baselines3.common.base_class import BaseAlgorithm

from sb3_pcl.envs import register_algorithmic_envs
from sb3_pcl.pcl import PCL
from sb3_pcl.recurrent_pcl import RecurrentPCL, RecurrentTrustPCL
from sb3_pcl.recurrent_reinforce import RecurrentReinforce, RecurrentUREX
from sb3_pcl.reinforce import Reinforce
from sb3_pcl.trust_pcl import TrustPCL
from sb3_pcl.urex import UREX

#: the package version, from ``sb3_pcl/version.txt`` (which the package metadata reads too)
__version__ = (Path(__file__).parent / "version.txt").read_text(encoding="utf-8").strip()

register_algorithmic_envs()

#: our algorithms by their rl-zoo3 name
ALGOS: dict[str, type[BaseAlgorithm]] = {
    "pcl": PCL,
    "trust_pcl": TrustPCL,
    "recurrent_pcl": RecurrentPCL,
    "recurrent_trust_pcl": RecurrentTrustPCL,
    "reinforce": Reinforce,
    "urex": UREX,
    "recurrent_reinforce": RecurrentReinforce,
    "recurrent_urex": RecurrentUREX,
}

__all__ = [
    "ALGOS",
    "PCL",
    "UREX",
    "RecurrentPCL",
    "RecurrentReinforce",
    "RecurrentTrustPCL",
    "RecurrentUREX",
    "Reinforce",
    "TrustPCL",
    "__version__",
]
