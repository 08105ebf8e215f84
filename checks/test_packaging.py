"""Packaging: one version, the dependency floors of CI, shipped files, the changelog's releases."""

import importlib.metadata
import re
from pathlib import Path

import pytest

import sb3_pcl

pytestmark = pytest.mark.repo  # make check-repo

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_metadata_and_package_agree_on_the_version():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"file": "sb3_pcl/version.txt"}
    assert sb3_pcl.__version__ == (REPO / "sb3_pcl" / "version.txt").read_text().strip()
    assert importlib.metadata.version("sb3-pcl") == sb3_pcl.__version__


#: the sections of every release of the changelog, in this order (as SB3's changelog)
CHANGELOG_SECTIONS = ["Breaking changes", "New features", "Bug fixes", "Deprecations", "Others"]


def changelog_releases() -> list[tuple[str, str, str]]:
    """:return: the changelog's releases, newest first: (version, the rest of its heading, its text)"""
    parts = re.split(r"^## (\S+)(.*)$", (REPO / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    return [(parts[i], parts[i + 1].strip(), parts[i + 2]) for i in range(1, len(parts), 3)]


@pytest.mark.repo
def test_the_version_is_the_changelogs_latest_release_and_says_if_it_is_unreleased():
    version, heading, _ = changelog_releases()[0]
    assert version == sb3_pcl.__version__
    # a pre-release version (0.3.0a0) is the unreleased one: its heading says so; a release's does not
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", version)
    prerelease = not re.fullmatch(r"[\d.]+", version)
    assert (heading == "(unreleased)") == prerelease, f"## {version} {heading}"


@pytest.mark.repo
def test_each_release_of_the_changelog_is_split_into_the_same_sections():
    releases = changelog_releases()
    assert [version for version, _, _ in releases][-2:] == ["0.2.0", "0.1.0"]
    for version, _, text in releases[:-1]:  # 0.1.0, the first release, has only new features
        sections = re.findall(r"^### (.+)$", text, flags=re.MULTILINE)
        assert sections == CHANGELOG_SECTIONS, f"{version}: {sections}"
        for section in re.split(r"^### .+$", text, flags=re.MULTILINE)[1:]:
            assert section.strip(), f"{version} has an empty section (write '- None.')"
    assert re.findall(r"^### (.+)$", releases[-1][2], flags=re.MULTILINE) == ["New features"]


@pytest.mark.repo
def test_project_urls_name_the_source_issues_documentation_and_changelog():
    urls = PYPROJECT["project"]["urls"]
    assert {"Source", "Documentation", "Issues", "Changelog"} <= set(urls)
    assert all(url.startswith("https://") for url in urls.values())
    assert urls["Issues"] == urls["Source"].rstrip("/") + "/issues"
    # the changelog is the site's page of CHANGELOG.md (the site's source folder is the repository root)
    assert urls["Changelog"].startswith(urls["Documentation"].rstrip("/") + "/")
    page = urls["Changelog"].rsplit("/", 1)[1]
    assert page == "CHANGELOG.html" and (REPO / "CHANGELOG.md").is_file()
    assert "CHANGELOG.md" in (REPO / "docs" / "conf.py").read_text()
    # the Hub model card installs sb3_pcl from the source URL (tests/test_zoo_commands.py checks the card)
    assert f'SOURCE = "{urls["Source"]}"' in (REPO / "sb3_pcl" / "zoo" / "push_to_hub.py").read_text()
    assert (REPO / ".readthedocs.yaml").is_file()
    # the package is on no index: nothing may tell users to install it from one
    for path in [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "sb3_pcl").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"pip install (-U )?\"?sb3[-_]pcl\b", text), f"{path} tells users to pip install sb3-pcl"
        assert "pypi.org/project/sb3" not in text, path


def test_py_typed_and_version_txt_are_package_data():
    assert (REPO / "sb3_pcl" / "py.typed").is_file()
    assert set(PYPROJECT["tool"]["setuptools"]["package-data"]["sb3_pcl"]) >= {"py.typed", "version.txt"}


def floors() -> dict[str, str]:
    """:return: the pins of ``.ci/floors.txt``, by normalised package name"""
    pins = {}
    for line in (REPO / ".ci" / "floors.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


@pytest.mark.repo
def test_ci_floors_are_the_declared_floors():
    declared = {}
    for requirement in PYPROJECT["project"]["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)(,<[0-9.]+)?", requirement)
        assert match, f"{requirement}: every dependency declares a floor"
        declared[match[1].lower().replace("_", "-")] = match[2]
    # torch's floor is not installed by CI (older torch releases pull CUDA packages): all the others are
    assert floors() == {name: version for name, version in declared.items() if name != "torch"}
    assert declared["stable-baselines3"] == "2.7.0" and declared["sb3-contrib"] == "2.7.0"


@pytest.mark.repo
def test_python_classifiers_match_requires_python():
    minimum = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    versions = [c.rsplit(" ", 1)[1] for c in PYPROJECT["project"]["classifiers"] if re.search(r":: 3\.\d+$", c)]
    assert versions and versions[0] == minimum
    # CI (.ci/run) tests one Python: the classifiers claim no other
    assert versions == ["3.11"] and minimum == "3.11"
    assert "Typing :: Typed" in PYPROJECT["project"]["classifiers"]


@pytest.mark.repo
def test_the_tests_extra_leaves_the_heavy_integrations_to_their_own_extra():
    extras = PYPROJECT["project"]["optional-dependencies"]
    names = {re.split(r"[\[<>=!~ ]", requirement)[0] for requirement in extras["tests"]}
    assert not names & {"ray", "minari", "jax", "jaxlib", "onnx", "onnxruntime"}, sorted(names)
    assert set(extras["integrations"]) >= {"sb3-pcl[ray,minari,onnx]"}
    ci = (REPO / ".ci" / "run").read_text()
    assert 'pip install -e ".[integrations]"' in ci and "SB3_PCL_INTEGRATIONS=required" in ci


def test_ci_runs_every_test_file_that_needs_an_integration_with_it_installed():
    """A test of an integration skips in the default run (the tests extra lacks it): CI's integration step must name
    its file, or the test never runs anywhere."""
    integrations = ("ray", "minari", "h5py", "jax", "onnx", "onnxruntime")  # conftest.INTEGRATIONS
    pattern = re.compile(r"importorskip\(\"(" + "|".join(integrations) + r")[\".]")
    needing = sorted(f"tests/{path.name}" for path in (REPO / "tests").glob("test_*.py") if pattern.search(path.read_text()))
    ci = (REPO / ".ci" / "run").read_text()
    step = ci.split("SB3_PCL_INTEGRATIONS=required", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"tests/test_\w+\.py", step))
    assert needing and set(needing) <= named, f"add to the integration step of .ci/run: {set(needing) - named}"
