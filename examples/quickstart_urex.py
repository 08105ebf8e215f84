"""UREX and REINFORCE (MENT) on the Copy task with the LSTM policy: 4 start states x K=4 samples per batch."""

import os

from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

import sb3_pcl  # noqa: F401  (registers sb3_pcl/Copy-v0 and the other algorithmic tasks)
from sb3_pcl import UREX, Reinforce

# training budget (the test suite sets SB3_PCL_EXAMPLE_STEPS to run the examples quickly)
STEPS = int(os.environ.get("SB3_PCL_EXAMPLE_STEPS", "100000"))

if __name__ == "__main__":
    for algo_class, tau in ((UREX, 0.1), (Reinforce, 0.01)):
        # n_envs = (number of start states) x num_samples; each group of num_samples envs shares its start state
        env = make_vec_env("sb3_pcl/Copy-v0", n_envs=16, seed=0, env_kwargs={"render_mode": "ansi"})
        model = algo_class("MlpLstmPolicy", env, num_samples=4, tau=tau, learning_rate=0.01, seed=0, verbose=0)
        model.learn(STEPS)
        eval_env = make_vec_env("sb3_pcl/Copy-v0", n_envs=1, seed=1000, env_kwargs={"render_mode": "ansi"})
        mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=20, deterministic=True)
        print(f"{algo_class.__name__} on Copy: mean return {mean_return:.2f}")
