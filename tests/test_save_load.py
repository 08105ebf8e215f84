"""
Saving and loading, over every class: a loaded model predicts what the saved one did and learns on; a file that
another class saved, a truncated, foreign, tampered or diverged one is refused naming the problem; replay and
demonstration files round-trip, and crafted ones are refused before anything large is allocated.
"""

import io
import re
import zipfile
from typing import Any

import numpy as np
import pytest
import torch as th
from pcl_testing import ALGOS, FAST, IDS, RECURRENT, build
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure
from stable_baselines3.common.save_util import load_from_zip_file, save_to_pkl, save_to_zip_file

from sb3_pcl import PCL, UREX, RecurrentPCL, RecurrentTrustPCL, Reinforce, TrustPCL
from sb3_pcl.common.path_buffer import PathReplayBuffer
from sb3_pcl.common.recurrent import MlpPrevActionLstmPolicy, encode_actions

# ----------------------------------------------------------------------------------------------
# models
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_a_loaded_model_predicts_the_same_and_learns_on(algo: type, tmp_path: Any) -> None:
    """The recurrent classes on the Copy task: MultiDiscrete actions, whose one-hot encoding the state carries."""
    model = build(algo, "sb3_pcl/Copy-v0" if algo in RECURRENT else "CartPole-v1").learn(200)
    assert model._n_updates >= 2
    assert isinstance(model.policy, MlpPrevActionLstmPolicy) == (algo in RECURRENT)
    env = model.get_env()
    obs = env.reset()
    starts = np.ones(env.num_envs, dtype=bool)
    actions, state = model.predict(obs, episode_start=starts, deterministic=True)
    model.save(tmp_path / "model")
    loaded = algo.load(tmp_path / "model", env=env)

    assert type(loaded) is algo and type(loaded.policy) is type(model.policy)
    if issubclass(algo, Reinforce):
        assert loaded._batch is None  # the last batch is not saved: the loaded model collects a new one
    for name in ALGOS[algo][1].keys() - {"policy_kwargs"}:  # the fast settings, saved
        assert getattr(loaded, name) == getattr(model, name), name
    assert (loaded.gamma, loaded.ent_coef, loaded.num_timesteps) == (model.gamma, model.ent_coef, model.num_timesteps)
    for key, value in model.policy.state_dict().items():
        th.testing.assert_close(loaded.policy.state_dict()[key], value)
    saved_adam, loaded_adam = model.policy.optimizer.state_dict()["state"], loaded.policy.optimizer.state_dict()["state"]
    assert saved_adam and saved_adam.keys() == loaded_adam.keys()
    for index, adam in saved_adam.items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            th.testing.assert_close(loaded_adam[index][key], adam[key])

    if algo in RECURRENT:
        # (h, c, the previous action one-hot per component): the state carried step by step gives the same actions
        assert [part.shape for part in state] == [(1, env.num_envs, 8), (1, env.num_envs, 8), (1, env.num_envs, 9)]
        np.testing.assert_array_equal(state[2][0], encode_actions(th.as_tensor(actions), env.action_space).numpy())
        for _ in range(3):
            loaded_actions, loaded_state = loaded.predict(obs, state=state, episode_start=~starts, deterministic=True)
            actions, state = model.predict(obs, state=state, episode_start=~starts, deterministic=True)
            np.testing.assert_array_equal(loaded_actions, actions)
            for part, loaded_part in zip(state, loaded_state, strict=True):
                np.testing.assert_allclose(loaded_part, part, atol=1e-6)
        # an episode start resets the state: the first action is that of a fresh state
        restarted, _ = model.predict(obs, state=state, episode_start=starts, deterministic=True)
        np.testing.assert_array_equal(restarted, model.predict(obs, episode_start=starts, deterministic=True)[0])
    else:
        assert state is None and actions.shape == (env.num_envs,)
        np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], actions)
    mean_reward, _ = evaluate_policy(loaded, env, n_eval_episodes=2)  # SB3's loop passes a state back opaquely
    assert np.isfinite(mean_reward)
    loaded.learn(100, reset_num_timesteps=False)
    assert loaded.num_timesteps >= model.num_timesteps + 100


# ----------------------------------------------------------------------------------------------
# model files refused
# ----------------------------------------------------------------------------------------------

PAIRS = [
    (PCL, TrustPCL),
    (TrustPCL, PCL),
    (PCL, RecurrentPCL),
    (RecurrentTrustPCL, RecurrentPCL),
    (Reinforce, UREX),
    (UREX, Reinforce),
]


@pytest.mark.parametrize("saver, loader", PAIRS, ids=[f"{s.__name__}->{t.__name__}" for s, t in PAIRS])
def test_a_file_saved_by_another_class_is_refused(saver: type, loader: type, tmp_path: Any) -> None:
    build(saver).save(tmp_path / "model")
    message = rf"^The file holds a {saver.__name__} model, not a {loader.__name__} one: load it with {saver.__name__}\.load"
    with pytest.raises(ValueError, match=message):
        loader.load(tmp_path / "model")
    assert type(saver.load(tmp_path / "model")) is saver


EPISODES_TAMPERED = [
    ("num_samples", 1, "num_samples must be an integer >= 2"),
    ("num_samples", "2", "num_samples must be an integer >= 2"),
    ("ent_coef", -1.0, "ent_coef must be a finite float >=? 0 or a schedule, got -1.0"),
    ("ent_coef", float("nan"), "ent_coef must be a finite float >=? 0 or a schedule, got nan"),
    ("learning_rate", "oops", "learning_rate must be a finite float >= 0 or a schedule, got 'oops'"),
    ("max_steps", 0, "max_steps must be an integer >= 1, got 0"),
    ("max_grad_norm", -1.0, "max_grad_norm must be None or a finite float > 0, got -1.0"),
]
TAMPERED = [
    (PCL, "gamma", "oops", r"gamma must be in \[0, 1\], got 'oops'"),
    (TrustPCL, "lambda_smoothing", 2.0, r"lambda_smoothing must be in \[0, 1\), got 2.0"),
    (RecurrentPCL, "n_steps", 0, "n_steps must be an integer >= 1, got 0"),
    *[(algo, *case) for algo in (Reinforce, UREX) for case in EPISODES_TAMPERED],
]


@pytest.mark.parametrize("algo, name, value, message", TAMPERED, ids=[f"{a.__name__}-{n}={v!r}" for a, n, v, _ in TAMPERED])
def test_hyperparameters_of_a_file_are_validated_at_load(
    algo: type, name: str, value: Any, message: str, tmp_path: Any
) -> None:
    path = tmp_path / "model.zip"
    build(algo).save(path)
    data, params, variables = load_from_zip_file(path)  # as a user editing the file would
    assert data is not None
    data[name] = value
    save_to_zip_file(tmp_path / "tampered.zip", data=data, params=params, pytorch_variables=variables)
    with pytest.raises(ValueError, match=f"^{message}"):
        algo.load(tmp_path / "tampered.zip")
    with pytest.raises(ValueError, match=f"^{message}"):
        algo.load(path, **{name: value})  # a value passed to load is checked too


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_truncated_and_foreign_files_are_refused(algo: type, tmp_path: Any) -> None:
    """SB3's loader refuses these itself, with its own exception types and messages that name the problem."""
    path = tmp_path / "model.zip"
    build(algo).save(path)
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("readme.txt", "not a model")
    for bad in (truncated, foreign, io.BytesIO(b"garbage")):
        with pytest.raises((ValueError, AssertionError, zipfile.BadZipFile), match=r"(?i)zip|no data found"):
            algo.load(bad)


@pytest.mark.parametrize("algo", list(ALGOS), ids=IDS)
def test_a_file_with_non_finite_parameters_is_refused_at_load_naming_file_and_tensor(algo: type, tmp_path: Any) -> None:
    model = build(algo)
    name, parameter = next(iter(model.policy.named_parameters()))
    with th.no_grad():
        parameter.view(-1)[0] = float("nan")
        parameter.view(-1)[1] = float("inf")
    path = tmp_path / "diverged.zip"
    model.save(path)
    pattern = f"{re.escape(repr(str(path)))} holds non-finite saved parameters: policy.{re.escape(name)} \\(2 of"
    with pytest.raises(ValueError, match=pattern):
        algo.load(path)
    with pytest.raises(ValueError, match="The model file holds non-finite saved parameters"):
        algo.load(io.BytesIO(path.read_bytes()))


def test_non_finite_optimizer_state_is_refused_at_load(tmp_path: Any) -> None:
    model = build(Reinforce).learn(32)
    state = next(iter(model.policy.optimizer.state.values()))
    state["exp_avg_sq"].view(-1)[0] = float("nan")
    path = tmp_path / "diverged_adam.zip"
    model.save(path)
    with pytest.raises(ValueError, match=r"policy\.optimizer\.state\[0\]\.exp_avg_sq \(1 of"):
        Reinforce.load(path)
    # the same model with finite tensors loads and predicts what it did
    state["exp_avg_sq"].view(-1)[0] = 0.0
    model.save(path)
    loaded = Reinforce.load(path)
    obs = np.zeros((3, 4), dtype=np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


# ----------------------------------------------------------------------------------------------
# replay files
# ----------------------------------------------------------------------------------------------


def test_replay_buffer_save_load(tmp_path):
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, **FAST)
    model.learn(160)
    model.save_replay_buffer(tmp_path / "buffer.pkl")

    other = PCL("MlpPolicy", "CartPole-v1", seed=1, **FAST)
    other.load_replay_buffer(tmp_path / "buffer.pkl")
    assert isinstance(other.replay_buffer, PathReplayBuffer)
    assert other.replay_buffer.size() == model.replay_buffer.size() == 160
    assert other.replay_buffer.paths.keys() == model.replay_buffer.paths.keys()
    for pid, path in model.replay_buffer.paths.items():
        loaded = other.replay_buffer.paths[pid]
        assert loaded.slots == path.slots and loaded.done == path.done and loaded.terminated == path.terminated
        np.testing.assert_array_equal(
            other.replay_buffer.observations[loaded.slots], model.replay_buffer.observations[path.slots]
        )
        np.testing.assert_array_equal(other.replay_buffer.actions[loaded.slots], model.replay_buffer.actions[path.slots])
    other.set_logger(configure(folder=None, format_strings=[]))
    other.train(gradient_steps=1, batch_size=4)  # sampling works after loading
    assert other._n_updates == 1


def test_load_replay_buffer_rejects_other_buffers(tmp_path):
    model = PCL("MlpPolicy", "CartPole-v1", seed=0, **FAST)
    env = model.get_env()
    save_to_pkl(tmp_path / "sb3.pkl", ReplayBuffer(10, env.observation_space, env.action_space))
    with pytest.raises(ValueError, match="PathReplayBuffer"):
        model.load_replay_buffer(tmp_path / "sb3.pkl")
    assert isinstance(model.replay_buffer, PathReplayBuffer)


def npz_bytes(members: dict[str, bytes], compress: bool = False) -> bytes:
    """An .npz archive holding the given raw members (``name.npy`` -> bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npy_header_only(shape: tuple[int, ...], dtype: Any) -> bytes:
    """An .npy header declaring ``shape`` with (almost) no data after it."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue() + b"\0" * 16


def replay_members(path: Any, **metadata_changes: Any) -> dict[str, bytes]:
    import json

    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    metadata = json.loads(arrays["metadata"].tobytes())
    metadata.update(metadata_changes)
    metadata = {key: value for key, value in metadata.items() if value is not None}
    arrays["metadata"] = np.frombuffer(json.dumps(metadata).encode(), dtype=np.uint8)
    return {f"{key}.npy": npy_bytes(value) for key, value in arrays.items()}


@pytest.fixture(scope="module")
def small_replay(tmp_path_factory: Any) -> Any:
    """A model with a 500-transition replay holding a few short paths (a replay file of a few KiB)."""
    model = build(PCL)
    model.learn(60)
    path = tmp_path_factory.mktemp("replay") / "replay.npz"
    model.save_replay_buffer(path)
    return model, path


def crafted_replays(path: Any) -> dict[str, tuple[bytes, str]]:
    """Crafted replay files of a few KiB, each with the message that must refuse it."""
    members = replay_members(path)
    zeros = {**members, "extra.npy": npy_bytes(np.zeros(16 << 20, dtype=np.uint8))}  # 16 MiB of zeros, deflated
    huge_header = {**members, "observations.npy": npy_header_only((10**12, 4), np.float32)}
    return {
        "extra_array": (npz_bytes(zeros, compress=True), r"unexpected members \['extra.npy'\] \(refused unread"),
        "many_envs": (npz_bytes(replay_members(path, n_envs=2 * 10**7)), r"n_envs=20000000 exceeds buffer_size=500"),
        "large_buffer": (
            npz_bytes(replay_members(path, buffer_size=2 * 10**7, n_envs=2 * 10**7)),
            r"buffer_size=20000000, larger than this model's buffer_size=500",
        ),
        "huge_header": (
            npz_bytes(huge_header),
            r"'observations' has a header describing 16000000000128 bytes but the archive declares 144",
        ),
        "wrong_shape": (
            npz_bytes({**members, "rewards.npy": npy_bytes(np.zeros(400, np.float32))}),
            r"'rewards' declares dtype float32 and shape \(400,\), expected float32 \(500,\)",
        ),
        "object_dtype": (
            npz_bytes({**members, "rewards.npy": npy_header_only((500,), object)}),
            r"'rewards' holds Python objects",
        ),
    }


def refusal_peak(load: Any, message: str) -> tuple[int, str]:
    """:return: the peak of the memory traced while ``load()`` runs and raises a ``ValueError`` matching ``message``,
    and the message"""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=message) as error:
            load()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, str(error.value)


@pytest.mark.parametrize("case", ["extra_array", "many_envs", "large_buffer", "huge_header", "wrong_shape", "object_dtype"])
def test_crafted_replay_files_are_refused_before_allocating(small_replay: Any, case: str, tmp_path: Any) -> None:
    model, path = small_replay
    content, message = crafted_replays(path)[case]
    assert len(content) < 48 << 10  # a few KiB
    crafted = tmp_path / f"{case}.npz"
    crafted.write_bytes(content)
    peak, error = refusal_peak(lambda: model.load_replay_buffer(crafted), message)
    assert case in error  # the message names the file
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MiB allocated before refusing {case}"


def test_replay_files_of_the_first_format_still_load(small_replay: Any, tmp_path: Any) -> None:
    """Version 1 listed every free slot (the never used ones too): it loads and samples as the saved buffer."""
    _, path = small_replay
    model = build(PCL)
    model.load_replay_buffer(path)
    buffer = model.replay_buffer
    members = replay_members(path, version=1, next_fresh_slot=None)
    members["free_slots.npy"] = npy_bytes(  # the never used slots below the evicted ones, popped from the end
        np.asarray(list(range(buffer.buffer_size - 1, buffer.next_fresh_slot - 1, -1)) + buffer.free_slots, dtype=np.int64)
    )
    old = tmp_path / "v1.npz"
    old.write_bytes(npz_bytes(members))
    model.load_replay_buffer(old)
    assert model.replay_buffer.size() == buffer.size() and model.replay_buffer.next_fresh_slot == buffer.buffer_size
    model.learn(40, reset_num_timesteps=False)


# ----------------------------------------------------------------------------------------------
# demonstration files and Minari datasets: sizes checked before they are read
# ----------------------------------------------------------------------------------------------


def episodes_members(n_steps: int = 3) -> dict[str, bytes]:
    arrays = {
        "observations": np.zeros((n_steps + 1, 4), np.float32),
        "actions": np.zeros(n_steps, np.int64),
        "rewards": np.ones(n_steps),
        "lengths": np.array([n_steps]),
        "terminated": np.array([True]),
        "truncated": np.array([False]),
        "format_version": np.array(2),
    }
    return {f"{key}.npy": npy_bytes(value) for key, value in arrays.items()}


EPISODE_FILES = {
    "extra_array": (
        lambda: npz_bytes({**episodes_members(), "extra.npy": npy_bytes(np.zeros(16 << 20, np.uint8))}, compress=True),
        r"unexpected members \['extra.npy'\] \(refused unread",
    ),
    "huge_header": (
        lambda: npz_bytes({**episodes_members(), "rewards.npy": npy_header_only((10**12,), np.float64)}),
        r"'rewards' has a header describing 8000000000128 bytes but the archive declares 144",
    ),
    "too_many_steps": (
        lambda: npz_bytes(episodes_members(n_steps=600)),
        r"holds 1 episodes of 600 steps in all, more than the 499 steps the replay has room for",
    ),
}


@pytest.mark.parametrize("case", list(EPISODE_FILES))
def test_crafted_episode_files_are_refused_before_reading(case: str, tmp_path: Any) -> None:
    make, message = EPISODE_FILES[case]
    path = tmp_path / f"{case}.npz"
    path.write_bytes(make())
    assert path.stat().st_size < 48 << 10
    model = build(PCL)
    peak, _ = refusal_peak(lambda: model.add_demonstrations(path), message)
    assert peak < 4 << 20 and model.replay_buffer.n_paths == 0


def minari_folder(root: Any, total_steps: int, rows: int) -> Any:
    """A local dataset folder whose one episode declares ``rows`` observations (HDF5 chunks never written)."""
    h5py = pytest.importorskip("h5py")
    import json

    data = root / "data"
    data.mkdir(parents=True)
    metadata = {"total_episodes": 1, "total_steps": total_steps, "data_format": "hdf5", "dataset_id": "crafted-v0"}
    (data / "metadata.json").write_text(json.dumps(metadata))
    with h5py.File(data / "main_data.hdf5", "w") as file:
        episode = file.create_group("episode_0")
        episode.create_dataset(
            "observations", shape=(rows, 4), dtype=np.float32, chunks=(min(rows, 1024), 4), compression="gzip"
        )
        for key, dtype in (("actions", np.int64), ("rewards", np.float64), ("terminations", bool), ("truncations", bool)):
            episode.create_dataset(key, data=np.zeros(3, dtype))
    return root


@pytest.mark.parametrize(
    "case, total_steps, rows, message",
    [
        ("huge_array", 3, 10**8, r"observations has shape \(100000000, 4\), more rows than the 3 steps declared"),
        ("too_many_steps", 10**9, 4, r"holds 1 episodes of 1000000000 steps in all, more than the 499 steps"),
    ],
)
def test_crafted_minari_datasets_are_refused_before_minari_reads_them(
    case: str, total_steps: int, rows: int, message: str, tmp_path: Any
) -> None:
    pytest.importorskip("minari")
    folder = minari_folder(tmp_path / case, total_steps, rows)
    assert sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) < 64 << 10
    model = build(PCL)
    peak, _ = refusal_peak(lambda: model.add_demonstrations(folder), message)
    assert peak < 8 << 20 and model.replay_buffer.n_paths == 0
