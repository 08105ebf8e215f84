"""The quick training run (``python -m sb3_pcl``) and the hyperparameter files it reads."""

import pytest
import yaml
from pcl_testing import accepted_arguments
from stable_baselines3.common.utils import LinearSchedule

import sb3_pcl
from sb3_pcl.__main__ import main
from sb3_pcl.hyperparams_files import hyperparams_dir, load_hyperparams


def test_load_hyperparams_parses_zoo_entries(tmp_path):
    entry = {
        "Pendulum-v1": {
            "n_timesteps": 1e5,
            "n_envs": 4,
            "normalize": "{'norm_obs': True, 'norm_reward': False}",
            "learning_rate": "lin_0.002",
            "policy_kwargs": "dict(net_arch=[32, 32], activation_fn=nn.ReLU)",
            "gamma": 0.9,
        }
    }
    (tmp_path / "pcl.yml").write_text(yaml.safe_dump(entry))
    parsed = load_hyperparams("pcl", "Pendulum-v1", tmp_path)
    assert parsed.n_timesteps == 100_000 and parsed.n_envs == 4
    assert parsed.normalize == {"norm_obs": True, "norm_reward": False}
    assert isinstance(parsed.kwargs["learning_rate"], LinearSchedule) and parsed.kwargs["learning_rate"](1.0) == 0.002
    assert parsed.kwargs["policy_kwargs"]["net_arch"] == [32, 32]
    assert parsed.kwargs["policy"] == "MlpPolicy" and parsed.kwargs["gamma"] == 0.9
    assert "n_envs" not in parsed.kwargs and "normalize" not in parsed.kwargs
    missing = load_hyperparams("pcl", "Acrobot-v1", tmp_path)
    assert missing.kwargs == {"policy": "MlpPolicy"} and missing.normalize is None and missing.n_envs == 1


@pytest.mark.parametrize(
    "value, expected",
    [
        ("dict(norm_obs=True, norm_reward=False)", {"norm_obs": True, "norm_reward": False}),
        ("{'norm_obs': False}", {"norm_obs": False}),
        (True, {}),
        (False, None),
    ],
)
def test_normalize_is_read_as_rl_zoo3_reads_it(tmp_path, value, expected):
    (tmp_path / "pcl.yml").write_text(yaml.safe_dump({"Pendulum-v1": {"normalize": value}}))
    assert load_hyperparams("pcl", "Pendulum-v1", tmp_path).normalize == expected


@pytest.mark.parametrize("value", ["[1, 2]", "__import__('os')", "dict(norm_obs="])
def test_normalize_rejects_what_is_not_a_flag_or_a_dict(tmp_path, value):
    (tmp_path / "pcl.yml").write_text(yaml.safe_dump({"Pendulum-v1": {"normalize": value}}))
    with pytest.raises(ValueError, match="normalize"):
        load_hyperparams("pcl", "Pendulum-v1", tmp_path)


def test_shipped_files_have_entries_the_algorithms_accept():
    for algo, algo_class in sb3_pcl.ALGOS.items():
        path = hyperparams_dir() / f"{algo}.yml"
        if not path.is_file():
            continue
        for env_id in yaml.safe_load(path.read_text()) or {}:
            entry = load_hyperparams(algo, env_id)
            unknown = set(entry.kwargs) - accepted_arguments(algo_class)
            assert not unknown, f"{path}:{env_id} has arguments {algo_class.__name__} does not take: {unknown}"


def test_quick_run_trains_and_prints_the_evaluation(capsys, tmp_path):
    mean_return = main(["--env", "CartPole-v1", "--steps", "300", "--eval-episodes", "2", "--save", str(tmp_path / "m")])
    out = capsys.readouterr().out
    assert "Evaluation return over 2 episodes" in out and f"{mean_return:.1f}" in out
    assert (tmp_path / "m.zip").is_file()


def test_quick_run_rejects_unknown_algorithms():
    with pytest.raises(SystemExit):
        main(["--algo", "dqn"])


def test_quick_run_trains_the_algorithmic_tasks_on_algorithmic_vec_env(monkeypatch, capsys):
    import sb3_pcl.__main__ as cli
    from sb3_pcl.envs import AlgorithmicVecEnv

    created = []

    class Recording(AlgorithmicVecEnv):
        def __init__(self, env_fns):
            super().__init__(env_fns)
            created.append(self.num_envs)

    monkeypatch.setattr(cli, "AlgorithmicVecEnv", Recording)
    main(["--algo", "recurrent_urex", "--env", "sb3_pcl/Copy-v0", "--steps", "800", "--eval-episodes", "2"])
    assert created == [400]  # the training env (hyperparams/recurrent_urex.yml); the evaluation env stays a DummyVecEnv
    assert "Evaluation return over 2 episodes" in capsys.readouterr().out


def test_wrappers_and_callbacks_of_an_entry_are_read_as_rl_zoo3_reads_them(tmp_path):
    from sb3_pcl.envs import ExpertPathsCallback, SharedCurriculum

    entry = {
        "vec_env_wrapper": [{"sb3_pcl.envs.SharedCurriculum": {"first_episode_only": True}}],
        "callback": "sb3_pcl.envs.ExpertPathsCallback",
    }
    (tmp_path / "pcl.yml").write_text(yaml.safe_dump({"sb3_pcl/Copy-v0": entry}))
    parsed = load_hyperparams("pcl", "sb3_pcl/Copy-v0", tmp_path)
    assert parsed.vec_env_wrappers == [(SharedCurriculum, {"first_episode_only": True})]
    assert parsed.callbacks == [(ExpertPathsCallback, {})]
    assert "vec_env_wrapper" not in parsed.kwargs and "callback" not in parsed.kwargs
    for bad in ("sb3_pcl.envs.NoSuchWrapper", [{"a.B": {}, "c.D": {}}], 3):
        (tmp_path / "pcl.yml").write_text(yaml.safe_dump({"sb3_pcl/Copy-v0": {"callback": bad}}))
        with pytest.raises(ValueError, match=r"callback|cannot import"):
            load_hyperparams("pcl", "sb3_pcl/Copy-v0", tmp_path)


@pytest.mark.parametrize(
    ("option", "value"), [("--steps", "0"), ("--steps", "-5"), ("--eval-episodes", "0"), ("--eval-episodes", "-1")]
)
def test_quick_run_refuses_non_positive_budgets(option, value, capsys):
    with pytest.raises(SystemExit) as error:
        main([option, value])
    assert error.value.code == 2
    assert f"{option} must be a positive number" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["under_a_file", "a_folder"])
def test_quick_run_refuses_an_unwritable_save_path_before_training(where, capsys, tmp_path, monkeypatch):
    import sb3_pcl.__main__ as cli

    (tmp_path / "notes.txt").write_text("a file")
    (tmp_path / "models.zip").mkdir()
    path = {"under_a_file": tmp_path / "notes.txt" / "model", "a_folder": tmp_path / "models"}[where]
    built = []
    monkeypatch.setattr(cli, "make_vec_env", lambda *args, **kwargs: built.append(args))
    with pytest.raises(SystemExit) as error:
        main(["--steps", "300", "--save", str(path)])
    assert error.value.code == 2
    err = capsys.readouterr().err
    assert f"--save {path}:" in err and ("cannot write the model to" in err or "is a folder" in err)
    assert built == []  # refused before any env was built or any step trained


def test_writable_model_path_leaves_nothing_behind_and_keeps_an_existing_file(tmp_path):
    from sb3_pcl.__main__ import writable_model_path

    assert writable_model_path(str(tmp_path / "sub" / "m")) == tmp_path / "sub" / "m.zip"
    assert not (tmp_path / "sub" / "m.zip").exists() and (tmp_path / "sub").is_dir()
    (tmp_path / "old.zip").write_bytes(b"previous model")
    assert writable_model_path(str(tmp_path / "old.zip")) == tmp_path / "old.zip"
    assert (tmp_path / "old.zip").read_bytes() == b"previous model"


def test_env_wrapper_and_frame_stack_are_read_and_applied_by_the_main_job(tmp_path, monkeypatch, capsys):
    import gymnasium as gym

    from sb3_pcl import __main__ as main_job
    from sb3_pcl import hyperparams_files as hyperparams

    entry = {
        "env_wrapper": ["gymnasium.wrappers.TimeAwareObservation"],
        "frame_stack": 3,
        "learning_starts": 10,
        "batch_size": 4,
        "train_freq": 8,
        "policy_kwargs": "dict(net_arch=[8])",
    }
    (tmp_path / "pcl.yml").write_text(yaml.safe_dump({"CartPole-v1": entry}))
    parsed = load_hyperparams("pcl", "CartPole-v1", tmp_path)
    assert parsed.env_wrappers == [(gym.wrappers.TimeAwareObservation, {})] and parsed.frame_stack == 3
    assert "env_wrapper" not in parsed.kwargs and "frame_stack" not in parsed.kwargs
    assert isinstance(parsed.wrap_env(gym.make("CartPole-v1")), gym.wrappers.TimeAwareObservation)
    # python -m sb3_pcl trains on the wrapped, stacked env: 3 stacked observations of CartPole's 4 values and the time
    built = []
    monkeypatch.setattr(main_job, "load_hyperparams", lambda algo, env_id: load_hyperparams(algo, env_id, tmp_path))
    real_class = sb3_pcl.ALGOS["pcl"]

    class Recording(real_class):  # type: ignore[misc, valid-type]
        def __init__(self, *args, env, **kwargs):
            built.append(env)
            super().__init__(*args, env=env, **kwargs)

    monkeypatch.setitem(sb3_pcl.ALGOS, "pcl", Recording)
    main_job.main(["--algo", "pcl", "--env", "CartPole-v1", "--steps", "200", "--eval-episodes", "2"])
    (env,) = built
    assert env.observation_space.shape == (15,)
    # the evaluation env has the same wrappers (the model could not act on it otherwise)
    assert "Evaluation return over 2 episodes" in capsys.readouterr().out
    for bad in (0, -2, "3", True):
        (tmp_path / "pcl.yml").write_text(yaml.safe_dump({"CartPole-v1": {"frame_stack": bad}}))
        with pytest.raises(ValueError, match="frame_stack"):
            hyperparams.load_hyperparams("pcl", "CartPole-v1", tmp_path)
