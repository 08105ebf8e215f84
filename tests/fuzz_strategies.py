"""
Hypothesis strategies and the configurable env of the property-based tests (``tests/test_fuzz.py``).

:class:`FuzzEnv` plays whatever an :class:`EnvSpec` describes: its spaces, episode lengths, how episodes end, the
rewards' magnitude and type, the infos, whether its reset honours the seed, and at most one :class:`Fault` (an
exception, a non-finite or float32-overflowing value, an observation of another shape or dtype) at a given step.
Every env records what it played (per episode: observations, actions, rewards, how it ended) and every action it
received that is not in its action space, so that the properties can compare what an algorithm stored and learnt
from with what was played.
"""

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from hypothesis import strategies as st

#: the kinds of fault a :class:`FuzzEnv` can inject
FAULT_KINDS = ("raise", "nan_obs", "inf_obs", "nan_reward", "inf_reward", "huge_reward", "obs_shape", "obs_dtype")


class FuzzEnvError(RuntimeError):
    """What a :class:`FuzzEnv` raises for a ``"raise"`` fault: it must reach the caller unchanged."""


@dataclass(frozen=True)
class Fault:
    """One fault, injected at the ``at_step``-th step (counted over the env's whole life, from 1)."""

    kind: str
    at_step: int


@dataclass(frozen=True)
class EnvSpec:
    """What a :class:`FuzzEnv` plays."""

    observation_space: spaces.Space
    action_space: spaces.Space
    #: the episode lengths, cycled (episode ``i`` of an env has ``lengths[i % len(lengths)]`` steps)
    lengths: tuple[int, ...] = (5,)
    #: how an episode ends: ``"terminated"``, ``"truncated"`` or ``"both"`` flags set on its last step
    end: str = "terminated"
    reward_scale: float = 1.0
    #: the Python type of the rewards: ``"float"``, ``"int"``, ``"float32"`` (a NumPy scalar), ``"array"`` (0-d)
    reward_kind: str = "float"
    #: infos: ``"empty"``, ``"success"`` (``is_success`` at the end of an episode), ``"junk"`` (unusual keys and values)
    infos: str = "empty"
    honours_seed: bool = True
    fault: Fault | None = None


class FuzzEnv(gym.Env):
    """A Gymnasium env that plays an :class:`EnvSpec` (observations sampled from its observation space)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, spec: EnvSpec):
        self.fuzz_spec = spec
        self.observation_space = spec.observation_space
        self.action_space = spec.action_space
        self.total_steps = 0
        self.n_episodes = 0
        self.bad_actions: list[Any] = []
        #: the episodes played, each a dict of lists: ``obs`` (first observation, then one per step), ``actions``,
        #: ``rewards``, ``terminated``, ``truncated``
        self.episodes: list[dict[str, Any]] = []
        self._t = 0
        self._length = 1
        self._obs_rng = np.random.default_rng(0)

    # ------------------------------------------------------------------ helpers
    def _draw_obs(self) -> Any:
        seed = int(self._obs_rng.integers(2**31 - 1))
        self.observation_space.seed(seed)
        return self.observation_space.sample()

    def _fault_now(self) -> str | None:
        fault = self.fuzz_spec.fault
        return fault.kind if fault is not None and fault.at_step == self.total_steps else None

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        spec = self.fuzz_spec
        if spec.honours_seed:
            self._obs_rng = np.random.default_rng(int(self.np_random.integers(2**31 - 1)))
        else:
            self._obs_rng = np.random.default_rng(int(np.random.randint(2**31 - 1)))
        self._t = 0
        self._length = spec.lengths[self.n_episodes % len(spec.lengths)]
        self.n_episodes += 1
        obs = self._draw_obs()
        self.episodes.append({"obs": [obs], "actions": [], "rewards": [], "terminated": False, "truncated": False})
        info: dict[str, Any] = {"junk": object(), "list": [1, 2]} if spec.infos == "junk" else {}
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        spec = self.fuzz_spec
        self.total_steps += 1
        self._t += 1
        if not self._valid_action(action):
            self.bad_actions.append(action)
        fault = self._fault_now()
        if fault == "raise":
            raise FuzzEnvError(f"FuzzEnv fault at step {self.total_steps}")
        obs = self._draw_obs()
        reward: Any = spec.reward_scale * float(self._obs_rng.uniform(-1.0, 1.0))
        if fault in ("nan_obs", "inf_obs"):
            obs = _poison(obs, np.nan if fault == "nan_obs" else np.inf)
        elif fault == "obs_shape":
            obs = _reshaped(obs)
        elif fault == "obs_dtype":
            obs = _retyped(obs)
        if fault == "nan_reward":
            reward = float("nan")
        elif fault == "inf_reward":
            reward = float("inf")
        elif fault == "huge_reward":
            reward = 1e39
        reward = _typed_reward(reward, spec.reward_kind)
        done = self._t >= self._length
        terminated = done and spec.end in ("terminated", "both")
        truncated = done and spec.end in ("truncated", "both")
        info: dict[str, Any] = {}
        if spec.infos == "success" and done:
            info["is_success"] = bool(self._obs_rng.integers(2))
        elif spec.infos == "junk":
            info = {"junk": object(), "episode_note": "x", "nested": {"a": [1, 2]}}
        episode = self.episodes[-1]
        episode["obs"].append(obs)
        episode["actions"].append(np.array(action, copy=True))
        episode["rewards"].append(reward)
        episode["terminated"], episode["truncated"] = terminated, truncated
        return obs, reward, terminated, truncated, info

    def _valid_action(self, action: Any) -> bool:
        space = self.action_space
        if isinstance(space, spaces.Box):
            array = np.asarray(action)
            return array.shape == space.shape and bool(np.all(np.isfinite(array)))
        try:
            return bool(space.contains(np.asarray(action).astype(space.dtype) if space.dtype is not None else action))
        except (TypeError, ValueError):
            return False


def _poison(obs: Any, value: float) -> Any:
    if isinstance(obs, dict):
        key = next(iter(obs))
        return {**obs, key: _poison(obs[key], value)}
    array = np.array(obs, dtype=np.float64 if np.asarray(obs).dtype.kind != "f" else np.asarray(obs).dtype)
    array.reshape(-1)[:1] = value
    return array


def _reshaped(obs: Any) -> Any:
    if isinstance(obs, dict):
        key = next(iter(obs))
        return {**obs, key: _reshaped(obs[key])}
    array = np.asarray(obs)
    return np.concatenate([array.reshape(-1), array.reshape(-1)[:1]])  # one value more, flat


def _retyped(obs: Any) -> Any:
    if isinstance(obs, dict):
        key = next(iter(obs))
        return {**obs, key: _retyped(obs[key])}
    array = np.asarray(obs)
    return array.astype(np.float64 if array.dtype != np.float64 else np.float32)


def _typed_reward(reward: float, kind: str) -> Any:
    if kind == "int" and np.isfinite(reward) and abs(reward) < 2**62:
        return round(reward)
    if kind == "float32":
        with np.errstate(over="ignore"):
            return np.float32(reward)
    if kind == "array":
        return np.array(reward)
    return reward


# ----------------------------------------------------------------------------------------------
# strategies
# ----------------------------------------------------------------------------------------------
BOX_SHAPES = st.sampled_from([(), (1,), (3,), (2, 2), (2, 1, 2)])


@st.composite
def box_spaces(draw: Any, kind: str = "obs", dtypes: tuple[Any, ...] = (np.float32, np.float64)) -> spaces.Box:
    shape = draw(BOX_SHAPES)
    dtype = draw(st.sampled_from(dtypes))
    if kind == "action":
        low = draw(st.sampled_from([-1.0, -2.0, 0.0, -1e3]))
        high = low + draw(st.sampled_from([0.5, 1.0, 2.0, 1e3]))
    else:
        low, high = draw(st.sampled_from([(-1.0, 1.0), (0.0, 255.0), (-1e4, 1e4), (-np.inf, np.inf), (0.0, np.inf)]))
    return spaces.Box(low, high, shape=shape, dtype=dtype)


def discrete_spaces() -> st.SearchStrategy[spaces.Discrete]:
    return st.builds(spaces.Discrete, st.integers(2, 5), start=st.sampled_from([0, 0, 1, -3, 7]))


def multi_discrete_spaces() -> st.SearchStrategy[spaces.MultiDiscrete]:
    return st.lists(st.integers(2, 4), min_size=1, max_size=3).map(lambda nvec: spaces.MultiDiscrete(nvec))


def multi_binary_spaces() -> st.SearchStrategy[spaces.MultiBinary]:
    return st.integers(1, 4).map(spaces.MultiBinary)


def flat_spaces(kind: str) -> st.SearchStrategy[spaces.Space]:
    return st.one_of(box_spaces(kind), discrete_spaces(), multi_discrete_spaces(), multi_binary_spaces())


@st.composite
def dict_spaces(draw: Any, kind: str = "obs", nested: bool = False) -> spaces.Dict:
    keys = draw(st.lists(st.sampled_from(["a", "b", "pos", "img"]), min_size=1, max_size=3, unique=True))
    sub = {key: draw(flat_spaces(kind)) for key in keys}
    if nested:
        sub["inner"] = spaces.Dict({"x": draw(box_spaces(kind))})
    return spaces.Dict(sub)


def observation_spaces() -> st.SearchStrategy[spaces.Space]:
    return st.one_of(flat_spaces("obs"), flat_spaces("obs"), dict_spaces("obs"), dict_spaces("obs", nested=True))


def action_spaces() -> st.SearchStrategy[spaces.Space]:
    return st.one_of(flat_spaces("action"), flat_spaces("action"), dict_spaces("action"))


def faults(max_step: int = 60) -> st.SearchStrategy[Fault | None]:
    return st.one_of(st.none(), st.builds(Fault, st.sampled_from(FAULT_KINDS), st.integers(1, max_step)))


@st.composite
def env_specs(
    draw: Any,
    observation_space: st.SearchStrategy[spaces.Space] | None = None,
    action_space: st.SearchStrategy[spaces.Space] | None = None,
    max_length: int = 30,
    fault: st.SearchStrategy[Fault | None] | None = None,
    honours_seed: st.SearchStrategy[bool] | None = None,
) -> EnvSpec:
    return EnvSpec(
        observation_space=draw(observation_space if observation_space is not None else observation_spaces()),
        action_space=draw(action_space if action_space is not None else action_spaces()),
        lengths=tuple(draw(st.lists(st.integers(1, max_length), min_size=1, max_size=3))),
        end=draw(st.sampled_from(["terminated", "truncated", "both"])),
        reward_scale=draw(st.sampled_from([0.0, 1e-3, 1.0, 1e3, 1e6])),
        reward_kind=draw(st.sampled_from(["float", "int", "float32", "array"])),
        infos=draw(st.sampled_from(["empty", "success", "junk"])),
        honours_seed=draw(honours_seed if honours_seed is not None else st.booleans()),
        fault=draw(fault if fault is not None else st.none()),
    )
