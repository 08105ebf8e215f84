"""
UREX and REINFORCE (MENT) on the Copy task with the LSTM policy: 4 start states x K=4 samples per batch.

Each run takes about 15 s on one core; both usually reach the end of the curriculum (inputs of 30 symbols).
"""

import os

import torch as th
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_pcl import RecurrentReinforce, RecurrentUREX
from sb3_pcl.envs import CurriculumLogCallback, SharedCurriculum, make_algorithmic_vec_env

# training budget (the test suite sets SB3_PCL_EXAMPLE_STEPS to run the examples quickly)
STEPS = int(os.environ.get("SB3_PCL_EXAMPLE_STEPS", "100000"))

if __name__ == "__main__":
    th.set_num_threads(1)  # the networks are tiny: more threads only add overhead
    for algo_class, ent_coef in ((RecurrentUREX, 0.1), (RecurrentReinforce, 0.01)):
        # n_envs = (number of start states) x num_samples; each group of num_samples envs shares its start state,
        # so all envs share one curriculum (the input length grows after enough perfect episodes)
        venv = make_algorithmic_vec_env("sb3_pcl/Copy-v0", n_envs=16, seed=0, env_kwargs={"render_mode": "ansi"})
        env = SharedCurriculum(venv, first_episode_only=True)
        model = algo_class(
            "MlpPrevActionLstmPolicy", env, num_samples=4, ent_coef=ent_coef, learning_rate=0.01, seed=0, verbose=1
        )
        # verbose=1 prints the batch returns and rollout/min_length (the curriculum length) every 100 batches
        model.learn(STEPS, log_interval=100, callback=CurriculumLogCallback())
        eval_env = make_algorithmic_vec_env("sb3_pcl/Copy-v0", n_envs=1, seed=1000, env_kwargs={"render_mode": "ansi"})
        mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=20, deterministic=True)
        print(
            f"{algo_class.__name__} on Copy: curriculum length {env.min_length} (of 30), "
            f"mean return {mean_return:.2f} on inputs of the starting length"
        )
