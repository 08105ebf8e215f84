"""
Full-episode objectives (REINFORCE with entropy bonus, UREX) and synchronized episode batches.

Loss functions
    Small pure torch functions on ``(n_groups, K)`` tensors: row ``g`` holds the ``K`` episodes played
    from start state ``g``, ``R`` their total rewards, ``L`` their total log-probabilities (summed over
    steps and action components), ``tau`` the algorithms' ``ent_coef`` (entropy coefficient of MENT,
    temperature of UREX).

    ============================  =========================================================  ============================
    quantity                      definition                                                 function
    ============================  =========================================================  ============================
    MENT bonus (REINFORCE)        ``b = -tau * L``                                           :func:`ment_bonus`
    UREX bonus                    ``b = tau * K * softmax_K(R / tau - L)``                   :func:`urex_bonus`
    K-sample baseline             ``B_g = mean_k (R_gk + b_gk)``                             :func:`k_sample_baseline`
    policy loss                   ``mean_{g,k} -stopgrad(R_gk + b_gk - B_g) * L_gk``         :func:`full_episode_policy_loss`
    ============================  =========================================================  ============================

Synchronized batches
    :func:`collect_episode_batch` plays one episode in every env of a VecEnv whose ``n_envs = n_groups * K``
    envs form groups of ``K`` consecutive envs. Before each batch, env ``i`` is reset with the seed
    ``base_seed + i // K``: the ``K`` envs of a group share the start state and the env's random stream.
    SB3 VecEnvs take per-env reset seeds only through ``VecEnv.seed(seed)``, which gives env ``i`` the
    seed ``seed + i``; :func:`set_reset_seeds` writes a list of seeds into the same slot that ``seed()``
    fills (``VecEnv._seeds``, passed to each env's ``reset(seed=...)`` at the next ``reset()``), which works
    for ``DummyVecEnv``, ``SubprocVecEnv`` and through any ``VecEnvWrapper``. SB3 VecEnvs reset an env
    automatically when its episode ends: everything an env does after its first ``done`` of the batch
    is masked out, and the batch stops when every env is done or after ``max_steps`` steps (the
    unfinished episodes are cut there and still used).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch as th
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3_pcl.common.actions import to_env_actions
from sb3_pcl.common.recurrent import initial_recurrent_states
from sb3_pcl.common.validation import check, is_int, is_real

__all__ = [
    "EpisodeBatch",
    "StepRecord",
    "check_group_sync",
    "check_num_samples",
    "check_seeded_resets",
    "collect_episode_batch",
    "episode_totals",
    "full_episode_policy_loss",
    "group_seeds",
    "k_sample_baseline",
    "ment_bonus",
    "set_reset_seeds",
    "urex_bonus",
]

#: Largest base seed drawn for a batch (keeps ``base_seed + n_groups`` a valid 32-bit seed).
MAX_SEED = 2**31 - 1


# ----------------------------------------------------------------------------------------------
# Loss functions
# ----------------------------------------------------------------------------------------------
def episode_totals(x: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """
    Sum a time-major quantity over the valid steps of each episode.

    :param x: ``(T, N)`` per-step values (rewards or log-probabilities)
    :param mask: ``(T, N)``, 1 on the steps of each episode, 0 after it
    :return: ``(N,)`` totals (masked entries never contribute, even when they are not finite)
    """
    return th.where(mask > 0, x, th.zeros_like(x)).sum(dim=0)


def ment_bonus(total_log_probs: th.Tensor, ent_coef: float) -> th.Tensor:
    """
    Entropy bonus of REINFORCE with maximum-entropy regularisation (MENT): ``-tau * L``.

    :param total_log_probs: ``(n_groups, K)`` total log-probabilities ``L`` of the episodes
    :param ent_coef: ``tau``, the entropy coefficient
    :return: ``(n_groups, K)`` bonus
    """
    return -ent_coef * total_log_probs


def urex_bonus(total_rewards: th.Tensor, total_log_probs: th.Tensor, ent_coef: float) -> th.Tensor:
    """
    UREX bonus: ``tau * K * softmax_K(R / tau - L)``, the self-normalised importance weights of the
    ``K`` episodes of a group under ``exp(R / tau)``, scaled so that they average to ``tau``.

    :param total_rewards: ``(n_groups, K)`` total rewards ``R``
    :param total_log_probs: ``(n_groups, K)`` total log-probabilities ``L``
    :param ent_coef: ``tau``, the temperature, ``> 0``
    :return: ``(n_groups, K)`` bonus
    """
    check(is_real(ent_coef) and ent_coef > 0, "ent_coef", ent_coef, "> 0 for the UREX bonus")
    num_samples = total_rewards.shape[-1]
    return ent_coef * num_samples * th.softmax(total_rewards / ent_coef - total_log_probs, dim=-1)


def k_sample_baseline(rewards_and_bonus: th.Tensor) -> th.Tensor:
    """
    Non-parametric baseline: the mean of ``R + bonus`` over the ``K`` episodes of each group.

    :param rewards_and_bonus: ``(n_groups, K)``
    :return: ``(n_groups, 1)``
    """
    return rewards_and_bonus.mean(dim=-1, keepdim=True)


def full_episode_policy_loss(total_rewards: th.Tensor, total_log_probs: th.Tensor, bonus: th.Tensor) -> th.Tensor:
    """
    Policy-gradient surrogate ``mean_{g,k} -stopgrad(R + b - baseline) * L``, averaged over all episodes
    of the batch as in the original code.

    :param total_rewards: ``(n_groups, K)`` total rewards
    :param total_log_probs: ``(n_groups, K)`` total log-probabilities (the gradient flows through them)
    :param bonus: ``(n_groups, K)`` exploration bonus (``ment_bonus`` or ``urex_bonus``)
    :return: scalar loss
    """
    rewards_and_bonus = (total_rewards + bonus).detach()
    advantages = rewards_and_bonus - k_sample_baseline(rewards_and_bonus)
    return -(advantages * total_log_probs).mean()


# ----------------------------------------------------------------------------------------------
# Synchronized resets
# ----------------------------------------------------------------------------------------------
def check_num_samples(num_samples: int, n_envs: int) -> None:
    """
    :param num_samples: ``K``, episodes per start state
    :param n_envs: number of envs of the VecEnv
    :raises ValueError: unless ``K`` is an integer ``>= 2`` dividing ``n_envs``
    """
    check(
        is_int(num_samples) and num_samples >= 2,
        "num_samples",
        num_samples,
        "an integer >= 2 (the K-sample baseline needs K episodes per start state)",
    )
    check(
        n_envs % num_samples == 0,
        "num_samples",
        num_samples,
        f"a divisor of the number of envs (n_envs={n_envs}): each group of num_samples envs plays the same start "
        f"state; use e.g. make_vec_env(env_id, n_envs={num_samples} * n_start_states)",
    )


def group_seeds(base_seed: int, n_envs: int, num_samples: int) -> list[int]:
    """
    :param base_seed: seed of the first group
    :param n_envs: number of envs
    :param num_samples: ``K``, envs per group
    :return: the reset seed of each env, ``base_seed + i // K``
    """
    return [int(base_seed) + i // num_samples for i in range(n_envs)]


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
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except (TypeError, ValueError):
            return True
    return True


def check_group_sync(obs: np.ndarray, num_samples: int, reset_infos: Sequence[dict[str, Any]] | None = None) -> None:
    """
    Check that the ``K`` envs of every group start from the same observation (and reset info).

    :param obs: first observations ``(n_envs, ...)`` after a seeded reset
    :param num_samples: ``K``
    :param reset_infos: the reset infos of the envs (``VecEnv.reset_infos``), compared too when given
    :raises ValueError: naming the first groups whose envs differ
    """
    n_envs = len(obs)
    grouped = np.asarray(obs).reshape(n_envs // num_samples, num_samples, -1)
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
        raise ValueError(
            f"the env cannot be reset to a given seed: after reset(seed=s), the {num_samples} copies of groups {bad[:5]} "
            f"have different {what}. UREX and Reinforce need envs whose reset(seed=...) fully determines the start "
            "state and the env's randomness (seed self.np_random through super().reset(seed=seed), no other state "
            "carried across episodes). Envs with a curriculum (the algorithmic tasks of sb3_pcl.envs) promote each env "
            "on its own, so their curricula drift apart: make all envs share one by wrapping the VecEnv in "
            "sb3_pcl.envs.SharedCurriculum(venv, first_episode_only=True)"
        )


def _array_obs(obs: Any) -> np.ndarray:
    if isinstance(obs, (dict, tuple)):
        raise ValueError("Dict and Tuple observations are not supported by the episode batches")
    return np.asarray(obs)


def check_seeded_resets(env: VecEnv, num_samples: int, base_seed: int) -> np.ndarray:
    """
    Reset twice with the same group seeds: the groups must be synchronized and both resets must agree.

    :param env: the VecEnv
    :param num_samples: ``K``
    :param base_seed: seed of the first group
    :return: the observations of the second reset
    :raises ValueError: when the env cannot be reset to a given seed
    """
    check_num_samples(num_samples, env.num_envs)
    seeds = group_seeds(base_seed, env.num_envs, num_samples)
    observations = []
    for _ in range(2):
        set_reset_seeds(env, seeds)
        obs = _array_obs(env.reset())
        check_group_sync(obs, num_samples, env.unwrapped.reset_infos)
        observations.append(obs)
    if not np.array_equal(observations[0], observations[1]):
        raise ValueError(
            "the env cannot be reset to a given seed: two resets with the same seeds gave different first observations"
        )
    return observations[1]


# ----------------------------------------------------------------------------------------------
# Episode batches
# ----------------------------------------------------------------------------------------------
@dataclass
class EpisodeBatch:
    """
    One episode per env, time-major and padded to the longest one.

    :param observations: ``(T, N, *obs_shape)`` observation before each step
    :param actions: ``(T, N, *action_shape)`` actions as sampled by the policy (before clipping to a ``Box``)
    :param rewards: ``(T, N)`` rewards
    :param mask: ``(T, N)``, 1 on the steps of each env's episode, 0 after its end or the ``max_steps`` cap
    :param episode_starts: ``(T, N)`` episode-start flags fed to the policy (1 at ``t = 0`` and after each ``done``)
    :param log_probs: ``(T, N)`` log-probabilities of the actions at collection time
    :param ended: ``(N,)`` whether the episode ended within the batch (``False``: cut by ``max_steps``)
    :param terminated: ``(N,)`` whether it ended in a terminal state (not a time-limit truncation, not cut)
    :param final_observations: ``(N, *obs_shape)`` observation after the last valid step
    :param seeds: ``(N,)`` reset seed of each env
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
        """Number of episodes ``N``."""
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


StepHook = Callable[[StepRecord], bool]


def collect_episode_batch(
    env: VecEnv,
    policy: ActorCriticPolicy,
    num_samples: int,
    max_steps: int,
    base_seed: int,
    on_step: StepHook | None = None,
    check_sync: bool = True,
) -> EpisodeBatch | None:
    """
    Play one episode per env from synchronized start states with a stochastic policy.

    :param env: VecEnv of ``n_groups * K`` envs
    :param policy: an SB3 ``ActorCriticPolicy`` or an sb3-contrib ``RecurrentActorCriticPolicy`` (e.g. ``MlpLstmPolicy``)
    :param num_samples: ``K``, episodes per start state
    :param max_steps: cap on the number of steps of the batch
    :param base_seed: env ``i`` is reset with ``base_seed + i // K``
    :param on_step: called after every vectorised step; returning ``False`` aborts the batch
    :param check_sync: check that the groups start from identical observations and reset infos
    :return: the batch, or ``None`` when ``on_step`` aborted it
    """
    check_num_samples(num_samples, env.num_envs)
    check(is_int(max_steps) and max_steps >= 1, "max_steps", max_steps, "an integer >= 1")
    n_envs = env.num_envs
    seeds = group_seeds(base_seed, n_envs, num_samples)
    set_reset_seeds(env, seeds)
    obs = _array_obs(env.reset())
    if check_sync:
        check_group_sync(obs, num_samples, env.unwrapped.reset_infos)

    states: RNNStates | None = None
    if isinstance(policy, RecurrentActorCriticPolicy):
        states = initial_recurrent_states(policy, n_envs)
    action_space = policy.action_space
    policy.set_training_mode(False)

    observations: list[np.ndarray] = []
    actions: list[np.ndarray] = []
    rewards: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    log_probs: list[np.ndarray] = []
    final_observations = np.array(obs, copy=True)
    alive = np.ones(n_envs, dtype=bool)
    ended = np.zeros(n_envs, dtype=bool)
    terminated = np.zeros(n_envs, dtype=bool)
    episode_starts = np.ones(n_envs, dtype=np.float32)

    while alive.any() and len(masks) < max_steps:
        with th.no_grad():
            obs_tensor = obs_as_tensor(obs, policy.device)
            if states is not None:
                starts_tensor = th.as_tensor(episode_starts, dtype=th.float32, device=policy.device)
                sampled, _, log_prob, states = policy(obs_tensor, states, starts_tensor)
            else:
                sampled, _, log_prob = policy(obs_tensor)
        sampled_actions = sampled.cpu().numpy()
        env_actions = to_env_actions(policy, action_space, sampled_actions)
        raw_new_obs, step_rewards, dones, infos = env.step(env_actions)
        new_obs = _array_obs(raw_new_obs)

        valid = alive.copy()
        observations.append(np.array(obs, copy=True))
        actions.append(sampled_actions)
        rewards.append(np.asarray(step_rewards, dtype=np.float32))
        masks.append(valid.astype(np.float32))
        starts.append(episode_starts)
        log_probs.append(log_prob.cpu().numpy().astype(np.float32))

        finished = valid & dones
        for i in np.flatnonzero(finished):
            terminal = infos[i].get("terminal_observation")
            final_observations[i] = new_obs[i] if terminal is None else terminal
            terminated[i] = not infos[i].get("TimeLimit.truncated", False)
        ended |= finished
        alive &= ~dones

        if on_step is not None and not on_step(
            StepRecord(sampled_actions, env_actions, new_obs, np.asarray(step_rewards), dones, infos, valid)
        ):
            return None
        obs = new_obs
        episode_starts = np.asarray(dones, dtype=np.float32)

    for i in np.flatnonzero(alive):
        final_observations[i] = obs[i]

    return EpisodeBatch(
        observations=np.stack(observations),
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
