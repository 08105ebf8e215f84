"""
Register our algorithms with rl-zoo3.

rl-zoo3 has no plugin registry: its scripts look algorithms up in the dict ``rl_zoo3.ALGOS``
and Optuna samplers in ``rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER`` (stored trials are
converted back with ``HYPERPARAMS_CONVERTER``). Following rl-zoo3's own guide for external
algorithms (SBX), :func:`register_algorithms` inserts every entry of :data:`sb3_pcl.ALGOS` and
of :data:`sb3_pcl.zoo.samplers.SAMPLERS` / :data:`~sb3_pcl.zoo.samplers.CONVERTERS` into these dicts.
"""

import runpy
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import rl_zoo3
import rl_zoo3.hyperparams_opt

import sb3_pcl
from sb3_pcl.hyperparams_files import hyperparams_dir
from sb3_pcl.zoo.samplers import CONVERTERS, SAMPLERS


def _insert(registry: dict[str, Any], name: str, value: Any, what: str, overwrite: bool) -> None:
    """
    Put ``value`` under ``name`` unless another value is registered there.

    :param registry: one of rl-zoo3's dicts
    :param name: the algorithm name
    :param value: the class / function to register
    :param what: the dict's name, for the error message
    :param overwrite: replace another value registered under ``name`` instead of raising
    """
    current = registry.get(name)
    if current is not None and current is not value and not overwrite:
        raise ValueError(
            f"rl-zoo3 already has {what}[{name!r}] = {current!r}; "
            "call register_algorithms(overwrite=True) to replace it with sb3_pcl's"
        )
    registry[name] = value


def register_algorithms(overwrite: bool = False) -> list[str]:
    """
    Make our algorithms available to rl-zoo3's ``train`` / ``enjoy`` / Optuna search.

    Idempotent: calling it again changes nothing. Iterates over :data:`sb3_pcl.ALGOS`, so an
    algorithm added there is registered too (its sampler when :data:`~sb3_pcl.zoo.samplers.SAMPLERS`
    has one).

    :param overwrite: replace entries of the same name that are not ours (default: raise ``ValueError``)
    :return: the registered algorithm names
    """
    for name, algo_class in sb3_pcl.ALGOS.items():
        _insert(rl_zoo3.ALGOS, name, algo_class, "rl_zoo3.ALGOS", overwrite)
        if name in SAMPLERS:
            _insert(rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER, name, SAMPLERS[name], "HYPERPARAMS_SAMPLER", overwrite)
        if name in CONVERTERS:
            converters = rl_zoo3.hyperparams_opt.HYPERPARAMS_CONVERTER
            _insert(converters, name, CONVERTERS[name], "HYPERPARAMS_CONVERTER", overwrite)
    return sorted(sb3_pcl.ALGOS)


def default_conf_file(algo: str) -> Path:
    """
    :param algo: one of our algorithm names (a key of :data:`sb3_pcl.ALGOS`)
    :return: our ``<algo>.yml`` (the copy shipped in the package, or the repository's in a checkout)
    """
    return hyperparams_dir() / f"{algo}.yml"


def run_zoo_command(command: Callable[[], None], argv: Sequence[str] | None = None) -> None:
    """
    Run one of rl-zoo3's command-line functions (they parse ``sys.argv``) with our algorithms registered.

    :param command: e.g. ``rl_zoo3.train.train`` or ``rl_zoo3.enjoy.enjoy``
    :param argv: the arguments (default: ``sys.argv[1:]``)
    """
    register_algorithms()
    if argv is None:
        command()
        return
    saved_argv = sys.argv
    sys.argv = [saved_argv[0] if saved_argv else "sb3_pcl.zoo", *argv]
    try:
        command()
    finally:
        sys.argv = saved_argv


def run_zoo_script(module: str, argv: Sequence[str] | None = None) -> None:
    """
    Run one of rl-zoo3's script modules (those that work only as ``python -m rl_zoo3.<name>``, such as
    ``rl_zoo3.record_video``) as ``__main__``, with our algorithms registered.

    :param module: e.g. ``"rl_zoo3.record_video"``
    :param argv: the arguments (default: ``sys.argv[1:]``)
    """

    def run() -> None:
        runpy.run_module(module, run_name="__main__", alter_sys=True)

    run_zoo_command(run, argv)
