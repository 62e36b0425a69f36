"""Sweep orchestration: resolve a preset's runs, skip finished ones, execute the rest, store each result durably.

Layout of a sweep directory ``out``:

- ``out/results.sqlite``: the results store (`experiments.sweeps.store`);
- ``out/runs/<hash>/``: one directory per run (train()'s config.json, metrics.csv, checkpoint.pt, result.json).

Re-running a sweep skips runs whose row is finished or diverged and re-submits the others; a training run resumes
from its checkpoint (train() does that on its own directory), so a sweep killed at any moment loses at most the
steps since each unfinished run's last checkpoint and never a finished result, and stores each run once.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tqdm import tqdm

from experiments.sweeps.backends import RunBatch, RunTask, WorkItem, run_tasks
from experiments.sweeps.presets import get_preset, spec_kind, with_overrides
from experiments.sweeps.store import ResultsStore

STORE_NAME = "results.sqlite"
RUNS_DIR = "runs"


def store_path(out: Path | str) -> Path:
    """``<out>/results.sqlite``."""
    return Path(out) / STORE_NAME


def group_by_seed(tasks: list[RunTask]) -> list[WorkItem]:
    """Training tasks whose configs are equal up to the seed become one RunBatch (others stay single)."""
    groups: dict[str, list[RunTask]] = {}
    items: list[WorkItem] = []
    for task in tasks:
        if task.kind != "train" or task.spec.get("init") is not None:
            items.append(task)
            continue
        key = json.dumps({k: v for k, v in task.spec.items() if k != "seed"}, sort_keys=True)
        groups.setdefault(key, []).append(task)
    for members in groups.values():
        items.append(RunBatch(tuple(members)) if len(members) > 1 else members[0])
    return items


def run_sweep(
    preset: str,
    scale: str,
    out: Path | str,
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: bool = True,
    batch_seeds: bool = False,
) -> dict[str, Any]:
    """Run (or finish) the sweep ``preset`` at ``scale`` into ``out``.

    Args:
        preset: preset name (`experiments.sweeps.presets.PRESETS`).
        scale: "quick", "cpu" or "paper" (whatever the preset offers).
        out: sweep directory.
        backend: "local" or "ray".
        workers: local processes (default os.cpu_count()).
        address: Ray cluster address (backend "ray").
        overrides: TrainConfig fields replaced in every training run (e.g. {"steps": 10000}); recorded as part of
            each run's config (and hence of its hash).
        progress: show a progress bar over runs (stderr).
        batch_seeds: train the runs that differ only in seed together in one process (stacked parameters,
            `experiments.training.seed_batched`; for GPUs; no mid-run checkpoints, so a killed batch restarts).

    Returns:
        summary: preset, scale, runs, skipped (already done), finished, diverged, failed (this call), seconds,
        runs_per_second (runs executed by this call per wall second), store.
    """
    spec_list = get_preset(preset).runs(scale)
    if overrides:
        spec_list = with_overrides(spec_list, overrides)
    out = Path(out)
    started = time.perf_counter()
    counts = {"finished": 0, "diverged": 0, "failed": 0}
    with ResultsStore(store_path(out)) as store:
        entries = [(s.config_hash(), spec_kind(s), s.to_dict()) for s in spec_list]
        store.register(preset, scale, entries)
        done = store.done_keys()
        tasks = [RunTask(key, kind, spec, str(out / RUNS_DIR / key)) for key, kind, spec in entries if key not in done]
        bar = tqdm(
            total=len(entries),
            initial=len(entries) - len(tasks),
            desc=f"{preset}/{scale}",
            unit="run",
            disable=not progress,
            file=sys.stderr,
        )
        with bar:
            for task in tasks:
                store.mark_running(task.key)
            items = group_by_seed(tasks) if batch_seeds else list(tasks)
            for outcome in run_tasks(items, backend, workers=workers, address=address):
                if outcome.ok:
                    store.record_result(outcome.key, outcome.metrics, outcome.provenance)  # committed before we go on
                    counts["diverged" if outcome.metrics.get("diverged") else "finished"] += 1
                else:
                    store.record_failure(outcome.key, outcome.error or "unknown error")
                    counts["failed"] += 1
                    bar.write(f"run {outcome.key[:12]} failed: {(outcome.error or '').splitlines()[0]}")
                bar.update(1)
        seconds = time.perf_counter() - started
    executed = len(tasks)
    return {
        "preset": preset,
        "scale": scale,
        "runs": len(entries),
        "skipped": len(entries) - executed,
        **counts,
        "seconds": seconds,
        "runs_per_second": executed / seconds if seconds > 0 else float("nan"),
        "store": str(store_path(out)),
    }
