"""Policies of Trust-PCL: PCL's (``MlpPolicy``, ``CnnPolicy``, ``MlpLstmPolicy``); the algorithm builds the target copy."""

from sb3_pcl.pcl.policies import CnnPolicy, MlpLstmPolicy, MlpPolicy

__all__ = ["CnnPolicy", "MlpLstmPolicy", "MlpPolicy"]
