"""The policy aliases of every class (image observations through SB3's NatureCNN), and the refusal of action noise."""

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.noise import NormalActionNoise

import sb3_pcl
from sb3_pcl import PCL, UREX, RecurrentPCL, RecurrentTrustPCL, Reinforce, TrustPCL
from sb3_pcl.common.recurrent import CnnLstmPolicy

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
        (Reinforce, "CnnLstmPolicy", EPISODIC),
        (UREX, "CnnLstmPolicy", EPISODIC),
        (RecurrentPCL, "CnnLstmPolicy", REPLAY),
        (RecurrentTrustPCL, "CnnLstmPolicy", REPLAY),
    ],
)
def test_cnn_aliases_train_save_load_and_predict(algo_class, alias, kwargs, tmp_path):
    env = image_env()
    policy_kwargs = {"features_extractor_kwargs": {"features_dim": 16}}
    model = algo_class(alias, env, seed=0, policy_kwargs=policy_kwargs, **kwargs)
    assert type(model.policy.features_extractor).__name__ == "NatureCNN"
    if alias == "CnnLstmPolicy":
        assert isinstance(model.policy, CnnLstmPolicy)
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
        assert {"CnnPolicy", "CnnLstmPolicy"} & set(algo_class.policy_aliases), name


@pytest.mark.parametrize("algo_class", list(sb3_pcl.ALGOS.values()))
def test_action_noise_is_refused_naming_the_argument(algo_class):
    policy = "MlpLstmPolicy" if "MlpPolicy" not in algo_class.policy_aliases else "MlpPolicy"
    noise = NormalActionNoise(mean=np.zeros(1), sigma=0.1 * np.ones(1))
    with pytest.raises(ValueError, match=rf"action_noise must be None, got NormalActionNoise.*{algo_class.__name__} explores"):
        algo_class(policy, "Pendulum-v1", action_noise=noise)
    assert algo_class(policy, "Pendulum-v1", action_noise=None, _init_setup_model=False).env is not None
