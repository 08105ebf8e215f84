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

from functools import partial
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, BaseModel, MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import CombinedExtractor
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import nn

from sb3_pcl.pcl.consistency import soft_value

CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy

#: the value network's inputs (:class:`MlpPolicy`'s ``value_input``)
VALUE_INPUTS = ("obs", "obs_squared")
#: how the state-independent log-std starts (:class:`MlpPolicy`'s ``log_std_init_scheme``)
LOG_STD_INIT_SCHEMES = ("constant", "glorot_uniform")


class SquaredFeatures(nn.Module):
    """``x -> [1, x, x ** 2]`` on the last axis: the original code's value input (width ``2 * n + 1``)."""

    def forward(self, features: th.Tensor) -> th.Tensor:
        return th.cat([th.ones_like(features[..., :1]), features, features * features], dim=-1)


class MlpPolicy(ActorCriticPolicy):
    """
    SB3's :class:`ActorCriticPolicy` (separate policy and value MLPs, a diagonal Gaussian with a state-independent
    log-std for ``Box`` actions) with three options of the original code's networks; with their defaults it is SB3's
    policy, parameter for parameter.

    :param observation_space: observation space
    :param action_space: action space
    :param lr_schedule: learning rate schedule
    :param args: the other positional arguments of :class:`ActorCriticPolicy`
    :param value_input: ``"obs"`` (SB3's: the value MLP reads the features) or ``"obs_squared"``: it reads
        ``[1, features, features ** 2]``, as the original code's value network did
    :param value_bias: biases in the value MLP's hidden layers and output (``False``: none, as in the original code,
        whose constant input feature plays the first layer's bias)
    :param log_std_init_scheme: ``"constant"`` (SB3's: every component starts at ``log_std_init``) or
        ``"glorot_uniform"``: each component drawn uniformly in ``+-sqrt(6 / (1 + action_dim))``, the initialisation
        the original code's ``[1, action_dim]`` log-std variable got (so each std starts between about 0.4 and 2.5 for
        6 action components); diagonal Gaussian policies only
    :param kwargs: the other keyword arguments of :class:`ActorCriticPolicy`
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        *args: Any,
        value_input: str = "obs",
        value_bias: bool = True,
        log_std_init_scheme: str = "constant",
        **kwargs: Any,
    ) -> None:
        if value_input not in VALUE_INPUTS:
            raise ValueError(f"value_input must be one of {VALUE_INPUTS}, got {value_input!r}")
        if not isinstance(value_bias, bool):
            raise ValueError(f"value_bias must be True or False, got {value_bias!r}")
        if log_std_init_scheme not in LOG_STD_INIT_SCHEMES:
            raise ValueError(f"log_std_init_scheme must be one of {LOG_STD_INIT_SCHEMES}, got {log_std_init_scheme!r}")
        if log_std_init_scheme != "constant" and (not isinstance(action_space, spaces.Box) or kwargs.get("use_sde")):
            raise ValueError(
                f"log_std_init_scheme={log_std_init_scheme!r} initialises a diagonal Gaussian's log-std: it needs Box "
                f"actions without use_sde, got {action_space}{' with use_sde' if kwargs.get('use_sde') else ''}"
            )
        self.value_input = value_input
        self.value_bias = value_bias
        self.log_std_init_scheme = log_std_init_scheme
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        """SB3's extractor; with ``value_input="obs_squared"`` or ``value_bias=False`` its value MLP built anew."""
        super()._build_mlp_extractor()
        if self.value_input == "obs" and self.value_bias:
            return
        arch = self.net_arch
        sizes = list(arch.get("vf", []) if isinstance(arch, dict) else arch)
        layers: list[nn.Module] = [SquaredFeatures()] if self.value_input == "obs_squared" else []
        width = 2 * self.features_dim + 1 if self.value_input == "obs_squared" else self.features_dim
        for size in sizes:
            layers += [nn.Linear(width, size, bias=self.value_bias), self.activation_fn()]
            width = size
        self.mlp_extractor.value_net = nn.Sequential(*layers)
        self.mlp_extractor.latent_dim_vf = width

    def _build(self, lr_schedule: Schedule) -> None:
        """SB3's networks and optimiser, then the options: a bias-free value output, the log-std's initialisation."""
        super()._build(lr_schedule)
        if self.value_bias and self.log_std_init_scheme == "constant":
            return
        if not self.value_bias:
            self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1, bias=False)
            if self.ortho_init:
                self.value_net.apply(partial(self.init_weights, gain=1))
        if self.log_std_init_scheme == "glorot_uniform":
            limit = float(np.sqrt(6.0 / (1 + self.log_std.numel())))
            with th.no_grad():
                self.log_std.uniform_(-limit, limit)
        # the optimiser again, over the parameters as they now are (it holds no state yet)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {
            **super()._get_constructor_parameters(),
            "value_input": self.value_input,
            "value_bias": self.value_bias,
            "log_std_init_scheme": self.log_std_init_scheme,
        }


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
    (:func:`~sb3_pcl.pcl.consistency.soft_value`). The value MLP and head that :class:`ActorCriticPolicy`
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
    "LOG_STD_INIT_SCHEMES",
    "VALUE_INPUTS",
    "CnnPolicy",
    "MlpPolicy",
    "MultiInputPolicy",
    "SquaredFeatures",
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
