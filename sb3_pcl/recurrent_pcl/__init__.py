from sb3_pcl.recurrent_pcl.policies import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy, UnifiedMlpLstmPolicy
from sb3_pcl.recurrent_pcl.recurrent_pcl import RecurrentPCL, RecurrentTrustPCL

__all__ = ["CnnPrevActionLstmPolicy", "MlpPrevActionLstmPolicy", "RecurrentPCL", "RecurrentTrustPCL", "UnifiedMlpLstmPolicy"]
