"""Trust-PCL (Nachum et al., 2018) as a Stable-Baselines3 algorithm: PCL with an adaptive relative-entropy trust region."""

import warnings
from collections import deque
from typing import Any, TypeVar

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.vec_env import VecMonitor, is_vecenv_wrapped

from sb3_pcl.common.path_buffer import PathReplayBuffer
from sb3_pcl.common.validation import check, is_int, is_real
from sb3_pcl.pcl.pcl import PCL
from sb3_pcl.trust_pcl.lambda_search import LAMBDA_HIGH, LAMBDA_LOW, MIN_EPISODES, find_relative_entropy_coef

SelfTrustPCL = TypeVar("SelfTrustPCL", bound="TrustPCL")

#: env steps after ``learning_starts`` without a lambda estimate before TrustPCL warns that lambda cannot adapt
LAMBDA_PATIENCE = 50_000


class TrustPCL(PCL):
    """
    Trust-PCL: path consistency learning with a relative-entropy trust region.

    Paper: "Trust-PCL: An Off-Policy Trust Region Method for Continuous Control",
    Nachum, Norouzi, Xu, Schuurmans (ICLR 2018), https://arxiv.org/abs/1707.01891

    :class:`~sb3_pcl.PCL` whose consistency also penalises the divergence from the lagged target
    policy ``pi'``: ``C(t) = -V(s_t) + gamma^d V(s_{t+d}) + sum_i gamma^i [r - ent_coef log pi
    - lambda (log pi - log pi')]``. With ``max_divergence`` set, ``lambda`` is re-estimated before
    every training iteration from the last ``lambda_window`` episodes (returns and lengths of the
    Monitor wrapper): the ``lambda`` at which ``KL(exponentially tilted episode distribution ||
    uniform) = max_divergence * mean episode length``
    (:func:`~sb3_pcl.trust_pcl.lambda_search.find_relative_entropy_coef`), then smoothed,
    ``lambda <- lambda_smoothing * lambda + (1 - lambda_smoothing) * new``. With fewer than
    :data:`~sb3_pcl.trust_pcl.lambda_search.MIN_EPISODES` episodes ``lambda`` is kept (or, with
    ``lambda_fallback``, that value is smoothed in as the estimate, as the original code did with 500). Data, target
    network (policy and value, polyak-averaged once per iteration), separate value optimisation
    and losses are PCL's.

    The defaults keep PCL's data settings for small tasks (replay, batches, training frequency), a constant learning
    rate 3e-3 (PCL's decays from it to 0) and the rest of the original Trust-PCL recipe: no entropy (``ent_coef=0``),
    ``max_divergence=0.001``, a slow target (``target_network_lag=0.99``), smoothing 0.95 over 100
    episodes. ``hyperparams/trust_pcl.yml`` holds the published MuJoCo recipes.

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``UnifiedMlpPolicy`` or an ActorCriticPolicy
        subclass; recurrent policies: :class:`~sb3_pcl.RecurrentTrustPCL`)
    :param env: the environment to learn from (if registered in Gym, can be str)
    :param ent_coef: entropy regularisation coefficient (the paper's ``tau``; the recipe's 0 by default)
    :param target_network_lag: polyak coefficient of the target policy and value networks, updated
        once per training iteration: ``target <- lag * target + (1 - lag) * online``
    :param max_divergence: allowed divergence per step ``epsilon > 0`` of the adaptive ``lambda``; ``None``: a fixed
        ``lambda`` (``relative_entropy_coef``)
    :param lambda_smoothing: weight of the current ``lambda`` in its update, in ``[0, 1)``
    :param lambda_window: number of recent episodes ``lambda`` is estimated from (kept apart from SB3's logging
        window ``stats_window_size``)
    :param lambda_fallback: the estimate while fewer than
        :data:`~sb3_pcl.trust_pcl.lambda_search.MIN_EPISODES` episodes have ended, smoothed in at every
        iteration like a bisection result (the original code's search returned 500, the middle of its interval
        ``[0, 1000]``, so ``lambda`` drifted toward 500 from the first iteration); ``None``: ``lambda`` keeps its
        current value (``relative_entropy_coef``) until the first estimate
    :param relative_entropy_coef: the initial ``lambda`` when ``max_divergence`` is set, else its fixed value

    The other parameters are :class:`~sb3_pcl.PCL`'s, with its defaults.
    """

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-3,
        buffer_size: int = 20_000,
        learning_starts: int = 1_000,
        batch_size: int = 32,
        n_steps: int = 10,
        gamma: float = 0.99,
        ent_coef: float | Schedule | str = 0.0,
        train_freq: int | tuple[int, str] = 32,
        gradient_steps: int = 1,
        max_segment_length: int | None = 32,
        vf_coef: float = 0.5,
        clip_adv: float | None = None,
        max_grad_norm: float | None = 10.0,
        target_network_lag: float = 0.99,
        sample_from: str = "online",
        use_online_batch: bool = False,
        value_fit: str = "joint",
        value_fit_kwargs: dict[str, Any] | None = None,
        policy_step: str = "gradient",
        policy_step_kwargs: dict[str, Any] | None = None,
        relative_entropy_coef: float = 0.0,
        max_divergence: float | None = 0.001,
        lambda_smoothing: float = 0.95,
        lambda_window: int = 100,
        lambda_fallback: float | None = None,
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
        # Set before PCL's constructor, which validates every hyperparameter (ours included).
        self.max_divergence = max_divergence
        self.lambda_smoothing = lambda_smoothing
        self.lambda_window = lambda_window
        self.lambda_fallback = lambda_fallback
        #: the last bisection result (``None`` until ``lambda`` has been estimated once)
        self.lambda_target: float | None = None
        #: (return, length) of the last ``lambda_window`` episodes, in the order they ended
        self._lambda_episodes: deque[tuple[float, float]] = deque()
        self._lambda_warned = False
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            buffer_size=buffer_size,
            learning_starts=learning_starts,
            batch_size=batch_size,
            n_steps=n_steps,
            gamma=gamma,
            ent_coef=ent_coef,
            train_freq=train_freq,
            gradient_steps=gradient_steps,
            max_segment_length=max_segment_length,
            vf_coef=vf_coef,
            clip_adv=clip_adv,
            max_grad_norm=max_grad_norm,
            target_network_lag=target_network_lag,
            sample_from=sample_from,
            use_online_batch=use_online_batch,
            value_fit=value_fit,
            value_fit_kwargs=value_fit_kwargs,
            policy_step=policy_step,
            policy_step_kwargs=policy_step_kwargs,
            relative_entropy_coef=relative_entropy_coef,
            start_windows=start_windows,
            use_target_values=use_target_values,
            clip_actions=clip_actions,
            use_policy_at_warmup=use_policy_at_warmup,
            min_batch_transitions=min_batch_transitions,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            action_noise=action_noise,
            replay_buffer_class=replay_buffer_class,
            replay_buffer_kwargs=replay_buffer_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=_init_setup_model,
            rollout=rollout,
        )

    def _setup_model(self) -> None:
        super()._setup_model()
        self._lambda_episodes = deque(self._lambda_episodes, maxlen=self.lambda_window)

    def _check_hyperparameters(self) -> None:
        super()._check_hyperparameters()
        check(
            self.max_divergence is None or (is_real(self.max_divergence) and self.max_divergence > 0),
            "max_divergence",
            self.max_divergence,
            "None (a fixed lambda) or a finite float > 0",
        )
        check(
            is_real(self.lambda_smoothing) and 0.0 <= self.lambda_smoothing < 1.0,
            "lambda_smoothing",
            self.lambda_smoothing,
            "in [0, 1)",
        )
        check(is_int(self.lambda_window) and self.lambda_window >= 1, "lambda_window", self.lambda_window, "an integer >= 1")
        check(
            self.lambda_fallback is None or (is_real(self.lambda_fallback) and self.lambda_fallback >= 0),
            "lambda_fallback",
            self.lambda_fallback,
            "None (keep lambda until the first estimate) or a finite float >= 0",
        )

    # ------------------------------------------------------------------ lambda
    def _before_training_iteration(self) -> None:
        """With ``max_divergence``, re-estimate ``lambda`` from the last ``lambda_window`` episodes and smooth it in
        (with too few episodes: kept, or ``lambda_fallback`` smoothed in); after the target update, before the gradient
        steps of the iteration."""
        if self.max_divergence is not None:
            episodes = np.array(self._lambda_episodes, dtype=np.float64).reshape(-1, 2)
            returns, lengths = episodes[:, 0], episodes[:, 1]
            venv = self._vec_normalize_env
            if venv is not None and venv.norm_reward:  # the units of the rewards the consistency sees (unclipped)
                returns = returns / np.sqrt(venv.ret_rms.var + venv.epsilon)
            new = find_relative_entropy_coef(returns, lengths, self.max_divergence, LAMBDA_LOW, LAMBDA_HIGH)
            if new is None:
                self._warn_if_lambda_cannot_adapt()
                new = None if self.lambda_fallback is None else float(self.lambda_fallback)
            else:
                self.lambda_target = new
            if new is not None:
                smoothed = self.lambda_smoothing * self.relative_entropy_coef + (1.0 - self.lambda_smoothing) * new
                self.relative_entropy_coef = float(smoothed)
                self.logger.record("train/lambda_target", new)
        self.logger.record("train/lambda", self.relative_entropy_coef)

    def _warn_if_lambda_cannot_adapt(self) -> None:
        """Warn once when so few episodes end that ``lambda`` has never been estimated after many steps."""
        steps_without = self.num_timesteps - self.learning_starts
        if self._lambda_warned or self.lambda_target is not None or steps_without < LAMBDA_PATIENCE:
            return
        self._lambda_warned = True
        warnings.warn(
            f"TrustPCL: {len(self._lambda_episodes)} episodes have ended in {self.num_timesteps} steps, fewer than the "
            f"{MIN_EPISODES} lambda is estimated from, so lambda stays at {self.relative_entropy_coef}. Give the env a "
            "time limit (episodes must end), or pass max_divergence=None for a fixed lambda.",
            stacklevel=2,
        )

    def _update_info_buffer(self, infos: list[dict[str, Any]], dones: np.ndarray | None = None) -> None:
        """SB3's episode statistics, and the (return, length) of every ended episode for ``lambda``."""
        super()._update_info_buffer(infos, dones)
        for info in infos:
            episode = info.get("episode")
            if episode is not None:
                self._lambda_episodes.append((float(episode["r"]), float(episode["l"])))

    def _uses_target_policy(self) -> bool:
        return self.max_divergence is not None or super()._uses_target_policy()

    # ------------------------------------------------------------------ learning
    def _setup_learn(self, *args: Any, **kwargs: Any) -> tuple[int, BaseCallback]:
        """PCL's, then a warning when ``lambda`` cannot adapt (no Monitor reports the episodes)."""
        result = super()._setup_learn(*args, **kwargs)
        if not self.ep_info_buffer:  # SB3 starts new episode statistics: so does lambda
            self._lambda_episodes.clear()
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
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
