"""
Property-based tests (Hypothesis) of the six algorithm classes against generated spaces, envs, wrappers and call
sequences.

What it covers. The strategies (:mod:`fuzz_strategies`) draw

- spaces, for observations and actions: ``Box`` of every shape from scalar to three axes, finite, half-open and
  unbounded bounds, float32 and float64; ``Discrete`` with any ``start``; ``MultiDiscrete``; ``MultiBinary``; flat and
  nested ``Dict`` spaces of these;
- env behaviours: episodes of 1 to 30 steps (to 300 in the slow profile), cycling through up to three lengths; every
  combination of the terminated and truncated flags at an episode's end; rewards of magnitude 0 to 1e6 as Python
  floats, ints, NumPy float32 scalars or 0-d arrays; infos empty, with ``is_success``, or with unusual keys and values;
  resets that honour or ignore their seed; and at most one fault at a given step: an exception, a NaN or inf
  observation, a NaN, inf or float32-overflowing reward, an observation of another shape or dtype;
- wrappers: ``Monitor`` always, then ``VecNormalize``, ``VecFrameStack``, ``VecTransposeImage`` (on image
  observations), over ``DummyVecEnv`` or ``SubprocVecEnv`` with 1 to 8 envs;
- sequences of public calls: construct, ``learn`` stopped by a callback, ``learn`` again with
  ``reset_num_timesteps=False``, ``save`` / ``load`` of the model, ``save_replay_buffer`` / ``load_replay_buffer``
  into models with other buffer sizes (the PCL family), ``predict`` with and without recurrent states and episode
  starts, ``set_env`` with other numbers of envs and with other spaces.

The properties, for each of PCL, TrustPCL, RecurrentPCL, RecurrentTrustPCL, Reinforce and UREX: a case either fails
early with the error that names its problem (the exception type and a message pattern, from :func:`problems`: the
unsupported space, the non-finite value, the observation of the wrong shape, the env's own exception unchanged), or
it trains with nothing lost: the parameters stay finite, the env only ever receives actions of its action space,
``predict`` returns actions of the action space, the replay's paths hold exactly the rewards, observations and
terminal flags the envs played (PCL family), the logged episodes are those of the batch (Reinforce, UREX), a loaded
model predicts what the saved one did, and training goes on where it stopped. A fault the envs reached that no error
reported fails the property (an observation dtype change, which SB3's VecEnvs cast, excepted).

What it does not cover: learning quality and speed (``benchmarks/``, the golden runs); ``Tuple`` spaces and image
observations large enough for the CNN policies (refused / tested elsewhere); hyperparameter values (tested in
``test_bad_inputs.py``); GPU devices; the rl-zoo3 and campaign tools; NaN observations in integer spaces (SB3's VecEnvs
cast them to integers before any algorithm sees them: docs/troubleshooting.md).

Profiles: the default run uses the derandomised ``fuzz-fast`` profile (a fixed set of examples, in well under a
minute); ``-m slow`` runs the ``fuzz-slow`` variants, with more, random examples and longer episodes.
"""

import re
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
import torch as th
from fuzz_strategies import (
    EnvSpec,
    Fault,
    FuzzEnv,
    FuzzEnvError,
    box_spaces,
    discrete_spaces,
    env_specs,
    faults,
    multi_discrete_spaces,
)
from gymnasium import spaces
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from pcl_testing import TINY, TINY_EPISODES
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    SubprocVecEnv,
    VecFrameStack,
    VecNormalize,
    VecTransposeImage,
)

from sb3_pcl import PCL, UREX, RecurrentPCL, RecurrentTrustPCL, Reinforce, TrustPCL
from sb3_pcl.common.demonstrations import load_episodes, save_episodes

settings.register_profile(
    "fuzz-fast",
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # no shrinking: a failure is reported as found
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz-slow",
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FAST = settings.get_profile("fuzz-fast")
SLOW = settings.get_profile("fuzz-slow")

OFF_POLICY = {**TINY, "policy_kwargs": {"net_arch": [8]}}
RECURRENT = {**TINY, "policy_kwargs": {"lstm_hidden_size": 8, "net_arch": [8]}}
EPISODES = {**TINY_EPISODES, "policy_kwargs": {"net_arch": [8]}}
#: every class with settings that train within a few hundred steps
ALGOS: dict[type, tuple[str, dict[str, Any]]] = {
    PCL: ("MlpPolicy", OFF_POLICY),
    TrustPCL: ("MlpPolicy", OFF_POLICY),
    RecurrentPCL: ("MlpPrevActionLstmPolicy", RECURRENT),
    RecurrentTrustPCL: ("MlpPrevActionLstmPolicy", RECURRENT),
    Reinforce: ("MlpPolicy", EPISODES),
    UREX: ("MlpPolicy", EPISODES),
}
ALL = list(ALGOS)
IDS = [algo.__name__ for algo in ALL]
PATH_REPLAY = (PCL, TrustPCL, RecurrentPCL, RecurrentTrustPCL)
STEPS = 80


# ----------------------------------------------------------------------------------------------
# the oracle
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    """An error a case may raise: its type and a pattern its message matches."""

    kind: type[BaseException]
    pattern: str

    def matches(self, error: BaseException) -> bool:
        return isinstance(error, self.kind) and re.search(self.pattern, str(error)) is not None


def _leaves(space: spaces.Space) -> list[spaces.Space]:
    if isinstance(space, spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in _leaves(sub)]
    return [space]


def _nonzero_start(space: spaces.Space) -> bool:
    return any(
        isinstance(leaf, (spaces.Discrete, spaces.MultiDiscrete)) and bool(np.any(np.asarray(leaf.start) != 0))
        for leaf in _leaves(space)
    )


def space_problems(algo: type, spec: EnvSpec) -> list[Problem]:
    """:return: the errors the spaces of ``spec`` call for (none: the case must train)"""
    found = []
    obs, action = spec.observation_space, spec.action_space
    recurrent = issubclass(algo, RecurrentPCL)
    if isinstance(obs, spaces.Dict):
        if recurrent:
            found.append(Problem(ValueError, r"does not support Dict or Tuple observation spaces"))
        if any(isinstance(sub, spaces.Dict) for sub in obs.spaces.values()):
            found.append(Problem(ValueError, r"nested observation spaces are not supported: key 'inner'"))
    if any(isinstance(leaf, spaces.Box) and leaf.shape == () for leaf in _leaves(obs)):
        found.append(Problem(ValueError, r"does not support scalar Box observation spaces \(shape \(\)\)"))
    if _nonzero_start(obs):
        found.append(Problem(ValueError, r"does not support observation spaces whose values do not start at 0"))
    if _nonzero_start(action):
        found.append(Problem(ValueError, r"does not support action spaces whose values do not start at 0"))
    supported: tuple[type, ...] = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete)
    if algo not in (Reinforce, UREX):
        supported = (*supported, spaces.MultiBinary)
    if not isinstance(action, supported):
        found.append(Problem(AssertionError, r"The algorithm only supports"))
    return found


def _float_box_obs(spec: EnvSpec) -> bool:
    first = _leaves(spec.observation_space)[0]
    return isinstance(first, spaces.Box) and np.dtype(first.dtype).kind == "f"


def fault_problems(spec: EnvSpec) -> tuple[list[Problem], bool]:
    """:return: the errors the fault of ``spec`` calls for, and whether it must be reported once an env reached it"""
    fault = spec.fault
    if fault is None:
        return [], False
    if fault.kind == "raise":
        return [Problem(FuzzEnvError, rf"^FuzzEnv fault at step {fault.at_step}$")], True
    if fault.kind in ("nan_obs", "inf_obs"):
        # NaN / inf in an integer space is cast by SB3's VecEnv buffers before an algorithm sees it
        return [Problem(ValueError, r"(?i)observation.*(NaN or inf|non-finite)")], _float_box_obs(spec)
    if fault.kind in ("nan_reward", "inf_reward", "huge_reward"):
        return [Problem(ValueError, r"(?i)reward.*(NaN or inf|too large for float32)")], True
    if fault.kind == "obs_shape":
        # SB3's DummyVecEnv copies each observation into a preallocated buffer: its NumPy errors name the shapes
        return [
            Problem(ValueError, r"could not broadcast input array|setting an array element with a sequence|observation.*shape")
        ], True
    return [Problem(ValueError, r"(?i)observation")], False  # obs_dtype: cast by SB3's VecEnvs, or refused


# ----------------------------------------------------------------------------------------------
# building and running a case
# ----------------------------------------------------------------------------------------------
def policy_for(algo: type, spec: EnvSpec) -> str:
    policy, _ = ALGOS[algo]
    if isinstance(spec.observation_space, spaces.Dict) and not issubclass(algo, RecurrentPCL):
        return "MultiInputPolicy"
    return policy


def make_venv(spec: EnvSpec, n_envs: int = 2, subproc: bool = False) -> Any:
    def make() -> Monitor:
        return Monitor(FuzzEnv(spec))

    if subproc:
        return SubprocVecEnv([make] * n_envs, start_method="forkserver")
    return DummyVecEnv([make] * n_envs)


def nested(spec: EnvSpec) -> bool:
    """Whether the observation space has a ``Dict`` inside a ``Dict`` (SB3's VecEnvs refuse to hold it)."""
    obs = spec.observation_space
    return isinstance(obs, spaces.Dict) and any(isinstance(sub, spaces.Dict) for sub in obs.spaces.values())


def build(algo: type, spec: EnvSpec, venv: Any = None, seed: int = 0, **kwargs: Any) -> Any:
    """The model of a case (a nested Dict space goes in as a Gymnasium env: SB3's VecEnvs cannot hold one)."""
    _, settings_ = ALGOS[algo]
    env = venv if venv is not None else (Monitor(FuzzEnv(spec)) if nested(spec) else make_venv(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unseedable envs, unbounded Box observations, ...
        return algo(policy_for(algo, spec), env, seed=seed, **{**settings_, **kwargs})


def learn(model: Any, steps: int = STEPS, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.learn(steps, **kwargs)


def check_outcome(build_and_learn: Any, problems: list[Problem]) -> Any:
    """
    Run a case; an error must be one of ``problems`` (every other exception fails the property).

    :return: the trained model, or ``None`` when the case raised one of ``problems``
    """
    try:
        model = build_and_learn()
    except Exception as error:  # the property is about which exception this is
        if any(problem.matches(error) for problem in problems):
            event(f"refused: {type(error).__name__}")
            return None
        expected = [f"{p.kind.__name__}: /{p.pattern}/" for p in problems] or ["no error"]
        raise AssertionError(f"unexpected {type(error).__name__}: {error} (expected one of {expected})") from error
    event("trained")
    return model


def check_trained(model: Any, spec: EnvSpec, stored: bool = True) -> None:
    """
    The properties of a case that trained: nothing lost, nothing non-finite.

    :param stored: whether to compare what the model stored with what its env played (only when the model has
        trained on its current env alone)
    """
    for name, parameter in model.policy.named_parameters():
        assert th.isfinite(parameter).all(), f"parameter {name} is not finite"
    bad = [action for actions in model.env.get_attr("bad_actions") for action in actions]
    assert not bad, f"the env received actions outside {spec.action_space}: {bad[:3]}"
    obs = spec.observation_space.sample()
    action, _ = model.predict(obs, deterministic=False)
    _assert_action_in(spec.action_space, action)
    if not stored:
        return
    if isinstance(model, PATH_REPLAY):
        check_replay_matches_played(model, spec)
    else:
        check_batch_matches_logged_episodes(model)


def _assert_action_in(space: spaces.Space, action: Any) -> None:
    array = np.asarray(action)
    if isinstance(space, spaces.Box):
        assert array.shape == space.shape and np.all(array >= space.low) and np.all(array <= space.high), action
    else:
        assert space.contains(array.astype(space.dtype)), f"{action!r} not in {space}"


def _played_steps(model: Any) -> list[dict[str, Any]]:
    """:return: per env, the played steps: rewards, the observations before each step, terminal flags"""
    played = []
    for episodes in model.env.get_attr("episodes"):
        rewards, observations, terminal = [], [], []
        for episode in episodes:
            n = len(episode["rewards"])
            rewards.extend(episode["rewards"])
            observations.extend(episode["obs"][:n])
            terminal.extend([False] * (n - 1) + ([episode["terminated"]] if n else []))
        played.append({"rewards": rewards, "obs": observations, "terminal": terminal})
    return played


def check_replay_matches_played(model: Any, spec: EnvSpec) -> None:
    """The replay's paths of each env, in order, are the steps that env played (all but the running path's tail)."""
    stored = model.replay_buffer.transitions()
    for env_idx, played in enumerate(_played_steps(model)):
        rows = np.flatnonzero(stored["env_idx"] == env_idx)
        n = len(rows)
        assert len(played["rewards"]) - n <= model.max_segment_length + 1, "played steps missing from the replay"
        np.testing.assert_allclose(
            stored["rewards"][rows], np.asarray(played["rewards"][:n], dtype=np.float32), rtol=1e-6, atol=0
        )
        terminal = stored["dones"][rows] & ~stored["timeouts"][rows]
        np.testing.assert_array_equal(terminal, np.asarray(played["terminal"][:n], dtype=bool))
        if not isinstance(spec.observation_space, spaces.Dict) and n:
            obs = np.asarray(stored["observations"])[rows].reshape(n, -1)
            expected = np.asarray(played["obs"][:n], dtype=np.float64)
            if model.observation_space.shape != spec.observation_space.shape:  # SB3 wrapped it in VecTransposeImage
                expected = np.moveaxis(expected, -1, 1)
            expected = expected.reshape(n, -1).astype(obs.dtype)
            np.testing.assert_array_equal(obs, expected)


def check_batch_matches_logged_episodes(model: Any) -> None:
    """The episodes of the last batch that ended are the last ones logged, in slot order, with the same lengths."""
    batch = model._batch
    if batch is None:
        return
    ended = np.flatnonzero(batch.ended)
    logged = list(model.ep_info_buffer)[-len(ended) :] if len(ended) else []
    assert [int(info["l"]) for info in logged] == [int(batch.lengths[i]) for i in ended]
    returns = batch.returns[ended]
    scale = 1.0 + float(np.abs(returns).max(initial=0.0))
    np.testing.assert_allclose([info["r"] for info in logged], returns, rtol=1e-4, atol=1e-5 * scale)


def reached(model_or_env: Any, fault: Fault) -> bool:
    return any(steps >= fault.at_step for steps in model_or_env.get_attr("total_steps"))


# ----------------------------------------------------------------------------------------------
# properties
# ----------------------------------------------------------------------------------------------
def _spaces_and_behaviours(algo: type, spec: EnvSpec, seed: int) -> None:
    problems = space_problems(algo, spec)
    model = check_outcome(lambda: learn(build(algo, spec, seed=seed)), problems)
    if model is None:
        return
    assert not problems, f"trained although {problems} was expected"
    check_trained(model, spec)


SPEC_ARGS = {"spec": env_specs(), "seed": st.integers(0, 2**16)}
SPEC_ARGS_SLOW = {"spec": env_specs(max_length=300), "seed": st.integers(0, 2**31)}


@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(FAST, max_examples=20)
@given(**SPEC_ARGS)
def test_spaces_and_env_behaviours(algo: type, spec: EnvSpec, seed: int) -> None:
    _spaces_and_behaviours(algo, spec, seed)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(SLOW, max_examples=150)
@given(**SPEC_ARGS_SLOW)
def test_spaces_and_env_behaviours_slow(algo: type, spec: EnvSpec, seed: int) -> None:
    _spaces_and_behaviours(algo, spec, seed)


#: supported spaces only: the faults are what is tested
SUPPORTED_OBS = st.one_of(
    box_spaces("obs").filter(lambda s: s.shape != ()), discrete_spaces().map(lambda s: spaces.Discrete(int(s.n)))
)
SUPPORTED_ACTIONS = st.one_of(
    box_spaces("action"), discrete_spaces().map(lambda s: spaces.Discrete(int(s.n))), multi_discrete_spaces()
)


def _faults(algo: type, spec: EnvSpec, seed: int) -> None:
    assert spec.fault is not None
    problems, must_report = fault_problems(spec)
    venvs: list[Any] = []

    def run() -> Any:
        venvs.append(make_venv(spec))
        return learn(build(algo, spec, venv=venvs[0], seed=seed))

    model = check_outcome(run, problems)
    if model is None:
        return
    if must_report:
        assert not reached(venvs[0], spec.fault), f"the fault {spec.fault} was reached and nothing reported it"
    if not reached(venvs[0], spec.fault):
        check_trained(model, spec)


FAULT_ARGS = {
    # NaN / inf observations only in float spaces: SB3's VecEnvs cast them into integer ones before any algorithm
    # sees them (docs/troubleshooting.md)
    "spec": env_specs(SUPPORTED_OBS, SUPPORTED_ACTIONS, fault=faults(60).filter(lambda f: f is not None)).filter(
        lambda spec: _float_box_obs(spec) or spec.fault.kind not in ("nan_obs", "inf_obs")
    ),
    "seed": st.integers(0, 2**16),
}


@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(FAST, max_examples=10)
@given(**FAULT_ARGS)
def test_faults_fail_early_naming_the_problem(algo: type, spec: EnvSpec, seed: int) -> None:
    _faults(algo, spec, seed)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(SLOW, max_examples=100)
@given(**FAULT_ARGS)
def test_faults_fail_early_naming_the_problem_slow(algo: type, spec: EnvSpec, seed: int) -> None:
    _faults(algo, spec, seed)


@st.composite
def wrapper_cases(draw: Any, max_envs: int = 8, subproc: st.SearchStrategy[bool] | None = None) -> dict[str, Any]:
    image = draw(st.booleans())
    obs = spaces.Box(0, 255, (4, 4, 3), np.uint8) if image else draw(box_spaces("obs").filter(lambda s: s.shape != ()))
    spec = draw(env_specs(st.just(obs), SUPPORTED_ACTIONS))
    return {
        "spec": spec,
        "n_envs": draw(st.integers(1, max_envs)),
        "subproc": draw(subproc if subproc is not None else st.booleans()),
        "normalize": draw(st.booleans()),
        "n_stack": draw(st.sampled_from([0, 0, 2, 3])),
        "transpose": image and draw(st.booleans()),
    }


def _wrappers(algo: type, case: dict[str, Any], seed: int) -> None:
    spec = case["spec"]
    venv = make_venv(spec, case["n_envs"], case["subproc"])
    try:
        if case["transpose"]:
            venv = VecTransposeImage(venv)
        if case["n_stack"]:
            venv = VecFrameStack(venv, case["n_stack"])
        if case["normalize"]:
            venv = VecNormalize(venv)
        model = check_outcome(lambda: learn(build(algo, spec, venv=venv, seed=seed)), [])
        for name, parameter in model.policy.named_parameters():
            assert th.isfinite(parameter).all(), f"parameter {name} is not finite"
        assert not [a for actions in venv.get_attr("bad_actions") for a in actions]
        obs = venv.reset()
        actions, _ = model.predict(obs)
        assert len(actions) == case["n_envs"]
        if isinstance(model, PATH_REPLAY) and not case["n_stack"] and not case["transpose"]:
            check_replay_matches_played(model, spec)  # the replay holds the raw observations and rewards
    finally:
        venv.close()


@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(FAST, max_examples=6)
@given(case=wrapper_cases(max_envs=3, subproc=st.just(False)), seed=st.integers(0, 2**16))
def test_wrappers(algo: type, case: dict[str, Any], seed: int) -> None:
    _wrappers(algo, case, seed)


@pytest.mark.parametrize("algo", [PCL, Reinforce], ids=["PCL", "Reinforce"])
@settings(FAST, max_examples=1)
@given(case=wrapper_cases(max_envs=2, subproc=st.just(True)), seed=st.integers(0, 2**16))
def test_wrappers_over_subproc_vec_env(algo: type, case: dict[str, Any], seed: int) -> None:
    _wrappers(algo, case, seed)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(SLOW, max_examples=25)
@given(case=wrapper_cases(), seed=st.integers(0, 2**31))
def test_wrappers_slow(algo: type, case: dict[str, Any], seed: int) -> None:
    _wrappers(algo, case, seed)


class StopAfter(BaseCallback):
    """Stops training after ``n_calls`` steps."""

    def __init__(self, n_calls: int):
        super().__init__()
        self.limit = n_calls

    def _on_step(self) -> bool:
        return self.n_calls < self.limit


def _predictions(model: Any, observations: Any, recurrent: bool) -> np.ndarray:
    if not recurrent:
        return model.predict(observations, deterministic=True)[0]
    n = len(observations)
    starts = np.ones(n, dtype=bool)
    actions, state = model.predict(observations, state=None, episode_start=starts, deterministic=True)
    actions2, _ = model.predict(observations, state=state, episode_start=np.zeros(n, dtype=bool), deterministic=True)
    return np.concatenate([np.asarray(actions), np.asarray(actions2)])


def _sequences(algo: type, spec: EnvSpec, stop_at: int, n_envs: int, tmp_path: Any, seed: int) -> None:
    model = learn(build(algo, spec, seed=seed), STEPS, callback=StopAfter(stop_at))
    stopped_at = model.num_timesteps
    assert stopped_at <= STEPS + 2 * ALGOS[algo][1].get("max_steps", 1) * 2
    learn(model, STEPS, reset_num_timesteps=False)
    assert model.num_timesteps >= max(stopped_at, STEPS)
    recurrent = issubclass(algo, RecurrentPCL) or "Lstm" in ALGOS[algo][0]
    observations = np.stack([spec.observation_space.sample() for _ in range(3)])
    path = tmp_path / "model.zip"
    model.save(path)
    loaded = algo.load(path, env=make_venv(spec, n_envs))  # another number of envs
    np.testing.assert_array_equal(_predictions(loaded, observations, recurrent), _predictions(model, observations, recurrent))
    assert loaded.num_timesteps == model.num_timesteps
    if isinstance(model, PATH_REPLAY):
        model.save_replay_buffer(tmp_path / "replay")
        size = model.buffer_size
        larger = build(algo, spec, buffer_size=2 * size)
        larger.load_replay_buffer(tmp_path / "replay")
        for key in ("rewards", "dones", "timeouts", "env_idx", "path_ids"):
            np.testing.assert_array_equal(larger.replay_buffer.transitions()[key], model.replay_buffer.transitions()[key])
        smaller = build(algo, spec, buffer_size=size // 2)
        with pytest.raises(ValueError, match=f"larger than this model's buffer_size={size // 2}"):
            smaller.load_replay_buffer(tmp_path / "replay")
    if isinstance(model, PATH_REPLAY):
        check_episodes_into_other_sizes(algo, spec, model, tmp_path)
    # the loaded model trains on, after set_env too; SB3's set_env refuses another number of envs or other spaces
    learn(loaded, STEPS // 2, reset_num_timesteps=False)
    loaded.set_env(make_venv(spec, n_envs))
    learn(loaded, STEPS // 2, reset_num_timesteps=False)
    check_trained(loaded, spec, stored=False)  # the replay also holds the steps of the env given to load
    with pytest.raises(AssertionError, match="number of environments to be set is different"):
        loaded.set_env(make_venv(spec, n_envs + 1))
    other = replace(spec, observation_space=spaces.Box(-1.0, 1.0, (7,), np.float32))
    with pytest.raises(ValueError, match="Observation spaces do not match"):
        loaded.set_env(make_venv(other, n_envs))


def check_episodes_into_other_sizes(algo: type, spec: EnvSpec, model: Any, tmp_path: Any) -> None:
    """The episodes an env played, saved and loaded, seed a replay with room for them whole, and are refused by one without."""
    episodes = [
        {
            "observations": np.stack([np.asarray(obs) for obs in episode["obs"]]),
            "actions": np.stack(episode["actions"]),
            "rewards": np.asarray(episode["rewards"], dtype=np.float64),
            "terminated": episode["terminated"],
            "truncated": episode["truncated"] and not episode["terminated"],
        }
        for episode in model.env.get_attr("episodes")[0]
        if episode["terminated"] or episode["truncated"]
    ]
    if not episodes:
        return
    save_episodes(tmp_path / "episodes.npz", episodes)
    loaded = load_episodes(tmp_path / "episodes.npz")
    n_steps = sum(len(episode["rewards"]) for episode in episodes)
    roomy = build(algo, spec, buffer_size=n_steps + 8)
    assert roomy.add_demonstrations(loaded) == len(episodes)
    assert roomy.replay_buffer.n_seeded_transitions == n_steps
    seeded = roomy.replay_buffer.transitions()
    expected = np.concatenate([episode["rewards"] for episode in episodes]).astype(np.float32)
    np.testing.assert_array_equal(seeded["rewards"], expected)
    if n_steps > 1:
        cramped = build(algo, spec, buffer_size=n_steps - 1)
        with pytest.raises(ValueError, match="room for"):
            cramped.add_demonstrations(loaded)


SEQUENCE_SPECS = env_specs(
    st.one_of(box_spaces("obs").filter(lambda s: s.shape != ()), st.just(spaces.Discrete(3))),
    SUPPORTED_ACTIONS,
    honours_seed=st.booleans(),
)


@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(FAST, max_examples=3)
@given(spec=SEQUENCE_SPECS, stop_at=st.integers(1, 40), n_envs=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_call_sequences(algo: type, spec: EnvSpec, stop_at: int, n_envs: int, tmp_path_factory: Any, seed: int) -> None:
    _sequences(algo, spec, stop_at, n_envs, tmp_path_factory.mktemp("seq"), seed)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALL, ids=IDS)
@settings(SLOW, max_examples=30)
@given(spec=SEQUENCE_SPECS, stop_at=st.integers(1, 80), n_envs=st.integers(1, 8), seed=st.integers(0, 2**31))
def test_call_sequences_slow(algo: type, spec: EnvSpec, stop_at: int, n_envs: int, tmp_path_factory: Any, seed: int) -> None:
    _sequences(algo, spec, stop_at, n_envs, tmp_path_factory.mktemp("seq"), seed)


# ----------------------------------------------------------------------------------------------
# the oracle itself can fail
# ----------------------------------------------------------------------------------------------
def test_the_oracle_rejects_a_wrong_exception_and_an_unreported_fault() -> None:
    with pytest.raises(AssertionError, match="unexpected RuntimeError"):
        check_outcome(lambda: (_ for _ in ()).throw(RuntimeError("inside torch")), [Problem(ValueError, "x")])
    with pytest.raises(AssertionError, match="unexpected ValueError"):
        check_outcome(lambda: (_ for _ in ()).throw(ValueError("other")), [Problem(ValueError, "reward")])
    spec = EnvSpec(spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Discrete(2), fault=Fault("obs_dtype", 1))
    problems, must_report = fault_problems(spec)
    assert not must_report and problems
    venv = make_venv(spec)
    venv.reset()
    venv.step(np.zeros(2, dtype=np.int64))
    assert reached(venv, spec.fault)
