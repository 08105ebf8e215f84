"""Under-appreciated Reward EXploration (UREX) as a Stable-Baselines3 algorithm."""

from typing import Any

import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import GymEnv, Schedule

from sb3_pcl.common.episodes import urex_bonus
from sb3_pcl.reinforce.reinforce import Reinforce


class UREX(Reinforce):
    """
    Under-appreciated Reward EXploration (UREX).

    Paper: "Improving Policy Gradient by Exploring Under-appreciated Rewards",
    Nachum, Norouzi, Schuurmans (ICLR 2017), https://arxiv.org/abs/1611.09321

    :class:`~sb3_pcl.reinforce.Reinforce` with another bonus: the ``K`` episodes of a start state get
    ``b = tau * K * softmax_K(R / tau - L)``, the self-normalised importance weights of the optimal
    policy ``pi*(a) ~ exp(R(a) / tau)`` against the current one, which favours episodes whose reward is
    high relative to their probability. The baseline, loss, data and optimiser are Reinforce's.

    :param policy: ``MlpPolicy``, ``MlpLstmPolicy`` or a policy class
    :param env: a VecEnv of ``n_groups * num_samples`` envs whose ``reset(seed=...)`` determines the episode
    :param learning_rate: Adam learning rate, constant or a schedule of the remaining progress
    :param num_samples: ``K``, episodes per start state (>= 2, must divide ``n_envs``)
    :param tau: temperature, > 0, a float or a schedule of the remaining progress
        (callable or string, :func:`~sb3_pcl.common.schedules.parse_schedule`)
    :param max_steps: cap on the steps of a batch; episodes still running then are cut and used as they are
    :param max_grad_norm: clip the global gradient norm (``None``: no clipping)
    :param adam_eps: ``eps`` of Adam (the original code: 2e-4)
    :param check_seeding: at the start of ``learn``, check that seeded resets synchronize the groups
    :param shared_curriculum: let all envs share one curriculum on the algorithmic tasks (see :class:`~sb3_pcl.Reinforce`)
    :param stats_window_size: window size for the rollout logging
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments passed to the policy on creation
    :param verbose: 0 no output, 1 info, 2 debug
    :param seed: seed for the pseudo random generators (and the reset seeds of the batches)
    :param device: PyTorch device
    :param _init_setup_model: whether or not to build the network at the creation of the instance
    """

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.01,
        num_samples: int = 2,
        tau: float | Schedule | str = 0.1,
        max_steps: int = 1000,
        max_grad_norm: float | None = 50.0,
        adam_eps: float = 2e-4,
        check_seeding: bool = True,
        shared_curriculum: bool = True,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
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
            tau=tau,
            max_steps=max_steps,
            max_grad_norm=max_grad_norm,
            adam_eps=adam_eps,
            check_seeding=check_seeding,
            shared_curriculum=shared_curriculum,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=_init_setup_model,
        )

    def _check_hyperparameters(self) -> None:
        super()._check_hyperparameters()
        if not callable(self.tau) and self.tau <= 0:
            raise ValueError(f"tau must be > 0 (or a schedule of positive values) for UREX, got {self.tau!r}")

    def _bonus(self, total_rewards: th.Tensor, total_log_probs: th.Tensor, tau: float) -> th.Tensor:
        """
        UREX bonus ``tau * K * softmax_K(R / tau - L)``.

        :param total_rewards: ``(n_groups, K)`` total rewards
        :param total_log_probs: ``(n_groups, K)`` total log-probabilities (detached)
        :param tau: current temperature (> 0)
        :return: ``(n_groups, K)`` bonus
        """
        return urex_bonus(total_rewards, total_log_probs, tau)
