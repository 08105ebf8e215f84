from sb3_pcl.trust_pcl.policies import CnnPolicy, MlpPolicy, UnifiedMlpPolicy
from sb3_pcl.trust_pcl.trust_pcl import TrustPCL

__all__ = ["CnnPolicy", "MlpPolicy", "TrustPCL", "UnifiedMlpPolicy"]
