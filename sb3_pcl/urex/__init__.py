from sb3_pcl.urex.policies import MlpLstmPolicy, MlpPolicy, MultiInputPolicy
from sb3_pcl.urex.urex import UREX

__all__ = ["UREX", "MlpLstmPolicy", "MlpPolicy", "MultiInputPolicy"]
