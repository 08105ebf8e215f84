"""
Episode-aware replay for path-consistency learning, as a package: the buffer (:mod:`.buffer`), its slot storage and
eviction (:mod:`.storage`), the per-path index (:mod:`.index`), sampling (:mod:`.sampling`) and its replay file
(:mod:`.replay_file`, :mod:`.persistence`, :mod:`.files`).
"""

from sb3_pcl.common.path_buffer.buffer import PathReplayBuffer
from sb3_pcl.common.path_buffer.files import load_replay_file, save_replay_file
from sb3_pcl.common.path_buffer.index import PathIndex
from sb3_pcl.common.path_buffer.paths import (
    EVICTION_STRATEGIES,
    PATH_HINT,
    PRIORITY_MODES,
    STORAGE_HINT,
    Path,
    PathBatch,
)
from sb3_pcl.common.path_buffer.replay_file import (
    MAX_METADATA_BYTES,
    OBS_ARRAYS,
    PATH_FIELDS,
    REPLAY_ARRAYS,
    REPLAY_FILE_FORMAT,
    REPLAY_FILE_KIND,
    REPLAY_FILE_VERSION,
    RETIRED_SETTINGS,
    refuse_retired_settings,
    replay_arrays,
    replay_file_kind,
    replay_file_name,
    without_retired_settings,
)

__all__ = [
    "EVICTION_STRATEGIES",
    "MAX_METADATA_BYTES",
    "OBS_ARRAYS",
    "PATH_FIELDS",
    "PATH_HINT",
    "PRIORITY_MODES",
    "REPLAY_ARRAYS",
    "REPLAY_FILE_FORMAT",
    "REPLAY_FILE_KIND",
    "REPLAY_FILE_VERSION",
    "RETIRED_SETTINGS",
    "STORAGE_HINT",
    "Path",
    "PathBatch",
    "PathIndex",
    "PathReplayBuffer",
    "load_replay_file",
    "refuse_retired_settings",
    "replay_arrays",
    "replay_file_kind",
    "replay_file_name",
    "save_replay_file",
    "without_retired_settings",
]
