"""Fast tests of the benchmark harness (``benchmarks/``), using only SB3 PPO / A2C."""

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmarks import harness
from benchmarks.run import main, parse_thresholds

TINY_GRID = [
    "--algos",
    "ppo",
    "a2c",
    "--envs",
    "CartPole-v1",
    "--seeds",
    "0",
    "1",
    "--steps",
    "512",
    "--eval-freq",
    "256",
    "--eval-episodes",
    "2",
    "--workers",
    "2",
    "--quiet",
]


@pytest.fixture(scope="module")
def tiny_grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("grid")
    exit_code = main([*TINY_GRID, "--out", str(out)])
    return out, exit_code


def test_tiny_grid_evaluations(tiny_grid: tuple[Path, int]) -> None:
    out, exit_code = tiny_grid
    assert exit_code == 0
    assert sorted(path.name for path in (out / "runs").glob("*.csv")) == [
        "a2c__CartPole-v1__seed0.csv",
        "a2c__CartPole-v1__seed1.csv",
        "ppo__CartPole-v1__seed0.csv",
        "ppo__CartPole-v1__seed1.csv",
    ]
    assert not list((out / "runs").glob("*.err"))
    # a finished run deletes its in-progress file
    assert not list((out / "runs").glob(f"*{harness.PROGRESS_SUFFIX}"))
    frame = pd.read_csv(out / "evaluations.csv")
    assert tuple(frame.columns) == harness.EVAL_COLUMNS
    assert len(frame) == 2 * 2 * 3
    for (algo, seed), run in frame.groupby(["algo", "seed"]):
        assert algo in ("ppo", "a2c") and seed in (0, 1)
        # ppo (8 envs x 32 steps) and a2c (8 envs x 5 steps) both hit multiples of 256 exactly
        assert run["timesteps"].tolist() == [0, 256, 512]
        assert run["timesteps"].is_monotonic_increasing
        assert run["wall_time_s"].is_monotonic_increasing
        assert (run["fps"].iloc[1:] > 0).all() and math.isnan(run["fps"].iloc[0])
        assert np.isfinite(run["mean_return"]).all() and (run["std_return"] >= 0).all()
    metadata = json.loads((out / "run_metadata.json").read_text())
    assert metadata["ppo__CartPole-v1__seed0"]["hyperparams_source"] == "rl_zoo3/hyperparams/ppo.yml [CartPole-v1]"
    assert metadata["ppo__CartPole-v1__seed0"]["n_envs"] == 8
    assert metadata["a2c__CartPole-v1__seed1"]["reward_threshold"] == 475.0


def test_tiny_grid_summary_and_plot(tiny_grid: tuple[Path, int]) -> None:
    out, _ = tiny_grid
    summary = (out / "results.md").read_text()
    assert "python -m benchmarks.run --algos ppo a2c --envs CartPole-v1 --seeds 0 1 --steps 512" in summary
    assert "## CartPole-v1 (threshold 475 (env spec))" in summary
    assert "| Algorithm | Seeds | Final return | Best eval | FPS |" in summary
    assert "| ppo | 2 |" in summary and "| a2c | 2 |" in summary
    assert "every 256 env steps" in summary and "2 deterministic episodes" in summary
    assert "torch" in summary and "cores" in summary
    png = out / "CartPole-v1.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_only_skip_existing_and_fresh_checkout(tiny_grid: tuple[Path, int], tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(tiny_grid[0], out)
    # --skip-existing: every run already has results, nothing is executed
    assert main([*TINY_GRID, "--out", str(out), "--skip-existing"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert len(config["invocations"]) == 2 and config["invocations"][-1]["runs_executed"] == 0
    # runs/ is git-ignored: the summary must be rebuilt from evaluations.csv alone
    shutil.rmtree(out / "runs")
    (out / "results.md").unlink()
    (out / "CartPole-v1.png").unlink()
    assert main(["--summary-only", "--out", str(out), "--threshold", "CartPole-v1=-1", "--quiet"]) == 0
    summary = (out / "results.md").read_text()
    assert "## CartPole-v1 (threshold -1 (override))" in summary
    # every evaluation reaches -1: the first one after step 0 counts
    assert summary.count("| 256 | ") == 2 and summary.count(" | 2/2 | ") == 2
    assert (out / "CartPole-v1.png").is_file()
    assert len(pd.read_csv(out / "evaluations.csv")) == 12


def _hand_made_frame() -> pd.DataFrame:
    returns = {0: [0.0, 50.0, 100.0, 100.0], 1: [0.0, 100.0, 120.0, 90.0], 2: [100.0, 20.0, 40.0, 60.0]}
    rows = []
    for seed, values in returns.items():
        for timesteps, value in zip([0, 100, 200, 300], values, strict=True):
            rows.append(("algo", "Env-v0", seed, timesteps, value, 1.0, timesteps / 100, 100.0))
    # written before the curriculum_length column existed: the summary must still work
    return pd.DataFrame(rows, columns=[column for column in harness.EVAL_COLUMNS if column != "curriculum_length"])


def test_threshold_logic() -> None:
    frame = _hand_made_frame()
    crossings = harness.threshold_crossings(frame, 100.0)
    assert crossings["reached"].tolist() == [True, True, False]
    assert crossings["timesteps"].tolist()[:2] == [200.0, 100.0] and math.isnan(crossings["timesteps"].iloc[2])
    # the untrained policy of seed 2 reaches the threshold at step 0, which only counts on request
    assert harness.threshold_crossings(frame, 100.0, exclude_initial=False)["timesteps"].tolist() == [200.0, 100.0, 0.0]

    row = harness.summarize_results(frame, {"Env-v0": 100.0}).iloc[0]
    assert row["n_seeds"] == 3 and row["n_reached"] == 2
    assert row["final_mean"] == pytest.approx((100 + 90 + 60) / 3)
    assert row["final_std"] == pytest.approx(np.std([100, 90, 60]))
    assert row["best_mean"] == pytest.approx((100 + 120 + 100) / 3)
    assert math.isnan(row["steps_to_threshold"]) and math.isnan(row["wall_to_threshold"])
    assert harness.format_threshold_cell(row["steps_to_threshold"], 2, 3) == "n/a (2/3 seeds)"

    # without the seed that never reaches it: median over seeds of the first crossing
    row = harness.summarize_results(frame[frame["seed"] < 2], {"Env-v0": 100.0}).iloc[0]
    assert row["n_reached"] == 2
    assert row["steps_to_threshold"] == 150.0 and row["wall_to_threshold"] == 1.5
    assert harness.format_threshold_cell(row["steps_to_threshold"], 2, 2) == "150"
    assert harness.format_threshold_cell(row["wall_to_threshold"], 2, 2, decimals=1) == "1.5"

    row = harness.summarize_results(frame, {}).iloc[0]
    assert row["n_reached"] == 0 and math.isnan(row["threshold"])
    assert harness.format_threshold_cell(row["steps_to_threshold"], 0, 3, has_threshold=False) == "-"

    resolved = harness.resolve_thresholds(["CartPole-v1", "Pendulum-v1", "Env-v0"], {"Env-v0": 3.0})
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
  frame_stack: 2
  normalize: true
  gamma: 0.9
"""


def test_yaml_loader(tmp_path: Path) -> None:
    import torch.nn as nn
    from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

    (tmp_path / "ppo.yml").write_text(HYPERPARAMS_YAML)
    entry = harness.load_hyperparams("ppo", "CartPole-v1", tmp_path)
    assert entry.path == tmp_path / "ppo.yml" and entry.key == "CartPole-v1" and not entry.fell_back
    assert entry.values["learning_rate"] == "lin_0.001"

    experiment = harness.make_experiment("ppo", "CartPole-v1", seed=3, hyperparams_dir=tmp_path)
    model = experiment.model
    try:
        assert experiment.n_envs == 2 and model.n_envs == 2 and model.n_steps == 16 and model.seed == 3
        assert model.lr_schedule(1.0) == pytest.approx(0.001) and model.lr_schedule(0.5) == pytest.approx(0.0005)
        assert model.clip_range(1.0) == pytest.approx(0.2) and model.clip_range(0.25) == pytest.approx(0.05)
        train_norm = model.get_vec_normalize_env()
        assert isinstance(train_norm, VecNormalize) and train_norm.norm_obs and not train_norm.norm_reward
        assert train_norm.gamma == pytest.approx(0.99)
        assert isinstance(experiment.eval_env, VecNormalize) and not experiment.eval_env.training
        assert experiment.eval_env.num_envs == 1
        assert model.policy.activation_fn is nn.ReLU and model.policy.net_arch == [16]
    finally:
        model.get_env().close()
        experiment.eval_env.close()

    # frame_stack, normalize with the algorithm's gamma, default policy kwargs
    experiment = harness.make_experiment("ppo", "MountainCar-v0", seed=0, hyperparams_dir=tmp_path)
    try:
        assert isinstance(experiment.model.get_env(), VecFrameStack)
        assert experiment.model.observation_space.shape == (4,)
        assert experiment.model.get_vec_normalize_env().gamma == pytest.approx(0.9)
        assert experiment.model.n_envs == 1
    finally:
        experiment.model.get_env().close()
        experiment.eval_env.close()

    # no entry for the env: algorithm defaults with n_envs=1 (and the fallback is reported)
    entry = harness.load_hyperparams("ppo", "Acrobot-v1", tmp_path)
    assert entry.fell_back and entry.values == {"n_envs": 1} and "falling back" in entry.notes[-1]
    assert entry.source.startswith("algorithm defaults (n_envs=1")
    # a folder without the algorithm's file falls back to the file shipped with rl_zoo3
    entry = harness.load_hyperparams("a2c", "CartPole-v1", tmp_path)
    assert entry.path is not None and entry.path.parts[-3:] == ("rl_zoo3", "hyperparams", "a2c.yml")
    assert entry.key == "CartPole-v1" and entry.values["n_envs"] == 8


def test_unknown_algorithm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"Unknown algorithm 'nope'.*ppo"):
        harness.get_algorithm_class("nope")
    with pytest.raises(ValueError, match="Unknown algorithm 'nope'"):
        harness.run_grid(["nope"], ["CartPole-v1"], [0], 100, 50, 1, 1, tmp_path)
    with pytest.raises(SystemExit):
        main(["--algos", "nope", "--envs", "CartPole-v1", "--steps", "100", "--out", str(tmp_path)])
    monkeypatch.setitem(harness.ALGORITHMS, "ghost", harness.AlgorithmSpec("stable_baselines3", "Ghost", "ghost", False))
    with pytest.raises(ImportError, match=r"'ghost'.*stable_baselines3\.Ghost"):
        harness.get_algorithm_class("ghost")
    assert harness.get_algorithm_class("ppo").__name__ == "PPO"


def test_committed_variant_runs_still_resolve_to_their_recorded_hyperparameters() -> None:
    """
    Every variant run (``<algo>+<variant>``) in benchmarks/results was made with the settings its variant file resolves
    to now.

    The tuned entries of hyperparams/<algo>.yml change over time; a variant file must pin the keys they change so that
    its documented command still reproduces its results folder (rl-zoo3's n_timesteps is not used by the harness).
    """
    checked: dict[str, int] = {}
    for metadata_path in sorted((harness.REPO_ROOT / "benchmarks" / "results").glob("*/run_metadata.json")):
        for name, run in json.loads(metadata_path.read_text()).items():
            if "+" not in run["algo"]:
                continue
            now = harness.load_hyperparams(run["algo"], run["env"], harness.VARIANTS_HYPERPARAMS_DIR).values
            recorded = run["hyperparams"]
            differ = {
                key: (recorded.get(key), now.get(key))
                for key in set(recorded) | set(now)
                if key != "n_timesteps" and recorded.get(key) != now.get(key) and (recorded.get(key) or now.get(key))
            }
            assert not differ, f"{metadata_path.parent.name}/{name}: recorded vs now {differ}"
            base = harness.split_variant(run["algo"])[0]
            checked[base] = checked.get(base, 0) + 1
    assert checked.get("trust_pcl", 0) >= 50 and checked.get("pcl", 0) >= 50, checked


def test_variants(tmp_path: Path) -> None:
    """``ppo+small`` = PPO with its entry updated by ppo+small.yml (env entry, else default); clear errors otherwise."""
    (tmp_path / "ppo.yml").write_text(HYPERPARAMS_YAML)
    (tmp_path / "ppo+small.yml").write_text("CartPole-v1:\n  n_steps: 8\n  n_epochs: 2\ndefault:\n  n_envs: 3\n")
    base = harness.load_hyperparams("ppo", "CartPole-v1", tmp_path)
    entry = harness.load_hyperparams("ppo+small", "CartPole-v1", tmp_path)
    assert entry.values == {**base.values, "n_steps": 8, "n_epochs": 2}
    assert entry.source.endswith("ppo+small.yml [CartPole-v1]") and "ppo.yml [CartPole-v1]" in entry.source
    # an env without an entry takes the override file's default entry, on top of the base entry of the env
    entry = harness.load_hyperparams("ppo+small", "MountainCar-v0", tmp_path)
    assert entry.values == {**harness.load_hyperparams("ppo", "MountainCar-v0", tmp_path).values, "n_envs": 3}
    experiment = harness.make_experiment("ppo+small", "CartPole-v1", seed=0, hyperparams_dir=tmp_path)
    try:
        assert type(experiment.model).__name__ == "PPO" and experiment.model.n_steps == 8 and experiment.model.n_epochs == 2
    finally:
        experiment.model.get_env().close()
        experiment.eval_env.close()
    assert harness.run_name("ppo+small", "CartPole-v1", 1) == "ppo-small__CartPole-v1__seed1"
    # learning rates in our schedule strings that rl-zoo3 cannot read (it knows only lin_<start>) reach the model
    for rate, halfway in (("exp_0.01_0.0001", 0.001), ("lin_0.01_0.002", 0.006)):
        (tmp_path / "ppo+rate.yml").write_text(f"default:\n  learning_rate: {rate}\n")
        experiment = harness.make_experiment("ppo+rate", "CartPole-v1", seed=0, hyperparams_dir=tmp_path)
        try:
            assert experiment.model.lr_schedule(1.0) == pytest.approx(0.01)
            assert experiment.model.lr_schedule(0.5) == pytest.approx(halfway)
        finally:
            experiment.model.get_env().close()
            experiment.eval_env.close()
    (tmp_path / "ppo+rate.yml").write_text("default:\n  learning_rate: exp_0.01\n")
    with pytest.raises(ValueError, match=r"cannot read the schedule 'exp_0\.01'"):
        harness.make_experiment("ppo+rate", "CartPole-v1", seed=0, hyperparams_dir=tmp_path)

    with pytest.raises(ValueError, match="Unknown algorithm 'nope' in 'nope\\+small'"):
        harness.load_hyperparams("nope+small", "CartPole-v1", tmp_path)
    with pytest.raises(ValueError, match="Invalid variant name"):
        harness.split_variant("ppo+")
    with pytest.raises(FileNotFoundError, match="'ppo\\+other' needs an override file"):
        harness.load_hyperparams("ppo+other", "CartPole-v1", tmp_path)
    (tmp_path / "ppo+envonly.yml").write_text("CartPole-v1:\n  n_steps: 8\n")
    with pytest.raises(ValueError, match="no entry for 'Acrobot-v1' and no 'default' entry"):
        harness.load_hyperparams("ppo+envonly", "Acrobot-v1", tmp_path)
    with pytest.raises(SystemExit):
        main(["--algos", "ppo+other", "--envs", "CartPole-v1", "--steps", "100", "--out", str(tmp_path / "out")])


def test_failing_run_is_recorded(tmp_path: Path) -> None:
    task = harness.RunTask("a2c", "NoSuchEnv-v0", 0, 100, 50, 1, str(tmp_path))
    result = harness._run_task(task)
    assert not result["ok"]
    err = (tmp_path / "runs" / "a2c__NoSuchEnv-v0__seed0.err").read_text()
    assert "Traceback" in err and "NoSuchEnv" in err
    assert not (tmp_path / "runs" / "a2c__NoSuchEnv-v0__seed0.csv").exists()


def test_train_metric_and_stop_at_threshold(tmp_path: Path) -> None:
    (tmp_path / "ppo.yml").write_text(HYPERPARAMS_YAML)
    progress = tmp_path / "run.csv.partial"
    frame, metadata = harness.run_experiment(
        "ppo",
        "CartPole-v1",
        0,
        4096,
        64,
        hyperparams_dir=tmp_path,
        metric="train",
        stop_at_threshold=True,
        threshold=15.0,
        progress_path=progress,
    )
    # the progress file was rewritten at every evaluation: it ends up holding every record of the run
    pd.testing.assert_frame_equal(pd.read_csv(progress), frame, check_dtype=False)
    # no training episode has ended at step 0; afterwards the training episodes' mean return is recorded
    assert math.isnan(frame["mean_return"].iloc[0])
    assert np.isfinite(frame["mean_return"].iloc[1:]).all()
    assert frame["curriculum_length"].isna().all()
    # random CartPole episodes last about 20 steps: the run stops at the first evaluation reaching 15, long before 4096
    assert metadata["stopped_at_threshold"] and metadata["metric"] == "train" and metadata["reward_threshold"] == 15.0
    assert frame["mean_return"].iloc[-1] >= 15.0 and (frame["mean_return"].iloc[1:-1] < 15.0).all()
    assert frame["timesteps"].iloc[-1] < 4096
    with pytest.raises(ValueError, match="has no"):
        harness.run_experiment("ppo", "Pendulum-v1", 0, 64, 32, hyperparams_dir=tmp_path, stop_at_threshold=True)
    with pytest.raises(ValueError, match="metric"):
        harness.BudgetEvalCallback(None, 10, 1, 10, metric="best")  # type: ignore[arg-type]


UREX_YAML = """
sb3_pcl/Copy-v0:
  policy: 'MlpLstmPolicy'
  n_envs: 20
  num_samples: 10
  learning_rate: 0.01
  policy_kwargs: "dict(lstm_hidden_size=8)"
  env_kwargs:
    render_mode: 'ansi'
"""


def test_curriculum_length_recorded(tmp_path: Path) -> None:
    (tmp_path / "urex.yml").write_text(UREX_YAML)
    out = tmp_path / "grid"
    harness.run_grid(["urex"], ["sb3_pcl/Copy-v0"], [0], 600, 200, 1, 1, out, hyperparams_dir=tmp_path, metric="train")
    frame = pd.read_csv(out / "evaluations.csv")
    # the shared curriculum of the algorithmic tasks starts at min_length 2 (600 steps are far too few to promote)
    assert (frame["curriculum_length"] == 2).all()
    # the episode statistics grow at the end of each batch: NaN only until the first batch is complete
    assert np.isfinite(frame["mean_return"].iloc[-2:]).all()
    summary = (out / "results.md").read_text()
    assert "| Curriculum length |" in summary and "2.0 [2, 2]" in summary
    assert "mean return of the last 100 training episodes" in summary


def test_algorithmic_vec_env_gives_the_same_runs(tmp_path: Path) -> None:
    (tmp_path / "urex.yml").write_text(UREX_YAML)
    frames, metadata = {}, {}
    for vec_env in ("dummy", "algorithmic"):
        frames[vec_env], metadata[vec_env] = harness.run_experiment(
            "urex", "sb3_pcl/Copy-v0", 0, 1000, 200, hyperparams_dir=tmp_path, metric="train", vec_env=vec_env
        )
    assert metadata["dummy"]["vec_env"] == "DummyVecEnv" and metadata["algorithmic"]["vec_env"] == "AlgorithmicVecEnv"
    columns = ["timesteps", "mean_return", "std_return", "curriculum_length"]
    pd.testing.assert_frame_equal(frames["dummy"][columns], frames["algorithmic"][columns])
    with pytest.raises(ValueError, match="vec_env"):
        harness.run_grid(["urex"], ["sb3_pcl/Copy-v0"], [0], 100, 50, 1, 1, tmp_path / "bad", vec_env="fast")


def test_concurrent_invocations_keep_each_others_config_entries(tmp_path: Path) -> None:
    """Two invocations writing to one folder: the one finishing first must not drop the other's entry."""
    config_path = tmp_path / harness.CONFIG_FILENAME
    first = {"command": "run A", "started": "t0", "finished": None}
    second = {"command": "run B", "started": "t1", "finished": None}
    config_path.write_text(json.dumps({"invocations": [first, second]}))
    # A finishes holding a stale copy from before B started; B's entry must survive.
    harness._record_finished_invocation(config_path, dict(first), ["a_failed"])
    entries = json.loads(config_path.read_text())["invocations"]
    assert [entry["command"] for entry in entries] == ["run A", "run B"]
    assert entries[0]["finished"] is not None and entries[0]["runs_failed"] == ["a_failed"]
    assert entries[1]["finished"] is None
    harness._record_finished_invocation(config_path, dict(second), [])
    entries = json.loads(config_path.read_text())["invocations"]
    assert all(entry["finished"] is not None for entry in entries) and len(entries) == 2
    # An entry that vanished from the file (e.g. the file was replaced) is appended again.
    config_path.write_text(json.dumps({"invocations": []}))
    harness._record_finished_invocation(config_path, dict(first), [])
    assert [entry["command"] for entry in json.loads(config_path.read_text())["invocations"]] == ["run A"]


def test_vec_env_speed_script(tmp_path: Path) -> None:
    from benchmarks import vec_env_speed

    out = tmp_path / "speed"
    argv = ["--envs", "sb3_pcl/Copy-v0", "--steps", "800", "--warmup", "400", "--repeats", "1", "--out", str(out)]
    assert vec_env_speed.main(argv) == 0  # 0: both VecEnv classes trained identically
    frame = pd.read_csv(out / "results.csv")
    assert sorted(frame["vec_env"]) == ["algorithmic", "dummy"] and (frame["fps"] > 0).all()
    assert (frame["timed_steps"] >= 800).all()
    summary = (out / "results.md").read_text()
    assert "| sb3_pcl/Copy-v0 |" in summary and "| yes |" in summary and "python -m benchmarks.vec_env_speed" in summary
    assert (out / "speed.png").stat().st_size > 0


class _ScriptedRepeatCopyPolicy:
    """RepeatCopy by rule: write the symbol read, turn on blanks; ``memory=True`` writes the third copy from memory."""

    BLANK = 5

    def __init__(self, memory: bool) -> None:
        self.memory = memory

    def predict(self, obs: np.ndarray, state: Any, episode_start: np.ndarray, deterministic: bool) -> tuple[np.ndarray, Any]:
        symbol = int(obs[0])
        if episode_start[0]:
            state = {"direction": 1, "blanks": 0, "seen": [], "recalled": 0}
        if symbol == self.BLANK:
            state["blanks"] += 1
            if state["blanks"] > 2 or (self.memory and state["blanks"] == 2):
                action = (0, 1, state["seen"][state["recalled"]])  # keep going left, write from memory
                state["recalled"] += 1
            else:
                state["direction"] = 1 - state["direction"]
                action = (state["direction"], 0, 0)
        else:
            if state["blanks"] == 0:
                state["seen"].append(symbol)
            action = (state["direction"], 1, symbol)
        return np.array([action]), state


@pytest.mark.parametrize("memory", [False, True])
def test_repeatcopy_strategy(memory: bool) -> None:
    from benchmarks.repeatcopy_strategy import play

    result = play(_ScriptedRepeatCopyPolicy(memory), length=6, episodes=5)
    assert result["perfect"] == 1.0 and result["failures"] == {}
    assert result["third_copy_writes"] >= 5 * 6  # inputs of 6 to 8 symbols
    assert result["third_copy_reading"] == (0.0 if memory else 1.0)


class _ScriptedReversePolicy:
    """Reverse by rule: read to the blank, turn and write what is read; ``early=True`` first writes the symbol read."""

    BLANK = 2

    def __init__(self, early: bool) -> None:
        self.early = early

    def predict(self, obs: np.ndarray, state: Any, episode_start: np.ndarray, deterministic: bool) -> tuple[np.ndarray, Any]:
        symbol = int(obs[0])
        if episode_start[0]:
            state = {"turned": False, "first": True}
        if self.early and state["first"]:
            state["first"] = False
            return np.array([(1, 1, symbol)]), state
        state["first"] = False
        if symbol == self.BLANK:
            state["turned"] = True
            return np.array([(0, 0, 0)]), state
        return np.array([(0, 1, symbol) if state["turned"] else (1, 0, 0)]), state


@pytest.mark.parametrize("early", [False, True])
def test_reverse_strategy(early: bool) -> None:
    from benchmarks.reverse_strategy import play

    result = play(_ScriptedReversePolicy(early), length=6, episodes=40)
    if not early:
        assert result["perfect"] == 1.0 and result["failures"] == {} and result["early_writes"] == 0
    else:
        # The guess is right when the first symbol equals the last one (half the time); the rest then fails after
        # the turn, since the target's first symbol has been used up.
        assert result["early_writes"] == 40 and 0.2 < result["early_writes_right"] < 0.8
        failures = result["failures"]
        assert failures["before turn/wrong symbol"] == round(40 * (1 - result["early_writes_right"]))
        assert result["perfect"] < 0.2 and sum(failures.values()) + round(40 * result["perfect"]) == 40
