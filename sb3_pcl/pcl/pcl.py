"""Path Consistency Learning (Nachum et al., 2017) as a Stable-Baselines3 algorithm."""

import copy
import io
import os
import pathlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.save_util import load_from_pkl
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, RolloutReturn, Schedule
from stable_baselines3.common.utils import FloatSchedule, LinearSchedule, explained_variance, polyak_update
from stable_baselines3.common.vec_env import VecEnv

from sb3_pcl.common.actions import to_env_actions
from sb3_pcl.common.buffers import EVICTION_STRATEGIES, PRIORITY_MODES, PathBatch, PathReplayBuffer
from sb3_pcl.common.consistency import (
    Consistency,
    consistency_loss,
    path_consistency,
    pcl_policy_loss,
    pcl_value_loss,
    value_targets,
)
from sb3_pcl.common.demonstrations import check_episodes, load_episodes
from sb3_pcl.common.schedules import parse_schedule
from sb3_pcl.common.trust_region import ridge_regression, squared_consistency_objective, state_kl, trust_region_step
from sb3_pcl.common.validation import fail_hyperparameter
from sb3_pcl.envs.curriculum import share_curriculum
from sb3_pcl.envs.expert import SEED_EXPERT_MIN_LENGTHS, expert_episodes_for_vec_env, expert_task
from sb3_pcl.pcl.policies import CnnPolicy, MlpLstmPolicy, MlpPolicy, UnifiedLstmPolicy, UnifiedPolicy, UnifiedValue

SelfPCL = TypeVar("SelfPCL", bound="PCL")

VALUE_OPTIMIZERS = (None, "grad", "best_fit", "lbfgs")
POLICY_OPTIMIZERS = ("adam", "trust_region")
TRUST_REGION_LOSSES = ("consistency", "surrogate")
#: PCL's default learning rate: linear decay from 1e-3 to 0 over a ``learn`` call
DEFAULT_LEARNING_RATE = LinearSchedule(1e-3, 0.0, 1.0)
SAMPLE_FROM = ("online", "target")


class _NoiseControl:
    """
    The gSDE controls that SB3's :meth:`OffPolicyAlgorithm.collect_rollouts` and its logs expect of ``model.actor``.

    New noise matrices are drawn for the online and the target policy alike, so that either can act
    (``sample_from``); the logged standard deviation is the online policy's.

    :param model: the PCL model
    """

    def __init__(self, model: "PCL"):
        self._model = model

    def reset_noise(self, n_envs: int = 1) -> None:
        """:param n_envs: number of envs (one noise matrix each)"""
        self._model.policy.reset_noise(n_envs)
        self._model.policy_target.reset_noise(n_envs)

    def get_std(self) -> th.Tensor:
        """:return: the online policy's gSDE standard deviations, ``(latent_dim, action_dim)``"""
        policy = self._model.policy
        return policy.action_dist.get_std(policy.log_std)  # type: ignore[attr-defined]


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

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``, ``MlpLstmPolicy``, the Unified PCL policies
        ``UnifiedMlpPolicy`` and ``UnifiedMlpLstmPolicy`` (Discrete or MultiDiscrete actions, one network whose
        action logits also give the value) or an ActorCriticPolicy subclass)
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
        progress, callable or string (``"lin_0.1"``, ``"lin_0.1_0.01"``, ``"exp_0.1_0.001"``:
        :func:`~sb3_pcl.common.schedules.parse_schedule`; the seed's ``tau_decay`` is an ``exp_`` schedule)
    :param train_freq: collect this many steps (per env) between training iterations, or a tuple ``(n, "step"|"episode")``
    :param gradient_steps: replay batches per training iteration (-1: as many as env steps collected; 0 with
        ``use_online_batch``: train on the online batch only, on-policy)
    :param max_segment_length: maximal length of a sampled segment (``None``: whole paths)
    :param critic_weight: weight of the value surrogate in the joint loss
    :param clip_adv: clip the consistency residual used as gradient weight to ``[-clip_adv, clip_adv]`` (``None``: no clipping)
    :param max_grad_norm: clip the global gradient norm (``None``: no clipping)
    :param target_network_lag: polyak coefficient of the target network, updated once per
        training iteration: ``target <- lag * target + (1 - lag) * online``
    :param sample_from: act with the ``"online"`` or the lagged ``"target"`` policy while collecting
    :param use_online_batch: also train on the segments collected in the last iteration
    :param value_optimizer: ``None`` trains the value jointly with the policy (``critic_weight``);
        the others fit it separately after each policy step, toward the targets
        ``value_mix * (V(s_t) + C(t)) + (1 - value_mix) * V_old(s_t)`` on the batch's valid steps (the
        seed's ``value_opt``): ``"grad"``, ``value_gradient_steps`` Adam steps on the value parameters;
        ``"best_fit"``, the ridge least-squares solution for the weight and bias of the value
        network's last linear layer on the features of its last hidden layer (the hidden layers are
        not trained); ``"lbfgs"``, ``torch.optim.LBFGS`` on the value parameters, at most
        ``value_gradient_steps`` iterations (strong-Wolfe line search), fresh for every batch
    :param value_learning_rate: learning rate of the ``"grad"`` value optimiser
    :param value_gradient_steps: Adam steps (``"grad"``) or L-BFGS iterations (``"lbfgs"``) of the separate value fit per batch
    :param value_mix: weight of the consistency target in the separate value regression
    :param value_reg_coef: ridge coefficient ``rho > 0`` of the ``"best_fit"`` value regression
    :param policy_optimizer: ``"adam"``, gradient steps with the policy's optimiser (``optimizer_class``,
        Adam by default, learning rate ``learning_rate``); ``"trust_region"``, one natural-gradient
        step per batch on the policy parameters (the seed's ``trust_region_p``): conjugate gradient
        on the Fisher matrix of the mean ``KL(pi_old || pi)`` over the batch's valid states, a step
        whose quadratic KL estimate is ``target_kl``, then a backtracking line search that accepts
        the first step lowering the loss with a measured KL ``<= target_kl`` (else no change). It
        needs a separate ``value_optimizer``; ``learning_rate`` and ``max_grad_norm`` do not apply
        to its steps
    :param trust_region_loss: the loss of the trust-region step: ``"consistency"``, PCL's objective
        ``mean_b sum_t C(t)^2 / 2`` (Huber with ``clip_adv``; the seed's choice; needs
        ``tau + relative_entropy_coef > 0``, else it does not depend on the policy), or
        ``"surrogate"``, the policy surrogate ``-mean_b sum_t C_old(t) sum_i gamma^i log pi`` with
        ``C`` fixed at the old parameters. Both have the same gradient direction at the old parameters
    :param target_kl: the trust-region size: the largest ``KL(pi_old || pi_new)`` of a trust-region
        step, averaged over the batch's valid states (the seed's ``max_divergence``)
    :param cg_max_steps: conjugate-gradient iterations of the trust-region step
    :param cg_damping: damping added to the Fisher matrix, ``(F + cg_damping I) x = g``
    :param line_search_max_iter: trials of the backtracking line search
    :param line_search_shrinking_factor: factor in ``(0, 1)`` shrinking the step between line-search trials
    :param replay_alpha: sharpness of the prioritised path sampling (0: uniform)
    :param replay_priority: ``"step"`` (recency) or ``"return"`` (path return)
    :param replay_eviction: ``"fifo"``, ``"rand"`` or ``"rank"``
    :param relative_entropy_coef: ``lambda``, the weight of ``log pi - log pi_target`` in the
        consistency (0 for PCL; Trust-PCL sets and adapts it)
    :param start_windows: add the ``d - 1`` shorter windows that start at the first state of each segment (seed behaviour)
    :param use_target_values: bootstrap the far end of the windows, ``V(s_{t+k})`` and the final value
        ``V(s_L)``, from the lagged target value network instead of the online one (``V(s_t)`` stays online)
    :param use_sde: explore with SB3's generalised state-dependent noise (gSDE, ``Box`` actions only): the policy's
        action distribution becomes a Gaussian whose standard deviation depends on the state (on the last hidden
        features of the policy network), and with ``policy_kwargs=dict(squash_output=True)`` its samples are squashed
        by ``tanh`` into the action bounds. The consistency reads ``log pi`` of that distribution, so it stays exact
        whatever the noise matrix that drew the action
    :param sde_sample_freq: with ``use_sde``, draw a new noise matrix every this many env steps (``-1``: only at the
        start of each collection of ``train_freq`` steps). 1 makes the exploration a Markov policy equal to ``pi``
        itself; larger values correlate the noise in time (PCL learns from any behaviour, so both are valid)
    :param expert_paths: number of scripted expert episodes (:func:`~sb3_pcl.envs.expert.expert_episodes_for_vec_env`)
        seeded into the replay at the start of the first ``learn``; only for the algorithmic tasks (``sb3_pcl/Copy-v0``, ...).
        As in the original code their inputs have 2 to 10 symbols, whatever the training env's curriculum length
    :param demonstrations: an episodes ``.npz`` file (:func:`~sb3_pcl.common.demonstrations.save_episodes`) whose
        episodes are seeded into the replay at the start of the first ``learn`` (see :meth:`add_demonstrations`)
    :param shared_curriculum: when the envs have a curriculum (the algorithmic tasks of :mod:`sb3_pcl.envs`), wrap
        the env in :class:`~sb3_pcl.envs.curriculum.SharedCurriculum` (unless it already is): all envs then share one
        curriculum, as in gym <= 0.17.2, which the original code trained with. ``False``: each env promotes itself after
        its own ``last`` perfect episodes, and the envs' lengths drift apart
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
        "MlpLstmPolicy": MlpLstmPolicy,
        "UnifiedMlpLstmPolicy": UnifiedLstmPolicy,
    }
    policy: ActorCriticPolicy
    policy_target: ActorCriticPolicy
    replay_buffer: PathReplayBuffer  # type: ignore[assignment]
    #: recurrent state ``(h, c, previous action input)`` of the acting policy in each env (``MlpLstmPolicy`` only)
    _collection_state: tuple[th.Tensor, ...] | None = None

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
        tau: float | Schedule | str = 0.01,
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
        start_windows: bool = True,
        use_target_values: bool = False,
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
        # OffPolicyAlgorithm calls its polyak coefficient ``tau``; in PCL ``tau`` is the entropy coefficient.
        self.tau = parse_schedule("tau", tau)  # type: ignore[assignment]
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
        self.value_reg_coef = value_reg_coef
        self.policy_optimizer_name = policy_optimizer
        self.trust_region_loss = trust_region_loss
        self.target_kl = target_kl
        self.cg_max_steps = cg_max_steps
        self.cg_damping = cg_damping
        self.line_search_max_iter = line_search_max_iter
        self.line_search_shrinking_factor = line_search_shrinking_factor
        self.replay_alpha = replay_alpha
        self.replay_priority = replay_priority
        self.replay_eviction = replay_eviction
        self.relative_entropy_coef = relative_entropy_coef
        self.start_windows = start_windows
        self.use_target_values = use_target_values
        self.expert_paths = expert_paths
        self.demonstrations = demonstrations
        self.shared_curriculum = shared_curriculum
        #: whether the current replay holds the ``expert_paths`` / ``demonstrations`` episodes (never saved)
        self._replay_seeded = False
        self._steps_since_train = 0
        self._check_hyperparameters()
        self._check_demonstration_settings()

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
        self._check_optimizer_hyperparameters()

    def _check_optimizer_hyperparameters(self) -> None:
        """Raise a ``ValueError`` naming the first invalid hyperparameter of the policy / value optimisers."""

        def fail(name: str, value: Any, allowed: str) -> None:
            raise ValueError(f"{name} must be {allowed}, got {value!r}")

        def is_int(value: Any) -> bool:
            return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

        if self.policy_optimizer_name not in POLICY_OPTIMIZERS:
            fail("policy_optimizer", self.policy_optimizer_name, f"one of {POLICY_OPTIMIZERS}")
        if self.trust_region_loss not in TRUST_REGION_LOSSES:
            fail("trust_region_loss", self.trust_region_loss, f"one of {TRUST_REGION_LOSSES}")
        if not (isinstance(self.target_kl, (int, float)) and 0.0 < self.target_kl < float("inf")):
            fail("target_kl", self.target_kl, "a finite float > 0")
        if not is_int(self.cg_max_steps) or self.cg_max_steps < 1:
            fail("cg_max_steps", self.cg_max_steps, "an integer >= 1")
        if not (isinstance(self.cg_damping, (int, float)) and 0.0 <= self.cg_damping < float("inf")):
            fail("cg_damping", self.cg_damping, "a finite float >= 0")
        if not is_int(self.line_search_max_iter) or self.line_search_max_iter < 1:
            fail("line_search_max_iter", self.line_search_max_iter, "an integer >= 1")
        if not (isinstance(self.line_search_shrinking_factor, (int, float)) and 0.0 < self.line_search_shrinking_factor < 1.0):
            fail("line_search_shrinking_factor", self.line_search_shrinking_factor, "in (0, 1)")
        if not (isinstance(self.value_reg_coef, (int, float)) and 0.0 < self.value_reg_coef < float("inf")):
            fail("value_reg_coef", self.value_reg_coef, "a finite float > 0")
        if self.policy_optimizer_name == "trust_region":
            if self.value_optimizer_name is None:
                raise ValueError(
                    "value_optimizer must be one of 'grad', 'best_fit', 'lbfgs' with policy_optimizer='trust_region' "
                    "(the natural-gradient step moves only the policy parameters), got None"
                )
            no_entropy = not callable(self.tau) and self.tau == 0 and self.relative_entropy_coef == 0
            if self.trust_region_loss == "consistency" and no_entropy:
                raise ValueError(
                    "trust_region_loss='consistency' needs tau + relative_entropy_coef > 0 (with both 0 the squared "
                    "consistency does not depend on the policy); use trust_region_loss='surrogate'"
                )

    def _share_curriculum(self, env: VecEnv) -> VecEnv:
        """
        :param env: the training env
        :return: the env in a :class:`~sb3_pcl.envs.curriculum.SharedCurriculum` when ``shared_curriculum`` and its envs
            have a curriculum
        """
        return share_curriculum(env) if self.shared_curriculum else env

    def set_env(self, env: GymEnv, force_reset: bool = True) -> None:
        super().set_env(env, force_reset)
        assert self.env is not None
        self.env = self._share_curriculum(self.env)

    def _setup_model(self) -> None:
        if isinstance(self.observation_space, spaces.Dict):
            raise ValueError("PCL does not support Dict observation spaces (flatten them with a wrapper first)")
        self._check_recurrent_setup()
        if self.env is not None:
            self.env = self._share_curriculum(self.env)
        if self.replay_buffer_class is None:
            self.replay_buffer_class = PathReplayBuffer  # type: ignore[assignment]
        elif not issubclass(self.replay_buffer_class, PathReplayBuffer):  # type: ignore[arg-type]
            raise ValueError(f"replay_buffer_class must be a PathReplayBuffer subclass, got {self.replay_buffer_class}")
        buffer_kwargs = {
            "alpha": self.replay_alpha,
            "priority": self.replay_priority,
            "eviction": self.replay_eviction,
            "max_segment_length": self.max_segment_length,
            "replay_from_start": self._recurrent_policy_class(),
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
        if isinstance(self.policy, UnifiedValue):
            name = type(self.policy).__name__
            if self.value_optimizer_name is not None:
                raise ValueError(f"value_optimizer must be None with {name} (its value has no separate parameters)")
            if self.policy_optimizer_name == "trust_region":
                raise ValueError(f"policy_optimizer='trust_region' is not supported with {name} (it needs a separate value)")
        if self.value_optimizer_name is None:
            return
        if self.value_optimizer_name == "best_fit":
            value_net = self.policy.value_net
            if not (isinstance(value_net, th.nn.Linear) and value_net.out_features == 1 and value_net.bias is not None):
                raise ValueError(
                    "value_optimizer='best_fit' needs a policy whose value_net is a torch.nn.Linear(n, 1) with a bias, "
                    f"got {value_net}"
                )
        optimizer_class: Any = self.policy.optimizer_class
        self.policy.optimizer = optimizer_class(
            self._policy_parameters(), lr=self.lr_schedule(1), **self.policy.optimizer_kwargs
        )
        if self.value_optimizer_name == "grad":  # "best_fit" and "lbfgs" keep no state between batches
            self.value_optimizer = optimizer_class(
                self._value_parameters(), lr=self.value_learning_rate, **self.policy.optimizer_kwargs
            )

    def _policy_parameters(self) -> list[th.nn.Parameter]:
        """Parameters the policy uses and the value does not own (shared layers included): what the policy step moves."""
        value_ids = {id(p) for p in self._value_parameters()}
        return [p for p in self.policy.parameters() if id(p) not in value_ids]

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
        if isinstance(self.policy, MlpLstmPolicy):
            sampled = self._sample_recurrent_action(learning_starts, n_envs)
        elif self.num_timesteps < learning_starts:
            sampled = np.array([self.action_space.sample() for _ in range(n_envs)])
            if self.policy.squash_output:  # stored as the policy would have sampled it, in [-1, 1]
                sampled = self.policy.scale_action(sampled)
        else:
            assert self._last_obs is not None
            acting = self.policy_target if self.sample_from == "target" else self.policy
            obs_tensor, _ = acting.obs_to_tensor(self._last_obs)
            with th.no_grad():
                sampled = acting._predict(obs_tensor, deterministic=False).cpu().numpy()
            action_shape: tuple[int, ...] = self.action_space.shape or ()
            sampled = sampled.reshape((n_envs, *action_shape))
        return to_env_actions(self.policy, self.action_space, sampled), sampled

    @property
    def actor(self) -> "_NoiseControl":  # type: ignore[override]  # SB3 declares a module; it only calls these two
        """What SB3's off-policy collection calls with ``use_sde``: ``reset_noise`` and ``get_std``."""
        return _NoiseControl(self)

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
        if isinstance(policy, MlpLstmPolicy):
            return self._evaluate_recurrent(policy, batch)
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
        loss = policy_loss if self.value_optimizer_name is not None else policy_loss + self.critic_weight * value_loss
        if self.policy_optimizer_name == "trust_region":
            # The policy reuses its distribution object: keep this one's parameters for the statistics below.
            distribution = copy.copy(distribution)
            step_stats = self._policy_step_trust_region(batch, tau, consistency)
        else:
            step_stats = self._policy_step_gradient(loss)
        grad_norm = step_stats.pop("grad_norm")

        mask = batch.mask.reshape(-1).bool()
        entropy = distribution.entropy()
        if entropy is None:  # no closed form (tanh-squashed gSDE): a one-sample estimate at each state
            with th.no_grad():
                entropy = -distribution.log_prob(distribution.sample())
        stats = {
            "consistency_loss": consistency_loss(consistency).item(),
            "mean_sq_consistency": (consistency.residual.detach() ** 2).sum().item() / consistency.mask.sum().item(),
            "mean_abs_consistency": consistency.residual.detach().abs().sum().item() / consistency.mask.sum().item(),
            "policy_loss": policy_loss.item(),
            "value_loss": value_loss.item(),
            "entropy": entropy[mask].mean().item() if entropy is not None else float("nan"),
            "grad_norm": float(grad_norm),
            **step_stats,
        }
        targets = value_targets(consistency)
        valid = batch.mask.bool()
        stats["explained_variance"] = float(
            explained_variance(values.detach()[valid].cpu().numpy(), targets[valid].cpu().numpy())
        )
        if self.value_optimizer_name is not None:
            stats["value_fit_loss"] = self._fit_values_separately(batch, tau)
        return stats

    def _fit_values(self, batch: PathBatch, tau: float) -> float:
        """Separate value optimisation toward a mix of old values and consistency targets (the seed's ``value_opt=grad``)."""
        assert self.value_optimizer is not None
        obs, intended = self._value_regression_targets(batch, tau)
        n_steps, n_paths = batch.mask.shape
        n_valid = batch.mask.sum()
        loss = th.zeros(())
        for _ in range(self.value_gradient_steps):
            prediction = self.policy.predict_values(obs).reshape(n_steps, n_paths)
            loss = (batch.mask * (prediction - intended) ** 2).sum() / n_valid
            self.value_optimizer.zero_grad()
            loss.backward()
            self.value_optimizer.step()
        return loss.item()

    # ------------------------------------------------------------------ policy and value optimisers
    def _policy_step_gradient(self, loss: th.Tensor) -> dict[str, float]:
        """
        One step of the policy's optimiser (Adam by default) on ``loss``, global gradient norm clipped to ``max_grad_norm``.

        :param loss: the policy surrogate (plus the value surrogate when the value is trained jointly)
        :return: ``{"grad_norm": norm before clipping}``
        """
        self.policy.optimizer.zero_grad()
        loss.backward()
        max_norm = self.max_grad_norm if self.max_grad_norm is not None else float("inf")
        grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)
        self.policy.optimizer.step()
        return {"grad_norm": float(grad_norm)}

    def _policy_step_trust_region(self, batch: PathBatch, tau: float, consistency: Consistency) -> dict[str, float]:
        """
        One trust-region step on the policy parameters (:func:`~sb3_pcl.common.trust_region.trust_region_step`).

        The loss is ``trust_region_loss``, re-evaluated on ``batch`` at every trial point; the
        divergence is the mean ``KL(pi_old || pi)`` over the batch's valid steps, ``pi_old`` the
        policy before the step. When the line search accepts no step the parameters are kept.

        :param batch: the path segments
        :param tau: current entropy coefficient
        :param consistency: the consistency at the current parameters (its ``C`` weights the ``"surrogate"`` loss)
        :return: ``grad_norm``, ``kl`` (measured, 0 if no step), ``line_search_success`` (1 or 0),
            ``step_size`` (fraction of the full step taken), ``step_norm``, ``line_search_trials`` and
            ``trust_region_improvement`` (decrease of the loss)
        """
        # The divergence needs only the action distribution at the valid steps (not the values, nor the padding).
        valid_obs = self._valid_observations(batch)
        with th.no_grad():  # pi_old, a constant; copied because the policy reuses its distribution object
            old_distribution = copy.copy(self.policy.get_distribution(valid_obs))
        old_residual = consistency.residual.detach()

        def loss_fn() -> th.Tensor:
            values, log_prob, final_values, _ = self._evaluate(self.policy, batch)
            current = self._consistency(batch, values, log_prob, final_values, tau)
            if self.trust_region_loss == "consistency":
                return squared_consistency_objective(current, self.clip_adv)
            return pcl_policy_loss(current._replace(residual=old_residual), self.clip_adv)

        def kl_fn() -> th.Tensor:
            return state_kl(old_distribution, self.policy.get_distribution(valid_obs)).mean()

        result = trust_region_step(
            loss_fn,
            kl_fn,
            self._policy_parameters(),
            max_kl=self.target_kl,
            cg_max_steps=self.cg_max_steps,
            cg_damping=self.cg_damping,
            line_search_max_iter=self.line_search_max_iter,
            line_search_shrinking_factor=self.line_search_shrinking_factor,
        )
        if not result.accepted and self.verbose >= 2:
            print(f"PCL trust region: no step accepted after {result.n_trials} trials, policy unchanged")
        return {
            "grad_norm": result.grad_norm,
            "kl": result.kl,
            "line_search_success": float(result.accepted),
            "step_size": result.step_size,
            "step_norm": result.step_norm,
            "line_search_trials": float(result.n_trials),
            "trust_region_improvement": result.loss_before - result.loss_after,
        }

    def _fit_values_separately(self, batch: PathBatch, tau: float) -> float:
        """
        Fit the value with the separate ``value_optimizer`` (``"grad"``, ``"best_fit"`` or ``"lbfgs"``).

        :param batch: the path segments
        :param tau: current entropy coefficient
        :return: the mean squared regression error after the fit
        """
        if self.value_optimizer_name == "best_fit":
            return self._fit_values_best_fit(batch, tau)
        if self.value_optimizer_name == "lbfgs":
            return self._fit_values_lbfgs(batch, tau)
        return self._fit_values(batch, tau)

    def _value_regression_targets(self, batch: PathBatch, tau: float) -> tuple[th.Tensor, th.Tensor]:
        """
        The separate value fit's data: the flat observations and ``value_mix * (V + C) + (1 - value_mix) * V_old``.

        :param batch: the path segments
        :param tau: current entropy coefficient
        :return: observations ``(T * B, ...)`` and targets ``(T, B)`` (constants)
        """
        with th.no_grad():
            values, log_prob, final_values, _ = self._evaluate(self.policy, batch)
            targets = value_targets(self._consistency(batch, values, log_prob, final_values, tau))
            intended = self.value_mix * targets + (1.0 - self.value_mix) * values
        n_steps, n_paths = batch.mask.shape
        obs = batch.observations.reshape(n_steps * n_paths, *batch.observations.shape[2:])
        return obs, intended

    def _value_features(self, obs: th.Tensor) -> th.Tensor:
        """
        The input of the value network's last linear layer (``policy.value_net``) for each observation.

        :param obs: flat observations ``(N, ...)``
        :return: ``(N, n_features)``, without gradient
        """
        captured: list[th.Tensor] = []
        hook = self.policy.value_net.register_forward_hook(lambda _module, inputs, _output: captured.append(inputs[0]))
        try:
            with th.no_grad():
                self.policy.predict_values(obs)
        finally:
            hook.remove()
        return captured[-1].detach()

    def _fit_values_best_fit(self, batch: PathBatch, tau: float) -> float:
        """
        ``value_optimizer="best_fit"``: ridge least squares of the last value layer on the batch's valid steps.

        Weight and bias of ``policy.value_net`` become the solution of
        ``(X^T X + value_reg_coef I) [w; b] = X^T y`` with ``X = [features, 1]``
        (:func:`~sb3_pcl.common.trust_region.ridge_regression`); when no finite solution exists they are kept.

        :param batch: the path segments
        :param tau: current entropy coefficient
        :return: the mean squared regression error after the fit
        """
        obs, intended = self._value_regression_targets(batch, tau)
        valid = batch.mask.reshape(-1).bool()
        features = self._value_features(obs)[valid]
        targets = intended.reshape(-1)[valid]
        if features.shape[0] <= features.shape[1] + 1:
            warnings.warn(
                f"value_optimizer='best_fit' fits {features.shape[1] + 1} parameters on only {features.shape[0]} valid steps: "
                "the least-squares solution interpolates the batch; sample more steps per batch "
                "(batch_size * max_segment_length well above the value network's last hidden size)",
                stacklevel=2,
            )
        solution = ridge_regression(features, targets, reg_coef=self.value_reg_coef)
        layer = self.policy.value_net
        if solution is not None:
            with th.no_grad():
                layer.weight.copy_(solution[0].reshape(layer.weight.shape))
                layer.bias.copy_(solution[1].reshape(layer.bias.shape))
        elif self.verbose >= 1:
            print("PCL best_fit: no finite least-squares solution, value layer unchanged")
        with th.no_grad():
            return float(((layer(features).reshape(-1) - targets) ** 2).mean())

    def _fit_values_lbfgs(self, batch: PathBatch, tau: float) -> float:
        """
        ``value_optimizer="lbfgs"``: ``torch.optim.LBFGS`` on the value parameters, ``<= value_gradient_steps`` iterations.

        The loss is the mean squared error to the targets over the batch's valid steps; a fresh
        optimiser (strong-Wolfe line search) is used for every batch, since its curvature memory
        belongs to one regression problem.

        :param batch: the path segments
        :param tau: current entropy coefficient
        :return: the mean squared regression error after the fit
        """
        obs, intended = self._value_regression_targets(batch, tau)
        n_steps, n_paths = batch.mask.shape
        n_valid = batch.mask.sum()
        optimizer = th.optim.LBFGS(
            self._value_parameters(), lr=1.0, max_iter=self.value_gradient_steps, line_search_fn="strong_wolfe"
        )

        def regression_loss() -> th.Tensor:
            prediction = self.policy.predict_values(obs).reshape(n_steps, n_paths)
            return (batch.mask * (prediction - intended) ** 2).sum() / n_valid

        def closure() -> th.Tensor:
            optimizer.zero_grad()
            loss = regression_loss()
            loss.backward()
            return loss

        optimizer.step(closure)  # type: ignore[no-untyped-call]
        with th.no_grad():
            return float(regression_loss())

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
        if isinstance(self.policy, UnifiedValue):  # V(s) = (tau + lambda) * sum_k logsumexp(logits_k)
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
        self.logger.record("train/seeded_paths", self.replay_buffer.n_seeded_paths)
        if batches and self._uses_target_policy():
            self.logger.record("train/kl_to_target", self._kl_to_target(batches[-1]))

    def _uses_target_policy(self) -> bool:
        """:return: whether acting or learning depends on the target network (then ``train/kl_to_target`` is logged)"""
        return self.relative_entropy_coef > 0 or self.sample_from == "target" or self.use_target_values

    @staticmethod
    def _valid_observations(batch: PathBatch) -> th.Tensor:
        """:return: the observations of the batch's valid (unpadded) steps, flattened to ``(n_valid, *obs_shape)``"""
        return batch.observations.reshape(-1, *batch.observations.shape[2:])[batch.mask.reshape(-1).bool()]

    def _kl_to_target(self, batch: PathBatch) -> float:
        """Mean ``KL(pi_target || pi)`` over the valid states of a batch."""
        if isinstance(self.policy, MlpLstmPolicy):
            return self._kl_to_target_recurrent(batch)
        obs = self._valid_observations(batch)
        with th.no_grad():
            kl = state_kl(self.policy_target.get_distribution(obs), self.policy.get_distribution(obs))
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
        self._seed_replay_once()
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

    # ------------------------------------------------------------------ demonstrations
    def _check_demonstration_settings(self) -> None:
        """Fail at construction when ``expert_paths`` / ``demonstrations`` cannot be seeded (checked again at ``learn``)."""
        n_paths = self.expert_paths
        if isinstance(n_paths, bool) or not isinstance(n_paths, (int, np.integer)) or n_paths < 0:
            fail_hyperparameter(self, "expert_paths", "an integer >= 0")
        if self.demonstrations is not None:
            if not isinstance(self.demonstrations, (str, os.PathLike)):
                fail_hyperparameter(self, "demonstrations", "None or the path of an episodes .npz file")
            if not os.path.isfile(self.demonstrations):
                raise FileNotFoundError(f"demonstrations: no episodes file at {os.fspath(self.demonstrations)!r}")
        if self.expert_paths > 0 and self.env is not None:
            expert_task(self.env)

    def add_demonstrations(self, episodes: Sequence[Mapping[str, Any]] | str | os.PathLike[str]) -> int:
        """
        Seed the replay with demonstrations: paths that are never evicted and are sampled with the top priority.

        Every episode is checked against the model's spaces first (nothing is added when one is invalid).
        Observations and rewards must be the environment's raw ones, as the replay stores the collected ones
        (with ``VecNormalize``, batches are normalised when sampled). The replay is not saved with the model:
        after ``load``, call this again (or let ``expert_paths`` / ``demonstrations`` seed the new replay).

        :param episodes: episode dicts (``observations`` ``(T + 1, *obs_shape)``, ``actions`` ``(T, *action_shape)``,
            ``rewards`` ``(T,)``, ``terminated``), e.g. from :func:`~sb3_pcl.common.demonstrations.record_episodes`
            or :func:`~sb3_pcl.envs.expert.generate_expert_episodes`, or the path of a file written by
            :func:`~sb3_pcl.common.demonstrations.save_episodes`
        :return: the number of paths added
        :raises ValueError: when an episode does not fit the model's spaces (wrong shape, action out of the action
            space, NaN, empty episode), the file is not a valid episodes file, or the demonstrations would not leave
            room in the replay for the collected paths
        :raises FileNotFoundError: when the file does not exist
        """
        if self.replay_buffer is None:
            raise ValueError("The model has no replay buffer yet: call add_demonstrations after _setup_model()")
        if isinstance(episodes, (str, os.PathLike)):
            episodes = load_episodes(episodes)
        checked = check_episodes(episodes, self.observation_space, self.action_space)
        n_transitions = sum(len(episode.rewards) for episode in checked)
        room = self.replay_buffer.buffer_size - self.replay_buffer.n_seeded_transitions - self.n_envs
        if n_transitions > room:
            raise ValueError(
                f"The demonstrations hold {n_transitions} transitions but the replay (buffer_size={self.buffer_size}, "
                f"{self.replay_buffer.n_seeded_transitions} already seeded) has room for {max(room, 0)} with one slot "
                "per env left for collection: raise buffer_size or seed fewer episodes"
            )
        buffer = self.replay_buffer
        for episode in checked:
            buffer.add_path(
                episode.observations.reshape((len(episode.observations), *buffer.obs_shape)),
                episode.actions.reshape((len(episode.rewards), buffer.action_dim)).astype(np.float32),
                episode.rewards,
                terminated=episode.terminated,
                seed=True,
            )
        return len(checked)

    def _seed_replay_once(self) -> None:
        """Add the ``demonstrations`` file's and ``expert_paths`` episodes to the replay, once per replay buffer."""
        if self._replay_seeded or (self.expert_paths == 0 and self.demonstrations is None):
            return
        episodes: list[dict[str, Any]] = []
        if self.demonstrations is not None:
            if not os.path.isfile(self.demonstrations):
                raise FileNotFoundError(
                    f"demonstrations: no episodes file at {os.fspath(self.demonstrations)!r} "
                    "(set model.demonstrations = None to learn without it)"
                )
            episodes += load_episodes(self.demonstrations)
        if self.expert_paths > 0:
            if self.env is None:
                raise ValueError("expert_paths needs the training env: pass env to load() or call set_env() before learn()")
            # A seed derived from the model's: the expert's inputs differ from the training env's first ones.
            seed = int(np.random.default_rng(self.seed).integers(2**31 - 1))
            episodes += expert_episodes_for_vec_env(
                self.env,  # type: ignore[arg-type]
                int(self.expert_paths),
                seed=seed,
                min_lengths=SEED_EXPERT_MIN_LENGTHS,
            )
        n_added = self.add_demonstrations(episodes)
        self._replay_seeded = True
        if self.verbose >= 1:
            n_steps = sum(len(episode["rewards"]) for episode in episodes)
            print(f"Seeded the replay with {n_added} demonstration paths ({n_steps} transitions)")

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
        # A recurrent policy needs the path histories, whatever the model that saved the buffer used.
        buffer.replay_from_start = bool(self.replay_buffer_kwargs.get("replay_from_start", False))
        self.replay_buffer = buffer
        self._replay_seeded = buffer.n_seeded_paths > 0

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "policy_target", "value_optimizer", "_collection_state", "_replay_seeded"]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts = ["policy", "policy.optimizer", "policy_target"]
        if self.value_optimizer_name == "grad":  # the only value optimiser with state ("best_fit", "lbfgs": none)
            state_dicts.append("value_optimizer")
        return state_dicts, []

    # ------------------------------------------------------------------ recurrent policies (MlpLstmPolicy)
    # Replay design: every sampled segment is re-evaluated by replaying its path from the path's first
    # step (``PathBatch.history``) with the current parameters, so the recurrent state at the segment is
    # exact; the loss only uses the segment's steps. Storing states at collection time would be cheaper
    # but stale: they were computed by older parameters (and by the target network with
    # ``sample_from="target"``), which biases the log-probabilities the consistency is built from.
    # Episodes of the tasks that need memory are short (algorithmic tasks, CartPoleNoVel: <= 500 steps)
    # and the replay is one fused LSTM call, so the exact choice is affordable.
    def _recurrent_policy_class(self) -> bool:
        """:return: whether the policy class is recurrent (known before the policy is built)"""
        return isinstance(self.policy_class, type) and issubclass(self.policy_class, RecurrentActorCriticPolicy)

    def _check_recurrent_setup(self) -> None:
        """Reject the combinations that recurrent policies do not support, with a ``ValueError`` naming them."""
        if not self._recurrent_policy_class():
            return
        if not issubclass(self.policy_class, MlpLstmPolicy):
            raise ValueError(
                f"{type(self).__name__} supports one recurrent policy, 'MlpLstmPolicy' (sb3_pcl.common.recurrent), "
                f"and its subclasses; got {self.policy_class.__name__}, whose recurrent state has another layout"
            )
        policy_optimizer = getattr(self, "policy_optimizer_name", "adam")
        if policy_optimizer != "adam":
            raise ValueError(
                f"policy_optimizer={policy_optimizer!r} is not supported with MlpLstmPolicy: use policy_optimizer='adam'"
            )
        if self.value_optimizer_name is not None:
            raise ValueError(
                f"value_optimizer={self.value_optimizer_name!r} is not supported with MlpLstmPolicy (its value is a head "
                "on the LSTM shared with the policy): use value_optimizer=None (joint training, critic_weight)"
            )
        if self.replay_buffer_kwargs.get("replay_from_start", True) is not True:
            raise ValueError(
                "replay_buffer_kwargs['replay_from_start'] must be True with MlpLstmPolicy: segments are evaluated "
                "by replaying their path from its first step"
            )

    def _sample_recurrent_action(self, learning_starts: int, n_envs: int) -> np.ndarray:
        """
        One collection step of a recurrent policy: the acting policy's state is carried per env and reset at episode starts.

        The acting policy (the online one, or the target with ``sample_from="target"``, which then carries its
        own state) runs its LSTM at every step, also during the uniformly random warm-up, and the action
        actually taken (random or sampled) becomes its previous-action input: after ``learning_starts`` the
        state is the one the stored path leads to. Training never reads this state (the replay rebuilds it),
        it only drives acting.

        :param learning_starts: uniformly random actions before this many steps
        :param n_envs: number of envs
        :return: the actions as sampled, ``(n_envs, *action_shape)``
        """
        assert self._last_obs is not None
        acting = self.policy_target if self.sample_from == "target" else self.policy
        assert isinstance(acting, MlpLstmPolicy)
        state = self._collection_state
        if self._last_episode_starts is None:
            starts = np.ones(n_envs, dtype=np.float32)
        else:
            starts = np.asarray(self._last_episode_starts, dtype=np.float32).reshape(n_envs)
        if state is None or state[0].shape[1] != n_envs:
            state, starts = acting.initial_state(n_envs), np.ones(n_envs, dtype=np.float32)
        random_actions = None
        if self.num_timesteps < learning_starts:
            random_actions = th.as_tensor(np.array([self.action_space.sample() for _ in range(n_envs)]), device=self.device)
        obs_tensor, _ = acting.obs_to_tensor(self._last_obs)
        with th.no_grad():
            actions, _, self._collection_state = acting.act(
                obs_tensor,  # type: ignore[arg-type]
                state,
                th.as_tensor(starts, device=self.device),
                actions=random_actions,
            )
        action_shape: tuple[int, ...] = self.action_space.shape or ()
        return actions.cpu().numpy().reshape((n_envs, *action_shape))

    def collect_rollouts(self, *args: Any, **kwargs: Any) -> RolloutReturn:
        """
        SB3's collection; then, with ``gradient_steps=0`` and ``use_online_batch``, a training iteration on the online
        batch alone (SB3's ``learn`` calls ``train`` only for ``gradient_steps > 0``): on-policy updates on the newly
        collected paths, as the original code without replay (``replay_buffer_freq=0``, e.g. the trust-region recipe).

        :param args: arguments of :meth:`OffPolicyAlgorithm.collect_rollouts`
        :param kwargs: keyword arguments of :meth:`OffPolicyAlgorithm.collect_rollouts`
        :return: the rollout summary
        """
        rollout = super().collect_rollouts(*args, **kwargs)
        if (
            rollout.continue_training
            and self.gradient_steps == 0
            and self.use_online_batch
            and self.num_timesteps > self.learning_starts
        ):
            self.train(gradient_steps=0, batch_size=self.batch_size)
        return rollout

    def _store_transition(
        self,
        replay_buffer: Any,
        buffer_action: np.ndarray,
        new_obs: np.ndarray | dict[str, np.ndarray],
        reward: np.ndarray,
        dones: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """
        Store the transition (SB3's), then remember which envs start a new episode (their recurrent state is reset).

        :param replay_buffer: the replay buffer
        :param buffer_action: the actions as sampled
        :param new_obs: next observations (first observations of the next episode where ``dones``)
        :param reward: rewards
        :param dones: episode ends
        :param infos: per-env infos
        """
        super()._store_transition(replay_buffer, buffer_action, new_obs, reward, dones, infos)
        self._last_episode_starts = np.array(dones, dtype=bool).reshape(-1)

    def _evaluate_recurrent(self, policy: MlpLstmPolicy, batch: PathBatch) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]:
        """
        :meth:`_evaluate` for a recurrent policy: replay each segment's path from its first step, read the segment's steps.

        The LSTM runs over ``batch.history`` (the path from its start to the segment's final state) from a
        zero state; the action distribution and the values are read at the rows of the segment's steps
        (padding reads its last valid step) and the final value at the row after its last step.

        :param policy: the online or the target policy
        :param batch: segments with their path history
        :return: values ``(T, B)``, log-probabilities ``(T, B)``, final values ``(B,)`` (zero when terminated) and
            the action distribution of the ``T * B`` steps, flattened time-major like the batch
        """
        history = batch.history
        if history is None:
            raise ValueError(
                "MlpLstmPolicy needs batches that carry the path history: sample them from a "
                "PathReplayBuffer(replay_from_start=True)"
            )
        n_steps, n_paths = batch.mask.shape
        latent = policy.sequence_latent(history.observations, history.actions)  # (H, B, hidden)
        lengths = batch.mask.sum(dim=0).round().long()
        steps = th.arange(n_steps, device=latent.device).unsqueeze(1)
        rows = history.offsets.unsqueeze(0) + th.minimum(steps, (lengths - 1).unsqueeze(0))  # (T, B)
        columns = th.arange(n_paths, device=latent.device)
        # Final values first: the policy's distribution object is reused by every call of its heads.
        _, final_values = policy.latent_heads(latent[history.offsets + lengths, columns])
        distribution, values = policy.latent_heads(latent[rows, columns.unsqueeze(0)].reshape(n_steps * n_paths, -1))
        actions = self._prepare_actions(batch.actions.reshape(n_steps * n_paths, -1))
        log_prob = distribution.log_prob(actions).reshape(n_steps, n_paths)
        final_values = final_values.reshape(n_paths) * (1.0 - batch.terminated)
        return values.reshape(n_steps, n_paths), log_prob, final_values, distribution

    def _kl_to_target_recurrent(self, batch: PathBatch) -> float:
        """Mean ``KL(pi_target || pi)`` over the valid steps of a batch, both policies replayed from the path starts."""
        with th.no_grad():
            target_distribution = self._evaluate(self.policy_target, batch)[3]
            distribution = self._evaluate(self.policy, batch)[3]
            kl = state_kl(target_distribution, distribution)
        return kl[batch.mask.reshape(-1).bool()].mean().item()
