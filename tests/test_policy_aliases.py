"""The policy aliases of every class (image observations through SB3's NatureCNN), and the refusal of action noise."""

import json
import zipfile

import numpy as np
import pytest
import torch as th
from sb3_contrib.ppo_recurrent.policies import MlpLstmPolicy as ContribMlpLstmPolicy
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.noise import NormalActionNoise

import sb3_pcl
from sb3_pcl import PCL, UREX, RecurrentPCL, RecurrentReinforce, RecurrentTrustPCL, RecurrentUREX, Reinforce, TrustPCL
from sb3_pcl.common import recurrent
from sb3_pcl.common.recurrent import CnnPrevActionLstmPolicy, MlpPrevActionLstmPolicy
from sb3_pcl.common.recurrent import policies as recurrent_policies

EPISODIC = {"num_samples": 2, "max_steps": 20, "check_seeding": False}  # FakeImageEnv's resets ignore their seed
REPLAY = {"learning_starts": 20, "batch_size": 2}


def image_env():
    """:return: two 36x36 one-channel image envs with 5 discrete actions (the smallest NatureCNN reads)"""
    return make_vec_env(lambda: FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True), n_envs=2)


@pytest.mark.parametrize(
    ("algo_class", "alias", "kwargs"),
    [
        (PCL, "CnnPolicy", REPLAY),
        (TrustPCL, "CnnPolicy", REPLAY),
        (Reinforce, "CnnPolicy", EPISODIC),
        (UREX, "CnnPolicy", EPISODIC),
        (RecurrentReinforce, "CnnPrevActionLstmPolicy", EPISODIC),
        (RecurrentUREX, "CnnPrevActionLstmPolicy", EPISODIC),
        (RecurrentPCL, "CnnPrevActionLstmPolicy", REPLAY),
        (RecurrentTrustPCL, "CnnPrevActionLstmPolicy", REPLAY),
    ],
)
def test_cnn_aliases_train_save_load_and_predict(algo_class, alias, kwargs, tmp_path):
    env = image_env()
    policy_kwargs = {"features_extractor_kwargs": {"features_dim": 16}}
    model = algo_class(alias, env, seed=0, policy_kwargs=policy_kwargs, **kwargs)
    assert type(model.policy.features_extractor).__name__ == "NatureCNN"
    if alias == "CnnPrevActionLstmPolicy":
        assert isinstance(model.policy, CnnPrevActionLstmPolicy)
    model.learn(60)
    model.save(tmp_path / "model")
    loaded = algo_class.load(tmp_path / "model", env=env)
    assert type(loaded.policy) is type(model.policy)
    observations = env.reset()
    actions, _ = loaded.predict(observations, deterministic=True)
    expected, _ = model.predict(observations, deterministic=True)
    assert actions.shape == (2,) and np.array_equal(actions, expected)


def test_every_class_has_a_cnn_alias():
    for name, algo_class in sb3_pcl.ALGOS.items():
        assert {"CnnPolicy", "CnnPrevActionLstmPolicy"} & set(algo_class.policy_aliases), name


@pytest.mark.parametrize("algo_class", list(sb3_pcl.ALGOS.values()))
def test_action_noise_is_refused_naming_the_argument(algo_class):
    policy = "MlpPrevActionLstmPolicy" if "MlpPolicy" not in algo_class.policy_aliases else "MlpPolicy"
    noise = NormalActionNoise(mean=np.zeros(1), sigma=0.1 * np.ones(1))
    with pytest.raises(ValueError, match=rf"action_noise must be None, got NormalActionNoise.*{algo_class.__name__} explores"):
        algo_class(policy, "Pendulum-v1", action_noise=noise)
    assert algo_class(policy, "Pendulum-v1", action_noise=None, _init_setup_model=False).env is not None


# The policy class as SB3 serialised it (cloudpickle, by reference: module and class name) before the LSTM policies
# had their own names: sb3_pcl.common.recurrent.policies.MlpLstmPolicy / CnnLstmPolicy, and, when
# sb3_pcl.common.recurrent was one module, sb3_pcl.common.recurrent.MlpLstmPolicy.
FORMER_POLICY_CLASSES = {
    "policies.MlpLstmPolicy": "gAWVNwAAAAAAAACMIXNiM19wY2wuY29tbW9uLnJlY3VycmVudC5wb2xpY2llc5SMDU1scExzdG1Qb2xpY3mUk5Qu",
    "policies.CnnLstmPolicy": "gAWVNwAAAAAAAACMIXNiM19wY2wuY29tbW9uLnJlY3VycmVudC5wb2xpY2llc5SMDUNubkxzdG1Qb2xpY3mUk5Qu",
    "recurrent.MlpLstmPolicy": "gAWVLgAAAAAAAACMGHNiM19wY2wuY29tbW9uLnJlY3VycmVudJSMDU1scExzdG1Qb2xpY3mUk5Qu",
}


def test_no_class_claims_sb3_contrib_s_lstm_policy_names():
    """sb3-contrib's "MlpLstmPolicy" / "CnnLstmPolicy" name its RecurrentActorCriticPolicy: no class of ours has these
    aliases, and our policies go by their own names (the recurrent classes take the former ones with a warning)."""
    for name, algo_class in sb3_pcl.ALGOS.items():
        aliases = algo_class.policy_aliases
        assert not {"MlpLstmPolicy", "CnnLstmPolicy"} & set(aliases), name
        if "MlpPrevActionLstmPolicy" in aliases:
            assert aliases["MlpPrevActionLstmPolicy"] is MlpPrevActionLstmPolicy, name
            assert aliases["CnnPrevActionLstmPolicy"] is CnnPrevActionLstmPolicy, name
    assert ContribMlpLstmPolicy.__name__ != MlpPrevActionLstmPolicy.__name__
    assert not issubclass(ContribMlpLstmPolicy, MlpPrevActionLstmPolicy)


@pytest.mark.parametrize("module", [recurrent, recurrent_policies], ids=lambda module: module.__name__)
def test_former_class_names_resolve_with_a_deprecation_warning(module):
    for former, current in [("MlpLstmPolicy", MlpPrevActionLstmPolicy), ("CnnLstmPolicy", CnnPrevActionLstmPolicy)]:
        with pytest.warns(DeprecationWarning, match=rf"{former} is now named {current.__name__}"):
            assert getattr(module, former) is current
    with pytest.raises(AttributeError, match="NoSuchPolicy"):
        module.NoSuchPolicy  # noqa: B018


@pytest.mark.parametrize("former", list(FORMER_POLICY_CLASSES))
def test_model_saved_under_a_former_class_name_loads(former, tmp_path):
    cnn = "Cnn" in former
    env = image_env() if cnn else make_vec_env("CartPole-v1", n_envs=2, seed=0)
    policy_kwargs = {"lstm_hidden_size": 8, **({"features_extractor_kwargs": {"features_dim": 16}} if cnn else {})}
    policy = "CnnPrevActionLstmPolicy" if cnn else "MlpPrevActionLstmPolicy"
    model = RecurrentUREX(policy, env, seed=0, policy_kwargs=policy_kwargs, **EPISODIC)
    model.save(tmp_path / "new.zip")
    with zipfile.ZipFile(tmp_path / "new.zip") as new, zipfile.ZipFile(tmp_path / "former.zip", "w") as rewritten:
        for name in new.namelist():
            content = new.read(name)
            if name == "data":
                data = json.loads(content)
                data["policy_class"][":serialized:"] = FORMER_POLICY_CLASSES[former]
                content = json.dumps(data).encode()
            rewritten.writestr(name, content)
    with pytest.warns(DeprecationWarning, match=rf"{former.split('.')[1]} is now named"):
        loaded = RecurrentUREX.load(tmp_path / "former.zip", env=env)
    assert type(loaded.policy) is type(model.policy)
    for key, value in model.policy.state_dict().items():
        th.testing.assert_close(loaded.policy.state_dict()[key], value)
    observations = env.reset()
    actions, states = loaded.predict(observations, deterministic=True)
    expected, expected_states = model.predict(observations, deterministic=True)
    assert np.array_equal(actions, expected) and len(states) == len(expected_states) == 3  # (h, c, previous action)
