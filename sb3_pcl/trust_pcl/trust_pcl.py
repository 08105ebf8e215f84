"""Trust-PCL (Nachum et al., 2018) as a Stable-Baselines3 algorithm: PCL with an adaptive relative-entropy trust region."""

import warnings
from typing import Any, TypeVar

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.vec_env import VecMonitor, is_vecenv_wrapped

from sb3_pcl.common.buffers import PathReplayBuffer
from sb3_pcl.common.trust_region import LAMBDA_HIGH, LAMBDA_LOW, find_relative_entropy_coef
from sb3_pcl.pcl.pcl import DEFAULT_LEARNING_RATE, PCL

SelfTrustPCL = TypeVar("SelfTrustPCL", bound="TrustPCL")


class TrustPCL(PCL):
    """
    Trust-PCL: path consistency learning with a relative-entropy trust region.

    Paper: "Trust-PCL: An Off-Policy Trust Region Method for Continuous Control",
    Nachum, Norouzi, Xu, Schuurmans (ICLR 2018), https://arxiv.org/abs/1707.01891

    :class:`~sb3_pcl.PCL` whose consistency also penalises the divergence from the lagged target
    policy ``pi'``: ``C(t) = -V(s_t) + gamma^d V(s_{t+d}) + sum_i gamma^i [r - tau log pi
    - lambda (log pi - log pi')]``. With ``max_divergence`` set, ``lambda`` is re-estimated before
    every training iteration from the last ``lambda_window`` episodes (returns and lengths of the
    Monitor wrapper): the ``lambda`` at which ``KL(exponentially tilted episode distribution ||
    uniform) = max_divergence * mean episode length``
    (:func:`~sb3_pcl.common.trust_region.find_relative_entropy_coef`), then smoothed,
    ``lambda <- lambda_smoothing * lambda + (1 - lambda_smoothing) * new``. With fewer than
    :data:`~sb3_pcl.common.trust_region.MIN_EPISODES` episodes ``lambda`` is kept. Data, target
    network (policy and value, polyak-averaged once per iteration), separate value optimisation
    and losses are PCL's.

    The defaults keep PCL's data settings for small tasks (replay, batches, training frequency,
    learning rate) and take the rest of the original Trust-PCL recipe: no entropy (``tau=0``),
    ``max_divergence=0.001``, a slow target (``target_network_lag=0.99``), smoothing 0.95 over 100
    episodes. ``hyperparams/trust_pcl.yml`` holds the published MuJoCo recipes.

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``MlpLstmPolicy``, the Unified PCL policies
        ``UnifiedMlpPolicy`` and ``UnifiedMlpLstmPolicy`` (Discrete or MultiDiscrete actions, one network whose
        action logits also give the value) or an ActorCriticPolicy subclass)
    :param env: the environment to learn from (if registered in Gym, can be str)
    :param learning_rate: learning rate of Adam, constant or a schedule of the remaining progress
        (default: linear decay from 1e-3 to 0 over the ``learn`` call)
    :param buffer_size: replay capacity in transitions
    :param learning_starts: env steps of uniformly random actions before learning starts
    :param batch_size: number of path segments per replay batch
    :param rollout: consistency window length ``d``
    :param gamma: discount factor
    :param tau: entropy regularisation coefficient, a float or a schedule of the remaining progress
        (callable or string, :func:`~sb3_pcl.common.schedules.parse_schedule`)
    :param train_freq: collect this many steps (per env) between training iterations, or a tuple ``(n, "step"|"episode")``
    :param gradient_steps: replay batches per training iteration (-1: as many as env steps collected)
    :param max_segment_length: maximal length of a sampled segment (``None``: whole paths)
    :param critic_weight: weight of the value surrogate in the joint loss
    :param clip_adv: clip the consistency residual used as gradient weight to ``[-clip_adv, clip_adv]`` (``None``: no clipping)
    :param max_grad_norm: clip the global gradient norm (``None``: no clipping)
    :param target_network_lag: polyak coefficient of the target policy and value networks, updated
        once per training iteration: ``target <- lag * target + (1 - lag) * online``
    :param sample_from: act with the ``"online"`` or the lagged ``"target"`` policy while collecting
    :param use_online_batch: also train on the segments collected in the last iteration
    :param value_optimizer: ``None`` trains the value jointly with the policy (``critic_weight``);
        ``"grad"``, ``"best_fit"`` or ``"lbfgs"`` fit it separately (see :class:`~sb3_pcl.PCL`)
    :param value_learning_rate: learning rate of the separate value optimiser
    :param value_gradient_steps: Adam steps of the separate value optimiser per batch
    :param value_mix: weight of the consistency target in the separate value regression
    :param value_reg_coef: ridge coefficient ``rho > 0`` of the ``"best_fit"`` value regression
    :param policy_optimizer: ``"adam"`` (gradient steps at ``learning_rate``) or ``"trust_region"``, one
        natural-gradient step of the policy per batch, of size ``target_kl`` (see :class:`~sb3_pcl.PCL`;
        it needs a separate ``value_optimizer``). The step is a second trust region, around the policy
        before the step; the relative-entropy term ties the policy to the lagged target as before
    :param trust_region_loss: ``"consistency"`` or ``"surrogate"``, the loss of the trust-region step (see PCL)
    :param target_kl: the largest mean ``KL(pi_old || pi_new)`` of a trust-region step
    :param cg_max_steps: conjugate-gradient iterations of the trust-region step
    :param cg_damping: damping added to the Fisher matrix of the trust-region step
    :param line_search_max_iter: trials of the trust-region step's backtracking line search
    :param line_search_shrinking_factor: factor in ``(0, 1)`` shrinking the step between line-search trials
    :param replay_alpha: sharpness of the prioritised path sampling (0: uniform)
    :param replay_priority: ``"step"`` (recency) or ``"return"`` (path return)
    :param replay_eviction: ``"fifo"``, ``"rand"`` or ``"rank"``
    :param relative_entropy_coef: ``lambda``: its initial value when ``max_divergence`` is set, else its fixed value
    :param max_divergence: allowed divergence per step ``epsilon > 0`` of the adaptive ``lambda``; ``None``: fixed ``lambda``
    :param lambda_smoothing: weight of the current ``lambda`` in its update, in ``[0, 1)``
    :param lambda_window: number of recent episodes ``lambda`` is estimated from (at most ``stats_window_size``)
    :param use_target_values: bootstrap ``V(s_{t+k})`` and the final values from the target value network
    :param use_sde: explore with state-dependent noise (gSDE; see :class:`~sb3_pcl.PCL`)
    :param sde_sample_freq: with ``use_sde``, a new noise matrix every this many env steps (``-1``: once per collection)
    :param start_windows: add the ``d - 1`` shorter windows that start at the first state of each segment (seed behaviour)
    :param expert_paths: number of scripted expert episodes seeded into the replay at the first ``learn``
        (algorithmic tasks only; see :class:`~sb3_pcl.PCL`)
    :param demonstrations: an episodes ``.npz`` file seeded into the replay at the first ``learn`` (see
        :meth:`~sb3_pcl.PCL.add_demonstrations`)
    :param shared_curriculum: one curriculum for all envs of the algorithmic tasks (see :class:`~sb3_pcl.PCL`)
    :param replay_buffer_class: replay buffer class (a ``PathReplayBuffer`` subclass)
    :param replay_buffer_kwargs: extra keyword arguments of the replay buffer
    :param stats_window_size: window size for the rollout logging (and the episodes available to ``lambda_window``)
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments passed to the policy on creation
    :param verbose: 0 no output, 1 info, 2 debug
    :param seed: seed for the pseudo random generators
    :param device: PyTorch device
    :param _init_setup_model: whether or not to build the network at the creation of the instance
    """

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = DEFAULT_LEARNING_RATE,
        buffer_size: int = 20_000,
        learning_starts: int = 1_000,
        batch_size: int = 32,
        rollout: int = 10,
        gamma: float = 0.99,
        tau: float | Schedule | str = 0.0,
        train_freq: int | tuple[int, str] = 8,
        gradient_steps: int = 1,
        max_segment_length: int | None = 32,
        critic_weight: float = 0.5,
        clip_adv: float | None = None,
        max_grad_norm: float | None = 10.0,
        target_network_lag: float = 0.99,
        sample_from: str = "online",
        use_online_batch: bool = False,
        value_optimizer: str | None = None,
        value_learning_rate: float = 1e-3,
        value_gradient_steps: int = 5,
        value_mix: float = 1.0,
        value_reg_coef: float = 1e-5,
        policy_optimizer: str = "adam",
        trust_region_loss: str = "consistency",
        target_kl: float = 0.01,
        cg_max_steps: int = 10,
        cg_damping: float = 0.1,
        line_search_max_iter: int = 10,
        line_search_shrinking_factor: float = 0.5,
        replay_alpha: float = 0.0,
        replay_priority: str = "step",
        replay_eviction: str = "fifo",
        relative_entropy_coef: float = 0.0,
        max_divergence: float | None = 0.001,
        lambda_smoothing: float = 0.95,
        lambda_window: int = 100,
        use_target_values: bool = False,
        start_windows: bool = True,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        expert_paths: int = 0,
        demonstrations: str | None = None,
        shared_curriculum: bool = False,
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
        # Set before PCL's constructor, which validates every hyperparameter (ours included).
        self.max_divergence = max_divergence
        self.lambda_smoothing = lambda_smoothing
        self.lambda_window = lambda_window
        #: the last bisection result (``None`` until ``lambda`` has been estimated once)
        self.lambda_target: float | None = None
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            buffer_size=buffer_size,
            learning_starts=learning_starts,
            batch_size=batch_size,
            rollout=rollout,
            gamma=gamma,
            tau=tau,
            train_freq=train_freq,
            gradient_steps=gradient_steps,
            max_segment_length=max_segment_length,
            critic_weight=critic_weight,
            clip_adv=clip_adv,
            max_grad_norm=max_grad_norm,
            target_network_lag=target_network_lag,
            sample_from=sample_from,
            use_online_batch=use_online_batch,
            value_optimizer=value_optimizer,
            value_learning_rate=value_learning_rate,
            value_gradient_steps=value_gradient_steps,
            value_mix=value_mix,
            value_reg_coef=value_reg_coef,
            policy_optimizer=policy_optimizer,
            trust_region_loss=trust_region_loss,
            target_kl=target_kl,
            cg_max_steps=cg_max_steps,
            cg_damping=cg_damping,
            line_search_max_iter=line_search_max_iter,
            line_search_shrinking_factor=line_search_shrinking_factor,
            replay_alpha=replay_alpha,
            replay_priority=replay_priority,
            replay_eviction=replay_eviction,
            relative_entropy_coef=relative_entropy_coef,
            start_windows=start_windows,
            use_target_values=use_target_values,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            expert_paths=expert_paths,
            demonstrations=demonstrations,
            shared_curriculum=shared_curriculum,
            replay_buffer_class=replay_buffer_class,
            replay_buffer_kwargs=replay_buffer_kwargs,
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
        if self.max_divergence is not None and not self.max_divergence > 0:
            raise ValueError(f"max_divergence must be > 0 (or None for a fixed lambda), got {self.max_divergence!r}")
        if not 0.0 <= self.lambda_smoothing < 1.0:
            raise ValueError(f"lambda_smoothing must be in [0, 1), got {self.lambda_smoothing!r}")
        if not isinstance(self.lambda_window, (int, np.integer)) or self.lambda_window < 1:
            raise ValueError(f"lambda_window must be an integer >= 1, got {self.lambda_window!r}")
        if self.lambda_window > self._stats_window_size:
            raise ValueError(
                f"lambda_window ({self.lambda_window}) must not exceed stats_window_size ({self._stats_window_size}), "
                "the number of recent episodes kept"
            )

    # ------------------------------------------------------------------ lambda
    def _episode_returns_in_training_units(self, returns: np.ndarray) -> np.ndarray:
        """
        Scale Monitor's raw episode returns like the rewards the consistency sees.

        With ``VecNormalize(norm_reward=True)`` every reward is divided by the current
        ``sqrt(ret_rms.var + epsilon)`` (the per-reward clipping is ignored here).

        :param returns: raw episode returns
        :return: the returns in the units of the trained rewards
        """
        venv = self._vec_normalize_env
        if venv is not None and venv.norm_reward:
            return returns / np.sqrt(venv.ret_rms.var + venv.epsilon)
        return returns

    def _update_relative_entropy_coef(self) -> None:
        """Re-estimate ``lambda`` from the last ``lambda_window`` episodes and smooth it in (kept with too few episodes)."""
        assert self.max_divergence is not None
        episodes = list(self.ep_info_buffer or [])[-self.lambda_window :]
        returns = np.array([float(info["r"]) for info in episodes], dtype=np.float64)
        lengths = np.array([float(info["l"]) for info in episodes], dtype=np.float64)
        new = find_relative_entropy_coef(
            self._episode_returns_in_training_units(returns), lengths, self.max_divergence, LAMBDA_LOW, LAMBDA_HIGH
        )
        if new is None:
            return
        self.lambda_target = new
        self.relative_entropy_coef = float(
            self.lambda_smoothing * self.relative_entropy_coef + (1.0 - self.lambda_smoothing) * new
        )
        self.logger.record("train/lambda_target", new)

    def _before_training_iteration(self) -> None:
        """Adapt ``lambda`` (after the target update, before the gradient steps of the iteration)."""
        if self.max_divergence is not None:
            self._update_relative_entropy_coef()
        self.logger.record("train/lambda", self.relative_entropy_coef)

    def _uses_target_policy(self) -> bool:
        return self.max_divergence is not None or super()._uses_target_policy()

    # ------------------------------------------------------------------ learning
    def _setup_learn(
        self,
        total_timesteps: int,
        callback: MaybeCallback = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        result = super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)
        assert self.env is not None
        monitored = is_vecenv_wrapped(self.env, VecMonitor) or all(self.env.env_is_wrapped(Monitor))
        if self.max_divergence is not None and not monitored:
            warnings.warn(
                "TrustPCL adapts lambda from the episode returns reported by a Monitor (or VecMonitor) wrapper, "
                f"and this env has none: lambda stays at {self.relative_entropy_coef}. Wrap the env, "
                "e.g. with make_vec_env, or pass max_divergence=None for a fixed lambda."
            )
        return result

    def learn(
        self: SelfTrustPCL,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: str = "TrustPCL",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfTrustPCL:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
