from sb3_pcl.trust_pcl.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, UnifiedMlpPolicy, UnifiedMultiInputPolicy
from sb3_pcl.trust_pcl.trust_pcl import TrustPCL

__all__ = ["CnnPolicy", "MlpPolicy", "MultiInputPolicy", "TrustPCL", "UnifiedMlpPolicy", "UnifiedMultiInputPolicy"]
