"""Under-appreciated Reward EXploration (UREX) as a Stable-Baselines3 algorithm."""

from typing import Any, ClassVar, TypeVar

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule

from sb3_pcl.common.validation import check, is_real
from sb3_pcl.reinforce.reinforce import Reinforce

SelfUREX = TypeVar("SelfUREX", bound="UREX")


def urex_bonus(total_rewards: th.Tensor, total_log_probs: th.Tensor, ent_coef: float) -> th.Tensor:
    """
    UREX bonus: ``tau * K * softmax_K(R / tau - L)``, the self-normalised importance weights of the
    ``K`` episodes of a group under ``exp(R / tau)``, scaled so that they average to ``tau``.

    :param total_rewards: ``(n_groups, K)`` total rewards ``R``
    :param total_log_probs: ``(n_groups, K)`` total log-probabilities ``L``
    :param ent_coef: ``tau``, the temperature, ``> 0``
    :return: ``(n_groups, K)`` bonus
    """
    check(is_real(ent_coef) and ent_coef > 0, "ent_coef", ent_coef, "> 0 for the UREX bonus")
    num_samples = total_rewards.shape[-1]
    return ent_coef * num_samples * th.softmax(total_rewards / ent_coef - total_log_probs, dim=-1)


class UREX(Reinforce):
    """
    Under-appreciated Reward EXploration (UREX).

    Paper: "Improving Policy Gradient by Exploring Under-appreciated Rewards",
    Nachum, Norouzi, Schuurmans (ICLR 2017), https://arxiv.org/abs/1611.09321

    :class:`~sb3_pcl.reinforce.Reinforce` with another bonus: the ``K`` episodes of a start state get
    ``b = tau * K * softmax_K(R / tau - L)`` (``tau = ent_coef``), the self-normalised importance weights of the
    optimal policy ``pi*(a) ~ exp(R(a) / tau)`` against the current one, which favours episodes whose reward is
    high relative to their probability. The baseline, loss, data, optimiser, logging and the other arguments are
    Reinforce's; only the default and the allowed values of ``ent_coef`` differ.

    :param policy: ``MlpPolicy``, ``MlpLstmPolicy`` or a policy class
    :param env: an env or VecEnv (any number of envs; ``n_envs`` a multiple of ``num_samples`` is the fast path)
        whose ``reset(seed=...)`` determines the episode (others train on unsynchronized groups, with a warning; with
        a curriculum: wrapped in :class:`sb3_pcl.envs.SharedCurriculum`, see :class:`~sb3_pcl.Reinforce`)
    :param ent_coef: the temperature ``tau``, a finite float > 0 or a schedule of the remaining progress
        (callable or string, :func:`~sb3_pcl.common.schedules.parse_schedule`) whose values are checked to be
        finite and > 0 when training uses them (a ``ValueError`` naming ``ent_coef``)
    :param kwargs: the other arguments of :class:`~sb3_pcl.reinforce.Reinforce` (``learning_rate``,
        ``num_samples``, ``max_steps``, ``max_grad_norm``, ``adam_eps``, ``check_seeding``, ...)
    """

    #: the temperature must be > 0, at construction and at every value of a schedule
    _ent_coef_positive: ClassVar[bool] = True

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        ent_coef: float | Schedule | str = 0.1,
        **kwargs: Any,
    ):
        super().__init__(policy, env, ent_coef=ent_coef, **kwargs)

    def _bonus(self, total_rewards: th.Tensor, total_log_probs: th.Tensor, ent_coef: float) -> th.Tensor:
        """
        UREX bonus ``ent_coef * K * softmax_K(R / ent_coef - L)``.

        :param total_rewards: ``(n_groups, K)`` total rewards
        :param total_log_probs: ``(n_groups, K)`` total log-probabilities (detached)
        :param ent_coef: current temperature (> 0)
        :return: ``(n_groups, K)`` bonus
        """
        return urex_bonus(total_rewards, total_log_probs, ent_coef)

    def learn(
        self: SelfUREX,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int | None = 1,
        tb_log_name: str = "UREX",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfUREX:
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
