"""What a sweep worker does: execute one run, or a pack of runs, in this process.

A run is trained (`experiments.training.loop.train`, whose result carries the model's evaluation by the one recipe,
`experiments.training.evaluation`: its population error, beside Theorem 2's certified bound on Theorem 2's own
task) or, for kind "random-features", solved (`constructions.random_features`). The worker holds the run directory's
writer lock meanwhile (`experiments.training.run_lock`), so a second writer (a worker orphaned by a killed driver, a
second sweep, ``attnrank train`` on the same directory) is refused, and the run is reported failed naming the
directory and the process that holds it; the next sweep runs it again. Outcomes go back to the driver
(`experiments.sweeps.backends`), never to the results store. This module loads the whole training stack; the driver
imports it only where runs execute.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch

from constructions.random_features import prefix_errors, sample_heads
from experiments.config import TrainConfig, TrainResult
from experiments.sweeps.run_specs import RandomFeaturesSpec, spec_from_record
from experiments.sweeps.solve_least_squares import solve_least_squares_heads
from experiments.sweeps.work import RunOutcome, RunPack, RunTask, WorkItem
from experiments.training.evaluation import evaluate_trained
from experiments.training.loop import train, train_packed
from experiments.training.provenance import provenance
from experiments.training.run_directory import RunDirectory
from experiments.training.run_lock import run_directory_lock


def _train_run(spec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    config = TrainConfig.from_dict(spec)
    return _with_evaluation(train(config, run_dir, progress=False), run_dir)


def _with_evaluation(result: TrainResult, run_dir: Path) -> dict[str, Any]:
    """The run's metrics: its TrainResult with the model's evaluation by the one recipe (`training.evaluation`), which
    a run finished by this version carries already; a diverged run has no model to evaluate."""
    metrics = result.to_dict()
    if not result.diverged:
        metrics.update(evaluate_trained(run_dir))
    return metrics


def _random_features_run(spec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
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
    RunDirectory(run_dir).write_result(metrics)
    return metrics


def execute_task(task: RunTask) -> RunOutcome:
    """Run one task in this process (train, or solve the random-feature problem); never raises."""
    try:
        run_dir = Path(task.run_dir)
        with run_directory_lock(run_dir):
            if task.kind == "train":
                metrics = _train_run(task.spec, run_dir)
            elif task.kind == "random-features":
                metrics = _random_features_run(task.spec, run_dir)
            elif task.kind == "least-squares-heads":
                metrics = solve_least_squares_heads(task.spec, run_dir)
            else:
                raise ValueError(f"unknown run kind {task.kind!r}")
        return RunOutcome(task.key, True, metrics, provenance())
    except Exception as exc:  # noqa: BLE001 - reported to the driver, stored as a failed run
        text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        return RunOutcome(task.key, False, error=text)


def execute_pack(pack: RunPack) -> list[RunOutcome]:
    """Train a pack of runs together (`experiments.training.packed`), each in its own run directory; never raises.

    Every run's directory is locked for the whole pack. A run that fails on its own after training (its evaluation)
    is reported failed alone; an exception of the pack's training reports every run of the pack failed.
    """
    try:
        configs = [TrainConfig.from_dict(t.spec) for t in pack.tasks]
        dirs = [Path(t.run_dir) for t in pack.tasks]
        with contextlib.ExitStack() as locks:
            for run_dir in dirs:
                locks.enter_context(run_directory_lock(run_dir))
            results = train_packed(configs, dirs)
            outcomes = []
            prov = provenance()
            for task, result, run_dir in zip(pack.tasks, results, dirs, strict=True):
                try:
                    outcomes.append(RunOutcome(task.key, True, _with_evaluation(result, run_dir), prov))
                except Exception as exc:  # noqa: BLE001 - this run's evaluation failed; the others stand
                    text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
                    outcomes.append(RunOutcome(task.key, False, error=text))
        return outcomes
    except Exception as exc:  # noqa: BLE001 - every run of the pack is reported failed
        text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
        return [RunOutcome(t.key, False, error=text) for t in pack.tasks]


def execute_item(item: WorkItem) -> list[RunOutcome]:
    """Execute a single run or a pack; a list of outcomes either way."""
    return execute_pack(item) if isinstance(item, RunPack) else [execute_task(item)]


def init_worker(threads: int) -> None:
    """Set up a local pool worker: ``threads`` torch threads, and (Linux) die with the driver (PR_SET_PDEATHSIG)."""
    torch.set_num_threads(threads)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the driver
            if os.getppid() == 1:  # the driver died before prctl took effect
                os._exit(1)
