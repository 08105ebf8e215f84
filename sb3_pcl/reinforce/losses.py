"""
The full-episode losses of Reinforce (MENT) and UREX.

Small pure torch functions on ``(n_groups, K)`` tensors: row ``g`` holds the ``K`` episodes played
from start state ``g``, ``R`` their total rewards, ``L`` their total log-probabilities (summed over
steps and action components), ``tau`` the algorithms' ``ent_coef`` (entropy coefficient of MENT,
temperature of UREX).

============================  =========================================================  ============================
quantity                      definition                                                 function
============================  =========================================================  ============================
MENT bonus (REINFORCE)        ``b = -tau * L``                                           :func:`ment_bonus`
UREX bonus                    ``b = tau * K * softmax_K(R / tau - L)``                   ``sb3_pcl.urex.urex.urex_bonus``
K-sample baseline             ``B_g = mean_k (R_gk + b_gk)``                             :func:`k_sample_baseline`
policy loss                   ``mean_{g,k} -stopgrad(R_gk + b_gk - B_g) * L_gk``         :func:`full_episode_policy_loss`
============================  =========================================================  ============================
"""

import torch as th


def episode_totals(x: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """
    Sum a time-major quantity over the valid steps of each episode.

    :param x: ``(T, N)`` per-step values (rewards or log-probabilities)
    :param mask: ``(T, N)``, 1 on the steps of each episode, 0 after it
    :return: ``(N,)`` totals (masked entries never contribute, even when they are not finite)
    """
    return th.where(mask > 0, x, th.zeros_like(x)).sum(dim=0)


def ment_bonus(total_log_probs: th.Tensor, ent_coef: float) -> th.Tensor:
    """
    Entropy bonus of REINFORCE with maximum-entropy regularisation (MENT): ``-tau * L``.

    :param total_log_probs: ``(n_groups, K)`` total log-probabilities ``L`` of the episodes
    :param ent_coef: ``tau``, the entropy coefficient
    :return: ``(n_groups, K)`` bonus
    """
    return -ent_coef * total_log_probs


def k_sample_baseline(rewards_and_bonus: th.Tensor) -> th.Tensor:
    """
    Non-parametric baseline: the mean of ``R + bonus`` over the ``K`` episodes of each group.

    :param rewards_and_bonus: ``(n_groups, K)``
    :return: ``(n_groups, 1)``
    """
    return rewards_and_bonus.mean(dim=-1, keepdim=True)


def full_episode_policy_loss(total_rewards: th.Tensor, total_log_probs: th.Tensor, bonus: th.Tensor) -> th.Tensor:
    """
    Policy-gradient surrogate ``mean_{g,k} -stopgrad(R + b - baseline) * L``, averaged over all episodes
    of the batch as in the original code.

    :param total_rewards: ``(n_groups, K)`` total rewards
    :param total_log_probs: ``(n_groups, K)`` total log-probabilities (the gradient flows through them)
    :param bonus: ``(n_groups, K)`` exploration bonus (``ment_bonus`` or ``urex_bonus``)
    :return: scalar loss
    """
    rewards_and_bonus = (total_rewards + bonus).detach()
    advantages = rewards_and_bonus - k_sample_baseline(rewards_and_bonus)
    return -(advantages * total_log_probs).mean()
