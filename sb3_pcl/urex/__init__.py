from sb3_pcl.urex.policies import MlpLstmPolicy, MlpPolicy
from sb3_pcl.urex.urex import UREX

__all__ = ["UREX", "MlpLstmPolicy", "MlpPolicy"]
