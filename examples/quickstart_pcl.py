"""Train PCL on CartPole-v1 with an evaluation callback and TensorBoard logging, save, reload and run it."""

import os

from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_pcl import PCL

# training budget (the test suite sets SB3_PCL_EXAMPLE_STEPS to run the examples quickly)
STEPS = int(os.environ.get("SB3_PCL_EXAMPLE_STEPS", "100000"))

if __name__ == "__main__":
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=1000)
    model = PCL("MlpPolicy", env, seed=0, verbose=1, tensorboard_log="runs/")
    model.learn(STEPS, callback=EvalCallback(eval_env, eval_freq=10_000, n_eval_episodes=5), progress_bar=True)
    model.save("pcl_cartpole")

    model = PCL.load("pcl_cartpole", env=env)
    mean_return, std_return = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    print(f"PCL on CartPole-v1: {mean_return:.1f} +/- {std_return:.1f}")
