"""Execution backends of a sweep: run one spec (:func:`execute_task`), and run many on a local process pool or on Ray.

Workers never touch the results store: each task's outcome (metrics + provenance, or the error text) goes back to
the driver, which is the store's only writer (`experiments.sweeps.store`). A worker holds an exclusive file lock on
its run directory while it trains (``fcntl.flock`` on ``<run_dir>/.lock``), so even a worker orphaned by a killed
driver cannot train the same directory at the same time as the re-run sweep; on Linux the local pool's workers also
ask the kernel to kill them when the driver dies (``PR_SET_PDEATHSIG``).

- ``local``: ``workers = 1`` runs in the driver process (with the driver's torch threads); more use a
  ``ProcessPoolExecutor`` (spawn) whose workers each use ``max(1, os.cpu_count() // workers)`` torch threads.
- ``ray``: one Ray task per run (``num_cpus = 1``, or ``num_gpus = 1`` for CUDA runs); ``address`` joins an existing
  cluster (run directories must then be on storage shared by every node).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from theory.validation import check_choice, check_int

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class RunTask:
    """One run to execute: its key (spec hash), kind, spec dictionary and run directory."""

    key: str
    kind: str
    spec: dict[str, Any]
    run_dir: str


@dataclass(frozen=True)
class RunBatch:
    """Training tasks whose configs differ only in seed, trained together (`experiments.training.seed_batched`)."""

    tasks: tuple[RunTask, ...]


WorkItem = RunTask | RunBatch


@dataclass
class RunOutcome:
    """What a worker sends back: metrics and provenance, or the error text."""

    key: str
    ok: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@contextlib.contextmanager
def run_directory_lock(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir`` (blocks while another process trains it; released on exit or death)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if sys.platform == "win32":  # pragma: no cover - no flock; rely on the single driver
        yield
        return
    import fcntl

    with open(run_dir / ".lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _train_run(spec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    from experiments.analysis.trained import theorem2_applicable, trained_vs_bound
    from experiments.training.loop import TrainConfig, load_trained_model, train

    config = TrainConfig.from_dict(spec)
    result = train(config, run_dir, progress=False)
    metrics = result.to_dict()
    if config.model == "theory" and theorem2_applicable(config) and not result.diverged:
        # Theorem 2's own task: a fresh Monte Carlo error (with its standard error) beside the certified bound.
        _, task, model = load_trained_model(run_dir)
        metrics["theorem2"] = trained_vs_bound(config, task, model, n_samples=20_000)
    return metrics


def _random_features_run(spec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    import numpy as np

    from constructions.random_features import prefix_errors, sample_heads
    from experiments.json_files import write_json
    from experiments.sweeps.presets import RandomFeaturesSpec, spec_from_record

    rf = spec_from_record("random-features", spec)
    assert isinstance(rf, RandomFeaturesSpec)
    started = time.perf_counter()
    rng = np.random.default_rng([rf.seed, rf.d, rf.trial])
    q, k = sample_heads(rf.head_counts[-1], rf.d, rng, rf.distribution)
    errors = prefix_errors(q, k, np.asarray(rf.head_counts)).errors  # (P,)
    metrics = {
        "head_counts": list(rf.head_counts),
        "errors": [float(e) for e in errors],
        "final_loss": float(errors[-1]),
        "best_loss": float(np.min(errors)),
        "diverged": False,
        "seconds": time.perf_counter() - started,
    }
    write_json(run_dir / "result.json", metrics)
    return metrics


def execute_task(task: RunTask) -> RunOutcome:
    """Run one task in this process (train, or solve the random-feature problem); never raises."""
    from experiments.training.loop import provenance

    try:
        run_dir = Path(task.run_dir)
        with run_directory_lock(run_dir):
            if task.kind == "train":
                metrics = _train_run(task.spec, run_dir)
            elif task.kind == "random-features":
                metrics = _random_features_run(task.spec, run_dir)
            else:
                raise ValueError(f"unknown run kind {task.kind!r}")
        return RunOutcome(task.key, True, metrics, provenance())
    except Exception as exc:  # noqa: BLE001 - reported to the driver, stored as a failed run
        text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        return RunOutcome(task.key, False, error=text)


def execute_batch(batch: RunBatch) -> list[RunOutcome]:
    """Train a batch of seed-only-different runs together; every run's result.json is written; never raises."""
    from experiments.json_files import write_json
    from experiments.training.loop import TrainConfig, provenance
    from experiments.training.seed_batched import train_batched

    try:
        configs = [TrainConfig.from_dict(t.spec) for t in batch.tasks]
        with contextlib.ExitStack() as locks:
            for t in batch.tasks:
                locks.enter_context(run_directory_lock(Path(t.run_dir)))
            results = train_batched(configs)
            for t, c, result in zip(batch.tasks, configs, results, strict=False):
                write_json(
                    Path(t.run_dir) / "config.json",
                    {"config": c.to_dict(), "config_hash": c.config_hash(), **provenance(), "batched": len(configs)},
                )
                write_json(Path(t.run_dir) / "result.json", result.to_dict())
        prov = provenance()
        return [RunOutcome(t.key, True, r.to_dict(), prov) for t, r in zip(batch.tasks, results, strict=False)]
    except Exception as exc:  # noqa: BLE001 - every run of the batch is reported failed
        text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        return [RunOutcome(t.key, False, error=text) for t in batch.tasks]


def execute_item(item: WorkItem) -> list[RunOutcome]:
    """Execute a single run or a batch; a list of outcomes either way."""
    return execute_batch(item) if isinstance(item, RunBatch) else [execute_task(item)]


def threads_per_worker(workers: int) -> int:
    """Torch intra-op threads for each of ``workers`` local workers: the machine's cores shared evenly."""
    return max(1, (os.cpu_count() or 1) // check_int("workers", workers, minimum=1))


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the driver
            if os.getppid() == 1:  # the driver died before prctl took effect
                os._exit(1)


def run_local(tasks: Sequence[WorkItem], workers: int) -> Iterator[RunOutcome]:
    """Run tasks on this machine, yielding outcomes as they complete.

    Args:
        tasks: the runs.
        workers: parallel processes (1: in the driver process).
    """
    workers = check_int("workers", workers, minimum=1)
    if workers == 1 or len(tasks) <= 1:
        for task in tasks:  # the driver's own torch threads (OMP_NUM_THREADS / torch.set_num_threads) are kept
            yield from execute_item(task)
        return
    with ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)),
        mp_context=get_context("spawn"),
        initializer=_worker_init,
        initargs=(threads_per_worker(workers),),
    ) as pool:
        pending: set[Future[list[RunOutcome]]] = {pool.submit(execute_item, task) for task in tasks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield from future.result()


def run_ray(tasks: Sequence[WorkItem], address: str | None = None) -> Iterator[RunOutcome]:
    """Run tasks as Ray tasks (a new local Ray instance unless one is running or ``address`` is given)."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    cpu_task = ray.remote(num_cpus=1)(execute_item)
    gpu_task = ray.remote(num_gpus=1)(execute_item)
    refs = {}
    for task in tasks:
        first = task.tasks[0] if isinstance(task, RunBatch) else task
        wants_gpu = first.kind == "train" and str(first.spec.get("device", "auto")).startswith("cuda")
        refs[(gpu_task if wants_gpu else cpu_task).remote(task)] = task
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        for ref in done:
            task = refs.pop(ref)
            try:
                yield from ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a worker crash (not an exception inside the run)
                members = task.tasks if isinstance(task, RunBatch) else (task,)
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
    if workers is not None:
        check_int("workers", workers, minimum=1)
    return run_ray(tasks, address)
