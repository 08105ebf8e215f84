"""Acting: sampling a policy's actions cheaply, and from them the actions the env receives."""

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution, DiagGaussianDistribution
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.preprocessing import is_image_space


@contextlib.contextmanager
def no_distribution_checks() -> Iterator[None]:
    """
    Switch off the argument checks of ``torch.distributions`` objects for the duration (restored afterwards). Each check
    reads the parameters' values, which on a GPU waits for the device; the finite checks of the updates
    (:func:`~sb3_pcl.common.validation.check_finite_update`) keep non-finite parameters out instead.
    """
    validate = th.distributions.Distribution._validate_args
    th.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        th.distributions.Distribution.set_default_validate_args(validate)


def sample_actions(policy: ActorCriticPolicy, observation: np.ndarray) -> th.Tensor:
    """
    Stochastic actions of ``policy`` for a batch of observations, as ``policy._predict(obs, deterministic=False)``
    samples them (the same random draws, so the same numbers), at a fraction of the cost per call: no autograd
    bookkeeping (``torch.inference_mode``), no argument checks of ``torch.distributions`` objects, and for a diagonal
    Gaussian or a categorical policy no distribution object at all. Acting once per env step, these costs are most of
    the policy's time for small networks.

    :param policy: the acting policy
    :param observation: observations ``(n_envs, *obs_shape)``, as the VecEnv returns them
    :return: the sampled actions ``(n_envs, ...)``, a tensor on the policy's device, not tracked by autograd
    """
    space = policy.observation_space
    with no_distribution_checks(), th.inference_mode():
        obs_tensor: Any
        if isinstance(space, spaces.Box) and not is_image_space(space):
            obs_tensor = th.as_tensor(observation, device=policy.device).reshape(-1, *space.shape)
        else:
            obs_tensor = policy.obs_to_tensor(observation)[0]
        lean = type(policy).get_distribution is ActorCriticPolicy.get_distribution
        if lean and type(policy.action_dist) in (DiagGaussianDistribution, CategoricalDistribution):
            features = policy.extract_features(obs_tensor, policy.pi_features_extractor)
            action_params = policy.action_net(policy.mlp_extractor.forward_actor(features))  # type: ignore[arg-type]
            if isinstance(policy.action_dist, DiagGaussianDistribution):
                # Normal(mean, ones * exp(log_std)).rsample(), term by term
                scale = th.ones_like(action_params) * policy.log_std.exp()
                return action_params + th.empty_like(action_params).normal_() * scale
            # Categorical(logits=...).sample(): multinomial draws from the normalised probabilities
            probs = th.softmax(action_params - action_params.logsumexp(dim=-1, keepdim=True), dim=-1)
            return th.multinomial(probs.reshape(-1, probs.shape[-1]), 1, True).T.reshape(probs.shape[:-1])
        return policy._predict(obs_tensor, deterministic=False)


def to_env_actions(policy: BasePolicy, action_space: spaces.Space, sampled: np.ndarray, clip: bool = True) -> np.ndarray:
    """
    The env's actions for sampled ones: a squashing policy's ``[-1, 1]`` actions rescaled to a ``Box``'s bounds,
    other ``Box`` actions clipped to them (unless ``clip`` is false), other spaces unchanged (the replay keeps
    ``sampled``).

    :param policy: the policy that sampled them (its ``squash_output`` and bounds)
    :param action_space: the env's action space
    :param sampled: actions as sampled, ``(n_envs, *action_shape)``
    :param clip: clip the actions of a non-squashing policy to the ``Box`` (``False``: send them as sampled, as the
        original code did, so that the env charges its control cost on the action the policy drew)
    :return: the actions to send to the env
    """
    if not isinstance(action_space, spaces.Box):
        return sampled
    if policy.squash_output:
        return policy.unscale_action(sampled)
    return np.clip(sampled, action_space.low, action_space.high) if clip else sampled
