"""
rl-zoo3 plugin: train, tune (Optuna) and run our algorithms with rl-zoo3's scripts.

``python -m sb3_pcl.zoo.train`` / ``python -m sb3_pcl.zoo.enjoy`` (console scripts
``sb3-pcl-train`` / ``sb3-pcl-enjoy``) accept every rl-zoo3 option. From Python, call
:func:`register_algorithms` before rl-zoo3's ``train()`` / ``enjoy()`` or ``ExperimentManager``.
Needs the ``zoo`` extra (``pip install "sb3-pcl[zoo]"``).
"""

from sb3_pcl.zoo.register import default_conf_file, register_algorithms
from sb3_pcl.zoo.samplers import CONVERTERS, SAMPLERS

__all__ = ["CONVERTERS", "SAMPLERS", "default_conf_file", "register_algorithms"]
