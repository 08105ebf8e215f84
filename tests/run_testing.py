"""Helpers of the tests of benchmark runs (pytest puts ``tests/`` on the path: ``import run_testing``)."""

from stable_baselines3.common.callbacks import BaseCallback


class Crash(RuntimeError):
    """A run stopped mid-way, as by a killed process."""


class CrashAt(BaseCallback):
    """Raise :class:`Crash` at the first env step at or past ``steps``.

    :param steps: The step count at which the run stops
    """

    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.steps:
            raise Crash(f"stopped at {self.num_timesteps}")
        return True
