"""
Quick training run: ``python -m sb3_pcl [--algo pcl] [--env CartPole-v1] [--steps N] [--seed S]``.

Trains one of our algorithms with the tuned hyperparameters of ``hyperparams/<algo>.yml``
(when the env has an entry; the algorithm's defaults otherwise), then prints the mean
deterministic evaluation return over ``--eval-episodes`` episodes. The algorithmic tasks
(``sb3_pcl/Copy-v0``, ...) train on :class:`sb3_pcl.envs.AlgorithmicVecEnv`.
"""

import argparse
import contextlib
import importlib
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecNormalize, sync_envs_normalization

import sb3_pcl
from sb3_pcl.envs import ALGORITHMIC_ENV_IDS, AlgorithmicVecEnv
from sb3_pcl.hyperparams_files import load_hyperparams


class ProgressLine(BaseCallback):
    """
    Print one line every ``interval`` seconds of training: steps, env steps per second and the mean return of the last
    100 training episodes.

    :param total_timesteps: the step budget
    :param interval: seconds between two lines
    """

    def __init__(self, total_timesteps: int, interval: float = 5.0):
        super().__init__()
        self.total_timesteps, self.interval = total_timesteps, interval
        self._start = self._last = 0.0

    def _on_training_start(self) -> None:
        self._start = self._last = time.perf_counter()

    def _on_step(self) -> bool:
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            self.print_line(now)
        return True

    def _on_training_end(self) -> None:
        self.print_line(time.perf_counter())

    def print_line(self, now: float) -> None:
        """Print the progress at time ``now`` (``time.perf_counter()``)."""
        elapsed = max(now - self._start, 1e-9)
        episodes = [float(info["r"]) for info in self.model.ep_info_buffer or []]
        recent = f"{np.mean(episodes):.1f}" if episodes else "-"
        steps = self.model.num_timesteps
        print(
            f"{elapsed:5.0f}s  steps {steps:>9,}/{self.total_timesteps:,}  {steps / elapsed:6.0f} steps/s  "
            f"return (last {len(episodes)} episodes) {recent}",
            flush=True,
        )


def writable_model_path(path: str) -> Path:
    """
    Check, before training, that a model can be saved to ``path`` (as SB3's ``save`` writes it: ``.zip`` appended to a
    path without a suffix, missing parent folders created), by creating the folders and opening the file for writing
    (a file that did not exist is removed again).

    :param path: the ``--save`` argument
    :return: the file the model will be written to
    :raises ValueError: naming the path and why it cannot be written (a folder, a parent that is a file, no permission,
        a read-only file system)
    """
    target = Path(path)
    if target.suffix == "":
        target = target.with_name(f"{target.name}.zip")
    if target.is_dir():
        raise ValueError(f"--save {path}: {target} is a folder, not a model file")
    existed = target.exists()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("ab"):
            pass
    except OSError as error:
        raise ValueError(f"--save {path}: cannot write the model to {target} ({error.strerror or error})") from error
    if not existed:
        target.unlink()
    return target


def main(argv: list[str] | None = None) -> float:
    """
    Parse the command line, train, evaluate and print the result.

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: the mean evaluation return
    """
    parser = argparse.ArgumentParser(prog="python -m sb3_pcl", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--algo", default="pcl", choices=sorted(sb3_pcl.ALGOS))
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: n_timesteps of the yml entry)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--save", default=None, help="save the trained model to this path")
    parser.add_argument("--verbose", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (default: 1, the fastest for small networks on CPU)"
    )
    parser.add_argument("--log-interval", type=float, default=5.0, help="seconds between progress lines (default: 5)")
    args = parser.parse_args(argv)
    if args.threads < 1 or not args.log_interval > 0:
        parser.error("--threads must be >= 1 and --log-interval > 0")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be a positive number of training steps, got {args.steps}")
    if args.eval_episodes < 1:
        parser.error(f"--eval-episodes must be a positive number of episodes, got {args.eval_episodes}")
    save_path = None
    if args.save:
        try:  # before training: a path that cannot be written would otherwise lose the trained model
            save_path = writable_model_path(args.save)
        except ValueError as error:
            parser.error(str(error))
    th.set_num_threads(args.threads)

    algo_class = sb3_pcl.ALGOS[args.algo]
    if args.env not in gym.registry:
        # rl-zoo3's extra envs (e.g. the velocity-masked CartPoleNoVel-v1) are registered by importing this module
        with contextlib.suppress(ImportError):
            importlib.import_module("rl_zoo3.import_envs")
    entry = load_hyperparams(args.algo, args.env)
    hyperparams = entry.kwargs
    steps = args.steps if args.steps is not None else int(entry.n_timesteps or 100_000)
    # the algorithmic tasks train on AlgorithmicVecEnv: the same results as DummyVecEnv, in less time
    vec_env_cls = AlgorithmicVecEnv if args.env in ALGORITHMIC_ENV_IDS else DummyVecEnv
    # the entry's wrappers in rl-zoo3's order: env_wrapper (each env), vec_env_wrapper, VecNormalize, frame_stack
    wrapper_class = entry.wrap_env if entry.env_wrappers else None
    env = make_vec_env(
        args.env,
        n_envs=entry.n_envs,
        seed=args.seed,
        env_kwargs=entry.env_kwargs,
        wrapper_class=wrapper_class,
        vec_env_cls=vec_env_cls,  # type: ignore[arg-type]  # any VecEnv class with DummyVecEnv's constructor
    )
    for wrapper, wrapper_kwargs in entry.vec_env_wrappers:  # e.g. SharedCurriculum for the algorithmic tasks
        env = wrapper(env, **wrapper_kwargs)
    if entry.normalize is not None:
        env = VecNormalize(env, gamma=hyperparams.get("gamma", 0.99), **entry.normalize)
    if entry.frame_stack is not None:
        env = VecFrameStack(env, entry.frame_stack)
    model = algo_class(env=env, seed=args.seed, verbose=args.verbose, **hyperparams)
    callbacks = [callback(**callback_kwargs) for callback, callback_kwargs in entry.callbacks]
    print(
        f"Training {algo_class.__name__} on {args.env} for {steps} steps (seed {args.seed}, {args.threads} torch thread"
        f"{'s' if args.threads > 1 else ''}) with {hyperparams}",
        flush=True,
    )
    start = time.perf_counter()
    model.learn(steps, callback=[*callbacks, ProgressLine(steps, args.log_interval)])
    elapsed = time.perf_counter() - start
    eval_env = make_vec_env(
        args.env, n_envs=1, seed=args.seed + 1000, env_kwargs=entry.env_kwargs, wrapper_class=wrapper_class
    )
    if entry.normalize is not None:
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    if entry.frame_stack is not None:
        eval_env = VecFrameStack(eval_env, entry.frame_stack)
    if entry.normalize is not None:
        sync_envs_normalization(env, eval_env)  # the two envs have the same wrappers, in the same order
    result = evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True)
    mean_return, std_return = float(result[0]), float(result[1])  # type: ignore[arg-type]
    print(f"Evaluation return over {args.eval_episodes} episodes: {mean_return:.1f} +/- {std_return:.1f}")
    print(f"Training took {elapsed:.1f}s")
    if save_path is not None:
        model.save(save_path)
        print(f"Saved to {save_path}")
    return float(mean_return)


if __name__ == "__main__":
    main()
