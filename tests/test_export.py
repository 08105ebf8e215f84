"""ONNX export of the feed-forward policies (docs/export.md): the ONNX outputs match the torch policy's."""

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv

from sb3_pcl import PCL, UREX, RecurrentPCL, Reinforce, TrustPCL
from sb3_pcl.common.export import OnnxablePolicy, export_onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def image_env(n_envs: int = 1):
    """:return: 36x36 one-channel image envs (channel last: SB3 transposes them for the CNN)"""
    return make_vec_env(lambda: FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True), n_envs=n_envs)


SMALL_CNN = {"features_extractor_kwargs": {"features_dim": 32}}
CASES = {
    "pcl_mlp_box": lambda: PCL("MlpPolicy", "Pendulum-v1", seed=0, learning_starts=50, batch_size=4),
    "pcl_gsde_squashed": lambda: PCL(
        "MlpPolicy", "Pendulum-v1", seed=0, use_sde=True, policy_kwargs={"squash_output": True}, learning_starts=50
    ),
    "pcl_unified": lambda: PCL("UnifiedMlpPolicy", "CartPole-v1", seed=0, learning_starts=50, batch_size=4),
    "trust_pcl_cnn": lambda: TrustPCL(
        "CnnPolicy", image_env(), seed=0, learning_starts=50, batch_size=4, policy_kwargs=SMALL_CNN
    ),
    "reinforce_mlp": lambda: Reinforce("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), seed=0, max_steps=50),
    "urex_cnn": lambda: UREX(
        "CnnPolicy", image_env(2), num_samples=2, max_steps=20, check_seeding=False, policy_kwargs=SMALL_CNN
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_onnx_outputs_match_the_torch_policy(case, tmp_path):
    model = CASES[case]()
    model.learn(100)  # trained parameters, not only the initial ones
    path = export_onnx(model, tmp_path / f"{case}.onnx")
    onnx.checker.check_model(onnx.load(str(path)))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["observation"]
    assert [o.name for o in session.get_outputs()] == ["action", "value"]
    observations = np.stack([model.observation_space.sample() for _ in range(7)]).astype(np.float32)
    actions, values = session.run(None, {"observation": observations})
    expected_actions, _ = model.predict(observations, deterministic=True)
    with th.no_grad():
        expected_values = model.policy.predict_values(th.as_tensor(observations)).numpy()
    assert actions.shape[0] == values.shape[0] == 7  # the batch size is free (exported with 1)
    np.testing.assert_allclose(actions.reshape(expected_actions.shape), expected_actions, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values, expected_values, rtol=1e-5, atol=1e-5)


def test_the_unified_policy_exports_only_through_the_wrapper(tmp_path):
    """Its temperature is extra state in the state_dict, which the ONNX exporter cannot read: the wrapper leaves it out."""
    model = PCL("UnifiedMlpPolicy", "CartPole-v1", seed=0)
    wrapper = OnnxablePolicy(model.policy)
    assert all(isinstance(value, th.Tensor) for value in wrapper.state_dict().values())
    assert "_extra_state" in "".join(model.policy.state_dict())


def test_recurrent_policies_are_refused(tmp_path):
    model = RecurrentPCL("MlpPrevActionLstmPolicy", "CartPole-v1")
    with pytest.raises(ValueError, match="MlpPrevActionLstmPolicy is recurrent"):
        export_onnx(model, tmp_path / "lstm.onnx")
