"""Trust-PCL on Acrobot-v1 (about a minute on one core): lambda adapts to keep the policy near its lagged target."""

import os

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pcl import TrustPCL

# training budget (the test suite sets SB3_PCL_EXAMPLE_STEPS to run the examples quickly)
STEPS = int(os.environ.get("SB3_PCL_EXAMPLE_STEPS", "20000"))

if __name__ == "__main__":
    th.set_num_threads(1)  # the networks are tiny: more threads only add overhead
    # the Acrobot-v1 entry of hyperparams/trust_pcl.yml: 4 envs, normalised observations and rewards
    env = VecNormalize(make_vec_env("Acrobot-v1", n_envs=4, seed=0))
    model = TrustPCL("MlpPolicy", env, train_freq=2, ent_coef=0.01, max_divergence=0.01, seed=0, verbose=1)
    # verbose=1 prints train/lambda, train/kl_to_target and the episode returns every 20 episodes
    model.learn(STEPS, log_interval=20, progress_bar=True)
    print(f"final relative-entropy coefficient (lambda): {model.relative_entropy_coef:.4f}")
    env.training, env.norm_reward = False, False
    mean_return, std_return = evaluate_policy(model, env, n_eval_episodes=10, deterministic=True)
    # gym's reward threshold for Acrobot-v1 is -100: the verdict is read from the return just printed
    verdict = "solved" if mean_return >= -100 else "not solved (the threshold is -100)"
    print(f"Trust-PCL on Acrobot-v1: {mean_return:.1f} +/- {std_return:.1f}: {verdict}")
