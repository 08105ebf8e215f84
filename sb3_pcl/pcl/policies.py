"""
Policies of PCL.

PCL needs, for any state, the log-probability of an action under a stochastic policy and a
state value. SB3's actor-critic policies provide exactly that for Discrete, MultiDiscrete,
MultiBinary and Box actions (a diagonal Gaussian with a learned, state-independent log-std),
with separate policy and value MLPs by default (2 x 64 tanh units: the seed's MLP).

Unified PCL uses one network for both: ``pi = softmax(logits)`` and
``V(s) = temperature * logsumexp(logits)``, with ``temperature = ent_coef + lambda`` (set by PCL); for
``MultiDiscrete`` actions ``pi`` is factorised over the components and
``V(s) = temperature * sum_k logsumexp(logits_k)``. :class:`UnifiedValue` holds that value and its
temperature; :class:`UnifiedPolicy` is the feed-forward policy built on it (:class:`UnifiedMultiInputPolicy` for
``Dict`` observations, :class:`~sb3_pcl.recurrent_pcl.policies.UnifiedLstmPolicy` the recurrent one).

``MultiInputPolicy`` is SB3's ``MultiInputActorCriticPolicy``, for ``Dict`` observations (SB3's ``CombinedExtractor``).
"""

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, BaseModel, MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import CombinedExtractor
from stable_baselines3.common.type_aliases import PyTorchObs

from sb3_pcl.common.consistency import soft_value

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy


def unified_action_dims(action_space: spaces.Space, policy_name: str = "a unified policy") -> list[int]:
    """
    Sizes of the categorical components of a unified policy's action logits.

    :param action_space: ``Discrete`` or ``MultiDiscrete``
    :param policy_name: the policy named in the error message
    :return: ``[n]`` for ``Discrete(n)``, ``list(nvec)`` for ``MultiDiscrete``
    :raises ValueError: for any other action space
    """
    if isinstance(action_space, spaces.Discrete):
        return [int(action_space.n)]
    if isinstance(action_space, spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(action_space.nvec).reshape(-1)]
    raise ValueError(f"{policy_name} supports only Discrete and MultiDiscrete action spaces, got {action_space}")


class UnifiedValue(ActorCriticPolicy):
    """
    Unified PCL's value, shared by the unified policies (put it first among the bases of an ActorCriticPolicy subclass).

    The action logits give both ``pi`` (a categorical, or a product of categoricals for ``MultiDiscrete``) and
    the soft value ``V(s) = temperature * sum_k logsumexp(logits_k)``
    (:func:`~sb3_pcl.common.consistency.soft_value`). The value MLP and head that :class:`ActorCriticPolicy`
    builds are never used (they get no gradient). ``temperature`` is a plain float, stored in the ``state_dict``
    (extra state) and among the constructor parameters; PCL sets it to ``tau + relative_entropy_coef`` at every
    training iteration.

    :param observation_space: observation space
    :param action_space: a ``Discrete`` or ``MultiDiscrete`` action space (others raise ``ValueError``)
    :param args: the other positional arguments of the policy class (``lr_schedule``, ...)
    :param temperature: ``tau + lambda``
    :param kwargs: the other keyword arguments of the policy class
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        *args: Any,
        temperature: float = 0.01,
        **kwargs: Any,
    ) -> None:
        action_dims = unified_action_dims(action_space, type(self).__name__)
        super().__init__(observation_space, action_space, *args, **kwargs)
        self.action_dims = action_dims
        self.temperature = float(temperature)

    def unified_value(self, logits: th.Tensor) -> th.Tensor:
        """
        :param logits: unnormalised action logits ``(n, sum(action_dims))``
        :return: the soft values ``(n, 1)``
        """
        return soft_value(logits, self.temperature, self.action_dims).unsqueeze(-1)

    def unified_heads(self, logits: th.Tensor) -> tuple[Distribution, th.Tensor]:
        """
        :param logits: unnormalised action logits ``(n, sum(action_dims))``
        :return: the action distribution they define and the soft values ``(n, 1)``
        """
        return self.action_dist.proba_distribution(action_logits=logits), self.unified_value(logits)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "temperature": self.temperature}

    def get_extra_state(self) -> dict[str, float]:
        return {"temperature": self.temperature}

    def set_extra_state(self, state: dict[str, float]) -> None:
        self.temperature = float(state["temperature"])


class UnifiedPolicy(UnifiedValue):
    """
    Unified PCL's feed-forward policy (``Discrete`` or ``MultiDiscrete`` actions): the policy MLP's action
    logits give both ``pi`` and the soft value (:class:`UnifiedValue`).

    :param observation_space: observation space
    :param action_space: a ``Discrete`` or ``MultiDiscrete`` action space
    :param lr_schedule: learning rate schedule
    :param temperature: ``tau + lambda``
    :param kwargs: the other arguments of :class:`ActorCriticPolicy`
    """

    def action_logits(self, obs: PyTorchObs) -> th.Tensor:
        """:return: the unnormalised action logits ``(batch, sum(action_dims))``"""
        features = BaseModel.extract_features(self, obs, self.pi_features_extractor)
        return self.action_net(self.mlp_extractor.forward_actor(features))

    def forward(self, obs: th.Tensor, deterministic: bool = False) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        distribution, values = self.unified_heads(self.action_logits(obs))
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        return actions.reshape((-1, *self.action_space.shape)), values, log_prob  # type: ignore[misc]

    def evaluate_actions(self, obs: PyTorchObs, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        distribution, values = self.unified_heads(self.action_logits(obs))
        return values, distribution.log_prob(actions), distribution.entropy()

    def predict_values(self, obs: PyTorchObs) -> th.Tensor:
        return self.unified_value(self.action_logits(obs))

    def distribution_and_values(self, obs: PyTorchObs, n_actions: int) -> tuple[Distribution, th.Tensor]:
        """
        One pass of the action logits over ``obs`` (see :func:`distribution_and_values`).

        :param obs: observations ``(n, ...)``
        :param n_actions: the distribution covers the first ``n_actions`` rows
        :return: the action distribution of those rows and the soft values of every row ``(n, 1)``
        """
        logits = self.action_logits(obs)
        return self.action_dist.proba_distribution(action_logits=logits[:n_actions]), self.unified_value(logits)


UnifiedMlpPolicy = UnifiedPolicy


class UnifiedMultiInputPolicy(UnifiedPolicy):
    """
    :class:`UnifiedPolicy` for ``Dict`` observations: SB3's ``CombinedExtractor`` (one extractor per key, concatenated)
    by default, as ``MultiInputPolicy``.

    :param args: the arguments of :class:`UnifiedPolicy`
    :param kwargs: its keyword arguments (``features_extractor_class`` defaults to ``CombinedExtractor``)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", CombinedExtractor)
        super().__init__(*args, **kwargs)


def distribution_and_values(policy: ActorCriticPolicy, obs: th.Tensor, n_actions: int) -> tuple[Distribution, th.Tensor]:
    """
    The action distribution of the first ``n_actions`` observations and the values of all of them, in one pass of the
    feature extractor: what ``policy.get_distribution(obs[:n_actions])`` and ``policy.predict_values(obs)`` compute, at
    the cost of one call.

    :param policy: an actor-critic policy (a :class:`UnifiedPolicy` reads both from its action logits)
    :param obs: observations ``(n, ...)``
    :param n_actions: rows of ``obs`` whose action distribution is needed (the first ones)
    :return: the distribution and the values ``(n, 1)``
    """
    if isinstance(policy, UnifiedPolicy):
        return policy.distribution_and_values(obs, n_actions)
    features = policy.extract_features(obs)
    pi_features, vf_features = features if isinstance(features, tuple) else (features, features)
    latent_pi = policy.mlp_extractor.forward_actor(pi_features[:n_actions])
    values = policy.value_net(policy.mlp_extractor.forward_critic(vf_features))
    return policy._get_action_dist_from_latent(latent_pi), values


__all__ = [
    "CnnPolicy",
    "MlpPolicy",
    "MultiInputPolicy",
    "UnifiedMlpPolicy",
    "UnifiedMultiInputPolicy",
    "UnifiedPolicy",
    "UnifiedValue",
    "distribution_and_values",
    "unified_action_dims",
]


def fused_adam(policy_kwargs: dict[str, Any], device: th.device) -> dict[str, Any]:
    """
    :param policy_kwargs: the policy's keyword arguments
    :param device: the model's device
    :return: ``policy_kwargs`` where Adam (the default optimiser) runs fused, one kernel for all the parameters, unless
        ``optimizer_kwargs`` already chooses ``foreach`` or ``fused`` (SB3's default ``eps=1e-5`` kept)
    """
    if policy_kwargs.get("optimizer_class", th.optim.Adam) is not th.optim.Adam or device.type not in ("cpu", "cuda"):
        return policy_kwargs
    optimizer_kwargs = policy_kwargs.get("optimizer_kwargs")
    optimizer_kwargs = {"eps": 1e-5} if optimizer_kwargs is None else dict(optimizer_kwargs)
    if {"foreach", "fused"} & optimizer_kwargs.keys():
        return policy_kwargs
    return {**policy_kwargs, "optimizer_kwargs": {**optimizer_kwargs, "fused": True}}
