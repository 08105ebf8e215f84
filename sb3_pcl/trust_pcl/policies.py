"""Policies of Trust-PCL: PCL's (``MlpPolicy``, ``CnnPolicy``, ``UnifiedMlpPolicy``); the algorithm builds the target copy."""

from sb3_pcl.pcl.policies import CnnPolicy, MlpPolicy, UnifiedMlpPolicy

__all__ = ["CnnPolicy", "MlpPolicy", "UnifiedMlpPolicy"]
