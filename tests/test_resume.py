"""Checkpoints and resume of benchmark runs (:mod:`benchmarks.checkpoint`): a run interrupted and resumed equals the
uninterrupted run up to its checkpoint, and its curve continues; checkpoints are atomic and hold no pickle of ours."""

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch as th
from run_testing import Crash, CrashAt
from stable_baselines3.common.callbacks import BaseCallback

from benchmarks import algorithms, checkpoint, harness

#: Small entries for the runs (``hyperparams_dir``): a2c with VecNormalize, SAC with a small replay
ENTRIES = {
    "a2c.yml": "CartPole-v1:\n  policy: MlpPolicy\n  n_envs: 4\n  normalize: true\n  n_timesteps: 1000\n",
    "sac.yml": (
        "Pendulum-v1:\n  policy: MlpPolicy\n  buffer_size: 2000\n  learning_starts: 100\n  n_timesteps: 1000\n"
        "  policy_kwargs: 'dict(net_arch=[32, 32])'\n"
    ),
}
#: (algo, env, step budget, step at which the first session crashes, CPU seconds between checkpoints): the three
#: ways a replay is saved (none, this package's path replay npz, SB3's replay buffer as our npz)
CASES = [
    ("a2c", "CartPole-v1", 1200, 700, 0.003),
    ("pcl", "CartPole-v1", 1800, 1500, 0.003),
    ("sac", "Pendulum-v1", 300, 200, 0.2),
]


def _snapshot(model: Any) -> dict[str, np.ndarray]:
    arrays = {f"policy.{key}": value.detach().cpu().numpy().copy() for key, value in model.policy.state_dict().items()}
    normalize = model.get_vec_normalize_env()
    if normalize is not None:
        arrays["obs_rms.mean"] = normalize.obs_rms.mean.copy()
    return arrays


class Snapshots(BaseCallback):
    """Keep the parameters (and VecNormalize means) at every collection start, by step count; and at training start."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[int, dict[str, np.ndarray]] = {}
        self.first: dict[str, np.ndarray] = {}

    def _on_training_start(self) -> None:
        self.first = _snapshot(self.model)
        self.first.pop("obs_rms.mean", None)  # the envs were just reset: VecNormalize has counted their observations

    def _on_rollout_start(self) -> None:
        self.at[self.num_timesteps] = _snapshot(self.model)

    def _on_step(self) -> bool:
        return True


def _task(tmp_path: Path, algo: str, env: str, steps: int, every: float = 0.003) -> harness.RunTask:
    entries = tmp_path / "entries"
    entries.mkdir(exist_ok=True)
    for file, text in ENTRIES.items():
        (entries / file).write_text(text)
    return harness.RunTask(
        algo,
        env,
        0,
        steps,
        eval_freq=100,
        n_eval_episodes=1,
        hyperparams_dir=str(entries),
        checkpoint_dir=str(tmp_path / "checkpoints"),
        checkpoint_every=every,
    )


def _assert_same(left: dict[str, np.ndarray], right: dict[str, np.ndarray]) -> None:
    assert left.keys() == right.keys()
    for key in left:
        np.testing.assert_array_equal(left[key], right[key], err_msg=key)


@pytest.mark.parametrize(("algo", "env", "steps", "crash", "every"), CASES)
def test_interrupted_and_resumed_equals_uninterrupted_up_to_the_checkpoint(
    tmp_path: Path, algo: str, env: str, steps: int, crash: int, every: float
) -> None:
    task = _task(tmp_path, algo, env, steps, every)
    whole = Snapshots()
    uninterrupted, _ = harness.run_experiment(harness.RunTask(**{**task.__dict__, "checkpoint_dir": None}), callbacks=[whole])

    with pytest.raises(Crash):
        harness.run_experiment(task, callbacks=[CrashAt(crash)])
    state = checkpoint.read_state(task.checkpoint_dir)  # type: ignore[arg-type]
    assert state is not None and 0 < state["timesteps"] <= crash
    learning_starts = {"sac": 100, "pcl": 1000}.get(algo, 0)
    assert state["timesteps"] > learning_starts  # trained before its checkpoint
    folder = checkpoint.latest_checkpoint(task.checkpoint_dir)  # type: ignore[arg-type]
    assert folder is not None
    files = {path.name for path in folder.iterdir()}
    assert files >= {"model.zip", "rng.npz", "state.json"} and not any(name.endswith(".pkl") for name in files)
    assert ("replay.npz" in files) == (algo != "a2c") and ("vecnormalize.npz" in files) == (algo == "a2c")
    if algo == "a2c":  # the VecNormalize statistics of that step
        with np.load(folder / "vecnormalize.npz") as saved:
            np.testing.assert_array_equal(saved["obs_rms.mean"], whole.at[state["timesteps"]]["obs_rms.mean"])

    resumed_start = Snapshots()
    resumed, metadata = harness.run_experiment(task, callbacks=[resumed_start])
    at = metadata["resumed_from"]
    assert at == state["timesteps"]
    # the model continues from the parameters (and normalisation statistics) the uninterrupted run had at that step
    _assert_same(resumed_start.first, {key: value for key, value in whole.at[at].items() if key != "obs_rms.mean"})
    # the evaluations up to the checkpoint are the uninterrupted run's, then the curve continues
    columns = ["timesteps", "mean_return", "std_return"]
    before = resumed[resumed["timesteps"] <= at][columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(before, uninterrupted[uninterrupted["timesteps"] <= at][columns].reset_index(drop=True))
    for column in ("timesteps", "cpu_time_s", "wall_time_s"):
        assert resumed[column].is_monotonic_increasing, column
    assert resumed["timesteps"].iloc[-1] >= steps and resumed["cpu_time_s"].iloc[-1] > state["cpu_time_s"]
    assert resumed["timesteps"].tolist() == uninterrupted["timesteps"].tolist()  # the same evaluation marks
    # counters and schedule position continue: no reset to 0
    assert metadata["final_timesteps"] == uninterrupted["timesteps"].iloc[-1]


def test_resuming_a_checkpoint_twice_gives_the_same_run(tmp_path: Path) -> None:
    """The random states (Python, NumPy, torch) and the env seeds are restored: a resume is reproducible."""
    task = _task(tmp_path, "pcl", "CartPole-v1", 1600)  # PCL trains from step 1000 (learning_starts)
    with pytest.raises(Crash):
        harness.run_experiment(task, callbacks=[CrashAt(1200)])
    assert checkpoint.read_state(task.checkpoint_dir)["timesteps"] > 1000  # type: ignore[arg-type, index]
    shutil.copytree(task.checkpoint_dir, tmp_path / "copy")  # type: ignore[arg-type]
    ends = []
    for folder in (task.checkpoint_dir, str(tmp_path / "copy")):
        np.random.seed(123 if folder == task.checkpoint_dir else 456)  # different global states before each resume
        th.manual_seed(123 if folder == task.checkpoint_dir else 456)
        end = Snapshots()
        frame, _ = harness.run_experiment(
            harness.RunTask(**{**task.__dict__, "checkpoint_dir": folder, "checkpoint_every": 1e6}), callbacks=[end]
        )
        ends.append((frame[["timesteps", "mean_return"]], end.at[max(end.at)]))
    pd.testing.assert_frame_equal(ends[0][0], ends[1][0])
    _assert_same(ends[0][1], ends[1][1])


def test_a_checkpoint_being_written_when_killed_leaves_the_previous_one(tmp_path: Path) -> None:
    """A folder written after LATEST (a process killed during a save) is ignored, then replaced by the next save."""
    task = _task(tmp_path, "a2c", "CartPole-v1", 400)
    with pytest.raises(Crash):
        harness.run_experiment(task, callbacks=[CrashAt(300)])
    run_dir = Path(task.checkpoint_dir)  # type: ignore[arg-type]
    latest = checkpoint.latest_checkpoint(run_dir)
    assert latest is not None
    number = int(latest.name.split("-")[1]) + 1
    torn = run_dir / f"ckpt-{number}"
    torn.mkdir()
    (torn / "model.zip").write_bytes(b"PK\x03\x04 torn")
    assert checkpoint.latest_checkpoint(run_dir) == latest
    state = json.loads((latest / "state.json").read_text())
    _, metadata = harness.run_experiment(task)
    assert metadata["resumed_from"] == state["timesteps"]
    # LATEST itself is replaced by a rename: never a half-written name
    assert (run_dir / checkpoint.LATEST_FILENAME).read_text().strip().startswith("ckpt-")


def test_checkpoint_root_and_run_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(checkpoint.CHECKPOINT_DIR_ENV, str(tmp_path / "elsewhere"))
    assert checkpoint.default_checkpoint_root() == tmp_path / "elsewhere"
    monkeypatch.delenv(checkpoint.CHECKPOINT_DIR_ENV)
    assert checkpoint.default_checkpoint_root() == Path.home() / ".cache" / "sb3_pcl" / "checkpoints"
    one = harness.run_checkpoint_dir(tmp_path, "runs/a", "pcl", "CartPole-v1", 0)
    assert one != harness.run_checkpoint_dir(tmp_path, "other/a", "pcl", "CartPole-v1", 0)  # folders never share
    # a folder inside the repository is named by its path there: another checkout of it resumes the same runs
    inside = algorithms.REPO_ROOT / "benchmarks" / "results" / "x"
    key = hashlib.sha256(b"benchmarks/results/x").hexdigest()[:10]
    assert harness.run_checkpoint_dir(tmp_path, inside, "pcl", "CartPole-v1", 0) == str(
        tmp_path.resolve() / f"x-{key}" / "pcl__CartPole-v1__seed0"
    )
    assert one.endswith("pcl__CartPole-v1__seed0") and Path(one).parent.name.startswith("a-")


def test_the_random_states_continue_after_a_restore(tmp_path: Path) -> None:
    """Python's, NumPy's and torch's random streams go on from where the checkpoint left them (not reseeded)."""
    import random

    experiment = harness.make_experiment("a2c", "CartPole-v1", 0, eval_env=False)
    try:
        random.random(), np.random.random(5), th.rand(5)  # the streams have moved on since the model was seeded
        state = {"timesteps": 0, "cpu_time_s": 0.0, "wall_time_s": 0.0, "next_cpu_mark": 1.0, "records": []}
        checkpoint.save_checkpoint(tmp_path, experiment.model, state)
        expected = (random.random(), np.random.random(), th.rand(1).item())
        random.seed(1), np.random.seed(1), th.manual_seed(1)
        restored = checkpoint.restore_checkpoint(tmp_path, experiment.model)
        assert restored is not None and restored[1] == state
        assert (random.random(), np.random.random(), th.rand(1).item()) == expected
    finally:
        experiment.model.get_env().close()  # type: ignore[union-attr]


class Tick(BaseCallback):
    """Advance a fake process clock at the end of every collection (as the updates that follow it would)."""

    def __init__(self, clock: dict[str, float], seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    def _on_rollout_end(self) -> None:
        self.clock["t"] += self.seconds

    def _on_step(self) -> bool:
        return True


def test_a_checkpoint_at_a_cpu_mark_holds_that_mark_s_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints and CPU-time evaluations share their period (campaigns: 300 CPU-s each); the checkpoint written as
    a mark passes waits for that mark's evaluation, so a run resumed from it keeps the row instead of evaluating the
    same policy again on other episodes. The clock passes each mark during an update, as on a real run."""
    clock = {"t": 0.0}
    monkeypatch.setattr(
        harness, "time", type("Clock", (), {"process_time": lambda: clock["t"], "perf_counter": time.perf_counter})
    )
    task = harness.RunTask(**{**_task(tmp_path, "sac", "Pendulum-v1", 400).__dict__, "eval_freq": 10_000})
    task = harness.RunTask(**{**task.__dict__, "eval_cpu_seconds": 0.5, "checkpoint_every": 0.5})
    with pytest.raises(Crash):  # one collection of SAC is one env step: 32 steps per 0.5 s mark
        harness.run_experiment(task, callbacks=[Tick(clock, 1 / 64), CrashAt(50)])
    state = checkpoint.read_state(task.checkpoint_dir)  # type: ignore[arg-type]
    assert state is not None and 0.5 <= state["cpu_time_s"] < 1.0
    assert [record["cpu_time_s"] for record in state["records"]] == [0.0, 0.5]
    assert state["timesteps"] == state["records"][-1]["timesteps"]  # one collection (one step) after the mark


def test_a_resumed_run_s_zoo_log_holds_every_evaluation(tmp_path: Path) -> None:
    """rl-zoo3's ``evaluations.npz`` of a run resumed from a checkpoint holds the evaluations before it too; a
    checkpoint written without the episodes (by an earlier version) gives each evaluation's mean -/+ std."""
    for kept in (True, False):
        changes = {"n_eval_episodes": 2, "out_dir": str(tmp_path / "out"), "checkpoint_dir": str(tmp_path / str(kept))}
        task = harness.RunTask(**{**_task(tmp_path, "a2c", "CartPole-v1", 400).__dict__, **changes})
        with pytest.raises(Crash):
            harness.run_experiment(task, tmp_path / "rows.csv", [CrashAt(300)], tmp_path / "zoo")
        state_path = checkpoint.latest_checkpoint(task.checkpoint_dir) / checkpoint.STATE_FILENAME  # type: ignore[arg-type, operator]
        state = json.loads(state_path.read_text())
        assert len(state["episodes"]) == len(state["records"]) > 1
        if not kept:
            state_path.write_text(json.dumps({**state, "episodes": None}))
        frame, _ = harness.run_experiment(task, tmp_path / "rows.csv", zoo_folder=tmp_path / "zoo")
        zoo = harness.zoo_evaluations_path(tmp_path / "zoo", task.algo, task.env, task.seed)
        with np.load(zoo) as log:
            assert log["timesteps"].tolist() == frame["timesteps"].tolist() and log["results"].shape == (len(frame), 2)
            assert np.allclose(log["results"].mean(axis=1), frame["mean_return"])
            assert (log["ep_lengths"].dtype == np.int64) == kept
