"""The command line of :mod:`benchmarks.campaign`: ``python -m benchmarks.campaign run | status | report | export-zoo``
(the campaign itself, its runs and their states, is the package; the report is :mod:`benchmarks.report`)."""

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import benchmarks.campaign
from benchmarks import backends, harness, store
from benchmarks.campaign import format_status, load_campaign, run_campaign, run_states
from benchmarks.checkpoint import BadFileError
from benchmarks.report import report_command, write_report


def build_parser() -> argparse.ArgumentParser:
    """:return: The argument parser of ``python -m benchmarks.campaign``"""
    description = (benchmarks.campaign.__doc__ or "").split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m benchmarks.campaign", description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the unfinished runs, resuming the partial ones")
    status = commands.add_parser("status", help="print done / stopped / partial / to do and the CPU-hours")
    report = commands.add_parser("report", help="write results.md and the plots from evaluations.csv")
    report.add_argument("--check", action="store_true", help="write nothing; exit 1 if a docs block differs from the data")
    status.add_argument("file", nargs="+", help="campaign YAML files (each one's status in turn)")
    for sub in (run, status, report):
        if sub is not status:
            sub.add_argument("file", help="campaign YAML file")
        sub.add_argument("--checkpoint-dir", help="folder of the checkpoints (default: $SB3_PCL_CHECKPOINT_DIR)")
    run.add_argument("--workers", type=int, default=1, help="parallel runs (default 1; each run uses one core)")
    run.add_argument("--nice", type=int, default=10, help="niceness added to this process and its workers (default 10)")
    run.add_argument("--backend", choices=backends.BACKENDS, default="local", help="local worker processes, or Ray tasks")
    run.add_argument("--address", help="with --backend ray: HOST:PORT of the cluster's head, or auto")
    run.add_argument("--quiet", action="store_true", help="only warnings")
    export = commands.add_parser("export-zoo", help="write rl-zoo3's log folder of a results folder (rl_zoo3.plots read it)")
    export.add_argument("folder", help="results folder (its evaluations.csv)")
    export.add_argument("--to", help="the log folder (default: FOLDER/zoo)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.campaign``. :return: The exit code (1 when a run failed)"""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO, format="%(message)s")
    try:
        return _command(parser, args, sys.argv[1:] if argv is None else list(argv))
    except BadFileError as exc:  # a damaged file of the campaign's results folder (one run's fails that run alone)
        parser.error(str(exc))


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    """Run the command of ``args`` (parsed from ``argv``); :return: its exit code"""
    if args.command == "export-zoo":
        written = store.export_zoo(args.folder, args.to)
        print(f"Wrote {len(written)} evaluations.npz under {args.to or Path(args.folder) / harness.ZOO_DIRNAME}")
        return 0
    files = args.file if args.command == "status" else [args.file]
    try:
        campaigns = [load_campaign(file, args.checkpoint_dir) for file in files]
    except (ValueError, ImportError) as exc:
        parser.error(str(exc))
    if args.command == "status":
        for file, campaign in zip(files, campaigns, strict=True):
            status = format_status(campaign, run_states(campaign))
            print(f"{file}:\n{status}\n" if len(files) > 1 else status)
        return 0
    campaign = campaigns[0]
    if args.command == "report":
        return report_command(campaign, args.check)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    try:
        backends.check_backend(args.backend, args.address)
    except ValueError as exc:
        parser.error(str(exc))
    os.nice(args.nice)
    command = shlex.join(["python", "-m", "benchmarks.campaign", *argv])
    try:
        results = run_campaign(campaign, args.workers, args.backend, args.address, command, report=write_report)
    except RuntimeError as exc:
        parser.error(str(exc))
    print(format_status(campaign, run_states(campaign)))
    return 1 if any(not result["ok"] for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
