"""Policies of UREX: the same as Reinforce's (``MlpPolicy``, ``MlpLstmPolicy``, ``MultiInputPolicy``, ...)."""

from sb3_pcl.reinforce.policies import MlpLstmPolicy, MlpPolicy, MultiInputPolicy

__all__ = ["MlpLstmPolicy", "MlpPolicy", "MultiInputPolicy"]
