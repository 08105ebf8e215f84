"""Tests of the time budgets of the benchmark harness: ``--cpu-budget`` and ``--eval-cpu-seconds`` (process CPU time
of training), schedules that follow the CPU budget, the equal-time tables and plots, ``--zoo-v4-entries`` and
``entry``. No assertion on speed: only on what the stopping and evaluation rules
guarantee whatever the machine's speed."""

import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from benchmarks import algorithms, backends, harness, store
from benchmarks.run import main
from benchmarks.summary import write_summary

STEP_CAP = 10_000_000
BUDGET_GRID = [
    *("--algos", "a2c", "--envs", "CartPole-v1", "--seeds", "0", "--cpu-budget", "2", "--eval-cpu-seconds", "0.5"),
    *("--eval-freq", "1000000000", "--steps", str(STEP_CAP), "--eval-episodes", "2", "--workers", "1", "--quiet"),
]


@pytest.fixture(scope="module")
def budget_grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("cpu_budget")
    checkpoints = ["--checkpoint-every", "0.5", "--checkpoint-dir", str(out / "checkpoints")]
    return out, main([*BUDGET_GRID, *checkpoints, "--out", str(out)])


def test_cpu_budget_run_stops_at_the_budget_and_evaluates_on_the_cpu_clock(budget_grid: tuple[Path, int]) -> None:
    out, exit_code = budget_grid
    assert exit_code == 0
    frame = pd.read_csv(out / "evaluations.csv", float_precision="round_trip")  # exact: compared with the JSON
    assert tuple(frame.columns) == store.COLUMNS
    cpu, steps = frame["cpu_time_s"], frame["timesteps"]
    assert cpu.is_monotonic_increasing and steps.is_monotonic_increasing and steps.iloc[0] == 0
    assert frame["wall_time_s"].is_monotonic_increasing
    # training stops at the first env step at or past 2 CPU-s of training, long before the step cap, then evaluates
    assert cpu.iloc[-1] >= 2.0 and (cpu.iloc[:-1] < 2.0).all() and steps.iloc[-1] < STEP_CAP
    # no step multiple is reached: the evaluations between the start and the end are those at 0.5, 1 and 1.5 CPU-s
    # (25% and 50% of the budget coincide with multiples of --eval-cpu-seconds)
    assert len(frame) == 5 and (cpu.iloc[1:] >= [0.5, 1.0, 1.5, 2.0]).all()
    metadata = json.loads((out / "run_metadata.json").read_text())["a2c__CartPole-v1__seed0"]
    assert metadata["cpu_budget"] == 2.0 and metadata["eval_cpu_seconds"] == 0.5 and metadata["steps"] == STEP_CAP
    assert metadata["stopped_at_cpu_budget"] and not metadata["stopped_at_threshold"] and "zoo_v4_entries" not in metadata
    assert metadata["train_cpu_time_s"] == pytest.approx(cpu.iloc[-1], rel=1e-12, abs=0)  # the CSV keeps 16 digits
    # checkpointed every 0.5 CPU-s under --checkpoint-dir, started afresh, the checkpoints deleted once it finished
    assert metadata["checkpoint_every"] == 0.5 and metadata["resumed_from"] == 0 and "checkpoint_dir" not in metadata
    run_dir = Path(harness.run_checkpoint_dir(out / "checkpoints", out, "a2c", "CartPole-v1", 0))
    assert run_dir.parent.is_dir() and not run_dir.exists()
    invocation = json.loads((out / "config.json").read_text())["invocations"][0]
    assert invocation["cpu_budget"] == 2.0 and invocation["eval_cpu_seconds"] == 0.5 and invocation["workers"] == 1


def test_cpu_budget_summary_and_plots(budget_grid: tuple[Path, int]) -> None:
    out, _ = budget_grid
    summary = (out / "results.md").read_text()
    assert "| a2c | 1 | 2 CPU-s | eval |" in summary
    assert "### Equal CPU time" in summary and "### Equal wall-clock" not in summary
    header = "| Algorithm | At | Seeds there | Mean return | 95% CI (bootstrap, 6+ seeds) | Per seed | Env steps |"
    table = summary.split("### Equal CPU time")[1]
    assert header in table  # the campaigns' table of returns at marks, at 25%, 50% and 100% of the budget
    assert all(f"| a2c | {mark} CPU-s | 1/1 | " in table for mark in ("0.5", "1", "2"))
    assert "2 CPU-s of training, at most 10M steps" in summary and "every 25%, 50% of the budget and 0.5 CPU-s" in summary
    for name in ("CartPole-v1.png", "CartPole-v1_seconds.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![CartPole-v1 against training seconds](CartPole-v1_seconds.png)" in summary


def _write_folder(out: Path) -> None:
    """
    A folder of hand-made runs: ``fast`` with a budget of 10 CPU-s (seed 1 hit its step cap at 4 CPU-s; its
    wall-clock runs twice as long as its CPU time), ``steps`` without.
    """
    rows = []
    for seed, times in ((0, [0.0, 2.6, 5.1, 7.5, 10.2]), (1, [0.0, 2.5, 4.0])):
        for i, seconds in enumerate(times):
            rows.append(("fast", "Env-v0", seed, 100 * i, 10.0 * i + seed, 0.0, 2 * seconds, seconds, math.nan, math.nan))
    for i in range(3):
        rows.append(("steps", "Env-v0", 0, 100 * i, float(i), 0.0, float(i), float(i), math.nan, math.nan))
    out.mkdir(parents=True)
    pd.DataFrame(rows, columns=list(harness.EVAL_COLUMNS)).to_csv(out / "evaluations.csv", index=False)
    common = {"env": "Env-v0", "metric": "eval", "eval_freq": 100, "hyperparams_source": "hand-made"}
    metadata = {
        "fast__Env-v0__seed0": {**common, "algo": "fast", "seed": 0, "steps": 400, "cpu_budget": 10.0},
        "fast__Env-v0__seed1": {**common, "algo": "fast", "seed": 1, "steps": 200, "cpu_budget": 10.0},
        "steps__Env-v0__seed0": {**common, "algo": "steps", "seed": 0, "steps": 200},
    }
    (out / "run_metadata.json").write_text(json.dumps(metadata))


def test_equal_time_table_from_hand_made_runs(tmp_path: Path) -> None:
    out = tmp_path / "folder"
    _write_folder(out)
    write_summary(out)
    summary = (out / "results.md").read_text()
    table = summary.split("### Equal CPU time")[1].split("![")[0]
    # each seed's first evaluation at or after 2.5, 5 and 10 CPU-s of training (not wall-clock, twice as long): seed 0
    # at 2.6, 5.1 and 10.2 CPU-s; seed 1 at 2.5, then it ended at 4 CPU-s (its step cap) and has no value there
    assert "| fast | 2.5 CPU-s | 2/2 | 10.5 | - | 10.0 / 11.0 | 100 |" in table
    assert "| fast | 5 CPU-s | 1/2 | 20.0 | - | 20.0 / - | 200 |" in table
    assert "| fast | 10 CPU-s | 1/2 | 40.0 | - | 40.0 / - | 400 |" in table
    # the step-budget run is left out of the table, not of the env's table
    assert "| steps |" not in table and "| steps | 1 | 200 | eval |" in summary and "| fast | 2 | 10 CPU-s | eval |" in summary
    assert (out / "Env-v0_seconds.png").is_file() and (out / "Env-v0.png").is_file()


def test_step_budget_folders_get_no_time_output(tmp_path: Path) -> None:
    out = tmp_path / "folder"
    _write_folder(out)
    metadata = json.loads((out / "run_metadata.json").read_text())
    for meta in metadata.values():
        meta.pop("cpu_budget", None)
    (out / "run_metadata.json").write_text(json.dumps(metadata))
    write_summary(out)
    summary = (out / "results.md").read_text()
    assert "### Equal" not in summary and not (out / "Env-v0_seconds.png").exists()
    # the time options enter a step-budget run's metadata and config.json only when set
    options = harness._task_options(harness.RunTask("a2c", "CartPole-v1", 0, 100, 50))
    assert not set(options) & set(harness.TIME_OPTIONS) and "checkpoint_dir" not in options
    task = harness.RunTask("a2c", "CartPole-v1", 0, 100, 50, eval_cpu_seconds=1.0, zoo_v4_entries=True)
    options = harness._task_options(task)
    assert options["eval_cpu_seconds"] == 1.0 and options["zoo_v4_entries"] and "cpu_budget" not in options


def test_cpu_time_marks() -> None:
    callback = harness.BudgetEvalCallback(
        harness.RunTask("a2c", "CartPole-v1", 0, 10, 10, 1, cpu_budget=10.0, eval_cpu_seconds=3.0)
    )
    marks, seconds = [], 0.0
    while seconds < 12:
        seconds = callback._time_mark_after(seconds)
        marks.append(seconds)
    # multiples of 3 s, 25% and 50% of the budget (2.5, 5), and the budget
    assert marks == [2.5, 3.0, 5.0, 6.0, 9.0, 10.0, 12.0]
    assert harness.BudgetEvalCallback(harness.RunTask("a2c", "CartPole-v1", 0, 10, 10, 1))._time_mark_after(5.0) == math.inf
    task = harness.RunTask("a2c", "CartPole-v1", 0, 10, 10, 1, eval_cpu_seconds=0.5)
    assert harness.BudgetEvalCallback(task)._time_mark_after(1.0) == 1.5


def test_eval_cpu_seconds_without_a_cpu_budget_keeps_the_step_budget() -> None:
    """--eval-cpu-seconds alone is allowed: a step-budget run also evaluated on the clock (how often depends on speed)."""
    task = harness.RunTask("a2c", "CartPole-v1", 0, 400, 10**9, 1, eval_cpu_seconds=0.01)
    frame, metadata = harness.run_experiment(task)
    assert frame["timesteps"].iloc[-1] == 400 and frame["timesteps"].iloc[0] == 0
    assert metadata["eval_cpu_seconds"] == 0.01 and "cpu_budget" not in metadata and "stopped_at_cpu_budget" not in metadata


@pytest.mark.parametrize("algo", ["a2c", "pcl"])
def test_schedules_follow_the_cpu_budget(algo: str) -> None:
    """A ``lin_<x>`` learning rate anneals to about 0 over a CPU budget, although the step budget is far from spent."""
    experiment = harness.make_experiment(algo, "CartPole-v1", 0, overrides={"learning_rate": "lin_0.001"}, eval_env=False)
    model = experiment.model
    task = harness.RunTask(algo, "CartPole-v1", 0, 10**12, 10**12, 1, eval_at_start=False, metric="train", cpu_budget=1.0)
    callback = harness.BudgetEvalCallback(task)
    try:
        model.learn(10**12, callback=callback)
    finally:
        model.get_env().close()  # type: ignore[union-attr]
    assert callback.stopped_at_cpu_budget and model.num_timesteps < 10**6
    # progress counted by steps alone would be 1 - steps / 1e12, about 1: the CPU budget sets it to about 0
    assert 0.0 <= model._current_progress_remaining < 0.1
    assert model.policy.optimizer.param_groups[0]["lr"] < 0.1 * 0.001
    # the progress hook lived for that learn() call only: nothing of it is saved with the model
    assert "_update_current_progress_remaining" not in vars(model)


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_bad_seconds_are_refused(value: str, tmp_path: Path) -> None:
    base = ["--algos", "a2c", "--envs", "CartPole-v1", "--out", str(tmp_path), "--quiet"]
    with pytest.raises(SystemExit):
        main([*base, "--cpu-budget", value])
    with pytest.raises(SystemExit):
        main([*base, "--steps", "100", "--eval-cpu-seconds", value])
    with pytest.raises(SystemExit):
        main([*base, "--steps", "100", "--checkpoint-every", value])
    with pytest.raises(ValueError, match="cpu_budget must be a positive number of seconds"):
        harness.RunTask("a2c", "CartPole-v1", 0, 100, 50, cpu_budget=float(value))
    with pytest.raises(ValueError, match="eval_cpu_seconds must be a positive number of seconds"):
        harness.RunTask("a2c", "CartPole-v1", 0, 100, 50, eval_cpu_seconds=float(value))
    assert not (tmp_path / "config.json").exists()


def test_a_cpu_budget_refuses_subprocess_envs(tmp_path: Path) -> None:
    """The process CPU time of a run leaves out SubprocVecEnv's workers: that combination is refused."""
    base = ["--algos", "a2c", "--envs", "CartPole-v1", "--cpu-budget", "1", "--out", str(tmp_path), "--quiet"]
    with pytest.raises(SystemExit):
        main([*base, "--vec-env", "subproc"])
    with pytest.raises(ValueError, match="env worker processes"):
        harness.RunTask("a2c", "CartPole-v1", 0, 100, 50, cpu_budget=1.0, vec_env="subproc")
    with pytest.raises(SystemExit):  # without a CPU budget, --steps stays required
        main(["--algos", "a2c", "--envs", "CartPole-v1", "--out", str(tmp_path), "--quiet"])
    assert not (tmp_path / "config.json").exists()


def test_single_threaded_libraries_are_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    with backends._single_threaded_libraries():
        assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert os.environ["OMP_NUM_THREADS"] == "4" and "MKL_NUM_THREADS" not in os.environ


def test_zoo_v4_entries(tmp_path: Path) -> None:
    zoo_sac = algorithms.hyperparams_path("sac")
    assert algorithms.resolve_entry("sac", "HalfCheetah-v5", zoo_v4_entries=True) == (zoo_sac, "HalfCheetah-v4")
    assert yaml.safe_load(zoo_sac.read_text())["HalfCheetah-v4"]["learning_starts"] == 10000
    assert algorithms.load_hyperparams("sac", "HalfCheetah-v5", zoo_v4_entries=True) == (
        {},
        "rl_zoo3/hyperparams/sac.yml [HalfCheetah-v4 for HalfCheetah-v5]",
    )
    # without the option rl-zoo3's rule stands: no entry, no default entry (an error when the model is built)
    assert algorithms.resolve_entry("sac", "HalfCheetah-v5")[1] == "default"
    assert algorithms.zoo_v4_id("Hopper-v5") == "Hopper-v4" and algorithms.zoo_v4_id("CartPole-v1") is None
    # a v5 entry wins; this package's algorithms never fall back
    (tmp_path / "sac.yml").write_text("Foo-v4:\n  gamma: 0.9\nFoo-v5:\n  gamma: 0.8\n")
    (tmp_path / "pcl.yml").write_text("Foo-v4:\n  gamma: 0.9\n")
    assert algorithms.resolve_entry("sac", "Foo-v5", tmp_path, zoo_v4_entries=True)[1] == "Foo-v5"
    assert algorithms.resolve_entry("pcl", "Foo-v5", tmp_path, zoo_v4_entries=True)[1] == "default"
    # the TRPO file of the MuJoCo suite holds v5 entries: read as they are
    source = algorithms.load_hyperparams("trpo", "Hopper-v5", algorithms.VARIANTS_HYPERPARAMS_DIR, zoo_v4_entries=True)[1]
    assert source == "benchmarks/hyperparams/trpo.yml [Hopper-v5]"


def test_one_entry_on_other_envs() -> None:
    """``entry`` reads one key of the algorithm's file for any env (the paper's recipe, the Ant-v5 entry, on Hopper)."""
    assert algorithms.resolve_entry("trust_pcl", "Hopper-v5", entry="Ant-v5")[1] == "Ant-v5"
    assert (
        algorithms.load_hyperparams("trust_pcl", "Hopper-v5", entry="Ant-v5")[1]
        == "hyperparams/trust_pcl.yml [Ant-v5 for Hopper-v5]"
    )
    with pytest.raises(ValueError, match="has no entry 'Nope-v0'"):
        algorithms.resolve_entry("trust_pcl", "Hopper-v5", entry="Nope-v0")
    experiment = harness.make_experiment("pcl", "Acrobot-v1", 0, eval_env=False, entry="CartPole-v1")
    try:
        pcl_cartpole = yaml.safe_load((algorithms.REPO_HYPERPARAMS_DIR / "pcl.yml").read_text())["CartPole-v1"]
        assert experiment.n_envs == pcl_cartpole["n_envs"]
        assert experiment.model.get_env().get_attr("spec")[0].id == "Acrobot-v1"  # type: ignore[union-attr]
    finally:
        experiment.model.get_env().close()  # type: ignore[union-attr]


def test_zoo_v4_entry_builds_td3_on_a_v5_task() -> None:
    pytest.importorskip("mujoco")
    experiment = harness.make_experiment(
        "td3", "Hopper-v5", 0, overrides={"buffer_size": 1000}, eval_env=False, zoo_v4_entries=True
    )
    env = experiment.model.get_env()
    assert env is not None
    try:
        assert experiment.hyperparams_source == "rl_zoo3/hyperparams/td3.yml [Hopper-v4 for Hopper-v5]"
        assert getattr(experiment.model, "learning_starts") == 10000  # noqa: B009
        assert experiment.hyperparams["policy_kwargs"] == "dict(net_arch=[400, 300])"
        assert env.get_attr("spec")[0].id == "Hopper-v5"
    finally:
        env.close()
