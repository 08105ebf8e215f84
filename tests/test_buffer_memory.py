"""benchmarks/experiments/buffer_memory.py: the replay memory benchmark's runs and report (tiny buffers, no timings)."""

import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from benchmarks.experiments import buffer_memory

pytestmark = pytest.mark.experiments


@pytest.mark.parametrize("scenario", buffer_memory.SCENARIOS)
def test_run_one_adds_several_times_the_buffer(scenario: str) -> None:
    run = buffer_memory.run_one(scenario, size=40, multiple=3, episode_length=5)
    assert run["scenario"] == scenario and run["buffer_size"] == 40 and run["adds"] == 120
    assert 0 < run["stored_at_end"] <= 40
    if scenario == "sb3":
        assert run["stored_at_end"] == 40
    samples = [adds for adds, _ in run["rss_samples"]]
    assert samples == sorted(samples) and samples[0] == 0 and samples[-1] == 120 and 40 in samples
    assert all(mib > 0 for _, mib in run["rss_samples"]) and run["rss_before_mib"] > 0
    assert run["adds_per_s_filling"] > 0 and run["adds_per_s_full"] > 0


def test_run_in_subprocess_returns_the_worker_run() -> None:
    run = buffer_memory.run_in_subprocess("episodes", 30, 2, 7)
    assert run["scenario"] == "episodes" and run["adds"] == 60 and 0 < run["stored_at_end"] <= 30


def fake_run(scenario: str, size: int, speed: float) -> dict:
    """A run of 3 * size adds: RSS 200 MiB before, 250 when full, up 2 MiB later, 1 MiB of it in the last third"""
    samples = [(0, 200.0), (size, 250.0), (2 * size, 251.0), (5 * size // 2, 251.5), (3 * size, 252.0)]
    return {"scenario": scenario, "buffer_size": size, "adds": 3 * size, "rss_before_mib": 190.0, "rss_samples": samples,
            "adds_per_s_filling": 1234.4, "adds_per_s_full": speed, "stored_at_end": size}  # fmt: skip


def test_report_rows_and_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = {("episodes", 1000): 2000.0, ("episodes", 10): 2500.0, ("never", 10): 1000.0, ("never", 1000): 1100.0}
    monkeypatch.setattr(
        buffer_memory, "run_in_subprocess", lambda scenario, size, *_: fake_run(scenario, size, runs[scenario, size])
    )
    args = ["--sizes", "10", "1000", "--scenarios", "episodes", "never", "--episode-length", "7", "--out", str(tmp_path)]
    assert buffer_memory.main([*args, "--json", str(tmp_path / "raw.json")]) == 0
    raw = json.loads((tmp_path / "raw.json").read_text())
    assert [(run["scenario"], run["buffer_size"]) for run in raw["runs"]] == [
        ("episodes", 10), ("episodes", 1000), ("never", 10), ("never", 1000)
    ]  # fmt: skip
    assert raw["episode_length"] == 7 and raw["command"].startswith(
        "python -m benchmarks.experiments.buffer_memory --sizes 10 1000"
    )
    text = (tmp_path / "results.md").read_text()
    assert text.endswith("\n\n![RSS and adds/s](buffer_memory.png)\n")
    lines = text.splitlines()
    assert lines[0] == "# Replay buffer: memory and add cost once full"
    assert "`episodes`: episodes of 7 steps" in lines[2] and "median over 20 timed chunks" in lines[4]
    assert lines[6] == f"- Command: `{raw['command']}`"
    header = ["scenario", "buffer size", "adds", "adds/s filling", "adds/s full", "RSS when full (MiB)"]
    header += ["RSS at the end (MiB)", "RSS growth after full (MiB)", "RSS growth, last third (MiB)"]
    table = lines.index("| " + " | ".join(header) + " |")
    assert lines[table + 1] == "|---|---|---|---|---|---|---|---|---|"
    assert lines[table + 2] == "| episodes | 10 | 30 | 1,234 | 2,500 | 250.0 | 252.0 | +2.0 | +1.0 |"
    assert lines[table + 3] == "| episodes | 1,000 | 3,000 | 1,234 | 2,000 | 250.0 | 252.0 | +2.0 | +1.0 |"
    assert lines[table + 5] == "| never | 1,000 | 3,000 | 1,234 | 1,100 | 250.0 | 252.0 | +2.0 | +1.0 |"
    assert lines[table + 7] == (
        "- `episodes`: RSS grows by at most 2.0 MiB once the buffer is full, 1.0 MiB in the last third of the run; "
        "adds/s of the 1,000 buffer / the 10 one: 0.80"
    )
    assert lines[table + 8].endswith("adds/s of the 1,000 buffer / the 10 one: 1.10")
    assert not any(line.startswith("## Baseline") for line in lines)
    assert (tmp_path / "buffer_memory.png").stat().st_size > 0
    # a later run reports the saved one alongside, as a second table
    again = tmp_path / "again"
    assert buffer_memory.main([*args[:-1], str(again), "--baseline", str(tmp_path / "raw.json")]) == 0
    lines = (again / "results.md").read_text().splitlines()
    baseline = lines.index(f"## Baseline: git {raw['git']} ({raw['date']})")
    assert lines[baseline + 2 : baseline + 4] == [f"- Command: `{raw['command']}`", f"- Machine: {raw['machine']}"]
    assert lines.count(lines[table]) == 2 and lines.count(lines[table + 2]) == 2


def test_multiple_below_two_is_refused() -> None:
    with pytest.raises(SystemExit):
        buffer_memory.main(["--multiple", "1"])
