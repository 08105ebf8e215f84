"""
Package a trained model for the Hugging Face Hub: ``python -m sb3_pcl.zoo.push_to_hub --algo pcl --env CartPole-v1
-f logs -orga <user or organization>``.

The options are those of ``python -m rl_zoo3.push_to_hub``. The repository gets what rl-zoo3 uploads (the model,
its ``config.yml`` / ``args.yml`` / ``env_kwargs.yml``, VecNormalize statistics, the training and evaluation logs,
``results.json`` of a fresh evaluation, a replay video unless ``--no-render``) and a model card that says how to
install sb3_pcl (from its source: it is on no package index) and which class loads the model: rl-zoo3's own card
tells users to run ``rl_zoo3.enjoy``, which does not know our algorithms. Log in first (``hf auth login``) or pass
``--token``; without a network the command ends with one line saying so.

The packaging is ours rather than rl-zoo3's ``package_to_hub`` with our card swapped in: rl-zoo3 2.9.2's
``rl_zoo3.push_to_hub`` cannot be imported with ``sb3-team-hf-integration`` 3.2, the only release rl-zoo3 accepts that
is published (it imports ``generate_metadata``, ``_evaluate_agent`` and ``_generate_replay`` from
``huggingface_sb3.push_to_hub``, which 3.2 no longer has).
"""

import argparse
import json
import os
import shutil
import socket
import sys
import zipfile
from collections.abc import Sequence
from copy import deepcopy
from pathlib import Path
from pprint import pformat
from typing import Any

import numpy as np
import torch as th
import yaml
from huggingface_hub import HfApi
from huggingface_hub.repocard import metadata_eval_result, metadata_save
from rl_zoo3.utils import StoreDict, create_test_env, get_model_path, get_saved_hyperparams
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecEnv, VecVideoRecorder, unwrap_vec_normalize

import sb3_pcl
from sb3_pcl.zoo.register import register_algorithms

#: the top-level modules whose exceptions mean that the Hub could not be reached or refused the request
NETWORK_MODULES = ("httpx", "httpx2", "requests", "urllib3", "huggingface_hub")
#: where sb3_pcl's source is published (``Source`` of ``[project.urls]`` in ``pyproject.toml``): the model card installs
#: sb3_pcl from it, as the package is on no index
SOURCE = "https://github.com/sb3-pcl/sb3_pcl"


def model_card(
    algo: str, env_id: str, repo_id: str, mean_reward: float, std_reward: float, hyperparams: dict[str, Any], env_kwargs: dict
) -> str:
    """
    :param algo: the rl-zoo3 name of the algorithm (a key of :data:`sb3_pcl.ALGOS`)
    :param env_id: the environment ID
    :param repo_id: ``<organization>/<repository>``
    :param mean_reward: mean evaluation return
    :param std_reward: standard deviation of the evaluation returns
    :param hyperparams: the hyperparameters the model was trained with
    :param env_kwargs: the keyword arguments of the environment
    :return: the model card (Markdown, without the metadata header)
    """
    class_name = sb3_pcl.ALGOS[algo].__name__
    source = SOURCE
    checkout = source.rstrip("/").rsplit("/", 1)[-1]
    organization = repo_id.split("/")[0]
    filename = f"{algo}-{env_id}.zip"
    card = f"""
# **{class_name}** agent playing **{env_id}**

A **{class_name}** agent trained on **{env_id}** with [sb3_pcl]({source}) {sb3_pcl.__version__},
a plugin of the [Stable-Baselines3](https://github.com/DLR-RM/stable-baselines3) library, and the
[RL Zoo](https://github.com/DLR-RM/rl-baselines3-zoo). Mean evaluation return: {mean_reward:.2f} +/- {std_reward:.2f}.

## Usage (Python)

sb3_pcl is on no package index: install it from its source.

```bash
git clone {source} && pip install torch==2.13.0 && pip install -e "./{checkout}" huggingface_sb3
```

Run it with the environment variable `TRUST_REMOTE_CODE=True`: `huggingface_sb3` refuses to download a model
without it, as the file holds pickled objects (trust this repository first).

```python
from huggingface_sb3 import load_from_hub

from sb3_pcl import {class_name}

checkpoint = load_from_hub("{repo_id}", "{filename}")
model = {class_name}.load(checkpoint)
```

## Usage (with the RL Zoo)

`{class_name}` is not one of rl-zoo3's algorithms: run the zoo's commands through `sb3_pcl.zoo`, which registers it.

```bash
pip install -e "./{checkout}[zoo]"
TRUST_REMOTE_CODE=True python -m sb3_pcl.zoo load_from_hub --algo {algo} --env {env_id} -orga {organization} -f logs/
python -m sb3_pcl.zoo enjoy --algo {algo} --env {env_id} -f logs/
```

## Training (with the RL Zoo)

```bash
python -m sb3_pcl.zoo train --algo {algo} --env {env_id} -f logs/
python -m sb3_pcl.zoo push_to_hub --algo {algo} --env {env_id} -f logs/ -orga {organization}
```

## Hyperparameters

```python
{pformat(hyperparams)}
```
"""
    if env_kwargs:
        card += f"""
## Environment arguments

```python
{pformat(env_kwargs)}
```
"""
    return card


def card_metadata(algo: str, env_id: str, mean_reward: float, std_reward: float) -> dict[str, Any]:
    """
    :param algo: the rl-zoo3 name of the algorithm
    :param env_id: the environment ID
    :param mean_reward: mean evaluation return
    :param std_reward: standard deviation of the evaluation returns
    :return: the model card's metadata: the library, tags and the evaluation result the Hub shows
    """
    tags = [env_id, "deep-reinforcement-learning", "reinforcement-learning", "stable-baselines3", "sb3_pcl"]
    result = metadata_eval_result(
        model_pretty_name=sb3_pcl.ALGOS[algo].__name__,
        task_pretty_name="reinforcement-learning",
        task_id="reinforcement-learning",
        metrics_pretty_name="mean_reward",
        metrics_id="mean_reward",
        metrics_value=f"{mean_reward:.2f} +/- {std_reward:.2f}",
        dataset_pretty_name=env_id,
        dataset_id=env_id,
    )
    return {"library_name": "stable-baselines3", "tags": tags, **result}


def record_replay(model: BaseAlgorithm, env: VecEnv, video_length: int, deterministic: bool, folder: Path) -> Path:
    """
    :param model: the agent
    :param env: an env that renders ``rgb_array`` frames
    :param video_length: steps to record
    :param deterministic: use deterministic actions
    :param folder: where ``replay.mp4`` is written
    :return: the path of ``replay.mp4``
    """
    recording = folder / "video_tmp"
    recorder = VecVideoRecorder(env, str(recording), lambda step: step == 0, video_length=video_length, name_prefix="replay")
    observations = recorder.reset()
    for _ in range(video_length + 1):
        actions, _ = model.predict(observations, deterministic=deterministic)  # type: ignore[arg-type]
        observations, _, _, _ = recorder.step(actions)
    recorder.close()  # also closes env
    videos = sorted(recording.glob("*.mp4"))
    if not videos:
        raise RuntimeError(f"no video was recorded in {recording}")
    target = folder / "replay.mp4"
    shutil.move(videos[0], target)
    shutil.rmtree(recording)
    return target


def package_to_hub(
    model: BaseAlgorithm,
    algo: str,
    env_id: str,
    log_path: Path,
    hyperparams: dict[str, Any],
    env_kwargs: dict[str, Any],
    eval_env: VecEnv,
    repo_id: str,
    commit_message: str = "Initial commit",
    deterministic: bool = True,
    n_eval_episodes: int = 10,
    token: str | None = None,
    local_repo_path: str | Path = "hub",
    video_length: int = 1000,
    generate_video: bool = False,
) -> str:
    """
    Evaluate the model, write the repository folder (model, configuration, logs, results, model card) and upload it.

    :param model: the trained agent
    :param algo: its rl-zoo3 name (a key of :data:`sb3_pcl.ALGOS`)
    :param env_id: the environment ID
    :param log_path: the rl-zoo3 run folder (``<folder>/<algo>/<env_id>_<n>``)
    :param hyperparams: the hyperparameters of the run (its ``config.yml``)
    :param env_kwargs: the keyword arguments of the environment
    :param eval_env: the evaluation env (VecNormalize statistics, if any, are saved with the model)
    :param repo_id: ``<organization>/<repository>`` on the Hub
    :param commit_message: the Hub commit message
    :param deterministic: evaluate (and record) with deterministic actions
    :param n_eval_episodes: evaluation episodes
    :param token: a Hub token (default: the logged-in user's)
    :param local_repo_path: the folder that holds the local copy of the repository
    :param video_length: steps of the replay video
    :param generate_video: record ``replay.mp4`` (``eval_env`` must render ``rgb_array`` frames)
    :return: the repository URL
    """
    if algo not in sb3_pcl.ALGOS:
        raise ValueError(f"algo must be one of sb3_pcl's algorithms {sorted(sb3_pcl.ALGOS)}, got {algo!r}")
    if n_eval_episodes < 1:
        raise ValueError(f"n_eval_episodes must be positive, got {n_eval_episodes}")
    api = HfApi(token=token)
    repo_url = str(api.create_repo(repo_id=repo_id, private=False, exist_ok=True))
    repo_folder = Path(local_repo_path) / repo_id.split("/")[-1]
    api.snapshot_download(repo_id=repo_id, local_dir=repo_folder)
    repo_folder.mkdir(parents=True, exist_ok=True)
    attributes = repo_folder / ".gitattributes"
    lines = attributes.read_text().splitlines() if attributes.is_file() else []
    if not any("*.mp4" in line for line in lines):
        attributes.write_text("\n".join([*lines, "*.mp4 filter=lfs diff=lfs merge=lfs -text", ""]))

    model_name = f"{algo}-{env_id}"
    model.save(repo_folder / model_name)
    with zipfile.ZipFile(repo_folder / f"{model_name}.zip") as archive:  # the Hub shows the model's files
        archive.extractall(repo_folder / model_name)
    vec_normalize = unwrap_vec_normalize(eval_env)
    if vec_normalize is not None:  # SB3's format, which rl-zoo3's enjoy reads
        vec_normalize.save(str(repo_folder / "vec_normalize.pkl"))
        vec_normalize.training, vec_normalize.norm_reward = False, False
    for name in ("args.yml", "config.yml"):
        if (log_path / env_id / name).is_file():
            shutil.copy(log_path / env_id / name, repo_folder / name)
    (repo_folder / "env_kwargs.yml").write_text(yaml.safe_dump(env_kwargs))
    with zipfile.ZipFile(repo_folder / "train_eval_metrics.zip", "w") as archive:
        for path in sorted([*log_path.glob("evaluations.npz"), *log_path.glob("*.csv")]):
            archive.write(path, arcname=path.name)

    returns, _ = evaluate_policy(model, eval_env, n_eval_episodes, deterministic=deterministic, return_episode_rewards=True)
    mean_reward, std_reward = float(np.mean(returns)), float(np.std(returns))
    results = {
        "mean_reward": mean_reward,
        "std_reward": std_reward,
        "is_deterministic": deterministic,
        "n_eval_episodes": n_eval_episodes,
        "sb3_pcl_version": sb3_pcl.__version__,
    }
    (repo_folder / "results.json").write_text(json.dumps(results, indent=2))
    if generate_video:
        record_replay(model, eval_env, video_length, deterministic, repo_folder)

    card = model_card(algo, env_id, repo_id, mean_reward, std_reward, hyperparams, env_kwargs)
    readme = repo_folder / "README.md"
    readme.write_text(card, encoding="utf-8")
    metadata_save(readme, card_metadata(algo, env_id, mean_reward, std_reward))
    api.upload_folder(repo_id=repo_id, folder_path=repo_folder, commit_message=commit_message)
    print(f"Pushed {model_name} to {repo_url}")
    return repo_url


def hub_error(error: BaseException) -> BaseException | None:
    """
    :param error: an exception raised while packaging or uploading
    :return: the exception of its chain that says the Hub could not be reached or refused the request, else ``None``
    """
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (ConnectionError, TimeoutError, socket.gaierror)):
            return seen
        if type(seen).__module__.split(".")[0] in NETWORK_MODULES:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """
    :param argv: the command-line arguments
    :return: the options (those of ``python -m rl_zoo3.push_to_hub``, plus ``--token`` and ``--n-eval-episodes``)
    """
    parser = argparse.ArgumentParser(prog="python -m sb3_pcl.zoo.push_to_hub", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--env", help="environment ID", type=str, required=True)
    parser.add_argument("-f", "--folder", help="log folder", type=str, required=True)
    parser.add_argument("--algo", help="one of sb3_pcl's algorithms", type=str, required=True, choices=sorted(sb3_pcl.ALGOS))
    parser.add_argument("-n", "--n-timesteps", help="steps of the replay video", default=1000, type=int)
    parser.add_argument("--num-threads", help="torch threads (-1: torch's default)", default=1, type=int)
    parser.add_argument("--n-envs", help="number of environments", default=1, type=int)
    parser.add_argument("--exp-id", help="experiment ID (default: 0: latest, -1: no exp folder)", default=0, type=int)
    parser.add_argument("--no-render", action="store_true", default=False, help="no replay video")
    parser.add_argument("--deterministic", action="store_true", default=False, help="deterministic actions (the default)")
    parser.add_argument("--stochastic", action="store_true", default=False, help="evaluate and record stochastic actions")
    parser.add_argument("--device", help="torch device (cpu, cuda, ...)", default="auto", type=str)
    parser.add_argument("--load-best", action="store_true", default=False, help="push the best model")
    parser.add_argument("--load-checkpoint", type=int, help="push the checkpoint of this many steps")
    parser.add_argument("--load-last-checkpoint", action="store_true", default=False, help="push the last checkpoint")
    parser.add_argument("--seed", help="random generator seed", type=int, default=0)
    parser.add_argument("--env-kwargs", type=str, nargs="+", action=StoreDict, help="keyword arguments of the env")
    parser.add_argument("--n-eval-episodes", help="evaluation episodes", default=10, type=int)
    parser.add_argument("-orga", "--organization", help="Hugging Face user or organization", type=str, required=True)
    parser.add_argument("-name", "--repo-name", help="repository name (default: <algo>-<env>)", type=str)
    parser.add_argument("-m", "--commit-message", help="commit message", default="Initial commit", type=str)
    parser.add_argument("--token", help="Hugging Face token (default: the logged-in user's)", default=None, type=str)
    parser.add_argument("--local-repo-path", help="folder of the local copy (default: hub)", default="hub", type=str)
    args = parser.parse_args(list(argv))
    for option in ("n_timesteps", "n_envs", "n_eval_episodes"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be positive, got {getattr(args, option)}")
    return args


def main(argv: Sequence[str] | None = None) -> str:
    """
    Load the model of an rl-zoo3 run, then evaluate, package and upload it (:func:`package_to_hub`).

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: the repository URL
    """
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    register_algorithms()
    _, model_path, log_path = get_model_path(
        args.exp_id, args.folder, args.algo, args.env, args.load_best, args.load_checkpoint, args.load_last_checkpoint
    )
    print(f"Loading {model_path}")
    set_random_seed(args.seed)
    if args.num_threads > 0:
        th.set_num_threads(args.num_threads)
    hyperparams, stats_path = get_saved_hyperparams(os.path.join(log_path, args.env), test_mode=True)
    env_kwargs: dict[str, Any] = {}
    args_path = Path(log_path, args.env, "args.yml")
    if args_path.is_file():
        saved = yaml.load(args_path.read_text(), Loader=yaml.UnsafeLoader)  # rl-zoo3 writes it with python tags
        env_kwargs = dict(saved.get("env_kwargs") or {})
    if not args.no_render:
        env_kwargs["render_mode"] = "rgb_array"
    env_kwargs.update(args.env_kwargs or {})
    eval_env = create_test_env(
        args.env,
        n_envs=args.n_envs,
        stats_path=stats_path,
        seed=args.seed,
        log_dir=None,
        should_render=not args.no_render,
        hyperparams=deepcopy(hyperparams),
        env_kwargs=env_kwargs,
    )
    algo_class = sb3_pcl.ALGOS[args.algo]
    model = algo_class.load(model_path, env=eval_env, device=args.device, seed=args.seed)
    try:
        return package_to_hub(
            model,
            args.algo,
            args.env,
            Path(log_path),
            hyperparams,
            env_kwargs,
            eval_env,
            repo_id=f"{args.organization}/{args.repo_name or f'{args.algo}-{args.env}'}",
            commit_message=args.commit_message,
            deterministic=not args.stochastic,
            n_eval_episodes=args.n_eval_episodes,
            token=args.token,
            local_repo_path=args.local_repo_path,
            video_length=args.n_timesteps,
            generate_video=not args.no_render,
        )
    except Exception as error:  # a network or Hub failure is one line, not a traceback
        failure = hub_error(error)
        if failure is None:
            raise
        message = f"{type(failure).__name__}: {failure}".splitlines()[0]
        raise SystemExit(
            f"push_to_hub: the Hugging Face Hub could not be reached or refused the request ({message})"
        ) from None


if __name__ == "__main__":
    main()
