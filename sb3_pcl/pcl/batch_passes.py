"""
Sharing a training iteration's forward passes between its parts: :class:`BatchPasses`, a mixin of :class:`~sb3_pcl.PCL`.

Within one :meth:`sb3_pcl.PCL.train` call the target network does not change, so its pass over a batch is computed once
for the policy step, the value fit and the logs; a policy step that moves none of the parameters the values depend on
leaves the values as its own pass computed them, so a separate value fit reads them instead of a new pass. The passes
are kept for the batches of one iteration and forgotten after it.
"""

import copy
from collections.abc import Callable
from typing import Any

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import MlpExtractor

from sb3_pcl.common.dict_obs import map_obs, merge_leading
from sb3_pcl.common.path_buffer import PathBatch
from sb3_pcl.common.statistics import masked_mean, state_kl
from sb3_pcl.pcl.policies import UnifiedValue


class BatchPasses:
    """
    The forward passes a training iteration shares (:meth:`_target_evaluation`, :meth:`_evaluate_after_policy_step`),
    and what the policy step and the logs read of a batch (:meth:`_valid_observations`, :meth:`_kl_to_target`).
    """

    # what the algorithm provides (see :class:`~sb3_pcl.PCL`)
    policy: ActorCriticPolicy
    policy_target: ActorCriticPolicy
    use_target_values: bool
    _value_fit: Any
    _evaluate: Callable[[ActorCriticPolicy, PathBatch], tuple[th.Tensor, th.Tensor, th.Tensor, Any]]
    _prepare_actions: Callable[[th.Tensor], th.Tensor]

    def _setup_batch_caches(self) -> None:
        """
        Decide which of a training iteration's forward passes can be shared (:meth:`_target_evaluation`,
        :meth:`_evaluate_after_policy_step`), and empty the caches.
        """
        policy = self.policy
        #: whether ``log pi`` can be computed without the values (:meth:`_log_prob`): policies whose value is not read
        #: from the action logits
        self._policy_alone = not isinstance(policy, UnifiedValue)
        #: whether the policy step leaves the values unchanged (it moves none of the parameters they depend on)
        self._values_survive_policy_step = False
        if self._policy_alone and self._value_fit is not None:
            mlp = policy.mlp_extractor
            value_modules = [
                policy.value_net,
                policy.vf_features_extractor,
                mlp.value_net if type(mlp) is MlpExtractor else mlp,
            ]
            value_ids = {id(p) for module in value_modules for p in module.parameters()}
            self._values_survive_policy_step = not value_ids & {id(p) for p in self._value_fit.policy_parameters()}
        self._clear_batch_caches()

    def _clear_batch_caches(self, keep: bool = False) -> None:
        """
        Forget the forward passes kept for the batches of a training iteration.

        :param keep: keep the passes of the coming batches (only inside :meth:`~sb3_pcl.PCL.train`, where the target
            and the values change only as the iteration expects)
        """
        self._keep_batch_passes = keep
        self._target_cache: tuple[PathBatch, tuple[Any, th.Tensor, Any, Any]] | None = None
        self._values_cache: tuple[PathBatch, th.Tensor, th.Tensor] | None = None
        self._post_step_distribution: tuple[PathBatch, Any] | None = None

    def _log_prob(self, policy: ActorCriticPolicy, batch: PathBatch) -> tuple[th.Tensor, Any]:
        """
        :param policy: the online or the target policy
        :param batch: the path segments
        :return: log-probabilities ``(T, B)`` and the action distribution of the ``T * B`` steps, as ``_evaluate``
            computes them, without the values (where the policy's own distribution gives them: ``_policy_alone``)
        """
        n_steps, n_paths = batch.mask.shape
        n_rows = n_steps * n_paths
        distribution = policy.get_distribution(merge_leading(batch.observations, n_rows))
        actions = self._prepare_actions(batch.actions.reshape(n_rows, -1))
        return distribution.log_prob(actions).reshape(n_steps, n_paths), distribution

    def _target_evaluation(self, batch: PathBatch) -> tuple[Any, th.Tensor, Any, Any]:
        """
        The target network's pass over a batch, without gradient, computed once per batch: the target changes only
        between training iterations, so the policy step, the value fit and the logs of an iteration share it.

        :param batch: the path segments
        :return: as ``_evaluate`` (the distribution a copy the policy does not overwrite); the values are ``None``
            unless ``use_target_values`` needs them (or the policy computes both in one pass)
        """
        if self._target_cache is not None and self._target_cache[0] is batch:
            return self._target_cache[1]
        values: th.Tensor | None = None
        final_values: th.Tensor | None = None
        with th.no_grad():
            if self.use_target_values or not self._policy_alone:
                values, log_prob, final_values, distribution = self._evaluate(self.policy_target, batch)
            else:
                log_prob, distribution = self._log_prob(self.policy_target, batch)
        result = (values, log_prob, final_values, copy.copy(distribution))
        if self._keep_batch_passes:
            self._target_cache = (batch, result)
        return result

    def _evaluate_after_policy_step(self, batch: PathBatch) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]:
        """
        What ``_evaluate(self.policy, batch)`` returns after the policy step on ``batch`` (for a separate value fit).

        A step that moves none of the parameters the values depend on leaves them as the step's own forward pass
        computed them: then only ``log pi`` is computed again.

        :param batch: the path segments the policy step was taken on
        :return: values ``(T, B)``, log-probabilities ``(T, B)``, final values ``(B,)`` and the action distribution
        """
        if self._values_cache is None or self._values_cache[0] is not batch:
            return self._evaluate(self.policy, batch)
        _, values, final_values = self._values_cache
        log_prob, distribution = self._log_prob(self.policy, batch)
        self._post_step_distribution = (batch, copy.copy(distribution))
        return values, log_prob, final_values, distribution

    @staticmethod
    def _valid_observations(batch: PathBatch) -> th.Tensor:
        """:return: the observations of the batch's valid (unpadded) steps, flattened to ``(n_valid, *obs_shape)``"""
        valid = batch.mask.reshape(-1).bool()
        return map_obs(lambda obs: obs.reshape(-1, *obs.shape[2:])[valid], batch.observations)

    def _kl_to_target(self, batch: PathBatch, distribution: Any = None) -> th.Tensor:
        """
        :param batch: the path segments
        :param distribution: the online action distribution of the batch's ``T * B`` steps that its update read, if at
            hand: with the target's pass kept, the KL is then read from the two passes the update made (a separate
            value fit's pass after the step replaces it), and costs no forward pass
        :return: the mean ``KL(pi_target || pi)`` over the valid states of a batch (0-d, on the model's device)
        """
        target, current = self._target_cache, self._post_step_distribution
        if current is None or current[0] is not batch:
            current = None if distribution is None else (batch, distribution)
        if target is not None and target[0] is batch and current is not None:
            with th.no_grad():
                return masked_mean(state_kl(target[1][3], current[1]), batch.mask.reshape(-1))
        obs = self._valid_observations(batch)
        with th.no_grad():
            kl = state_kl(self.policy_target.get_distribution(obs), self.policy.get_distribution(obs))
        return kl.mean()
