"""
Export a trained policy for inference without sb3_pcl: a module of plain tensors that ONNX (or TorchScript) can trace.

:class:`OnnxablePolicy` wraps the feed-forward policies (``MlpPolicy``, ``CnnPolicy``, ``UnifiedMlpPolicy``): it
holds the policy's sub-networks only, not the policy, so nothing but tensors reaches the exporter (a Unified policy
keeps its temperature as extra state in its ``state_dict``, which the ONNX exporter cannot read), and maps
observations to what ``model.predict(obs, deterministic=True)`` returns, plus the value. :func:`export_onnx` writes
the ONNX file. The recurrent policies are not covered (their state is an input and an output of every step).
"""

from pathlib import Path

import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

__all__ = ["OnnxablePolicy", "export_onnx"]


class OnnxablePolicy(nn.Module):
    """
    A feed-forward actor-critic policy as a traceable module: ``forward(observation) -> (action, value)``.

    The action is the deterministic one (the mode of the distribution; for ``Box`` actions the mean, clipped to the
    action bounds unless the policy squashes its output), as ``model.predict(obs, deterministic=True)`` gives it; the
    value is the policy's ``V(s)`` (Unified PCL: the soft value of the action logits). Observations go in as
    ``float32`` batches shaped like the observation space (images unscaled, 0-255: the policy scales them).

    :param policy: the policy (``model.policy``) of PCL, Trust-PCL, Reinforce or UREX
    :raises ValueError: for a recurrent policy or a policy that is not an actor-critic policy
    """

    #: the bounds of ``Box`` actions
    low: th.Tensor
    high: th.Tensor

    def __init__(self, policy: ActorCriticPolicy):
        if isinstance(policy, RecurrentActorCriticPolicy):
            raise ValueError(f"{type(policy).__name__} is recurrent: only feed-forward policies can be exported this way")
        if not isinstance(policy, ActorCriticPolicy):
            raise ValueError(f"policy must be an ActorCriticPolicy (model.policy), got {type(policy).__name__}")
        super().__init__()
        # the sub-networks, so that their parameters are this module's; the policy itself stays out of the module tree
        self.networks = nn.ModuleDict(dict(policy.named_children()))
        self.own_parameters = nn.ParameterDict(dict(policy.named_parameters(recurse=False)))  # e.g. log_std
        self._policy = (policy,)
        action_space = policy.action_space
        self.clip = isinstance(action_space, spaces.Box) and not policy.squash_output
        if isinstance(action_space, spaces.Box):
            self.register_buffer("low", th.as_tensor(action_space.low, dtype=th.float32), persistent=False)
            self.register_buffer("high", th.as_tensor(action_space.high, dtype=th.float32), persistent=False)

    def forward(self, observation: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """
        :param observation: a batch of observations ``(batch, *observation_space.shape)``
        :return: the deterministic actions ``(batch, *action_space.shape)`` and the values ``(batch, 1)``
        """
        policy = self._policy[0]
        actions, values, _ = policy(observation, deterministic=True)
        if policy.squash_output and isinstance(policy.action_space, spaces.Box):
            actions = self.low + 0.5 * (actions + 1.0) * (self.high - self.low)  # from [-1, 1], as predict() does
        elif self.clip:
            actions = th.maximum(th.minimum(actions, self.high), self.low)
        return actions, values


def export_onnx(model: BaseAlgorithm | ActorCriticPolicy, path: str | Path, opset_version: int = 17) -> Path:
    """
    Write the policy of ``model`` as an ONNX file with input ``observation`` and outputs ``action`` and ``value``,
    batch size free.

    :param model: a trained model (or its ``policy``) with a feed-forward policy
    :param path: the ``.onnx`` file to write
    :param opset_version: the ONNX operator set
    :return: the path written
    :raises ValueError: for a recurrent policy or an observation space that is not a ``Box``
    """
    policy = model.policy if isinstance(model, BaseAlgorithm) else model
    if not isinstance(policy.observation_space, spaces.Box):
        raise ValueError(f"export_onnx needs a Box observation space, got {policy.observation_space}")
    wrapper = OnnxablePolicy(policy)  # type: ignore[arg-type]
    was_training = policy.training
    policy.set_training_mode(False)
    path = Path(path)
    try:
        dummy = th.zeros((1, *policy.observation_space.shape), dtype=th.float32, device=policy.device)
        th.onnx.export(
            wrapper,
            (dummy,),
            str(path),
            input_names=["observation"],
            output_names=["action", "value"],
            dynamic_axes={"observation": {0: "batch"}, "action": {0: "batch"}, "value": {0: "batch"}},
            opset_version=opset_version,
            dynamo=False,  # the TorchScript-based exporter: no onnxscript needed
        )
    finally:
        policy.set_training_mode(was_training)
    return path
