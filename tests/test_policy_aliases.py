"""The policy aliases of every class (image observations through SB3's NatureCNN), the refusal of action noise, and the
recurrent and feed-forward policies each class takes (the former LSTM names deprecated)."""

import json
import zipfile

import numpy as np
import pytest
import torch as th
from sb3_contrib.ppo_recurrent.policies import MlpLstmPolicy as ContribMlpLstmPolicy
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.policies import ActorCriticPolicy

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


# ----------------------------------------------------------------------------------------------
# recurrent and feed-forward policies: each class takes its own kind, and the error names the class to use
# ----------------------------------------------------------------------------------------------

#: each recurrent class and the feed-forward class it adds an LSTM to
PAIRS = [(RecurrentPCL, PCL), (RecurrentTrustPCL, TrustPCL), (RecurrentReinforce, Reinforce), (RecurrentUREX, UREX)]
RECURRENT = [recurrent_class for recurrent_class, _ in PAIRS]
RECURRENT_POLICIES = [
    "MlpLstmPolicy",
    "CnnLstmPolicy",
    "MlpPrevActionLstmPolicy",
    "UnifiedMlpLstmPolicy",
    MlpPrevActionLstmPolicy,
    ContribMlpLstmPolicy,
]


@pytest.mark.parametrize(("recurrent_class", "feed_forward"), PAIRS, ids=[f.__name__ for _, f in PAIRS])
@pytest.mark.parametrize("policy", RECURRENT_POLICIES, ids=lambda policy: getattr(policy, "__name__", policy))
def test_a_feed_forward_class_refuses_a_recurrent_policy_naming_the_recurrent_class(
    recurrent_class: type, feed_forward: type, policy: str | type
) -> None:
    name = policy if isinstance(policy, str) else policy.__name__
    message = rf"^{name} is a recurrent policy: use sb3_pcl\.{recurrent_class.__name__}\('MlpPrevActionLstmPolicy'"
    with pytest.raises(ValueError, match=message):
        feed_forward(policy, "CartPole-v1")


@pytest.mark.parametrize("algo_class", RECURRENT, ids=[algo_class.__name__ for algo_class in RECURRENT])
@pytest.mark.parametrize("policy", ["MlpPolicy", ActorCriticPolicy], ids=["MlpPolicy", "ActorCriticPolicy"])
def test_a_recurrent_class_refuses_a_feed_forward_policy(algo_class: type, policy: str | type) -> None:
    if isinstance(policy, str):
        match = "Policy MlpPolicy unknown"  # the feed-forward names are no aliases of the recurrent classes
    elif issubclass(algo_class, PCL):
        match = rf"{algo_class.__name__} supports one recurrent policy, 'MlpPrevActionLstmPolicy'"
    else:
        match = rf"{algo_class.__name__} takes recurrent policies"
    with pytest.raises(ValueError, match=match):
        algo_class(policy, "CartPole-v1")


@pytest.mark.parametrize("algo_class", RECURRENT, ids=[algo_class.__name__ for algo_class in RECURRENT])
@pytest.mark.parametrize(
    ("former", "current"), [("MlpLstmPolicy", MlpPrevActionLstmPolicy), ("CnnLstmPolicy", CnnPrevActionLstmPolicy)]
)
def test_former_policy_names_work_with_a_deprecation_warning(algo_class: type, former: str, current: type) -> None:
    """sb3-contrib's names for its own policy named ours until 0.3: accepted for one release, with a warning."""
    message = rf"'{former}' is deprecated for {algo_class.__name__}.*use '{current.__name__}'"
    with pytest.warns(DeprecationWarning, match=message) as record:
        model = algo_class(former, "CartPole-v1", _init_setup_model=False)
    assert model.policy_class is current is algo_class.policy_aliases[current.__name__]
    assert former not in algo_class.policy_aliases
    deprecations = [warning for warning in record if warning.category is DeprecationWarning]
    assert [warning.filename for warning in deprecations] == [__file__]  # shown at the user's line
