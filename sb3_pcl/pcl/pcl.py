"""Path Consistency Learning (Nachum et al., 2017) as a Stable-Baselines3 algorithm."""

import copy
import io
import pathlib
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, RolloutReturn, Schedule
from stable_baselines3.common.utils import FloatSchedule, LinearSchedule, polyak_update

from sb3_pcl.common.actions import no_distribution_checks, to_env_actions
from sb3_pcl.common.demonstrations import DemonstrationSource, seed_replay
from sb3_pcl.common.dict_obs import cat_obs, map_obs, merge_leading
from sb3_pcl.common.path_buffer import (
    PathBatch,
    PathReplayBuffer,
    load_replay_file,
    refuse_retired_settings,
    save_replay_file,
    without_retired_settings,
)
from sb3_pcl.common.schedules import parse_schedule
from sb3_pcl.common.statistics import explained_variance_tensor, masked_mean, on_host, state_kl
from sb3_pcl.common.validation import (
    build_part,
    check,
    check_budget,
    check_env_outputs,
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
from sb3_pcl.pcl import value_fits
from sb3_pcl.pcl.actor import SAMPLE_FROM, PCLActor
from sb3_pcl.pcl.consistency import (
    Consistency,
    consistency_loss,
    path_consistency,
    pcl_policy_loss,
    pcl_value_loss,
    value_targets,
)
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
from sb3_pcl.pcl.trust_region import TrustRegion, squared_consistency_objective, trust_region_step

SelfPCL = TypeVar("SelfPCL", bound="PCL")

#: the default learning rate: linear from 3e-3 at the start of each ``learn`` call to 0 at its end (the rule that chose
#: it and its 10 seeds x 30 episodes per thread setting: benchmarks/results/defaults_study/)
DEFAULT_LEARNING_RATE = LinearSchedule(3e-3, 0.0, 1.0)
#: what to check when the env returns a value the algorithm cannot use
ENV_OUTPUT_HINT = "Check the environment (SB3's VecCheckNan wrapper raises at the step that produces the value)."


class TargetPass(NamedTuple):
    """The target network's pass over a batch, as :meth:`PCL._evaluate` returns it (the values only with
    ``use_target_values``)."""

    values: th.Tensor | None
    log_prob: th.Tensor
    final_values: th.Tensor | None
    distribution: Any


class PCL(OffPolicyAlgorithm):
    """
    Path Consistency Learning (PCL).

    Paper: "Bridging the Gap Between Value and Policy Based Reinforcement Learning",
    Nachum, Norouzi, Xu, Schuurmans (2017), https://arxiv.org/abs/1702.08892

    PCL learns a policy and a value function that satisfy the soft path consistency
    ``V(s_t) = gamma^d V(s_{t+d}) + sum_i gamma^i (r_{t+i} - ent_coef log pi(a_{t+i}|s_{t+i}))`` on
    any path, on-policy or not (``ent_coef`` is the paper's ``tau``), from the time-major path segments of an
    episode-aware replay (:class:`~sb3_pcl.common.path_buffer.PathReplayBuffer`) and a lagged target network.
    Recurrent policies: :class:`~sb3_pcl.RecurrentPCL`.

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``UnifiedMlpPolicy`` (Unified PCL: Discrete or
        MultiDiscrete actions, one network whose action logits also give the value) or an ActorCriticPolicy subclass)
    :param env: the environment to learn from (if registered in Gym, can be str)
    :param learning_rate: learning rate of the policy's optimiser, constant or a schedule of the remaining progress of
        the ``learn`` call (SB3's meaning: a schedule restarts with every call, so train in one call or use a constant).
        The default decays linearly from 3e-3 to 0 over each ``learn`` call
    :param buffer_size: replay capacity in transitions (a small replay of recent paths learns
        faster and more stably than one holding the whole run)
    :param learning_starts: env steps before learning starts, acted by uniformly random actions (or by the policy, with
        ``use_policy_at_warmup``)
    :param batch_size: number of path segments per replay batch
    :param n_steps: length ``d`` of the consistency windows, the ``d``-step paths whose consistency is learned (SB3's
        word for a ``d``-step return, as in SAC's ``n_steps``; the original code's ``rollout``)
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
        (:class:`~sb3_pcl.pcl.trust_region.TrustRegion`)
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
    :param rollout: deprecated name of ``n_steps`` (a ``DeprecationWarning``; removed in the next release)
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "UnifiedMlpPolicy": UnifiedPolicy,
        "MultiInputPolicy": MultiInputPolicy,
        "UnifiedMultiInputPolicy": UnifiedMultiInputPolicy,
    }
    #: whether the class takes ``Dict`` observation spaces (``MultiInputPolicy``)
    supports_dict_observations: ClassVar[bool] = True
    policy: ActorCriticPolicy
    policy_target: ActorCriticPolicy
    replay_buffer: PathReplayBuffer  # type: ignore[assignment]
    #: the acting network (SB3's name): samples the actions of ``policy`` or ``policy_target`` (``sample_from``)
    actor: PCLActor  # type: ignore[assignment]
    #: the separate value fit's optimiser (``value_fit="grad"``; ``None`` otherwise), saved with the model
    value_optimizer: th.optim.Optimizer | None
    _value_fit_settings: value_fits.GradFit | value_fits.BestFit | value_fits.LBFGSFit | None
    _trust_region: TrustRegion | None

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = DEFAULT_LEARNING_RATE,
        buffer_size: int = 20_000,
        learning_starts: int = 1_000,
        batch_size: int = 32,
        n_steps: int = 10,
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
        rollout: int | None = None,
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
        if rollout is not None:
            warnings.warn(
                "PCL's rollout is now called n_steps: pass n_steps (rollout goes in the next release)", DeprecationWarning, 2
            )
            n_steps = rollout
        self.n_steps = n_steps
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
        #: vectorised env steps collected since the last training iteration (the online batch's)
        self._steps_since_train = 0
        self._saved_by = type(self).__name__
        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ setup
    @classmethod
    def _wrap_env(cls, env: Any, verbose: int = 0, monitor_wrapper: bool = True) -> Any:
        """SB3's wrapping, after a clear error for the spaces the algorithm does not take."""
        check_env_spaces(cls.__name__, env, cls.supports_dict_observations)
        return super()._wrap_env(env, verbose, monitor_wrapper)

    @classmethod
    def load(cls: type[SelfPCL], path: Any, *args: Any, **kwargs: Any) -> SelfPCL:  # type: ignore[override]
        """SB3's ``load``, then a ``ValueError`` naming the file and the tensors if a saved tensor is not finite."""
        model = super().load(path, *args, **kwargs)
        check_finite_parameters(model, path)
        return model

    def _get_policy_from_name(self, policy_name: str) -> type[BasePolicy]:
        """SB3's lookup, after a clear error for a policy name the class does not take."""
        policy_name = resolve_policy_name(type(self).__name__, policy_name, self.policy_aliases)
        return super()._get_policy_from_name(policy_name)

    def _check_hyperparameters(self) -> None:
        """
        Raise a ``ValueError`` naming the first invalid hyperparameter (at construction and at load: the file's
        values), then set the settings of the value fit and the trust-region step they select (``None``: the joint fit
        and the gradient step, which :meth:`train` takes itself).
        """
        check(is_int(self.n_steps) and self.n_steps >= 1, "n_steps", self.n_steps, "an integer >= 1")
        check(is_real(self.gamma) and 0.0 <= self.gamma <= 1.0, "gamma", self.gamma, "in [0, 1]")
        for name in ("learning_rate", "ent_coef"):  # >= 0: rl-zoo3's enjoy loads models with a learning rate of 0
            value = getattr(self, name)
            check(callable(value) or (is_real(value) and value >= 0), name, value, "a finite float >= 0 (or a schedule)")
        for name in ("batch_size", "buffer_size"):
            value = getattr(self, name)
            check(is_int(value) and value >= 1, name, value, "an integer >= 1")
        check(self.batch_size <= self.buffer_size, "batch_size", self.batch_size, f"<= buffer_size ({self.buffer_size})")
        check(is_int(self.learning_starts) and self.learning_starts >= 0, "learning_starts", self.learning_starts, ">= 0")
        for name in ("max_segment_length", "min_batch_transitions"):
            value = getattr(self, name)
            check(value is None or (is_int(value) and value >= 1), name, value, "None or an integer >= 1")
        check(is_int(self.gradient_steps) and self.gradient_steps >= -1, "gradient_steps", self.gradient_steps, ">= -1")
        for name in ("vf_coef", "relative_entropy_coef"):
            value = getattr(self, name)
            check(is_real(value) and value >= 0, name, value, "a finite float >= 0")
        for name in ("clip_adv", "max_grad_norm"):
            value = getattr(self, name)
            check(value is None or (is_real(value) and value > 0), name, value, "None or a finite float > 0")
        check(self.sample_from in SAMPLE_FROM, "sample_from", self.sample_from, f"one of {SAMPLE_FROM}")
        for name in ("clip_actions", "use_policy_at_warmup"):
            check(isinstance(getattr(self, name), bool), name, getattr(self, name), "True or False")
        self._value_fit_settings = self._trust_region = None
        if self.value_fit == "joint":
            check(not self.value_fit_kwargs, "value_fit_kwargs", self.value_fit_kwargs, "None or {} with value_fit='joint'")
        else:
            names = ("joint", *value_fits.VALUE_FITS)
            check(self.value_fit in names, "value_fit", self.value_fit, f"one of {names}")
            self._value_fit_settings = build_part("value_fit", value_fits.VALUE_FITS, self.value_fit, self.value_fit_kwargs)
            if isinstance(self.policy_class, type) and issubclass(self.policy_class, UnifiedValue):
                raise ValueError(
                    f"value_fit={self.value_fit!r} is not supported with {self.policy_class.__name__} (its value has no "
                    "separate parameters): use value_fit='joint'"
                )
        if self.policy_step == "gradient":
            no_kwargs = "None or {} with policy_step='gradient' (one step of the policy's optimiser has no settings)"
            check(not self.policy_step_kwargs, "policy_step_kwargs", self.policy_step_kwargs, no_kwargs)
        else:
            names = ("gradient", TrustRegion.name)
            check(self.policy_step in names, "policy_step", self.policy_step, f"one of {names}")
            self._trust_region = build_part(
                "policy_step", {TrustRegion.name: TrustRegion}, self.policy_step, self.policy_step_kwargs
            )
            self._trust_region.check_model(self.value_fit, self.ent_coef, self.relative_entropy_coef)

    def _configure_replay_buffer(self) -> None:
        """``replay_buffer_class`` defaults to ``PathReplayBuffer``; its ``max_segment_length`` to the model's."""
        if self.replay_buffer_class is None:
            self.replay_buffer_class = PathReplayBuffer  # type: ignore[assignment]
        elif not issubclass(self.replay_buffer_class, PathReplayBuffer):  # type: ignore[arg-type]
            raise ValueError(f"replay_buffer_class must be a PathReplayBuffer subclass, got {self.replay_buffer_class}")
        self.replay_buffer_kwargs = {
            "max_segment_length": self.max_segment_length,
            **without_retired_settings(self.replay_buffer_kwargs),  # a model saved by an earlier version records them
        }

    def _setup_model(self) -> None:
        if "rollout" in self.__dict__:  # a model saved before 0.3 (SB3's load restores its attributes first)
            self.n_steps = self.__dict__.pop("rollout")
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
            with warnings.catch_warnings():  # SB3 reads n_steps for its NStepReplayBuffer; the path replay takes ours
                warnings.filterwarnings("ignore", message=r"`n_steps=\d+` is ignored because a custom `replay_buffer_class`")
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
        self.value_optimizer = None
        #: whether the policy step moves parameters the values depend on (a shared feature extractor with parameters):
        #: then a separate value fit evaluates the values again after the step
        self._policy_step_moves_values = False
        fit = self._value_fit_settings
        if fit is not None:  # the value parameters leave the policy's optimiser: the fit moves them
            self._value_parameters, self._policy_parameters, self._policy_step_moves_values = value_fits.split_parameters(
                self.policy
            )
            optimizer_class: Any = self.policy.optimizer_class
            self.policy.optimizer = optimizer_class(
                self._policy_parameters, lr=self.lr_schedule(1), **self.policy.optimizer_kwargs
            )
            if isinstance(fit, value_fits.GradFit):
                self.value_optimizer = optimizer_class(
                    self._value_parameters, lr=fit.learning_rate, **self.policy.optimizer_kwargs
                )
            if isinstance(fit, value_fits.BestFit):
                value_fits.check_last_layer(self.policy)

    def _update_current_progress_remaining(self, num_timesteps: int, total_timesteps: int) -> None:
        """SB3's, stopped at 0 when the last collection overshoots the step budget, so that every schedule ends at its
        end value (rl-zoo3's ``lin_<x>`` would give a negative learning rate)."""
        self._current_progress_remaining = max(0.0, 1.0 - float(num_timesteps) / float(total_timesteps))

    # ------------------------------------------------------------------ collection
    def _sample_action(self, learning_starts: int, action_noise: Any = None, n_envs: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """
        :param learning_starts: uniformly random actions before this many steps (unless ``use_policy_at_warmup``)
        :param action_noise: unused (always ``None``)
        :param n_envs: number of envs
        :return: the env's actions and the actions as sampled by the acting policy (``sample_from``), which the replay
            stores (their log-probability is exact)
        """
        if self.num_timesteps < learning_starts and not self.use_policy_at_warmup:
            sampled = np.array([self.action_space.sample() for _ in range(n_envs)])
            # stored as the policy would have sampled it: in [-1, 1] for a squashing policy
            sampled = self.policy.scale_action(sampled) if self.policy.squash_output else sampled
        else:
            assert self._last_obs is not None
            sampled = self.actor(self._last_obs, self.sample_from).cpu().numpy()
            sampled = sampled.reshape((n_envs, *(self.action_space.shape or ())))
        return to_env_actions(self.policy, self.action_space, sampled, self.clip_actions), sampled

    def _on_step(self) -> None:
        self._steps_since_train += 1

    def _store_transition(
        self,
        replay_buffer: Any,
        buffer_action: np.ndarray,
        new_obs: np.ndarray | dict[str, np.ndarray],
        reward: np.ndarray,
        dones: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """SB3's storage, after checking the step's outputs where they enter the algorithm (the policy acts on them next)."""
        check_env_outputs(new_obs, None, "step", ENV_OUTPUT_HINT)  # the replay checks the rewards it stores
        super()._store_transition(replay_buffer, buffer_action, new_obs, reward, dones, infos)

    def collect_rollouts(self, *args: Any, **kwargs: Any) -> RolloutReturn:
        """SB3's collection; then, with ``gradient_steps=0`` and ``use_online_batch``, a training iteration on the
        online batch alone (SB3's ``learn`` trains only for ``gradient_steps > 0``), as the original code without
        replay."""
        rollout_return = super().collect_rollouts(*args, **kwargs)
        if (
            rollout_return.continue_training
            and self.gradient_steps == 0
            and self.use_online_batch
            and self.num_timesteps > self.learning_starts
        ):
            self.train(gradient_steps=0, batch_size=self.batch_size)
        return rollout_return

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        if (reset_num_timesteps or self._last_obs is None) and self.replay_buffer is not None:
            # The envs are about to be reset: the running paths end here, cut.
            self.replay_buffer.close_open_paths()
            self._steps_since_train = 0
        check_budget(total_timesteps)
        total_timesteps, callback = super()._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        check_env_outputs(self._last_obs, None, "reset", ENV_OUTPUT_HINT)  # the policy acts on them first
        if self.learning_starts >= total_timesteps and self.verbose >= 1:  # SB3 stays quiet; say it in the logs
            self.logger.warn(
                f"learning_starts={self.learning_starts} is not below the step budget ({total_timesteps} steps): "
                "this call of learn() only collects warm-up steps and never trains. Lower learning_starts or "
                "train for more steps."
            )
        return total_timesteps, callback

    # ------------------------------------------------------------------ replay
    def add_demonstrations(self, episodes: DemonstrationSource) -> int:
        """
        Seed the replay with demonstrations: paths never evicted, sampled with the top priority
        (:func:`~sb3_pcl.common.demonstrations.seed_replay`), of the env's raw observations and rewards. After ``load``,
        call this again (:class:`~sb3_pcl.common.demonstrations.DemonstrationsCallback` does it in ``learn``).

        :param episodes: episode dicts (``observations`` ``(T + 1, *obs_shape)``, ``actions``, ``rewards``,
            ``terminated``), e.g. from :func:`~sb3_pcl.common.demonstrations.record_episodes`, an episodes file, or a
            local Minari dataset (a ``minari.MinariDataset``, a dataset id or a dataset folder; never downloaded: see
            :mod:`sb3_pcl.common.minari_io`)
        :return: the number of paths added
        """
        if self.replay_buffer is None:
            raise ValueError("The model has no replay buffer yet: call add_demonstrations after _setup_model()")
        scale_action = self.policy.scale_action if self.policy.squash_output else None  # stored as the policy samples
        n_paths, n_transitions = seed_replay(
            self.replay_buffer, episodes, self.observation_space, self.action_space, scale_action
        )
        if self.verbose >= 1:
            print(f"Seeded the replay with {n_paths} demonstration paths ({n_transitions} transitions)")
        return n_paths

    def save_replay_buffer(self, path: str | pathlib.Path | io.BufferedIOBase) -> None:
        """
        Save the replay buffer to a file that cannot run code when loaded (unlike SB3's pickle): an ``.npz`` of arrays
        with JSON metadata; a path without suffix gets ``.npz`` appended (SB3 appends ``.pkl``).

        :param path: the file (a path, created with its folders if needed, or a binary file open for writing)
        """
        assert self.replay_buffer is not None, "The replay buffer is not defined"
        save_replay_file(self.replay_buffer, path, self.verbose)

    def load_replay_buffer(
        self, path: str | pathlib.Path | io.BufferedIOBase, truncate_last_traj: bool = True, allow_pickle: bool = False
    ) -> None:
        """
        Load a replay buffer saved with :meth:`save_replay_buffer`, every array and size checked before anything is
        allocated (:meth:`~sb3_pcl.common.path_buffer.PathReplayBuffer.load_npz`); it samples exactly as the saved one.
        A replay saved with a larger ``buffer_size`` than this model's is refused. Pickled buffers (SB3's format) are
        refused with a ``ValueError`` (unpickling runs the file's code) unless ``allow_pickle``.

        :param path: the file (a ``str`` or ``pathlib.Path`` that does not exist is tried with ``.npz`` appended)
        :param truncate_last_traj: unused (kept for SB3's signature)
        :param allow_pickle: also accept a pickled ``PathReplayBuffer`` (runs the file's code: trusted files only)
        """
        buffer_class = self.replay_buffer_class if self.replay_buffer_class is not None else PathReplayBuffer
        buffer = load_replay_file(
            path,
            buffer_class,  # type: ignore[arg-type]
            self.observation_space,
            self.action_space,
            device=self.device,
            allow_pickle=allow_pickle,
            verbose=self.verbose,
            max_buffer_size=self.buffer_size,
        )
        buffer.device = self.device
        self.replay_buffer = buffer

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

    # ------------------------------------------------------------------ the update
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

    def _log_prob(self, policy: ActorCriticPolicy, batch: PathBatch) -> tuple[th.Tensor, Any]:
        """:return: log-probabilities ``(T, B)`` and the action distribution of the ``T * B`` steps, as :meth:`_evaluate`
        computes them, without the values (a unified policy reads both from its logits: :meth:`_evaluate`)"""
        if isinstance(policy, UnifiedValue):
            return self._evaluate(policy, batch)[1::2]
        n_steps, n_paths = batch.mask.shape
        distribution = policy.get_distribution(merge_leading(batch.observations, n_steps * n_paths))
        actions = self._prepare_actions(batch.actions.reshape(n_steps * n_paths, -1))
        return distribution.log_prob(actions).reshape(n_steps, n_paths), distribution

    def _target_pass(self, batch: PathBatch) -> TargetPass | None:
        """
        :param batch: the path segments
        :return: the target network's pass over them, without gradient, as :meth:`_evaluate` (the distribution a copy
            the policy does not overwrite; the values ``None`` unless ``use_target_values``), or ``None`` when the
            consistency needs none (``relative_entropy_coef`` 0 and not ``use_target_values``)
        """
        if not (self.relative_entropy_coef > 0 or self.use_target_values):
            return None
        with th.no_grad():
            if self.use_target_values:
                values, log_prob, final_values, distribution = self._evaluate(self.policy_target, batch)
                return TargetPass(values, log_prob, final_values, copy.copy(distribution))
            log_prob, distribution = self._log_prob(self.policy_target, batch)
            return TargetPass(None, log_prob, None, copy.copy(distribution))

    def _consistency(
        self,
        batch: PathBatch,
        values: th.Tensor,
        log_prob: th.Tensor,
        final_values: th.Tensor,
        ent_coef: float,
        target: TargetPass | None = None,
    ) -> Consistency:
        """
        :param batch: the path segments
        :param values: online ``V(s_t)`` ``(T, B)``
        :param log_prob: online ``log pi(a_t|s_t)`` ``(T, B)``
        :param final_values: online ``V(s_L)`` ``(B,)``, zero for terminated segments
        :param ent_coef: current entropy coefficient
        :param target: the target's pass over the batch (taken here if ``None``): its ``log pi'`` and, with
            ``use_target_values``, the far-end values
        :return: the consistency residuals
        """
        far_values = target_log_prob = None
        target = target if target is not None else self._target_pass(batch)
        if target is not None:
            target_log_prob = target.log_prob
            if self.use_target_values:
                far_values, final_values = target.values, target.final_values  # type: ignore[assignment]
        return path_consistency(
            batch.rewards,
            log_prob,
            values,
            final_values,
            batch.mask,
            gamma=self.gamma,
            n_steps=self.n_steps,
            ent_coef=ent_coef,
            target_log_probs=target_log_prob,
            relative_entropy_coef=self.relative_entropy_coef,
            start_windows=self.start_windows,
            far_values=far_values,
        )

    def _before_training_iteration(self) -> None:
        """Hook run once per training iteration, before the gradient steps (Trust-PCL adapts lambda here)."""

    def train(self, gradient_steps: int, batch_size: int = 32) -> None:
        """
        One training iteration, as SAC's: the target network's polyak update, then for each batch the path
        consistency, the losses and one step of the policy's optimiser on ``policy_loss + vf_coef * value_loss``
        (the value fitted jointly) or, with ``policy_step="trust_region"``, :meth:`_trust_region_step`; with a
        ``value_fit`` other than ``"joint"``, :meth:`_fit_value` after the step.

        :param gradient_steps: number of replay batches
        :param batch_size: segments per replay batch
        """
        self.policy.set_training_mode(True)
        learning_rate = self.lr_schedule(self._current_progress_remaining)  # a linear decay ends at 0
        check(is_real(learning_rate) and learning_rate >= 0, "learning_rate", learning_rate, "finite and >= 0 in its schedule")
        self._update_learning_rate([self.policy.optimizer])
        ent_coef = self.ent_coef_schedule(self._current_progress_remaining)
        check(is_real(ent_coef) and ent_coef >= 0, "ent_coef", ent_coef, "a finite value >= 0 at every point of its schedule")
        polyak_update(self.policy.parameters(), self.policy_target.parameters(), self.tau)
        self._before_training_iteration()
        if isinstance(self.policy, UnifiedValue):  # V(s) = (ent_coef + lambda) * sum_k logsumexp(logits_k)
            self.policy.temperature = self.policy_target.temperature = ent_coef + self.relative_entropy_coef  # type: ignore[assignment]

        stats: dict[str, list[float | th.Tensor]] = {}
        batch: PathBatch | None = None
        target: TargetPass | None = None
        distribution: Any = None
        with no_distribution_checks():  # each check waits for a GPU; the finite checks of the updates stand instead
            for batch in self._training_batches(gradient_steps, batch_size):
                values, log_prob, final_values, distribution = self._evaluate(self.policy, batch)
                # the policy reuses its distribution object (a trust-region step re-evaluates it): keep this one
                distribution = copy.copy(distribution)
                target = self._target_pass(batch)  # taken once: the step and the value fit read it too
                consistency = self._consistency(batch, values, log_prob, final_values, ent_coef, target)
                policy_loss = pcl_policy_loss(consistency, self.clip_adv)
                value_loss = pcl_value_loss(consistency, self.clip_adv)
                step_stats: dict[str, float | th.Tensor]
                if self._trust_region is None:  # one step of the policy's optimiser, the gradient norm clipped
                    loss = policy_loss + self.vf_coef * value_loss if self._value_fit_settings is None else policy_loss
                    self.policy.optimizer.zero_grad()
                    loss.backward()
                    max_norm = self.max_grad_norm if self.max_grad_norm is not None else float("inf")
                    grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)
                    check_finite_update(type(self).__name__, "policy step", loss, grad_norm)
                    self.policy.optimizer.step()
                    step_stats = {"grad_norm": grad_norm.detach()}
                else:  # the original code's natural-gradient trust-region step (a separate value fit follows)
                    step_stats = self._trust_region_step(batch, consistency, ent_coef, target)
                with th.no_grad():  # kept on the device (0-d tensors), moved to the host once per iteration
                    entropy = distribution.entropy()
                    if entropy is None:  # no closed form (tanh-squashed gSDE): a one-sample estimate at each state
                        entropy = -distribution.log_prob(distribution.sample())
                    n_valid = consistency.mask.sum().double()
                    residual = consistency.residual.detach()
                    update = {
                        "consistency_loss": consistency_loss(consistency),
                        "mean_sq_consistency": (residual**2).sum().double() / n_valid,
                        "mean_abs_consistency": residual.abs().sum().double() / n_valid,
                        "policy_loss": policy_loss.detach(),
                        "value_loss": value_loss.detach(),
                        "entropy": masked_mean(entropy, batch.mask.reshape(-1).bool()),
                        **step_stats,
                        "explained_variance": explained_variance_tensor(
                            values.detach(), value_targets(consistency), batch.mask
                        ),
                    }
                if self._value_fit_settings is not None:  # the original code's separate value fit, after the step
                    update["value_fit_loss"] = self._fit_value(batch, values, final_values, ent_coef, target)
                for key, value in update.items():
                    stats.setdefault(key, []).append(value)
                self._n_updates += 1
        if batch is not None and self._uses_target_policy():
            stats["kl_to_target"] = [self._kl_to_target(batch, distribution, target)]
        for key, values_of_key in on_host(stats).items():
            self.logger.record(f"train/{key}", float(np.mean(values_of_key)))
        self.logger.record("train/ent_coef", ent_coef)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/buffer_size", self.replay_buffer.size())
        self.logger.record("train/buffer_paths", self.replay_buffer.n_paths)
        self.logger.record("train/seeded_paths", self.replay_buffer.n_seeded_paths)

    def _trust_region_step(
        self, batch: PathBatch, consistency: Consistency, ent_coef: float, target: TargetPass | None
    ) -> dict[str, float | th.Tensor]:
        """
        The original code's ``trust_region_p``: one natural-gradient step of the policy parameters (the value's are
        left to the separate fit) within ``KL(pi_old || pi) <= target_kl`` over the batch's valid states, then a
        backtracking line search (:func:`~sb3_pcl.pcl.trust_region.trust_region_step`) on the squared consistency or
        the surrogate with ``C`` held at its old value (``policy_step_kwargs["loss"]``).

        :param batch: the path segments
        :param consistency: their consistency before the step
        :param ent_coef: current entropy coefficient
        :param target: the target's pass over the batch
        :return: the step's statistics
        """
        settings = self._trust_region
        assert settings is not None
        valid_obs = self._valid_observations(batch)
        with th.no_grad():  # pi_old, a constant; copied because the policy reuses its distribution object
            old_distribution = copy.copy(self.policy.get_distribution(valid_obs))
        old_residual = consistency.residual.detach()

        def loss_fn() -> th.Tensor:
            values, log_prob, final_values, _ = self._evaluate(self.policy, batch)
            current = self._consistency(batch, values, log_prob, final_values, ent_coef, target)
            if settings.loss == "consistency":
                return squared_consistency_objective(current, self.clip_adv)
            return pcl_policy_loss(current._replace(residual=old_residual), self.clip_adv)

        def kl_fn() -> th.Tensor:
            return state_kl(old_distribution, self.policy.get_distribution(valid_obs)).mean()

        result = trust_region_step(
            loss_fn,
            kl_fn,
            self._policy_parameters,
            max_kl=settings.target_kl,
            cg_max_steps=settings.cg_max_steps,
            cg_damping=settings.cg_damping,
            line_search_max_iter=settings.line_search_max_iter,
            line_search_shrinking_factor=settings.line_search_shrinking_factor,
        )
        # trust_region_step leaves the parameters unchanged on a non-finite loss or gradient: say so
        check_finite_update(type(self).__name__, "trust-region step", th.tensor(result.loss_before), result.grad_norm)
        if not result.accepted and self.verbose >= 2:
            print(f"{type(self).__name__} trust region: no step accepted after {result.n_trials} trials, policy unchanged")
        return {
            "grad_norm": result.grad_norm,
            "kl": result.kl,
            "line_search_success": float(result.accepted),
            "step_size": result.step_size,
            "step_norm": result.step_norm,
            "line_search_trials": float(result.n_trials),
            "trust_region_improvement": result.loss_before - result.loss_after,
        }

    def _fit_value(
        self, batch: PathBatch, values: th.Tensor, final_values: th.Tensor, ent_coef: float, target: TargetPass | None
    ) -> float | th.Tensor:
        """
        The original code's separate value fit, after the policy step: regress ``V`` toward
        ``mix * (V(s_t) + C(t)) + (1 - mix) * V_old(s_t)``, the consistency taken at the stepped policy
        (:mod:`sb3_pcl.pcl.value_fits`).

        :param batch: the path segments
        :param values: ``V(s_t)`` of the update's pass (evaluated again if the step moved parameters they depend on)
        :param final_values: ``V(s_L)`` of that pass
        :param ent_coef: current entropy coefficient
        :param target: the target's pass over the batch
        :return: the fit's regression loss
        """
        fit = self._value_fit_settings
        assert fit is not None
        with th.no_grad():
            if self._policy_step_moves_values:
                values, log_prob, final_values, _ = self._evaluate(self.policy, batch)
            else:
                log_prob = self._log_prob(self.policy, batch)[0]
            consistency = self._consistency(batch, values.detach(), log_prob, final_values.detach(), ent_coef, target)
            intended = fit.mix * value_targets(consistency) + (1.0 - fit.mix) * values.detach()
        obs = merge_leading(batch.observations, batch.mask.numel())
        name = type(self).__name__
        if isinstance(fit, value_fits.GradFit):
            assert self.value_optimizer is not None
            return value_fits.fit_by_gradient(
                self.policy, self.value_optimizer, self._value_parameters, obs, intended, batch.mask, fit.gradient_steps, name
            )
        if isinstance(fit, value_fits.BestFit):
            return value_fits.fit_last_layer(self.policy, obs, intended, batch.mask, fit.reg_coef, name, self.verbose)
        return value_fits.fit_by_lbfgs(self.policy, self._value_parameters, obs, intended, batch.mask, fit.max_iter, name)

    @staticmethod
    def _valid_observations(batch: PathBatch) -> Any:
        """:return: the observations of the batch's valid (unpadded) steps, flattened to ``(n_valid, *obs_shape)``"""
        valid = batch.mask.reshape(-1).bool()
        return map_obs(lambda obs: obs.reshape(-1, *obs.shape[2:])[valid], batch.observations)

    def _kl_to_target(self, batch: PathBatch, distribution: Any = None, target: TargetPass | None = None) -> th.Tensor:
        """
        :param batch: the iteration's last batch
        :param distribution: the online action distribution of its ``T * B`` steps that its update read
        :param target: the target's pass over it, if taken
        :return: the mean ``KL(pi_target || pi)`` over the valid states of the batch (0-d): from the update's two passes
            when both are at hand, else from two passes of the policies over the valid states
        """
        with th.no_grad():
            if target is not None and distribution is not None:
                return masked_mean(state_kl(target.distribution, distribution), batch.mask.reshape(-1))
            obs = self._valid_observations(batch)
            return state_kl(self.policy_target.get_distribution(obs), self.policy.get_distribution(obs)).mean()

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
        excluded = ["actor", "policy_target", "value_optimizer", "_value_fit_settings", "_trust_region", "_value_parameters"]
        return [*super()._excluded_save_params(), *excluded, "_policy_parameters"]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts = ["policy", "policy.optimizer", "policy_target"]
        if self.value_optimizer is not None:  # state between batches (value_fit="grad")
            state_dicts.append("value_optimizer")
        return state_dicts, []

    def set_parameters(self, load_path_or_dict: Any, exact_match: bool = True, device: th.device | str = "auto") -> None:
        """SB3's, reading the value optimiser's state that models saved before 0.3 stored as ``_value_fit.optimizer``."""
        if isinstance(load_path_or_dict, dict) and "_value_fit.optimizer" in load_path_or_dict:
            renamed = {"_value_fit.optimizer": "value_optimizer"}
            load_path_or_dict = {renamed.get(key, key): value for key, value in load_path_or_dict.items()}
        super().set_parameters(load_path_or_dict, exact_match, device)
