"""Policies of UREX: the same as Reinforce's (``MlpPolicy``, ``MlpLstmPolicy``)."""

from sb3_pcl.reinforce.policies import MlpLstmPolicy, MlpPolicy

__all__ = ["MlpLstmPolicy", "MlpPolicy"]
