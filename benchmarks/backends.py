"""
Where benchmark runs execute (:func:`execute`): ``local`` worker processes, or ``ray`` tasks on a local Ray instance
or a cluster. A failed run, or one whose worker died, is recorded in ``runs/<run>.err`` of its output folder.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import logging
import multiprocessing
import os
import platform
import shutil
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.checkpoint import write_atomically
from benchmarks.harness import RUNS_DIRNAME, ZOO_DIRNAME, RunTask, package_version, run_experiment

logger = logging.getLogger(__name__)

BACKENDS = ("local", "ray")
#: Stores a finished run: ``store(task, csv_text, metadata)``; a module-level function (it travels to the workers)
Store = Callable[[RunTask, str, Mapping[str, Any]], None]
#: Where a run's evaluations so far go after each evaluation (``progress(task)``: a CSV path or a callable; or None)
Progress = Callable[[RunTask], Any]


def record_failure(task: RunTask, message: str) -> dict[str, Any]:
    """Write ``runs/<run>.err`` (if it can: else the message is logged); :return: the result reported to the main
    process"""
    runs_dir = Path(task.out_dir) / RUNS_DIRNAME
    err_path = runs_dir / f"{task.name}.err"
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(err_path, f"run {task.name}: algo={task.algo} env={task.env} seed={task.seed}\n{message}")
    except OSError as exc:
        logger.error("%s failed and its traceback cannot be written (%s):\n%s", task.name, exc, message)
    lines = [line for line in message.splitlines() if line.strip()]
    return {"name": task.name, "ok": False, "error": lines[-1] if lines else "unknown error", "err_path": str(err_path)}


def _success(name: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """:return: The result of a finished run reported to the main process"""
    return {"name": name, "ok": True, "final": metadata["final_mean_return"], "steps": metadata["final_timesteps"]}


def _log_result(result: Mapping[str, Any], done: int, total: int) -> None:
    if result["ok"]:
        where = f" (on {result['node']})" if "node" in result else ""
        logger.info("[%d/%d] %s: %.2f at %d steps%s", done, total, result["name"], result["final"], result["steps"], where)
    else:
        logger.warning("[%d/%d] %s FAILED: %s (%s)", done, total, result["name"], result["error"], result["err_path"])


def execute(
    tasks: Sequence[RunTask],
    workers: int,
    store: Store,
    progress: Progress | None = None,
    backend: str = "local",
    fresh_process_per_run: bool = False,
) -> list[dict[str, Any]]:
    """
    Run the tasks, store each finished one with ``store`` and delete its checkpoints. Local workers start with one
    OpenMP / MKL / OpenBLAS thread (and each run uses one torch thread): a run's CPU time is that of one core.

    :param tasks: The runs
    :param workers: Size of the local process pool
    :param store: Writes a finished run's evaluations and metadata (in the worker with ``local``, here with ``ray``)
    :param progress: (``local``) Gives each run where its evaluations so far go (:func:`run_experiment`)
    :param backend: ``local``: spawned processes; ``ray``: one Ray task per run on the instance of :func:`ray_session`
    :param fresh_process_per_run: Start a new process for every run
    :return: One result per run (``ok``, and ``error`` / ``err_path`` for a failed run)
    """
    if backend == "ray":
        return _execute_ray(tasks, store, fresh_process_per_run)
    if backend != "local":
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    context = multiprocessing.get_context("spawn")
    pool_kwargs: dict[str, Any] = {"max_tasks_per_child": 1} if fresh_process_per_run else {}
    results: list[dict[str, Any]] = []
    todo = list(tasks)
    while todo:
        with (
            _single_threaded_libraries(),
            concurrent.futures.ProcessPoolExecutor(
                min(workers, len(todo)), mp_context=context, initializer=_die_with_parent, **pool_kwargs
            ) as pool,
        ):
            futures = {pool.submit(run_local, task, store, progress): task for task in todo}
            broken: list[RunTask] = []
            for future in concurrent.futures.as_completed(futures):
                try:
                    result = future.result()
                except concurrent.futures.process.BrokenProcessPool:
                    broken.append(futures[future])
                    continue
                except Exception:  # the worker could not even report (its result not sent back): that run failed
                    result = record_failure(futures[future], traceback.format_exc())
                results.append(result)
                _log_result(result, len(results), len(tasks))
        # a dying worker breaks the whole pool: blame the first unfinished run, retry the others in a fresh pool
        if broken:
            results.append(record_failure(broken[0], "The worker process running this run died (out of memory or a crash).\n"))
        todo = broken[1:]
    return results


def run_local(task: RunTask, store: Store, progress: Progress | None = None) -> dict[str, Any]:
    """Worker entry point: train one run (resuming it from its checkpoints), store it; never raises (a run that fails,
    or whose results cannot be stored, is recorded as failed: its checkpoints stay)."""
    try:
        zoo = Path(task.out_dir) / ZOO_DIRNAME  # rl-zoo3's log folder, with every episode (store writes one without)
        frame, metadata = run_experiment(task, progress(task) if progress is not None else None, zoo_folder=zoo)
        store(task, frame.to_csv(index=False), metadata)
    except Exception:
        return record_failure(task, traceback.format_exc())
    if task.checkpoint_dir is not None:
        shutil.rmtree(task.checkpoint_dir, ignore_errors=True)
    return _success(task.name, metadata)


def _die_with_parent() -> None:
    """On Linux, have the kernel kill this worker when its parent dies (``PR_SET_PDEATHSIG``): a ``run`` killed alone
    leaves no worker training on, which a second ``run`` would duplicate (elsewhere, kill the process group)."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
        if os.getppid() == 1:  # the parent died before the call
            os._exit(1)


@contextlib.contextmanager
def _single_threaded_libraries() -> Iterator[None]:
    """Set ``OMP/MKL/OPENBLAS_NUM_THREADS=1`` while the pool starts its workers (spawned processes inherit them)."""
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def import_ray() -> Any:
    """:return: The ``ray`` module; :raises ImportError: naming the extra to install when it is missing"""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f'The Ray backend needs Ray, which cannot be imported ({exc}): pip install -e ".[ray]"') from exc
    return ray


def check_backend(backend: str, address: str | None) -> None:
    """:raises ValueError: for an unknown backend, or an ``address`` given without the ray backend or malformed"""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if address is not None:
        if backend != "ray":
            raise ValueError(f"--address needs --backend ray: {address!r} is only used by the ray backend, not by {backend!r}")
        parse_ray_address(address)


def parse_ray_address(address: str) -> tuple[str, int] | None:
    """
    :param address: ``auto`` or ``HOST:PORT`` of a Ray head's GCS (``ray start --head --port=PORT``; ``ray://`` allowed)
    :return: ``(host, port)``, ``None`` for ``auto``
    :raises ValueError: for anything else
    """
    if address == "auto":
        return None
    host, separator, port = address.removeprefix("ray://").rpartition(":")
    if not separator or not host.strip("[]") or not port.isdigit():
        raise ValueError(f"--address expects auto or HOST:PORT of a Ray head (ray start --head), got {address!r}")
    return host.strip("[]"), int(port)


@contextlib.contextmanager
def ray_session(workers: int, address: str | None = None) -> Iterator[dict[str, Any]]:
    """
    Connect this process to Ray for :func:`execute`: to the running instance when Ray is already initialised, to the
    cluster at ``address`` when given, else to a new local instance of ``workers`` CPUs (shut down on exit).

    :param workers: CPUs of a new local instance
    :param address: ``auto`` (the cluster started on this machine by ``ray start``) or ``HOST:PORT`` of its head
    :return: A description of the cluster for ``config.json`` (``address``, ``nodes``, ``cpus``)
    :raises ImportError: without Ray
    :raises ConnectionError: if no cluster answers at ``address`` (tried with a TCP connection first: ``ray.init``
        would retry for minutes), or Ray cannot connect to it
    """
    ray = import_ray()
    started = not ray.is_initialized()
    host_port = parse_ray_address(address) if started and address is not None else None
    if host_port is not None:
        try:
            socket.create_connection(host_port, timeout=10.0).close()
        except OSError as exc:
            message = f"start its head with 'ray start --head --port={host_port[1]}' or check the address"
            raise ConnectionError(f"No Ray cluster answers at {address} ({exc}): {message}") from exc
    if started and address is None:
        ray.init(address="local", num_cpus=workers, include_dashboard=False, logging_level=logging.WARNING)
    elif started:
        try:
            ray.init(address=address, logging_level=logging.WARNING)
        except ConnectionError as exc:
            raise ConnectionError(
                f"Cannot connect to the Ray cluster at {address!r}: {exc} (a cluster started with token authentication "
                "needs RAY_AUTH_MODE=token and its token in ~/.ray/auth_token here too)"
            ) from exc
    try:
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        info = {
            "address": address or ("local" if started else "already connected"),
            "nodes": len(nodes),
            "cpus": int(sum(node.get("Resources", {}).get("CPU", 0) for node in nodes)),
            "ray": package_version("ray"),
        }
        logger.info("Ray: %d node(s), %d CPU(s)", info["nodes"], info["cpus"])
        yield info
    finally:
        if started:
            ray.shutdown()


def run_remote(task: RunTask, cwd: str) -> dict[str, Any]:
    """
    Ray task: train one run and return its files' content (the machine running it may not see the output folder). Its
    checkpoints stay: the driver removes them once it has stored the run (:func:`remove_checkpoints`), so that a run
    whose store fails resumes from them.

    :param task: The run
    :param cwd: The driver's working directory, where relative paths of the options are resolved
    :return: ``name``, ``node``, ``node_id`` (Ray's, ``None`` outside Ray), ``ok``, then ``csv`` (the evaluations) and
        ``metadata``, or ``traceback``
    """
    result: dict[str, Any] = {"name": task.name, "node": platform.node(), "node_id": None}
    try:
        if not Path(cwd).is_dir():
            message = f"{cwd} (the driver's working directory) is not on {platform.node()}"
            raise FileNotFoundError(f"{message}: every machine needs the checkout at the same path")
        os.chdir(cwd)
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            result["node_id"] = ray.get_runtime_context().get_node_id()
        frame, metadata = run_experiment(task)
    except Exception:
        return {**result, "ok": False, "traceback": traceback.format_exc()}
    return {**result, "ok": True, "csv": frame.to_csv(index=False), "metadata": metadata}


def remove_checkpoints(checkpoint_dir: str) -> None:
    """Ray task, on the node that ran the run: delete the checkpoints of a run the driver has stored."""
    shutil.rmtree(checkpoint_dir, ignore_errors=True)


def _execute_ray(tasks: Sequence[RunTask], store: Store, fresh_process_per_run: bool) -> list[dict[str, Any]]:
    """Run each task as a Ray task of one CPU and store it here as it finishes; a Ray task that fails (worker or node
    died twice, not deserialised) is recorded as failed like a run that raised."""
    ray = import_ray()
    options: dict[str, Any] = {"num_cpus": 1, "max_retries": 1}  # a lost node gets one retry elsewhere
    if fresh_process_per_run:
        options["max_calls"] = 1
    remote = ray.remote(**options)(run_remote)
    # on the node whose disk holds the checkpoints, without a CPU of its own: the runs may hold every CPU
    cleanup = ray.remote(num_cpus=0, max_retries=0)(remove_checkpoints)
    cwd = os.getcwd()
    pending = {remote.remote(task, cwd): task for task in tasks}
    results: list[dict[str, Any]] = []
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        task = pending.pop(ref)
        try:
            outcome = ray.get(ref)
        except ray.exceptions.RayError as exc:
            message = f"Ray could not run this run (worker or machine lost twice, or no checkout there):\n{exc}\n"
            result = record_failure(task, message)
        else:
            if outcome["ok"]:
                try:
                    store(task, outcome["csv"], outcome["metadata"])
                    result = {**_success(task.name, outcome["metadata"]), "node": outcome["node"]}
                except Exception:  # its checkpoints stay: the next invocation resumes the run from them
                    result = record_failure(task, f"Ray node: {outcome['node']}\n{traceback.format_exc()}")
                else:
                    if task.checkpoint_dir is not None:
                        _remove_remote_checkpoints(ray, cleanup, task.checkpoint_dir, outcome["node_id"])
            else:
                result = record_failure(task, f"Ray node: {outcome['node']}\n{outcome['traceback']}")
        results.append(result)
        _log_result(result, len(results), len(tasks))
    return results


def _remove_remote_checkpoints(ray: Any, cleanup: Any, checkpoint_dir: str, node_id: str | None) -> None:
    """Delete a stored run's checkpoints on the node that wrote them (``node_id``; anywhere when unknown); a warning
    naming the folder if that fails (the node is gone, say)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False) if node_id is not None else "DEFAULT"
    try:
        ray.get(cleanup.options(scheduling_strategy=strategy).remote(checkpoint_dir))
    except ray.exceptions.RayError as exc:
        logger.warning("%s (node %s): the stored run's checkpoints could not be deleted: %s", checkpoint_dir, node_id, exc)
