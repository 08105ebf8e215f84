"""benchmarks/experiments/defaults_study.py: its report, from the committed ``runs.csv`` (no run is trained)."""

import shutil
from pathlib import Path

import pytest

from benchmarks.experiments import defaults_study

pytestmark = pytest.mark.experiments


def test_report_rewrites_the_committed_results_from_runs_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    committed = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "defaults_study"
    assert committed == defaults_study.RESULTS
    shutil.copy(committed / "runs.csv", tmp_path / "runs.csv")
    monkeypatch.setattr(defaults_study, "RESULTS", tmp_path)
    monkeypatch.setattr(defaults_study, "RUNS", tmp_path / "runs.csv")
    defaults_study.main(["report"])
    assert (tmp_path / "results.md").read_text() == (committed / "results.md").read_text()


def test_run_refuses_an_unknown_candidate() -> None:
    with pytest.raises(SystemExit, match="unknown candidate 'nope'"):
        defaults_study.main(["run", "--candidate", "nope", "--seeds", "0"])
