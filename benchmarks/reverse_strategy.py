"""
Where a trained policy fails on Reverse: writing before it has read the tape to its end, or after.

Reverse's target is the input reversed. A policy that generalises to any length reads the tape to its
end (the blank right of the input) without writing, turns, and writes each symbol it reads on the way
back. Writing before the turn guesses the last symbol of the input: right half of the time in base 2.

This script plays sampled episodes (the policy as it acts in training) at given curriculum lengths and
reports, per length: the share of perfect episodes, how many writes were made before the read head had
first reached the blank (``early_writes``, with the share of them that were right) and where failed
episodes failed: a wrong write ``before`` or ``after`` the turn, or the time limit.

.. code-block:: bash

    python -m benchmarks.reverse_strategy --model path/to/pcl_model.zip --algo pcl --lengths 5 10 20 \\
        --episodes 200
    # train first (the harness's hyperparameters and seeding, algorithmic VecEnv), save to --model, then play
    python -m benchmarks.reverse_strategy --train pcl+experttau01 --seed 0 --steps 1200000 \\
        --model /tmp/pcl_reverse.zip --lengths 6 9 --episodes 100
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from benchmarks.repeatcopy_strategy import strategy_cli
from sb3_pcl.envs.algorithmic import ReverseEnv


def play(model: Any, length: int, episodes: int, seed: int = 0) -> dict[str, Any]:
    """
    Sampled episodes of ``model`` on Reverse with the curriculum at ``length``.

    :param model: A trained recurrent model of this package (``predict`` with a state)
    :param length: Curriculum ``min_length`` (inputs of ``length`` to ``length + 2`` symbols)
    :param episodes: Number of episodes
    :param seed: Seed of the episodes' inputs
    :return: ``perfect`` (share of perfect episodes), ``early_writes`` (writes before the head first reached the
        blank right of the input), ``early_writes_right`` (the share of those that were correct; ``None`` without
        any), ``failures``
        (count per ``"before turn/wrong symbol"``, ``"after turn/wrong symbol"`` or ``"time limit"``)
    """
    env = gym.make("sb3_pcl/Reverse-v0").unwrapped
    if not isinstance(env, ReverseEnv):
        raise TypeError(f"expected ReverseEnv, got {type(env).__name__}")
    rng = np.random.default_rng(seed)
    perfect = early = early_right = 0
    failures: collections.Counter[str] = collections.Counter()
    for _ in range(episodes):
        env.min_length = length
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        n = len(env.input_data)
        state = None
        episode_start = np.ones((1,), dtype=bool)
        total = 0.0
        turned = False
        while True:
            action, state = model.predict(np.array([obs]), state=state, episode_start=episode_start, deterministic=False)
            episode_start[:] = False
            turned = turned or env.read_head_position >= n
            obs, reward, terminated, truncated, _ = env.step(action[0])
            total += float(reward)
            if action[0][1] == 1 and not turned and reward != -1:
                early += 1
                early_right += int(reward > 0)
            if terminated or truncated:
                if total >= len(env.target) - 1e-9:
                    perfect += 1
                elif reward == -1:
                    failures["time limit"] += 1
                else:
                    failures[f"{'after' if turned else 'before'} turn/wrong symbol"] += 1
                break
    env.close()
    return {
        "length": length,
        "episodes": episodes,
        "perfect": perfect / episodes,
        "early_writes": early,
        "early_writes_right": early_right / early if early else None,
        "failures": dict(failures),
    }


def main(argv: Sequence[str] | None = None) -> None:
    strategy_cli(
        argv,
        __doc__.split("\n\n")[0],
        "sb3_pcl/Reverse-v0",
        play,
        lambda row: (
            f"length {row['length']:>2}: perfect {row['perfect']:.2f}, writes before the turn {row['early_writes']}"
            + (f" ({row['early_writes_right']:.2f} right)" if row["early_writes"] else "")
            + f", failures {row['failures']}"
        ),
    )


if __name__ == "__main__":
    main()
