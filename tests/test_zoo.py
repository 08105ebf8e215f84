"""
Tests of the rl-zoo3 plugin (``sb3_pcl.zoo``).

The command-line tests run ``python -m sb3_pcl.zoo.train`` / ``enjoy`` in subprocesses from a
temporary working directory, with tiny budgets and ``--num-threads 1`` (torch's default thread
pool is many times slower on a busy 2-core machine).
"""

import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import rl_zoo3
import rl_zoo3.hyperparams_opt
import torch as th
import yaml
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import sb3_pcl
from sb3_pcl.hyperparams_files import hyperparams_dir
from sb3_pcl.zoo import CONVERTERS, SAMPLERS, default_conf_file, register_algorithms
from sb3_pcl.zoo.train import with_default_conf_file, with_default_threads

REPO = Path(__file__).resolve().parents[1]
ENV_ID = "CartPole-v1"
ALGO_NAMES = sorted(sb3_pcl.ALGOS)
COMMON = ["--env", ENV_ID, "--seed", "0", "--num-threads", "1"]


def run_module(module: str, args: list[str], cwd: Path, python: str = sys.executable, timeout: float = 300) -> str:
    """
    Run ``python -m module args`` in ``cwd`` and return its output; fail the test on a non-zero exit.

    :param module: e.g. ``"sb3_pcl.zoo.train"``
    :param args: the command-line arguments
    :param cwd: the working directory
    :param python: the interpreter
    :param timeout: seconds before the run is killed
    :return: stdout and stderr together
    """
    result = subprocess.run(
        [python, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{module} {' '.join(args)} exited with {result.returncode}:\n{output[-6000:]}"
    return output


def conf_args(algo: str, tmp_path: Path) -> list[str]:
    """
    :param algo: one of our algorithms
    :param tmp_path: folder for a fallback config
    :return: no arguments when our ``<algo>.yml`` has a CartPole entry (the default is under test),
        else ``--conf-file`` of a minimal entry (the algorithm's defaults, two envs: the episode
        methods play each start state in groups of ``num_samples`` = 2 envs), so that every
        algorithm of ``sb3_pcl.ALGOS`` goes through the plugin
    """
    path = default_conf_file(algo)
    if path.is_file() and ENV_ID in (yaml.safe_load(path.read_text()) or {}):
        return []
    fallback = tmp_path / f"{algo}_fallback.yml"
    fallback.write_text(yaml.safe_dump({ENV_ID: {"policy": default_policy(algo), "n_timesteps": 2000, "n_envs": 2}}))
    return ["--conf-file", str(fallback)]


def default_policy(algo: str) -> str:
    """:return: ``"MlpPolicy"``, or ``"MlpPrevActionLstmPolicy"`` for the recurrent algorithms that take no other"""
    aliases = sb3_pcl.ALGOS[algo].policy_aliases
    return "MlpPolicy" if "MlpPolicy" in aliases else "MlpPrevActionLstmPolicy"


def accepts(algo_class: type, name: str) -> bool:
    """:return: whether the algorithm takes the argument ``name`` (declared by it or by a base class it forwards to)"""
    return any(name in inspect.signature(cls.__init__).parameters for cls in algo_class.__mro__ if "__init__" in vars(cls))


def learning_starts(algo: str, steps: int) -> list[str]:
    """
    :param algo: one of our algorithms
    :param steps: when learning starts
    :return: ``-params learning_starts:<steps>`` when the algorithm has that argument (so that short
        runs train), else nothing
    """
    if accepts(sb3_pcl.ALGOS[algo], "learning_starts"):
        return ["-params", f"learning_starts:{steps}"]
    return []


def load_zoo_yaml(path: Path) -> dict[str, Any]:
    """
    :param path: a ``config.yml`` / ``args.yml`` written by rl-zoo3 (an ``OrderedDict`` dump)
    :return: its content as a dict
    """
    with open(path) as file:
        return dict(yaml.load(file, Loader=yaml.UnsafeLoader))


def check_run_layout(logs: Path, tb: Path, algo: str) -> Path:
    """
    Assert that a training run left rl-zoo3's log layout and return the run folder.

    :param logs: the ``-f`` folder
    :param tb: the ``-tb`` folder
    :param algo: the algorithm name
    :return: ``logs/<algo>/<env>_1``
    """
    run_dir = logs / algo / f"{ENV_ID}_1"
    assert (run_dir / f"{ENV_ID}.zip").is_file()
    assert (run_dir / ENV_ID / "config.yml").is_file()
    evaluations = np.load(run_dir / "evaluations.npz")
    assert evaluations["timesteps"].size >= 1 and evaluations["results"].shape[1] == 2
    runs = [path for path in (tb / ENV_ID).iterdir() if path.is_dir()]
    assert len(runs) == 1 and any(name.startswith("events.out.tfevents") for name in os.listdir(runs[0]))
    return run_dir


# --------------------------------------------------------------------------- registration, samplers


def test_register_algorithms_is_idempotent() -> None:
    names = register_algorithms()
    assert names == ALGO_NAMES
    sizes = (len(rl_zoo3.ALGOS), len(rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER))
    assert register_algorithms() == names
    assert (len(rl_zoo3.ALGOS), len(rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER)) == sizes
    for name, algo_class in sb3_pcl.ALGOS.items():
        assert rl_zoo3.ALGOS[name] is algo_class
    for name, sampler in SAMPLERS.items():
        assert rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER[name] is sampler
    for name, converter in CONVERTERS.items():
        assert rl_zoo3.hyperparams_opt.HYPERPARAMS_CONVERTER[name] is converter
    # rl-zoo3's own algorithms are untouched
    assert rl_zoo3.ALGOS["ppo"] is PPO


def test_register_algorithms_refuses_to_replace_foreign_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rl_zoo3.ALGOS, "pcl", PPO)
    with pytest.raises(ValueError, match="overwrite=True"):
        register_algorithms()
    register_algorithms(overwrite=True)
    assert rl_zoo3.ALGOS["pcl"] is sb3_pcl.ALGOS["pcl"]


@pytest.mark.parametrize("algo", ALGO_NAMES)
def test_sampler_kwargs_build_the_algorithm(algo: str) -> None:
    assert algo in SAMPLERS and algo in CONVERTERS, f"add an Optuna sampler and converter for {algo} to sb3_pcl.zoo.samplers"
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), direction="maximize")
    additional_args = {"using_her_replay_buffer": False, "her_kwargs": {}}
    n_envs = 2  # samplers get rl-zoo3's n_envs (the episode methods need a multiple of num_samples)
    threads = th.get_num_threads()
    th.set_num_threads(1)
    try:
        for _ in range(8):
            trial = study.ask()
            kwargs = SAMPLERS[algo](trial, 0, n_envs, additional_args)
            # a stored trial converts back to the same keyword arguments (``--trial-id``)
            assert CONVERTERS[algo](trial.params) == kwargs
            model = sb3_pcl.ALGOS[algo](default_policy(algo), make_vec_env(ENV_ID, n_envs=n_envs), seed=0, **kwargs)
            assert model.policy is not None
            study.tell(trial, 0.0)
    finally:
        th.set_num_threads(threads)


def test_default_conf_file_is_ours_for_our_algorithms_only() -> None:
    ours = str(default_conf_file("pcl"))
    assert Path(ours).is_file() and Path(ours).parent == hyperparams_dir()
    args = ["--algo", "pcl", "--env", ENV_ID]
    assert with_default_conf_file(args) == [*args, "--conf-file", ours]
    assert with_default_conf_file(["--algo=pcl", "-n", "10"])[-2:] == ["--conf-file", ours]
    # an explicit config wins, in all of rl-zoo3's spellings
    for given in (["-conf", "x.yml"], ["--conf-file", "x.yml"], ["--conf-file=x.yml"], ["--conf", "x.yml"]):
        assert with_default_conf_file(["--algo", "pcl", *given]) == ["--algo", "pcl", *given]
    # rl-zoo3's algorithms keep rl-zoo3's files
    assert with_default_conf_file(["--algo", "ppo"]) == ["--algo", "ppo"]
    assert with_default_conf_file([]) == []


# --------------------------------------------------------------------------- command line


def test_train_and_enjoy_pcl_fast(tmp_path: Path) -> None:
    """Default-run check of the whole route for PCL: our yml by default, zoo log layout, enjoy."""
    train_args = ["--algo", "pcl", *COMMON, "-n", "600", "--eval-freq", "300", "--eval-episodes", "2"]
    train_args += ["-tb", str(tmp_path / "tb"), "-f", str(tmp_path / "logs"), "-params", "learning_starts:200"]
    output = run_module("sb3_pcl.zoo.train", train_args, cwd=tmp_path)
    assert f"Loading hyperparameters from: {default_conf_file('pcl')}" in output
    run_dir = check_run_layout(tmp_path / "logs", tmp_path / "tb", "pcl")
    config = load_zoo_yaml(run_dir / ENV_ID / "config.yml")
    ours = yaml.safe_load(default_conf_file("pcl").read_text())[ENV_ID]
    assert config["train_freq"] == ours["train_freq"] and config["learning_starts"] == 200
    assert load_zoo_yaml(run_dir / ENV_ID / "args.yml")["conf_file"] == str(default_conf_file("pcl"))

    enjoy_args = ["--algo", "pcl", "--env", ENV_ID, "-f", str(tmp_path / "logs"), "--no-render", "-n", "200"]
    output = run_module("sb3_pcl.zoo.enjoy", [*enjoy_args, "--num-threads", "1"], cwd=tmp_path)
    assert "Episode Reward" in output


def test_ppo_through_our_entry_point(tmp_path: Path) -> None:
    args = ["--algo", "ppo", *COMMON, "-n", "512", "--eval-freq", "-1", "-f", str(tmp_path / "logs")]
    output = run_module("sb3_pcl.zoo.train", args, cwd=tmp_path)
    zoo_ppo_yml = Path(rl_zoo3.__file__).parent / "hyperparams" / "ppo.yml"
    assert f"Loading hyperparameters from: {zoo_ppo_yml}" in output
    assert (tmp_path / "logs" / "ppo" / f"{ENV_ID}_1" / f"{ENV_ID}.zip").is_file()


#: rl-zoo3's optimisation loop end to end for one replay-based and one episode-based algorithm by default; the
#: others' samplers build their algorithm in ``test_sampler_kwargs_build_the_algorithm``, their loop runs with ``-m slow``
OPTIMIZE_BY_DEFAULT = ("pcl", "urex")


@pytest.mark.parametrize(
    "algo", [pytest.param(algo, marks=() if algo in OPTIMIZE_BY_DEFAULT else pytest.mark.slow) for algo in ALGO_NAMES]
)
def test_optimize(algo: str, tmp_path: Path) -> None:
    args = ["--algo", algo, *COMMON, "-f", str(tmp_path / "logs"), "--eval-episodes", "2", *conf_args(algo, tmp_path)]
    args += ["--optimize", "--n-trials", "2", "--n-timesteps", "1000", "--n-jobs", "1"]
    args += ["--sampler", "random", "--pruner", "none", "--no-optim-plots", *learning_starts(algo, 900)]
    output = run_module("sb3_pcl.zoo.train", args, cwd=tmp_path)
    assert "Number of finished trials:  2" in output
    assert len(list((tmp_path / "logs" / algo).glob("report_*.csv"))) == 1


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGO_NAMES)
def test_train_and_enjoy(algo: str, tmp_path: Path) -> None:
    args = ["--algo", algo, *COMMON, "-n", "2000", "--eval-freq", "500", "--eval-episodes", "2"]
    args += ["-tb", str(tmp_path / "tb"), "-f", str(tmp_path / "logs"), *conf_args(algo, tmp_path)]
    run_module("sb3_pcl.zoo.train", args, cwd=tmp_path)
    check_run_layout(tmp_path / "logs", tmp_path / "tb", algo)
    enjoy_args = ["--algo", algo, "--env", ENV_ID, "-f", str(tmp_path / "logs"), "--no-render", "-n", "200"]
    run_module("sb3_pcl.zoo.enjoy", [*enjoy_args, "--num-threads", "1"], cwd=tmp_path)


@pytest.mark.slow
def test_two_workers_share_one_study(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    # create the study first (as `optuna create-study` would), so the workers only load it
    optuna.create_study(storage=storage, study_name="s", direction="maximize")
    args = ["--algo", "pcl", *COMMON, "--eval-episodes", "2", "--optimize", "--n-trials", "1", "--n-timesteps", "500"]
    args += ["--storage", storage, "--study-name", "s", "--sampler", "random", "--pruner", "none", "--no-optim-plots"]
    args += ["-params", "learning_starts:100"]
    workers = []
    for worker in range(2):
        cwd = tmp_path / f"worker{worker}"
        cwd.mkdir()
        command = [sys.executable, "-m", "sb3_pcl.zoo.train", *args, "-f", str(cwd / "logs")]
        workers.append(subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for process in workers:
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, output[-6000:]
    study = optuna.load_study(study_name="s", storage=storage)
    assert len(study.trials) == 2
    assert all(trial.state == optuna.trial.TrialState.COMPLETE for trial in study.trials)


@pytest.mark.slow
def test_non_editable_install_uses_packaged_yaml(tmp_path: Path) -> None:
    """``pip install .`` ships hyperparams/*.yml as sb3_pcl/hyperparams; train picks ours up from anywhere."""
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", "logs", "runs", ".venv", ".*_cache")
    shutil.copytree(REPO, source, ignore=ignore)
    venv = tmp_path / "venv"
    # without its own pip / setuptools, the venv uses the current ones (ensurepip's setuptools may be too old)
    command = [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)]
    subprocess.run(command, check=True, timeout=300)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--disable-pip-version-check"]
    subprocess.run([*pip, str(source)], check=True, timeout=600, capture_output=True)
    shutil.rmtree(source)  # nothing may be read from the source tree

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = "import sb3_pcl.hyperparams_files as h; print(h.hyperparams_dir())"
    packaged = subprocess.run([python, "-c", probe], cwd=elsewhere, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(packaged).is_relative_to(venv) and Path(packaged).parts[-2:] == ("sb3_pcl", "hyperparams")
    assert (Path(packaged) / "pcl.yml").read_text() == (REPO / "hyperparams" / "pcl.yml").read_text()

    args = ["--algo", "pcl", *COMMON, "-n", "1000", "--eval-freq", "-1", "-f", "logs", "-params", "learning_starts:500"]
    output = run_module("sb3_pcl.zoo.train", args, cwd=elsewhere, python=python)
    assert f"Loading hyperparameters from: {Path(packaged) / 'pcl.yml'}" in output
    config = load_zoo_yaml(elsewhere / "logs" / "pcl" / f"{ENV_ID}_1" / ENV_ID / "config.yml")
    ours = yaml.safe_load((REPO / "hyperparams" / "pcl.yml").read_text())[ENV_ID]
    assert config["train_freq"] == ours["train_freq"] and config["learning_rate"] == ours["learning_rate"]

    # the console script of the wheel
    enjoy = [str(venv / "bin" / "sb3-pcl-enjoy"), "--algo", "pcl", "--env", ENV_ID, "-f", "logs", "--no-render", "-n", "100"]
    result = subprocess.run(enjoy, cwd=elsewhere, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def test_our_algorithms_train_on_one_torch_thread_unless_told_otherwise() -> None:
    assert with_default_threads(["--algo", "pcl"]) == ["--algo", "pcl", "--num-threads", "1"]
    assert with_default_threads(["--algo", "pcl", "--num-threads", "4"]) == ["--algo", "pcl", "--num-threads", "4"]
    assert with_default_threads(["--algo=trust_pcl", "--num-threads=-1"]) == ["--algo=trust_pcl", "--num-threads=-1"]
    assert with_default_threads(["--algo", "ppo"]) == ["--algo", "ppo"]  # rl-zoo3's algorithms keep its default
