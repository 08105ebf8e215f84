"""Path Consistency Learning (Nachum et al., 2017) as a Stable-Baselines3 algorithm."""

import copy
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule

from sb3_pcl.common.actions import no_distribution_checks
from sb3_pcl.common.consistency import Consistency, path_consistency, pcl_policy_loss, pcl_value_loss
from sb3_pcl.common.dict_obs import cat_obs, merge_leading
from sb3_pcl.common.path_buffer import PathBatch, PathReplayBuffer, refuse_retired_settings
from sb3_pcl.common.schedules import ProgressWithinBudget, parse_schedule
from sb3_pcl.common.statistics import on_host
from sb3_pcl.common.validation import (
    ObservationSpaceChecks,
    check,
    check_finite_update,
    check_policy_class,
    check_policy_observation_space,
    check_saved_by,
    is_real,
)
from sb3_pcl.pcl.actor import PCLActor
from sb3_pcl.pcl.batch_passes import BatchPasses
from sb3_pcl.pcl.collection import PathCollection
from sb3_pcl.pcl.hyperparameters import build_update_options, check_hyperparameters
from sb3_pcl.pcl.policies import (
    CnnPolicy,
    MlpPolicy,
    MultiInputPolicy,
    UnifiedMultiInputPolicy,
    UnifiedPolicy,
    UnifiedValue,
    distribution_and_values,
    fused_adam,
)
from sb3_pcl.pcl.replay import ReplayAccess
from sb3_pcl.pcl.update_statistics import update_statistics

if TYPE_CHECKING:  # the original code's update options: imported when chosen (build_update_options)
    from sb3_pcl.pcl.policy_steps import PolicyStep
    from sb3_pcl.pcl.value_fits import ValueFit

SelfPCL = TypeVar("SelfPCL", bound="PCL")


class PCL(ObservationSpaceChecks, ProgressWithinBudget, BatchPasses, ReplayAccess, PathCollection):
    """
    Path Consistency Learning (PCL).

    Paper: "Bridging the Gap Between Value and Policy Based Reinforcement Learning",
    Nachum, Norouzi, Xu, Schuurmans (2017), https://arxiv.org/abs/1702.08892

    PCL learns a policy and a value function that satisfy the soft path consistency
    ``V(s_t) = gamma^d V(s_{t+d}) + sum_i gamma^i (r_{t+i} - ent_coef log pi(a_{t+i}|s_{t+i}))`` on
    any path, on-policy or not (``ent_coef`` is the paper's ``tau``). SB3's
    :class:`~stable_baselines3.common.off_policy_algorithm.OffPolicyAlgorithm` collects the steps; PCL adds an
    episode-aware replay (:class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`) whose time-major path segments feed
    the consistency loss (:mod:`sb3_pcl.common.consistency`), and a lagged target network. By default the value is
    fitted jointly with the policy and both move in one step of the policy's optimiser; the original code's other
    options, separate value fits (:mod:`sb3_pcl.pcl.value_fits`) and a trust-region step
    (:mod:`sb3_pcl.pcl.policy_steps`), are chosen by one argument each. Recurrent policies: :class:`~sb3_pcl.RecurrentPCL`.

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``UnifiedMlpPolicy`` (Unified PCL: Discrete or
        MultiDiscrete actions, one network whose action logits also give the value) or an ActorCriticPolicy subclass)
    :param env: the environment to learn from (if registered in Gym, can be str)
    :param learning_rate: learning rate of the policy's optimiser, constant or a schedule of the remaining progress of
        the ``learn`` call (SB3's meaning: a schedule restarts with every call, so train in one call or use a constant)
    :param buffer_size: replay capacity in transitions (a small replay of recent paths learns
        faster and more stably than one holding the whole run)
    :param learning_starts: env steps before learning starts, acted by uniformly random actions (or by the policy, with
        ``use_policy_at_warmup``)
    :param batch_size: number of path segments per replay batch
    :param rollout: consistency window length ``d``
    :param gamma: discount factor
    :param ent_coef: entropy regularisation coefficient (the paper's ``tau``), a float or a schedule of the remaining
        progress, callable or string (``"lin_0.1"``, ``"lin_0.1_0.01"``, ``"exp_0.1_0.001"``:
        :func:`~sb3_pcl.common.schedules.parse_schedule`)
    :param train_freq: collect this many steps (per env) between training iterations, or a tuple ``(n, "step"|"episode")``
    :param gradient_steps: replay batches per training iteration (-1: as many as env steps collected; 0 with
        ``use_online_batch``: train on the online batch only, on-policy)
    :param max_segment_length: maximal length of a sampled segment (``None``: whole paths)
    :param vf_coef: weight of the value surrogate in the loss of a joint value fit
    :param clip_adv: clip the consistency residual used as gradient weight to ``[-clip_adv, clip_adv]`` (``None``: no clipping)
    :param max_grad_norm: clip the global gradient norm of the gradient step (``None``: no clipping)
    :param target_network_lag: polyak coefficient of the target network, updated once per
        training iteration: ``target <- lag * target + (1 - lag) * online`` (SB3's ``tau`` is ``1 - lag``)
    :param sample_from: act with the ``"online"`` or the lagged ``"target"`` policy while collecting
    :param use_online_batch: also train on the segments collected in the last iteration
    :param value_fit: ``"joint"``, ``"grad"``, ``"best_fit"`` or ``"lbfgs"`` (:mod:`sb3_pcl.pcl.value_fits`)
    :param value_fit_kwargs: settings of the value fit (e.g. ``{"learning_rate": 1e-3, "gradient_steps": 5, "mix": 1.0}``
        for ``"grad"``)
    :param policy_step: ``"gradient"`` (one step of the policy's optimiser) or ``"trust_region"``
        (:mod:`sb3_pcl.pcl.policy_steps`)
    :param policy_step_kwargs: settings of the policy step (e.g. ``{"target_kl": 0.01, "loss": "consistency"}`` for
        ``"trust_region"``)
    :param relative_entropy_coef: ``lambda``, the weight of ``log pi - log pi_target`` in the
        consistency (0 for PCL; Trust-PCL sets and adapts it)
    :param start_windows: add the ``d - 1`` shorter windows that start at the first state of each segment (the
        original code's behaviour)
    :param use_target_values: bootstrap the far end of the windows, ``V(s_{t+k})`` and the final value
        ``V(s_L)``, from the lagged target value network instead of the online one (``V(s_t)`` stays online)
    :param clip_actions: clip the sampled ``Box`` actions of a non-squashing policy to the action space before they
        reach the env (SB3's behaviour). ``False`` sends them as sampled, as the original code did: the env then sees
        (and, in the MuJoCo tasks, charges its control cost on) the action whose log-probability the consistency
        uses. ``predict`` clips either way, as in SB3
    :param use_policy_at_warmup: act with the policy instead of uniformly random actions before ``learning_starts``
        (the original code acted with its initial policy from the first step)
    :param min_batch_transitions: redraw a replay batch with ``1.2`` times as many segments until it holds at least
        this many transitions (the original code's ``batch_by_steps``: 64 segments of up to 10 steps redrawn until they
        hold 640); ``None``: ``batch_size`` segments, whatever their length
    :param use_sde: explore with SB3's generalised state-dependent noise (gSDE, ``Box`` actions only); with
        ``policy_kwargs=dict(squash_output=True)`` the samples are squashed by ``tanh`` into the action bounds. The
        consistency reads ``log pi`` of that distribution, so it stays exact whatever noise matrix drew the action
    :param sde_sample_freq: with ``use_sde``, draw a new noise matrix every this many env steps (``-1``: only at the
        start of each collection of ``train_freq`` steps)
    :param action_noise: must be ``None``: the algorithm explores by sampling its stochastic policy (SB3's action
        noise is for deterministic policies such as TD3's); anything else raises ``ValueError``
    :param replay_buffer_class: replay buffer class (a ``PathReplayBuffer`` subclass)
    :param replay_buffer_kwargs: keyword arguments of the replay buffer: ``alpha`` (sharpness of the prioritised
        path sampling, 0: uniform), ``priority`` (``"step"``: recency, or ``"return"``), ``eviction`` (``"fifo"``,
        ``"rand"`` or ``"rank"``), ``distinct_paths``, ...
    :param stats_window_size: window size for the rollout logging
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments passed to the policy on creation
    :param verbose: 0 no output, 1 info, 2 debug
    :param seed: seed for the pseudo random generators
    :param device: PyTorch device
    :param _init_setup_model: whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "UnifiedMlpPolicy": UnifiedPolicy,
        "MultiInputPolicy": MultiInputPolicy,
        "UnifiedMultiInputPolicy": UnifiedMultiInputPolicy,
    }
    supports_dict_observations = True
    policy: ActorCriticPolicy
    policy_target: ActorCriticPolicy
    replay_buffer: PathReplayBuffer  # type: ignore[assignment]
    #: the acting network (SB3's name): samples the actions of ``policy`` or ``policy_target`` (``sample_from``)
    actor: PCLActor
    #: the separate value fit (``None``: the value is fitted jointly, by the policy step, in :meth:`train`)
    _value_fit: "ValueFit | None"
    #: the policy step other than the default gradient step (``None``: the gradient step, taken in :meth:`train`)
    _policy_step: "PolicyStep | None"

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-3,
        buffer_size: int = 20_000,
        learning_starts: int = 1_000,
        batch_size: int = 32,
        rollout: int = 10,
        gamma: float = 0.99,
        ent_coef: float | Schedule | str = 0.01,
        train_freq: int | tuple[int, str] = 32,
        gradient_steps: int = 1,
        max_segment_length: int | None = 32,
        vf_coef: float = 0.5,
        clip_adv: float | None = None,
        max_grad_norm: float | None = 10.0,
        target_network_lag: float = 0.95,
        sample_from: str = "online",
        use_online_batch: bool = False,
        value_fit: str = "joint",
        value_fit_kwargs: dict[str, Any] | None = None,
        policy_step: str = "gradient",
        policy_step_kwargs: dict[str, Any] | None = None,
        relative_entropy_coef: float = 0.0,
        start_windows: bool = True,
        use_target_values: bool = False,
        clip_actions: bool = True,
        use_policy_at_warmup: bool = False,
        min_batch_transitions: int | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        action_noise: None = None,
        replay_buffer_class: type[PathReplayBuffer] | None = None,
        replay_buffer_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
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
        lag_ok = is_real(target_network_lag) and 0.0 <= target_network_lag <= 1.0  # SB3's tau is 1 - lag
        check(lag_ok, "target_network_lag", target_network_lag, "in [0, 1]")
        refuse_retired_settings(replay_buffer_kwargs)
        super().__init__(
            policy,
            env,
            learning_rate,
            buffer_size=buffer_size,
            learning_starts=learning_starts,
            batch_size=batch_size,
            tau=1.0 - target_network_lag,
            gamma=gamma,
            train_freq=train_freq,
            gradient_steps=gradient_steps,
            replay_buffer_class=replay_buffer_class,  # type: ignore[arg-type]
            replay_buffer_kwargs=replay_buffer_kwargs,
            policy_kwargs=policy_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            verbose=verbose,
            device=device,
            seed=seed,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            sde_support=True,
            support_multi_env=True,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
        )
        self.ent_coef = parse_schedule("ent_coef", ent_coef)
        self.rollout = rollout
        self.max_segment_length = max_segment_length
        self.vf_coef = vf_coef
        self.clip_adv = clip_adv
        self.max_grad_norm = max_grad_norm
        self.target_network_lag = target_network_lag
        self.sample_from = sample_from
        self.use_online_batch = use_online_batch
        self.value_fit = value_fit
        self.value_fit_kwargs = value_fit_kwargs
        self.policy_step = policy_step
        self.policy_step_kwargs = policy_step_kwargs
        self.relative_entropy_coef = relative_entropy_coef
        self.start_windows = start_windows
        self.use_target_values = use_target_values
        self.clip_actions = clip_actions
        self.use_policy_at_warmup = use_policy_at_warmup
        self.min_batch_transitions = min_batch_transitions
        self._steps_since_train = 0
        self._saved_by = type(self).__name__
        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ setup
    def _check_hyperparameters(self) -> None:
        """Raise a ``ValueError`` naming the first invalid hyperparameter (called at construction and at load)."""
        check_hyperparameters(self)

    def _setup_model(self) -> None:
        check_saved_by(self)
        check_policy_class(type(self).__name__, self.policy_class, self.policy_aliases)
        check_policy_observation_space(type(self).__name__, self.policy_class, self.observation_space)
        self._check_hyperparameters()  # also the values of a loaded model
        self._configure_replay_buffer()
        # fused Adam is chosen for this run's device: the policies are built with it, but the model keeps (and saves)
        # the policy_kwargs as given, so a saved model asks for nothing its next device may lack
        given_policy_kwargs = self.policy_kwargs
        self.policy_kwargs = fused_adam(given_policy_kwargs, self.device)
        try:
            super()._setup_model()
            self.policy_target = self.policy_class(  # type: ignore[assignment]
                self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
            ).to(self.device)
        finally:
            self.policy_kwargs = given_policy_kwargs
        self.ent_coef_schedule = FloatSchedule(self.ent_coef)
        self.policy_target.load_state_dict(self.policy.state_dict())
        self.policy_target.set_training_mode(False)
        self.policy_target.requires_grad_(False)
        self.actor = PCLActor(self.policy, self.policy_target)
        self._polyak_params: tuple[list[th.Tensor], list[th.Tensor]] = (
            list(self.policy.parameters()),
            list(self.policy_target.parameters()),
        )
        self._value_fit, self._policy_step = build_update_options(self)
        if self._value_fit is not None:  # it takes the value parameters out of the policy's optimiser
            self._value_fit.setup(self)
        if self._policy_step is not None:
            self._policy_step.setup(self)
        self._setup_batch_caches()

    @property
    def supports_separate_value(self) -> bool:
        """:return: whether the policy's value has parameters of its own (not so for Unified PCL's policies)"""
        return not isinstance(self.policy, UnifiedValue)

    # ------------------------------------------------------------------ learning
    def _prepare_actions(self, actions: th.Tensor) -> th.Tensor:
        if isinstance(self.action_space, spaces.Discrete):
            return actions[..., 0].long()
        if isinstance(self.action_space, spaces.MultiDiscrete):
            return actions.long()
        return actions

    def _evaluate(self, policy: ActorCriticPolicy, batch: PathBatch) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]:
        """
        :param policy: the online or the target policy
        :param batch: the path segments
        :return: values ``(T, B)``, log-probabilities ``(T, B)``, final values ``(B,)`` (zero when terminated) and the
            action distribution of the ``T * B`` steps, flattened time-major like the batch
        """
        n_steps, n_paths = batch.mask.shape
        n_rows = n_steps * n_paths
        obs = merge_leading(batch.observations, n_rows)
        actions = self._prepare_actions(batch.actions.reshape(n_rows, -1))
        # one pass over the T * B steps and the B final states
        distribution, all_values = distribution_and_values(policy, cat_obs(obs, batch.final_observations), n_rows)
        log_prob = distribution.log_prob(actions).reshape(n_steps, n_paths)
        values = all_values[:n_rows].reshape(n_steps, n_paths)
        final_values = all_values[n_rows:].reshape(n_paths) * (1.0 - batch.terminated)
        return values, log_prob, final_values, distribution

    def _consistency(
        self, batch: PathBatch, values: th.Tensor, log_prob: th.Tensor, final_values: th.Tensor, ent_coef: float
    ) -> Consistency:
        """
        :param batch: the path segments
        :param values: online ``V(s_t)`` ``(T, B)``
        :param log_prob: online ``log pi(a_t|s_t)`` ``(T, B)``
        :param final_values: online ``V(s_L)`` ``(B,)``, zero for terminated segments
        :param ent_coef: current entropy coefficient
        :return: the consistency residuals; the target network (no gradient) provides ``log pi'``
            when ``relative_entropy_coef > 0`` and, with ``use_target_values``, the far-end values
        """
        target_log_prob = far_values = None
        if self.relative_entropy_coef > 0 or self.use_target_values:
            target_values, target_log_prob, target_final_values, _ = self._target_evaluation(batch)
            if self.use_target_values:
                far_values, final_values = target_values, target_final_values
        return path_consistency(
            batch.rewards,
            log_prob,
            values,
            final_values,
            batch.mask,
            gamma=self.gamma,
            rollout=self.rollout,
            ent_coef=ent_coef,
            target_log_probs=target_log_prob,
            relative_entropy_coef=self.relative_entropy_coef,
            start_windows=self.start_windows,
            far_values=far_values,
        )

    def _before_training_iteration(self) -> None:
        """Hook run once per training iteration, before the gradient steps (Trust-PCL adapts lambda here)."""

    def _training_batches(self, gradient_steps: int, batch_size: int) -> Iterator[PathBatch]:
        """
        :param gradient_steps: number of replay batches
        :param batch_size: segments per replay batch
        :return: the iteration's batches: with ``use_online_batch`` first the segments collected since the last
            iteration (:meth:`~sb3_pcl.common.path_buffer.PathReplayBuffer.recent_segments`), then the replay batches
            (each redrawn larger until it holds ``min_batch_transitions`` transitions, when set)
        """
        if self.use_online_batch and self._steps_since_train > 0:
            online = self.replay_buffer.recent_segments(self._steps_since_train, env=self._vec_normalize_env)
            if online is not None:
                yield online
        self._steps_since_train = 0
        for _ in range(gradient_steps):
            batch = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
            n_segments = batch_size
            # the original code's batch_by_steps: 1.2 times more segments until the batch holds enough transitions;
            # a draw of fewer segments than asked (distinct_paths: every path drawn) cannot grow
            while (
                self.min_batch_transitions is not None
                and batch.mask.sum().item() < self.min_batch_transitions
                and batch.mask.shape[1] == n_segments
            ):
                n_segments = max(n_segments + 1, int(n_segments * 1.2))
                batch = self.replay_buffer.sample(n_segments, env=self._vec_normalize_env)
            yield batch

    def train(self, gradient_steps: int, batch_size: int = 32) -> None:
        """
        One training iteration, as SAC's ``train``: the target network's polyak update, then one update per batch
        (:meth:`_training_batches`): evaluate the segments, their path consistency, the losses, the policy step, and a
        separate value fit if one is chosen; then the logs.

        The default policy step is one step of the policy's optimiser on ``policy_loss + vf_coef * value_loss`` (the
        value fitted jointly), the gradient norm clipped to ``max_grad_norm``. The original code's options, chosen by
        ``policy_step`` and ``value_fit``, live in :mod:`sb3_pcl.pcl.policy_steps` and :mod:`sb3_pcl.pcl.value_fits`.

        :param gradient_steps: number of replay batches
        :param batch_size: segments per replay batch
        """
        self.policy.set_training_mode(True)
        learning_rate = self.lr_schedule(self._current_progress_remaining)  # a linear decay ends at 0
        check(is_real(learning_rate) and learning_rate >= 0, "learning_rate", learning_rate, "finite and >= 0 in its schedule")
        self._update_learning_rate([self.policy.optimizer])
        ent_coef = self.ent_coef_schedule(self._current_progress_remaining)
        check(is_real(ent_coef) and ent_coef >= 0, "ent_coef", ent_coef, "a finite value >= 0 at every point of its schedule")
        # the target network: SB3's polyak_update with tau = 1 - target_network_lag (the same arithmetic, two foreach ops)
        params, target_params = self._polyak_params
        tau = 1.0 - self.target_network_lag
        with th.no_grad():
            th._foreach_mul_(target_params, 1 - tau)
            th._foreach_add_(target_params, params, alpha=tau)
        self._before_training_iteration()
        if isinstance(self.policy, UnifiedValue):  # V(s) = (ent_coef + lambda) * sum_k logsumexp(logits_k)
            self.policy.temperature = self.policy_target.temperature = ent_coef + self.relative_entropy_coef  # type: ignore[assignment]

        stats: dict[str, list[float | th.Tensor]] = {}
        batch: PathBatch | None = None
        n_updates = 0
        self._clear_batch_caches(keep=True)
        try:
            with no_distribution_checks():  # each check waits for a GPU; the finite checks of the updates stand instead
                for batch in self._training_batches(gradient_steps, batch_size):
                    values, log_prob, final_values, distribution = self._evaluate(self.policy, batch)
                    # the policy reuses its distribution object (a trust-region step re-evaluates it): keep this one
                    distribution = copy.copy(distribution)
                    consistency = self._consistency(batch, values, log_prob, final_values, ent_coef)
                    policy_loss = pcl_policy_loss(consistency, self.clip_adv)
                    value_loss = pcl_value_loss(consistency, self.clip_adv)
                    step_stats: dict[str, float | th.Tensor]
                    if self._policy_step is None:  # one step of the policy's optimiser, the gradient norm clipped
                        loss = policy_loss + self.vf_coef * value_loss if self._value_fit is None else policy_loss
                        self.policy.optimizer.zero_grad()
                        loss.backward()
                        max_norm = self.max_grad_norm if self.max_grad_norm is not None else float("inf")
                        grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)
                        check_finite_update(type(self).__name__, "policy step", loss, grad_norm)
                        self.policy.optimizer.step()
                        step_stats = {"grad_norm": grad_norm.detach()}
                    else:  # the original code's natural-gradient trust-region step (a separate value fit follows)
                        step_stats = self._policy_step.step(batch, policy_loss, consistency, ent_coef)
                    update = update_statistics(batch, values, consistency, distribution, policy_loss, value_loss, step_stats)
                    if self._value_fit is not None:  # the original code's separate value fit, after the policy step
                        if self._values_survive_policy_step:  # the step left them: the fit reads them (batch_passes)
                            self._values_cache = (batch, values.detach(), final_values.detach())
                        update["value_fit_loss"] = self._value_fit.fit(batch, ent_coef)
                        self._values_cache = None
                    for key, value in update.items():
                        stats.setdefault(key, []).append(value)
                    n_updates += 1
            self._n_updates += n_updates
            if batch is not None and self._uses_target_policy():  # from the last update's passes, while they are kept
                stats["kl_to_target"] = [self._kl_to_target(batch, distribution)]
            for key, values_of_key in on_host(stats).items():
                self.logger.record(f"train/{key}", float(np.mean(values_of_key)))
            self.logger.record("train/ent_coef", ent_coef)
            self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
            self.logger.record("train/buffer_size", self.replay_buffer.size())
            self.logger.record("train/buffer_paths", self.replay_buffer.n_paths)
            self.logger.record("train/seeded_paths", self.replay_buffer.n_seeded_paths)
        finally:
            self._clear_batch_caches()

    def _uses_target_policy(self) -> bool:
        """:return: whether acting or learning depends on the target network (then ``train/kl_to_target`` is logged)"""
        return self.relative_entropy_coef > 0 or self.sample_from == "target" or self.use_target_values

    def learn(
        self: SelfPCL,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: str = "PCL",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfPCL:
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)

    # ------------------------------------------------------------------ saving
    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "actor", "policy_target", "_polyak_params", "_value_fit", "_policy_step"]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts = ["policy", "policy.optimizer", "policy_target"]
        if self._value_fit is not None and self._value_fit.optimizer is not None:  # state between batches ("grad")
            state_dicts.append("_value_fit.optimizer")
        return state_dicts, []
