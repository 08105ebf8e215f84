"""
Seeded golden runs that pin the algorithms' numbers through refactors (``tests/test_golden.py``).

Each run trains a few hundred steps on the CPU with a fixed seed and one torch thread, and returns an
:class:`Outcome`: a digest of the final policy parameters and of every logged loss (the ``train/*loss*`` values at each
log dump), and the numbers themselves in float64 (summaries of the parameters, every loss). A digest changes when any
bit changes, and differs between kinds of CPU; the numbers are compared within a tolerance on any CPU
(``tests/test_golden.py``). ``python tests/golden_runs.py`` prints the digests of the current code on this CPU;
``python tests/golden_runs.py --record-values`` rewrites :data:`VALUES_FILE` from this CPU's runs.
"""

import contextlib
import hashlib
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from pcl_testing import FAST as PCL_FAST
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import KVWriter, Logger

import sb3_pcl  # noqa: F401  (registers the algorithmic tasks)
from sb3_pcl import PCL, RecurrentPCL, RecurrentTrustPCL, RecurrentUREX, Reinforce, TrustPCL
from sb3_pcl.envs import ExpertPathsCallback, SharedCurriculum
from sb3_pcl.hyperparams_files import load_hyperparams


class _LossRecorder(KVWriter):
    """Keeps every logged ``*loss*`` value (key and value) in dump order."""

    def __init__(self) -> None:
        self.records: list[tuple[str, float]] = []

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, Any], step: int = 0) -> None:
        for key in sorted(key_values):
            if "loss" in key:
                self.records.append((key, float(key_values[key])))

    def close(self) -> None:
        pass


#: the float64 numbers of every golden run as recorded on one CPU (``--record-values``), compared within a tolerance
VALUES_FILE = Path(__file__).with_name("golden_values.json")
#: fixed random directions the parameters are projected on (one draw per parameter count, seeded)
N_PROJECTIONS = 3


@dataclass(frozen=True)
class Outcome:
    """What a golden run ends with.

    :param digests: ``params`` and ``losses``: the first 16 hex digits of the sha256 of the bytes of each (float64)
    :param values: ``params``: the parameters' sum, their Euclidean norm and their projections on
        :data:`N_PROJECTIONS` fixed random directions; each logged loss key (``train/loss``, ...): its values in log
        order
    """

    digests: dict[str, str]
    values: dict[str, list[float]]


def _outcome(model: BaseAlgorithm, recorder: _LossRecorder) -> Outcome:
    assert recorder.records, "the run logged no loss"
    params = th.cat([p.detach().reshape(-1).double() for p in model.policy.parameters()]).cpu().numpy()
    losses = np.array([value for _, value in recorder.records], dtype=np.float64)
    directions = np.random.default_rng(0).standard_normal((N_PROJECTIONS, params.size))
    values = {"params": [float(params.sum()), float(np.linalg.norm(params)), *map(float, directions @ params)]}
    for key, value in recorder.records:
        values.setdefault(key, []).append(value)
    return Outcome(
        digests={
            "params": hashlib.sha256(params.tobytes()).hexdigest()[:16],
            "losses": hashlib.sha256(losses.tobytes()).hexdigest()[:16],
        },
        values=values,
    )


def _train(model: BaseAlgorithm, steps: int, **learn_kwargs: Any) -> _LossRecorder:
    recorder = _LossRecorder()
    model.set_logger(Logger(folder=None, output_formats=[recorder]))
    model.learn(steps, log_interval=1, **learn_kwargs)
    return recorder


#: the shared fast settings of the PCL tests, seeded (a change to them shows here as changed digests)
FAST: dict[str, Any] = {**PCL_FAST, "seed": 0}


def _off_policy(cls: type, policy: str, env_id: str, steps: int = 400, n_envs: int = 2, **kwargs: Any) -> Outcome:
    env = make_vec_env(env_id, n_envs=n_envs, seed=0)
    model = cls(policy, env, **{**FAST, **kwargs})
    return _outcome(model, _train(model, steps))


def _pcl_discrete() -> Outcome:
    return _off_policy(PCL, "MlpPolicy", "CartPole-v1")


def _pcl_box() -> Outcome:
    return _off_policy(PCL, "MlpPolicy", "Pendulum-v1", clip_adv=1.0)


def _pcl_replay_options() -> Outcome:
    return _off_policy(
        PCL,
        "MlpPolicy",
        "CartPole-v1",
        sample_from="target",
        use_online_batch=True,
        use_target_values=True,
        start_windows=False,
        gradient_steps=2,
        replay_buffer_kwargs={"alpha": 1.0, "priority": "return", "eviction": "rank"},
        buffer_size=300,
    )


def _pcl_unified() -> Outcome:
    return _off_policy(PCL, "UnifiedMlpPolicy", "CartPole-v1", relative_entropy_coef=0.01)


def _pcl_lstm() -> Outcome:
    return _off_policy(RecurrentPCL, "MlpPrevActionLstmPolicy", "CartPole-v1", steps=300)


def _pcl_unified_lstm() -> Outcome:
    return _off_policy(RecurrentPCL, "UnifiedMlpLstmPolicy", "CartPole-v1", steps=300)


def _value_fit(kind: str, **fit_kwargs: Any) -> Callable[[], Outcome]:
    def run() -> Outcome:
        return _off_policy(PCL, "MlpPolicy", "Pendulum-v1", batch_size=8, value_fit=kind, value_fit_kwargs=fit_kwargs)

    return run


def _trust_region(loss: str) -> Callable[[], Outcome]:
    def run() -> Outcome:
        return _off_policy(
            PCL,
            "MlpPolicy",
            "Pendulum-v1",
            value_fit="grad",
            policy_step="trust_region",
            policy_step_kwargs={"loss": loss, "target_kl": 0.01},
        )

    return run


def _pcl_gsde() -> Outcome:
    return _off_policy(
        PCL,
        "MlpPolicy",
        "Pendulum-v1",
        use_sde=True,
        sde_sample_freq=4,
        policy_kwargs={"squash_output": True, "log_std_init": -2.0},
    )


def _trust_pcl() -> Outcome:
    return _off_policy(TrustPCL, "MlpPolicy", "CartPole-v1", steps=600, n_envs=4, max_divergence=0.01, lambda_window=10)


def _trust_pcl_lstm() -> Outcome:
    return _off_policy(RecurrentTrustPCL, "MlpPrevActionLstmPolicy", "CartPole-v1", steps=300, relative_entropy_coef=0.1)


def _trust_pcl_2018() -> Outcome:
    """The ``mujoco-2018`` entry as shipped on HalfCheetah: 640 warm-up steps acted by the policy, then 36 iterations."""
    kwargs = load_hyperparams("trust_pcl", "mujoco-2018").kwargs
    model = TrustPCL(env=make_vec_env("HalfCheetah-v5", n_envs=1, seed=0), seed=0, **kwargs)
    return _outcome(model, _train(model, 1_000))


def _expert_seeding() -> Outcome:
    env = SharedCurriculum(make_vec_env("sb3_pcl/Copy-v0", n_envs=2, seed=0))
    model = PCL("MlpPolicy", env, **{**FAST, "buffer_size": 4_000})
    return _outcome(model, _train(model, 300, callback=ExpertPathsCallback(5)))


def _episodes(cls: type, policy: str, env_id: str, **kwargs: Any) -> Outcome:
    env = make_vec_env(env_id, n_envs=4, seed=0)
    if env_id.startswith("sb3_pcl/"):
        env = SharedCurriculum(env, first_episode_only=True)
    model = cls(policy, env, num_samples=2, max_steps=64, seed=0, **kwargs)
    return _outcome(model, _train(model, 600))


def _reinforce_discrete() -> Outcome:
    return _episodes(Reinforce, "MlpPolicy", "CartPole-v1")


def _reinforce_box() -> Outcome:
    return _episodes(Reinforce, "MlpPolicy", "Pendulum-v1", ent_coef=0.1)


def _urex_lstm() -> Outcome:
    return _episodes(RecurrentUREX, "MlpPrevActionLstmPolicy", "sb3_pcl/Copy-v0")


def _save_load(cls: type, policy: str, env_id: str, **kwargs: Any) -> Callable[[], Outcome]:
    def run() -> Outcome:
        env = make_vec_env(env_id, n_envs=2 if cls is PCL else 4, seed=0)
        model = cls(policy, env, seed=0, **kwargs)
        _train(model, 300)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.zip")
            model.save(path)
            loaded = cls.load(path, env=env)
        if cls is PCL:
            loaded.replay_buffer = model.replay_buffer  # the replay is not saved with the model
        loaded.set_random_seed(1)
        return _outcome(loaded, _train(loaded, 300, reset_num_timesteps=False))

    return run


#: every golden run by name
RUNS: dict[str, Callable[[], Outcome]] = {
    "pcl_discrete": _pcl_discrete,
    "pcl_box": _pcl_box,
    "pcl_replay_options": _pcl_replay_options,
    "pcl_unified": _pcl_unified,
    "pcl_lstm": _pcl_lstm,
    "pcl_unified_lstm": _pcl_unified_lstm,
    "pcl_value_fit_grad": _value_fit("grad", learning_rate=3e-3, gradient_steps=3, mix=0.5),
    "pcl_value_fit_best_fit": _value_fit("best_fit", reg_coef=1e-3),
    "pcl_value_fit_lbfgs": _value_fit("lbfgs", max_iter=3),
    "pcl_trust_region_consistency": _trust_region("consistency"),
    "pcl_trust_region_surrogate": _trust_region("surrogate"),
    "pcl_gsde": _pcl_gsde,
    "trust_pcl": _trust_pcl,
    "trust_pcl_lstm": _trust_pcl_lstm,
    "trust_pcl_2018": _trust_pcl_2018,
    "pcl_expert_seeding": _expert_seeding,
    "reinforce_discrete": _reinforce_discrete,
    "reinforce_box": _reinforce_box,
    "urex_lstm": _urex_lstm,
    "pcl_save_load": _save_load(PCL, "MlpPolicy", "CartPole-v1", **{k: v for k, v in FAST.items() if k != "seed"}),
    "reinforce_save_load": _save_load(Reinforce, "MlpPolicy", "CartPole-v1", num_samples=2, max_steps=64),
}


def cpu_numerics() -> str:
    """:return: This CPU's model and the vector instructions torch's kernels use here, which the digests depend on"""
    model = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError, StopIteration):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    return f"{model}, torch {th.backends.cpu.get_cpu_capability()}"


def run(name: str) -> Outcome:
    """
    :param name: a key of :data:`RUNS`
    :return: the run's digests, computed with one torch thread
    """
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    try:
        return RUNS[name]()
    finally:
        th.set_num_threads(n_threads)


def recorded_values() -> dict[str, dict[str, list[float]]]:
    """:return: the values of :data:`VALUES_FILE` by run name (``{}`` before any were recorded)"""
    if not VALUES_FILE.exists():
        return {}
    return json.loads(VALUES_FILE.read_text())["runs"]


def record_values(names: list[str]) -> None:
    """
    Run ``names`` and write their values into :data:`VALUES_FILE`, keeping those of the other runs.

    :param names: keys of :data:`RUNS`
    """
    unknown = sorted(set(names) - set(RUNS))
    if unknown:
        raise KeyError(f"no golden run named {unknown}; the runs: {sorted(RUNS)}")
    values = {**recorded_values(), **{name: run(name).values for name in names}}
    document = {"cpu": cpu_numerics(), "runs": {name: values[name] for name in sorted(values)}}
    VALUES_FILE.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {len(names)} runs into {VALUES_FILE} ({document['cpu']})")


if __name__ == "__main__":
    names = [arg for arg in sys.argv[1:] if arg != "--record-values"]
    if "--record-values" in sys.argv[1:]:
        record_values(names or list(RUNS))
        sys.exit()
    print(f'    "{cpu_numerics()}": {{', flush=True)
    for key in names or RUNS:
        digests = run(key).digests
        print(f'        "{key}": {{"params": "{digests["params"]}", "losses": "{digests["losses"]}"}},', flush=True)
    print("    },")
