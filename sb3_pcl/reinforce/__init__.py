from sb3_pcl.reinforce.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_pcl.reinforce.reinforce import Reinforce

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy", "Reinforce"]
