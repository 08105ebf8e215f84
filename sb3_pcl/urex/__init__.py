from sb3_pcl.urex.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_pcl.urex.urex import UREX

__all__ = ["UREX", "CnnPolicy", "MlpPolicy", "MultiInputPolicy"]
