from sb3_pcl.pcl.pcl import PCL
from sb3_pcl.pcl.policies import CnnPolicy, MlpPolicy, UnifiedMlpPolicy

__all__ = ["PCL", "CnnPolicy", "MlpPolicy", "UnifiedMlpPolicy"]
