"""
Synchronized episode batches, which Reinforce and UREX (and their recurrent variants) learn from (their losses:
:mod:`sb3_pcl.reinforce.losses`).

Synchronized batches
    :func:`collect_episode_batch` plays the ``n_groups * K`` episodes of a batch: ``K`` episodes from each of
    ``n_groups`` start states, episode ``j`` reset with the seed ``base_seed + j // K`` so that the ``K``
    copies of a group share the start state and the env's random stream. When ``K`` divides the VecEnv's
    ``n_envs`` (the fast path), the ``n_envs / K`` groups of ``K`` consecutive envs play side by side in one
    pass. Otherwise (a single env, or ``n_envs`` not a multiple of ``K``) the envs play several passes, each
    env one episode per pass, and the copies of a group are played one after another from resets with the
    same seed (:func:`batch_layout`); the batch has the same structure either way.
    SB3 VecEnvs take per-env reset seeds only through ``VecEnv.seed(seed)``, which gives env ``i`` the
    seed ``seed + i``; :func:`set_reset_seeds` writes a list of seeds into the same slot that ``seed()``
    fills (``VecEnv._seeds``, passed to each env's ``reset(seed=...)`` at the next ``reset()``), which works
    for ``DummyVecEnv``, ``SubprocVecEnv`` and through any ``VecEnvWrapper``. SB3 VecEnvs reset an env
    automatically when its episode ends: everything an env does after its first ``done`` of the pass
    is masked out, and a pass stops when every env is done or after ``max_steps`` steps (the
    unfinished episodes are cut there and still used). The checks of seeded resets compare the env's own
    observations, before a ``VecNormalize`` (whose statistics change with every reset).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import PyTorchObs
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize

from sb3_pcl.common.actions import to_env_actions
from sb3_pcl.common.dict_obs import ObsDict, as_obs_arrays, copy_obs, flat_rows, stack_obs
from sb3_pcl.common.validation import check, check_storable, is_int

__all__ = [
    "EpisodeBatch",
    "GroupSyncError",
    "PlayStep",
    "StepRecord",
    "UnseedableEnvError",
    "batch_layout",
    "check_group_sync",
    "check_num_samples",
    "check_seeded_resets",
    "collect_episode_batch",
    "group_seeds",
    "original_observations",
    "set_reset_seeds",
]


class GroupSyncError(ValueError):
    """The ``K`` copies of a group did not start from the same observation (or reset info)."""


class UnseedableEnvError(GroupSyncError):
    """The env's ``reset(seed=...)`` does not determine its first observation: two resets with the same seeds differ."""


#: Largest base seed drawn for a batch (keeps ``base_seed + n_groups`` a valid 32-bit seed).
MAX_SEED = 2**31 - 1


# ----------------------------------------------------------------------------------------------
# Synchronized resets
# ----------------------------------------------------------------------------------------------
def check_num_samples(num_samples: int) -> None:
    """
    :param num_samples: ``K``, episodes per start state
    :raises ValueError: unless ``K`` is an integer ``>= 2``
    """
    check(
        is_int(num_samples) and num_samples >= 2,
        "num_samples",
        num_samples,
        "an integer >= 2 (the K-sample baseline needs K episodes per start state)",
    )


def batch_layout(n_envs: int, num_samples: int) -> tuple[int, int]:
    """
    How the ``n_groups * K`` episodes of a batch are played on the ``n_envs`` envs of a VecEnv.

    Episode (slot) ``j`` of a batch is sample ``j % K`` of group ``j // K``; every env plays one episode per
    pass, env ``i`` slot ``pass * n_envs + i`` in pass ``pass``. When ``K`` divides ``n_envs`` this is one pass
    of ``n_envs / K`` groups playing side by side (the fast path). Otherwise the batch takes the fewest passes
    that hold at least ``max(n_envs, K)`` episodes, filled with as many whole groups as fit: with one env, the
    ``K`` samples of one start state are played one after another; with 3 envs and ``K = 2``, 3 groups in 2
    passes. Envs left without a slot in the last pass step along, masked out of the batch.

    :param n_envs: number of envs of the VecEnv
    :param num_samples: ``K``, episodes per start state
    :return: ``(n_groups, n_passes)``
    :raises ValueError: unless ``K`` is an integer ``>= 2``
    """
    check_num_samples(num_samples)
    n_episodes = -(-n_envs // num_samples) * num_samples
    n_passes = -(-n_episodes // n_envs)
    return n_passes * n_envs // num_samples, n_passes


def group_seeds(base_seed: int, n_envs: int, num_samples: int) -> list[int]:
    """
    :param base_seed: seed of the first group
    :param n_envs: number of envs (or of episodes, for a batch of several passes)
    :param num_samples: ``K``, envs per group
    :return: the reset seed of each env, ``base_seed + i // K``
    """
    return [int(base_seed) + i // num_samples for i in range(n_envs)]


def _pass_slots(n_envs: int, n_groups: int, num_samples: int, pass_index: int) -> np.ndarray:
    """:return: ``(n_envs,)`` the slot (episode of the batch) each env plays in a pass, -1 where it plays none"""
    slots = np.arange(pass_index * n_envs, (pass_index + 1) * n_envs)
    slots[slots >= n_groups * num_samples] = -1
    return slots


def _pass_seeds(base_seed: int, slots: np.ndarray, num_samples: int) -> list[int]:
    """:return: the reset seed of each env in a pass (an env without a slot: the seed of the pass's last group)"""
    last_slot = int(slots.max()) if slots.max() >= 0 else 0
    return [int(base_seed) + int(slot if slot >= 0 else last_slot) // num_samples for slot in slots]


def set_reset_seeds(env: VecEnv, seeds: Sequence[int]) -> None:
    """
    Seed each env of a VecEnv for its next reset.

    ``VecEnv.seed(seed)`` stores ``seed + i`` for env ``i`` and the next ``reset()`` passes it to env ``i``'s
    ``reset(seed=...)``; this stores an arbitrary list in the same place.

    :param env: the VecEnv (wrappers are looked through)
    :param seeds: one seed per env
    """
    base = env.unwrapped
    if len(seeds) != base.num_envs:
        raise ValueError(f"expected {base.num_envs} seeds (one per env), got {len(seeds)}")
    base._seeds = [int(seed) for seed in seeds]


def _same(a: Any, b: Any) -> bool:
    """Equality of reset-info values; values other than numbers, strings, arrays and dicts of them are ignored."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    comparable = (int, float, bool, str, np.ndarray, np.generic, list, tuple)
    if isinstance(a, comparable) and isinstance(b, comparable):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))  # NaN equals NaN here
        except TypeError:  # equal_nan on non-numeric values
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except ValueError:
            return True
    return True


def check_group_sync(
    obs: np.ndarray,
    num_samples: int,
    reset_infos: Sequence[dict[str, Any]] | None = None,
    sequential: bool = False,
) -> None:
    """
    Check that the ``K`` episodes of every group start from the same observation (and reset info).

    :param obs: first observations ``(n_groups * K, ...)`` after seeded resets (a dict of such arrays for a Dict
        space), one per episode in slot order; compare the env's own observations (:func:`original_observations`),
        not normalised ones
    :param num_samples: ``K``
    :param reset_infos: the reset infos of the episodes (``VecEnv.reset_infos``), compared too when given
    :param sequential: whether the copies of a group were played one after another (several passes): the message
        then says that the env must not carry state from one episode to the next
    :raises GroupSyncError: naming the first groups whose envs differ
    """
    rows = flat_rows(obs)
    n_envs = len(rows)
    grouped = rows.reshape(n_envs // num_samples, num_samples, -1)
    bad = [int(g) for g in np.flatnonzero(~np.all(grouped == grouped[:, :1], axis=(1, 2)))]
    what = "first observations"
    if not bad and reset_infos is not None:
        what = "reset infos"
        bad = [
            g
            for g in range(n_envs // num_samples)
            if not all(_same(reset_infos[g * num_samples], reset_infos[g * num_samples + k]) for k in range(num_samples))
        ]
    if bad:
        passes = (
            " With n_envs not a multiple of num_samples, the copies of a group are played one after another, each "
            "from a reset with the group's seed: an env whose start state changes from one episode to the next (a "
            "curriculum that advances) cannot be used so; use n_envs a multiple of num_samples."
            if sequential
            else ""
        )
        raise GroupSyncError(
            f"the env cannot be reset to a given seed: after reset(seed=s), the {num_samples} copies of groups {bad[:5]} "
            f"have different {what}. UREX and Reinforce need envs whose reset(seed=...) fully determines the start "
            "state and the env's randomness (seed self.np_random through super().reset(seed=seed), no other state "
            "carried across episodes). Envs with a curriculum (the algorithmic tasks of sb3_pcl.envs) promote each env "
            "on its own, so their curricula drift apart: make all envs share one by wrapping the VecEnv in "
            f"sb3_pcl.envs.SharedCurriculum(venv, first_episode_only=True).{passes}"
        )


def _array_obs(obs: Any) -> np.ndarray:
    if isinstance(obs, tuple):
        raise ValueError("Tuple observations are not supported by the episode batches")
    return as_obs_arrays(obs)  # an ObsDict for Dict observations


def original_observations(env: VecEnv, obs: Any) -> np.ndarray:
    """
    The last observations of a VecEnv as its envs produced them.

    A ``VecNormalize`` in the wrapper chain normalises with statistics that change at every reset and step in
    training mode, so two resets with the same seeds return different normalised observations: the checks of
    seeded resets compare what the innermost ``VecNormalize`` received (``get_original_obs()``).

    :param env: the VecEnv (wrappers are looked through)
    :param obs: the observations ``env`` last returned
    :return: the observations before the innermost ``VecNormalize``, else ``obs`` (an
        :class:`~sb3_pcl.common.dict_obs.ObsDict` for Dict observations)
    """
    normalize = None
    wrapper: VecEnv = env
    while isinstance(wrapper, VecEnvWrapper):
        if isinstance(wrapper, VecNormalize):
            normalize = wrapper
        wrapper = wrapper.venv
    return _array_obs(obs if normalize is None else normalize.get_original_obs())


def _check_complete_groups(
    first_obs: list[np.ndarray], reset_infos: list[dict[str, Any]], num_samples: int, sequential: bool
) -> None:
    """:func:`check_group_sync` on the groups whose ``K`` episodes have all been reset (rows of :func:`flat_rows`)."""
    complete = len(first_obs) // num_samples * num_samples
    if complete:
        check_group_sync(np.stack(first_obs[:complete]), num_samples, reset_infos[:complete], sequential)


def check_seeded_resets(env: VecEnv, num_samples: int, base_seed: int) -> np.ndarray:
    """
    Reset twice with the seeds of a batch's first pass: the groups of the pass must be synchronized and both
    resets must agree (compared on the env's own observations, :func:`original_observations`; with fewer envs
    than ``K``, this is what playing a group's copies one after another relies on).

    :param env: the VecEnv
    :param num_samples: ``K``
    :param base_seed: seed of the first group
    :return: the observations (as ``env`` returns them) of the second reset
    :raises UnseedableEnvError: when two resets with the same seeds differ (checked first: the reset ignores the seed)
    :raises GroupSyncError: when the resets agree but the groups do not start identically (e.g. curricula that drifted)
    """
    n_groups, n_passes = batch_layout(env.num_envs, num_samples)
    slots = _pass_slots(env.num_envs, n_groups, num_samples, 0)
    seeds = _pass_seeds(base_seed, slots, num_samples)
    used = np.flatnonzero(slots >= 0)
    observations = []
    reset_infos = []
    obs = np.empty(0)
    for _ in range(2):
        set_reset_seeds(env, seeds)
        obs = _array_obs(env.reset())
        # A copy: a wrapper may return the same buffer at every reset (VecFrameStack's stack), which the next
        # reset overwrites, and two references to one buffer always compare equal.
        observations.append(copy_obs(original_observations(env, obs)))
        reset_infos.append([dict(info) for info in env.unwrapped.reset_infos])
    if not np.array_equal(flat_rows(observations[0]), flat_rows(observations[1])):
        raise UnseedableEnvError(
            "the env cannot be reset to a given seed: two resets with the same seeds gave different first observations "
            "(the reset ignores its seed, draws from np.random or an unseeded space, or carries state from one episode "
            "to the next)"
        )
    for original, infos in zip(observations, reset_infos, strict=True):
        _check_complete_groups(list(flat_rows(original)[used]), [infos[i] for i in used], num_samples, n_passes > 1)
    return obs


# ----------------------------------------------------------------------------------------------
# Episode batches
# ----------------------------------------------------------------------------------------------
@dataclass
class EpisodeBatch:
    """
    One episode per slot (``n_groups * K`` episodes, sample ``j % K`` of group ``j // K`` in slot ``j``),
    time-major and padded to the longest one.

    :param observations: ``(T, N, *obs_shape)`` observation before each step (float32 for float observations; for a
        Dict space an :class:`~sb3_pcl.common.dict_obs.ObsDict` of such arrays, one per key)
    :param actions: ``(T, N, *action_shape)`` actions as sampled by the policy (before clipping to a ``Box``)
    :param rewards: ``(T, N)`` rewards
    :param mask: ``(T, N)``, 1 on the steps of each episode, 0 after its end or the ``max_steps`` cap
    :param episode_starts: ``(T, N)`` episode-start flags fed to the policy (1 at ``t = 0`` and after each ``done``)
    :param log_probs: ``(T, N)`` log-probabilities of the actions at collection time
    :param ended: ``(N,)`` whether the episode ended within the batch (``False``: cut by ``max_steps``)
    :param terminated: ``(N,)`` whether it ended in a terminal state (not a time-limit truncation, not cut)
    :param final_observations: ``(N, *obs_shape)`` observation after the last valid step (per key for a Dict space)
    :param seeds: ``(N,)`` reset seed of each episode
    :param num_samples: ``K``, episodes per start state
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    mask: np.ndarray
    episode_starts: np.ndarray
    log_probs: np.ndarray
    ended: np.ndarray
    terminated: np.ndarray
    final_observations: np.ndarray
    seeds: np.ndarray
    num_samples: int

    @property
    def n_steps(self) -> int:
        """Padded length ``T``."""
        return int(self.mask.shape[0])

    @property
    def n_envs(self) -> int:
        """Number of episodes ``N`` (the number of envs when the batch is played in one pass)."""
        return int(self.mask.shape[1])

    @property
    def n_groups(self) -> int:
        """Number of distinct start states ``N / K``."""
        return self.n_envs // self.num_samples

    @property
    def lengths(self) -> np.ndarray:
        """``(N,)`` episode lengths."""
        return self.mask.sum(axis=0).astype(np.int64)

    @property
    def returns(self) -> np.ndarray:
        """``(N,)`` total rewards."""
        return np.where(self.mask > 0, self.rewards, 0.0).sum(axis=0)


#: the fields of :class:`EpisodeBatch` that are ``(T, N, ...)`` and ``(N, ...)`` arrays
_STEP_FIELDS = ("observations", "actions", "rewards", "mask", "episode_starts", "log_probs")
_EPISODE_FIELDS = ("ended", "terminated", "final_observations", "seeds")


class StepRecord(NamedTuple):
    """What :func:`collect_episode_batch` reports to its ``on_step`` hook after each vectorised step."""

    #: actions sampled by the policy
    actions: np.ndarray
    #: actions sent to the env (clipped to a ``Box``)
    env_actions: np.ndarray
    new_obs: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    infos: list[dict[str, Any]]
    #: ``(n_envs,)`` whether the step belongs to the env's episode of the batch
    valid: np.ndarray
    #: ``(n_envs,)`` the episode of the batch (slot) each env plays in this pass, -1 where it plays none
    slots: np.ndarray


StepHook = Callable[[StepRecord], bool]

#: one step of a policy that carries a state from step to step: ``(obs, state, episode_starts) -> (actions, log_probs,
#: next state)``, with the observations as tensors on the policy's device, ``state`` what the previous step returned
#: (``None`` at the first step of a pass) and ``episode_starts`` ``(n_envs,)``, 1.0 where an env starts an episode
PlayStep = Callable[[PyTorchObs, Any, np.ndarray], tuple[th.Tensor, th.Tensor, Any]]

_FINITE_HINT = (
    "Reinforce and UREX train on finite rewards and observations only: check the env (SB3's VecCheckNan wrapper "
    "raises at the step that produces the value)."
)


def _stored_obs(obs: Any, what: str = "observation") -> np.ndarray:
    """:return: observations as the batch stores them (float32 for floats), refusing values not finite there"""
    observations = _array_obs(obs)
    if isinstance(observations, ObsDict):
        return ObsDict({key: _stored_array(value, f"{what} {key!r}") for key, value in observations.items()})  # type: ignore[return-value]
    return _stored_array(observations, what)


def _stored_array(array: np.ndarray, what: str) -> np.ndarray:
    dtype = np.float32 if array.dtype.kind == "f" else array.dtype
    return check_storable(array, dtype, what, "env index", _FINITE_HINT)


def _step_rewards(rewards: Any, n_envs: int) -> np.ndarray:
    """
    :param rewards: the rewards a VecEnv's ``step`` returned
    :param n_envs: its number of envs
    :return: them as an ``(n_envs,)`` array (also from ``(n_envs, 1)``, as wrappers that keep a trailing axis return)
    :raises ValueError: naming the shape unless there is one reward per env
    """
    array = np.asarray(rewards)
    if array.ndim == 0 or array.shape[0] != n_envs or array.size != n_envs:
        raise ValueError(
            f"the VecEnv's step returned rewards of shape {array.shape}: expected one scalar reward per env, shape "
            f"({n_envs},) (or ({n_envs}, 1)); a vector reward must be reduced to a scalar in the env (e.g. its sum)"
        )
    return array.reshape(n_envs)


def _play_pass(
    env: VecEnv,
    policy: ActorCriticPolicy,
    obs: np.ndarray,
    max_steps: int,
    seeds: Sequence[int],
    slots: np.ndarray,
    num_samples: int,
    on_step: StepHook | None,
    play_step: PlayStep | None,
) -> EpisodeBatch | None:
    """
    Play one episode in every env with a slot, from the observations of a seeded reset.

    :return: the pass's episodes, one per env in env order (an env without a slot: fully masked), or ``None`` when
        ``on_step`` aborted it
    """
    n_envs = env.num_envs
    state: Any = None  # what the policy carries from one step to the next (a recurrent state)
    action_space = policy.action_space
    policy.set_training_mode(False)

    observations: list[np.ndarray] = []
    actions: list[np.ndarray] = []
    rewards: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    log_probs: list[np.ndarray] = []
    final_observations = copy_obs(obs)
    alive = slots >= 0  # an env without a slot plays nothing the batch uses
    ended = np.zeros(n_envs, dtype=bool)
    terminated = np.zeros(n_envs, dtype=bool)
    episode_starts = np.ones(n_envs, dtype=np.float32)

    while alive.any() and len(masks) < max_steps:
        with th.no_grad():
            obs_tensor = obs_as_tensor(obs, policy.device)
            if play_step is None:
                sampled, _, log_prob = policy(obs_tensor)
            else:
                sampled, log_prob, state = play_step(obs_tensor, state, episode_starts)
        sampled_actions = sampled.cpu().numpy()
        env_actions = to_env_actions(policy, action_space, sampled_actions)
        raw_new_obs, step_rewards, dones, infos = env.step(env_actions)
        new_obs = _stored_obs(raw_new_obs)

        valid = alive.copy()
        observations.append(copy_obs(obs))
        actions.append(sampled_actions)
        step_rewards = _step_rewards(step_rewards, n_envs)
        rewards.append(check_storable(step_rewards, np.float32, "reward", "env index", _FINITE_HINT))
        masks.append(valid.astype(np.float32))
        starts.append(episode_starts)
        log_probs.append(log_prob.cpu().numpy().astype(np.float32))

        finished = valid & dones
        terminals = [i for i in np.flatnonzero(finished) if infos[i].get("terminal_observation") is not None]
        if terminals:
            ends = copy_obs(_array_obs(raw_new_obs))
            for i in terminals:
                ends[i] = infos[i]["terminal_observation"]
            final_observations[terminals] = _stored_obs(ends, "terminal observation")[terminals]
        for i in np.flatnonzero(finished):
            if i not in terminals:
                final_observations[i] = new_obs[i]
            terminated[i] = not infos[i].get("TimeLimit.truncated", False)
        ended |= finished
        alive &= ~dones

        if on_step is not None and not on_step(
            StepRecord(sampled_actions, env_actions, new_obs, np.asarray(step_rewards), dones, infos, valid, slots)
        ):
            return None
        obs = new_obs
        episode_starts = np.asarray(dones, dtype=np.float32)

    for i in np.flatnonzero(alive):
        final_observations[i] = obs[i]

    return EpisodeBatch(
        observations=stack_obs(observations),
        actions=np.stack(actions),
        rewards=np.stack(rewards),
        mask=np.stack(masks),
        episode_starts=np.stack(starts),
        log_probs=np.stack(log_probs),
        ended=ended,
        terminated=terminated,
        final_observations=final_observations,
        seeds=np.asarray(seeds, dtype=np.int64),
        num_samples=num_samples,
    )


def _merge_passes(passes: list[EpisodeBatch], pass_slots: list[np.ndarray], n_episodes: int) -> EpisodeBatch:
    """:return: the batch whose slot ``j`` holds the episode the passes played in slot ``j``, padded to the longest"""
    n_steps = max(played.n_steps for played in passes)
    merged: dict[str, Any] = {}
    for name in (*_STEP_FIELDS, *_EPISODE_FIELDS):
        step_field = name in _STEP_FIELDS
        values = [getattr(played, name) for played in passes]
        if isinstance(values[0], ObsDict):
            merged[name] = ObsDict(
                {
                    key: _merge_field([value[key] for value in values], pass_slots, n_steps, n_episodes, step_field)
                    for key in values[0]
                }
            )
        else:
            merged[name] = _merge_field(values, pass_slots, n_steps, n_episodes, step_field)
    return EpisodeBatch(**merged, num_samples=passes[0].num_samples)


def _merge_field(
    values: list[np.ndarray], pass_slots: list[np.ndarray], n_steps: int, n_episodes: int, step_field: bool
) -> np.ndarray:
    """:return: one field of :func:`_merge_passes`: the passes' arrays ``values`` (``(T, N, ...)`` or ``(N, ...)``) merged"""
    first = values[0]
    shape = (n_steps, n_episodes, *first.shape[2:]) if step_field else (n_episodes, *first.shape[1:])
    merged = np.zeros(shape, dtype=first.dtype)
    for value, slots in zip(values, pass_slots, strict=True):
        used = slots >= 0
        if step_field:
            merged[: len(value), slots[used]] = value[:, used]
        else:
            merged[slots[used]] = value[used]
    return merged


def collect_episode_batch(
    env: VecEnv,
    policy: ActorCriticPolicy,
    num_samples: int,
    max_steps: int,
    base_seed: int,
    on_step: StepHook | None = None,
    check_sync: bool = True,
    play_step: PlayStep | None = None,
) -> EpisodeBatch | None:
    """
    Play the ``n_groups * K`` episodes of a batch from synchronized start states with a stochastic policy.

    The episodes are laid out by :func:`batch_layout`: in one pass when ``K`` divides ``n_envs`` (the ``K``
    envs of a group play side by side), else in several passes (a group's copies one after another, each from
    a reset with the group's seed). Every reward and observation is converted to the batch's dtype (float32
    for floats) and refused when it is not finite there.

    :param env: a VecEnv, of any number of envs
    :param policy: the policy that plays (an SB3 ``ActorCriticPolicy``, or an sb3-contrib ``RecurrentActorCriticPolicy``
        with ``play_step``)
    :param num_samples: ``K``, episodes per start state
    :param max_steps: cap on the number of steps of each pass (the batch's padded length is at most this)
    :param base_seed: episode ``j`` is played from a reset with seed ``base_seed + j // K``
    :param on_step: called after every vectorised step; returning ``False`` aborts the batch
    :param check_sync: check that the groups start from identical observations and reset infos (the env's own
        observations, before a ``VecNormalize``: :func:`original_observations`)
    :param play_step: how the policy samples the actions of one step when it carries a state from step to step (a
        recurrent policy: :meth:`sb3_pcl.RecurrentReinforce._play_step`); ``None``: ``policy(obs)``, each step on its
        own
    :return: the batch, or ``None`` when ``on_step`` aborted it
    :raises ValueError: for an invalid ``num_samples`` or ``max_steps``, a non-finite (or float32-overflowing)
        reward or observation (naming the env index), or groups that do not start identically
    """
    n_groups, n_passes = batch_layout(env.num_envs, num_samples)
    check(is_int(max_steps) and max_steps >= 1, "max_steps", max_steps, "an integer >= 1")
    n_envs = env.num_envs
    first_obs: list[np.ndarray] = []
    first_infos: list[dict[str, Any]] = []
    passes: list[EpisodeBatch] = []
    pass_slots: list[np.ndarray] = []
    for pass_index in range(n_passes):
        slots = _pass_slots(n_envs, n_groups, num_samples, pass_index)
        seeds = _pass_seeds(base_seed, slots, num_samples)
        set_reset_seeds(env, seeds)
        obs = _stored_obs(env.reset())
        if check_sync:
            used = np.flatnonzero(slots >= 0)
            infos = env.unwrapped.reset_infos
            first_obs.extend(flat_rows(original_observations(env, obs))[used])
            first_infos.extend(infos[i] for i in used)
            _check_complete_groups(first_obs, first_infos, num_samples, n_passes > 1)
        played = _play_pass(env, policy, obs, max_steps, seeds, slots, num_samples, on_step, play_step)
        if played is None:
            return None
        passes.append(played)
        pass_slots.append(slots)
    if n_passes == 1 and n_groups * num_samples == n_envs:
        return passes[0]
    return _merge_passes(passes, pass_slots, n_groups * num_samples)
