"""
rl-zoo3's ``record_video`` with our algorithms: ``python -m sb3_pcl.zoo.record_video --algo pcl --env CartPole-v1 -f logs``.

Every option of ``python -m rl_zoo3.record_video`` is accepted unchanged; the video of the latest run (``--exp-id``,
``--load-best``, ``--load-checkpoint N`` for others) goes to ``<run folder>/videos`` unless ``-o`` names a folder.
The env must render ``rgb_array`` frames (the classic-control tasks need ``pip install "gymnasium[classic-control]"``).
"""

import sys
from collections.abc import Sequence

from sb3_pcl.zoo.register import run_zoo_script


def main(argv: Sequence[str] | None = None) -> None:
    """
    Register our algorithms, then run rl-zoo3's ``record_video`` script.

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    """
    run_zoo_script("rl_zoo3.record_video", sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
