"""
PCL with SB3 callbacks (evaluation, checkpoints, early stop, a custom one) and TensorBoard logging (about 40 s).

Needs TensorBoard: ``pip install tensorboard``. Run ``tensorboard --logdir runs/`` to see ``train/consistency_loss``,
``train/entropy``, ``train/ent_coef``, ``train/explained_variance``, ``rollout/ep_rew_mean``, ``eval/mean_reward`` ...
"""

import os

import torch as th
from stable_baselines3.common.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    EvalCallback,
    StopTrainingOnRewardThreshold,
)
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import PCL


class LogBufferPaths(BaseCallback):
    """Record how many paths the replay holds at the end of every rollout."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.logger.record("custom/replay_paths", self.model.replay_buffer.n_paths)


# training budget (the test suite sets SB3_PCL_EXAMPLE_STEPS to run the examples quickly)
STEPS = int(os.environ.get("SB3_PCL_EXAMPLE_STEPS", "30000"))

if __name__ == "__main__":
    th.set_num_threads(1)  # the networks are tiny: more threads only add overhead
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=1000)
    stop = StopTrainingOnRewardThreshold(reward_threshold=475, verbose=1)
    callbacks = CallbackList(
        [
            EvalCallback(
                eval_env,
                eval_freq=max(STEPS // 10, 1),
                n_eval_episodes=10,
                callback_on_new_best=stop,
                best_model_save_path="logs/",
                log_path="logs/",
                verbose=1,
            ),
            CheckpointCallback(save_freq=max(STEPS // 4, 1), save_path="logs/checkpoints/", name_prefix="pcl"),
            LogBufferPaths(),
        ]
    )
    model = PCL("MlpPolicy", env, tensorboard_log="runs/", seed=0)
    model.learn(STEPS, callback=callbacks, progress_bar=True)
