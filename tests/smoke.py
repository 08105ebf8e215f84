"""
Smoke test of an installed sb3_pcl: ``python tests/smoke.py [--outside DIR]``.

CI runs it in fresh virtual environments (the built wheel; the dependency floors of ``.ci/floors.txt``). It checks
that the installed package and its metadata agree on the version, that ``py.typed`` and the hyperparameter files are
shipped, then trains every algorithm for a few steps, saves, loads and predicts. With ``--outside DIR`` it also
checks that ``sb3_pcl`` was imported from an installed copy, not from the checkout ``DIR``.
"""

import argparse
import importlib.metadata
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch as th

import sb3_pcl
from sb3_pcl.hyperparams_files import hyperparams_dir


def check_install(outside: Path | None) -> None:
    """
    :param outside: a checkout that the package must not be imported from (``None``: not checked)
    :raises AssertionError: when the installed package is incomplete or comes from ``outside``
    """
    package_dir = Path(sb3_pcl.__file__).resolve().parent
    if outside is not None:
        assert outside.resolve() not in package_dir.parents, f"sb3_pcl was imported from the checkout: {package_dir}"
    metadata_version = importlib.metadata.version("sb3-pcl")
    assert metadata_version == sb3_pcl.__version__, f"metadata {metadata_version} != __version__ {sb3_pcl.__version__}"
    assert (package_dir / "py.typed").is_file(), "py.typed is not installed"
    shipped = sorted(path.stem for path in hyperparams_dir().glob("*.yml"))
    assert set(sb3_pcl.ALGOS) <= set(shipped), f"hyperparams files missing: {sorted(set(sb3_pcl.ALGOS) - set(shipped))}"
    print(f"sb3_pcl {sb3_pcl.__version__} from {package_dir}; hyperparams {shipped}")


def train_save_load() -> None:
    """Train each algorithm a few steps on CartPole-v1, save, load and predict."""
    small = {"net_arch": [16]}
    settings = {
        "pcl": {"policy": "MlpPolicy", "learning_starts": 50, "batch_size": 4, "policy_kwargs": small},
        "trust_pcl": {"policy": "MlpPolicy", "learning_starts": 50, "batch_size": 4, "policy_kwargs": small},
        "recurrent_pcl": {"policy": "MlpPrevActionLstmPolicy", "learning_starts": 50, "batch_size": 4},
        "recurrent_trust_pcl": {"policy": "MlpPrevActionLstmPolicy", "learning_starts": 50, "batch_size": 4},
        "reinforce": {"policy": "MlpPolicy", "num_samples": 2, "policy_kwargs": small},
        "urex": {"policy": "MlpPolicy", "num_samples": 2, "policy_kwargs": small},
        "recurrent_reinforce": {"policy": "MlpPrevActionLstmPolicy", "num_samples": 2},
        "recurrent_urex": {"policy": "MlpPrevActionLstmPolicy", "num_samples": 2},
    }
    from stable_baselines3.common.env_util import make_vec_env

    with tempfile.TemporaryDirectory() as folder:
        for name, kwargs in settings.items():
            algo_class = sb3_pcl.ALGOS[name]
            env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
            model = algo_class(env=env, seed=0, **kwargs)
            model.learn(300)
            path = Path(folder) / name
            model.save(path)
            loaded = algo_class.load(path, env=env)
            observations = env.reset()
            actions, _ = loaded.predict(observations, deterministic=True)
            assert actions.shape == (2,) and np.isin(actions, [0, 1]).all(), f"{name}: bad actions {actions}"
            print(f"{name}: trained {model.num_timesteps} steps, saved, loaded, predicted {actions.tolist()}")


def main() -> None:
    """Parse the command line and run the checks."""
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--outside", type=Path, default=None, help="fail if sb3_pcl is imported from this checkout")
    args = parser.parse_args()
    th.set_num_threads(1)
    check_install(args.outside)
    train_save_load()
    print(f"smoke test passed (Python {sys.version.split()[0]}, torch {th.__version__})")


if __name__ == "__main__":
    main()
