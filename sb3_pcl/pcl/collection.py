"""
What PCL adds to SB3's off-policy collection: :class:`PathCollection`, a base of :class:`~sb3_pcl.PCL`.

Actions are sampled by the acting policy (``sample_from``, through :class:`~sb3_pcl.pcl.actor.PCLActor`) and stored as
sampled, so that their log-probability is exact; the env's outputs are checked where they enter the algorithm; the
running paths are cut when a new ``learn`` resets the envs; and with ``gradient_steps=0`` and ``use_online_batch``
every collection is followed by an on-policy update on the segments it collected.
"""

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import MaybeCallback, RolloutReturn

from sb3_pcl.common.actions import to_env_actions
from sb3_pcl.common.path_buffer import PathReplayBuffer
from sb3_pcl.common.validation import check_budget, check_env_outputs
from sb3_pcl.pcl.actor import PCLActor

#: what to check when the env returns a value the algorithm cannot use
ENV_OUTPUT_HINT = "Check the environment (SB3's VecCheckNan wrapper raises at the step that produces the value)."


class PathCollection(OffPolicyAlgorithm):
    """SB3's :class:`OffPolicyAlgorithm` collecting paths for :class:`~sb3_pcl.PCL` (see the module's docstring)."""

    # what the algorithm provides (see :class:`~sb3_pcl.PCL`)
    policy: ActorCriticPolicy
    replay_buffer: PathReplayBuffer  # type: ignore[assignment]
    actor: PCLActor  # type: ignore[assignment]
    sample_from: str
    use_online_batch: bool
    clip_actions: bool
    use_policy_at_warmup: bool
    #: vectorised env steps collected since the last training iteration (the online batch's)
    _steps_since_train: int

    def _sample_action(
        self,
        learning_starts: int,
        action_noise: Any = None,
        n_envs: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:return: the env actions and the actions as sampled, which the replay stores (their log-probability is exact)"""
        sampled = self._sample_policy_actions(learning_starts, n_envs)
        return to_env_actions(self.policy, self.action_space, sampled, self.clip_actions), sampled

    def _sample_policy_actions(self, learning_starts: int, n_envs: int) -> np.ndarray:
        """
        :param learning_starts: random uniform actions before this many steps (unless ``use_policy_at_warmup``)
        :param n_envs: number of envs
        :return: the actions of the acting policy (``sample_from``) as sampled, ``(n_envs, *action_shape)``
        """
        if self.num_timesteps < learning_starts and not self.use_policy_at_warmup:
            sampled = np.array([self.action_space.sample() for _ in range(n_envs)])
            # stored as the policy would have sampled it: in [-1, 1] for a squashing policy
            return self.policy.scale_action(sampled) if self.policy.squash_output else sampled
        assert self._last_obs is not None
        sampled = self.actor(self._last_obs, self.sample_from).cpu().numpy()
        return sampled.reshape((n_envs, *(self.action_space.shape or ())))

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
        """
        SB3's collection; then, with ``gradient_steps=0`` and ``use_online_batch``, a training iteration on the online
        batch alone (SB3's ``learn`` calls ``train`` only for ``gradient_steps > 0``): on-policy updates on the newly
        collected paths, as the original code without replay (``replay_buffer_freq=0``).

        :param args: arguments of :meth:`OffPolicyAlgorithm.collect_rollouts`
        :param kwargs: keyword arguments of :meth:`OffPolicyAlgorithm.collect_rollouts`
        :return: the rollout summary
        """
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
                "this call of learn() only collects random-action steps and never trains. Lower learning_starts or "
                "train for more steps."
            )
        return total_timesteps, callback
