"""Load a trained agent (e.g. saved by quickstart_pcl.py or by rl-zoo3) and run a few episodes (``--render``: on screen)."""

import argparse

import gymnasium as gym
import torch as th

import sb3_pcl

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("path", help="model zip, e.g. pcl_cartpole.zip or logs/pcl/CartPole-v1_1/CartPole-v1.zip")
    parser.add_argument("--algo", default="pcl", choices=sorted(sb3_pcl.ALGOS))
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--render", action="store_true", help="open a window (needs pygame and a display)")
    args = parser.parse_args()

    th.set_num_threads(1)
    model = sb3_pcl.ALGOS[args.algo].load(args.path)
    env = gym.make(args.env, render_mode="human" if args.render else None)
    for episode in range(args.episodes):
        obs, _ = env.reset(seed=episode)
        state, episode_start, total, done = None, True, 0.0, False
        while not done:
            # state / episode_start are used by recurrent policies and ignored by the others
            action, state = model.predict(obs, state=state, episode_start=episode_start, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total, episode_start, done = total + float(reward), False, terminated or truncated
        print(f"episode {episode}: return {total:.1f}")
