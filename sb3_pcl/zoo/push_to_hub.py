"""
Package a trained model for the Hugging Face Hub: ``python -m sb3_pcl.zoo push_to_hub --algo pcl --env CartPole-v1
-f logs -orga <user or organization>``.

The packaging is rl-zoo3's ``package_to_hub``: it uploads the model (zip and unzipped), ``config.yml`` /
``args.yml`` / ``env_kwargs.yml``, VecNormalize statistics, the training and evaluation logs
(``train_eval_metrics.zip``), ``results.json`` of a fresh evaluation and a replay video (unless ``--no-render``, or
without ffmpeg on ``PATH``, which encodes it). Only
the model card is ours (:func:`model_card`): rl-zoo3's tells users to ``pip install rl_zoo3`` and run
``rl_zoo3.enjoy``, which knows none of our algorithms; ours says how to install sb3_pcl from its source (it is on no
package index) and which class loads the model. Log in first (``hf auth login``, or set ``HF_TOKEN``); a Hub that
cannot be reached ends the command with one line naming it.

rl-zoo3 brings ``huggingface_sb3`` (the ``zoo`` extra); the ``hub`` extra pins the release this module is tested with.
"""

import argparse
import functools
import importlib
import os
import shutil
import socket
import sys
from collections.abc import Sequence
from copy import deepcopy
from pathlib import Path
from pprint import pformat
from typing import Any

import torch as th
import yaml
from huggingface_hub import constants
from huggingface_sb3 import EnvironmentName, ModelName, ModelRepoId
from rl_zoo3.utils import StoreDict, create_test_env, get_model_path, get_saved_hyperparams
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecEnv

import sb3_pcl
from sb3_pcl.zoo.register import register_algorithms

# rl-zoo3 2.9.2 imports generate_metadata from huggingface_sb3.push_to_hub, which sb3-team-hf-integration 3.2 (the
# release of huggingface_sb3 it requires) renamed _generate_metadata, returning a ModelCardData instead of a dict: give
# the module that name back, so that rl_zoo3.push_to_hub can be imported (the attribute of the package of that name is
# the function push_to_hub, hence import_module)
_huggingface_push = importlib.import_module("huggingface_sb3.push_to_hub")
if not hasattr(_huggingface_push, "generate_metadata"):

    def _generate_metadata(model_name: str, env_id: str, mean_reward: float, std_reward: float) -> dict[str, Any]:
        return _huggingface_push._generate_metadata(model_name, env_id, mean_reward, std_reward).to_dict()

    _huggingface_push.generate_metadata = _generate_metadata  # type: ignore[attr-defined]

import rl_zoo3.push_to_hub as zoo_push  # noqa: E402

#: the top-level modules whose exceptions mean that the Hub could not be reached or refused the request
NETWORK_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3", "huggingface_hub")
#: where sb3_pcl's source is published (``Source`` of ``[project.urls]`` in ``pyproject.toml``): the model card installs
#: sb3_pcl from it, as the package is on no index
SOURCE = "https://github.com/sb3-pcl/sb3_pcl"


def model_card(
    algo_name: str,
    algo_class_name: str,
    organization: str,
    env_id: str,
    mean_reward: float,
    std_reward: float,
    hyperparams: dict[str, Any],
    env_kwargs: dict[str, Any],
    repo_id: str,
) -> tuple[str, dict[str, Any]]:
    """
    Our model card, in place of rl-zoo3's ``generate_model_card`` (same parameters, plus ``repo_id``).

    :param algo_name: the rl-zoo3 name of the algorithm (a key of :data:`sb3_pcl.ALGOS`)
    :param algo_class_name: the name of its class
    :param organization: the Hub user or organization
    :param env_id: the environment ID
    :param mean_reward: mean evaluation return
    :param std_reward: standard deviation of the evaluation returns
    :param hyperparams: the hyperparameters the model was trained with
    :param env_kwargs: the keyword arguments of the environment
    :param repo_id: ``<organization>/<repository>``
    :return: the model card (Markdown, without the metadata header) and its metadata (rl-zoo3's, tagged ``sb3_pcl``)
    """
    metadata = zoo_push.generate_metadata(algo_class_name, env_id, mean_reward, std_reward)
    metadata["tags"] = [*metadata["tags"], "sb3_pcl"]
    checkout = SOURCE.rstrip("/").rsplit("/", 1)[-1]
    filename = ModelName(algo_name, EnvironmentName(env_id)).filename
    card = f"""
# **{algo_class_name}** agent playing **{env_id}**

A **{algo_class_name}** agent trained on **{env_id}** with [sb3_pcl]({SOURCE}) {sb3_pcl.__version__},
a plugin of the [Stable-Baselines3](https://github.com/DLR-RM/stable-baselines3) library, and the
[RL Zoo](https://github.com/DLR-RM/rl-baselines3-zoo). Mean evaluation return: {mean_reward:.2f} +/- {std_reward:.2f}.

## Usage (Python)

sb3_pcl is on no package index: install it from its source.

```bash
git clone {SOURCE} && pip install torch==2.13.0 && pip install -e "./{checkout}[hub]"
```

Run it with the environment variable `TRUST_REMOTE_CODE=True`: `huggingface_sb3` refuses to download a model
without it, as the file holds pickled objects (trust this repository first).

```python
from huggingface_sb3 import load_from_hub

from sb3_pcl import {algo_class_name}

checkpoint = load_from_hub("{repo_id}", "{filename}")
model = {algo_class_name}.load(checkpoint)
```

## Usage (with the RL Zoo)

`{algo_class_name}` is not one of rl-zoo3's algorithms: run the zoo's commands through `sb3_pcl.zoo`, which registers
it.

```bash
TRUST_REMOTE_CODE=True python -m sb3_pcl.zoo load_from_hub --algo {algo_name} --env {env_id} -orga {organization} -f logs/
python -m sb3_pcl.zoo enjoy --algo {algo_name} --env {env_id} -f logs/
```

## Training (with the RL Zoo)

```bash
python -m sb3_pcl.zoo train --algo {algo_name} --env {env_id} -f logs/
python -m sb3_pcl.zoo push_to_hub --algo {algo_name} --env {env_id} -f logs/ -orga {organization}
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
    return card, metadata


def package_to_hub(
    model: BaseAlgorithm,
    algo: str,
    env_id: str,
    log_path: Path,
    hyperparams: dict[str, Any],
    env_kwargs: dict[str, Any],
    eval_env: VecEnv,
    repo_id: str,
    **options: Any,
) -> str:
    """
    rl-zoo3's ``package_to_hub`` with our model card: evaluate the model, write the repository folder and upload it.

    :param model: the trained agent
    :param algo: its rl-zoo3 name (a key of :data:`sb3_pcl.ALGOS`)
    :param env_id: the environment ID
    :param log_path: the rl-zoo3 run folder (``<folder>/<algo>/<env_id>_<n>``, with ``<env_id>/config.yml`` and
        ``args.yml``)
    :param hyperparams: the hyperparameters of the run (its ``config.yml``)
    :param env_kwargs: the keyword arguments of the environment
    :param eval_env: the evaluation env (VecNormalize statistics, if any, are saved with the model)
    :param repo_id: ``<organization>/<repository>`` on the Hub
    :param options: the other keyword arguments of ``rl_zoo3.push_to_hub.package_to_hub`` (``commit_message``,
        ``is_deterministic``, ``n_eval_episodes``, ``local_repo_path``, ``video_length``, ``generate_video``)
    :return: the repository URL
    """
    if algo not in sb3_pcl.ALGOS:
        raise ValueError(f"algo must be one of sb3_pcl's algorithms {sorted(sb3_pcl.ALGOS)}, got {algo!r}")
    organization, _, repo_name = repo_id.partition("/")
    if not organization or not repo_name or "/" in repo_name:
        raise ValueError(f"repo_id must be <organization>/<repository>, got {repo_id!r}")
    env_name = EnvironmentName(env_id)
    zoo_card = zoo_push.generate_model_card
    zoo_push.generate_model_card = functools.partial(model_card, repo_id=repo_id)  # rl-zoo3 calls it by this name
    try:
        url = zoo_push.package_to_hub(
            model,
            ModelName(algo, env_name),
            algo,
            sb3_pcl.ALGOS[algo].__name__,
            Path(log_path),
            hyperparams,
            env_kwargs,
            env_name,
            eval_env,
            repo_id=ModelRepoId(organization, repo_name),
            **{"commit_message": "Initial commit", **options},
        )
    finally:
        zoo_push.generate_model_card = zoo_card
    return str(url)


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
    :return: the options (those of ``python -m rl_zoo3.push_to_hub``, plus ``--n-eval-episodes`` and
        ``--local-repo-path``)
    """
    parser = argparse.ArgumentParser(prog="python -m sb3_pcl.zoo push_to_hub", description=__doc__.strip().splitlines()[0])
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
    parser.add_argument("--local-repo-path", help="folder of the local copy (default: hub)", default="hub", type=str)
    args = parser.parse_args(list(argv))
    for option in ("n_timesteps", "n_envs", "n_eval_episodes"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be positive, got {getattr(args, option)}")
    return args


def main(argv: Sequence[str] | None = None) -> str:
    """
    Load the model of an rl-zoo3 run (as ``python -m rl_zoo3.push_to_hub`` does), then evaluate, package and upload
    it (:func:`package_to_hub`).

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: the repository URL
    :raises SystemExit: with one line when the Hub cannot be reached or refuses the request
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
    # huggingface_sb3 encodes the replay with the ffmpeg command; without it, it would print a shell error and go on
    render = not args.no_render and shutil.which("ffmpeg") is not None
    if not args.no_render and not render:
        print("push_to_hub: no replay video: ffmpeg, which encodes it, is not on PATH (install it, or pass --no-render)")
    if render:
        env_kwargs["render_mode"] = "rgb_array"
    env_kwargs.update(args.env_kwargs or {})
    eval_env = create_test_env(
        args.env,
        n_envs=args.n_envs,
        stats_path=stats_path,
        seed=args.seed,
        log_dir=None,
        should_render=render,
        hyperparams=deepcopy(hyperparams),
        env_kwargs=env_kwargs,
    )
    model = sb3_pcl.ALGOS[args.algo].load(model_path, env=eval_env, device=args.device, seed=args.seed)
    repo_id = f"{args.organization}/{args.repo_name or ModelName(args.algo, EnvironmentName(args.env))}"
    try:
        return package_to_hub(
            model,
            args.algo,
            args.env,
            Path(log_path),
            hyperparams,
            env_kwargs,
            eval_env,
            repo_id,
            commit_message=args.commit_message,
            is_deterministic=not args.stochastic,
            n_eval_episodes=args.n_eval_episodes,
            local_repo_path=args.local_repo_path,
            video_length=args.n_timesteps,
            generate_video=render,
        )
    except Exception as error:  # a network or Hub failure is one line, not a traceback
        failure = hub_error(error)
        if failure is None:
            raise
        message = f"{type(failure).__name__}: {failure}".splitlines()[0]
        hub = f"the Hugging Face Hub at {constants.ENDPOINT}"
        raise SystemExit(f"push_to_hub: {hub} could not be reached or refused the request ({message})") from None


if __name__ == "__main__":
    main()
