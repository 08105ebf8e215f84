"""Policies of Trust-PCL: PCL's (``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy``, the unified ones); the algorithm
builds the target copy."""

from sb3_pcl.pcl.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, UnifiedMlpPolicy, UnifiedMultiInputPolicy

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy", "UnifiedMlpPolicy", "UnifiedMultiInputPolicy"]
