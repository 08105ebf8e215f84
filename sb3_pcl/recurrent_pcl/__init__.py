from sb3_pcl.recurrent_pcl.policies import MlpLstmPolicy, UnifiedMlpLstmPolicy
from sb3_pcl.recurrent_pcl.recurrent_pcl import RecurrentPCL, RecurrentTrustPCL

__all__ = ["MlpLstmPolicy", "RecurrentPCL", "RecurrentTrustPCL", "UnifiedMlpLstmPolicy"]
