"""
PCL and Trust-PCL with a recurrent policy (the LSTM of the original code), as sb3-contrib splits PPO / RecurrentPPO.

Replay design: every sampled segment is re-evaluated by replaying its path from the path's first step
(``RecurrentPathBatch.history``, sampled from a :class:`~sb3_pcl.common.recurrent.buffers.RecurrentPathReplayBuffer`)
with the current parameters, so the recurrent state at the segment is exact; the loss only uses the segment's steps.
Storing states at collection time would be cheaper but stale: they were computed by older parameters (and by the
target network with ``sample_from="target"``), which biases the log-probabilities the consistency is built from.
Episodes of the tasks that need memory are short (algorithmic tasks, CartPoleNoVel: <= 500 steps) and the replay is
one fused LSTM call, so the exact choice is affordable.
"""

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import MaybeCallback

from sb3_pcl.common.actions import to_env_actions
from sb3_pcl.common.path_buffer import PathBatch, PathReplayBuffer
from sb3_pcl.common.recurrent.buffers import RecurrentPathBatch, RecurrentPathReplayBuffer
from sb3_pcl.common.statistics import masked_mean, state_kl
from sb3_pcl.pcl.pcl import PCL
from sb3_pcl.recurrent_pcl.policies import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy, UnifiedMlpLstmPolicy
from sb3_pcl.trust_pcl.trust_pcl import TrustPCL

SelfRecurrentPCL = TypeVar("SelfRecurrentPCL", bound="RecurrentPCL")
SelfRecurrentTrustPCL = TypeVar("SelfRecurrentTrustPCL", bound="RecurrentTrustPCL")


class RecurrentPCL(PCL):
    """
    PCL with a recurrent policy: ``MlpPrevActionLstmPolicy`` (an LSTM fed with the observation and the previous
    action), ``CnnPrevActionLstmPolicy`` (the same after SB3's ``NatureCNN``) or ``UnifiedMlpLstmPolicy`` (its Unified
    PCL variant). The former names ``MlpLstmPolicy`` / ``CnnLstmPolicy`` work, with a ``DeprecationWarning``, for one
    release.

    The acting policy carries its LSTM state per env during collection (reset at episode starts); training replays
    each sampled segment's path from its first step, so the replay keeps whole path histories
    (:class:`~sb3_pcl.common.recurrent.buffers.RecurrentPathReplayBuffer`, the default ``replay_buffer_class``, or a
    subclass; ``PathReplayBuffer``, which models saved by earlier versions record, is read as it). The value is a head
    on the LSTM shared with the policy, so it is fitted jointly (``value_fit="joint"``) and the policy moves by
    gradient steps (``policy_step="gradient"``). Every other argument is :class:`~sb3_pcl.PCL`'s.
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPrevActionLstmPolicy": MlpPrevActionLstmPolicy,
        "CnnPrevActionLstmPolicy": CnnPrevActionLstmPolicy,
        "UnifiedMlpLstmPolicy": UnifiedMlpLstmPolicy,
    }
    supports_dict_observations = False
    policy: MlpPrevActionLstmPolicy  # type: ignore[assignment]
    policy_target: MlpPrevActionLstmPolicy  # type: ignore[assignment]
    #: recurrent state ``(h, c, previous action input)`` of the acting policy in each env
    _collection_state: tuple[th.Tensor, ...] | None = None

    def _check_hyperparameters(self) -> None:
        name = type(self).__name__
        if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, MlpPrevActionLstmPolicy)):
            raise ValueError(
                f"{name} supports one recurrent policy, 'MlpPrevActionLstmPolicy' (sb3_pcl.common.recurrent), and its "
                "subclasses (not sb3-contrib's MlpLstmPolicy, whose LSTM reads the observation only); "
                f"got {getattr(self.policy_class, '__name__', self.policy_class)}"
            )
        if self.policy_step != "gradient":
            raise ValueError(f"policy_step={self.policy_step!r} is not supported by {name}: use policy_step='gradient'")
        if self.value_fit != "joint":
            raise ValueError(
                f"value_fit={self.value_fit!r} is not supported by {name} (its value is a head on the LSTM shared with "
                "the policy): use value_fit='joint' (weight vf_coef)"
            )
        super()._check_hyperparameters()

    def _configure_replay_buffer(self) -> None:
        if self.replay_buffer_class in (None, PathReplayBuffer):  # the default, or what earlier versions saved
            self.replay_buffer_class = RecurrentPathReplayBuffer  # type: ignore[assignment]
        elif not (
            isinstance(self.replay_buffer_class, type) and issubclass(self.replay_buffer_class, RecurrentPathReplayBuffer)
        ):
            raise ValueError(
                f"replay_buffer_class must be a RecurrentPathReplayBuffer subclass (sb3_pcl.common.recurrent.buffers) "
                f"with a recurrent policy, got {self.replay_buffer_class}: segments are evaluated by replaying their "
                "path from its first step"
            )
        super()._configure_replay_buffer()

    def _sample_action(self, learning_starts: int, action_noise: Any = None, n_envs: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """
        One collection step: the acting policy's state is carried per env and reset at episode starts.

        The acting policy (the online one, or the target with ``sample_from="target"``) runs its LSTM at every step,
        also during the uniformly random warm-up, and the action actually taken (random or sampled) becomes its
        previous-action input: after ``learning_starts`` the state is the one the stored path leads to. Training
        never reads this state (the replay rebuilds it), it only drives acting.

        :param learning_starts: uniformly random actions before this many steps (unless ``use_policy_at_warmup``)
        :param action_noise: unused (always ``None``)
        :param n_envs: number of envs
        :return: the env's actions and the actions as sampled, ``(n_envs, *action_shape)``
        """
        assert self._last_obs is not None
        acting = self.policy_target if self.sample_from == "target" else self.policy
        state = self._collection_state
        if self._last_episode_starts is None:
            starts = np.ones(n_envs, dtype=np.float32)
        else:
            starts = np.asarray(self._last_episode_starts, dtype=np.float32).reshape(n_envs)
        if state is None or state[0].shape[1] != n_envs:
            state, starts = acting.initial_state(n_envs), np.ones(n_envs, dtype=np.float32)
        random_actions = None
        if self.num_timesteps < learning_starts and not self.use_policy_at_warmup:
            random_actions = th.as_tensor(np.array([self.action_space.sample() for _ in range(n_envs)]), device=self.device)
        obs_tensor, _ = acting.obs_to_tensor(self._last_obs)
        with th.no_grad():
            actions, _, self._collection_state = acting.act(
                obs_tensor,  # type: ignore[arg-type]
                state,
                th.as_tensor(starts, device=self.device),
                actions=random_actions,
            )
        sampled = actions.cpu().numpy().reshape((n_envs, *(self.action_space.shape or ())))
        return to_env_actions(self.policy, self.action_space, sampled, self.clip_actions), sampled

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

    def _evaluate(self, policy: MlpPrevActionLstmPolicy, batch: PathBatch) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]:  # type: ignore[override]
        """
        Replay each segment's path from its first step and read the segment's steps.

        The LSTM runs over ``batch.history`` (:class:`~sb3_pcl.common.recurrent.buffers.PathHistory`: the path from
        its start to the segment's final state) from a zero state; the action distribution and the values are read at
        the rows of the segment's steps (padding reads its last valid step) and the final value at the row after its
        last step.

        :param policy: the online or the target policy
        :param batch: segments with their path history
        :return: values ``(T, B)``, log-probabilities ``(T, B)``, final values ``(B,)`` (zero when terminated) and
            the action distribution of the ``T * B`` steps, flattened time-major like the batch
        """
        if not isinstance(batch, RecurrentPathBatch):
            raise ValueError(
                f"A recurrent policy needs batches that carry the path history (RecurrentPathBatch), got a "
                f"{type(batch).__name__}: sample them from a RecurrentPathReplayBuffer"
            )
        history = batch.history
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

    def _log_prob(self, policy: MlpPrevActionLstmPolicy, batch: PathBatch) -> tuple[th.Tensor, Any]:  # type: ignore[override]
        """:return: log-probabilities and the action distribution, as :meth:`_evaluate` (the replay reads the values too)"""
        _, log_prob, _, distribution = self._evaluate(policy, batch)
        return log_prob, distribution

    def _kl_to_target(self, batch: PathBatch, distribution: Any = None, target: Any = None) -> th.Tensor:
        """:return: the mean ``KL(pi_target || pi)`` over the valid steps of a batch, both replayed from the path starts
        after the iteration's updates (``distribution`` and ``target`` are not used)"""
        with th.no_grad():
            target_distribution = self._evaluate(self.policy_target, batch)[3]
            distribution = self._evaluate(self.policy, batch)[3]
            kl = state_kl(target_distribution, distribution)
        return masked_mean(kl, batch.mask.reshape(-1))

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_collection_state"]

    def learn(
        self: SelfRecurrentPCL,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: str = "RecurrentPCL",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfRecurrentPCL:
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class RecurrentTrustPCL(RecurrentPCL, TrustPCL):
    """
    Trust-PCL with a recurrent policy: :class:`~sb3_pcl.TrustPCL`'s adaptive relative entropy on
    :class:`RecurrentPCL`'s exact path replay. Every argument is :class:`~sb3_pcl.TrustPCL`'s.
    """

    def learn(
        self: SelfRecurrentTrustPCL,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: str = "RecurrentTrustPCL",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfRecurrentTrustPCL:
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
