"""
The campaign tool's own files when they are damaged: checkpoints (a truncated model, a torn state or ``LATEST``),
results folders (a hand-edited ``evaluations.csv``, a torn ``run_metadata.json``) and writes that fail (the disk
full). Regression tests of the named cases, then property-based tests (Hypothesis).

What the properties cover: campaign files (a valid file with one key removed, set to a value of another type, an
unknown key added, or its text truncated or overwritten with garbage), ``evaluations.csv`` files (cut at any byte,
a field or a header name replaced, a field removed, garbage written in), checkpoint files (``state.json``,
``LATEST``, ``model.zip``, ``rng.npz``: cut at any byte, garbage written in, ``state.json`` fields removed or
mistyped) and ``OSError`` raised by the n-th write while a run stores its results or a checkpoint. The property: the
tool's own error (:class:`benchmarks.checkpoint.BadFileError`, or an ``OSError`` for a failed write) whose message
starts with the file's path, or correct behaviour: a loaded campaign's values have their types and ranges, every row
read from a CSV is a whole row of what was written, a restored checkpoint holds what was saved, and a failed write
leaves the old file whole and no temporary file. What they do not cover: the replay files of the PCL family (their
own tests), ``VecNormalize`` statistics, Ray.

Profiles: the default run uses a derandomised profile (a fixed set of 50 campaign files, 100 CSVs, 40 damaged
checkpoints and all 12 failed writes); ``-m slow`` runs 400, 500 and 300 random examples of the first three.
"""

import functools
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from run_testing import Crash, CrashAt
from stable_baselines3 import A2C

from benchmarks import backends, campaign, checkpoint, harness, store
from benchmarks.campaign import __main__ as campaign_cli
from benchmarks.checkpoint import BadFileError

FAST = settings(
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SLOW = settings(FAST, derandomize=False, phases=tuple(Phase))


def _spec(out: Path) -> dict[str, Any]:
    """:return: A valid campaign of two a2c runs and one ppo run on CartPole-v1, a few hundred steps each"""
    return {
        "out": str(out),
        "eval": {"every_steps": 200, "episodes": 1, "at_start": True},
        "checkpoint_every": 0.003,
        "report": {"steps": [400, 800]},
        "notes": "a note",
        "runs": [
            {"algo": "a2c", "env": "CartPole-v1", "seeds": [0, 1], "steps": 800},
            {
                "algo": "ppo",
                "envs": ["CartPole-v1"],
                "seeds": [0],
                "steps": 600,
                "stop_below": {"by_steps": 400, "best_return": 1.0e9},
            },
        ],
    }


def _campaign(tmp_path: Path) -> tuple[Path, campaign.Campaign]:
    path = tmp_path / "campaign.yml"
    path.write_text(yaml.safe_dump(_spec(tmp_path / "out")))
    return path, campaign.load_campaign(path, tmp_path / "checkpoints")


def _checkpointed(task: harness.RunTask, steps: int = 500) -> Path:
    """Train ``task`` until a crash at ``steps``, leaving its rows and a checkpoint; :return: the checkpoint folder"""
    with pytest.raises(Crash):
        harness.run_experiment(task, functools.partial(store.store_rows, task, store.stamp()), callbacks=[CrashAt(steps)])
    folder = checkpoint.latest_checkpoint(task.checkpoint_dir)  # type: ignore[arg-type]
    assert folder is not None
    return folder


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _no_temporary_files(*folders: Path) -> bool:
    return not [path for folder in folders if folder.exists() for path in folder.rglob("*.tmp")]


# ---------------------------------------------------------------------------------------------------- regressions
def test_a_damaged_checkpoint_fails_its_run_alone_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, loaded = _campaign(tmp_path)
    truncated, torn, fresh = loaded.tasks  # a2c seed 0, ppo seed 0, a2c seed 1
    model = _checkpointed(truncated) / "model.zip"
    _truncate(model)
    state = _checkpointed(torn, 300) / checkpoint.STATE_FILENAME
    _truncate(state)
    # status names the torn state file; it does not stop at it
    assert campaign_cli.main(["status", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints")]) == 0
    text = capsys.readouterr().out
    assert f"DAMAGED CHECKPOINT: {state}: cannot be read" in text and "3 runs: 0 done, 0 stopped, 1 partial, 1 failed" in text
    # run: the two damaged runs fail naming their file, the third one runs
    results = campaign.run_campaign(loaded, report=lambda _: tmp_path)
    outcome = {result["name"]: result for result in results}
    assert outcome[fresh.name]["ok"] and not outcome[truncated.name]["ok"] and not outcome[torn.name]["ok"]
    assert (
        str(model) in outcome[truncated.name]["error"]
        and "delete that run's checkpoint folder" in outcome[truncated.name]["error"]
    )
    assert str(state) in outcome[torn.name]["error"]
    states = campaign.run_states(loaded).set_index("name")
    assert states.loc[fresh.name, "state"] == "done" and states.loc[truncated.name, "state"] == "failed"
    # their rows stay (the checkpoint may be repaired); the finished run's are complete
    frame = store.read_evaluations(tmp_path / "out")
    assert frame[store.is_run(frame, fresh)]["timesteps"].tolist() == [0, 200, 400, 600, 800]
    assert store.is_run(frame, truncated).any()
    # and the report of the campaign is written, its status section naming the damaged checkpoint
    assert campaign_cli.main(["report", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints")]) == 0
    assert "DAMAGED CHECKPOINT" in (tmp_path / "out" / harness.SUMMARY_FILENAME).read_text()
    # deleting the damaged checkpoint folder, as the message says, starts the run again from step 0
    shutil.rmtree(truncated.checkpoint_dir)  # type: ignore[arg-type]
    assert campaign.run_states(loaded).set_index("name").loc[truncated.name, "problem"] == ""


@pytest.mark.parametrize("damage", ["LATEST", "rng.npz", "state fields"])
def test_other_damaged_checkpoint_files_are_named(tmp_path: Path, damage: str) -> None:
    _, loaded = _campaign(tmp_path)
    task = loaded.tasks[0]
    folder = _checkpointed(task)
    if damage == "LATEST":
        (folder.parent / checkpoint.LATEST_FILENAME).write_text("ckpt-\n")
        named = folder.parent / checkpoint.LATEST_FILENAME
    elif damage == "rng.npz":
        _truncate(folder / "rng.npz", 0.3)
        named = folder / "rng.npz"
    else:
        named = folder / checkpoint.STATE_FILENAME
        named.write_text(json.dumps({"timesteps": "500", "records": []}))
    with pytest.raises(BadFileError, match=str(named)):
        checkpoint.restore_checkpoint(task.checkpoint_dir, A2C("MlpPolicy", "CartPole-v1"))  # type: ignore[arg-type]


def test_a_write_that_fails_while_a_run_stores_its_results_fails_that_run_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, loaded = _campaign(tmp_path)
    first, second = loaded.tasks[0], loaded.tasks[2]
    real_replace = os.replace

    def disk_full_for_the_metadata(source: Any, target: Any) -> None:
        if Path(target).name == harness.RUN_METADATA_FILENAME:
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(checkpoint.os, "replace", disk_full_for_the_metadata)
    result = backends.run_local(first, store.store_run, store.progress_rows)
    assert not result["ok"] and f"{tmp_path / 'out' / harness.RUN_METADATA_FILENAME}: cannot be written" in result["error"]
    assert (tmp_path / "out" / harness.RUNS_DIRNAME / f"{first.name}.err").is_file()
    assert _no_temporary_files(tmp_path)
    assert checkpoint.read_state(first.checkpoint_dir) is not None  # type: ignore[arg-type]  # kept: it resumes
    monkeypatch.setattr(checkpoint.os, "replace", real_replace)
    assert backends.run_local(second, store.store_run, store.progress_rows)["ok"]


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "file.csv"
    path.write_text("old\n")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.os, "fsync", full)
    with pytest.raises(OSError, match=f"{path}: cannot be written \\(No space left on device\\); it is unchanged"):
        checkpoint.write_atomically(path, "new\n")
    assert path.read_text() == "old\n" and _no_temporary_files(tmp_path)


def test_a_failed_checkpoint_write_leaves_the_last_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = A2C("MlpPolicy", "CartPole-v1", n_steps=8)
    first = checkpoint.save_checkpoint(
        tmp_path, model, {"timesteps": 0, "cpu_time_s": 0, "wall_time_s": 0, "next_cpu_mark": 1, "records": []}
    )

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.np, "savez", full)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save_checkpoint(tmp_path, model, {})
    assert checkpoint.latest_checkpoint(tmp_path) == first and sorted(p.name for p in tmp_path.iterdir()) == [
        "LATEST",
        "ckpt-0",
    ]


HEADER = ",".join(store.COLUMNS)
ROW = "a2c,CartPole-v1,0,200,21.5,1.5,0.5,0.4,400.0,,abc123,Some CPU"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{HEADER.replace('mean_return', 'mean_retrun')}\n{ROW}\n", "line 1: unknown column 'mean_retrun'"),
        (f"{HEADER},extra\n{ROW},1\n", "line 1: unknown column 'extra'"),
        (f"{HEADER}\n{ROW.replace('21.5', 'high')}\n", "line 2: mean_return must be a number \\(or empty\\), got 'high'"),
        (f"{HEADER}\n{ROW}\n{ROW.replace(',200,', ',2.5e2x,')}\n", "line 3: timesteps must be a whole number"),
        (f"{HEADER}\n{ROW}\n{ROW[:30]}\n", "line 3: 6 fields, the header has 12 \\(a row cut mid-way\\?\\)"),
        (f"{HEADER}\n{ROW}\n{ROW}", "line 3: no newline at the end: the last row may be cut mid-way"),
        (f"{HEADER}\n{ROW},7\n", "line 2: 13 fields, the header has 12"),
        (f"{HEADER}\n{ROW.replace('a2c', ' ')}\n", "line 2: algo is empty"),
        ("", "line 1: a column missing"),
        (
            f"{HEADER}\n{ROW.replace('Some CPU', chr(34) + 'Some CPU, 2')}\n",
            "line 2: unexpected end of data",
        ),  # found by the property test, as the next two
        (f"{HEADER}\n{ROW.replace('21.5', ' ')}\n", "line 2: mean_return must be a number \\(or empty\\), got ' '"),
        (f"{HEADER}\n{ROW.replace('21.5', '2_1')}\n", "line 2: mean_return must be a number"),
        (
            f"{HEADER}\n{ROW}\n{ROW.replace('Some CPU', chr(34) + chr(10) + 'Some CPU, 2 GHz' + chr(34))}\n",
            "line 3: cpu holds a line break: '\\\\nSome CPU, 2 GHz'",
        ),  # found by the slow property profile: a quoted field with a line break was read as one more row
    ],
)
def test_a_hand_edited_evaluations_csv_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, text: str, message: str
) -> None:
    path, _ = _campaign(tmp_path)
    (tmp_path / "out").mkdir()
    csv = tmp_path / "out" / harness.EVALUATIONS_FILENAME
    csv.write_text(text)
    with pytest.raises(BadFileError, match=f"^{csv}: {message}"):
        store.read_evaluations(tmp_path / "out")
    with pytest.raises(SystemExit):
        campaign_cli.main(["status", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints")])
    error = capsys.readouterr().err
    assert f"{csv}: line" in error and "Traceback" not in error


def test_algorithm_and_env_names_are_read_as_written(tmp_path: Path) -> None:  # found by the property test
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / harness.EVALUATIONS_FILENAME).write_text(f"{HEADER}\n{ROW.replace('a2c', 'nan')}\n")
    assert store.read_evaluations(tmp_path / "out")["algo"].tolist() == ["nan"]


def test_a_torn_run_metadata_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, _ = _campaign(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / harness.RUN_METADATA_FILENAME).write_text('{"a2c__CartPole-v1__seed0": {"status": "do')
    with pytest.raises(SystemExit):
        campaign_cli.main(["status", str(path), "--checkpoint-dir", str(tmp_path / "checkpoints")])
    assert f"{tmp_path / 'out' / harness.RUN_METADATA_FILENAME}: cannot be read as JSON" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- properties
#: values of every type, the ones YAML users write by mistake among them
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["false", "true", "1e6", "", "CartPole-v1", "a2c", "by_block", "dummy", "docs"]),
    st.text(max_size=8),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.sampled_from(["steps", "cpu_seconds", "by_steps", "x"]), st.integers(-3, 900), max_size=2),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """:return: The key paths of every value nested in ``value``"""
    found = [prefix] if prefix else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, item in items:
        found += _paths(item, (*prefix, key))
    return found


@st.composite
def campaign_texts(draw: st.DrawFn, out: Path) -> str:
    """:return: The text of a valid campaign file with one mutation: a key removed, retyped or added, the text cut or
    overwritten"""
    spec = _spec(out)
    kind = draw(st.sampled_from(["remove", "retype", "add", "cut", "garbage"]))
    if kind in ("remove", "retype", "add"):
        where = draw(st.sampled_from(_paths(spec)))
        parent = functools.reduce(lambda value, key: value[key], where[:-1], spec)
        if kind == "remove":
            del parent[where[-1]]
        elif kind == "retype":
            parent[where[-1]] = draw(ANY_VALUE)
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["typo", "seed", "episode", "every_step"]))] = draw(ANY_VALUE)
        else:
            parent.append(draw(ANY_VALUE))
    text = yaml.safe_dump(spec)
    if kind == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif kind == "garbage":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(min_size=1, max_size=6)) + text[at:]
    return text


def _check_campaign(tmp_path: Path, text: str) -> None:
    path = tmp_path / "campaign.yml"
    path.write_text(text)
    try:
        loaded = campaign.load_campaign(path, tmp_path / "checkpoints")
    except BadFileError as exc:
        assert str(exc).startswith(f"{path}: "), exc
        return
    for task in loaded.tasks:  # accepted: every value of its type and range
        assert isinstance(task.seed, int) and not isinstance(task.seed, bool) and 0 <= task.seed <= campaign.MAX_SEED
        assert isinstance(task.steps, int) and task.steps > 0 and isinstance(task.eval_freq, int) and task.eval_freq > 0
        assert isinstance(task.n_eval_episodes, int) and isinstance(task.eval_at_start, bool)
        assert isinstance(task.zoo_v4_entries, bool) and task.checkpoint_every > 0
    assert all(doc.is_file() for doc in loaded.docs) and isinstance(loaded.notes, str)
    assert campaign.format_status(loaded, campaign.run_states(loaded))


@settings(FAST, max_examples=50)
@given(data=st.data())
def test_campaign_files_property(tmp_path: Path, data: st.DataObject) -> None:
    _check_campaign(tmp_path, data.draw(campaign_texts(tmp_path / "out")))


@pytest.mark.slow
@settings(SLOW, max_examples=400)
@given(data=st.data())
def test_campaign_files_property_slow(tmp_path: Path, data: st.DataObject) -> None:
    _check_campaign(tmp_path, data.draw(campaign_texts(tmp_path / "out")))


def _evaluations_text(rows: int) -> str:
    frame = pd.DataFrame(
        [
            {
                "algo": "a2c",
                "env": "CartPole-v1",
                "seed": seed,
                "timesteps": 200 * step,
                "mean_return": 10.0 + step,
                "std_return": 0.5,
                "wall_time_s": 0.1 * step,
                "cpu_time_s": 0.1 * step,
                "fps": np.nan if step == 0 else 2000.0,
                "curriculum_length": np.nan,
                "git": "abc123",
                "cpu": "Some CPU, 2 GHz",
            }
            for seed in range(2)
            for step in range(rows)
        ]
    )
    return frame.reindex(columns=list(store.COLUMNS)).to_csv(index=False)


#: fields a hand edit may leave
ODD_FIELDS = ["", "nan", "inf", "-1", "1.5", "1e3", "x", "seed", "cpu"]


@st.composite
def evaluation_texts(draw: st.DrawFn) -> str:
    """:return: An ``evaluations.csv`` as the tool writes it, with one mutation"""
    text = _evaluations_text(draw(st.integers(1, 4)))
    lines = text.splitlines(keepends=True)
    kind = draw(st.sampled_from(["cut", "field", "header", "drop field", "garbage"]))
    if kind == "cut":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "garbage":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=6)) + text[at:]
    line = draw(st.integers(0 if kind == "header" else 1, len(lines) - 1))
    fields = lines[line].rstrip("\n").split(",")
    index = draw(st.integers(0, len(fields) - 1))
    if kind == "drop field":
        del fields[index]
    else:
        fields[index] = draw(st.one_of(st.sampled_from(ODD_FIELDS), st.text(max_size=5)))
    lines[line] = ",".join(fields) + "\n"
    return "".join(lines)


def _check_evaluations(tmp_path: Path, text: str) -> None:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    path = out / harness.EVALUATIONS_FILENAME
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    try:
        frame = store.read_evaluations(out)
    except BadFileError as exc:
        assert str(exc).startswith(f"{path}: "), exc
        return
    # accepted: numbers where numbers go, and every row a whole row of the file (none read from a cut line)
    whole = [line for line in text.splitlines(keepends=True)[1:] if line.endswith("\n")]
    assert len(frame) == len([line for line in whole if line.strip()])
    if frame.empty:
        return
    assert pd.api.types.is_integer_dtype(frame["seed"]) and pd.api.types.is_integer_dtype(frame["timesteps"])
    for column in store.NUMBER_COLUMNS:
        assert pd.api.types.is_numeric_dtype(frame[column]) or frame[column].isna().all(), column
    assert frame["algo"].map(lambda value: isinstance(value, str) and bool(value.strip())).all()


@FAST
@given(text=evaluation_texts())
def test_evaluations_csv_property(tmp_path: Path, text: str) -> None:
    _check_evaluations(tmp_path, text)


@pytest.mark.slow
@settings(SLOW, max_examples=500)
@given(text=evaluation_texts())
def test_evaluations_csv_property_slow(tmp_path: Path, text: str) -> None:
    _check_evaluations(tmp_path, text)


@pytest.fixture(scope="module")
def saved_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, A2C]:
    """:return: The folder of a checkpoint of an A2C model on CartPole-v1, and that model"""
    folder = tmp_path_factory.mktemp("checkpoint")
    model = A2C("MlpPolicy", "CartPole-v1", n_steps=8, seed=0)
    model.learn(64)
    record = {"timesteps": 64, "mean_return": 9.0, "std_return": 0.0, "wall_time_s": 0.1, "cpu_time_s": 0.1}
    state = {"timesteps": 64, "cpu_time_s": 0.1, "wall_time_s": 0.1, "next_cpu_mark": float("inf"), "records": [record]}
    checkpoint.save_checkpoint(folder, model, state)
    return folder, model


@st.composite
def damaged_checkpoints(draw: st.DrawFn) -> tuple[str, str, int, Any]:
    """:return: One damage of one checkpoint file: (file, how, position, value)"""
    name = draw(st.sampled_from(["state.json", "LATEST", "model.zip", "rng.npz"]))
    how = draw(st.sampled_from(["cut", "garbage", *(["field"] if name == "state.json" else [])]))
    return name, how, draw(st.integers(0, 10**6)), draw(ANY_VALUE)


def _check_checkpoint(tmp_path: Path, saved: tuple[Path, A2C], damage: tuple[str, str, int, Any]) -> None:
    source, model = saved
    run_dir = tmp_path / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.copytree(source, run_dir)
    name, how, position, value = damage
    path = run_dir / (name if name == "LATEST" else f"ckpt-0/{name}")
    data = path.read_bytes()
    at = position % (len(data) + 1)
    if how == "cut":
        path.write_bytes(data[:at])
    elif how == "garbage":
        path.write_bytes(data[:at] + bytes([at % 256, 255 - at % 256]) * 4 + data[at + 8 :])
    else:
        state = json.loads(data)
        key = sorted(state)[at % len(state)]
        if at % 2:
            del state[key]
        else:
            state[key] = value
        path.write_text(json.dumps(state))
    fresh = A2C("MlpPolicy", "CartPole-v1", n_steps=8, seed=1)
    try:
        restored = checkpoint.restore_checkpoint(run_dir, fresh)
    except BadFileError as exc:
        assert str(exc).startswith(str(run_dir)), exc
        return
    # accepted: the checkpoint as it was saved (a damage that changed nothing the run reads)
    assert restored is not None
    restored_model, state = restored
    assert restored_model.num_timesteps == model.num_timesteps and isinstance(state["records"], list)
    for mine, theirs in zip(restored_model.policy.parameters(), model.policy.parameters(), strict=True):
        assert np.array_equal(mine.detach().numpy(), theirs.detach().numpy())


@settings(FAST, max_examples=40)
@given(damage=damaged_checkpoints())
def test_checkpoint_files_property(
    tmp_path: Path, saved_checkpoint: tuple[Path, A2C], damage: tuple[str, str, int, Any]
) -> None:
    _check_checkpoint(tmp_path, saved_checkpoint, damage)


@pytest.mark.slow
@settings(SLOW, max_examples=300)
@given(damage=damaged_checkpoints())
def test_checkpoint_files_property_slow(
    tmp_path: Path, saved_checkpoint: tuple[Path, A2C], damage: tuple[str, str, int, Any]
) -> None:
    _check_checkpoint(tmp_path, saved_checkpoint, damage)


def _check_failed_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int, target: str) -> None:
    """The ``fail_at``-th rename (the last step of every write) raises ``OSError`` while a run's results are stored"""
    out = tmp_path / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    old = _evaluations_text(2)
    (out / harness.EVALUATIONS_FILENAME).write_text(old)
    task = harness.RunTask("a2c", "CartPole-v1", 5, 400, 200, out_dir=str(out))
    calls = {"count": 0}
    real_replace = os.replace

    def failing(source: Any, destination: Any) -> None:
        calls["count"] += 1
        if calls["count"] == fail_at and (target == "any" or Path(destination).name == target):
            raise OSError(28, "No space left on device")
        real_replace(source, destination)

    monkeypatch.setattr(checkpoint.os, "replace", failing)
    new = pd.read_csv(io.StringIO(_evaluations_text(3))).head(3).assign(seed=5)
    try:
        store.store_run(task, new.to_csv(index=False), {"final_mean_return": 1.0, "final_timesteps": 400})
    except OSError as exc:
        assert "cannot be written" in str(exc) and str(exc).split("] ", 1)[-1].startswith(str(out)), exc
    finally:
        monkeypatch.setattr(checkpoint.os, "replace", real_replace)
    assert _no_temporary_files(out)
    frame = store.read_evaluations(out)  # whole: the old rows, or the old and the new ones
    assert len(frame) in (len(old.splitlines()) - 1, len(old.splitlines()) - 1 + 3)


@settings(FAST, max_examples=20)
@given(fail_at=st.integers(1, 4), target=st.sampled_from(["any", harness.EVALUATIONS_FILENAME, harness.RUN_METADATA_FILENAME]))
def test_failed_writes_property(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int, target: str) -> None:
    _check_failed_write(tmp_path, monkeypatch, fail_at, target)
