"""Execution backends of a sweep: run many runs on a local process pool or on Ray (the project's only process pool).

What one run does is `experiments.sweeps.execute` (train or solve, under a lock on its run directory). Workers never
touch the results store: each task's outcome (metrics + provenance, or the error text) goes back to the driver, which
is the store's only writer (`experiments.sweeps.store`). On Linux the local pool's workers ask the kernel to kill them
when the driver dies (``PR_SET_PDEATHSIG``).

- ``local``: ``workers = 1`` runs in the driver process (with the driver's torch threads); more use a
  ``ProcessPoolExecutor`` (spawn) whose workers each use ``max(1, os.cpu_count() // workers)`` torch threads.
- ``ray``: one Ray task per run (``num_cpus = 1``, or ``num_gpus = 1`` for CUDA runs); ``address`` joins an existing
  cluster (run directories must then be on storage shared by every node).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import active_children, get_context
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import ModuleType

from experiments.config import TrainConfig, TrainResult
from experiments.sweeps.work import RunOutcome, RunPack, RunTask, WorkItem
from theory.validation import check_choice

BACKENDS = ("local", "ray")


class WorkerDied(RuntimeError):
    """A local pool's worker process died (a signal, the kernel's out-of-memory killer): the pool is broken and the
    runs still in it cannot finish in this sweep (`run_local`). One line, for the driver to print."""


def threads_per_worker(workers: int) -> int:
    """Torch intra-op threads for each of ``workers`` local workers: the machine's cores shared evenly."""
    return max(1, (os.cpu_count() or 1) // workers)


def _execution() -> ModuleType:
    """`experiments.sweeps.execute`, imported on first use.

    The one deferred import of the sweep driver, for a measured reason: execute loads torch, the training loop and
    theory.bounds / theory.kernels (sympy, scipy), about 3 s, which `attnrank sweep --help` and the driver of a
    pool never use; only processes that execute runs (pool workers, Ray tasks, the driver when workers = 1) load it.
    """
    import experiments.sweeps.execute as execute

    return execute


def execute_lazily(item: WorkItem) -> list[RunOutcome]:
    """`experiments.sweeps.execute.execute_item` behind the deferred import: the picklable top-level function a
    process pool or a Ray task runs (a single run or a pack, in that process); never raises."""
    outcomes: list[RunOutcome] = _execution().execute_item(item)
    return outcomes


def _worker_init(threads: int) -> None:
    _execution().init_worker(threads)


def run_local(tasks: Sequence[WorkItem], workers: int) -> Iterator[RunOutcome]:
    """Run tasks on this machine, yielding outcomes as they complete.

    Args:
        tasks: the runs.
        workers: parallel processes (1: in the driver process), >= 1 (checked once by the caller: the sweep's request,
            or `train_configs`).
    """
    if workers == 1 or len(tasks) <= 1:
        for task in tasks:  # the driver's own torch threads (OMP_NUM_THREADS / torch.set_num_threads) are kept
            yield from execute_lazily(task)
        return
    children_before = set(active_children())
    with ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)),
        mp_context=get_context("spawn"),
        initializer=_worker_init,
        initargs=(threads_per_worker(workers),),
    ) as pool:
        try:
            pending: set[Future[list[RunOutcome]]] = {pool.submit(execute_lazily, task) for task in tasks}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    try:
                        outcomes = future.result()
                    except BrokenProcessPool as exc:
                        raise WorkerDied(
                            f"a worker process of the sweep ended abruptly (killed by a signal, or by the kernel for "
                            f"want of memory) while running; {len(pending) + 1} unit(s) of runs were not finished "
                            "(every finished run is stored); run the same command again to resume them"
                        ) from exc
                    yield from outcomes
        except BaseException:  # KeyboardInterrupt / SIGINT to the driver alone, or the consumer closing the generator
            _stop_workers(pool, children_before)
            raise


STOP_GRACE = 10.0
"""Seconds the pool's workers have to exit after SIGTERM before they are killed (SIGKILL). A worker handles SIGTERM
by dying at once; the grace covers a loaded machine's scheduling delay, not work done on the way out."""


def _stop_workers(pool: ProcessPoolExecutor, children_before: set[BaseProcess]) -> None:
    """Cancel the queued runs and end the running ones, so leaving the pool does not wait for them.

    Without this, a driver interrupted by a signal that its workers did not also get (``kill -INT <driver>``) waited in
    the pool's shutdown until every running run had finished (hours for a long run). A terminated run loses only its
    steps since its last checkpoint; the store holds every run that finished.

    The workers are every process this driver started since the pool was created (``multiprocessing
    .active_children``), not only those the pool has recorded: an interrupt that lands while ``submit`` spawns a
    worker leaves one started but not yet in the pool's table, and the interpreter's exit then waited on that idle,
    unrecorded worker for ever (``multiprocessing`` joins its children at exit). Each gets SIGTERM, then SIGKILL if it
    has not exited within `STOP_GRACE` seconds (a worker that inherited an ignored SIGTERM).
    """
    # The pool's own table (a private field; Python 3.11-3.13 have no public terminate), read before shutdown clears it.
    recorded = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    processes = {*recorded, *(set(active_children()) - children_before)}
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def train_configs(jobs: Sequence[tuple[TrainConfig, Path]], workers: int) -> list[TrainResult]:
    """Train every (config, run directory) job on the local pool; results in job order.

    Raises:
        RuntimeError: naming every run that failed (after all of them have run).
    """
    tasks = [RunTask(config.config_hash(), "train", config.to_dict(), str(out_dir)) for config, out_dir in jobs]
    outcomes = {outcome.key: outcome for outcome in run_local(tasks, workers=workers)}
    failed = [f"{key[:12]}: {outcome.error}" for key, outcome in outcomes.items() if not outcome.ok]
    if failed:
        raise RuntimeError("training failed: " + "; ".join(failed))
    return [TrainResult.from_dict(outcomes[task.key].metrics) for task in tasks]


RAY_CONNECT_TIMEOUT = 5.0
"""Seconds `check_ray_address` waits for a Ray head to accept a connection, and again for its handshake answer."""
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""The client connection preface of HTTP/2 (RFC 9113, section 3.4), which every gRPC server answers."""
HTTP2_SETTINGS_FRAME = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""An empty SETTINGS frame (length 0, type 4, no flags, stream 0): the rest of the client's preface."""
SETTINGS_FRAME_TYPE = 4


def _answers_grpc(connection: socket.socket, timeout: float) -> tuple[bool, str]:
    """Whether the server at the other end of ``connection`` answers an HTTP/2 preface with a SETTINGS frame, as a
    gRPC server (Ray's GCS and its client server both are) must; (answered, what it sent instead)."""
    connection.settimeout(timeout)
    connection.sendall(HTTP2_PREFACE + HTTP2_SETTINGS_FRAME)
    received = b""
    deadline = time.monotonic() + timeout
    while len(received) < 9 and time.monotonic() < deadline:
        chunk = connection.recv(9 - len(received))
        if not chunk:
            break
        received += chunk
    if len(received) == 9 and received[3] == SETTINGS_FRAME_TYPE:
        return True, ""
    shown = received.decode("ascii", "replace").encode("unicode_escape").decode("ascii")[:40]
    return False, f"it answered {shown!r}" if received else "it sent nothing back"


def check_ray_address(address: str | None, timeout: float = RAY_CONNECT_TIMEOUT) -> str | None:
    """Refuse (ValueError) a Ray address ``HOST:PORT`` / ``ray://HOST:PORT`` where no Ray server answers, within a
    bounded time (at most 2 ``timeout`` seconds).

    ``None`` and ``auto`` are passed through (Ray finds or starts a cluster). Without this check ``ray.init`` waits
    for minutes, printing warnings, when nothing answers at the address, and as long again when something that is
    not Ray listens there (a web server, a database): after connecting, the address must answer an HTTP/2 preface
    with a SETTINGS frame, as the gRPC servers of a Ray head (its GCS, ``HOST:6379``, and its client server,
    ``ray://HOST:10001``) do. A cluster that speaks TLS (``RAY_USE_TLS=1`` in the environment) answers only a TLS
    handshake: there the connection alone is checked.
    """
    if address is None or address == "auto":
        return address
    text = address.removeprefix("ray://")
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"address must be HOST:PORT, ray://HOST:PORT or auto, got {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port_text)), timeout=timeout) as connection:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return address
            try:
                answered, instead = _answers_grpc(connection, timeout)
            except OSError as exc:  # a timeout, or the connection reset
                answered, instead = False, f"no answer ({exc.strerror or exc})"
    except OSError as exc:
        raise ValueError(
            f"address is unreachable: nothing answers at {address!r} within {timeout:g} s ({exc.strerror or exc})"
        ) from exc
    if not answered:
        raise ValueError(
            f"address is not a Ray cluster: something listens at {address!r} but does not speak gRPC, as a Ray head "
            f"does ({instead} to an HTTP/2 preface within {timeout:g} s)"
        )
    return address


def run_ray(tasks: Sequence[WorkItem], address: str | None = None) -> Iterator[RunOutcome]:
    """Run tasks as Ray tasks (a new local Ray instance unless one is running or ``address`` is given; the address
    was probed once by the sweep's check, `experiments.sweeps.preflight.check_sweep_request`)."""
    import ray  # optional heavy dependency (pip install ray): imported only when the ray backend is used

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    cpu_task = ray.remote(num_cpus=1)(execute_lazily)
    gpu_task = ray.remote(num_gpus=1)(execute_lazily)
    refs = {}
    for task in tasks:
        first = task.tasks[0] if isinstance(task, RunPack) else task
        wants_gpu = first.kind == "train" and str(first.spec.get("device", "auto")).startswith("cuda")
        refs[(gpu_task if wants_gpu else cpu_task).remote(task)] = task
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        for ref in done:
            task = refs.pop(ref)
            try:
                yield from ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a worker crash (not an exception inside the run)
                members = task.tasks if isinstance(task, RunPack) else (task,)
                for member in members:
                    yield RunOutcome(member.key, False, error=f"ray task failed: {type(exc).__name__}: {exc}")


def run_tasks(
    tasks: Sequence[WorkItem], backend: str = "local", *, workers: int | None = None, address: str | None = None
) -> Iterator[RunOutcome]:
    """Dispatch to a backend. ``workers`` defaults to os.cpu_count() (local only)."""
    check_choice("backend", backend, BACKENDS)
    if backend == "local":
        if address is not None:
            raise ValueError("address is only used with backend 'ray'")
        return run_local(tasks, workers if workers is not None else (os.cpu_count() or 1))
    return run_ray(tasks, address)
