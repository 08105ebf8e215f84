"""What :meth:`sb3_pcl.PCL.train` logs of each update (``train/<key>``, the mean over an iteration's batches)."""

from typing import Any

import torch as th

from sb3_pcl.common.path_buffer import PathBatch
from sb3_pcl.common.statistics import explained_variance_tensor, masked_mean
from sb3_pcl.pcl.consistency import Consistency, consistency_loss, value_targets


def update_statistics(
    batch: PathBatch,
    values: th.Tensor,
    consistency: Consistency,
    distribution: Any,
    policy_loss: th.Tensor,
    value_loss: th.Tensor,
    step_stats: dict[str, float | th.Tensor],
) -> dict[str, float | th.Tensor]:
    """
    The statistics of one update, computed without gradient after its policy step; they stay on the model's device
    (0-d tensors), moved to the host together once per iteration (:func:`~sb3_pcl.common.statistics.on_host`).

    :param batch: the path segments
    :param values: the online ``V(s_t)`` the update's consistency was built from, ``(T, B)``
    :param consistency: that consistency
    :param distribution: the online action distribution of the ``T * B`` steps (a copy the policy does not overwrite)
    :param policy_loss: the policy surrogate
    :param value_loss: the value surrogate
    :param step_stats: what the policy step reports (``grad_norm``, and the trust-region step's own numbers)
    :return: ``consistency_loss``, ``mean_sq_consistency``, ``mean_abs_consistency``, ``policy_loss``,
        ``value_loss``, ``entropy`` (a one-sample estimate where the distribution has no closed form, as
        tanh-squashed gSDE), the step's statistics and ``explained_variance`` of the value targets
    """
    with th.no_grad():
        entropy = distribution.entropy()
        if entropy is None:  # no closed form (tanh-squashed gSDE): a one-sample estimate at each state
            entropy = -distribution.log_prob(distribution.sample())
        n_valid = consistency.mask.sum().double()
        residual = consistency.residual.detach()
        return {
            "consistency_loss": consistency_loss(consistency),
            "mean_sq_consistency": (residual**2).sum().double() / n_valid,
            "mean_abs_consistency": residual.abs().sum().double() / n_valid,
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": masked_mean(entropy, batch.mask.reshape(-1).bool()),
            **step_stats,
            "explained_variance": explained_variance_tensor(values.detach(), value_targets(consistency), batch.mask),
        }
