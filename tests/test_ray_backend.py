"""Tests of the Ray backend of the benchmark harness (``python -m benchmarks.run --backend ray``)."""

import io
import json
import os
import socket
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from benchmarks import backends, checkpoint, harness
from benchmarks.run import main, run_grid

#: Two algorithms (an SB3 baseline and one of this package's), two seeds and an env that does not exist (two failures)
GRID = [
    *("--algos", "a2c", "pcl", "--envs", "CartPole-v1", "NoSuchEnv-v0", "--seeds", "0", "1", "--steps", "512"),
    *("--eval-freq", "256", "--eval-episodes", "2", "--workers", "2", "--quiet"),
]
#: The columns that do not depend on the machine's speed
SAME_COLUMNS = ["algo", "env", "seed", "timesteps", "mean_return", "std_return", "curriculum_length"]
TIME_KEYS = ("train_time_s", "train_cpu_time_s", "total_time_s", "finished")


@pytest.fixture
def ray_module() -> ModuleType:
    return pytest.importorskip("ray")


def _without_times(metadata: dict) -> dict:
    return {name: {key: value for key, value in meta.items() if key not in TIME_KEYS} for name, meta in metadata.items()}


def test_ray_backend_gives_the_local_backends_results(ray_module: ModuleType, tmp_path: Path) -> None:
    folders = {backend: tmp_path / backend for backend in backends.BACKENDS}
    for backend, out in folders.items():
        # the runs on NoSuchEnv-v0 fail: exit code 1, the other runs go on
        assert main([*GRID, "--backend", backend, "--out", str(out)]) == 1
    assert not ray_module.is_initialized()  # the local Ray instance started for the grid is shut down
    local, ray = folders["local"], folders["ray"]
    assert sorted(path.name for path in ray.iterdir()) == sorted(path.name for path in local.iterdir())
    assert sorted(path.name for path in (ray / "runs").iterdir()) == sorted(path.name for path in (local / "runs").iterdir())
    assert len(list((ray / "runs").glob("*.err"))) == 4

    # seeded runs with one torch thread: the same evaluations in a Ray worker as in a local worker process (the rows
    # of each run in the order the runs finished)
    frames = {backend: pd.read_csv(out / "evaluations.csv") for backend, out in folders.items()}
    assert len(frames["ray"]) == 4 * 3 and frames["ray"]["mean_return"].notna().all()
    same = {
        backend: frame[SAME_COLUMNS].sort_values(["algo", "env", "seed", "timesteps"], ignore_index=True)
        for backend, frame in frames.items()
    }
    pd.testing.assert_frame_equal(same["ray"], same["local"])
    metadata = {backend: json.loads((out / "run_metadata.json").read_text()) for backend, out in folders.items()}
    assert _without_times(metadata["ray"]) == _without_times(metadata["local"])
    # the failures are recorded the same way: the traceback (run on a Ray node) and its last line in results.md
    for path in (local / "runs").glob("*.err"):
        errors = [[line for line in file.read_text().splitlines() if line] for file in (path, ray / "runs" / path.name)]
        assert errors[1][0] == errors[0][0] and errors[1][-1] == errors[0][-1] == "KeyError: 'NoSuchEnv-v0'"
        assert errors[1][1].startswith("Ray node: ")
    summaries = {backend: (out / "results.md").read_text() for backend, out in folders.items()}
    failures = {backend: summary.split("## Failed runs")[1].split("## Runs")[0] for backend, summary in summaries.items()}
    assert failures["ray"] == failures["local"] and "`a2c__NoSuchEnv-v0__seed1`: KeyError: 'NoSuchEnv-v0'" in failures["ray"]

    invocation = json.loads((ray / "config.json").read_text())["invocations"][-1]
    assert invocation["backend"] == "ray" and invocation["runs_executed"] == 8
    assert invocation["ray"]["address"] == "local" and invocation["ray"]["nodes"] == 1 and invocation["ray"]["cpus"] == 2
    assert json.loads((local / "config.json").read_text())["invocations"][-1]["backend"] == "local"

    # resume: the finished runs are skipped, nothing left to run, no Ray instance is needed
    grid = [arg for arg in GRID if arg != "NoSuchEnv-v0"]
    assert main([*grid, "--backend", "ray", "--out", str(ray), "--skip-existing"]) == 0
    invocation = json.loads((ray / "config.json").read_text())["invocations"][-1]
    assert invocation["runs_executed"] == 0 and "ray" not in invocation
    pd.testing.assert_frame_equal(pd.read_csv(ray / "evaluations.csv"), frames["ray"])


def test_remote_task_returns_the_files_and_writes_nothing(tmp_path: Path) -> None:
    """On a cluster the Ray task may run where the output folder does not exist: it sends the files' content back."""
    out = tmp_path / "not_on_this_node"
    task = harness.RunTask("a2c", "CartPole-v1", 3, 100, 50, 1, out_dir=str(out))
    result = backends.run_remote(task, os.getcwd())
    assert result["ok"] and result["name"] == "a2c__CartPole-v1__seed3" and not out.exists()
    frame, metadata = harness.run_experiment(task)
    returned = pd.read_csv(io.StringIO(result["csv"]))
    assert tuple(returned.columns) == harness.EVAL_COLUMNS
    pd.testing.assert_frame_equal(returned[SAME_COLUMNS], frame[SAME_COLUMNS])
    assert _without_times({"run": result["metadata"]}) == _without_times({"run": metadata})

    failed = backends.run_remote(task, str(tmp_path / "no_such_checkout"))
    assert not failed["ok"] and "every machine needs the checkout at the same path" in failed["traceback"]
    failed = backends.run_remote(harness.RunTask("a2c", "NoSuchEnv-v0", 0, 100, 50, 1, out_dir=str(out)), os.getcwd())
    assert not failed["ok"] and failed["traceback"].rstrip().endswith("KeyError: 'NoSuchEnv-v0'") and not out.exists()


def test_a_run_whose_store_fails_keeps_its_checkpoints_and_resumes(ray_module: ModuleType, tmp_path: Path) -> None:
    """The Ray worker leaves its checkpoints; the driver deletes them once it has stored the run, not before."""
    folder = tmp_path / "checkpoints"
    task = harness.RunTask(
        "a2c", "CartPole-v1", 0, 256, 128, 1, out_dir=str(tmp_path / "out"), checkpoint_dir=str(folder), checkpoint_every=1e-6
    )
    stored: list[dict] = []

    def failing_store(task: harness.RunTask, csv: str, metadata: dict) -> None:
        raise OSError("No space left on device")

    def store(task: harness.RunTask, csv: str, metadata: dict) -> None:
        stored.append(metadata)

    with backends.ray_session(1):
        (failed,) = backends.execute([task], 1, failing_store, backend="ray")
        assert not failed["ok"] and failed["error"] == "OSError: No space left on device"
        state = checkpoint.read_state(folder)
        assert state is not None and 0 < state["timesteps"] < 256  # the resume point is kept
        (done,) = backends.execute([task], 1, store, backend="ray")
    assert done["ok"] and stored[0]["resumed_from"] == state["timesteps"] and stored[0]["final_timesteps"] >= 256
    assert not folder.exists()  # deleted once stored


def test_backend_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = [*GRID[: GRID.index("NoSuchEnv-v0")], *GRID[GRID.index("NoSuchEnv-v0") + 1 :], "--out", str(tmp_path / "out")]
    bad = {
        ("--backend", "dask"): "invalid choice: 'dask'",
        ("--address", "auto"): "--address needs --backend ray",
        ("--backend", "ray", "--device", "cuda"): "--device must be cpu, not 'cuda'",
        ("--backend", "ray", "--address", "head-without-port"): "--address expects auto or HOST:PORT",
        ("--workers", "0"): "--workers must be at least 1",
    }
    for options, message in bad.items():
        with pytest.raises(SystemExit) as error:
            main([*grid, *options])
        assert error.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(ValueError, match="backend must be one of"):
        run_grid(["a2c"], ["CartPole-v1"], [0], tmp_path, steps=100, eval_freq=50, backend="dask")
    with pytest.raises(ValueError, match="only used by the ray backend"):
        run_grid(["a2c"], ["CartPole-v1"], [0], tmp_path, steps=100, eval_freq=50, address="auto")
    assert backends.parse_ray_address("auto") is None
    assert backends.parse_ray_address("10.0.0.2:6379") == ("10.0.0.2", 6379)
    assert backends.parse_ray_address("ray://[::1]:10001") == ("::1", 10001)
    assert not (tmp_path / "out").exists() and not (tmp_path / "config.json").exists()


def test_missing_ray_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ray\]"'):
        backends.import_ray()
    with pytest.raises(SystemExit) as error:
        main([*GRID, "--backend", "ray", "--out", str(tmp_path / "out")])
    assert error.value.code == 2 and 'pip install -e ".[ray]"' in capsys.readouterr().err
    assert not (tmp_path / "out" / "config.json").exists()


def test_unreachable_address_fails_fast(ray_module: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SystemExit) as error:
        main([*GRID, "--backend", "ray", "--address", f"127.0.0.1:{port}", "--out", str(tmp_path / "out")])
    assert error.value.code == 2 and f"No Ray cluster answers at 127.0.0.1:{port}" in capsys.readouterr().err
    assert not ray_module.is_initialized() and not (tmp_path / "out" / "config.json").exists()
