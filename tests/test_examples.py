"""The example scripts run end to end (with a tiny training budget), against this checkout's sb3_pcl."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, cwd: Path, *args: str, steps: int = 1500, env: dict[str, str] | None = None) -> str:
    env = {
        **os.environ,
        "SB3_PCL_EXAMPLE_STEPS": str(steps),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    command = ["bash", str(EXAMPLES / name)] if name.endswith(".sh") else [sys.executable, str(EXAMPLES / name)]
    result = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.repo
def test_examples_are_tested():
    tested = {
        "quickstart_pcl.py",
        "load_and_run.py",
        "callbacks_tensorboard.py",
        "quickstart_trust_pcl.py",
        "quickstart_urex.py",
        "zoo_train.sh",
    }
    assert {path.name for path in EXAMPLES.iterdir()} == tested


def verdict_matches_the_return(out: str, label: str, threshold: float) -> bool:
    """:return: whether the example's last line says "solved" exactly when the return it printed reaches ``threshold``"""
    match = re.search(rf"{re.escape(label)}: (-?[\d.]+) \+/- [\d.]+: (solved|not solved)", out)
    assert match, f"no verdict line for {label} in {out[-500:]}"
    return (float(match[1]) >= threshold) == (match[2] == "solved")


def test_the_verdict_is_read_from_the_number():
    assert verdict_matches_the_return("Trust-PCL on Acrobot-v1: -99.0 +/- 1.0: solved", "Trust-PCL on Acrobot-v1", -100)
    assert not verdict_matches_the_return("Trust-PCL on Acrobot-v1: -106.8 +/- 51.7: solved", "Trust-PCL on Acrobot-v1", -100)


def test_quickstart_pcl_then_load_and_run(tmp_path):
    out = run_example("quickstart_pcl.py", tmp_path)
    assert verdict_matches_the_return(out, "PCL on CartPole-v1", 475)
    assert (tmp_path / "pcl_cartpole.zip").is_file()
    out = run_example("load_and_run.py", tmp_path, "pcl_cartpole.zip", "--episodes", "2")
    assert out.count("return") == 2


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="needs tensorboard")
def test_callbacks_tensorboard(tmp_path):
    run_example("callbacks_tensorboard.py", tmp_path, steps=3000)
    assert (tmp_path / "logs" / "evaluations.npz").is_file() and any((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_quickstart_trust_pcl(tmp_path):
    out = run_example("quickstart_trust_pcl.py", tmp_path, steps=2000)
    assert verdict_matches_the_return(out, "Trust-PCL on Acrobot-v1", -100) and "lambda" in out


@pytest.mark.slow
def test_quickstart_urex(tmp_path):
    out = run_example("quickstart_urex.py", tmp_path, steps=2000)
    assert "UREX on Copy" in out and "Reinforce on Copy" in out


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("rl_zoo3") is None or shutil.which("optuna") is None, reason="needs the zoo extra"
)
def test_zoo_train_script(tmp_path):
    budgets = {"STEPS": "500", "TRIALS": "1", "OPT_STEPS": "300", "LOGS": str(tmp_path / "logs")}
    run_example("zoo_train.sh", tmp_path, env=budgets)
    assert (tmp_path / "logs" / "pcl").is_dir() and (tmp_path / "logs" / "ppo").is_dir()


def test_zoo_train_script_fails_when_an_optuna_worker_fails(tmp_path):
    """The script's commands replaced by stand-ins on PATH: only the second Optuna worker fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = '#!/usr/bin/env bash\ncase "$*" in *worker2*--optimize*) exit 3 ;; esac\nexit 0\n'
    for name in ("python", "optuna"):
        (bin_dir / name).write_text(stand_in)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "LOGS": str(tmp_path / "logs")}
    result = subprocess.run(
        ["bash", str(EXAMPLES / "zoo_train.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "1 Optuna worker(s) failed" in result.stderr
    (bin_dir / "python").write_text("#!/usr/bin/env bash\nexit 0\n")  # every worker succeeds: the script does too
    result = subprocess.run(
        ["bash", str(EXAMPLES / "zoo_train.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
