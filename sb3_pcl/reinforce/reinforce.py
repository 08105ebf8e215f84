"""REINFORCE with maximum-entropy regularisation (MENT) and a K-sample baseline, as a Stable-Baselines3 algorithm."""

import sys
import time
import warnings
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, PyTorchObs, Schedule
from stable_baselines3.common.utils import FloatSchedule, safe_mean
from stable_baselines3.common.vec_env import VecEnv

from sb3_pcl.common.actions import no_distribution_checks
from sb3_pcl.common.dict_obs import map_obs
from sb3_pcl.common.schedules import parse_schedule
from sb3_pcl.common.statistics import on_host
from sb3_pcl.common.validation import (
    check,
    check_budget,
    check_env_spaces,
    check_finite_parameters,
    check_finite_update,
    check_policy_class,
    check_policy_observation_space,
    check_saved_by,
    is_int,
    is_real,
    resolve_policy_name,
)
from sb3_pcl.reinforce.episodes import (
    MAX_SEED,
    EpisodeBatch,
    GroupSyncError,
    StepRecord,
    UnseedableEnvError,
    batch_layout,
    check_num_samples,
    check_seeded_resets,
    collect_episode_batch,
)
from sb3_pcl.reinforce.losses import episode_totals, full_episode_policy_loss, ment_bonus
from sb3_pcl.reinforce.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

SelfReinforce = TypeVar("SelfReinforce", bound="Reinforce")

#: Probes (each two resets with the same seeds) that must all agree, after the groups of a batch started differently,
#: before the env is taken as seedable and the groups as drifted apart (a ``GroupSyncError``).
_SEEDING_PROBES = 16

#: Attributes of the models saved by sb3_pcl 0.1.0 that no longer exist (dropped when such a model is loaded).
_OLD_SAVE_ATTRIBUTES = (
    "tau_schedule",
    "shared_curriculum",
    "n_steps",
    "gamma",
    "gae_lambda",
    "vf_coef",
    "rollout_buffer_class",
    "rollout_buffer_kwargs",
)


class Reinforce(BaseAlgorithm):
    """
    REINFORCE with an entropy bonus (MENT) and a non-parametric K-sample baseline.

    Papers: Williams (1992); "Improving Policy Gradient by Exploring Under-appreciated Rewards",
    Nachum, Norouzi, Schuurmans (2017), https://arxiv.org/abs/1611.09321 (the MENT baseline of UREX).

    Each iteration plays one batch of full episodes: ``n_groups`` start states, each played ``num_samples``
    (``K``) times from resets with the same seed. When ``K`` divides ``n_envs`` (the fast path), the envs form
    ``n_envs / K`` groups of ``K`` envs that play side by side; otherwise (a single env, e.g. an env id string,
    or ``n_envs`` not a multiple of ``K``) the envs play several passes per batch and the ``K`` copies of a start
    state are played one after another (:func:`~sb3_pcl.reinforce.episodes.batch_layout`). With ``R`` the total
    reward and ``L`` the total log-probability of an episode, the loss is
    ``mean -stopgrad(R + b - mean_K(R + b)) * L`` with the bonus ``b = -ent_coef * L`` (see
    :mod:`sb3_pcl.reinforce.losses`), followed by one Adam step with global-norm gradient clipping.

    Base class: :class:`~stable_baselines3.common.base_class.BaseAlgorithm`, with this algorithm's own
    :meth:`learn` loop: collect one batch, log every ``log_interval`` batches, train once, until
    ``total_timesteps``. Callbacks see every vectorised step (``update_locals`` / ``on_step``) and the start
    and end of each batch (``on_rollout_start`` / ``on_rollout_end``, with ``locals["batch"]``, the
    :class:`~sb3_pcl.reinforce.episodes.EpisodeBatch`). ``num_timesteps`` counts every env step, including the
    steps envs make after their episode of the batch has ended (they are masked out of the loss).

    Envs with a curriculum (the algorithmic tasks of :mod:`sb3_pcl.envs`) need one curriculum for all envs,
    or the ``K`` copies of a group drift apart and stop starting identically (a ``ValueError`` naming
    ``SharedCurriculum``): wrap the VecEnv yourself,
    ``Reinforce(policy, SharedCurriculum(venv, first_episode_only=True))`` with
    :class:`sb3_pcl.envs.SharedCurriculum`, and pass :class:`sb3_pcl.envs.CurriculumLogCallback` to ``learn``
    to log the curriculum length as ``rollout/min_length``.

    ``load`` refuses a file saved by another algorithm class (``UREX.load`` on a ``Reinforce`` file and the
    reverse: a ``ValueError`` naming both) and re-validates the hyperparameters read from the file.

    :param policy: ``MlpPolicy`` (SB3's actor-critic MLP), ``CnnPolicy``, ``MultiInputPolicy`` or a feed-forward
        policy class (the recurrent policies: :class:`~sb3_pcl.RecurrentReinforce`)
    :param env: an env or VecEnv whose ``reset(seed=...)`` determines the episode, with any number of envs
        (``n_envs`` a multiple of ``num_samples`` is the fast path: each batch is one pass over the envs). The
        rewards and observations must be finite (in float32): others raise a ``ValueError`` naming the env index.
        ``VecNormalize`` works: the seeding checks compare the observations before the normalisation. An env whose
        reset ignores the seed (two resets with the same seeds differ) trains too, with a warning, on unsynchronized
        groups: the K-sample baseline then compares episodes of different start states
    :param learning_rate: Adam learning rate, a finite float > 0 or a schedule of the remaining progress (whose
        values are checked when training uses them)
    :param num_samples: ``K``, episodes per start state (an integer >= 2)
    :param ent_coef: entropy coefficient ``tau``, a finite float >= 0 or a schedule of the remaining progress,
        callable or string (:func:`~sb3_pcl.common.schedules.parse_schedule`; the original ``tau_decay`` is an
        ``exp_`` schedule); a schedule's values are checked when training uses them (a ``ValueError`` naming
        ``ent_coef``)
    :param max_steps: cap on the steps of each pass of a batch; episodes still running then are cut and used as
        they are
    :param max_grad_norm: clip the global gradient norm (``None``: no clipping)
    :param adam_eps: ``eps`` of Adam (the original code: 2e-4); ``policy_kwargs["optimizer_kwargs"]`` overrides it
    :param check_seeding: at the start of ``learn``, reset twice with the same seeds and check the groups
        start identically (the groups of every batch are always checked)
    :param gamma: discount factor of an episode's total reward, ``R = sum_t gamma^t r_t`` (1: the undiscounted total
        of the papers and the original code)
    :param action_noise: must be ``None``: the algorithm explores by sampling its stochastic policy (SB3's action
        noise is for deterministic policies such as TD3's); anything else raises ``ValueError``
    :param policy_kwargs: additional arguments passed to the policy on creation
    :param stats_window_size: window size for the rollout logging (an integer >= 1)
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param verbose: 0 no output, 1 info, 2 debug (an integer >= 0)
    :param seed: seed for the pseudo random generators (and the reset seeds of the batches): None or an integer
        in ``[0, 2**32)``

    :param device: PyTorch device
    :param _init_setup_model: whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
    #: whether the class takes ``Dict`` observation spaces (``MultiInputPolicy``)
    supports_dict_observations: ClassVar[bool] = True
    policy: ActorCriticPolicy

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 0.01,
        num_samples: int = 2,
        ent_coef: float | Schedule | str = 0.01,
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
        if action_noise is not None:
            raise ValueError(
                f"action_noise must be None, got {action_noise!r}: {type(self).__name__} explores by sampling its "
                "stochastic policy (remove action_noise, or noise_type / noise_std from an rl-zoo3 entry)"
            )
        _check_base_arguments(verbose, seed, stats_window_size)
        policy_kwargs = dict(policy_kwargs or {})
        if policy_kwargs.get("optimizer_class", th.optim.Adam) is th.optim.Adam:
            policy_kwargs["optimizer_kwargs"] = {"eps": adam_eps, **(policy_kwargs.get("optimizer_kwargs") or {})}
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            policy_kwargs=policy_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            device=device,
            support_multi_env=True,
            seed=seed,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete),
        )
        self.num_samples = num_samples
        self.ent_coef = parse_schedule("ent_coef", ent_coef)
        self.max_steps = max_steps
        self.max_grad_norm = max_grad_norm
        self.adam_eps = adam_eps
        self.check_seeding = check_seeding
        self.gamma = gamma
        self._batch: EpisodeBatch | None = None
        #: whether the groups' copies start identically (else the env's reset ignores the seed: see ``learn``)
        self._synchronized = True
        # saved with the model: ``load`` refuses a file another class saved (see check_saved_by)
        self._saved_by = type(self).__name__
        self._check_hyperparameters()

        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ setup
    #: whether ``ent_coef`` must be > 0 (UREX's temperature) rather than >= 0
    _ent_coef_positive: ClassVar[bool] = False

    @classmethod
    def _wrap_env(cls, env: Any, verbose: int = 0, monitor_wrapper: bool = True) -> Any:
        """SB3's wrapping, after a clear error for the spaces the algorithm does not take (constructor, ``set_env``
        and ``load``)."""
        check_env_spaces(cls.__name__, env, cls.supports_dict_observations)
        return super()._wrap_env(env, verbose, monitor_wrapper)

    @classmethod
    def load(cls: type[SelfReinforce], path: Any, *args: Any, **kwargs: Any) -> SelfReinforce:  # type: ignore[override]
        """SB3's ``load``, then a ``ValueError`` naming the file and the tensors if a saved tensor is not finite."""
        model = super().load(path, *args, **kwargs)
        check_finite_parameters(model, path)
        return model

    def _get_policy_from_name(self, policy_name: str) -> type[BasePolicy]:
        """SB3's lookup, after a clear error for a policy name the class does not take."""
        policy_name = resolve_policy_name(type(self).__name__, policy_name, self.policy_aliases)
        return super()._get_policy_from_name(policy_name)

    def _update_current_progress_remaining(self, num_timesteps: int, total_timesteps: int) -> None:
        """SB3's, stopped at 0 when the last batch overshoots the step budget, so that every schedule ends at its end
        value (rl-zoo3's ``lin_<x>`` would give a negative learning rate)."""
        self._current_progress_remaining = max(0.0, 1.0 - float(num_timesteps) / float(total_timesteps))

    def _check_hyperparameters(self) -> None:
        """Raise a ``ValueError`` naming the first invalid hyperparameter (at construction, and at load: the file's values)."""
        check_policy_class(type(self).__name__, self.policy_class, self.policy_aliases)
        _check_coefficient("learning_rate", self.learning_rate, positive=False, schedule=True)  # 0: rl-zoo3 enjoy
        check_num_samples(self.num_samples)
        _check_coefficient("ent_coef", self.ent_coef, positive=self._ent_coef_positive, schedule=True)
        check(is_int(self.max_steps) and self.max_steps >= 1, "max_steps", self.max_steps, "an integer >= 1")
        check(
            self.max_grad_norm is None or (is_real(self.max_grad_norm) and self.max_grad_norm > 0),
            "max_grad_norm",
            self.max_grad_norm,
            "None or a finite float > 0",
        )
        check(is_real(self.adam_eps) and self.adam_eps > 0, "adam_eps", self.adam_eps, "a finite float > 0")
        check(isinstance(self.check_seeding, bool), "check_seeding", self.check_seeding, "True or False")
        check(is_real(self.gamma) and 0.0 <= self.gamma <= 1.0, "gamma", self.gamma, "in [0, 1]")
        _check_base_arguments(self.verbose, self.seed, self._stats_window_size)

    def _scheduled(self, name: str, value: Any, positive: bool) -> float:
        """
        :param name: the hyperparameter's name (for the message)
        :param value: its constant or schedule
        :param positive: whether the value must be > 0 (else >= 0)
        :return: its value at the current progress
        :raises ValueError: naming the hyperparameter when the value is not a finite float in range
        """
        progress = self._current_progress_remaining
        current = value(progress) if callable(value) else value
        where = f" (the value of its schedule at progress_remaining={progress:.4g})" if callable(value) else ""
        _check_coefficient(name, current, positive, schedule=False, where=where)
        return float(current)

    def _upgrade_old_save(self) -> None:
        """
        Read a model saved by sb3_pcl 0.1.0 (on ``OnPolicyAlgorithm``, with ``tau``): ``load`` has set the saved
        attributes, so ``tau`` becomes ``ent_coef`` (which held a dummy 0 then) and the on-policy leftovers go.
        The env passed to ``load`` is used as it is: wrap it in ``SharedCurriculum`` where the model was trained
        with ``shared_curriculum=True`` (0.1.0's default) on a task with a curriculum.
        """
        if "tau" not in self.__dict__:
            return
        self.ent_coef = self.__dict__.pop("tau")
        for name in _OLD_SAVE_ATTRIBUTES:
            self.__dict__.pop(name, None)
        self.gamma = 1.0  # 0.1.0 saved an on-policy gamma it did not use: its episodes were undiscounted

    def _setup_model(self) -> None:
        self._upgrade_old_save()
        check_saved_by(self)
        check_policy_observation_space(type(self).__name__, self.policy_class, self.observation_space)
        self._check_hyperparameters()  # also the values a loaded model read from its file
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self.ent_coef_schedule = FloatSchedule(self.ent_coef)
        self.policy = self.policy_class(  # type: ignore[assignment]
            self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
        )
        self.policy = self.policy.to(self.device)

    def _check_synchronized_groups(self) -> None:
        """
        Check, before training, that the env's groups of ``num_samples`` episodes can be played from one seed each;
        fall back to unsynchronized groups (with a warning) when the env's reset ignores the seed.
        """
        assert self.env is not None
        self._synchronized = True
        if self.check_seeding:
            try:
                check_seeded_resets(self.env, self.num_samples, self._draw_base_seed())
            except UnseedableEnvError as error:
                self._desynchronize(error)
            except GroupSyncError:
                # The two resets agreed, maybe by chance (an env with few distinct first observations): probe more.
                unseedable = self._unseedable_env_error()
                if unseedable is None:
                    raise
                self._desynchronize(unseedable)

    def _desynchronize(self, error: ValueError) -> None:
        """Play the next batches without requiring the ``K`` copies of a group to start identically, and say so."""
        self._synchronized = False
        warnings.warn(
            f"{type(self).__name__}: {error}. Training goes on with unsynchronized groups: the {self.num_samples} "
            "episodes of a group start from whatever states the env's resets give, so the K-sample baseline (and "
            "UREX's bonus) compares episodes from different start states: still an unbiased gradient, with more "
            "variance. Seed the env's randomness from reset(seed=...) (self.np_random) for the synchronized groups.",
            stacklevel=3,
        )

    def _unseedable_env_error(self) -> UnseedableEnvError | None:
        """
        :return: the error of the first of :data:`_SEEDING_PROBES` probes (two resets with the same seeds) that
            differ, else ``None``. So many: an env whose reset ignores the seed but has few distinct first
            observations (two, say) gives equal resets by chance, and each probe that agrees by chance halves (or
            less) the odds that all of them do.
        """
        assert self.env is not None
        for _ in range(_SEEDING_PROBES):
            try:
                check_seeded_resets(self.env, self.num_samples, self._draw_base_seed())
            except UnseedableEnvError as error:
                return error
            except GroupSyncError:
                continue  # the resets agree but the groups differ: by chance too, so the next probes still count
        return None

    def _draw_base_seed(self) -> int:
        """:return: the reset seed of the first group of a batch (from NumPy's global generator, seeded by ``seed``)"""
        n_groups, _ = batch_layout(self.n_envs, self.num_samples)
        return int(np.random.randint(0, MAX_SEED - n_groups))

    # ------------------------------------------------------------------ data
    def collect_rollouts(self, env: VecEnv, callback: BaseCallback) -> bool:
        """
        Play one batch of episodes from synchronized start states (the batch is kept for :meth:`train`); with
        ``n_envs`` not a multiple of ``num_samples``, in several passes over the envs.

        :param env: the training environment
        :param callback: called once per vectorised step (and at the start and end of the batch)
        :return: ``False`` if the callback stopped training
        """
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
                episode_infos[int(step.slots[index])] = step.infos[index]
            return True

        base_seed = self._draw_base_seed()
        try:
            batch = collect_episode_batch(
                env, self.policy, self.num_samples, self.max_steps, base_seed, on_step, self._synchronized, self._play_step
            )
        except GroupSyncError:  # raised right after a reset, before any step is played
            unseedable = self._unseedable_env_error()
            if unseedable is None:
                raise  # a seeded env whose groups drifted apart (a curriculum): the message says what to do
            self._desynchronize(unseedable)
            batch = collect_episode_batch(
                env, self.policy, self.num_samples, self.max_steps, base_seed, on_step, False, self._play_step
            )
        if batch is None:
            return False
        # The batch's episodes enter the episode statistics in slot (env) order, not in the order they ended: failed
        # episodes often end early, so the last ``stats_window_size`` to end would be the longest, mostly successful
        # ones, and the mean of the most recent episodes (gym's "solved" measure) would be biased upwards.
        finished = [episode_infos[index] for index in sorted(episode_infos)]
        self._update_info_buffer(finished, np.ones(len(finished), dtype=bool))
        self._batch = batch
        # Every batch starts with a seeded reset: no observation carries over (and a later ``learn`` resets first).
        self._last_obs = None
        callback.update_locals({"batch": batch})
        callback.on_rollout_end()
        return True

    def _play_step(self, obs: PyTorchObs, state: Any, episode_starts: np.ndarray) -> tuple[th.Tensor, th.Tensor, Any]:
        """
        Sample one action per env at one step of a batch's pass (the caller disables gradients): the feed-forward
        policy plays each step on its own (:class:`~sb3_pcl.RecurrentReinforce` carries the LSTM state).

        :param obs: the envs' observations, as tensors on the policy's device
        :param state: what the previous step returned (``None`` at the first step of a pass)
        :param episode_starts: ``(n_envs,)`` 1.0 where an env starts an episode at this step, else 0.0
        :return: the sampled actions, their log-probabilities, and the state for the next step (``None``)
        """
        actions, _, log_prob = self.policy(obs)
        return actions, log_prob, None

    def _evaluate_batch(self, batch: EpisodeBatch) -> tuple[th.Tensor, th.Tensor]:
        """
        Log-probabilities and entropies of the batch's actions under the current policy (with gradients): the valid
        steps, each on its own, in one batch.

        :param batch: the episodes
        :return: ``(T, N)`` log-probabilities and entropies (zero on masked steps)
        """
        valid = batch.mask > 0
        obs = map_obs(lambda value: th.as_tensor(value, device=self.device), batch.observations[valid])
        actions = th.as_tensor(batch.actions[valid], device=self.device)
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        elif isinstance(self.action_space, spaces.MultiDiscrete):
            actions = actions.long()
        elif isinstance(self.action_space, spaces.Box):
            actions = actions.reshape(len(actions), -1)  # SB3's distributions take flat Box actions
        _, valid_log_prob, valid_entropy = self.policy.evaluate_actions(obs, actions)  # type: ignore[arg-type]
        selected = th.as_tensor(valid, device=self.device)
        log_prob = th.zeros(batch.mask.shape, device=self.device)
        entropy = th.zeros(batch.mask.shape, device=self.device)
        log_prob[selected] = valid_log_prob
        if valid_entropy is not None:
            entropy[selected] = valid_entropy
        return log_prob, entropy

    # ------------------------------------------------------------------ learning
    def _bonus(self, total_rewards: th.Tensor, total_log_probs: th.Tensor, ent_coef: float) -> th.Tensor:
        """
        Exploration bonus of each episode (MENT: ``-ent_coef * L``); UREX overrides this.

        :param total_rewards: ``(n_groups, K)`` total rewards
        :param total_log_probs: ``(n_groups, K)`` total log-probabilities (detached)
        :param ent_coef: current entropy coefficient
        :return: ``(n_groups, K)`` bonus
        """
        return ment_bonus(total_log_probs, ent_coef)

    def train(self) -> None:
        """One Adam step on the last batch of episodes."""
        if self._batch is None:
            return
        batch = self._batch
        self.policy.set_training_mode(True)
        self._scheduled("learning_rate", self.learning_rate, positive=False)  # a linear decay ends at 0
        self._update_learning_rate(self.policy.optimizer)
        ent_coef = self._scheduled("ent_coef", self.ent_coef, self._ent_coef_positive)

        with no_distribution_checks():  # each check waits for a GPU; the finite check of the update stands instead
            log_prob, entropy = self._evaluate_batch(batch)
        mask = th.as_tensor(batch.mask, device=self.device)
        rewards = th.as_tensor(batch.rewards, device=self.device)
        if self.gamma != 1.0:  # every episode of the batch starts at its step 0
            rewards = rewards * self.gamma ** th.arange(batch.n_steps, dtype=rewards.dtype, device=self.device)[:, None]
        shape = (batch.n_groups, batch.num_samples)
        total_rewards = episode_totals(rewards, mask).reshape(shape)
        total_log_probs = episode_totals(log_prob, mask).reshape(shape)
        bonus = self._bonus(total_rewards, total_log_probs.detach(), ent_coef)
        loss = full_episode_policy_loss(total_rewards, total_log_probs, bonus)

        self.policy.optimizer.zero_grad()
        loss.backward()
        max_norm = float("inf") if self.max_grad_norm is None else self.max_grad_norm
        grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)
        check_finite_update(type(self).__name__, "policy step", loss, grad_norm)
        self.policy.optimizer.step()
        self._n_updates += 1

        rewards_and_bonus = total_rewards + bonus
        stats = {  # moved to the host in one transfer
            "loss": [loss.detach()],
            "entropy": [entropy.detach().sum() / mask.sum()],
            "grad_norm": [grad_norm],
            "bonus_mean": [bonus.mean()],
            "episode_log_prob_mean": [total_log_probs.detach().mean()],
            "advantage_abs_mean": [(rewards_and_bonus - rewards_and_bonus.mean(dim=-1, keepdim=True)).abs().mean()],
        }
        self.logger.record("train/ent_coef", ent_coef)
        for key, values in on_host(stats).items():  # type: ignore[arg-type]
            self.logger.record(f"train/{key}", values[0])
        self.logger.record("train/batch_return_mean", float(batch.returns.mean()))
        self.logger.record("train/batch_length_mean", float(batch.lengths.mean()))
        self.logger.record("train/batch_cut_fraction", float(1.0 - batch.ended.mean()))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def dump_logs(self, iteration: int = 0) -> None:
        """
        Record the time and episode statistics (the keys of SB3's on-policy algorithms) and write the logs.

        :param iteration: number of batches played in this ``learn`` call (not recorded when 0)
        """
        assert self.ep_info_buffer is not None and self.ep_success_buffer is not None
        elapsed = max((time.time_ns() - self.start_time) / 1e9, sys.float_info.epsilon)
        if iteration > 0:
            self.logger.record("time/iterations", iteration, exclude="tensorboard")
        if self.ep_info_buffer and self.ep_info_buffer[0]:
            self.logger.record("rollout/ep_rew_mean", safe_mean([info["r"] for info in self.ep_info_buffer]))
            self.logger.record("rollout/ep_len_mean", safe_mean([info["l"] for info in self.ep_info_buffer]))
        if self.ep_success_buffer:
            self.logger.record("rollout/success_rate", safe_mean(self.ep_success_buffer))
        self.logger.record("time/fps", int((self.num_timesteps - self._num_timesteps_at_start) / elapsed))
        self.logger.record("time/time_elapsed", int(elapsed), exclude="tensorboard")
        self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        self.logger.dump(step=self.num_timesteps)

    def learn(
        self: SelfReinforce,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int | None = 1,
        tb_log_name: str = "Reinforce",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfReinforce:
        """
        Train for at least ``total_timesteps`` env steps (whole batches): play a batch, write the logs every
        ``log_interval`` batches, take one training step, until ``total_timesteps`` env steps are reached.

        :param total_timesteps: env steps to train for
        :param callback: callback(s) called at every vectorised step and at the start and end of each batch
        :param log_interval: write the logs every this many batches (``None``: never)
        :param tb_log_name: the name of the TensorBoard run
        :param reset_num_timesteps: whether to reset the current timestep count
        :param progress_bar: display a progress bar
        :return: the trained model
        """
        check_budget(total_timesteps)
        total_timesteps, callback = self._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        self._check_synchronized_groups()
        callback.on_training_start(locals(), globals())
        assert self.env is not None
        n_batches = 0
        while self.num_timesteps < total_timesteps and self.collect_rollouts(self.env, callback):
            n_batches += 1
            self._update_current_progress_remaining(self.num_timesteps, total_timesteps)
            if log_interval is not None and n_batches % log_interval == 0:
                self.dump_logs(n_batches)
            self.train()
        callback.on_training_end()
        return self

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_batch", "_synchronized"]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        # The optimizer's state too: a loaded model continues with the same Adam moments.
        return ["policy", "policy.optimizer"], []


def _check_coefficient(name: str, value: Any, positive: bool, schedule: bool, where: str = "") -> None:
    """
    :param name: the hyperparameter's name (for the message)
    :param value: its value
    :param positive: whether it must be > 0 (else >= 0)
    :param schedule: whether a callable (a schedule) is accepted
    :param where: said after the allowed values (e.g. which value of a schedule this is)
    :raises ValueError: naming the hyperparameter unless ``value`` is a finite float in range (or an accepted schedule)
    """
    in_range = is_real(value) and (value > 0 if positive else value >= 0)
    allowed = f"a finite float {'>' if positive else '>='} 0{' or a schedule' if schedule else ''}{where}"
    check(in_range or (schedule and callable(value)), name, value, allowed)


def _check_base_arguments(verbose: Any, seed: Any, stats_window_size: Any) -> None:
    """
    Check the arguments handed to SB3's ``BaseAlgorithm`` (which uses them without a check).

    :raises ValueError: naming the first invalid argument
    """
    check(is_int(verbose) and verbose >= 0, "verbose", verbose, "an integer >= 0")
    check(seed is None or (is_int(seed) and 0 <= seed < 2**32), "seed", seed, "None or an integer in [0, 2**32)")
    check(is_int(stats_window_size) and stats_window_size >= 1, "stats_window_size", stats_window_size, "an integer >= 1")
