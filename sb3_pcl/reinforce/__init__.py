from sb3_pcl.reinforce.policies import MlpLstmPolicy, MlpPolicy, MultiInputPolicy
from sb3_pcl.reinforce.reinforce import Reinforce

__all__ = ["MlpLstmPolicy", "MlpPolicy", "MultiInputPolicy", "Reinforce"]
