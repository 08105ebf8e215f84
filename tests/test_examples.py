"""The example scripts run end to end (with a tiny training budget)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, cwd: Path, *args: str, steps: int = 1500) -> str:
    env = {**os.environ, "SB3_PCL_EXAMPLE_STEPS": str(steps), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_quickstart_pcl_then_load_and_run(tmp_path):
    out = run_example("quickstart_pcl.py", tmp_path)
    assert "PCL on CartPole-v1:" in out
    assert (tmp_path / "pcl_cartpole.zip").is_file() and any((tmp_path / "runs").iterdir())
    out = run_example("load_and_run.py", tmp_path, "pcl_cartpole.zip", "--episodes", "2")
    assert out.count("return") == 2


@pytest.mark.slow
def test_callbacks_tensorboard(tmp_path):
    run_example("callbacks_tensorboard.py", tmp_path, steps=3000)
    assert (tmp_path / "logs" / "evaluations.npz").is_file()


@pytest.mark.slow
def test_quickstart_trust_pcl(tmp_path):
    out = run_example("quickstart_trust_pcl.py", tmp_path, steps=2000)
    assert "Trust-PCL on Pendulum-v1:" in out and "lambda" in out


@pytest.mark.slow
def test_quickstart_urex(tmp_path):
    out = run_example("quickstart_urex.py", tmp_path, steps=2000)
    assert "UREX on Copy" in out and "Reinforce on Copy" in out
