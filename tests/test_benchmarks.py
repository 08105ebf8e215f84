"""Tests of the benchmark harness (``benchmarks/``), of the committed results and of the shipped ``hyperparams/*.yml``."""

import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from benchmarks import algorithms, backends, harness, reporting, store
from benchmarks.campaign import __main__ as campaign_cli
from benchmarks.run import main, parse_thresholds, run_grid
from benchmarks.store import finish_invocation
from benchmarks.summary import resolve_thresholds, summarize_results, threshold_crossings

RESULTS_DIR = algorithms.REPO_ROOT / "benchmarks" / "results"
CAMPAIGNS_DIR = algorithms.REPO_ROOT / "benchmarks" / "campaigns"
#: harness result folders (``speed/learning``: the learning runs redone after the speed work of issue #34;
#: ``mujoco/wall_clock``: the equal-wall-clock comparison of issue #35; ``classic_fresh``: PCL against PPO on seeds no
#: entry was chosen on, issue #43)
SUITES = ("classic", "mujoco", "algorithmic", "recurrent", "speed/learning", "mujoco/wall_clock", "classic_fresh")
#: result folders of the tool benchmarks (no learning runs: a results.md and its plots)
TOOL_SUITES = ("replay", "demonstrations", "speed", "defaults_study", "install")
TINY_GRID = [
    *("--algos", "ppo", "a2c", "--envs", "CartPole-v1", "--seeds", "0", "1", "--steps", "512"),
    *("--eval-freq", "256", "--eval-episodes", "2", "--workers", "2", "--quiet"),
]


@pytest.fixture(scope="module")
def tiny_grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("grid")
    exit_code = main([*TINY_GRID, "--out", str(out)])
    return out, exit_code


def test_tiny_grid_evaluations(tiny_grid: tuple[Path, int]) -> None:
    out, exit_code = tiny_grid
    assert exit_code == 0
    metadata = json.loads((out / "run_metadata.json").read_text())
    assert sorted(metadata) == [
        "a2c__CartPole-v1__seed0",
        "a2c__CartPole-v1__seed1",
        "ppo__CartPole-v1__seed0",
        "ppo__CartPole-v1__seed1",
    ]
    assert {meta["status"] for meta in metadata.values()} == {"done"} and not list((out / "runs").glob("*.err"))
    frame = pd.read_csv(out / "evaluations.csv")
    # a grid stores its runs as a campaign does: the harness's columns and the git revision that wrote each row
    assert tuple(frame.columns) == store.COLUMNS and len(frame) == 2 * 2 * 3 and frame[["git", "cpu"]].notna().all().all()
    for (algo, seed), run in frame.groupby(["algo", "seed"]):
        assert algo in ("ppo", "a2c") and seed in (0, 1)
        # ppo (8 envs x 32 steps) and a2c (8 envs x 5 steps) both hit multiples of 256 exactly
        assert run["timesteps"].tolist() == [0, 256, 512]
        assert run["wall_time_s"].is_monotonic_increasing
        # process CPU time of training: from 0, growing, evaluation excluded (so below the run's whole CPU time)
        assert run["cpu_time_s"].is_monotonic_increasing and 0 <= run["cpu_time_s"].iloc[0] < run["cpu_time_s"].iloc[-1]
        assert (run["fps"].iloc[1:] > 0).all() and math.isnan(run["fps"].iloc[0])
        assert np.isfinite(run["mean_return"]).all() and (run["std_return"] >= 0).all()
    assert metadata["ppo__CartPole-v1__seed0"]["hyperparams_source"] == "rl_zoo3/hyperparams/ppo.yml [CartPole-v1]"
    assert metadata["ppo__CartPole-v1__seed0"]["n_envs"] == 8
    assert metadata["a2c__CartPole-v1__seed1"]["reward_threshold"] == 475.0


def test_tiny_grid_summary_and_plot(tiny_grid: tuple[Path, int]) -> None:
    out, _ = tiny_grid
    summary = (out / "results.md").read_text()
    assert "-m benchmarks.run --algos ppo a2c --envs CartPole-v1 --seeds 0 1 --steps 512" in summary
    assert "## CartPole-v1 (threshold 475, env spec)" in summary
    assert "| Algorithm | Seeds | Steps | Metric | Final |" in summary
    assert "| ppo | 2 | 512 | eval |" in summary and "| a2c | 2 | 512 | eval |" in summary
    assert "every 256 steps, 2 deterministic episodes" in summary and "torch" in summary and "cores" in summary
    assert (out / "CartPole-v1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_only_skip_existing_and_fresh_checkout(tiny_grid: tuple[Path, int], tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(tiny_grid[0], out)
    # --skip-existing: every run already has results, nothing is executed
    assert main([*TINY_GRID, "--out", str(out), "--skip-existing"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert len(config["invocations"]) == 2 and config["invocations"][-1]["runs_executed"] == 0
    # runs/ is git-ignored: the summary must be rebuilt from evaluations.csv and run_metadata.json alone
    shutil.rmtree(out / "runs")
    (out / "results.md").unlink()
    (out / "CartPole-v1.png").unlink()
    assert main(["--summary-only", "--out", str(out), "--threshold", "CartPole-v1=-1", "--quiet"]) == 0
    summary = (out / "results.md").read_text()
    assert "## CartPole-v1 (threshold -1, override)" in summary
    # every evaluation reaches -1: the first one after step 0 counts
    assert summary.count(" | 256 | 2/2: 256, 256 | ") == 2
    assert (out / "CartPole-v1.png").is_file() and len(pd.read_csv(out / "evaluations.csv")) == 12
    # the override is kept for later summaries
    assert json.loads((out / "config.json").read_text())["thresholds"] == {"CartPole-v1": -1.0}
    assert main(["--summary-only", "--out", str(out), "--quiet"]) == 0
    assert "## CartPole-v1 (threshold -1, override)" in (out / "results.md").read_text()


def _hand_made_frame() -> pd.DataFrame:
    returns = {0: [0.0, 50.0, 100.0, 100.0], 1: [0.0, 100.0, 120.0, 90.0], 2: [100.0, 20.0, 40.0, 60.0]}
    rows = []
    for seed, values in returns.items():
        for timesteps, value in zip([0, 100, 200, 300], values, strict=True):
            rows.append(("algo", "Env-v0", seed, timesteps, value, 1.0, timesteps / 100, timesteps / 50, 100.0, math.nan))
    return pd.DataFrame(rows, columns=list(harness.EVAL_COLUMNS))


def test_runs_write_rl_zoo3_log_folders_that_its_plots_read(
    tiny_grid: tuple[Path, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import matplotlib
    from matplotlib import pyplot as plt
    from rl_zoo3.plots.all_plots import all_plots

    out, _ = tiny_grid
    frame = store.read_evaluations(out)
    runs = frame.sort_values("timesteps").groupby(["algo", "env", "seed"])
    for (algo, env, seed), run in runs:  # as SB3's EvalCallback writes them: every episode of every evaluation
        with np.load(harness.zoo_evaluations_path(out / harness.ZOO_DIRNAME, algo, env, seed)) as log:
            assert log["timesteps"].tolist() == run["timesteps"].tolist() and log["results"].shape == (len(run), 2)
            assert np.allclose(log["results"].mean(axis=1), run["mean_return"])
            assert log["ep_lengths"].dtype == np.int64 and (log["ep_lengths"] > 0).all()
    # export-zoo keeps the runs' own files; into another folder, it writes the CSV's mean -/+ std
    assert store.export_zoo(out) == []
    assert campaign_cli.main(["export-zoo", str(out), "--to", str(tmp_path / "zoo")]) == 0
    for (algo, env, seed), run in runs:
        with np.load(harness.zoo_evaluations_path(tmp_path / "zoo", algo, env, seed)) as log:
            assert np.allclose(log["results"].mean(axis=1), run["mean_return"])
            assert np.allclose(log["results"].std(axis=1), run["std_return"])
    capsys.readouterr()
    folders = [str(out / harness.ZOO_DIRNAME), str(tmp_path / "zoo")]
    argv = ["all_plots", "-a", "ppo", "a2c", "-e", "CartPole-v1", "-f", *folders, "--no-display", "-o", str(tmp_path / "c")]
    monkeypatch.setattr("sys.argv", argv)
    with matplotlib.rc_context():  # all_plots sets seaborn's style
        all_plots()
        plt.close("all")
    table = capsys.readouterr().out
    final = runs.tail(1).groupby("algo")["mean_return"].mean()
    for algo in ("ppo", "a2c"):
        assert table.count(f"{final[algo]:.0f} +/- ") == 2, table  # each folder's row: the mean of the last evaluations
    assert (tmp_path / "c.pkl").is_file()


def test_threshold_logic() -> None:
    frame = _hand_made_frame()
    crossings = threshold_crossings(frame, 100.0)
    assert crossings["reached"].tolist() == [True, True, False]
    assert crossings["timesteps"].tolist()[:2] == [200.0, 100.0] and math.isnan(crossings["timesteps"].iloc[2])
    # the untrained policy of seed 2 reaches the threshold at step 0, which does not count

    row = summarize_results(frame, {"Env-v0": 100.0}).iloc[0]
    assert row["n_seeds"] == 3 and row["n_reached"] == 2 and row["finals"] == {0: 100.0, 1: 90.0, 2: 60.0}
    assert row["final_mean"] == pytest.approx((100 + 90 + 60) / 3)
    assert row["final_std"] == pytest.approx(np.std([100, 90, 60]))
    assert row["best_mean"] == pytest.approx((100 + 120 + 100) / 3)
    assert math.isnan(row["steps_to_threshold"]) and math.isnan(row["curriculum_final"])
    # without the seed that never reaches it: median over seeds of the first crossing
    row = summarize_results(frame[frame["seed"] < 2], {"Env-v0": 100.0}).iloc[0]
    assert row["steps_to_threshold"] == 150.0 and row["wall_to_threshold"] == 1.5
    assert summarize_results(frame, {}).iloc[0]["n_reached"] == 0
    assert [reporting.steps(value) for value in (150.0, 25008.0, 2_160_000.0, 5e6, math.nan)] == [
        "150",
        "25k",
        "2.16M",
        "5M",
        "-",
    ]

    resolved = resolve_thresholds(["CartPole-v1", "Pendulum-v1", "Env-v0"], {"Env-v0": 3.0})
    assert resolved == {"CartPole-v1": (475.0, "env spec"), "Pendulum-v1": (None, "none"), "Env-v0": (3.0, "override")}


def test_parse_thresholds() -> None:
    assert parse_thresholds(["CartPole-v1=475", "ns/Env=v0=-1.5"]) == {"CartPole-v1": 475.0, "ns/Env=v0": -1.5}
    with pytest.raises(ValueError, match="ENV=VALUE"):
        parse_thresholds(["CartPole-v1"])
    with pytest.raises(ValueError, match="not a number"):
        parse_thresholds(["CartPole-v1=high"])


HYPERPARAMS_YAML = """
CartPole-v1:
  n_envs: 2
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 16
  batch_size: 32
  learning_rate: lin_0.001
  clip_range: lin_0.2
  normalize: "{'norm_obs': True, 'norm_reward': False}"
  policy_kwargs: "dict(net_arch=[16], activation_fn=nn.ReLU)"

MountainCar-v0:
  policy: 'MlpPolicy'
  frame_stack: 2
  normalize: true
  gamma: 0.9
"""


def _close(experiment: harness.Experiment) -> None:
    for env in (experiment.model.get_env(), experiment.eval_env):
        if env is not None:
            env.close()


def test_models_are_built_by_rl_zoo3(tmp_path: Path) -> None:
    import torch.nn as nn
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    (tmp_path / "ppo.yml").write_text(HYPERPARAMS_YAML)
    assert algorithms.load_hyperparams("ppo", "CartPole-v1", tmp_path) == ({}, f"{tmp_path / 'ppo.yml'} [CartPole-v1]")
    experiment = harness.make_experiment("ppo", "CartPole-v1", seed=3, hyperparams_dir=tmp_path)
    model = experiment.model
    try:
        assert experiment.n_envs == 2 and model.n_envs == 2 and model.n_steps == 16 and model.seed == 3
        assert model.lr_schedule(1.0) == pytest.approx(0.001) and model.lr_schedule(0.5) == pytest.approx(0.0005)
        assert model.clip_range(1.0) == pytest.approx(0.2) and model.clip_range(0.25) == pytest.approx(0.05)
        train_norm = model.get_vec_normalize_env()
        assert isinstance(train_norm, VecNormalize) and train_norm.norm_obs and not train_norm.norm_reward
        assert isinstance(experiment.eval_env, VecNormalize) and not experiment.eval_env.training
        assert experiment.eval_env.num_envs == 1
        assert model.policy.activation_fn is nn.ReLU and model.policy.net_arch == [16]
        assert experiment.hyperparams["n_steps"] == 16 and experiment.callbacks == []
    finally:
        _close(experiment)
    # frame_stack, normalize with the algorithm's gamma; overrides as rl-zoo3's --hyperparams
    experiment = harness.make_experiment("ppo", "MountainCar-v0", 0, tmp_path, overrides={"n_steps": 64}, eval_env=False)
    try:
        assert isinstance(experiment.model.get_env(), VecFrameStack) and experiment.model.observation_space.shape == (4,)
        assert experiment.model.get_vec_normalize_env().gamma == pytest.approx(0.9)
        assert experiment.model.n_steps == 64 and experiment.eval_env is None
    finally:
        _close(experiment)
    # rl-zoo3's rule: an env without an entry (and no default entry) is an error
    with pytest.raises(ValueError, match="Hyperparameters not found"):
        harness.make_experiment("ppo", "Acrobot-v1", 0, tmp_path)
    # a folder without the algorithm's file falls back to the file shipped with rl_zoo3
    assert algorithms.hyperparams_path("a2c", tmp_path).parts[-3:] == ("rl_zoo3", "hyperparams", "a2c.yml")
    assert algorithms.hyperparams_path("recurrentppo").name == "ppo_lstm.yml"
    assert algorithms.hyperparams_path("recurrent_pcl") == algorithms.REPO_HYPERPARAMS_DIR / "recurrent_pcl.yml"


def test_unknown_algorithm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"Unknown algorithm 'nope'.*ppo"):
        algorithms.get_algorithm_class("nope")
    with pytest.raises(ValueError, match="Unknown algorithm 'nope'"):
        run_grid(["nope"], ["CartPole-v1"], [0], tmp_path, steps=100, eval_freq=50)
    with pytest.raises(SystemExit):
        main(["--algos", "nope", "--envs", "CartPole-v1", "--steps", "100", "--out", str(tmp_path)])
    monkeypatch.setitem(algorithms.ALGORITHMS, "ghost", algorithms.AlgorithmSpec("stable_baselines3", "Ghost", "ghost", False))
    with pytest.raises(ImportError, match=r"'ghost'.*stable_baselines3\.Ghost"):
        algorithms.get_algorithm_class("ghost")
    assert algorithms.get_algorithm_class("ppo").__name__ == "PPO"
    assert algorithms.get_algorithm_class("sac").__name__ == "SAC" and algorithms.get_algorithm_class("td3").__name__ == "TD3"


def test_variants(tmp_path: Path) -> None:
    """``ppo+small`` = PPO with its entry updated by ppo+small.yml (env entry, else default); clear errors otherwise."""
    (tmp_path / "ppo.yml").write_text(HYPERPARAMS_YAML)
    (tmp_path / "ppo+small.yml").write_text("CartPole-v1:\n  n_steps: 8\n  n_epochs: 2\ndefault:\n  n_envs: 3\n")
    overrides, source = algorithms.load_hyperparams("ppo+small", "CartPole-v1", tmp_path)
    assert overrides == {"n_steps": 8, "n_epochs": 2}
    assert source == f"{tmp_path / 'ppo.yml'} [CartPole-v1] + {tmp_path / 'ppo+small.yml'} [CartPole-v1]"
    assert algorithms.load_hyperparams("ppo+small", "MountainCar-v0", tmp_path)[0] == {"n_envs": 3}
    experiment = harness.make_experiment("ppo+small", "CartPole-v1", seed=0, hyperparams_dir=tmp_path)
    try:
        assert type(experiment.model).__name__ == "PPO" and experiment.model.n_steps == 8 and experiment.model.n_epochs == 2
        assert experiment.model.n_envs == 2 and experiment.hyperparams["n_steps"] == 8
    finally:
        _close(experiment)
    assert harness.run_name("ppo+small", "sb3_pcl/Copy-v0", 1) == "ppo-small__sb3_pcl-Copy-v0__seed1"

    with pytest.raises(ValueError, match=r"Unknown algorithm 'nope' in 'nope\+small'"):
        algorithms.load_hyperparams("nope+small", "CartPole-v1", tmp_path)
    with pytest.raises(ValueError, match="Invalid variant name"):
        algorithms.split_variant("ppo+")
    with pytest.raises(FileNotFoundError, match=r"'ppo\+other' needs an override file"):
        algorithms.load_hyperparams("ppo+other", "CartPole-v1", tmp_path)
    (tmp_path / "ppo+envonly.yml").write_text("CartPole-v1:\n  n_steps: 8\n")
    with pytest.raises(ValueError, match="no entry for 'Acrobot-v1' and no 'default' entry"):
        algorithms.load_hyperparams("ppo+envonly", "Acrobot-v1", tmp_path)
    with pytest.raises(SystemExit):
        main(["--algos", "ppo+other", "--envs", "CartPole-v1", "--steps", "100", "--out", str(tmp_path / "out")])


def test_failing_run_is_recorded(tmp_path: Path) -> None:
    result = backends.run_local(harness.RunTask("a2c", "NoSuchEnv-v0", 0, 100, 50, 1, out_dir=str(tmp_path)), store.store_run)
    assert not result["ok"]
    err = (tmp_path / "runs" / "a2c__NoSuchEnv-v0__seed0.err").read_text()
    assert "Traceback" in err and "NoSuchEnv" in err
    assert not (tmp_path / "evaluations.csv").exists() and not (tmp_path / "run_metadata.json").exists()
    with pytest.raises(ValueError, match="metric"):
        harness.RunTask("a2c", "CartPole-v1", 0, 100, 50, metric="best")


def test_failed_runs_are_forgotten_and_retried(tmp_path: Path) -> None:
    """A failed run leaves its traceback and no results (the results of an earlier success it replaced with --force
    are dropped); --skip-existing runs it again."""
    out = tmp_path / "grid"
    out.mkdir()
    name = "a2c__NoSuchEnv-v0__seed0"
    (out / "run_metadata.json").write_text(json.dumps({name: {"algo": "a2c", "env": "NoSuchEnv-v0", "status": "done"}}))
    pd.DataFrame([["a2c", "NoSuchEnv-v0", 0, 0, 1.0]], columns=["algo", "env", "seed", "timesteps", "mean_return"]).to_csv(
        out / "evaluations.csv", index=False
    )
    grid = ["--algos", "a2c", "--envs", "NoSuchEnv-v0", "--seeds", "0", "--steps", "100", "--workers", "1", "--quiet"]
    assert main([*grid, "--out", str(out), "--force"]) == 1
    assert json.loads((out / "run_metadata.json").read_text()) == {} and not len(pd.read_csv(out / "evaluations.csv"))
    assert "KeyError: 'NoSuchEnv-v0'" in (out / "runs" / f"{name}.err").read_text()
    assert f"- `{name}`: KeyError: 'NoSuchEnv-v0'" in (out / "results.md").read_text()
    assert main([*grid, "--out", str(out), "--skip-existing"]) == 1
    invocations = json.loads((out / "config.json").read_text())["invocations"]
    assert [entry["runs_executed"] for entry in invocations] == [1, 1] and invocations[1]["runs_failed"] == [name]


def test_train_metric_and_stop_at_threshold(tmp_path: Path) -> None:
    (tmp_path / "ppo.yml").write_text(HYPERPARAMS_YAML)
    progress = tmp_path / "run.csv.partial"
    task = harness.RunTask(
        "ppo",
        "CartPole-v1",
        0,
        4096,
        64,
        hyperparams_dir=str(tmp_path),
        metric="train",
        stop_at_threshold=True,
        threshold=15.0,
    )
    frame, metadata = harness.run_experiment(task, progress)
    # the progress file was rewritten at every evaluation: it ends up holding every record of the run
    pd.testing.assert_frame_equal(pd.read_csv(progress), frame, check_dtype=False)
    # no training episode has ended at step 0; afterwards the training episodes' mean return is recorded
    assert math.isnan(frame["mean_return"].iloc[0]) and np.isfinite(frame["mean_return"].iloc[1:]).all()
    assert frame["curriculum_length"].isna().all()
    # random CartPole episodes last about 20 steps: the run stops at the first evaluation reaching 15, long before 4096
    assert metadata["stopped_at_threshold"] and metadata["metric"] == "train" and metadata["reward_threshold"] == 15.0
    assert frame["mean_return"].iloc[-1] >= 15.0 and (frame["mean_return"].iloc[1:-1] < 15.0).all()
    assert frame["timesteps"].iloc[-1] < 4096
    (tmp_path / "ppo.yml").write_text("Pendulum-v1:\n  policy: 'MlpPolicy'\n")
    with pytest.raises(ValueError, match="has none"):
        harness.run_experiment(
            harness.RunTask("ppo", "Pendulum-v1", 0, 64, 32, hyperparams_dir=str(tmp_path), stop_at_threshold=True)
        )
    with pytest.raises(ValueError, match="metric"):
        harness.RunTask("ppo", "CartPole-v1", 0, 10, 10, 1, metric="best")


UREX_YAML = """
sb3_pcl/Copy-v0:
  policy: 'MlpPrevActionLstmPolicy'
  n_envs: 20
  num_samples: 10
  learning_rate: 0.01
  policy_kwargs: "dict(lstm_hidden_size=8)"
  vec_env_wrapper:
    - sb3_pcl.envs.SharedCurriculum:
        first_episode_only: true
  env_kwargs:
    render_mode: 'ansi'
"""


def test_curriculum_length_recorded(tmp_path: Path) -> None:
    (tmp_path / "recurrent_urex.yml").write_text(UREX_YAML)
    out = tmp_path / "grid"
    run_grid(
        ["recurrent_urex"], ["sb3_pcl/Copy-v0"], [0], out, workers=1, steps=600, eval_freq=200, n_eval_episodes=1,
        hyperparams_dir=tmp_path, metric="train",
    )  # fmt: skip
    frame = pd.read_csv(out / "evaluations.csv")
    # the shared curriculum of the algorithmic tasks starts at min_length 2 (600 steps are far too few to promote)
    assert (frame["curriculum_length"] == 2).all()
    # the episode statistics grow at the end of each batch: NaN only until the first batch is complete
    assert np.isfinite(frame["mean_return"].iloc[-2:]).all()
    summary = (out / "results.md").read_text()
    assert "| Curriculum |" in summary and "2.0 [2, 2]" in summary and "last 100 training episodes" in summary


def test_algorithmic_vec_env_gives_the_same_runs(tmp_path: Path) -> None:
    (tmp_path / "recurrent_urex.yml").write_text(UREX_YAML)
    frames, metadata = {}, {}
    for vec_env in ("dummy", "algorithmic"):
        task = harness.RunTask(
            "recurrent_urex", "sb3_pcl/Copy-v0", 0, 1000, 200, hyperparams_dir=str(tmp_path), metric="train", vec_env=vec_env
        )
        frames[vec_env], metadata[vec_env] = harness.run_experiment(task)
    assert metadata["dummy"]["vec_env"] == "DummyVecEnv" and metadata["algorithmic"]["vec_env"] == "AlgorithmicVecEnv"
    columns = ["timesteps", "mean_return", "std_return", "curriculum_length"]
    pd.testing.assert_frame_equal(frames["dummy"][columns], frames["algorithmic"][columns])
    with pytest.raises(ValueError, match="vec_env"):
        run_grid(["recurrent_urex"], ["sb3_pcl/Copy-v0"], [0], tmp_path / "bad", steps=100, eval_freq=50, vec_env="fast")


def test_concurrent_invocations_keep_each_others_config_entries(tmp_path: Path) -> None:
    """Two invocations writing to one folder: the one finishing first must not drop the other's entry."""
    config_path = tmp_path / harness.CONFIG_FILENAME
    first = {"command": "run A", "started": "t0", "finished": None}
    second = {"command": "run B", "started": "t1", "finished": None}
    config_path.write_text(json.dumps({"invocations": [first, second]}))
    # A finishes holding a stale copy from before B started; B's entry must survive.
    finish_invocation(config_path, dict(first), ["a_failed"])
    entries = json.loads(config_path.read_text())["invocations"]
    assert [entry["command"] for entry in entries] == ["run A", "run B"]
    assert entries[0]["finished"] is not None and entries[0]["runs_failed"] == ["a_failed"]
    assert entries[1]["finished"] is None
    finish_invocation(config_path, dict(second), [])
    entries = json.loads(config_path.read_text())["invocations"]
    assert all(entry["finished"] is not None for entry in entries) and len(entries) == 2
    # An entry that vanished from the file (e.g. the file was replaced) is appended again.
    config_path.write_text(json.dumps({"invocations": []}))
    finish_invocation(config_path, dict(first), [])
    assert [entry["command"] for entry in json.loads(config_path.read_text())["invocations"]] == ["run A"]


# --------------------------------------------------------------------------------------------------------------------
# The shipped hyperparameters and the committed results


def _shipped_entries() -> list[tuple[str, str, list[str]]]:
    """:return: ``(algo, env, comment lines right above the entry)`` of every entry of ``hyperparams/*.yml``"""
    entries = []
    for path in sorted(algorithms.REPO_HYPERPARAMS_DIR.glob("*.yml")):
        comments: list[str] = []
        for line in path.read_text().splitlines():
            if line.startswith("#"):
                comments.append(line)
            elif match := re.match(r"^([^\s#][^:]*):", line):
                entries.append((path.stem, match.group(1).strip("'\""), comments))
                comments = []
            elif not line.strip():
                comments = []
    return entries


def _result_sections(suite: str) -> dict[str, str]:
    """:return: The per-env sections of ``benchmarks/results/<suite>/results.md`` by env id"""
    text = (RESULTS_DIR / suite / "results.md").read_text()
    return {match.group(1): match.group(2) for match in re.finditer(r"^## (\S+) \(.*?\)\n(.*?)(?=^## |\Z)", text, re.M | re.S)}


#: the algorithms whose committed runs were made, and are reported, under another name: the recurrent Reinforce / UREX
#: runs (all in benchmarks/results/algorithmic) predate the recurrent classes (``Reinforce("MlpLstmPolicy")``, the same
#: policy and algorithm); their variants' files have the current name (``urex+recipe`` -> ``recurrent_urex+recipe``)
MADE_AS = {"recurrent_reinforce": "reinforce", "recurrent_urex": "urex"}


def _current_name(algo: str) -> str:
    """:return: the name under which a committed run's algorithm (or variant) runs now (:data:`MADE_AS`)"""
    base, separator, variant = algo.partition(algorithms.VARIANT_SEPARATOR)
    current = {made_as: name for name, made_as in MADE_AS.items()}.get(base, base)
    return f"{current}{separator}{variant}"


@pytest.mark.repo
def test_every_shipped_entry_cites_a_results_table() -> None:
    """
    Each entry of hyperparams/*.yml is preceded by a comment citing ``benchmarks/results/<suite>/results.md`` whose
    table for the entry's env has a row for the entry's algorithm, or by a comment saying it is not benchmarked.
    """
    entries = _shipped_entries()
    assert {algo for algo, _, _ in entries} == {
        "pcl",
        "trust_pcl",
        "recurrent_pcl",
        "recurrent_trust_pcl",
        "reinforce",
        "urex",
        "recurrent_reinforce",
        "recurrent_urex",
    }
    benchmarked = 0
    for algo, env, comments in entries:
        text = " ".join(comments)
        cited = re.findall(r"benchmarks/results/([\w/]+)/results\.md", text)
        if not cited:
            assert "not benchmarked" in text.lower(), f"hyperparams/{algo}.yml [{env}]: no results table cited: {comments}"
            continue
        for suite in cited:
            assert suite in SUITES, f"hyperparams/{algo}.yml [{env}] cites an unknown suite {suite!r}"
            sections = _result_sections(suite)
            assert env in sections, f"hyperparams/{algo}.yml [{env}]: benchmarks/results/{suite}/results.md has no {env} table"
            row = MADE_AS.get(algo, algo)
            assert f"\n| {row} | " in sections[env], f"hyperparams/{algo}.yml [{env}]: no {row} row in {suite}'s {env} table"
        benchmarked += 1
    assert benchmarked >= 25


#: Arguments renamed or moved by the redesign of issue #31 (CHANGELOG.md); none may appear in a YAML entry
OLD_ARGUMENTS = (
    "tau", "critic_weight", "value_optimizer", "value_learning_rate", "value_gradient_steps", "value_mix", "value_reg_coef",
    "policy_optimizer", "trust_region_loss", "target_kl", "cg_max_steps", "cg_damping", "line_search_max_iter",
    "line_search_shrinking_factor", "replay_alpha", "replay_priority", "replay_eviction", "expert_paths",
    "demonstrations", "shared_curriculum", "rollout",
)  # fmt: skip


def test_yaml_files_use_the_current_argument_names() -> None:
    paths = [*algorithms.REPO_HYPERPARAMS_DIR.glob("*.yml"), *algorithms.VARIANTS_HYPERPARAMS_DIR.glob("*+*.yml")]
    for path in paths:
        for env, entry in (yaml.safe_load(path.read_text()) or {}).items():
            old = sorted(set(entry or {}) & set(OLD_ARGUMENTS))
            assert not old, f"{path.name} [{env}] uses renamed arguments {old}"
            if algorithms.split_variant(path.stem)[0] in ("pcl", "trust_pcl"):
                assert "Lstm" not in str((entry or {}).get("policy")), (
                    f"{path.name} [{env}]: recurrent policies go to recurrent_*.yml"
                )


def _committed_runs() -> list[dict[str, Any]]:
    return [run for suite in SUITES for run in json.loads((RESULTS_DIR / suite / "run_metadata.json").read_text()).values()]


@pytest.mark.repo
def test_results_are_the_four_suites_and_every_variant_file_backs_one() -> None:
    """A variant file exists only while a committed result needs it; every committed variant run has its file."""
    top_level = {suite.split("/")[0] for suite in SUITES + TOOL_SUITES}
    # and the folders of the campaigns (benchmarks/campaigns/*.yml), which exist once written or run
    campaigns = {Path(yaml.safe_load(path.read_text())["out"]).name for path in CAMPAIGNS_DIR.glob("*.yml")}
    names = {path.name for path in RESULTS_DIR.iterdir()}
    assert top_level <= names and names - top_level <= campaigns, sorted(names - top_level - campaigns)
    for suite in TOOL_SUITES:
        assert (RESULTS_DIR / suite / "results.md").is_file()
    for suite in SUITES:
        for name in ("results.md", "NOTES.md", "evaluations.csv", "run_metadata.json", "config.json"):
            assert (RESULTS_DIR / suite / name).is_file(), f"benchmarks/results/{suite}/{name} is missing"
    runs = _committed_runs()
    sources = " ".join(str(run["hyperparams_source"]) for run in runs)
    # the throughput benchmark's configurations (benchmarks/results/speed/speed.json) name variants too
    speed_runs = json.loads((RESULTS_DIR / "speed" / "speed.json").read_text())["runs"]
    if (RESULTS_DIR / "defaults_study" / "speed.json").is_file():  # PCL's defaults against PPO's
        speed_runs = [*speed_runs, *json.loads((RESULTS_DIR / "defaults_study" / "speed.json").read_text())["runs"]]
    sources += " " + " ".join(f"benchmarks/hyperparams/{name.split(':')[0]}.yml" for name in speed_runs)
    # and so do the campaigns' runs (benchmarks/campaigns/*.yml), written before their results
    campaign_runs = [run for path in CAMPAIGNS_DIR.glob("*.yml") for run in yaml.safe_load(path.read_text())["runs"]]
    sources += " " + " ".join(f"benchmarks/hyperparams/{run['algo']}.yml" for run in campaign_runs)
    for current, made_as in MADE_AS.items():  # the variants of the runs made under another name have the current one
        sources = sources.replace(f"benchmarks/hyperparams/{made_as}+", f"benchmarks/hyperparams/{current}+")
    for path in algorithms.VARIANTS_HYPERPARAMS_DIR.glob("*.yml"):
        assert f"benchmarks/hyperparams/{path.name}" in sources, (
            f"benchmarks/hyperparams/{path.name} backs no committed result"
        )
    for algo in {run["algo"] for run in runs if algorithms.VARIANT_SEPARATOR in run["algo"]}:
        algorithms.variant_overrides_path(_current_name(algo))
    assert len(list(algorithms.VARIANTS_HYPERPARAMS_DIR.iterdir())) <= 20


def test_shipped_entries_and_committed_runs_build() -> None:
    """
    Every shipped entry, and every (algorithm, env) of the committed results, builds its model from the YAML files as
    they are now (replay buffers shrunk to keep this fast; nothing is trained).
    """
    pytest.importorskip("mujoco")
    sources = {(_current_name(run["algo"]), run["env"]): str(run["hyperparams_source"]) for run in _committed_runs()}
    # an entry under a key that is not an env id (mujoco-2018) is read by campaigns with `entry:`: built on HalfCheetah
    shipped = [(algo, env, None) if "-v" in env else (algo, "HalfCheetah-v5", env) for algo, env, _ in _shipped_entries()]
    runs = dict.fromkeys([*shipped, *((algo, env, None) for algo, env in sources)])
    for algo, env, entry in runs:
        # the MuJoCo TRPO runs read benchmarks/hyperparams/trpo.yml (--hyperparams-dir benchmarks/hyperparams)
        from_variants_dir = sources.get((algo, env), "").startswith("benchmarks/hyperparams/")
        # SAC and TD3 read rl-zoo3's v4 entries under the v5 ids (--zoo-v4-entries): "... [HalfCheetah-v4 for HalfCheetah-v5]"
        zoo_v4_entries = f" for {env}]" in sources.get((algo, env), "")
        base = algorithms.split_variant(algo)[0]
        off_policy = ("pcl", "trust_pcl", "recurrent_pcl", "recurrent_trust_pcl", "sac", "td3")
        overrides = {"buffer_size": 1000} if base in off_policy else {}
        experiment = harness.make_experiment(
            algo,
            env,
            0,
            algorithms.VARIANTS_HYPERPARAMS_DIR if from_variants_dir else None,
            overrides=overrides,
            eval_env=False,
            zoo_v4_entries=zoo_v4_entries,
            entry=entry,
        )
        try:
            assert type(experiment.model).__name__ == algorithms.ALGORITHMS[base].attribute
        finally:
            _close(experiment)


def test_git_revision_ignores_results_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Rows written by a run into benchmarks/results/ and a docs block rewritten by a campaign's report do not make the
    code revision ``+dirty``; a code change does."""

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "evaluations.csv").write_text("algo\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("old block\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    monkeypatch.setattr(harness, "REPO_ROOT", tmp_path)
    clean = harness.git_revision()
    assert re.fullmatch(r"[0-9a-f]{4,}", clean)
    (tmp_path / "benchmarks" / "results" / "evaluations.csv").write_text("algo\nppo\n")
    (tmp_path / "docs" / "page.md").write_text("new block\n")
    assert harness.git_revision() == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert harness.git_revision() == f"{clean}+dirty"
