"""sb3_pcl: path-consistency learning and under-appreciated-reward exploration for Stable-Baselines3."""

from sb3_pcl.pcl import PCL

__version__ = "0.1.0"

__all__ = ["PCL", "__version__"]
