"""
rl-zoo3's other commands through ``python -m sb3_pcl.zoo``: record_video, record_training, push_to_hub (the Hub API
stubbed, or an endpoint that refuses the connection), the plots, and the message when the zoo extra is missing.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import yaml
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import PCL
from sb3_pcl.zoo.__main__ import COMMANDS
from sb3_pcl.zoo.__main__ import main as zoo_main
from sb3_pcl.zoo.record_training import models_to_record

ENV_ID = "CartPole-v1"


def run_zoo(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """:return: the finished ``python -m sb3_pcl.zoo <args>`` run in ``cwd``"""
    return subprocess.run(
        [sys.executable, "-m", "sb3_pcl.zoo", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory) -> Path:
    """:return: a folder with ``logs/pcl/CartPole-v1_1``: a short rl-zoo3 training run with a checkpoint"""
    folder = tmp_path_factory.mktemp("zoo_run")
    args = ["train", "--algo", "pcl", "--env", ENV_ID, "-n", "400", "-f", "logs", "--seed", "0", "--num-threads", "1"]
    start = Path.cwd()
    os.chdir(folder)
    try:
        zoo_main([*args, "--save-freq", "200", "-params", "learning_starts:100", "n_envs:1"])
    finally:
        os.chdir(start)
    assert (folder / "logs" / "pcl" / f"{ENV_ID}_1" / f"{ENV_ID}.zip").is_file()
    return folder


def test_the_command_list_names_every_command(capsys):
    with pytest.raises(SystemExit) as error:
        zoo_main(["--help"])
    assert error.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
    with pytest.raises(SystemExit, match="unknown command 'recordvideo'"):
        zoo_main(["recordvideo"])


@pytest.mark.parametrize("command", ["record_video", "load_from_hub", "push_to_hub", "record_training"])
def test_the_zoo_scripts_take_our_algorithms(command, capsys):
    with pytest.raises(SystemExit) as error:
        zoo_main([command, "--algo", "urex", "--help"])
    assert error.value.code == 0 and "--algo" in capsys.readouterr().out


@pytest.mark.parametrize("module", ["sb3_pcl.zoo"])
def test_without_the_zoo_extra_the_message_names_the_extra(module, tmp_path):
    code = f"import runpy, sys; sys.modules['rl_zoo3'] = None; runpy.run_module({module!r}, run_name='__main__')"
    result = subprocess.run([sys.executable, "-c", code, "train"], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert result.returncode != 0
    assert 'pip install -e ".[zoo]" in the sb3_pcl checkout' in result.stderr and "'rl_zoo3' is not installed" in result.stderr


def test_record_video_writes_a_video_of_our_model(zoo_run, tmp_path, monkeypatch):
    pytest.importorskip("pygame")  # CartPole renders with pygame (gymnasium[classic-control])
    monkeypatch.chdir(zoo_run)
    zoo_main(["record_video", "--algo", "pcl", "--env", ENV_ID, "-f", "logs", "-n", "20", "-o", str(tmp_path / "videos")])
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 0


def test_record_training_lists_checkpoints_by_steps_then_final_then_best(tmp_path):
    for name in ("rl_model_1000_steps.zip", "rl_model_200_steps.zip", "best_model.zip", f"{ENV_ID}.zip", "other.zip"):
        (tmp_path / name).write_bytes(b"")
    labels = [label for label, _ in models_to_record(tmp_path, ENV_ID)]
    assert labels == ["checkpoint 200", "checkpoint 1000", "final model", "best model"]
    assert models_to_record(tmp_path, ENV_ID)[0][1] == ["--load-checkpoint", "200"]


@pytest.mark.slow
def test_record_training_joins_the_videos_of_a_run(zoo_run, tmp_path):
    pytest.importorskip("pygame")
    folder = tmp_path / "copy"
    shutil.copytree(zoo_run / "logs", folder / "logs")
    run_folder = folder / "logs" / "pcl" / f"{ENV_ID}_1"
    for checkpoint in run_folder.glob("rl_model_*_steps.zip"):  # keep one checkpoint: two recordings in all
        if checkpoint.name != "rl_model_200_steps.zip":
            checkpoint.unlink()
    result = run_zoo(["record_training", "--algo", "pcl", "--env", ENV_ID, "-f", "logs", "-n", "15"], folder)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 clips: checkpoint 200, final model" in result.stdout
    assert (run_folder / "videos" / "training.mp4").stat().st_size > 0


def test_record_training_fails_clearly_without_a_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match=r"the run folder logs/pcl/CartPole-v1_3 does not exist"):
        zoo_main(["record_training", "--algo", "pcl", "--env", ENV_ID, "-f", "logs", "--exp-id", "3"])


@pytest.fixture(scope="module")
def hub() -> ModuleType:
    """:return: ``sb3_pcl.zoo.push_to_hub`` (skips without huggingface_sb3)"""
    pytest.importorskip("huggingface_sb3", reason="push_to_hub needs huggingface_sb3 (from rl-zoo3; the hub extra pins it)")
    from sb3_pcl.zoo import push_to_hub

    return push_to_hub


@pytest.fixture
def hub_calls(monkeypatch) -> list[tuple[str, dict[str, Any]]]:
    """:return: the Hub API calls of push_to_hub, recorded by stubs of the three that use the network"""
    from huggingface_hub import HfApi

    calls: list[tuple[str, dict[str, Any]]] = []

    def create_repo(self, **kwargs: Any) -> str:
        calls.append(("create_repo", kwargs))
        return f"https://huggingface.co/{kwargs['repo_id']}"

    def snapshot_download(self, repo_id: str, local_dir: Path) -> None:
        calls.append(("snapshot_download", {"repo_id": repo_id}))
        Path(local_dir).mkdir(parents=True, exist_ok=True)

    def upload_folder(self, **kwargs: Any) -> None:
        calls.append(("upload_folder", kwargs))

    for stub in (create_repo, snapshot_download, upload_folder):
        monkeypatch.setattr(HfApi, stub.__name__, stub)
    return calls


def test_push_to_hub_packages_the_run_with_our_model_card(hub, hub_calls, zoo_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(hub.shutil, "which", lambda command: None)  # as on a machine without ffmpeg: no replay video
    monkeypatch.chdir(zoo_run)
    args = ["--algo", "pcl", "--env", ENV_ID, "-f", "logs", "-orga", "someone", "--n-eval-episodes", "2"]
    url = hub.main([*args, "--local-repo-path", str(tmp_path / "hub"), "-m", "first"])
    assert url == "https://huggingface.co/someone/pcl-CartPole-v1"
    assert "no replay video: ffmpeg, which encodes it, is not on PATH" in capsys.readouterr().out
    assert [name for name, _ in hub_calls] == ["create_repo", "snapshot_download", "upload_folder"]
    upload = hub_calls[-1][1]
    assert upload["repo_id"] == "someone/pcl-CartPole-v1" and upload["commit_message"] == "first"
    uploaded = Path(upload["folder_path"])
    assert uploaded == tmp_path / "hub" / "pcl-CartPole-v1"
    names = {path.name for path in uploaded.iterdir()}
    expected = {"pcl-CartPole-v1.zip", "pcl-CartPole-v1", "README.md", "results.json", "train_eval_metrics.zip"}
    assert expected | {"config.yml", "args.yml", "env_kwargs.yml", ".gitattributes"} <= names
    assert "replay.mp4" not in names
    card = (uploaded / "README.md").read_text()
    # sb3_pcl is on no index: the card installs it from the metadata's source URL, never with a bare `pip install sb3-pcl`
    source = hub.SOURCE
    assert source.startswith("https://") and f"git clone {source} && " in card and '[hub]"' in card
    assert "pip install sb3-pcl" not in card and "pypi.org" not in card and "pip install rl_zoo3" not in card
    assert "from sb3_pcl import PCL" in card and "PCL.load(checkpoint)" in card
    assert 'load_from_hub("someone/pcl-CartPole-v1", "pcl-CartPole-v1.zip")' in card and "TRUST_REMOTE_CODE=True" in card
    assert "python -m sb3_pcl.zoo enjoy --algo pcl" in card and "rl_zoo3.enjoy" not in card
    metadata = yaml.safe_load(card.split("---")[1])
    assert metadata["library_name"] == "stable-baselines3" and "sb3_pcl" in metadata["tags"]
    assert metadata["model-index"][0]["name"] == "PCL"
    results = json.loads((uploaded / "results.json").read_text())
    assert results["n_eval_episodes"] == 2 and results["is_deterministic"] is True
    assert f"{results['mean_reward']:.2f}" in card
    model = PCL.load(uploaded / "pcl-CartPole-v1.zip")  # what the card tells users to run
    assert model.observation_space.shape == (4,)
    assert hub.zoo_push.generate_model_card.__module__ == "rl_zoo3.push_to_hub", "rl-zoo3's card is put back"


def test_push_to_hub_to_a_hub_it_cannot_reach_fails_fast_with_one_line(hub, zoo_run, tmp_path, monkeypatch):
    from huggingface_hub import constants

    endpoint = "http://127.0.0.1:9"  # a real connection, refused (discard port): the same path as without a network
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.chdir(zoo_run)
    args = ["--algo", "pcl", "--env", ENV_ID, "-f", "logs", "-orga", "someone", "--no-render"]
    with pytest.raises(SystemExit) as exit_:
        hub.main([*args, "--local-repo-path", str(tmp_path / "hub")])
    message = str(exit_.value.code)
    assert message.startswith(f"push_to_hub: the Hugging Face Hub at {endpoint} could not be reached") and "\n" not in message
    assert "ConnectError" in message
    assert not (tmp_path / "hub").exists(), "the first request failed: nothing was evaluated or written"
    # other failures keep their traceback: they are bugs or bad input, not the network
    assert hub.hub_error(ValueError("bad")) is None


def test_push_to_hub_refuses_algorithms_that_are_not_ours_and_bad_repository_ids(hub, capsys):
    with pytest.raises(SystemExit):
        hub.main(["--algo", "ppo", "--env", ENV_ID, "-f", "logs", "-orga", "someone"])
    assert "invalid choice: 'ppo'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="repo_id must be <organization>/<repository>, got 'pcl-CartPole-v1'"):
        hub.package_to_hub(None, "pcl", ENV_ID, Path("logs"), {}, {}, None, "pcl-CartPole-v1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="algo must be one of sb3_pcl's algorithms"):
        hub.package_to_hub(None, "ppo", ENV_ID, Path("logs"), {}, {}, None, "someone/x")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def eval_logs(tmp_path_factory) -> Path:
    """:return: a log folder with two short PCL runs with evaluations, in rl-zoo3's layout"""
    folder = tmp_path_factory.mktemp("plots")
    for run in (1, 2):
        log_path = folder / "logs" / "pcl" / f"{ENV_ID}_{run}"
        env = make_vec_env(ENV_ID, n_envs=1, seed=run, monitor_dir=str(log_path))  # plot_train reads the monitor files
        callback = EvalCallback(make_vec_env(ENV_ID, seed=100 + run), n_eval_episodes=2, eval_freq=100, log_path=str(log_path))
        PCL("MlpPolicy", env, learning_starts=50, batch_size=4, seed=run, policy_kwargs={"net_arch": [8]}).learn(
            400, callback=callback
        )
        assert (log_path / "evaluations.npz").is_file()
    return folder


def test_rl_zoo3_plots_run_on_our_logs(eval_logs, monkeypatch):
    pytest.importorskip("rliable")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(eval_logs)
    output = eval_logs / "all"
    zoo_main(["all_plots", "-a", "pcl", "-e", ENV_ID, "-f", "logs", "--no-display", "-o", str(output)])
    assert (eval_logs / "all.pkl").is_file()
    figure = eval_logs / "figure"
    zoo_main(["plot_from_file", "-i", str(eval_logs / "all.pkl"), "-o", str(figure), "--format", "png", "-r", "-iqm"])
    assert figure.read_bytes().startswith(b"\x89PNG"), "plot_from_file wrote no PNG figure"
    assert np.isfinite(np.load(eval_logs / "logs" / "pcl" / f"{ENV_ID}_1" / "evaluations.npz")["results"]).all()


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("plot_train", ["-a", "pcl", "-e", ENV_ID, "-f", "logs/", "-w", "2"]),
        ("all_plots", ["-a", "pcl", "-e", ENV_ID, "-f", "logs"]),
    ],
)
def test_plots_save_their_figures_headless_with_save_figures(eval_logs, tmp_path, monkeypatch, command, options):
    monkeypatch.setenv("MPLBACKEND", "Agg")  # as on a machine without a display
    monkeypatch.chdir(eval_logs)
    extra = ["--no-display", "-o", str(tmp_path / "all")] if command == "all_plots" else []
    zoo_main([command, *options, *extra, "--save-figures", str(tmp_path / "figures")])
    figures = sorted((tmp_path / "figures").glob(f"{command}_*.png"))
    assert figures and all(path.read_bytes().startswith(b"\x89PNG") for path in figures)
    with pytest.raises(SystemExit, match="needs a folder"):
        zoo_main([command, *options, "--save-figures"])
