"""benchmarks/experiments/diagnose.py: per-episode reward components and logged statistics of one training run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("rl_zoo3")
pytest.importorskip("mujoco")
pytest.importorskip("matplotlib")

from benchmarks.experiments import diagnose

pytestmark = pytest.mark.experiments


def test_block_summary_matches_a_loop() -> None:
    rng = np.random.default_rng(0)
    episodes = pd.DataFrame(
        {
            "timesteps": np.sort(rng.integers(1, 1000, size=40)).astype(float),
            "return": rng.normal(size=40),
            "reward_forward": rng.normal(size=40),
        }
    )
    progress = pd.DataFrame({"time/total_timesteps": np.arange(50, 1001, 50), "train/lambda": rng.normal(size=20)})
    summary = diagnose.block_summary(episodes, progress, block=300, steps=1000)
    assert list(summary["steps"]) == [300, 600, 900, 1000]
    for _, row in summary.iterrows():
        end = row["steps"]
        start = end - 300 if end < 1000 else 900
        inside = [i for i in range(40) if start < episodes["timesteps"][i] <= end]
        assert row["episodes"] == len(inside)
        assert row["reward_forward"] == pytest.approx(np.mean([episodes["reward_forward"][i] for i in inside]))
        logged = [progress["train/lambda"][i] for i in range(20) if start < progress["time/total_timesteps"][i] <= end]
        assert row["lambda"] == pytest.approx(np.mean(logged))


def test_block_summary_of_empty_blocks_is_nan() -> None:
    episodes = pd.DataFrame({"timesteps": [950.0], "return": [3.0]})
    summary = diagnose.block_summary(episodes, pd.DataFrame(), block=500, steps=1000)
    assert summary["episodes"].tolist() == [0.0, 1.0]
    assert math.isnan(summary["return"][0]) and summary["return"][1] == 3.0
    assert "lambda" not in summary


def test_diagnose_hopper(tmp_path) -> None:
    out = tmp_path / "hopper"
    diagnose.main(
        [
            "--algo",
            "trust_pcl",
            "--env",
            "Hopper-v5",
            "--steps",
            "1500",
            "--block",
            "500",
            "--eval-episodes",
            "1",
            "--hyperparams",
            "learning_starts:300",
            "--out",
            str(out),
        ]
    )
    episodes = pd.read_csv(out / "episodes.csv")
    components = ["reward_forward", "reward_ctrl", "reward_survive"]
    assert set(components) <= set(episodes.columns)
    assert len(episodes) > 10  # a random Hopper falls within tens of steps
    # Hopper-v5's reward is exactly the sum of its components
    np.testing.assert_allclose(episodes[components].sum(axis=1), episodes["return"], rtol=1e-5, atol=1e-4)
    assert set(episodes["terminated"]) <= {0.0, 1.0} and episodes["terminated"].mean() > 0.5
    assert (episodes["policy_std"] > 0).all()
    progress = pd.read_csv(out / "progress.csv")
    assert "train/lambda" in progress and "train/entropy" in progress
    text = (out / "diagnosis.md").read_text()
    assert "Diagnosis: `trust_pcl` on Hopper-v5" in text and "| 1.5k |" in text and "lambda" in text
    assert (out / "diagnosis.png").stat().st_size > 0


def test_diagnose_rejects_bad_steps(tmp_path) -> None:
    with pytest.raises(ValueError, match="steps must be positive"):
        diagnose.diagnose("trust_pcl", "Hopper-v5", 0, tmp_path)
