"""
rl-zoo3's commands with our algorithms: ``python -m sb3_pcl.zoo <command> [options]``.

The commands are rl-zoo3's (``python -m rl_zoo3.<command>`` or ``rl_zoo3 <command>``) and take the same options;
each one runs with :data:`sb3_pcl.ALGOS` registered, so ``--algo pcl`` works wherever ``--algo ppo`` does.
``python -m sb3_pcl.zoo --help`` lists the commands.
"""

import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def _train(argv: list[str]) -> None:
    from sb3_pcl.zoo.train import main

    main(argv)


def _enjoy(argv: list[str]) -> None:
    from sb3_pcl.zoo.enjoy import main

    main(argv)


def _record_video(argv: list[str]) -> None:
    from sb3_pcl.zoo.record_video import main

    main(argv)


def _record_training(argv: list[str]) -> None:
    from sb3_pcl.zoo.record_training import main

    main(argv)


def _push_to_hub(argv: list[str]) -> None:
    from sb3_pcl.zoo.push_to_hub import main

    main(argv)


def _load_from_hub(argv: list[str]) -> None:
    from sb3_pcl.zoo.register import run_zoo_script

    run_zoo_script("rl_zoo3.load_from_hub", argv)


#: our option of the plot commands: write every figure to this folder (rl-zoo3's plot_train and all_plots only show them)
SAVE_FIGURES = "--save-figures"


def split_save_figures(argv: list[str]) -> tuple[list[str], Path | None]:
    """
    :param argv: a plot command's arguments
    :return: them without ``--save-figures DIR``, and ``DIR`` (``None`` without the option)
    :raises SystemExit: when the option has no folder
    """
    if SAVE_FIGURES not in argv:
        return argv, None
    at = argv.index(SAVE_FIGURES)
    if at + 1 >= len(argv) or argv[at + 1].startswith("-"):
        raise SystemExit(f"{SAVE_FIGURES} needs a folder")
    return argv[:at] + argv[at + 2 :], Path(argv[at + 1])


def save_open_figures(folder: Path, prefix: str) -> list[Path]:
    """
    Write every open matplotlib figure to ``folder/<prefix>_<n>.png`` and close it.

    :return: the files written
    """
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number in plt.get_fignums():
        path = folder / f"{prefix}_{number}.png"
        plt.figure(number).savefig(path, bbox_inches="tight")
        written.append(path)
    plt.close("all")
    return written


def _plot(name: str) -> Callable[[list[str]], None]:
    def run(argv: list[str]) -> None:
        argv, folder = split_save_figures(argv)
        if folder is not None:  # headless too: draw off-screen and save where rl-zoo3 would show
            import matplotlib

            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import rl_zoo3.plots

        from sb3_pcl.zoo.register import run_zoo_command

        show = plt.show
        if folder is not None:
            plt.show = lambda *args, **kwargs: print("\n".join(f"saved {path}" for path in save_open_figures(folder, name)))
        try:
            run_zoo_command(getattr(rl_zoo3.plots, name), argv)
        finally:
            plt.show = show
        if folder is not None:  # the figures a command left open without showing them (all_plots --no-display)
            print("\n".join(f"saved {path}" for path in save_open_figures(folder, name)))

    return run


#: the commands: name -> (what it does, the function that runs it on its arguments)
COMMANDS: dict[str, tuple[str, Callable[[list[str]], None]]] = {
    "train": ("train, or tune with --optimize (rl_zoo3.train; our hyperparams/<algo>.yml by default)", _train),
    "enjoy": ("run a trained agent (rl_zoo3.enjoy)", _enjoy),
    "record_video": ("record a video of a trained agent (rl_zoo3.record_video)", _record_video),
    "record_training": ("one video of every checkpoint, the final and the best model", _record_training),
    "push_to_hub": ("evaluate, package and upload a model to the Hugging Face Hub", _push_to_hub),
    "load_from_hub": ("download a model from the Hugging Face Hub (rl_zoo3.load_from_hub)", _load_from_hub),
    "plot_train": ("plot training curves from the monitor files (rl_zoo3.plots.plot_train)", _plot("plot_train")),
    "all_plots": ("evaluation curves of several runs (rl_zoo3.plots.all_plots)", _plot("all_plots")),
    "plot_from_file": ("plots and tables from all_plots' output file (rl_zoo3.plots.plot_from_file)", _plot("plot_from_file")),
}


def usage() -> str:
    """:return: the help text listing the commands"""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (what, _) in COMMANDS.items()]
    plots = f"plot_train, all_plots, plot_from_file also take {SAVE_FIGURES} DIR: every figure as a PNG file in DIR"
    return "usage: python -m sb3_pcl.zoo <command> [options]\n\ncommands:\n" + "\n".join(lines) + f"\n\n{plots}"


def main(argv: Sequence[str] | None = None) -> None:
    """
    Run one command.

    :param argv: ``<command> [options]`` (default: ``sys.argv[1:]``)
    :raises SystemExit: without a command, or with an unknown one
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        raise SystemExit(0 if args else 2)
    command, *options = args
    if command not in COMMANDS:
        raise SystemExit(f"python -m sb3_pcl.zoo: unknown command {command!r}\n\n{usage()}")
    import sb3_pcl.zoo  # noqa: F401  # says which extra to install when rl-zoo3 is missing

    COMMANDS[command][1](options)


if __name__ == "__main__":
    main()
