"""
RecurrentReinforce and RecurrentUREX: the same batch and bonus as the feed-forward classes, the recurrent state
carried by collection and evaluated by training, and the models that Reinforce / UREX saved with a recurrent policy
before these classes existed.

Their learn / save / load / predict round trip, signatures and policy names are tested with every class's, in
``test_save_load.py``, ``test_hyperparameters.py`` and ``test_policy_aliases.py``.
"""

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch as th
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.env_util import make_vec_env

from sb3_pcl import UREX, RecurrentReinforce, RecurrentUREX, Reinforce
from sb3_pcl.common.recurrent import MlpPrevActionLstmPolicy
from sb3_pcl.reinforce.episodes import collect_episode_batch

#: each recurrent class and the feed-forward class whose batch, bonus and loss it keeps
PAIRS = [(RecurrentReinforce, Reinforce), (RecurrentUREX, UREX)]
RECURRENT = [recurrent for recurrent, _ in PAIRS]
LSTM = {"lstm_hidden_size": 8}


def copy_env(n_envs: int = 4):
    return make_vec_env("sb3_pcl/Copy-v0", n_envs=n_envs, seed=0)


@pytest.mark.parametrize(("recurrent", "feed_forward"), PAIRS)
def test_same_batch_and_bonus_as_the_feed_forward_class(recurrent, feed_forward):
    assert issubclass(recurrent, feed_forward) and recurrent._ent_coef_positive is feed_forward._ent_coef_positive
    assert recurrent._bonus is feed_forward._bonus
    model = recurrent("MlpPrevActionLstmPolicy", copy_env(), num_samples=2, seed=0, policy_kwargs=LSTM)
    assert model.ent_coef == (0.1 if feed_forward is UREX else 0.01)
    with pytest.raises(ValueError, match="ent_coef"):
        recurrent("MlpPrevActionLstmPolicy", copy_env(), ent_coef=-1.0)


@pytest.mark.parametrize("policy", [MlpPrevActionLstmPolicy, RecurrentActorCriticPolicy], ids=["ours", "sb3_contrib"])
def test_collection_carries_the_state_and_training_evaluates_the_collected_log_probs(policy):
    """The log-probabilities of the loss (one LSTM call over each env's steps) are those of the collection (step by
    step, the state carried and reset at episode starts), on the valid steps; the others are zero."""
    env = copy_env()
    model = RecurrentReinforce(policy, env, num_samples=2, max_steps=25, seed=0, policy_kwargs=LSTM)
    obs = th.as_tensor(env.reset(), device=model.device)
    with th.no_grad():
        _, _, first = model._play_step(obs, None, np.ones(4, dtype=np.float32))
        _, _, second = model._play_step(obs, first, np.zeros(4, dtype=np.float32))
    assert isinstance(second, RNNStates) and not th.equal(first.pi[0], second.pi[0])
    batch = collect_episode_batch(env, model.policy, 2, max_steps=25, base_seed=1, play_step=model._play_step)
    assert batch is not None
    with th.no_grad():
        log_prob, entropy = model._evaluate_batch(batch)
    valid = batch.mask > 0
    np.testing.assert_allclose(log_prob.numpy()[valid], batch.log_probs[valid], atol=1e-5, rtol=0)
    assert (log_prob.numpy()[~valid] == 0).all() and (entropy.numpy()[~valid] == 0).all()
    model.learn(40)
    assert np.isfinite(model.logger.name_to_value["train/loss"])


def test_importing_the_recurrent_package_changes_no_other_class():
    """Recurrence is the user's choice of class: importing the recurrent policies and classes first (in a fresh
    interpreter) leaves Reinforce feed-forward, with no recurrent alias, refusing a recurrent policy."""
    code = (
        "import sb3_pcl.common.recurrent, sb3_pcl.recurrent_reinforce\n"
        "from sb3_pcl import Reinforce\n"
        "from sb3_pcl.common.recurrent import MlpPrevActionLstmPolicy\n"
        "assert set(Reinforce.policy_aliases) == {'MlpPolicy', 'CnnPolicy', 'MultiInputPolicy'}\n"
        "try:\n"
        "    Reinforce(MlpPrevActionLstmPolicy, 'CartPole-v1')\n"
        "except ValueError as error:\n"
        "    assert 'RecurrentReinforce' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('Reinforce took a recurrent policy')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("recurrent", "feed_forward"), PAIRS)
def test_model_saved_by_the_feed_forward_class_with_a_recurrent_policy_loads(recurrent, feed_forward, tmp_path):
    """
    sb3_pcl < 0.3 saved a recurrent Reinforce / UREX model as ``Reinforce`` / ``UREX``: the same file as the
    recurrent class saves now but for ``_saved_by`` (the policy class is pickled by reference, and
    ``sb3_pcl.common.recurrent.policies.MlpPrevActionLstmPolicy`` is where it was). It loads with the recurrent class;
    the feed-forward class says so.
    """
    env = copy_env()
    model = recurrent("MlpPrevActionLstmPolicy", env, num_samples=2, seed=0, policy_kwargs=LSTM)
    model.learn(40)
    model.save(tmp_path / "new.zip")
    with zipfile.ZipFile(tmp_path / "new.zip") as new, zipfile.ZipFile(tmp_path / "old.zip", "w") as old:
        for name in new.namelist():
            content = new.read(name)
            if name == "data":
                data = json.loads(content)
                assert data["_saved_by"] == recurrent.__name__
                data["_saved_by"] = feed_forward.__name__
                content = json.dumps(data).encode()
            old.writestr(name, content)
    with pytest.raises(ValueError, match=rf"use sb3_pcl\.{recurrent.__name__}.*{recurrent.__name__}\.load"):
        feed_forward.load(tmp_path / "old.zip", env=env)
    loaded = recurrent.load(tmp_path / "old.zip", env=env)
    assert loaded._saved_by == recurrent.__name__
    obs = env.reset()
    starts = np.ones(4, dtype=bool)
    np.testing.assert_array_equal(
        loaded.predict(obs, episode_start=starts, deterministic=True)[0],
        model.predict(obs, episode_start=starts, deterministic=True)[0],
    )
    other = RecurrentUREX if recurrent is RecurrentReinforce else RecurrentReinforce
    with pytest.raises(ValueError, match=rf"holds a {recurrent.__name__} model.*load it with {recurrent.__name__}\.load"):
        other.load(tmp_path / "old.zip", env=env)
