from sb3_pcl.pcl.pcl import PCL
from sb3_pcl.pcl.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, UnifiedMlpPolicy, UnifiedMultiInputPolicy

__all__ = ["PCL", "CnnPolicy", "MlpPolicy", "MultiInputPolicy", "UnifiedMlpPolicy", "UnifiedMultiInputPolicy"]
