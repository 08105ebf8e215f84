"""Trust-PCL on Pendulum-v1: the relative-entropy coefficient adapts to keep the policy near its lagged target."""

import os

from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl import TrustPCL

# training budget (the test suite sets SB3_PCL_EXAMPLE_STEPS to run the examples quickly)
STEPS = int(os.environ.get("SB3_PCL_EXAMPLE_STEPS", "50000"))

if __name__ == "__main__":
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), gamma=0.9)
    model = TrustPCL("MlpPolicy", env, gamma=0.9, max_divergence=0.001, seed=0, verbose=1)
    model.learn(STEPS, log_interval=50)
    print(f"final relative-entropy coefficient (lambda): {model.relative_entropy_coef:.4f}")
    env.training, env.norm_reward = False, False
    mean_return, std_return = evaluate_policy(model, env, n_eval_episodes=10, deterministic=True)
    print(f"Trust-PCL on Pendulum-v1: {mean_return:.1f} +/- {std_return:.1f}")
