"""
rl-zoo3's ``train`` with our algorithms: ``python -m sb3_pcl.zoo.train --algo pcl --env CartPole-v1 [rl-zoo3 options]``.

Every option of ``python -m rl_zoo3.train`` is accepted unchanged (``--algo ppo|a2c|trpo|...``
too). For our algorithms (the keys of :data:`sb3_pcl.ALGOS`) the hyperparameters come from our
``hyperparams/<algo>.yml`` (shipped in the package) unless ``-conf/--conf-file`` is given; rl-zoo3's
own files stay in effect for its algorithms.
"""

import argparse
import sys
from collections.abc import Sequence

import rl_zoo3.train

import sb3_pcl
from sb3_pcl.zoo.register import default_conf_file, run_zoo_command
from sb3_pcl.zoo.samplers import SAMPLERS


def _peek_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """
    Read the few options of rl-zoo3's ``train`` that decide our defaults, ignoring all others.

    The option strings are rl-zoo3's (same abbreviation rules), so what is read here is what
    rl-zoo3 reads.

    :param argv: the command-line arguments
    :return: ``algo``, ``conf_file``, ``optimize`` and ``num_threads``
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("-conf", "--conf-file", default=None)
    parser.add_argument("-optimize", "--optimize-hyperparameters", dest="optimize", action="store_true")
    parser.add_argument("--num-threads", type=int, default=None)
    known, _ = parser.parse_known_args(list(argv))
    return known


def with_default_conf_file(argv: Sequence[str]) -> list[str]:
    """
    Add ``--conf-file <our hyperparams/<algo>.yml>`` for our algorithms when no config is given.

    :param argv: rl-zoo3 ``train`` arguments
    :return: the arguments to pass on (unchanged for rl-zoo3's algorithms or an explicit ``--conf-file``)
    :raises SystemExit: for one of our algorithms without a yml file, or with ``--optimize`` but no sampler
    """
    args = list(argv)
    known = _peek_arguments(args)
    if known.algo not in sb3_pcl.ALGOS:
        return args
    if known.optimize and known.algo not in SAMPLERS:
        raise SystemExit(f"sb3_pcl: no Optuna sampler for {known.algo!r}; add one to sb3_pcl.zoo.samplers.SAMPLERS")
    if known.conf_file is not None:
        return args
    conf_file = default_conf_file(known.algo)
    if not conf_file.is_file():
        raise SystemExit(f"sb3_pcl: {conf_file} does not exist; add hyperparams/{known.algo}.yml or pass --conf-file")
    return [*args, "--conf-file", str(conf_file)]


def with_default_threads(argv: Sequence[str]) -> list[str]:
    """
    Add ``--num-threads 1`` for our algorithms when no thread count is given: their networks are small, and on CPU
    one torch thread trains them fastest (``benchmarks/results/speed``); rl-zoo3's default keeps torch's own count.

    :param argv: rl-zoo3 ``train`` arguments
    :return: the arguments to pass on (unchanged for rl-zoo3's algorithms or an explicit ``--num-threads``)
    """
    args = list(argv)
    known = _peek_arguments(args)
    if known.algo not in sb3_pcl.ALGOS or known.num_threads is not None:
        return args
    return [*args, "--num-threads", "1"]


def main(argv: Sequence[str] | None = None) -> None:
    """
    Register our algorithms, then run rl-zoo3's ``train`` (training or ``--optimize`` search).

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    """
    args = with_default_conf_file(sys.argv[1:] if argv is None else argv)
    run_zoo_command(rl_zoo3.train.train, with_default_threads(args))


if __name__ == "__main__":
    main()
