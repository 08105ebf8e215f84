"""REINFORCE with maximum-entropy regularisation (MENT) and a K-sample baseline, as a Stable-Baselines3 algorithm."""

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule
from stable_baselines3.common.vec_env import VecEnv, unwrap_vec_wrapper

from sb3_pcl.common.episodes import (
    MAX_SEED,
    EpisodeBatch,
    StepRecord,
    check_num_samples,
    check_seeded_resets,
    collect_episode_batch,
    episode_totals,
    full_episode_policy_loss,
    ment_bonus,
)
from sb3_pcl.common.recurrent import initial_recurrent_states
from sb3_pcl.common.schedules import parse_schedule
from sb3_pcl.common.validation import fail_hyperparameter
from sb3_pcl.envs.curriculum import SharedCurriculum, share_curriculum
from sb3_pcl.reinforce.policies import MlpLstmPolicy, MlpPolicy

SelfReinforce = TypeVar("SelfReinforce", bound="Reinforce")


class Reinforce(OnPolicyAlgorithm):
    """
    REINFORCE with an entropy bonus (MENT) and a non-parametric K-sample baseline.

    Papers: Williams (1992); "Improving Policy Gradient by Exploring Under-appreciated Rewards",
    Nachum, Norouzi, Schuurmans (2017), https://arxiv.org/abs/1611.09321 (the MENT baseline of UREX).

    Each iteration plays one batch of full episodes: the ``n_envs`` envs form ``n_envs / num_samples``
    groups of ``num_samples`` (``K``) envs reset with the same seed, so every start state is played
    ``K`` times. With ``R`` the total reward and ``L`` the total log-probability of an episode, the
    loss is ``mean -stopgrad(R + b - mean_K(R + b)) * L`` with the bonus ``b = -tau * L``
    (see :mod:`sb3_pcl.common.episodes`), followed by one Adam step with global-norm gradient clipping.

    Base class: :class:`~stable_baselines3.common.on_policy_algorithm.OnPolicyAlgorithm`, whose loop
    (collect, log every ``log_interval`` iterations, train once, until ``total_timesteps``) is exactly
    this algorithm's, with its callbacks, progress bar, logging and saving. Only the data differ: no
    fixed-length ``RolloutBuffer`` but a batch of whole episodes from synchronized resets, so
    ``collect_rollouts`` is overridden. ``num_timesteps`` counts every env step, including the steps
    envs make after their episode of the batch has ended (they are masked out of the loss).

    :param policy: ``MlpPolicy`` (SB3's actor-critic MLP), ``MlpLstmPolicy`` (LSTM with previous-action
        input) or a policy class
    :param env: a VecEnv of ``n_groups * num_samples`` envs whose ``reset(seed=...)`` determines the episode
    :param learning_rate: Adam learning rate, constant or a schedule of the remaining progress
    :param num_samples: ``K``, episodes per start state (>= 2, must divide ``n_envs``)
    :param tau: entropy coefficient, a float or a schedule of the remaining progress, callable or string
        (:func:`~sb3_pcl.common.schedules.parse_schedule`; the original ``tau_decay`` is an ``exp_`` schedule)
    :param max_steps: cap on the steps of a batch; episodes still running then are cut and used as they are
    :param max_grad_norm: clip the global gradient norm (``None``: no clipping)
    :param adam_eps: ``eps`` of Adam (the original code: 2e-4); ``policy_kwargs["optimizer_kwargs"]`` overrides it
    :param check_seeding: at the start of ``learn``, reset twice with the same seeds and check the groups
        start identically (the groups of every batch are always checked)
    :param shared_curriculum: when the envs have a curriculum (the algorithmic tasks of :mod:`sb3_pcl.envs`),
        wrap the env in :class:`~sb3_pcl.envs.curriculum.SharedCurriculum` (unless it already is) so that all
        envs share one curriculum, as in gym <= 0.17.2; it counts the batches' episodes only. Per-env curricula
        drift apart and the copies of a group then start differently (``ValueError``)
    :param stats_window_size: window size for the rollout logging
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments passed to the policy on creation
    :param verbose: 0 no output, 1 info, 2 debug
    :param seed: seed for the pseudo random generators (and the reset seeds of the batches)
    :param device: PyTorch device
    :param _init_setup_model: whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "MlpLstmPolicy": MlpLstmPolicy,
    }
    policy: ActorCriticPolicy

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.01,
        num_samples: int = 2,
        tau: float | Schedule | str = 0.01,
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
        policy_kwargs = dict(policy_kwargs or {})
        if policy_kwargs.get("optimizer_class", th.optim.Adam) is th.optim.Adam:
            policy_kwargs["optimizer_kwargs"] = {"eps": adam_eps, **(policy_kwargs.get("optimizer_kwargs") or {})}
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=max_steps,
            gamma=1.0,
            gae_lambda=1.0,
            ent_coef=0.0,
            vf_coef=0.0,
            max_grad_norm=0.0 if max_grad_norm is None else max_grad_norm,
            use_sde=False,
            sde_sample_freq=-1,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete),
        )
        self.num_samples = num_samples
        self.tau = parse_schedule("tau", tau)
        self.max_steps = max_steps
        self.max_grad_norm = max_grad_norm  # type: ignore[assignment]
        self.adam_eps = adam_eps
        self.check_seeding = check_seeding
        self.shared_curriculum = shared_curriculum
        self._batch: EpisodeBatch | None = None
        self._check_hyperparameters()

        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ setup
    def _check_hyperparameters(self) -> None:
        """Raise a ``ValueError`` naming the first invalid hyperparameter."""

        def fail(name: str, allowed: str) -> None:
            fail_hyperparameter(self, name, allowed)

        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, (int, np.integer)) or self.num_samples < 2:
            fail("num_samples", "an integer >= 2 (the K-sample baseline needs K episodes per start state)")
        if not callable(self.tau) and self.tau < 0:
            fail("tau", ">= 0 (or a schedule)")
        if not isinstance(self.max_steps, (int, np.integer)) or self.max_steps < 1:
            fail("max_steps", "an integer >= 1")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            fail("max_grad_norm", "None or > 0")
        if self.adam_eps <= 0:
            fail("adam_eps", "> 0")

    def _setup_model(self) -> None:
        if isinstance(self.observation_space, spaces.Dict):
            raise ValueError(
                f"{type(self).__name__} does not support Dict observation spaces (flatten them with a wrapper first)"
            )
        if self.env is not None:
            self.env = self._share_curriculum(self.env)
            check_num_samples(self.num_samples, self.env.num_envs)
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self.tau_schedule = FloatSchedule(self.tau)
        self.rollout_buffer = None  # type: ignore[assignment]  # whole-episode batches instead, see collect_rollouts
        self.policy = self.policy_class(  # type: ignore[assignment]
            self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
        )
        self.policy = self.policy.to(self.device)

    def _share_curriculum(self, env: VecEnv) -> VecEnv:
        """
        :param env: the training env
        :return: the env in a :class:`SharedCurriculum` when ``shared_curriculum`` and its envs have a curriculum
        """
        return share_curriculum(env, first_episode_only=True) if self.shared_curriculum else env

    def set_env(self, env: GymEnv, force_reset: bool = True) -> None:
        super().set_env(env, force_reset)
        assert self.env is not None
        self.env = self._share_curriculum(self.env)

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        total_timesteps, callback = super()._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        assert self.env is not None
        check_num_samples(self.num_samples, self.env.num_envs)
        if self.check_seeding:
            check_seeded_resets(self.env, self.num_samples, self._draw_base_seed())
        return total_timesteps, callback

    def _draw_base_seed(self) -> int:
        n_groups = self.n_envs // self.num_samples
        return int(np.random.randint(0, MAX_SEED - n_groups))

    # ------------------------------------------------------------------ data
    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        """
        Play one batch of episodes from synchronized start states (the batch is kept for :meth:`train`).

        :param env: the training environment
        :param callback: called once per vectorised step (and at the start and end of the batch)
        :param rollout_buffer: unused (the episodes are kept in an :class:`~sb3_pcl.common.episodes.EpisodeBatch`)
        :param n_rollout_steps: unused (``max_steps`` caps the batch)
        :return: ``False`` if the callback stopped training
        """
        check_num_samples(self.num_samples, env.num_envs)
        callback.on_rollout_start()
        episode_infos: dict[int, dict[str, Any]] = {}

        def on_step(step: StepRecord) -> bool:
            self.num_timesteps += env.num_envs
            callback.update_locals(
                {
                    "actions": step.actions,
                    "clipped_actions": step.env_actions,
                    "new_obs": step.new_obs,
                    "rewards": step.rewards,
                    "dones": step.dones,
                    "infos": step.infos,
                }
            )
            if not callback.on_step():
                return False
            # Only the episodes of the batch count; those the envs start after their first ``done`` are cut short.
            for index in np.flatnonzero(step.valid & step.dones):
                episode_infos[int(index)] = step.infos[index]
            return True

        batch = collect_episode_batch(
            env, self.policy, self.num_samples, self.max_steps, self._draw_base_seed(), on_step=on_step, check_sync=True
        )
        if batch is None:
            return False
        # The batch's episodes enter the episode statistics in env order, not in the order they ended: failed
        # episodes often end early, so the last ``stats_window_size`` to end would be the longest, mostly successful
        # ones, and the mean of the most recent episodes (gym's "solved" measure) would be biased upwards.
        finished = [episode_infos[index] for index in sorted(episode_infos)]
        self._update_info_buffer(finished, np.ones(len(finished), dtype=bool))
        self._batch = batch
        curriculum = unwrap_vec_wrapper(env, SharedCurriculum)
        if isinstance(curriculum, SharedCurriculum):
            self.logger.record("rollout/min_length", curriculum.min_length)
        self._last_obs = None  # type: ignore[assignment]  # every batch starts with a seeded reset
        callback.update_locals({"batch": batch})
        callback.on_rollout_end()
        return True

    def _evaluate_batch(self, batch: EpisodeBatch) -> tuple[th.Tensor, th.Tensor]:
        """
        Log-probabilities and entropies of the batch's actions under the current policy.

        :param batch: the episodes
        :return: ``(T, N)`` log-probabilities and entropies (zero on masked steps)
        """
        n_steps, n_envs = batch.mask.shape
        discrete = isinstance(self.action_space, (spaces.Discrete, spaces.MultiDiscrete))
        mask = th.as_tensor(batch.mask, device=self.device) > 0
        if isinstance(self.policy, RecurrentActorCriticPolicy):
            # Sequence-major, all steps: each env's valid steps are a prefix of one episode, starting from a
            # zero state, so no resets are needed inside the valid range (and none is fed: one fused LSTM call).
            obs = th.as_tensor(
                batch.observations.swapaxes(0, 1).reshape(n_envs * n_steps, *batch.observations.shape[2:]), device=self.device
            )
            actions = th.as_tensor(
                batch.actions.swapaxes(0, 1).reshape(n_envs * n_steps, *batch.actions.shape[2:]), device=self.device
            )
            if discrete:
                actions = actions.long()
            starts = th.zeros(n_envs * n_steps, device=self.device)
            _, log_prob, entropy = self.policy.evaluate_actions(
                obs, actions, initial_recurrent_states(self.policy, n_envs), starts
            )
            log_prob = log_prob.reshape(n_envs, n_steps).T
            entropy = entropy.reshape(n_envs, n_steps).T
        else:
            valid = batch.mask > 0
            obs = th.as_tensor(batch.observations[valid], device=self.device)
            actions = th.as_tensor(batch.actions[valid], device=self.device)
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.long().flatten()
            elif discrete:
                actions = actions.long()
            _, valid_log_prob, valid_entropy = self.policy.evaluate_actions(obs, actions)  # type: ignore[arg-type]
            log_prob = th.zeros((n_steps, n_envs), device=self.device)
            entropy = th.zeros((n_steps, n_envs), device=self.device)
            log_prob[mask] = valid_log_prob
            if valid_entropy is not None:
                entropy[mask] = valid_entropy
        zeros = th.zeros_like(log_prob)
        return th.where(mask, log_prob, zeros), th.where(mask, entropy, zeros)

    # ------------------------------------------------------------------ learning
    def _bonus(self, total_rewards: th.Tensor, total_log_probs: th.Tensor, tau: float) -> th.Tensor:
        """
        Exploration bonus of each episode (MENT: ``-tau * L``); UREX overrides this.

        :param total_rewards: ``(n_groups, K)`` total rewards
        :param total_log_probs: ``(n_groups, K)`` total log-probabilities (detached)
        :param tau: current entropy coefficient
        :return: ``(n_groups, K)`` bonus
        """
        return ment_bonus(total_log_probs, tau)

    def train(self) -> None:
        """One Adam step on the last batch of episodes."""
        if self._batch is None:
            return
        batch = self._batch
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        tau = self.tau_schedule(self._current_progress_remaining)

        log_prob, entropy = self._evaluate_batch(batch)
        mask = th.as_tensor(batch.mask, device=self.device)
        rewards = th.as_tensor(batch.rewards, device=self.device)
        shape = (batch.n_groups, batch.num_samples)
        total_rewards = episode_totals(rewards, mask).reshape(shape)
        total_log_probs = episode_totals(log_prob, mask).reshape(shape)
        bonus = self._bonus(total_rewards, total_log_probs.detach(), tau)
        loss = full_episode_policy_loss(total_rewards, total_log_probs, bonus)

        self.policy.optimizer.zero_grad()
        loss.backward()
        max_norm = float("inf") if self.max_grad_norm is None else self.max_grad_norm
        grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)
        self.policy.optimizer.step()
        self._n_updates += 1

        n_valid = mask.sum()
        rewards_and_bonus = total_rewards + bonus
        self.logger.record("train/loss", loss.item())
        self.logger.record("train/tau", tau)
        self.logger.record("train/entropy", (entropy.detach().sum() / n_valid).item())
        self.logger.record("train/grad_norm", float(grad_norm))
        self.logger.record("train/bonus_mean", bonus.mean().item())
        self.logger.record("train/episode_log_prob_mean", total_log_probs.detach().mean().item())
        self.logger.record(
            "train/advantage_abs_mean", (rewards_and_bonus - rewards_and_bonus.mean(dim=-1, keepdim=True)).abs().mean().item()
        )
        self.logger.record("train/batch_return_mean", float(batch.returns.mean()))
        self.logger.record("train/batch_length_mean", float(batch.lengths.mean()))
        self.logger.record("train/batch_cut_fraction", float(1.0 - batch.ended.mean()))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def learn(  # type: ignore[override]
        self: SelfReinforce,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str | None = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfReinforce:
        """
        Train for at least ``total_timesteps`` env steps (whole batches).

        :param total_timesteps: env steps to train for
        :param callback: callback(s) called at every vectorised step
        :param log_interval: dump the logs every this many batches
        :param tb_log_name: TensorBoard run name (default: the class name, ``Reinforce`` or ``UREX``)
        :param reset_num_timesteps: whether to reset the current timestep count
        :param progress_bar: display a progress bar
        :return: the trained model
        """
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name or type(self).__name__,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_batch"]
