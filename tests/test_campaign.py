"""Campaigns (``python -m benchmarks.campaign``): the file format and its checks, the run order, running the unfinished
runs (resuming partial ones, recording stopped ones), status and report; and the checked-in campaign files."""

import functools
import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from run_testing import Crash, CrashAt

from benchmarks import algorithms, backends, campaign, checkpoint, harness, report, reporting, store, summary
from benchmarks.campaign import __main__ as campaign_cli

CAMPAIGNS_DIR = algorithms.REPO_ROOT / "benchmarks" / "campaigns"
PAPER = {"HalfCheetah-v5": 7057, "Swimmer-v5": 297, "Hopper-v5": 3805, "Walker2d-v5": 5027, "Ant-v5": 6104}
MUJOCO = ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5"]


def _write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "campaign.yml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _tiny(tmp_path: Path) -> dict:
    return {
        "out": str(tmp_path / "out"),
        "eval": {"every_steps": 200, "episodes": 1},
        "checkpoint_every": 0.003,
        "runs": [
            {"algo": "a2c", "env": "CartPole-v1", "seeds": [0, 1], "steps": 800},
            {
                "algo": "ppo",
                "env": "CartPole-v1",
                "seeds": [0],
                "steps": 1200,
                "stop_below": {"by_steps": 500, "best_return": 1e9},
            },
        ],
    }


def test_runs_go_seed_by_seed_in_the_file_order(tmp_path: Path) -> None:
    loaded = campaign.load_campaign(_write(tmp_path, _tiny(tmp_path)), tmp_path / "checkpoints")
    assert [task.name for task in loaded.tasks] == [
        "a2c__CartPole-v1__seed0",
        "ppo__CartPole-v1__seed0",
        "a2c__CartPole-v1__seed1",
    ]
    ppo = loaded.tasks[1]
    assert ppo.stop_below == (500, 1e9) and ppo.steps == 1200 and ppo.eval_freq == 200 and ppo.cpu_budget is None
    assert all(Path(task.checkpoint_dir).is_relative_to(tmp_path / "checkpoints") for task in loaded.tasks)  # type: ignore[arg-type]
    assert loaded.report_marks == ("timesteps", (300.0, 600.0, 1200.0))  # 25%, 50%, 100% of the largest budget


def _run(**change: object) -> dict:
    """:return: A campaign change: one run of a2c on CartPole-v1 for 10 steps, with ``change`` (``None``: key removed)"""
    run = {"algo": "a2c", "env": "CartPole-v1", "seeds": [0], "steps": 10, **change}
    return {"runs": [{key: value for key, value in run.items() if value is not None}]}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_run(steps=None), r"runs\[0\]: give exactly one budget"),
        (_run(cpu_seconds=1), r"runs\[0\]: give exactly one budget"),
        (_run(algo="nope"), r"runs\[0\]: Unknown algorithm"),
        (_run(algo=3), r"runs\[0\]\.algo: must be a non-empty string"),
        (_run(steps=-1), r"runs\[0\]\.steps: must be a positive number, got -1"),
        (_run(steps=2.5), r"runs\[0\]\.steps: must be a whole number"),
        (_run(steps="1e6"), r"runs\[0\]\.steps: .*YAML reads 1e6 as text"),
        (_run(max_steps=10), r"runs\[0\]\.max_steps: caps a cpu_seconds budget"),
        (_run(seeds="0"), r"runs\[0\]\.seeds: must be a non-empty list"),
        (_run(seeds=[0, -1]), r"runs\[0\]\.seeds\[1\]: must be a whole number from 0 to 2\*\*32 - 1, got -1"),
        (_run(seeds=[2**32]), r"runs\[0\]\.seeds\[0\]: must be a whole number from 0 to 2\*\*32 - 1"),
        (_run(seeds=[True]), r"runs\[0\]\.seeds\[0\]: must be a whole number"),
        (_run(seeds=[1.0]), r"runs\[0\]\.seeds\[0\]: must be a whole number"),
        (_run(typo=1), r"runs\[0\]: unknown keys \['typo'\]"),
        (_run(envs=["CartPole-v1"]), r"runs\[0\]: give env .* or envs"),
        (_run(env=None), r"runs\[0\]: give env .* or envs"),
        (_run(env=None, envs=["CartPole-v1", 4]), r"runs\[0\]\.envs\[1\]: must be a non-empty string"),
        (_run(algo="sac", env="HalfCheetah-v5"), r"runs\[0\]: .*no entry for HalfCheetah-v5"),
        (_run(seeds=[0, 0]), "runs: runs listed twice"),
        (_run(zoo_v4_entries="false"), r"runs\[0\]\.zoo_v4_entries: must be true or false \(unquoted\), got 'false'"),
        (_run(tuning_seeds="yes"), r"runs\[0\]\.tuning_seeds: must be true or false"),
        (_run(hyperparams_dir="no/such/folder"), r"runs\[0\]\.hyperparams_dir: folder 'no/such/folder' not found"),
        (_run(vec_env="fast"), r"runs\[0\]\.vec_env: must be one of dummy, subproc, algorithmic"),
        (_run(entry=""), r"runs\[0\]\.entry: must be a non-empty string"),
        (_run(stop_below={"by_steps": 5}), r"runs\[0\]\.stop_below: missing best_return"),
        (_run(stop_below={"by_steps": 5, "best_return": "1e9"}), r"stop_below\.best_return: .*YAML reads 1e6 as text"),
        (_run(stop_below=[5, 1]), r"runs\[0\]\.stop_below: must be a mapping of by_steps, best_return"),
        (_run(steps=None, cpu_seconds=5, vec_env="subproc"), r"runs\[0\]: .*env worker"),
        ({"runs": []}, "runs: must be a non-empty list"),
        ({"runs": ["a2c"]}, r"runs\[0\]: must be a mapping of algo"),
        ({"eval": {"episodes": 3}}, "eval: needs every_cpu_seconds and/or every_steps"),
        ({"eval": {"every_cpu_seconds": 0}}, r"eval\.every_cpu_seconds: must be a positive number"),
        ({"eval": {"every_steps": 200, "episode": 3}}, r"eval: unknown keys \['episode'\]"),
        ({"eval": {"every_steps": 200, "at_start": "false"}}, r"eval\.at_start: must be true or false"),
        ({"eval": {"every_steps": 200, "episodes": 2.5}}, r"eval\.episodes: must be a whole number"),
        ({"checkpoint_every": float("nan")}, "checkpoint_every: must be a positive number"),
        ({"zoo_v4_entries": "false"}, "zoo_v4_entries: must be true or false"),
        ({"hyperparams_dir": "no/such/folder"}, "hyperparams_dir: folder 'no/such/folder' not found"),
        ({"report": {"minutes": [1]}}, r"report: unknown keys \['minutes'\]"),
        ({"report": {"steps": [100], "cpu_seconds": [1]}}, "report: takes one of"),
        ({"report": {"steps": []}}, r"report\.steps: must be a non-empty list"),
        ({"report": {"steps": [100, 1.5]}}, r"report\.steps\[1\]: must be a whole number"),
        ({"outt": "x"}, r"unknown keys \['outt'\]"),
        ({"out": 5}, "out: must be a non-empty string"),
        ({"notes": ["a"]}, "notes: must be text"),
        ({"order": "random"}, "order: must be one of by_seed, by_block"),
        ({"reference": {"algo": "sac", "columns": {"Paper": {"CartPole-v1": 1}}}}, "not an algorithm of the campaign"),
        ({"reference": {"algo": "a2c", "columns": {"Paper": {"Pendulum-v1": 1}}}}, r"\['Paper'\]: unknown keys"),
        (
            {"reference": {"algo": "a2c", "columns": {"Paper": {"CartPole-v1": "high"}}}},
            r"reference\.columns\['Paper'\]\['CartPole-v1'\]: must be a finite number",
        ),
        ({"reference": {"algo": "a2c", "columns": {}}}, "reference.columns: must map column names"),
        ({"reference": {"algo": "a2c", "table": {}}}, r"reference: unknown keys \['table'\]"),
        ({"reference": {"algo": "a2c", "columns": {"P": {}}, "note": 3}}, "reference.note: must be text"),
        ({"docs": "docs/page.md"}, "docs: must be a list of file paths"),
        ({"docs": ["docs/no_such_page.md"]}, r"docs\[0\]: file 'docs/no_such_page.md' not found"),
    ],
)
def test_bad_campaign_files_are_refused_naming_the_key_and_the_problem(tmp_path: Path, change: dict, message: str) -> None:
    spec = {**_tiny(tmp_path), **change}
    path = _write(tmp_path, spec)
    with pytest.raises(checkpoint.BadFileError, match=message) as info:
        campaign.load_campaign(path, tmp_path)
    assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [("out: [unclosed\n", "cannot be read as YAML"), ("- out\n", "must be a mapping of out"), ("", "must be a mapping")],
)
def test_unreadable_campaign_files_are_refused_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "campaign.yml"
    path.write_text(text)
    with pytest.raises(checkpoint.BadFileError, match=message) as info:
        campaign.load_campaign(path, tmp_path)
    assert str(info.value).startswith(f"{path}: ")
    with pytest.raises(checkpoint.BadFileError, match="cannot be read"):
        campaign.load_campaign(tmp_path / "missing.yml", tmp_path)


def test_the_largest_seed_and_existing_docs_and_folders_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("# Page\n")
    spec = {**_tiny(tmp_path), **_run(seeds=[campaign.MAX_SEED]), "docs": [str(tmp_path / "page.md")]}
    spec["runs"][0]["hyperparams_dir"] = str(tmp_path)
    loaded = campaign.load_campaign(_write(tmp_path, spec), tmp_path)
    assert [task.seed for task in loaded.tasks] == [campaign.MAX_SEED] and loaded.docs == (tmp_path / "page.md",)
    assert loaded.tasks[0].hyperparams_dir == str(tmp_path)


@pytest.mark.parametrize("path", sorted(CAMPAIGNS_DIR.glob("*.yml")), ids=lambda path: path.name)
def test_every_committed_campaign_file_validates(path: Path) -> None:
    assert campaign.load_campaign(path).tasks


#: the stamp of rows written by an earlier session, on another machine
OLD_STAMP = {"git": "old", "cpu": "Old CPU"}


def test_run_resumes_partial_runs_records_stopped_ones_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, _tiny(tmp_path))
    loaded = campaign.load_campaign(path, tmp_path / "checkpoints")
    first = loaded.tasks[0]
    # a first session killed mid-run: rows written as it went, and a checkpoint
    with pytest.raises(Crash):
        harness.run_experiment(first, functools.partial(store.store_rows, first, OLD_STAMP), callbacks=[CrashAt(500)])
    states = campaign.run_states(loaded).set_index("name")
    assert states.loc[first.name, "state"] == "partial" and states.loc["ppo__CartPole-v1__seed0", "state"] == "to do"
    saved = checkpoint.read_state(first.checkpoint_dir)  # type: ignore[arg-type]
    assert saved is not None and 0 < saved["timesteps"] <= 500

    assert (
        campaign_cli.main(["run", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints"), "--nice", "0", "--quiet"]) == 0
    )
    out = tmp_path / "out"
    frame = pd.read_csv(out / "evaluations.csv")
    assert set(store.COLUMNS) == set(frame.columns)
    for _, run in frame.groupby(["algo", "env", "seed"]):
        for column in ("timesteps", "cpu_time_s", "wall_time_s"):
            assert run[column].is_monotonic_increasing, column
    a2c = frame[(frame["algo"] == "a2c") & (frame["seed"] == 0)]
    assert a2c["timesteps"].tolist() == [0, 200, 400, 600, 800]
    # rows of the first session up to its checkpoint keep the revision and CPU that wrote them; the rest is this one's
    before, after = a2c[a2c["timesteps"] <= saved["timesteps"]], a2c[a2c["timesteps"] > saved["timesteps"]]
    assert set(before["git"]) == {"old"} and set(before["cpu"]) == {"Old CPU"}
    assert "old" not in set(after["git"]) and set(after["cpu"]) == {harness.cpu_model()}
    metadata = json.loads((out / "run_metadata.json").read_text())
    assert metadata[first.name]["resumed_from"] == saved["timesteps"] and metadata[first.name]["status"] == "done"
    ppo = metadata["ppo__CartPole-v1__seed0"]
    assert ppo["status"] == "stopped" and ppo["stopped_by_rule"] and ppo["final_timesteps"] < 1200
    assert frame[frame["algo"] == "ppo"]["timesteps"].max() >= 500
    assert not (tmp_path / "checkpoints" / Path(first.checkpoint_dir).parent.name / first.name).exists()  # type: ignore[arg-type]
    assert "1 stopped" in capsys.readouterr().out

    # a second run has nothing left to do; status and report read the folder
    assert (
        campaign_cli.main(["run", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints"), "--nice", "0", "--quiet"]) == 0
    )
    assert len(pd.read_csv(out / "evaluations.csv")) == len(frame)
    assert campaign_cli.main(["status", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints")]) == 0
    text = capsys.readouterr().out
    assert "3 runs: 2 done, 1 stopped, 0 partial, 0 failed, 0 to do" in text
    report = (out / "results.md").read_text()
    assert "## CartPole-v1" in report and "| a2c | 600 | 2/2 |" in report and "| ppo | 1.2k | 0/1 |" in report
    machine = harness.machine_info()  # each invocation's row says where it ran, with the versions that matter
    assert f"| {machine['cpu']}, {machine['cores']} cores; torch {machine['torch']}, stable-baselines3 " in report
    for name in ("CartPole-v1_steps.png", "CartPole-v1_cpu.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # its rows come from two CPUs: the report says which run trained where, and at how many env steps per CPU second
    rate = a2c["timesteps"].iloc[-1] / a2c["cpu_time_s"].iloc[-1]
    assert "## CPUs" in report and f"| CartPole-v1 | a2c | 0 | Old CPU then {harness.cpu_model()} | {rate:.0f} |" in report
    assert f"| CartPole-v1 | a2c | 1 | {harness.cpu_model()} |" in report


def test_a_partial_run_without_its_checkpoint_is_flagged_and_starts_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rows past step 0 but no checkpoint (the cache wiped, or a results file reverted to an older commit after the
    # run finished and removed its checkpoint): status says so before anything runs, and run warns as it starts again
    spec = {**_tiny(tmp_path), "runs": [{"algo": "a2c", "env": "CartPole-v1", "seeds": [0], "steps": 800}]}
    path = _write(tmp_path, spec)
    loaded = campaign.load_campaign(path, tmp_path / "checkpoints")
    first = loaded.tasks[0]
    with pytest.raises(Crash):
        harness.run_experiment(first, functools.partial(store.store_rows, first, OLD_STAMP), callbacks=[CrashAt(500)])
    assert not campaign.run_states(loaded)["restarts"].any()  # its checkpoint is there: it resumes
    shutil.rmtree(first.checkpoint_dir, ignore_errors=True)  # type: ignore[arg-type]
    states = campaign.run_states(loaded)
    assert states["state"].tolist() == ["partial"] and states["restarts"].tolist() == [True]
    assert "NO CHECKPOINT: starts again from 0" in campaign.format_status(loaded, states)

    execute = backends.execute
    rows_when_it_started = []

    def spy(tasks, *args, **kwargs):
        rows_when_it_started.append(len(store.read_evaluations(tmp_path / "out")))
        return execute(tasks, *args, **kwargs)

    monkeypatch.setattr(backends, "execute", spy)
    with caplog.at_level("WARNING", logger=campaign.logger.name):
        results = campaign.run_campaign(loaded, workers=1, command="test", report=report.write_report)
    assert [result["ok"] for result in results] == [True]
    assert f"{first.name} has rows to " in caplog.text and "starts again from 0" in caplog.text
    # its old rows are gone before it starts: none can lend its stamp to a new row (at step 0 their keys can match)
    assert rows_when_it_started == [0]
    frame = pd.read_csv(tmp_path / "out" / "evaluations.csv")
    assert "old" not in set(frame["git"]) and frame["timesteps"].tolist() == [0, 200, 400, 600, 800]
    assert json.loads((tmp_path / "out" / "run_metadata.json").read_text())[first.name]["resumed_from"] == 0


def test_a_campaign_runs_once_at_a_time(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, _tiny(tmp_path))
    loaded = campaign.load_campaign(path, tmp_path / "checkpoints")
    # held as another run command of the same campaign would
    with campaign._running(loaded), pytest.raises(SystemExit):
        campaign_cli.main(["run", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints"), "--nice", "0"])
    assert "is already running (pid" in capsys.readouterr().err
    assert not (tmp_path / "out" / "config.json").exists() and not (tmp_path / "out" / "evaluations.csv").exists()


def test_a_second_run_with_another_checkpoint_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, _tiny(tmp_path))
    with campaign._running(campaign.load_campaign(path, tmp_path / "checkpoints")), pytest.raises(SystemExit):
        campaign_cli.main(["run", str(path), "--checkpoint-dir", str(tmp_path / "elsewhere"), "--nice", "0"])
    error = capsys.readouterr().err
    assert "is already running (pid" in error and f"checkpoints in {tmp_path / 'checkpoints'}" in error
    assert f"this one: checkpoints in {tmp_path / 'elsewhere'}" in error
    assert not (tmp_path / "out" / "config.json").exists()


def test_intervals_from_six_seeds_and_marks() -> None:
    low, high = reporting.interval_of_mean([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert 1.0 <= low < 3.5 < high <= 6.0
    assert all(math.isnan(value) for value in reporting.interval_of_mean([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert reporting.mean_cell([1.0, 2.0, 4.0]) == "2.3 (3 seeds: 1.0 to 4.0)" and reporting.mean_cell([5.0]) == "5.0"
    assert reporting.mean_cell(range(6)).startswith("2.5 [")
    run = pd.DataFrame({"cpu_time_s": [0.0, 290.0, 610.0], "timesteps": [0, 100, 200], "mean_return": [1.0, 2.0, 3.0]})
    assert summary.value_at(run, "cpu_time_s", 300) == (3.0, 200.0)  # the first evaluation at or after the mark
    assert summary.value_at(run, "cpu_time_s", 900) is None  # not there (yet)


def test_cpu_hour_campaign_file() -> None:
    loaded = campaign.load_campaign(CAMPAIGNS_DIR / "cpu_hour.yml")
    assert loaded.out == Path("benchmarks/results/cpu_hour")
    assert len(loaded.tasks) == 72 and all(task.cpu_budget == 3600 and task.eval_cpu_seconds == 300 for task in loaded.tasks)
    assert all(task.n_eval_episodes == 10 and task.eval_freq == harness.TIME_BUDGET_STEP_CAP for task in loaded.tasks)
    # seed 0 of every (algorithm, task) first, Trust-PCL and SAC before TRPO
    first = [(task.algo, task.env, task.seed) for task in loaded.tasks[:15]]
    assert first == [(algo, env, 0) for algo in ("trust_pcl", "sac", "trpo") for env in MUJOCO]
    assert [task.seed for task in loaded.tasks] == [0] * 20 + [1] * 20 + [2] * 20 + [100] * 4 + [101] * 4 + [102] * 4
    # PPO (rl-zoo3's v4 entries under the v5 ids) last within each seed: the other runs keep their names and order
    assert [(task.algo, task.env) for task in loaded.tasks[15:20]] == [("ppo", env) for env in MUJOCO]
    ppo = loaded.tasks[15]
    assert algorithms.load_hyperparams("ppo", ppo.env, ppo.hyperparams_dir, ppo.zoo_v4_entries)[1].endswith(
        "[HalfCheetah-v4 for HalfCheetah-v5]"
    )
    # Trust-PCL's tuned entries (all but Ant's) were chosen on seeds 0-2: those runs are apart, seeds 100-102 compared
    tuned = [env for env in MUJOCO if env != "Ant-v5"]
    assert loaded.tuning_seeds == {f"trust_pcl__{env}__seed{seed}" for env in tuned for seed in (0, 1, 2)}
    assert all(task.algo == "trust_pcl" and task.env in tuned for task in loaded.tasks if task.seed >= 100)
    assert loaded.report_marks == ("cpu_time_s", (900.0, 1800.0, 3600.0))
    sac = loaded.tasks[5]
    assert algorithms.load_hyperparams("sac", sac.env, sac.hyperparams_dir, sac.zoo_v4_entries)[1].endswith(
        "[HalfCheetah-v4 for HalfCheetah-v5]"
    )


def test_paper_table1_campaign_file() -> None:
    loaded = campaign.load_campaign(CAMPAIGNS_DIR / "paper_table1.yml")
    assert loaded.out == Path("benchmarks/results/paper_table1")
    pilot = [task for task in loaded.tasks if task.algo == "trust_pcl" and task.seed == 0]
    assert sorted(task.env for task in pilot) == sorted(PAPER)
    # the pilot first; then at most two alternatives per stopped task, each one variation from the authors' list;
    # then seeds 1 and 2, without the rule, of the tasks the pilot's rule did not stop
    assert list(loaded.tasks[: len(PAPER)]) == pilot
    later = [task for task in loaded.tasks if task.seed > 0]
    alternatives = [task for task in loaded.tasks[len(PAPER) :] if task.seed == 0]
    stopped = {"HalfCheetah-v5", "Walker2d-v5", "Ant-v5"}  # the log of NOTES.md
    assert later == list(loaded.tasks[len(loaded.tasks) - len(later) :]) and all(task.algo == "trust_pcl" for task in later)
    assert all(task.env not in stopped and task.stop_below is None for task in later)
    assert {task.env for task in alternatives} <= stopped
    assert all(sum(task.env == env for task in alternatives) <= 2 for env in PAPER)
    allowed = ({"max_divergence": 0.0005}, {"max_divergence": 0.002}, {"n_steps": 1}, {"n_steps": 5})
    for task in loaded.tasks:
        # the &mujoco-2017 recipe (the Ant-v5 entry) on every task, 10M steps, evaluated every 250k, the stop rule
        assert task.entry == "Ant-v5" and task.steps == 10_000_000 and task.eval_freq == 250_000
        assert task.n_eval_episodes == 10 and task.cpu_budget is None
        # HalfCheetah seed 0 runs again to 10M without the rule (NOTES.md, "HalfCheetah-v5 to 10M")
        unstopped = task.seed or (task.algo == "trust_pcl" and task.env == "HalfCheetah-v5")
        assert task.stop_below == (None if unstopped else (3_000_000, 0.25 * PAPER[task.env]))
        overrides, source = algorithms.load_hyperparams(task.algo, task.env, entry=task.entry)
        assert source.startswith(f"hyperparams/trust_pcl.yml [Ant-v5{'' if task.env == 'Ant-v5' else f' for {task.env}'}]")
        assert overrides == {} if task in pilot or task in later else overrides in allowed
    assert loaded.reference is not None and loaded.reference.algo == "trust_pcl"
    assert loaded.reference.columns["Paper Trust-PCL"] == PAPER and loaded.docs == (Path("docs/reproduction.md"),)
    notes = (algorithms.REPO_ROOT / "benchmarks" / "results" / "paper_table1" / "NOTES.md").read_text()
    assert "## Stop rule of the pilot" in notes and all(f"| {PAPER[env] * 0.25:g} |" in notes for env in PAPER)


def test_status_of_the_checked_in_campaigns_in_one_call(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    files = sorted(str(path) for path in (algorithms.REPO_ROOT / "benchmarks" / "campaigns").glob("*.yml"))
    assert campaign_cli.main(["status", *files, "--checkpoint-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert all(f"{file}:\n" in text for file in files) and text.count("runs: ") == len(files)


def test_reference_table_and_its_docs_block(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("# Page\n\n<!-- campaign campaign.yml: start -->\nold\n<!-- campaign campaign.yml: end -->\n\nAfter.\n")
    reference = {"algo": "a2c", "note": "A paper.", "columns": {"Paper A2C": {"CartPole-v1": 400}}}
    spec = _tiny(tmp_path)
    spec["runs"].append({"algo": "a2c", "env": "Acrobot-v1", "seeds": [0], "steps": 800})  # no evaluation yet
    path = _write(tmp_path, {**spec, "reference": reference, "docs": [str(doc)]})
    loaded = campaign.load_campaign(path, tmp_path / "checkpoints")
    out = tmp_path / "out"
    out.mkdir()
    rows = [  # a2c seed 0 done (best 300 at 400 steps, final 200), seed 1 still running; ppo stopped by its rule
        ("a2c", 0, 0, 500.0, 0.0),
        ("a2c", 0, 400, 300.0, 3600.0),
        ("a2c", 0, 800, 200.0, 7200.0),
        ("a2c", 1, 400, 100.0, 3600.0),
        ("ppo", 0, 600, 50.0, 1800.0),
    ]
    frame = pd.DataFrame(
        [
            {"algo": a, "env": "CartPole-v1", "seed": s, "timesteps": t, "mean_return": r, "cpu_time_s": c}
            for a, s, t, r, c in rows
        ]
    )
    frame.reindex(columns=list(store.COLUMNS)).to_csv(out / harness.EVALUATIONS_FILENAME, index=False)
    metadata = {
        f"{algo}__CartPole-v1__seed0": {"algo": algo, "env": "CartPole-v1", "seed": 0, "status": status}
        for algo, status in (("a2c", "done"), ("ppo", "stopped"))
    }
    (out / harness.RUN_METADATA_FILENAME).write_text(json.dumps(metadata))
    table = "\n".join(report.reference_table(loaded, store.read_evaluations(out)))
    # the step-0 evaluation (500) does not count; the ratio is the mean best (300 and 100) over the paper's 400
    assert (
        # 2 seeds: no interval (a 95% one needs 6 seeds or more)
        "| CartPole-v1 | 400 | a2c | 200.0 | - | 300.0 / 100.0 (running at 400) | 0.50 | 200.0 | 3.0 |" in table
    )
    assert "| CartPole-v1 | 400 | ppo | 50.0 | - | 50.0 (stopped at 600) | 0.12 | - | 0.5 |" in table
    assert table.startswith("A paper.")
    assert campaign_cli.main(["report", str(path), "--check", "--checkpoint-dir", str(tmp_path / "checkpoints")]) == 1
    assert "page.md" in capsys.readouterr().out and "old" in doc.read_text()  # --check rewrites nothing
    assert campaign_cli.main(["report", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints")]) == 0
    text = doc.read_text()
    assert table in text and "old" not in text and text.startswith("# Page") and text.endswith("\nAfter.\n")
    written = (out / harness.SUMMARY_FILENAME).read_text()
    assert table in written
    # every image the report links exists (an env without evaluations gets neither a plot nor a link)
    linked = re.findall(r"!\[[^]]*\]\(([^)]+)\)", written)
    assert linked and all((out / name).is_file() for name in linked) and "Acrobot" not in "".join(linked)
    assert "| Acrobot-v1 | - | a2c | - | - | seed 0: to do |" in table and "## Acrobot-v1\n\nNo evaluation yet." in written
    curves = re.findall(r"!\[[^]]*\]\(([^)]+)\)", doc.read_text())  # relative to the page; none for Acrobot
    assert curves == ["out/CartPole-v1_steps.png"] and (doc.parent / curves[0]).is_file()
    assert campaign_cli.main(["report", str(path), "--check", "--checkpoint-dir", str(tmp_path / "checkpoints")]) == 0
    doc.write_text("# Page without markers\n")
    with pytest.raises(ValueError, match="needs one line"):
        report.write_docs(loaded, store.read_evaluations(out))


def test_who_leads_at_each_mark(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("<!-- campaign campaign.yml: start -->\n<!-- campaign campaign.yml: end -->\n")
    runs = [{"algo": algo, "env": "CartPole-v1", "seeds": [0, 1, 2], "steps": 800} for algo in ("a2c", "ppo")]
    spec = {**_tiny(tmp_path), "runs": runs, "report": {"steps": [400, 800]}, "docs": [str(doc)]}
    loaded = campaign.load_campaign(_write(tmp_path, spec), tmp_path / "checkpoints")
    returns = {("a2c", 400): [10, 20, 30], ("a2c", 800): [40, 50], ("ppo", 400): [100, 110, 120], ("ppo", 800): [60, 70, 80]}
    frame = pd.DataFrame(
        [
            {"algo": algo, "env": "CartPole-v1", "seed": seed, "timesteps": steps, "mean_return": value, "cpu_time_s": 1.0}
            for (algo, steps), values in returns.items()
            for seed, value in enumerate(values)
        ]
    )
    table = "\n".join(report.leaders_table(loaded, frame))
    # 3 against 3 seeds: the exact two-sided test cannot go below 2 / C(6, 3) = 0.1, so no lead is told apart
    assert (
        "| CartPole-v1 | 400 | ppo 110.0 (3) > a2c 20.0 (3) | not distinguishable (p = 0.1; smallest possible 0.1) |" in table
    )
    assert (
        # 3 against 2, fully separated: one split of C(5, 2) = 10 is as extreme on its side; two-sided, twice that
        "| CartPole-v1 | 800 | ppo 70.0 (3) > a2c 45.0 (2) | not distinguishable (p = 0.2; smallest possible 0.2) |" in table
    )
    assert report.write_docs(loaded, frame) == [doc] and table in doc.read_text()
    one_algo = {**spec, "runs": runs[:1]}
    assert report.leaders_table(campaign.load_campaign(_write(tmp_path, one_algo), tmp_path / "c"), frame) == []


def test_runs_on_tuning_seeds_are_listed_apart_and_left_out_of_the_comparison(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("<!-- campaign campaign.yml: start -->\n<!-- campaign campaign.yml: end -->\n")
    runs = [
        {"algo": "a2c", "env": "CartPole-v1", "seeds": [0, 1], "steps": 800, "tuning_seeds": True},
        {"algo": "ppo", "env": "CartPole-v1", "seeds": [0, 1], "steps": 800},
        {"algo": "a2c", "env": "CartPole-v1", "seeds": [100, 101], "steps": 800},
        {"algo": "a2c", "env": "Acrobot-v1", "seeds": [0], "steps": 800, "tuning_seeds": True},
    ]
    spec = {**_tiny(tmp_path), "runs": runs, "report": {"steps": [800]}, "docs": [str(doc)]}
    path = _write(tmp_path, spec)
    loaded = campaign.load_campaign(path, tmp_path / "checkpoints")
    assert loaded.tuning_seeds == {"a2c__CartPole-v1__seed0", "a2c__CartPole-v1__seed1", "a2c__Acrobot-v1__seed0"}
    assert [report.series(loaded, task) for task in loaded.tasks[:2]] == ["a2c (tuning seeds)", "ppo"]
    returns = {("a2c", 0): 500, ("a2c", 1): 480, ("ppo", 0): 200, ("ppo", 1): 220, ("a2c", 100): 100, ("a2c", 101): 120}
    rows = [
        {"algo": algo, "env": "CartPole-v1", "seed": seed, "timesteps": steps, "mean_return": value, "cpu_time_s": 1.0}
        for (algo, seed), value in returns.items()
        for steps in (0, 800)
    ]
    rows.append({"algo": "a2c", "env": "Acrobot-v1", "seed": 0, "timesteps": 800, "mean_return": -90.0, "cpu_time_s": 1.0})
    out = tmp_path / "out"
    out.mkdir()
    pd.DataFrame(rows).reindex(columns=list(store.COLUMNS)).to_csv(out / harness.EVALUATIONS_FILENAME, index=False)
    frame = store.read_evaluations(out)
    # the comparison sets a2c's seeds 100-101 (110) against ppo's; its tuning seeds (490) would have reversed it
    leaders = "\n".join(report.leaders_table(loaded, frame))
    assert "| CartPole-v1 | 800 | ppo 210.0 (2) > a2c 110.0 (2) |" in leaders and "tuning" not in leaders.split("|", 1)[1]
    assert "left out" in leaders and "Acrobot" not in leaders
    written = report.write_report(loaded).read_text()
    assert "| a2c (tuning seeds) | 800 | 2/2 | 490.0 |" in written and "| a2c | 800 | 2/2 | 110.0 |" in written
    assert "| a2c (tuning seeds) | 800 | 1/1 | -90.0 |" in written  # Acrobot: only tuning seeds, listed, not drawn
    linked = re.findall(r"!\[[^]]*\]\(([^)]+)\)", written)
    assert linked and all((out / name).is_file() for name in linked) and "Acrobot" not in "".join(linked)
    assert not (out / "Acrobot-v1_cpu.png").exists()
    block = doc.read_text()
    assert leaders in block and "Acrobot" not in block and "490" not in block


@pytest.mark.repo
def test_docs_blocks_of_the_campaigns_match_the_committed_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(algorithms.REPO_ROOT)
    for path in sorted((algorithms.REPO_ROOT / "benchmarks" / "campaigns").glob("*.yml")):
        assert campaign_cli.main(["report", str(path), "--check", "--checkpoint-dir", str(tmp_path)]) == 0, path.name


def test_campaign_curves_show_the_mean_and_each_seed() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.summary import draw_on_clock

    runs = pd.DataFrame({"seed": [0, 0, 1, 1], "cpu_time_s": [0.0, 300.0, 0.0, 310.0], "mean_return": [1.0, 5.0, 2.0, 9.0]})
    fig, ax = plt.subplots()
    draw_on_clock(ax, runs, "cpu_time_s", "a2c", seeds=True)
    mean, *seeds = ax.get_lines()
    assert len(seeds) == 2 and mean.get_label() == "a2c (2 seeds)"
    assert list(mean.get_ydata()) == [1.5, 3.5, 7.0]  # each seed's last evaluation so far, averaged
    assert [list(line.get_ydata()) for line in seeds] == [[1.0, 5.0, 5.0], [2.0, 2.0, 9.0]]
    fig.clf()
    draw_on_clock(fig.add_subplot(), runs, "cpu_time_s", "a2c")  # the grids' plots: mean and band only
    assert len(fig.axes[0].get_lines()) == 1
    plt.close(fig)


def test_order_by_block_runs_each_task_and_seed_for_every_algorithm_together(tmp_path: Path) -> None:
    runs = [
        {"algo": "a2c", "envs": ["CartPole-v1", "Acrobot-v1"], "seeds": [0, 1], "steps": 800},
        {"algo": "ppo", "envs": ["CartPole-v1", "Acrobot-v1"], "seeds": [0, 1], "steps": 800},
    ]
    spec = {**_tiny(tmp_path), "runs": runs}
    default = campaign.load_campaign(_write(tmp_path, spec), tmp_path / "checkpoints")
    by_seed = [(task.seed, task.algo, task.env) for task in default.tasks]
    assert by_seed == [
        (seed, algo, env) for seed in (0, 1) for algo in ("a2c", "ppo") for env in ("CartPole-v1", "Acrobot-v1")
    ]
    assert by_seed == [
        (task.seed, task.algo, task.env)
        for task in campaign.load_campaign(_write(tmp_path, {**spec, "order": "by_seed"}), tmp_path / "c").tasks
    ]
    blocks = campaign.load_campaign(_write(tmp_path, {**spec, "order": "by_block"}), tmp_path / "checkpoints").tasks
    assert [(task.seed, task.env, task.algo) for task in blocks] == [
        (seed, env, algo) for seed in (0, 1) for env in ("CartPole-v1", "Acrobot-v1") for algo in ("a2c", "ppo")
    ]
    with pytest.raises(ValueError, match="order: must be one of"):
        campaign.load_campaign(_write(tmp_path, {**spec, "order": "random"}), tmp_path / "checkpoints")
