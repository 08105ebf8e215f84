"""Path Consistency Learning (Nachum et al., 2017) as a Stable-Baselines3 algorithm."""

import io
import pathlib
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import kl_divergence
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.save_util import load_from_pkl
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule, LinearSchedule, explained_variance, polyak_update

from sb3_pcl.common.buffers import EVICTION_STRATEGIES, PRIORITY_MODES, PathBatch, PathReplayBuffer
from sb3_pcl.common.consistency import (
    Consistency,
    consistency_loss,
    path_consistency,
    pcl_policy_loss,
    pcl_value_loss,
    value_targets,
)
from sb3_pcl.common.validation import fail_hyperparameter
from sb3_pcl.pcl.policies import CnnPolicy, MlpPolicy, UnifiedPolicy

SelfPCL = TypeVar("SelfPCL", bound="PCL")

VALUE_OPTIMIZERS = (None, "grad")
#: PCL's default learning rate: linear decay from 1e-3 to 0 over a ``learn`` call
DEFAULT_LEARNING_RATE = LinearSchedule(1e-3, 0.0, 1.0)
SAMPLE_FROM = ("online", "target")


class PCL(OffPolicyAlgorithm):
    """
    Path Consistency Learning (PCL).

    Paper: "Bridging the Gap Between Value and Policy Based Reinforcement Learning",
    Nachum, Norouzi, Xu, Schuurmans (2017), https://arxiv.org/abs/1702.08892

    PCL learns a policy and a value function that satisfy the soft path consistency
    ``V(s_t) = gamma^d V(s_{t+d}) + sum_i gamma^i (r_{t+i} - tau log pi(a_{t+i}|s_{t+i}))`` on
    any path, on-policy or not. It is an :class:`~stable_baselines3.common.off_policy_algorithm.OffPolicyAlgorithm`:
    that base class already collects steps from a VecEnv, stores them in a replay buffer,
    handles VecNormalize, ``train_freq``, ``gradient_steps`` and ``learning_starts``; PCL
    adds an episode-aware replay (:class:`~sb3_pcl.common.buffers.PathReplayBuffer`), whose
    time-major path segments feed the consistency loss, and a lagged target network.

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy`` or an ActorCriticPolicy subclass)
    :param env: the environment to learn from (if registered in Gym, can be str)
    :param learning_rate: learning rate of Adam, constant or a schedule of the remaining progress
        (default: linear decay from 1e-3 to 0 over the ``learn`` call)
    :param buffer_size: replay capacity in transitions (a small replay of recent paths learns
        faster and more stably than one holding the whole run)
    :param learning_starts: env steps of uniformly random actions before learning starts
    :param batch_size: number of path segments per replay batch
    :param rollout: consistency window length ``d``
    :param gamma: discount factor
    :param tau: entropy regularisation coefficient, a float or a schedule of the remaining
        progress (the seed's ``tau_decay`` is such a schedule)
    :param train_freq: collect this many steps (per env) between training iterations, or a tuple ``(n, "step"|"episode")``
    :param gradient_steps: replay batches per training iteration (-1: as many as env steps collected)
    :param max_segment_length: maximal length of a sampled segment (``None``: whole paths)
    :param critic_weight: weight of the value surrogate in the joint loss
    :param clip_adv: clip the consistency residual used as gradient weight to ``[-clip_adv, clip_adv]`` (``None``: no clipping)
    :param max_grad_norm: clip the global gradient norm (``None``: no clipping)
    :param target_network_lag: polyak coefficient of the target network, updated once per
        training iteration: ``target <- lag * target + (1 - lag) * online``
    :param sample_from: act with the ``"online"`` or the lagged ``"target"`` policy while collecting
    :param use_online_batch: also train on the segments collected in the last iteration
    :param value_optimizer: ``None`` trains the value jointly with the policy (``critic_weight``);
        ``"grad"`` trains it separately (the seed's ``value_opt=grad``): after each policy step,
        ``value_gradient_steps`` Adam steps regress ``V(s_t)`` toward
        ``value_mix * (V(s_t) + C(t)) + (1 - value_mix) * V_old(s_t)``
    :param value_learning_rate: learning rate of the separate value optimiser
    :param value_gradient_steps: Adam steps of the separate value optimiser per batch
    :param value_mix: weight of the consistency target in the separate value regression
    :param replay_alpha: sharpness of the prioritised path sampling (0: uniform)
    :param replay_priority: ``"step"`` (recency) or ``"return"`` (path return)
    :param replay_eviction: ``"fifo"``, ``"rand"`` or ``"rank"``
    :param relative_entropy_coef: ``lambda``, the weight of ``log pi - log pi_target`` in the
        consistency (0 for PCL; Trust-PCL sets and adapts it)
    :param start_windows: add the ``d - 1`` shorter windows that start at the first state of each segment (seed behaviour)
    :param use_target_values: bootstrap the far end of the windows, ``V(s_{t+k})`` and the final value
        ``V(s_L)``, from the lagged target value network instead of the online one (``V(s_t)`` stays online)
    :param replay_buffer_class: replay buffer class (a ``PathReplayBuffer`` subclass)
    :param replay_buffer_kwargs: extra keyword arguments of the replay buffer
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
    }
    policy: ActorCriticPolicy
    policy_target: ActorCriticPolicy
    replay_buffer: PathReplayBuffer  # type: ignore[assignment]

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
        tau: float | Schedule = 0.01,
        train_freq: int | tuple[int, str] = 8,
        gradient_steps: int = 1,
        max_segment_length: int | None = 32,
        critic_weight: float = 0.5,
        clip_adv: float | None = None,
        max_grad_norm: float | None = 10.0,
        target_network_lag: float = 0.95,
        sample_from: str = "online",
        use_online_batch: bool = False,
        value_optimizer: str | None = None,
        value_learning_rate: float = 1e-3,
        value_gradient_steps: int = 5,
        value_mix: float = 1.0,
        replay_alpha: float = 0.0,
        replay_priority: str = "step",
        replay_eviction: str = "fifo",
        relative_entropy_coef: float = 0.0,
        start_windows: bool = True,
        use_target_values: bool = False,
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
            sde_support=False,
            support_multi_env=True,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
        )
        # OffPolicyAlgorithm calls its polyak coefficient ``tau``; in PCL ``tau`` is the entropy coefficient.
        self.tau = tau  # type: ignore[assignment]
        self.rollout = rollout
        self.max_segment_length = max_segment_length
        self.critic_weight = critic_weight
        self.clip_adv = clip_adv
        self.max_grad_norm = max_grad_norm
        self.target_network_lag = target_network_lag
        self.sample_from = sample_from
        self.use_online_batch = use_online_batch
        self.value_optimizer_name = value_optimizer
        self.value_learning_rate = value_learning_rate
        self.value_gradient_steps = value_gradient_steps
        self.value_mix = value_mix
        self.replay_alpha = replay_alpha
        self.replay_priority = replay_priority
        self.replay_eviction = replay_eviction
        self.relative_entropy_coef = relative_entropy_coef
        self.start_windows = start_windows
        self.use_target_values = use_target_values
        self._steps_since_train = 0
        self._check_hyperparameters()

        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ setup
    def _check_hyperparameters(self) -> None:
        """Raise a ``ValueError`` naming the first invalid hyperparameter."""

        def fail(name: str, allowed: str) -> None:
            fail_hyperparameter(self, name, allowed)

        if not isinstance(self.rollout, (int, np.integer)) or self.rollout < 1:
            fail("rollout", "an integer >= 1")
        if not 0.0 <= self.gamma <= 1.0:
            fail("gamma", "in [0, 1]")
        if not callable(self.tau) and self.tau < 0:
            fail("tau", ">= 0 (or a schedule)")
        if self.batch_size < 1:
            fail("batch_size", ">= 1")
        if self.buffer_size < 1:
            fail("buffer_size", ">= 1")
        if self.batch_size > self.buffer_size:
            raise ValueError(f"batch_size ({self.batch_size}) must not be larger than buffer_size ({self.buffer_size})")
        if self.learning_starts < 0:
            fail("learning_starts", ">= 0")
        if self.max_segment_length is not None and self.max_segment_length < 1:
            fail("max_segment_length", "None or >= 1")
        if self.critic_weight < 0:
            fail("critic_weight", ">= 0")
        if self.clip_adv is not None and self.clip_adv <= 0:
            fail("clip_adv", "None or > 0")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            fail("max_grad_norm", "None or > 0")
        if not 0.0 <= self.target_network_lag <= 1.0:
            fail("target_network_lag", "in [0, 1]")
        if self.sample_from not in SAMPLE_FROM:
            fail("sample_from", f"one of {SAMPLE_FROM}")
        if self.value_optimizer_name not in VALUE_OPTIMIZERS:
            fail("value_optimizer_name", f"one of {VALUE_OPTIMIZERS}")
        if self.value_learning_rate <= 0:
            fail("value_learning_rate", "> 0")
        if self.value_gradient_steps < 1:
            fail("value_gradient_steps", ">= 1")
        if not 0.0 < self.value_mix <= 1.0:
            fail("value_mix", "in (0, 1]")
        if self.replay_alpha < 0:
            fail("replay_alpha", ">= 0")
        if self.replay_priority not in PRIORITY_MODES:
            fail("replay_priority", f"one of {PRIORITY_MODES}")
        if self.replay_eviction not in EVICTION_STRATEGIES:
            fail("replay_eviction", f"one of {EVICTION_STRATEGIES}")
        if self.relative_entropy_coef < 0:
            fail("relative_entropy_coef", ">= 0")
        if self.gradient_steps < -1:
            fail("gradient_steps", ">= -1")

    def _setup_model(self) -> None:
        if isinstance(self.observation_space, spaces.Dict):
            raise ValueError("PCL does not support Dict observation spaces (flatten them with a wrapper first)")
        if self.replay_buffer_class is None:
            self.replay_buffer_class = PathReplayBuffer  # type: ignore[assignment]
        elif not issubclass(self.replay_buffer_class, PathReplayBuffer):  # type: ignore[arg-type]
            raise ValueError(f"replay_buffer_class must be a PathReplayBuffer subclass, got {self.replay_buffer_class}")
        buffer_kwargs = {
            "alpha": self.replay_alpha,
            "priority": self.replay_priority,
            "eviction": self.replay_eviction,
            "max_segment_length": self.max_segment_length,
        }
        buffer_kwargs.update(self.replay_buffer_kwargs)
        self.replay_buffer_kwargs = buffer_kwargs
        super()._setup_model()
        self.tau_schedule = FloatSchedule(self.tau)
        self.policy_target = self.policy_class(  # type: ignore[assignment]
            self.observation_space, self.action_space, self.lr_schedule, **self.policy_kwargs
        ).to(self.device)
        self.policy_target.load_state_dict(self.policy.state_dict())
        self.policy_target.set_training_mode(False)
        self.policy_target.requires_grad_(False)
        self._setup_optimizers()

    def _value_parameters(self) -> list[th.nn.Parameter]:
        """Parameters only the value function uses (the value MLP and head; shared layers excluded)."""
        modules: list[th.nn.Module] = [self.policy.value_net]
        if hasattr(self.policy.mlp_extractor, "value_net"):
            modules.append(self.policy.mlp_extractor.value_net)
        if not self.policy.share_features_extractor:
            modules.append(self.policy.vf_features_extractor)
        return [p for module in modules for p in module.parameters()]

    def _setup_optimizers(self) -> None:
        """With a separate value optimiser, the policy's optimiser must not update the value parameters."""
        self.value_optimizer: th.optim.Optimizer | None = None
        if self.value_optimizer_name is not None and isinstance(self.policy, UnifiedPolicy):
            raise ValueError("value_optimizer must be None with UnifiedPolicy (its value has no separate parameters)")
        if self.value_optimizer_name is None:
            return
        value_ids = {id(p) for p in self._value_parameters()}
        policy_params = [p for p in self.policy.parameters() if id(p) not in value_ids]
        optimizer_class: Any = self.policy.optimizer_class
        self.policy.optimizer = optimizer_class(policy_params, lr=self.lr_schedule(1), **self.policy.optimizer_kwargs)
        self.value_optimizer = optimizer_class(
            self._value_parameters(), lr=self.value_learning_rate, **self.policy.optimizer_kwargs
        )

    # ------------------------------------------------------------------ acting
    def _sample_action(
        self,
        learning_starts: int,
        action_noise: Any = None,
        n_envs: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """
        Sample actions for the envs; store what the policy sampled (not the clipped env action).

        :param learning_starts: random uniform actions before this many steps
        :param action_noise: unused (PCL's policies are stochastic)
        :param n_envs: number of envs
        :return: the env actions and the actions to store in the replay buffer
        """
        if self.num_timesteps < learning_starts:
            sampled = np.array([self.action_space.sample() for _ in range(n_envs)])
        else:
            assert self._last_obs is not None
            acting = self.policy_target if self.sample_from == "target" else self.policy
            obs_tensor, _ = acting.obs_to_tensor(self._last_obs)
            with th.no_grad():
                sampled = acting._predict(obs_tensor, deterministic=False).cpu().numpy()
            action_shape: tuple[int, ...] = self.action_space.shape or ()
            sampled = sampled.reshape((n_envs, *action_shape))
        env_action = sampled
        if isinstance(self.action_space, spaces.Box):
            env_action = np.clip(sampled, self.action_space.low, self.action_space.high)
        return env_action, sampled

    def _on_step(self) -> None:
        self._steps_since_train += 1

    # ------------------------------------------------------------------ learning
    def _prepare_actions(self, actions: th.Tensor) -> th.Tensor:
        if isinstance(self.action_space, spaces.Discrete):
            return actions[..., 0].long()
        if isinstance(self.action_space, spaces.MultiDiscrete):
            return actions.long()
        return actions

    def _evaluate(self, policy: ActorCriticPolicy, batch: PathBatch) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]:
        """
        :return: values ``(T, B)``, log-probabilities ``(T, B)``, final values ``(B,)`` and the action distribution
        """
        n_steps, n_paths = batch.mask.shape
        obs = batch.observations.reshape(n_steps * n_paths, *batch.observations.shape[2:])
        actions = self._prepare_actions(batch.actions.reshape(n_steps * n_paths, -1))
        distribution = policy.get_distribution(obs)
        log_prob = distribution.log_prob(actions).reshape(n_steps, n_paths)
        values = policy.predict_values(obs).reshape(n_steps, n_paths)
        final_values = policy.predict_values(batch.final_observations).reshape(n_paths) * (1.0 - batch.terminated)
        return values, log_prob, final_values, distribution

    def _consistency(
        self, batch: PathBatch, values: th.Tensor, log_prob: th.Tensor, final_values: th.Tensor, tau: float
    ) -> Consistency:
        """
        :param batch: the path segments
        :param values: online ``V(s_t)`` ``(T, B)``
        :param log_prob: online ``log pi(a_t|s_t)`` ``(T, B)``
        :param final_values: online ``V(s_L)`` ``(B,)``, zero for terminated segments
        :param tau: current entropy coefficient
        :return: the consistency residuals; the target network (no gradient) provides ``log pi'``
            when ``relative_entropy_coef > 0`` and, with ``use_target_values``, the far-end values
        """
        target_log_prob = far_values = None
        if self.relative_entropy_coef > 0 or self.use_target_values:
            with th.no_grad():
                target_values, target_log_prob, target_final_values, _ = self._evaluate(self.policy_target, batch)
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
            tau=tau,
            target_log_probs=target_log_prob,
            relative_entropy_coef=self.relative_entropy_coef,
            start_windows=self.start_windows,
            far_values=far_values,
        )

    def _train_on_batch(self, batch: PathBatch, tau: float) -> dict[str, float]:
        values, log_prob, final_values, distribution = self._evaluate(self.policy, batch)
        consistency = self._consistency(batch, values, log_prob, final_values, tau)
        policy_loss = pcl_policy_loss(consistency, self.clip_adv)
        value_loss = pcl_value_loss(consistency, self.clip_adv)
        loss = policy_loss if self.value_optimizer is not None else policy_loss + self.critic_weight * value_loss
        self.policy.optimizer.zero_grad()
        loss.backward()
        if self.max_grad_norm is not None:
            grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        else:
            grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), float("inf"))
        self.policy.optimizer.step()

        mask = batch.mask.reshape(-1).bool()
        entropy = distribution.entropy()
        stats = {
            "consistency_loss": consistency_loss(consistency).item(),
            "mean_sq_consistency": (consistency.residual.detach() ** 2).sum().item() / consistency.mask.sum().item(),
            "mean_abs_consistency": consistency.residual.detach().abs().sum().item() / consistency.mask.sum().item(),
            "policy_loss": policy_loss.item(),
            "value_loss": value_loss.item(),
            "entropy": entropy[mask].mean().item() if entropy is not None else float("nan"),
            "grad_norm": float(grad_norm),
        }
        targets = value_targets(consistency)
        valid = batch.mask.bool()
        stats["explained_variance"] = float(
            explained_variance(values.detach()[valid].cpu().numpy(), targets[valid].cpu().numpy())
        )
        if self.value_optimizer is not None:
            stats["value_fit_loss"] = self._fit_values(batch, tau)
        return stats

    def _fit_values(self, batch: PathBatch, tau: float) -> float:
        """Separate value optimisation toward a mix of old values and consistency targets (the seed's ``value_opt=grad``)."""
        assert self.value_optimizer is not None
        with th.no_grad():
            values, log_prob, final_values, _ = self._evaluate(self.policy, batch)
            targets = value_targets(self._consistency(batch, values, log_prob, final_values, tau))
            intended = self.value_mix * targets + (1.0 - self.value_mix) * values
        n_steps, n_paths = batch.mask.shape
        obs = batch.observations.reshape(n_steps * n_paths, *batch.observations.shape[2:])
        n_valid = batch.mask.sum()
        loss = th.zeros(())
        for _ in range(self.value_gradient_steps):
            prediction = self.policy.predict_values(obs).reshape(n_steps, n_paths)
            loss = (batch.mask * (prediction - intended) ** 2).sum() / n_valid
            self.value_optimizer.zero_grad()
            loss.backward()
            self.value_optimizer.step()
        return loss.item()

    def _before_training_iteration(self) -> None:
        """Hook run once per training iteration, before the gradient steps (Trust-PCL adapts lambda here)."""

    def train(self, gradient_steps: int, batch_size: int = 32) -> None:
        """
        One training iteration: update the target network, then train on the online batch (optional) and on replay batches.

        :param gradient_steps: number of replay batches
        :param batch_size: segments per replay batch
        """
        self.policy.set_training_mode(True)
        optimizers = [self.policy.optimizer]
        self._update_learning_rate(optimizers)
        tau = self.tau_schedule(self._current_progress_remaining)
        polyak_update(self.policy.parameters(), self.policy_target.parameters(), 1.0 - self.target_network_lag)
        self._before_training_iteration()
        if isinstance(self.policy, UnifiedPolicy):  # V(s) = (tau + lambda) * logsumexp(logits)
            self.policy.temperature = self.policy_target.temperature = tau + self.relative_entropy_coef  # type: ignore[assignment]

        batches: list[PathBatch] = []
        if self.use_online_batch and self._steps_since_train > 0:
            online = self.replay_buffer.recent_segments(self._steps_since_train, env=self._vec_normalize_env)
            if online is not None:
                batches.append(online)
        self._steps_since_train = 0
        for _ in range(gradient_steps):
            batches.append(self.replay_buffer.sample(batch_size, env=self._vec_normalize_env))

        history: dict[str, list[float]] = {}
        for batch in batches:
            for key, value in self._train_on_batch(batch, tau).items():
                history.setdefault(key, []).append(value)
        self._n_updates += len(batches)

        for key, values in history.items():
            self.logger.record(f"train/{key}", float(np.mean(values)))
        self.logger.record("train/tau", tau)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/buffer_size", self.replay_buffer.size())
        self.logger.record("train/buffer_paths", self.replay_buffer.n_paths)
        if batches and self._uses_target_policy():
            self.logger.record("train/kl_to_target", self._kl_to_target(batches[-1]))

    def _uses_target_policy(self) -> bool:
        """:return: whether acting or learning depends on the target network (then ``train/kl_to_target`` is logged)"""
        return self.relative_entropy_coef > 0 or self.sample_from == "target" or self.use_target_values

    def _kl_to_target(self, batch: PathBatch) -> float:
        """Mean ``KL(pi_target || pi)`` over the valid states of a batch."""
        obs = batch.observations.reshape(-1, *batch.observations.shape[2:])[batch.mask.reshape(-1).bool()]
        with th.no_grad():
            kl = kl_divergence(self.policy_target.get_distribution(obs), self.policy.get_distribution(obs))
        if kl.dim() > 1:
            kl = kl.sum(dim=-1)
        return kl.mean().item()

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
        return super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)

    def learn(
        self: SelfPCL,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: str = "PCL",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfPCL:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )

    # ------------------------------------------------------------------ saving
    def load_replay_buffer(self, path: str | pathlib.Path | io.BufferedIOBase, truncate_last_traj: bool = True) -> None:
        """
        Load a replay buffer saved with :meth:`save_replay_buffer`.

        :param path: the file
        :param truncate_last_traj: unused (kept for SB3's signature)
        """
        buffer = load_from_pkl(path, self.verbose)
        if not isinstance(buffer, PathReplayBuffer):
            raise ValueError(f"{path} does not hold a PathReplayBuffer (found {type(buffer).__name__})")
        buffer.device = self.device
        self.replay_buffer = buffer

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "policy_target", "value_optimizer"]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts = ["policy", "policy.optimizer", "policy_target"]
        if self.value_optimizer_name is not None:
            state_dicts.append("value_optimizer")
        return state_dicts, []
