"""
Recurrent policies: an LSTM policy whose input includes the previous action (the recurrent policy of the original
PCL / UREX code), as sb3-contrib's ``common.recurrent`` package lays them out.

- :mod:`~sb3_pcl.common.recurrent.policies`: :class:`MlpPrevActionLstmPolicy`, :class:`CnnPrevActionLstmPolicy` (the
  recurrent algorithms' ``"MlpPrevActionLstmPolicy"`` / ``"CnnPrevActionLstmPolicy"``) and
  :func:`initial_recurrent_states`
- :mod:`~sb3_pcl.common.recurrent.encoding`: the previous-action input (:func:`action_input_dim`,
  :func:`encode_actions`)
- :mod:`~sb3_pcl.common.recurrent.buffers`: :class:`RecurrentPathReplayBuffer`, the path replay whose batches
  (:class:`RecurrentPathBatch`) carry each segment's path from its first step (:class:`PathHistory`), for RecurrentPCL
- :mod:`~sb3_pcl.common.recurrent.type_aliases`: :data:`LstmActionState`

Every name stays importable from ``sb3_pcl.common.recurrent``, so models saved when this was a single module load;
the former class names ``MlpLstmPolicy`` / ``CnnLstmPolicy`` resolve to the renamed classes with a
``DeprecationWarning``.
"""

from sb3_pcl.common.recurrent.buffers import PathHistory, RecurrentPathBatch, RecurrentPathReplayBuffer
from sb3_pcl.common.recurrent.encoding import action_input_dim, encode_actions
from sb3_pcl.common.recurrent.policies import (
    CnnPrevActionLstmPolicy,
    FlatFeatures,
    MlpPrevActionLstmPolicy,
    initial_recurrent_states,
)
from sb3_pcl.common.recurrent.policies import __getattr__ as __getattr__  # the former class names, deprecated
from sb3_pcl.common.recurrent.type_aliases import LstmActionState

__all__ = [
    "CnnPrevActionLstmPolicy",
    "FlatFeatures",
    "LstmActionState",
    "MlpPrevActionLstmPolicy",
    "PathHistory",
    "RecurrentPathBatch",
    "RecurrentPathReplayBuffer",
    "action_input_dim",
    "encode_actions",
    "initial_recurrent_states",
]
