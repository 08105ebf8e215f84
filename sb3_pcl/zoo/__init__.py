"""
rl-zoo3 plugin: train, tune (Optuna) and run our algorithms with rl-zoo3's scripts.

``python -m sb3_pcl.zoo.train`` / ``python -m sb3_pcl.zoo.enjoy`` (console scripts
``sb3-pcl-train`` / ``sb3-pcl-enjoy``) accept every rl-zoo3 option; ``python -m sb3_pcl.zoo <command>`` runs any
of rl-zoo3's commands (``record_video``, ``record_training``, ``push_to_hub``, the plots, ...) with our algorithms.
From Python, call :func:`register_algorithms` before rl-zoo3's ``train()`` / ``enjoy()`` or ``ExperimentManager``.
Needs the ``zoo`` extra (``pip install -e ".[zoo]"`` in the sb3_pcl checkout).
"""

try:
    import rl_zoo3  # noqa: F401  # the scripts below wrap it
except ModuleNotFoundError as error:  # rl-zoo3 itself or one of its dependencies
    raise ImportError(
        f"sb3_pcl.zoo needs the zoo extra (rl-zoo3 and Optuna); {error.name!r} is not installed: "
        'pip install -e ".[zoo]" in the sb3_pcl checkout'
    ) from error

from sb3_pcl.zoo.register import default_conf_file, register_algorithms
from sb3_pcl.zoo.samplers import CONVERTERS, SAMPLERS

__all__ = ["CONVERTERS", "SAMPLERS", "default_conf_file", "register_algorithms"]
