from sb3_pcl.trust_pcl.policies import CnnPolicy, MlpLstmPolicy, MlpPolicy
from sb3_pcl.trust_pcl.trust_pcl import TrustPCL

__all__ = ["CnnPolicy", "MlpLstmPolicy", "MlpPolicy", "TrustPCL"]
