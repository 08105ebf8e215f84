"""
The algorithms on a CUDA device: learn, save, load and predict on ``cuda`` (``python -m pytest -m gpu``).

Every test is marked ``gpu`` and skipped where CUDA is absent. Each trains a few hundred steps with the model on the
GPU, checks that its parameters (and the optimiser's state) live there, saves it, loads it onto the GPU again and
checks that the loaded model predicts the same actions and keeps learning.
"""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th
from pcl_testing import FAST
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from test_dict_observations import GoalLineEnv

from sb3_pcl import PCL, UREX, RecurrentPCL, RecurrentReinforce, RecurrentTrustPCL, RecurrentUREX, Reinforce, TrustPCL

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not th.cuda.is_available(), reason="needs a CUDA device"),
]

#: (class, policy, env id, keyword arguments)
CASES = [
    (PCL, "MlpPolicy", "CartPole-v1", FAST),
    (PCL, "MlpPolicy", "Pendulum-v1", {**FAST, "value_fit": "grad"}),
    (
        TrustPCL,
        "MlpPolicy",
        "Pendulum-v1",
        {**FAST, "value_fit": "grad", "max_divergence": None, "relative_entropy_coef": 1.0},
    ),
    (TrustPCL, "MlpPolicy", "CartPole-v1", FAST),
    (Reinforce, "MlpPolicy", "CartPole-v1", {"num_samples": 2, "max_steps": 30}),
    (UREX, "MlpPolicy", "CartPole-v1", {"num_samples": 2, "max_steps": 30}),
    (RecurrentPCL, "MlpPrevActionLstmPolicy", "CartPole-v1", {**FAST, "policy_kwargs": {"lstm_hidden_size": 16}}),
    (RecurrentTrustPCL, "MlpPrevActionLstmPolicy", "CartPole-v1", {**FAST, "policy_kwargs": {"lstm_hidden_size": 16}}),
    (
        RecurrentReinforce,
        "MlpPrevActionLstmPolicy",
        "CartPole-v1",
        {"num_samples": 2, "max_steps": 30, "policy_kwargs": {"lstm_hidden_size": 16}},
    ),
    (
        RecurrentUREX,
        "MlpPrevActionLstmPolicy",
        "CartPole-v1",
        {"num_samples": 2, "max_steps": 30, "policy_kwargs": {"lstm_hidden_size": 16}},
    ),
    (PCL, "MultiInputPolicy", GoalLineEnv, FAST),
    (Reinforce, "MultiInputPolicy", GoalLineEnv, {"num_samples": 2, "max_steps": 30}),
]


def _on_cuda(model: BaseAlgorithm) -> None:
    assert model.device.type == "cuda"
    for parameter in model.policy.parameters():
        assert parameter.device.type == "cuda"
    for state in model.policy.optimizer.state.values():
        for value in state.values():
            if isinstance(value, th.Tensor) and value.dim() > 0:
                assert value.device.type == "cuda"


def _predict(model: BaseAlgorithm, obs: np.ndarray, recurrent: bool) -> np.ndarray:
    if recurrent:
        return model.predict(obs, state=None, episode_start=np.ones(len(obs), dtype=bool), deterministic=True)[0]
    return model.predict(obs, deterministic=True)[0]


@pytest.mark.parametrize(("algo", "policy", "env_id", "kwargs"), CASES, ids=lambda case: getattr(case, "__name__", None))
def test_learn_save_load_predict_on_cuda(algo: type, policy: str, env_id: Any, kwargs: dict[str, Any], tmp_path: Path) -> None:
    env = make_vec_env(env_id, n_envs=4 if issubclass(algo, Reinforce) else 1, seed=0)
    model = algo(policy, env, seed=0, device="cuda", **kwargs)
    model.learn(300)
    assert model.num_timesteps >= 300
    assert model.logger.name_to_value["train/n_updates"] >= 1
    _on_cuda(model)
    if hasattr(model, "policy_target"):
        assert all(parameter.device.type == "cuda" for parameter in model.policy_target.parameters())

    recurrent = policy == "MlpPrevActionLstmPolicy"
    obs = env.reset()
    actions = _predict(model, obs, recurrent)
    model.save(tmp_path / "model")
    loaded = algo.load(tmp_path / "model", env=env, device="cuda")
    _on_cuda(loaded)
    np.testing.assert_array_equal(_predict(loaded, obs, recurrent), actions)
    for saved, restored in zip(model.policy.parameters(), loaded.policy.parameters(), strict=True):
        th.testing.assert_close(saved, restored)
    loaded.learn(100, reset_num_timesteps=False)
    _on_cuda(loaded)
