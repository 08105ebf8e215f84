"""
Reinforce and UREX with a recurrent policy (the LSTM of the original code), as sb3-contrib splits PPO / RecurrentPPO.

The batch, the bonus, the baseline, the loss and the training step are those of the feed-forward classes; what
differs is how the policy plays and evaluates the episodes of a batch. While playing, the LSTM state is carried from
step to step in every env (reset where an episode starts). For the loss, each env's episode is a prefix of its
``T`` steps that starts from a zero state, so the LSTM runs over all ``T`` steps of every env in one fused call;
the steps after an episode's end are evaluated too, do not change the earlier ones (the LSTM is causal), and are
masked out.
"""

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, PyTorchObs, Schedule

from sb3_pcl.common.recurrent.policies import initial_recurrent_states
from sb3_pcl.recurrent_reinforce.policies import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy
from sb3_pcl.reinforce.episodes import EpisodeBatch
from sb3_pcl.reinforce.reinforce import Reinforce
from sb3_pcl.urex.urex import UREX

SelfRecurrentReinforce = TypeVar("SelfRecurrentReinforce", bound="RecurrentReinforce")
SelfRecurrentUREX = TypeVar("SelfRecurrentUREX", bound="RecurrentUREX")


class RecurrentReinforce(Reinforce):
    """
    Reinforce (MENT) with a recurrent policy: ``MlpPrevActionLstmPolicy`` (an LSTM fed with the observation and the
    previous action, the policy of the original code), ``CnnPrevActionLstmPolicy`` (the same after SB3's
    ``NatureCNN``), or another sb3-contrib ``RecurrentActorCriticPolicy`` class.

    The policy carries its recurrent state through each episode of a batch; ``predict`` takes and returns the state
    (``state``, ``episode_start``) as sb3-contrib's recurrent policies do. Everything else is
    :class:`~sb3_pcl.Reinforce`'s. Models saved by ``Reinforce`` with a recurrent policy (sb3_pcl < 0.3) load with
    ``RecurrentReinforce.load``.

    :param policy: ``MlpPrevActionLstmPolicy``, ``CnnPrevActionLstmPolicy`` or a recurrent policy class (the former
        names ``MlpLstmPolicy`` / ``CnnLstmPolicy`` work, with a ``DeprecationWarning``, for one release)
    :param env: an env or VecEnv whose ``reset(seed=...)`` determines the episode (``Box``, ``Discrete``,
        ``MultiDiscrete`` or ``MultiBinary`` observations: the recurrent policies take no ``Dict`` space)

    The other parameters are :class:`~sb3_pcl.Reinforce`'s, with its defaults.
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPrevActionLstmPolicy": MlpPrevActionLstmPolicy,
        "CnnPrevActionLstmPolicy": CnnPrevActionLstmPolicy,
    }
    supports_dict_observations = False
    policy: RecurrentActorCriticPolicy  # type: ignore[assignment]

    def __init__(
        self,
        policy: str | type[RecurrentActorCriticPolicy],
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

    def _check_hyperparameters(self) -> None:
        if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, RecurrentActorCriticPolicy)):
            feed_forward = type(self).__name__.removeprefix("Recurrent")
            raise ValueError(
                f"{type(self).__name__} takes recurrent policies ('MlpPrevActionLstmPolicy', 'CnnPrevActionLstmPolicy' "
                f"or an sb3-contrib RecurrentActorCriticPolicy class), got "
                f"{getattr(self.policy_class, '__name__', self.policy_class)}: use {feed_forward} for a feed-forward policy"
            )
        super()._check_hyperparameters()

    def _upgrade_old_save(self) -> None:
        """
        Read a model that ``Reinforce`` or ``UREX`` saved with a recurrent policy (sb3_pcl < 0.3, before the recurrent
        classes): it is this class's model (a ``UREX`` file is ``RecurrentUREX``'s, which ``load`` checks next).
        """
        super()._upgrade_old_save()
        saved_by = getattr(self, "_saved_by", None)
        if saved_by in ("Reinforce", "UREX"):
            self._saved_by = f"Recurrent{saved_by}"

    def _play_step(
        self, obs: PyTorchObs, state: RNNStates | None, episode_starts: np.ndarray
    ) -> tuple[th.Tensor, th.Tensor, RNNStates]:
        """
        Sample one action per env at one step of a batch's pass, carrying the recurrent state.

        :param obs: the envs' observations, as tensors on the policy's device
        :param state: the recurrent states returned by the previous step (``None`` at the first step: zero states)
        :param episode_starts: ``(n_envs,)`` 1.0 where an env starts an episode at this step (its state is reset)
        :return: the sampled actions, their log-probabilities, and the recurrent states for the next step
        """
        if state is None:
            state = initial_recurrent_states(self.policy, len(episode_starts))
        starts = th.as_tensor(episode_starts, dtype=th.float32, device=self.device)
        actions, _, log_prob, state = self.policy(obs, state, starts)
        return actions, log_prob, state

    def _evaluate_batch(self, batch: EpisodeBatch) -> tuple[th.Tensor, th.Tensor]:
        """
        Log-probabilities and entropies of the batch's actions under the current policy (with gradients): the LSTM
        runs over the ``T`` steps of every env from a zero state, without a reset (one fused call, sequence-major as
        sb3-contrib's ``evaluate_actions`` expects).

        :param batch: the episodes
        :return: ``(T, N)`` log-probabilities and entropies (zero on masked steps)
        """
        observations, actions = batch.observations, batch.actions
        n_steps, n_envs = observations.shape[:2]
        obs = th.as_tensor(observations.swapaxes(0, 1).reshape(n_envs * n_steps, *observations.shape[2:]), device=self.device)
        flat_actions = th.as_tensor(actions.swapaxes(0, 1).reshape(n_envs * n_steps, *actions.shape[2:]), device=self.device)
        if isinstance(self.action_space, (spaces.Discrete, spaces.MultiDiscrete)):
            flat_actions = flat_actions.long()
        elif isinstance(self.action_space, spaces.Box):
            flat_actions = flat_actions.reshape(n_envs * n_steps, -1)  # SB3's distributions take flat Box actions
        starts = th.zeros(n_envs * n_steps, device=self.device)
        initial = initial_recurrent_states(self.policy, n_envs)
        _, log_prob, entropy = self.policy.evaluate_actions(obs, flat_actions, initial, starts)
        mask = th.as_tensor(batch.mask, device=self.device) > 0
        zeros = th.zeros(mask.shape, device=self.device)
        log_prob, entropy = log_prob.reshape(n_envs, n_steps).T, entropy.reshape(n_envs, n_steps).T
        return th.where(mask, log_prob, zeros), th.where(mask, entropy, zeros)

    def learn(
        self: SelfRecurrentReinforce,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int | None = 1,
        tb_log_name: str = "RecurrentReinforce",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfRecurrentReinforce:
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class RecurrentUREX(RecurrentReinforce, UREX):
    """
    UREX with a recurrent policy: :class:`~sb3_pcl.UREX`'s bonus ``tau * K * softmax_K(R / tau - L)`` on
    :class:`RecurrentReinforce`'s recurrent episodes. Models saved by ``UREX`` with a recurrent policy (sb3_pcl < 0.3)
    load with ``RecurrentUREX.load``.

    :param policy: ``MlpPrevActionLstmPolicy``, ``CnnPrevActionLstmPolicy`` or a recurrent policy class (the former
        names ``MlpLstmPolicy`` / ``CnnLstmPolicy`` work, with a ``DeprecationWarning``, for one release)
    :param ent_coef: the temperature ``tau``, a finite float > 0 or a schedule of the remaining progress (see
        :class:`~sb3_pcl.UREX`)

    The other parameters are :class:`~sb3_pcl.Reinforce`'s, with its defaults.
    """

    def __init__(
        self,
        policy: str | type[RecurrentActorCriticPolicy],
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

    def learn(
        self: SelfRecurrentUREX,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int | None = 1,
        tb_log_name: str = "RecurrentUREX",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfRecurrentUREX:
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
