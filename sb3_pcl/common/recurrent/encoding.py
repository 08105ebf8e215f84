"""Encoding of the previous action that :class:`~sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy` feeds its LSTM."""

import numpy as np
import torch as th
from gymnasium import spaces
from torch.nn import functional as F

__all__ = ["action_input_dim", "encode_actions"]


def action_input_dim(action_space: spaces.Space) -> int:
    """
    Size of the previous-action input of an action space.

    :param action_space: ``Discrete``, ``MultiDiscrete``, ``Box`` or ``MultiBinary``
    :return: ``n`` for ``Discrete(n)``, ``sum(nvec)`` for ``MultiDiscrete``, the flat size for ``Box`` / ``MultiBinary``
    """
    if isinstance(action_space, spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    if isinstance(action_space, (spaces.Box, spaces.MultiBinary)):
        return int(np.prod(action_space.shape))
    raise ValueError(f"action_space must be Discrete, MultiDiscrete, Box or MultiBinary, got {action_space}")


def encode_actions(actions: th.Tensor, action_space: spaces.Space) -> th.Tensor:
    """
    Encode a batch of actions as the policy's previous-action input.

    :param actions: ``(n,)`` or ``(n, 1)`` for ``Discrete``, ``(n, len(nvec))`` for ``MultiDiscrete``,
        ``(n, *shape)`` for ``Box`` / ``MultiBinary``
    :param action_space: the action space
    :return: ``(n, action_input_dim(action_space))`` float tensor (one-hot per discrete component, raw otherwise)
    """
    if isinstance(action_space, spaces.Discrete):
        return F.one_hot(actions.long().reshape(-1), int(action_space.n)).float()
    if isinstance(action_space, spaces.MultiDiscrete):
        nvec = [int(n) for n in np.asarray(action_space.nvec).reshape(-1)]
        components = actions.long().reshape(-1, len(nvec))
        return th.cat([F.one_hot(components[:, i], n).float() for i, n in enumerate(nvec)], dim=1)
    return actions.float().reshape(actions.shape[0], action_input_dim(action_space))
