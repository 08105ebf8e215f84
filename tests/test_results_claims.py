"""The published numbers: RESULTS.md's table (and the README's rows of it) against the committed data, and the
harness's refusal to write over committed results."""

import contextlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from benchmarks import campaign, harness, report, run, store
from benchmarks.reporting import bootstrap_interval, permutation_p_value

ROOT = Path(__file__).resolve().parents[1]
#: the full results table, which ``python -m benchmarks.report`` writes
RESULTS_PAGE = ROOT / "RESULTS.md"
PAGES = [ROOT / "README.md", RESULTS_PAGE, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the pages holding generated blocks (README.md, RESULTS.md, the campaigns' docs pages)
GENERATED = ["README.md", "RESULTS.md", "docs/trust_pcl.md", "docs/reproduction.md"]


@pytest.mark.repo
def test_the_generated_blocks_match_the_committed_data() -> None:
    """Every block ``python -m benchmarks.report`` writes (RESULTS.md's table, README.md's summary, the campaigns'
    blocks in docs/) regenerated from the committed data equals the committed text."""
    stale, sources = report.write_pages(check=True)
    assert stale == [], f"run python -m benchmarks.report: {stale}"
    assert sources


@pytest.mark.repo
def test_the_check_fails_on_a_changed_number(tmp_path: Path) -> None:
    """A copy of the pages with one committed number altered in each generated block fails the check, block by block,
    and writing the blocks restores the committed text."""
    for name in GENERATED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    altered = {  # a number of each generated block, what it becomes, and where the block starts
        "RESULTS.md": ("-88.2 [-91.6, -85.3]", "-88.3 [-91.6, -85.3]", report.TABLE_MARKERS[0]),
        "README.md": ("median 5k, mean 11.1k", "median 5k, mean 11.2k", report.SUMMARY_MARKERS[0]),
        "docs/trust_pcl.md": ("trust_pcl 362.0 (3)", "trust_pcl 363.0 (3)", "<!-- campaign cpu_hour.yml: start -->"),
        "docs/reproduction.md": ("| 0.92 |", "| 0.93 |", "<!-- campaign paper_table1.yml: start -->"),
    }
    for name, (number, changed, start) in altered.items():
        text = (tmp_path / name).read_text()
        head, block = text.split(start)
        assert number in block, (name, number)
        (tmp_path / name).write_text(head + start + block.replace(number, changed, 1))
    stale = report.write_pages(check=True, root=tmp_path)[0]
    assert len(stale) == len(altered) and all(any(block.startswith(name) for block in stale) for name in altered)
    assert "-88.3 [" in (tmp_path / "RESULTS.md").read_text()  # --check writes nothing
    report.write_pages(root=tmp_path)
    assert all((tmp_path / name).read_text() == (ROOT / name).read_text() for name in GENERATED)
    (tmp_path / "README.md").write_text("# no markers\n")
    with pytest.raises(ValueError, match="needs one line"):
        report.write_pages(check=True, root=tmp_path)


def table_rows(text: str) -> list[list[str]]:
    """:return: the cells of every row of the markdown tables in ``text`` (header and separator rows left out)"""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    return [row for row in rows if row[0] not in ("Algorithm", "---")]


@pytest.mark.repo
def test_the_readme_summary_rows_are_rows_of_the_full_table() -> None:
    readme = (ROOT / "README.md").read_text()
    summary = readme[readme.index("<!-- results summary") : readme.index("<!-- end of the results summary -->")]
    full = {tuple(row[:2]): row for row in table_rows(RESULTS_PAGE.read_text())}
    rows = table_rows(summary)
    assert 3 <= len(rows) <= 6, "the README shows a few rows"
    for row in rows:
        assert tuple(row[:2]) in full, f"{row[:2]} is no row of RESULTS.md"
        assert row == full[tuple(row[:2])][: len(row)], f"README's {row[:2]} differs from RESULTS.md"


@pytest.mark.repo
def test_readme_paper_row_agrees_with_the_campaign_report() -> None:
    """The README's row against the paper's Table 1 and the paper_table1 report's reference table are computed by one
    function; their ratios (the paper's recipe, algo trust_pcl) must be the same numbers, task by task."""
    with contextlib.chdir(ROOT):
        cells, sources = report.paper_row(report.repo_campaign("paper_table1.yml"))
    committed = (ROOT / "benchmarks" / "results" / "paper_table1" / "results.md").read_text()
    ratios = {}
    for line in committed.splitlines():
        fields = [field.strip() for field in line.split("|")[1:-1]]
        if len(fields) == 10 and fields[3] == "trust_pcl":
            ratios[fields[0]] = fields[7]
    tasks = cells[1].split(",")[0].removesuffix("-v5").split(" / ")
    assert [ratios[f"{task}-v5"] for task in tasks] == cells[5].split(";")[0].removeprefix("ratio ").split(" / ")
    assert len(sources) == len(tasks) == 5


@pytest.mark.repo
def test_readme_cpu_hour_row_agrees_with_the_campaign_report() -> None:
    """The README's CPU-hour row and the cpu_hour report's *Who leads* table come from one function (report.leads):
    per task, each algorithm's mean at 60 CPU-min is the same number (to the README's 3 significant digits)."""
    with contextlib.chdir(ROOT):
        cells, sources = report.cpu_hour_row(report.repo_campaign("cpu_hour.yml"))
    committed = (ROOT / "benchmarks" / "results" / "cpu_hour" / "results.md").read_text()
    means = {}
    for line in committed.splitlines():
        fields = [field.strip() for field in line.split("|")[1:-1]]
        if len(fields) >= 4 and fields[1] == "60 CPU-min" and " > " in fields[2]:
            for entry in fields[2].split(" > "):
                if entry != "-":
                    algo, value, _ = entry.split(" ")
                    means[fields[0], algo] = float(value)
    tasks = cells[1].split(",")[0].removesuffix("-v5").split(" / ")
    columns = {"trust_pcl": cells[3], **dict(part.split(" ", 1) for part in cells[4].split("; "))}
    assert set(columns) == {"trust_pcl", "SAC", "TRPO", "PPO"} and len(sources) == 5 * 3 * 4
    for name, column in columns.items():
        algo = {"SAC": "sac", "TRPO": "trpo", "PPO": "ppo"}.get(name, name)
        for task, cell in zip(tasks, column.split(" / "), strict=True):
            expected = means.get((f"{task}-v5", algo))
            assert (cell == "-") == (expected is None), (task, algo, cell)
            if expected is not None:
                assert float(cell.split(" ")[0]) == pytest.approx(expected, rel=5e-3), (task, algo, cell)


def _cpu_hour_campaign(
    tmp_path: Path, returns: dict[tuple[str, int], list[int]], done: int, cpus: dict[str, str] | None = None
) -> campaign.Campaign:
    """:return: A campaign of a2c and ppo on CartPole-v1 for 60 CPU-s with ``returns`` per (algo, CPU-s), its first
    ``done`` runs recorded as done, each algorithm's rows on the CPU model ``cpus`` gives (default: none recorded)"""
    seeds = list(range(max(len(values) for values in returns.values())))
    runs = [{"algo": algo, "env": "CartPole-v1", "seeds": seeds, "cpu_seconds": 60} for algo in ("a2c", "ppo")]
    out = tmp_path / "out"
    spec = {"out": str(out), "eval": {"every_cpu_seconds": 30}, "runs": runs, "report": {"cpu_seconds": [30, 60]}}
    (tmp_path / "c.yml").write_text(yaml.safe_dump(spec))
    loaded = campaign.load_campaign(tmp_path / "c.yml", tmp_path / "checkpoints")
    rows = [
        {"algo": algo, "env": "CartPole-v1", "seed": seed, "timesteps": cpu * 10, "mean_return": value, "cpu_time_s": cpu}
        for (algo, cpu), values in returns.items()
        for seed, value in enumerate(values)
    ]
    out.mkdir(exist_ok=True)
    frame = pd.DataFrame(rows).reindex(columns=list(store.COLUMNS))
    frame["cpu"] = frame["algo"].map(cpus or {})
    frame.to_csv(out / harness.EVALUATIONS_FILENAME, index=False)
    metadata = {task.name: {"status": "done"} for task in loaded.tasks[:done]}
    (out / harness.RUN_METADATA_FILENAME).write_text(json.dumps(metadata))
    return loaded


def test_cpu_hour_row_names_the_leader_and_what_the_seeds_can_tell(tmp_path: Path) -> None:
    returns = {("a2c", 30): [10, 20, 30], ("a2c", 60): [200, 210, 220], ("ppo", 30): [40, 50, 60], ("ppo", 60): [100, 110]}
    cells, sources = report.cpu_hour_row(_cpu_hour_campaign(tmp_path, returns, done=5))
    assert cells[1] == "CartPole-v1, 60 CPU-s per run: return at 1 CPU-min"
    assert cells[2] == "a2c, PPO 0-2"
    # 3 seeds and 2: no interval, the mean with the seed count and the range
    assert cells[3] == "210 (3 seeds: 200 to 220)" and cells[4] == "PPO 105 (2 seeds: 100 to 110) (2/3 seeds there)"
    # fully separated at both marks, yet 3 against 2 seeds cannot give p < 0.2: the separation counts instead
    assert cells[5] == (
        "5 of 6 runs done; leader at 0.5 / 1 CPU-min: CartPole-v1 PPO, a2c; at 1 CPU-min the leader's seeds above all "
        "of the runner-up's: CartPole-v1 3/3 (p >= 0.20 with these seed counts: no test)"
    )
    assert "per seed there 100, 110" in sources[-1]
    # 4 against 4 seeds, fully separated at 60 CPU-s: p = 2 / C(8, 4); at 30 CPU-s they overlap
    returns = {("a2c", 30): [1, 5, 3, 7], ("a2c", 60): [9, 10, 11, 12], ("ppo", 30): [2, 6, 4, 8], ("ppo", 60): [1, 2, 3, 4]}
    cells, _ = report.cpu_hour_row(_cpu_hour_campaign(tmp_path, returns, done=8))
    assert cells[5] == "leader at 0.5 / 1 CPU-min: CartPole-v1 PPO, a2c; a2c ahead on CartPole-v1 at 1 CPU-min (p = 0.029)"
    # the same runs on two CPU models: the row says so (a CPU second buys another number of steps on each)
    cells, _ = report.cpu_hour_row(_cpu_hour_campaign(tmp_path, returns, done=8, cpus={"a2c": "A", "ppo": "B"}))
    assert cells[5].endswith("(p = 0.029); the runs trained on 2 CPU models (per run: results.md, CPUs)")


def test_permutation_p_value_against_hand_counts() -> None:
    # 3 vs 3, fully separated: 2 of the 20 splits are as extreme (the observed one and its mirror)
    assert permutation_p_value([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]) == pytest.approx(2 / 20)
    # identical groups: every split is at least as extreme
    assert permutation_p_value([1.0, 2.0], [1.0, 2.0]) == 1.0
    # 5 vs 5 fully separated: 2 of 252
    assert permutation_p_value(np.arange(5) + 10.0, np.arange(5)) == pytest.approx(2 / 252)
    # unequal sizes: scipy's two-sided p-value, twice the smaller one-sided one. [0, 1, 2] against [3, 10]: of the 10
    # splits only the observed one has a difference of the means (-5.5) as low, and none one as high as 5.5: one-sided
    # 1/10, two-sided 2/10 (the share of splits with an absolute difference at least 5.5 would be 1/10)
    assert permutation_p_value([0.0, 1.0, 2.0], [3.0, 10.0]) == pytest.approx(2 / 10)
    with pytest.raises(ValueError, match="finite"):
        permutation_p_value([1.0, float("nan")], [2.0])


def test_bootstrap_interval() -> None:
    low, high = bootstrap_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert 1.0 < low < 3.0 < high < 5.0
    assert bootstrap_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval([])


@pytest.mark.repo
def test_no_documented_command_writes_into_the_committed_results() -> None:
    offending = [
        f"{page.relative_to(ROOT)}: {match[0]}"
        for page in PAGES
        for match in re.finditer(r"--out\s+benchmarks/results\S*", page.read_text())
    ]
    assert not offending


def _results_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "evaluations.csv").write_text("algo,env,seed,timesteps,mean_return\n")
    return folder


GRID = ["--algos", "ppo", "--envs", "CartPole-v1", "--steps", "64", "--quiet"]


def test_refuses_a_folder_holding_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    out = _results_folder(tmp_path / "done")
    with pytest.raises(SystemExit) as excinfo:
        run.main([*GRID, "--out", str(out)])
    assert excinfo.value.code == 2
    assert "already holds results (evaluations.csv)" in capsys.readouterr().err
    assert run.refusal_to_write(tmp_path / "new", skip_existing=False) is None
    assert run.refusal_to_write(tmp_path, skip_existing=False) is None  # a folder without results
    # resuming an uncommitted folder needs no --force
    assert run.refusal_to_write(out, skip_existing=True) is None

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(run, "run_grid", reached)
    for extra in (["--force"], ["--skip-existing"]):
        with pytest.raises(Reached):
            run.main([*GRID, "--out", str(out), *extra])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_refuses_a_folder_tracked_by_git_even_when_resuming(tmp_path: Path) -> None:
    out = _results_folder(tmp_path / "benchmarks" / "results" / "suite")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "results"], check=True)
    refusal = run.refusal_to_write(out, skip_existing=True)
    assert refusal is not None and "tracked by git" in refusal and "--force" in refusal
    with pytest.raises(SystemExit):
        run.main([*GRID, "--out", str(out), "--skip-existing"])
    # paths relative to the folder asked about
    assert run.git_tracked_files(tmp_path / "benchmarks") == ["results/suite/evaluations.csv"]


@pytest.mark.repo
def test_the_committed_results_are_refused() -> None:
    if not run.git_tracked_files(ROOT / "benchmarks" / "results" / "classic"):
        pytest.skip("not a git checkout")
    assert run.refusal_to_write(ROOT / "benchmarks" / "results" / "classic", skip_existing=True) is not None


def test_stratified_rank_test_against_every_shuffle() -> None:
    """The exact null distribution by convolution equals the count over every label shuffle within each stratum."""
    import itertools as it

    from scipy.stats import rankdata

    from benchmarks.reporting import separation, stratified_rank_test

    strata = [([3.0, 5.0, 9.0], [1.0, 2.0, 4.0]), ([1.0, 1.0], [1.0, 7.0, 8.0]), ([6.0], [2.0, 3.0])]
    p_value, observed, expected = stratified_rank_test(strata)
    per_stratum = []
    for first, second in strata:
        ranks = rankdata(first + second)
        per_stratum.append([ranks[list(group)].sum() for group in it.combinations(range(len(ranks)), len(first))])
    totals = np.array([sum(parts) for parts in it.product(*per_stratum)])
    one_sided = min(np.mean(totals >= observed - 1e-9), np.mean(totals <= observed + 1e-9))
    assert p_value == pytest.approx(min(1.0, 2 * one_sided)) and expected == pytest.approx(totals.mean())
    # five tasks, each completely separated 3 against 3: (1/20)^5 one-sided
    assert stratified_rank_test([([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])] * 5)[0] == pytest.approx(2 / 20**5)
    assert separation([4.0, 5.0, 6.0], [1.0, 2.0, 4.5]) == (2, 0) and separation([1.0], [2.0, 0.0]) == (0, 1)


@pytest.mark.repo
def test_pooled_test_of_the_cpu_hour_campaign() -> None:
    """Pooled over the five tasks (stratified rank test of the returns at the mark), Trust-PCL is ahead of SAC at 15
    and 30 CPU-min, from the committed data."""
    loaded = campaign.load_campaign(ROOT / "benchmarks" / "campaigns" / "cpu_hour.yml")
    frame = store.read_evaluations(loaded.out).dropna(subset=["timesteps"])
    tests = {(mark, first, second): p for mark, first, second, tasks, p, *_ in report.pooled_tests(loaded, frame)}
    assert tests[900.0, "trust_pcl", "sac"] < 0.001 and tests[1800.0, "trust_pcl", "sac"] < 0.01
    assert tests[3600.0, "trust_pcl", "sac"] > 0.05


def test_table_cells_fit_the_seed_counts() -> None:
    """An interval from 6 seeds on, else the seed count and range; 3 against 3: the separation counts, no test."""
    three, other = pd.Series([4.0, 5.0, 6.0]), pd.Series([1.0, 2.0, 4.5])
    assert report.values_cell(three, report.FINAL) == "5 (3 seeds: 4 to 6)"
    assert report.values_cell(pd.Series(np.arange(6.0)), report.FINAL).startswith("2.5 [")
    assert report.difference(three, other, report.FINAL, ("A", "B")) == (
        "A's seeds above all of B's: 2/3, the reverse 0/3 (3 against 3 seeds: p >= 0.10, no test)"
    )
    # lower is better (steps to a threshold): the counts are of seeds below all of the other's
    steps = report.Quantity("steps", report.final_return, higher_is_better=False)
    assert report.difference(other, three, steps, ("B", "A")).startswith("B's seeds above all of A's: 2/3")
    assert report.difference(pd.Series(np.arange(5.0) + 10), pd.Series(np.arange(5.0)), report.FINAL, ("A", "B")) == (
        "A ahead (p = 0.0079)"
    )
