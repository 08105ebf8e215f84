"""
How a trained policy writes the third copy of RepeatCopy: by reading the tape or from memory.

RepeatCopy's target is ``x + reversed(x) + x``. After the reversed copy the read head stands on the
blank left of the input. A policy that generalises to any length turns there (one step without
writing) and copies the input again while reading it, as in the first pass. A policy can also keep
moving left over blank cells and write the third copy from its recurrent memory: the same reward
at the short lengths of the curriculum's start, but its memory has to grow with the length.

This script plays sampled episodes (the policy as it acts in training) at given curriculum lengths
and reports, per length: the share of perfect episodes, the share of the third copy's writes made
with the read head on an input cell (``reading``; the rest are written over blanks, from memory),
and where failed episodes failed (which copy, wrong symbol or time limit).

.. code-block:: bash

    python -m benchmarks.repeatcopy_strategy --model path/to/urex_model.zip --lengths 5 10 15 20 \\
        --episodes 200 --out benchmarks/results/some_folder/strategy.json
    # train first (the harness's hyperparameters and seeding, algorithmic VecEnv), save to --model, then play
    python -m benchmarks.repeatcopy_strategy --train urex+tau03 --seed 1 --steps 12000000 \\
        --model /tmp/urex_tau03_seed1.zip --lengths 5 10 --episodes 200
"""

from __future__ import annotations

import argparse
import collections
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import sb3_pcl
from sb3_pcl.envs.algorithmic import RepeatCopyEnv


def play(model: Any, length: int, episodes: int, seed: int = 0) -> dict[str, Any]:
    """
    Sampled episodes of ``model`` on RepeatCopy with the curriculum at ``length``.

    :param model: A trained recurrent model of this package (``predict`` with a state)
    :param length: Curriculum ``min_length`` (inputs of ``length`` to ``length + 2`` symbols)
    :param episodes: Number of episodes
    :param seed: Seed of the episodes' inputs
    :return: ``perfect`` (share of perfect episodes), ``third_copy_reading`` (share of the third copy's
        writes made with the head on the input), ``failures`` (count per ``"<copy>/<kind>"``)
    """
    env = gym.make("sb3_pcl/RepeatCopy-v0").unwrapped
    if not isinstance(env, RepeatCopyEnv):
        raise TypeError(f"expected RepeatCopyEnv, got {type(env).__name__}")
    rng = np.random.default_rng(seed)
    perfect = 0
    reading = writes = 0
    failures: collections.Counter[str] = collections.Counter()
    copies = ("first", "second", "third")
    for _ in range(episodes):
        env.min_length = length
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        n = len(env.input_data)
        state = None
        episode_start = np.ones((1,), dtype=bool)
        total = 0.0
        while True:
            action, state = model.predict(np.array([obs]), state=state, episode_start=episode_start, deterministic=False)
            episode_start[:] = False
            write_position, head = env.write_head_position, env.read_head_position
            if action[0][1] == 1 and write_position >= 2 * n:
                writes += 1
                reading += int(0 <= head < n)
            obs, reward, terminated, truncated, _ = env.step(action[0])
            total += float(reward)
            if terminated or truncated:
                if total >= len(env.target) - 1e-9:
                    perfect += 1
                else:
                    kind = "time limit" if reward == -1 else "wrong symbol"
                    failures[f"{copies[min(write_position // n, 2)]}/{kind}"] += 1
                break
    env.close()
    return {
        "length": length,
        "episodes": episodes,
        "perfect": perfect / episodes,
        "third_copy_writes": writes,
        "third_copy_reading": reading / writes if writes else float("nan"),
        "failures": dict(failures),
    }


def train_and_save(algo: str, env_id: str, seed: int, steps: float, model_path: Path) -> tuple[dict[str, Any], type]:
    """
    Train a harness algorithm (hyperparameters and seeding of :func:`benchmarks.harness.make_experiment`, algorithmic
    VecEnv) on an algorithmic task and save the model.

    :param algo: Harness name, e.g. ``urex+tau03``
    :param env_id: The task
    :param seed: Training seed
    :param steps: Training budget in env steps
    :param model_path: Where to save the model
    :return: What was trained (``algo``, ``seed``, ``steps``, final ``curriculum_length``) and the model's class
    """
    from benchmarks.harness import curriculum_length, make_experiment

    experiment = make_experiment(algo, env_id, seed, env_packages=["sb3_pcl"], vec_env="algorithmic")
    experiment.model.learn(int(steps))
    train_env = experiment.model.get_env()
    assert train_env is not None
    trained = {"algo": algo, "seed": seed, "steps": experiment.model.num_timesteps}
    trained["curriculum_length"] = curriculum_length(train_env)
    experiment.model.save(model_path)
    train_env.close()
    experiment.eval_env.close()
    return trained, type(experiment.model)


def strategy_cli(
    argv: Sequence[str] | None,
    description: str,
    env_id: str,
    play_fn: Callable[[Any, int, int, int], dict[str, Any]],
    format_row: Callable[[dict[str, Any]], str],
) -> None:
    """
    The command line shared by the strategy scripts: optionally train and save a model, play it at the given lengths
    with ``play_fn(model, length, episodes, seed)``, print one line per length and optionally write JSON.

    :param argv: Command-line arguments (``None``: ``sys.argv``)
    :param description: The script's description
    :param env_id: The task the model is trained on with ``--train``
    :param play_fn: Plays sampled episodes at one length and returns a JSON-able row (with ``length``)
    :param format_row: The printed line of a row
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", required=True, help="saved model (.zip) of a sb3_pcl algorithm")
    parser.add_argument("--algo", default="urex", choices=sorted(sb3_pcl.ALGOS), help="its algorithm")
    parser.add_argument("--lengths", type=int, nargs="+", required=True, help="curriculum lengths to play")
    parser.add_argument("--episodes", type=int, default=200, help="episodes per length")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs (and of the training with --train)")
    parser.add_argument("--out", type=Path, help="JSON file for the results (printed in any case)")
    parser.add_argument("--train", metavar="ALGO", help="train first (harness name, e.g. urex+tau03), save to --model")
    parser.add_argument("--steps", type=float, default=1e7, help="training budget with --train")
    args = parser.parse_args(argv)
    trained = None
    algo_class = sb3_pcl.ALGOS[args.algo]
    if args.train is not None:
        from benchmarks.harness import split_variant

        trained, algo_class = train_and_save(args.train, env_id, args.seed, args.steps, args.model)
        args.algo = split_variant(args.train)[0]
    model = algo_class.load(args.model, device="cpu")
    results = {
        "model": str(args.model),
        "algo": args.algo,
        "trained": trained,
        "seed": args.seed,
        "lengths": [play_fn(model, length, args.episodes, args.seed) for length in args.lengths],
    }
    for row in results["lengths"]:
        print(format_row(row))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    strategy_cli(
        argv,
        __doc__.split("\n\n")[0],
        "sb3_pcl/RepeatCopy-v0",
        play,
        lambda row: (
            f"length {row['length']:>2}: perfect {row['perfect']:.2f}, third copy read from the tape "
            f"{row['third_copy_reading']:.2f}, failures {row['failures']}"
        ),
    )


if __name__ == "__main__":
    main()
