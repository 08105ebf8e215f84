"""Tests of ``benchmarks/aggregate.py``: rliable aggregates (IQM, mean, median, optimality gap) of a suite folder."""

import json
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

pytest.importorskip("rliable")

from benchmarks import aggregate, harness, report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: Final returns of the synthetic suite, per (algo, env): one per seed.
FINAL = {
    ("alpha", "Env-A"): [10.0, 30.0, 50.0, 90.0],
    ("alpha", "Env-B"): [-80.0, -40.0, -20.0, 10.0],
    ("beta", "Env-A"): [100.0, 70.0],
    ("beta", "Env-B"): [5.0, -60.0],
}
#: Env-A: random 0, reference 100; Env-B: random = mean of the step-0 returns (-100 and -60 -> -80), reference 0.
NORMALISATION = aggregate.SuiteNormalisation(
    envs={"Env-A": (0.0, 100.0), "Env-B": (aggregate.STEP0, 0.0)},
    random_source="test random",
    reference_source="test reference",
)


def synthetic_frame(final: dict[tuple[str, str], list[float]] = FINAL, steps: tuple[int, ...] = (0, 50, 100)) -> pd.DataFrame:
    """Evaluations at ``steps``: step 0 at -100 (Env-B seed 0) / -60 (others) or 0 (Env-A), rising linearly to the final."""
    rows = []
    for (algo, env), finals in final.items():
        for seed, last in enumerate(finals):
            start = 0.0 if env == "Env-A" else (-100.0 if seed == 0 else -60.0)
            for step in steps:
                value = start + (last - start) * step / steps[-1]
                rows.append({"algo": algo, "env": env, "seed": seed, "timesteps": step, "mean_return": value})
    frame = pd.DataFrame(rows)
    frame["std_return"] = 0.0
    return frame


def write_suite(folder: Path, frame: pd.DataFrame) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_csv(folder / harness.EVALUATIONS_FILENAME, index=False)
    return folder


def expected_scores(algo: str) -> np.ndarray:
    random_b = np.mean([-100.0, -60.0, -60.0, -60.0, -100.0, -60.0])  # step-0 of every Env-B run of both algorithms
    env_a = np.array(FINAL[(algo, "Env-A")]) / 100.0
    env_b = (np.array(FINAL[(algo, "Env-B")]) - random_b) / (0.0 - random_b)
    return np.stack([env_a, env_b], axis=1)


def test_point_estimates_are_rliable_aggregates_of_the_normalised_final_scores(tmp_path: Path) -> None:
    folder = write_suite(tmp_path / "suite", synthetic_frame())
    result = aggregate.aggregate_suite(folder, normalisation=NORMALISATION, reps=300, n_points=3)
    assert result.references == {"Env-A": (0.0, 100.0), "Env-B": (pytest.approx(-220.0 / 3), 0.0)}
    assert result.selection.envs == ["Env-A", "Env-B"] and result.selection.seeds == {"alpha": [0, 1, 2, 3], "beta": [0, 1]}
    for algo in ("alpha", "beta"):
        scores = expected_scores(algo)
        np.testing.assert_allclose(result.scores[algo], scores)
        flat = np.sort(scores.ravel())
        cut = len(flat) // 4  # IQM: the middle half (8 scores: drop 2 each side; 4 scores: 1 each side)
        iqm = flat[cut : len(flat) - cut].mean()
        mean = scores.mean()
        median = np.median(scores.mean(axis=0))
        gap = np.mean(1.0 - np.minimum(scores, 1.0))
        np.testing.assert_allclose(result.points[algo], [iqm, mean, median, gap])
        assert np.isnan(result.intervals[algo]).all()  # 4 and 2 seeds per env: no interval
    six = {(algo, env): [10.0, 30.0, 50.0, 90.0, 20.0, 70.0] for algo in ("alpha", "beta") for env in ("Env-A", "Env-B")}
    result = aggregate.aggregate_suite(
        write_suite(tmp_path / "six", synthetic_frame(six)), normalisation=NORMALISATION, reps=300
    )
    for algo in ("alpha", "beta"):
        lower, upper = result.intervals[algo]
        assert np.all(lower <= result.points[algo] + 1e-12) and np.all(result.points[algo] <= upper + 1e-12)
        assert np.all(lower < upper)  # six seeds per env: an interval, and the resamples differ


def test_bootstrap_is_reproducible_and_leaves_numpy_global_state_alone() -> None:
    scores = {"alpha": expected_scores("alpha")}
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    first = aggregate.interval_estimates(scores, reps=200, seed=5)
    assert np.random.random() == before
    second = aggregate.interval_estimates(scores, reps=200, seed=5)
    np.testing.assert_array_equal(first[1]["alpha"], second[1]["alpha"])


def test_selection_drops_algorithms_missing_an_env_and_seeds_missing_on_an_env() -> None:
    final = {
        **FINAL,
        ("alpha", "Env-B"): [-80.0, -40.0, -20.0],  # seed 3 only on Env-A
        ("gamma", "Env-A"): [1.0, 2.0],  # never run on Env-B
    }
    selection = aggregate.select_runs(synthetic_frame(final), env_order=["Env-B", "Env-A"])
    assert selection.envs == ["Env-B", "Env-A"]
    assert selection.seeds == {"alpha": [0, 1, 2], "beta": [0, 1]}
    assert selection.excluded == {"gamma": ["Env-B"]}
    assert selection.dropped == {("alpha", "Env-A"): [3]}
    with pytest.raises(ValueError, match="No algorithm has runs on every env"):
        aggregate.select_runs(synthetic_frame({("a", "Env-A"): [1.0], ("b", "Env-B"): [1.0]}))


def test_curves_take_the_latest_evaluation_on_the_eval_grid() -> None:
    frame = synthetic_frame({("alpha", "Env-A"): [80.0, 40.0]}, steps=(0, 10, 20, 40))
    frame.loc[frame["timesteps"] == 10, "timesteps"] = 13  # an evaluation a little past its grid step
    references = {"Env-A": (0.0, 100.0)}
    selection = aggregate.select_runs(frame)
    steps, scores = aggregate.score_curves(frame, selection, references, n_points=5)["alpha"]
    assert steps.tolist() == [0, 10, 20, 30, 40]
    # step 10 comes before the evaluation made at 13: the step-0 evaluation; step 30: the one at 20
    np.testing.assert_allclose(scores[:, 0, :], [[0.0, 0.0, 0.4, 0.4, 0.8], [0.0, 0.0, 0.2, 0.2, 0.4]])
    metadata = {("alpha", "Env-A", seed): {"eval_freq": 10, "steps": 40} for seed in (0, 1)}
    steps, scores = aggregate.score_curves(frame, selection, references, metadata, n_points=5)["alpha"]
    np.testing.assert_allclose(scores[0, 0], [0.0, 0.2, 0.4, 0.4, 0.8])  # 13 is the evaluation of step 10


def test_curves_of_runs_stopped_at_the_threshold_and_without_step_0_returns() -> None:
    frame = synthetic_frame({("alpha", "Env-A"): [100.0, 50.0]}, steps=(0, 10, 20, 40))
    frame = frame[~((frame["seed"] == 0) & (frame["timesteps"] == 40))]  # seed 0 stopped at 20 (return 50)
    frame.loc[frame["timesteps"] == 0, "mean_return"] = np.nan  # training-return metric: no episode yet at step 0
    references = {"Env-A": (0.0, 100.0)}
    metadata = {
        ("alpha", "Env-A", 0): {"eval_freq": 10, "steps": 40, "stopped_at_threshold": True},
        ("alpha", "Env-A", 1): {"eval_freq": 10, "steps": 40, "stopped_at_threshold": False},
    }
    frame = frame[frame["mean_return"].notna()]
    selection = aggregate.select_runs(frame)
    steps, scores = aggregate.score_curves(frame, selection, references, metadata, n_points=5)["alpha"]
    assert steps.tolist() == [10, 20, 30, 40]  # step 0 left out: no return there
    np.testing.assert_allclose(scores[:, 0, :], [[0.25, 0.5, 0.5, 0.5], [0.125, 0.25, 0.25, 0.5]])
    # without the metadata the stopped run is the shortest: the curve ends at its last evaluation
    steps, _ = aggregate.score_curves(frame, selection, references, n_points=3)["alpha"]
    assert steps.tolist() == [10, 20]


def test_cli_writes_the_three_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = synthetic_frame(
        {
            (algo, env): finals
            for algo, env, finals in [
                ("pcl", "CartPole-v1", [500.0, 450.0, 300.0]),
                ("pcl", "Acrobot-v1", [-90.0, -120.0, -300.0]),
                ("pcl", "Pendulum-v1", [-200.0, -180.0, -900.0]),
                ("ppo", "CartPole-v1", [500.0, 500.0, 480.0]),
                ("ppo", "Acrobot-v1", [-80.0, -85.0, -500.0]),
                ("ppo", "Pendulum-v1", [-150.0, -1200.0, -170.0]),
                ("trust_pcl", "CartPole-v1", [500.0, 500.0, 500.0]),
            ]
        }
    )
    folder = write_suite(tmp_path / "classic", frame)
    (folder / harness.RUN_METADATA_FILENAME).write_text(
        json.dumps(
            {
                f"{algo}__{env}__seed{seed}": {"algo": algo, "env": env, "seed": seed, "steps": 100, "eval_freq": 50}
                for algo, env, seed in frame[["algo", "env", "seed"]].drop_duplicates().itertuples(index=False)
            }
        )
    )
    assert report.main([str(folder)]) == 0
    assert "wrote" in capsys.readouterr().out and (folder / "results.md").is_file()
    for name in (aggregate.PROFILE_FILENAME, aggregate.SAMPLE_EFFICIENCY_FILENAME):
        assert (folder / name).read_bytes()[:8] == PNG_MAGIC
    text = (folder / aggregate.AGGREGATE_FILENAME).read_text()
    assert f"`python -m benchmarks.report {folder}`" in text
    assert "50000 bootstrap resamples, NumPy seed 0" in text
    assert "Generated 20" in text  # the date
    assert "| Pendulum-v1 | " in text and "(step-0 mean) | -250 |" in text  # the normalisation of each env
    assert "| CartPole-v1 | 0 | 475 |" in text and "| Acrobot-v1 | -500 | -100 |" in text
    assert "| pcl | 3 (all) | 0 1 2 | 100 |" in text and "| ppo | 3 (all) | 0 1 2 | 100 |" in text  # the runs
    assert "`trust_pcl` (not run on Acrobot-v1, Pendulum-v1)" in text
    pcl_row = next(line for line in text.splitlines() if line.startswith("| pcl | 3 x 3 |"))
    assert pcl_row.count("[") == 0  # 3 seeds per env: the four metrics without intervals


def test_bad_input_fails_with_a_clear_error(tmp_path: Path) -> None:
    frame = synthetic_frame()
    with pytest.raises(ValueError, match=r"a/evaluations\.csv: line 1: a column missing"):
        aggregate.load_evaluations(write_suite(tmp_path / "a", frame.drop(columns="mean_return")))
    with pytest.raises(FileNotFoundError, match=r"nowhere/evaluations\.csv"):
        aggregate.load_evaluations(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="Suite folder"):
        aggregate.aggregate_suite(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="No normalisation reference for suite 'elsewhere'"):
        aggregate.write_aggregate(write_suite(tmp_path / "elsewhere", frame))
    with pytest.raises(ValueError, match="No normalisation reference for env 'Env-A'"):
        aggregate.aggregate_suite(write_suite(tmp_path / "classic", frame))
    nan = frame.copy()
    nan.loc[nan["timesteps"] == 50, "mean_return"] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinite.*step 50"):
        aggregate.load_evaluations(write_suite(tmp_path / "nan", nan))
    nan_start = frame.copy()
    nan_start.loc[nan_start["timesteps"] == 0, "mean_return"] = np.nan  # allowed: dropped
    assert (aggregate.load_evaluations(write_suite(tmp_path / "nan0", nan_start))["timesteps"] > 0).all()
    with pytest.raises(ValueError, match="step-0 evaluation, and no run of it has one"):
        aggregate.resolve_references(frame[frame["timesteps"] > 0], NORMALISATION)
    with pytest.raises(ValueError, match="reference return equals the random return"):
        aggregate.resolve_references(frame, aggregate.SuiteNormalisation({"Env-A": (1.0, 1.0), "Env-B": (0.0, 1.0)}, "", ""))
    duplicated = pd.concat([frame, frame.iloc[:1]])
    with pytest.raises(ValueError, match=r"dup/evaluations\.csv: Index has duplicate keys"):
        aggregate.load_evaluations(write_suite(tmp_path / "dup", duplicated))
    fractional = frame.assign(seed=frame["seed"] + 0.5)
    with pytest.raises(ValueError, match=r"frac/evaluations\.csv: line 2: seed must be a whole number"):
        aggregate.load_evaluations(write_suite(tmp_path / "frac", fractional))


def test_references_are_the_env_thresholds_and_cover_the_committed_suites() -> None:
    """The thresholds in NORMALISATION are the envs' own; every env of each committed suite has a normalisation."""
    import sb3_pcl.envs  # noqa: F401  (registers the algorithmic tasks)

    for suite in ("classic", "algorithmic"):
        for env, (_, reference) in aggregate.NORMALISATION[suite].envs.items():
            threshold = gym.spec(env).reward_threshold
            assert threshold is None or math.isclose(threshold, reference), env
    for suite in aggregate.NORMALISATION:
        folder = aggregate.RESULTS_DIR / suite
        frame = aggregate.load_evaluations(folder)
        aggregate.resolve_references(frame, aggregate.NORMALISATION[suite])
        for name in aggregate.OUTPUT_FILENAMES:
            assert (folder / name).is_file(), f"{folder / name} is missing: python -m benchmarks.report {folder}"
