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

    :param policy: ``MlpPolicy``, ``CnnPolicy``, ``MultiInputPolicy`` or a feed-forward policy class (the recurrent
        policies: :class:`~sb3_pcl.RecurrentUREX`)
    :param env: an env or VecEnv (any number of envs; ``n_envs`` a multiple of ``num_samples`` is the fast path)
        whose ``reset(seed=...)`` determines the episode (others train on unsynchronized groups, with a warning; with
        a curriculum: wrapped in :class:`sb3_pcl.envs.SharedCurriculum`, see :class:`~sb3_pcl.Reinforce`)
    :param ent_coef: the temperature ``tau``, a finite float > 0 or a schedule of the remaining progress
        (callable or string, :func:`~sb3_pcl.common.schedules.parse_schedule`) whose values are checked to be
        finite and > 0 when training uses them (a ``ValueError`` naming ``ent_coef``)

    The other parameters are :class:`~sb3_pcl.reinforce.Reinforce`'s, with its defaults.
    """

    #: the temperature must be > 0, at construction and at every value of a schedule
    _ent_coef_positive: ClassVar[bool] = True

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.01,
        num_samples: int = 2,
        ent_coef: float | Schedule | str = 0.1,
        max_steps: int = 1000,
        max_grad_norm: float | None = 50.0,
        adam_eps: float = 2e-4,
        check_seeding: bool = True,
        gamma: float = 1.0,
        action_noise: None = None,
        policy_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
    ):
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            num_samples=num_samples,
            ent_coef=ent_coef,
            max_steps=max_steps,
            max_grad_norm=max_grad_norm,
            adam_eps=adam_eps,
            check_seeding=check_seeding,
            gamma=gamma,
            action_noise=action_noise,
            policy_kwargs=policy_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=_init_setup_model,
        )

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
