"""
One curriculum shared by all the envs of a VecEnv, as in gym <= 0.17.2.

The algorithmic tasks of :mod:`sb3_pcl.envs.algorithmic` keep their curriculum (``min_length`` and the
list of recent reward shortfalls) per instance. In gym <= 0.17.2, the releases the original UREX and PCL
code trained with, both were class attributes: every env of a task in the process recorded its episodes
in one list and all envs were promoted together. :class:`SharedCurriculum` restores that, across
processes too (``SubprocVecEnv``): it reads each finished episode's ``info["shortfall"]``, keeps one list
of the last ``last`` shortfalls for the whole VecEnv and pushes every promotion to all envs.

Algorithms that reset groups of envs with identical seeds (:class:`~sb3_pcl.Reinforce`, :class:`~sb3_pcl.UREX` and
their recurrent variants) need it: per-instance curricula drift apart, and the copies of a group then
draw inputs of different lengths from the same seed. Wrap their VecEnv yourself (the algorithms never import
this package)::

    venv = SharedCurriculum(make_vec_env("sb3_pcl/Copy-v0", n_envs=400), first_episode_only=True)
    model = RecurrentUREX("MlpPrevActionLstmPolicy", venv, num_samples=10)
    model.learn(5_000_000, callback=CurriculumLogCallback())  # logs rollout/min_length

In an rl-zoo3 YAML file: ``vec_env_wrapper: [{sb3_pcl.envs.SharedCurriculum: {first_episode_only: true}}]`` and
``callback: sb3_pcl.envs.CurriculumLogCallback``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, unwrap_vec_wrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

__all__ = ["CurriculumLogCallback", "SharedCurriculum", "curriculum_length", "has_curriculum"]


def has_curriculum(venv: VecEnv) -> bool:
    """
    :param venv: A VecEnv (wrappers are looked through, by SB3's ``has_attr``).
    :return: Whether its envs have a curriculum :class:`SharedCurriculum` can drive (``curriculum_settings``
        and ``set_min_length`` methods, e.g. the algorithmic tasks).
    """
    return venv.has_attr("curriculum_settings") and venv.has_attr("set_min_length")


class SharedCurriculum(VecEnvWrapper):
    """
    Drive the curricula of all envs of a VecEnv as one, as gym <= 0.17.2 did with class attributes.

    At every episode end whose step info carries a ``"shortfall"`` (total reward - len(target); the
    algorithmic tasks add it to the step that ends an episode), the shortfall is appended to one list
    keeping the last ``last`` values for the whole VecEnv. When that list is full, its minimum is
    ``>= min_reward_threshold`` and ``min_length < max_min_length``, ``min_length`` is increased by one,
    the list is cleared and the new length is sent to every env with ``env_method("set_min_length", n)``;
    each env uses it from its next reset. The envs' own curricula are switched off at construction (the
    wrapper calls ``set_min_length(min_length, external=True)`` on all of them), so they record nothing
    themselves, including gym's first-reset phantom episode: the shared list starts empty.

    The settings come from the envs' ``curriculum_settings()`` (they must agree) unless given here; the
    starting ``min_length`` is the smallest current ``min_length`` of the envs. Works with ``DummyVecEnv``
    and ``SubprocVecEnv`` and with other ``VecEnvWrapper``\\ s below or above. Logs nothing.

    :param venv: The VecEnv of algorithmic tasks (or of any envs with ``curriculum_settings`` and
        ``set_min_length`` methods).
    :param first_episode_only: Count only the first episode each env ends after each ``reset()`` of the
        VecEnv. The episode-batch collectors of Reinforce and UREX reset all envs before each batch and
        discard the episodes SB3's automatic resets start afterwards; the original code did not play them
        at all. The batch's shortfalls are then recorded in env order (not in the order the episodes end),
        once every env has ended its episode or at the next ``reset()``: gym appended a shortfall when an env
        was reset, and the original code reset its envs one after the other. In the order of ending, failed
        episodes, which end early, would come first and the last ``last`` episodes of each batch would be the
        longest, mostly successful ones: promotion would be too easy. ``False`` (default): every episode counts,
        in the order the episodes end, as with a usual SB3 training loop.
    :param last: Number of recent shortfalls considered for promotion (default: the envs' ``last``).
    :param min_reward_threshold: A promotion needs the worst recent shortfall to be at least this value
        (default: the envs' setting).
    :param min_length: Starting curriculum length (default: the smallest ``min_length`` of the envs).
    """

    def __init__(
        self,
        venv: VecEnv,
        first_episode_only: bool = False,
        last: int | None = None,
        min_reward_threshold: float | None = None,
        min_length: int | None = None,
    ) -> None:
        super().__init__(venv)
        if not has_curriculum(venv):
            raise TypeError(
                "SharedCurriculum needs envs with curriculum_settings() and set_min_length() methods, "
                "e.g. the algorithmic tasks of sb3_pcl.envs"
            )
        settings: list[dict[str, Any]] = venv.env_method("curriculum_settings")
        self.last = int(last if last is not None else self._common(settings, "last"))
        self.min_reward_threshold = float(
            min_reward_threshold if min_reward_threshold is not None else self._common(settings, "min_reward_threshold")
        )
        self.max_min_length = int(self._common(settings, "max_min_length"))
        if self.last < 1:
            raise ValueError(f"last must be >= 1, got {self.last}")
        self.first_episode_only = bool(first_episode_only)
        self.reward_shortfalls: list[float] = []
        self._counting = np.ones(self.num_envs, dtype=bool)
        # first_episode_only: the shortfalls of the current batch, per env (NaN: none yet), recorded in env order
        self._pending = np.full(self.num_envs, np.nan)
        self._min_length = 0
        self.set_min_length(min(int(s["min_length"]) for s in settings) if min_length is None else min_length)

    @staticmethod
    def _common(settings: list[dict[str, Any]], key: str) -> Any:
        """
        :param settings: The ``curriculum_settings()`` of the envs.
        :param key: A setting.
        :return: Its value, the same in every env.
        :raises ValueError: When the envs disagree.
        """
        values = {setting[key] for setting in settings}
        if len(values) != 1:
            raise ValueError(f"the envs have different curriculum settings {key}={sorted(values)}; pass {key}= explicitly")
        return values.pop()

    @property
    def min_length(self) -> int:
        """The shared curriculum length."""
        return self._min_length

    def set_min_length(self, min_length: int) -> None:
        """
        Set the shared curriculum length, clear the list of recent shortfalls and send the length to every env
        (used from its next reset).

        :param min_length: The new length (>= 1).
        """
        if isinstance(min_length, bool) or not isinstance(min_length, (int, np.integer)) or min_length < 1:
            raise ValueError(f"min_length must be an integer >= 1, got {min_length!r}")
        self._min_length = int(min_length)
        self.reward_shortfalls = []
        self._pending[:] = np.nan
        self._send_min_length()

    def _send_min_length(self) -> None:
        """Send the shared length to every env (each uses it from its next reset)."""
        self.venv.env_method("set_min_length", self._min_length, external=True)

    def record_shortfall(self, shortfall: float) -> bool:
        """
        Append a finished episode's shortfall to the shared list (without sending a promotion to the envs).

        :param shortfall: Total reward of the episode minus the length of its target.
        :return: Whether the curriculum was promoted.
        """
        self.reward_shortfalls.append(float(shortfall))
        self.reward_shortfalls = self.reward_shortfalls[-self.last :]
        if (
            len(self.reward_shortfalls) == self.last
            and min(self.reward_shortfalls) >= self.min_reward_threshold
            and self._min_length < self.max_min_length
        ):
            self._min_length += 1
            self.reward_shortfalls = []
            return True
        return False

    def _flush_pending(self) -> bool:
        """
        Record the pending shortfalls of ``first_episode_only`` in env order.

        :return: Whether the curriculum was promoted.
        """
        promoted = False
        for shortfall in self._pending[~np.isnan(self._pending)]:
            promoted |= self.record_shortfall(float(shortfall))
        self._pending[:] = np.nan
        return promoted

    def reset(self) -> VecEnvObs:
        """:return: The first observations (``first_episode_only``: every env's next episode end counts again)."""
        if self._flush_pending():
            self._send_min_length()
        obs = self.venv.reset()
        self._counting[:] = True
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        """Step the envs, record the episodes that ended and push a promotion to all envs."""
        obs, rewards, dones, infos = self.venv.step_wait()
        promoted = False
        for index in np.flatnonzero(dones):
            shortfall = infos[index].get("shortfall")
            if self._counting[index] and shortfall is not None:
                if self.first_episode_only:
                    self._pending[index] = float(shortfall)
                else:
                    promoted |= self.record_shortfall(shortfall)
            if self.first_episode_only:
                self._counting[index] = False
        if self.first_episode_only and not self._counting.any():
            promoted |= self._flush_pending()
        if promoted:
            self._send_min_length()
        return obs, rewards, dones, infos


def curriculum_length(venv: VecEnv) -> float | None:
    """
    :param venv: A VecEnv (wrappers are looked through).
    :return: The curriculum length (``min_length``) of its envs: the shared one when a :class:`SharedCurriculum`
        wraps it, else the mean of the envs' own lengths; ``None`` when its envs have no curriculum.
    """
    shared = unwrap_vec_wrapper(venv, SharedCurriculum)
    if isinstance(shared, SharedCurriculum):
        return shared.min_length
    if not has_curriculum(venv):
        return None
    return float(np.mean(venv.get_attr("min_length")))


class CurriculumLogCallback(BaseCallback):
    """
    Log the curriculum length of the training env (:func:`curriculum_length`) as ``rollout/min_length`` at the end
    of every rollout: every batch of Reinforce and UREX, every collection of PCL. Logs nothing for envs without a
    curriculum.

    :param verbose: Verbosity level: 0 for no output, 1 for info messages, 2 for debug messages.
    """

    #: The logged key.
    KEY = "rollout/min_length"

    def __init__(self, verbose: int = 0) -> None:
        super().__init__(verbose)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        length = curriculum_length(self.training_env)
        if length is not None:
            self.logger.record(self.KEY, length)
