"""Type aliases of the recurrent policies (as sb3-contrib's ``common.recurrent.type_aliases``)."""

import torch as th

__all__ = ["LstmActionState"]

#: recurrent state of :class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy`: the LSTM hidden and cell states
#: ``(n_lstm_layers, n_envs, state_size)`` and the encoded previous action ``(1, n_envs, action_input_dim)``
LstmActionState = tuple[th.Tensor, th.Tensor, th.Tensor]
