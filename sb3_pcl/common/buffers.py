"""
The former home of the path replay, kept so that ``from sb3_pcl.common.buffers import PathReplayBuffer`` keeps
working. New code imports from :mod:`sb3_pcl.common.path_buffer`.
"""

from sb3_pcl.common.path_buffer import *  # noqa: F403 (every public name of the package)
from sb3_pcl.common.path_buffer import __all__ as __all__
