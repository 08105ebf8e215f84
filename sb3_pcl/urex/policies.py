"""Policies of UREX: the same as Reinforce's (``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``)."""

from sb3_pcl.reinforce.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy"]
