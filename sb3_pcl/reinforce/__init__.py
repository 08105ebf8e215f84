from sb3_pcl.reinforce.policies import MlpLstmPolicy, MlpPolicy
from sb3_pcl.reinforce.reinforce import Reinforce

__all__ = ["MlpLstmPolicy", "MlpPolicy", "Reinforce"]
