"""Policies of Trust-PCL: the same as PCL's (``MlpPolicy``, ``CnnPolicy``); the target copy is built by the algorithm."""

from sb3_pcl.pcl.policies import CnnPolicy, MlpPolicy

__all__ = ["CnnPolicy", "MlpPolicy"]
