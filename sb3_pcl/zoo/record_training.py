"""
A video of training: ``python -m sb3_pcl.zoo.record_training --algo pcl --env CartPole-v1 -f logs``.

The options are those of ``python -m rl_zoo3.record_training``. Each checkpoint of the run (``rl_model_<steps>_steps.zip``,
written with rl-zoo3's ``--save-freq``), then the final and the best model, is recorded with
``python -m sb3_pcl.zoo.record_video``; the clips are joined in that order into ``<video folder>/training.mp4``
(``--gif`` also writes ``training.gif``). rl-zoo3's own script cannot be reused as it is: it starts
``python -m rl_zoo3.record_video``, which does not know our algorithms.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rl_zoo3.utils import get_latest_run_id

from sb3_pcl.zoo.register import register_algorithms

#: a checkpoint file of rl-zoo3's ``--save-freq``, and its step count
CHECKPOINT = re.compile(r"rl_model_(\d+)_steps\.zip")


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """
    :param argv: the command-line arguments
    :return: the options, as rl-zoo3's ``record_training`` reads them
    """
    register_algorithms()
    import rl_zoo3

    parser = argparse.ArgumentParser(prog="python -m sb3_pcl.zoo.record_training", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--env", help="environment ID", type=str, default="CartPole-v1")
    parser.add_argument("-f", "--folder", help="log folder", type=str, default="rl-trained-agents")
    parser.add_argument("-o", "--output-folder", help="video folder (default: <run folder>/videos)", type=str)
    parser.add_argument("--algo", help="RL algorithm", default="pcl", type=str, choices=sorted(rl_zoo3.ALGOS))
    parser.add_argument("-n", "--n-timesteps", help="steps recorded per model", default=1000, type=int)
    parser.add_argument("--n-envs", help="number of environments", default=1, type=int)
    parser.add_argument("--deterministic", action="store_true", default=False, help="use deterministic actions")
    parser.add_argument("-g", "--gif", action="store_true", default=False, help="also write training.gif")
    parser.add_argument("--seed", help="random generator seed", type=int, default=0)
    parser.add_argument("--exp-id", help="experiment ID (default: 0: latest, -1: no exp folder)", default=0, type=int)
    args = parser.parse_args(list(argv))
    if args.n_timesteps < 1 or args.n_envs < 1:
        parser.error(f"-n/--n-timesteps and --n-envs must be positive, got {args.n_timesteps} and {args.n_envs}")
    return args


def models_to_record(log_path: Path, env_id: str) -> list[tuple[str, list[str]]]:
    """
    :param log_path: the run folder
    :param env_id: the environment ID (the final model is ``<env_id>.zip``)
    :return: ``(label, record_video options)`` of each checkpoint by step count, then the final and the best model
    """
    checkpoints = sorted(int(match[1]) for path in log_path.iterdir() if (match := CHECKPOINT.fullmatch(path.name)))
    models = [(f"checkpoint {steps}", ["--load-checkpoint", str(steps)]) for steps in checkpoints]
    if (log_path / f"{env_id}.zip").is_file():
        models.append(("final model", []))
    if (log_path / "best_model.zip").is_file():
        models.append(("best model", ["--load-best"]))
    return models


def join_videos(paths: Sequence[Path], output: Path, gif: bool) -> None:
    """
    :param paths: the clips, in order
    :param output: the joined ``.mp4``
    :param gif: also write the video as ``<output>.gif`` (10 frames per second)
    """
    from moviepy import VideoFileClip, concatenate_videoclips

    clips = [VideoFileClip(str(path)) for path in paths]
    try:
        joined = concatenate_videoclips(clips)
        joined.write_videofile(str(output), logger=None)
        if gif:
            joined.write_gif(str(output.with_suffix(".gif")), fps=10, logger=None)
    finally:
        for clip in clips:
            clip.close()


def main(argv: Sequence[str] | None = None) -> Path:
    """
    Record every saved model of a run and join the videos.

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: the path of ``training.mp4``
    :raises SystemExit: when the run folder has no model or a recording fails
    """
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    exp_id = args.exp_id
    if exp_id == 0:
        exp_id = get_latest_run_id(os.path.join(args.folder, args.algo), args.env)
        print(f"Loading latest experiment, id={exp_id}")
    log_path = Path(args.folder, args.algo, f"{args.env}_{exp_id}" if exp_id > 0 else "")
    if not log_path.is_dir():
        raise SystemExit(f"sb3_pcl.zoo.record_training: the run folder {log_path} does not exist")
    models = models_to_record(log_path, args.env)
    if not models:
        raise SystemExit(f"sb3_pcl.zoo.record_training: {log_path} has no final model, best model or checkpoint")
    video_folder = Path(args.output_folder) if args.output_folder else log_path / "videos"
    shutil.rmtree(video_folder, ignore_errors=True)
    video_folder.mkdir(parents=True)
    common = ["--env", args.env, "--algo", args.algo, "--exp-id", str(exp_id), "-f", args.folder, "-n", str(args.n_timesteps)]
    common += ["--n-envs", str(args.n_envs), "--seed", str(args.seed), "--no-render"]
    if args.deterministic:
        common.append("--deterministic")
    clips = []
    for label, options in models:
        clip_folder = video_folder / label.replace(" ", "_")
        command = [sys.executable, "-m", "sb3_pcl.zoo.record_video", *common, *options, "-o", str(clip_folder)]
        if subprocess.run(command, check=False).returncode != 0:
            raise SystemExit(f"sb3_pcl.zoo.record_training: recording the {label} failed: {' '.join(command)}")
        recorded = sorted(clip_folder.glob("*.mp4"))
        if not recorded:
            raise SystemExit(f"sb3_pcl.zoo.record_training: recording the {label} wrote no video in {clip_folder}")
        clips.append(recorded[-1])
    output = video_folder / "training.mp4"
    join_videos(clips, output, args.gif)
    print(f"Saving video to {output.resolve()} ({len(clips)} clips: {', '.join(label for label, _ in models)})")
    return output


if __name__ == "__main__":
    main()
