"""Packaging: one version, the dependency floors of CI, shipped files, what a saved model keeps."""

import importlib.metadata
import re
from pathlib import Path

import pytest
import torch as th

import sb3_pcl
from sb3_pcl import PCL, TrustPCL

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_metadata_and_package_agree_on_the_version():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"file": "sb3_pcl/version.txt"}
    assert sb3_pcl.__version__ == (REPO / "sb3_pcl" / "version.txt").read_text().strip()
    assert importlib.metadata.version("sb3-pcl") == sb3_pcl.__version__


@pytest.mark.repo
def test_the_version_is_the_changelogs_latest_release():
    releases = re.findall(r"^## (\d+\.\d+\.\d+)\s*$", (REPO / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert releases and releases[0] == sb3_pcl.__version__


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
    assert "Typing :: Typed" in PYPROJECT["project"]["classifiers"]


@pytest.mark.parametrize("algo_class", [PCL, TrustPCL])
def test_fused_adam_is_chosen_at_run_time_and_not_saved(algo_class, tmp_path):
    model = algo_class("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [8]}, learning_starts=10, batch_size=2)
    assert model.policy.optimizer.param_groups[0]["fused"] is True  # fused on this CPU run
    assert "optimizer_kwargs" not in model.policy_kwargs
    model.learn(40)
    model.save(tmp_path / "model")
    # the policy_kwargs given at creation load the model again (SB3 compares them with the saved ones)
    loaded = algo_class.load(tmp_path / "model", policy_kwargs={"net_arch": [8], "use_sde": False})
    assert "optimizer_kwargs" not in loaded.policy_kwargs
    assert loaded.policy.optimizer.param_groups[0]["fused"] is True


def test_an_explicit_optimizer_choice_is_kept():
    model = PCL("MlpPolicy", "CartPole-v1", policy_kwargs={"optimizer_kwargs": {"foreach": False}})
    assert model.policy_kwargs["optimizer_kwargs"] == {"foreach": False}
    assert not model.policy.optimizer.param_groups[0]["fused"]
    assert th.optim.Adam is model.policy.optimizer_class
