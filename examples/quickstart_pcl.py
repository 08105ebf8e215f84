"""Train PCL on CartPole-v1 (about 40 s on one core), save it, reload it and evaluate it."""

import os

import torch as th
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_pcl import PCL

# training budget (the test suite sets SB3_PCL_EXAMPLE_STEPS to run the examples quickly)
STEPS = int(os.environ.get("SB3_PCL_EXAMPLE_STEPS", "30000"))

if __name__ == "__main__":
    th.set_num_threads(1)  # the networks are tiny: more threads only add overhead
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=1000)
    # a constant learning rate: over a short run it learns faster than the default, which decays from 3e-3 to 0 over
    # the learn call (chosen at 100k steps: benchmarks/results/defaults_study)
    model = PCL("MlpPolicy", env, learning_rate=3e-3, ent_coef=0.01, seed=0)
    # the progress bar shows the steps, the evaluation callback prints the return every STEPS // 6 steps
    evaluation = EvalCallback(eval_env, eval_freq=max(STEPS // 6, 1), n_eval_episodes=5, verbose=1)
    model.learn(STEPS, callback=evaluation, progress_bar=True)
    model.save("pcl_cartpole")

    model = PCL.load("pcl_cartpole", env=env)
    mean_return, std_return = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    # gym's reward threshold for CartPole-v1 is 475 (500 is the maximum): the verdict is read from the return printed
    verdict = "solved" if mean_return >= 475 else "not solved (the threshold is 475)"
    print(f"PCL on CartPole-v1: {mean_return:.1f} +/- {std_return:.1f}: {verdict}")
