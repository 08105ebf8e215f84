from sb3_pcl.pcl.pcl import PCL
from sb3_pcl.pcl.policies import CnnPolicy, MlpLstmPolicy, MlpPolicy

__all__ = ["PCL", "CnnPolicy", "MlpLstmPolicy", "MlpPolicy"]
