"""
rl-zoo3's ``enjoy`` with our algorithms: ``python -m sb3_pcl.zoo.enjoy --algo pcl --env CartPole-v1 -f logs``.

Every option of ``python -m rl_zoo3.enjoy`` is accepted unchanged; the model, its saved
``config.yml`` and VecNormalize statistics are read from the rl-zoo3 log folder written by
``python -m sb3_pcl.zoo.train``.
"""

import sys
from collections.abc import Sequence

import rl_zoo3.enjoy

from sb3_pcl.zoo.register import run_zoo_command


def main(argv: Sequence[str] | None = None) -> None:
    """
    Register our algorithms, then run rl-zoo3's ``enjoy`` (load a trained agent and run it).

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    """
    run_zoo_command(rl_zoo3.enjoy.enjoy, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
