"""
Episode-aware replay for path-consistency learning: the buffer (:mod:`.buffer`: :class:`PathReplayBuffer`, the
:class:`Path` records it keeps, the :class:`PathBatch` es it samples) and its replay file (:mod:`.replay_file`).
"""

from sb3_pcl.common.path_buffer.buffer import (
    EVICTION_STRATEGIES,
    PATH_HINT,
    PRIORITY_MODES,
    STORAGE_HINT,
    Path,
    PathBatch,
    PathReplayBuffer,
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
    load_replay_file,
    read_replay_npz,
    refuse_retired_settings,
    replay_arrays,
    replay_file_kind,
    replay_file_name,
    save_replay_file,
    without_retired_settings,
    write_replay_npz,
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
    "PathReplayBuffer",
    "load_replay_file",
    "read_replay_npz",
    "refuse_retired_settings",
    "replay_arrays",
    "replay_file_kind",
    "replay_file_name",
    "save_replay_file",
    "without_retired_settings",
    "write_replay_npz",
]
