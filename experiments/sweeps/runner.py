"""Sweep orchestration: resolve a preset's runs, skip finished ones, execute the rest, store each result durably.

A sweep directory ``out`` (its layout: `experiments.analysis.sweep_directory.SweepDirectory`) holds the results store
(`experiments.sweeps.store`), one run directory per run in its runs folder (train()'s config.json, metrics.csv,
checkpoint.pt, result.json) and the curves copied from them.

Re-running a sweep skips runs whose row is finished or diverged and re-submits the others; a training run resumes
from its checkpoint (train() does that on its own directory), so a sweep killed at any moment loses at most the
steps since each unfinished run's last checkpoint and never a finished result, and stores each run once.

Everything a sweep is given is validated before its first run starts: the preset and scale, ``workers`` (>= 1), every
override (each run's TrainConfig is built first; a weight file named by ``init`` is loaded and matched against its
config). A damaged or foreign store is refused (`experiments.sweeps.store.StoreError`); :func:`rebuild_store`
(``attnrank sweep ... --rebuild-store``) moves it aside and rebuilds it from the runs' ``result.json`` files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.json_files import read_json_object
from experiments.packing import PACK_VARYING_FIELDS, SEED_FIELDS
from experiments.sweeps.backends import run_tasks
from experiments.sweeps.extensions import seed_extensions
from experiments.sweeps.grouping import group_into_packs
from experiments.sweeps.preflight import (
    CheckedSweep,
    SweepRequest,
    check_sweep_request,
    resolve_runs,
    with_request_signature,
)
from experiments.sweeps.preset_kit import Preset
from experiments.sweeps.run_specs import RunSpec, spec_kind
from experiments.sweeps.store import DONE_STATUSES, ResultsStore
from experiments.sweeps.store_file import StoreError
from experiments.sweeps.work import RunTask
from experiments.training.progress import Progress
from experiments.training.run_directory import RunDirectory
from experiments.training.run_record import Evaluation


def _entries(specs: list[RunSpec]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(s.config_hash(), spec_kind(s), s.to_dict()) for s in specs]


def _read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object of ``path`` (`experiments.json_files.read_json_object`), or None when it is absent or damaged."""
    try:
        return read_json_object(path)
    except ValueError:
        return None


def _evaluation_beside(files: RunDirectory) -> dict[str, Any] | None:
    """The record's evaluation keys from evaluation.json of a run evaluated after its training, or None (absent or
    damaged)."""
    try:
        evaluation = files.read_evaluation()
    except ValueError:
        return None
    return None if evaluation is None else evaluation.fields()


def _open_for(preset: str, scale: str, out: Path) -> ResultsStore:
    """The sweep's store; a refusal names this sweep's own rebuild command."""
    try:
        return ResultsStore(SweepDirectory(out).store)
    except StoreError as exc:
        message = str(exc).replace("PRESET --scale SCALE", f"{preset} --scale {scale}")
        raise StoreError(message, damaged=exc.damaged) from exc


def rebuild_store(
    preset: Preset, scale: str, out: Path | str, *, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Rebuild the results store of the sweep ``preset`` / ``scale`` in ``out`` from its runs' files.

    A store that cannot be opened (damaged, truncated, another program's database) is first renamed to
    ``results.sqlite.damaged-<UTC time>`` (with its -wal / -shm files), never deleted; a readable one is kept and
    completed (so the command can be repeated once per sweep of the directory). Then every run of the sweep is
    registered, and each run whose ``runs/<hash>/result.json`` is readable is stored as finished (or diverged) with
    those metrics, its evaluation (in result.json, or in evaluation.json beside it for a run evaluated after
    training; `experiments.training.evaluation`) and the provenance of its ``config.json`` (git revision, library
    versions), after checking that config.json names the same config hash. A finished training run without an
    evaluation is left pending: the next sweep evaluates it (train() returns the finished result without training
    again, and the recipe is fixed, so the numbers are those the first sweep would have stored).

    A result.json is read by the one reader and checked field by field (`RunDirectory.read_result_record`: a string
    loss, a negative or -inf value, negative steps are refused); a damaged one is not stored but named in
    ``damaged``, and its run is left pending (the sweep then refuses to take it as finished, naming the file).

    Returns:
        restored (runs stored from their files), pending (left to the sweep), moved_aside (path or None), damaged
        (one line per result.json that was refused, naming the file and the field).
    """
    return _rebuild(preset.name, scale, Path(out), tuple(resolve_runs(preset, scale, overrides)))


def _rebuild(preset: str, scale: str, out: Path, specs: tuple[RunSpec, ...]) -> dict[str, Any]:
    """`rebuild_store` of already resolved specs (a checked sweep request's)."""
    entries = _entries(list(specs))
    sweep = SweepDirectory(out)
    path = sweep.store
    moved: Path | None = None
    if path.exists():
        try:
            ResultsStore(path).close()
        except StoreError as exc:
            if not exc.damaged:
                raise  # busy (another sweep writes to it) or otherwise unusable now: never moved aside
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            moved = path.with_name(f"{path.name}.damaged-{stamp}")
            for suffix in ("", "-wal", "-shm"):
                side = path.with_name(path.name + suffix)
                if side.exists():
                    side.rename(moved.with_name(moved.name + suffix))
    restored = 0
    damaged: list[str] = []
    with ResultsStore(path) as store:
        store.register(preset, scale, entries)
        done = store.done_keys()
        for key, kind, _ in entries:
            files = sweep.run(key)
            if key in done or not os.path.lexists(files.result):
                continue
            try:
                metrics = files.read_result_record()  # every field by type and range: junk is never stored
            except ValueError as exc:
                damaged.append(str(exc))
                continue
            config = _read_json(files.config) or {}
            if kind == "train" and config.get("config_hash") != key:
                continue  # a directory whose config is not this run's: leave the run to the sweep
            if kind == "train" and not metrics.get("diverged") and Evaluation.read(metrics) is None:
                evaluation = _evaluation_beside(files)
                if evaluation is None:
                    continue  # trained, never evaluated: the sweep evaluates it
                metrics = {**metrics, **evaluation}
            provenance = {"git_revision": config.get("git_revision"), "versions": config.get("versions") or {}}
            store.mark_running(key)
            restored += int(store.record_result(key, metrics, provenance))
        counts = store.status_counts(k for k, _, _ in entries)
    return {
        "restored": restored,
        "pending": sum(v for s, v in counts.items() if s not in DONE_STATUSES),
        "moved_aside": None if moved is None else str(moved),
        "damaged": damaged,
    }


@with_request_signature
def run_sweep(preset: Preset, scale: str, out: Path | str, **options: Any) -> dict[str, Any]:
    """Run (or finish) the sweep ``preset`` at ``scale`` into ``out``: the request (`SweepRequest`; ``options`` are
    its other fields, by name) checked once (`experiments.sweeps.preflight.check_sweep_request`), then
    :func:`execute_sweep`.

    Returns:
        summary: preset, scale, runs, skipped (already done), extended (runs of this call that went on from a
        finished shorter run's checkpoint, `experiments.sweeps.extensions`), finished, diverged, failed (this call),
        seconds,
        runs_per_second (runs executed by this call per wall second), store; with ``rebuild`` also restored and
        moved_aside.
    """
    request = SweepRequest(preset, scale, out, **options)
    return execute_sweep(check_sweep_request(request))  # every field, and the memory in flight, before any write


def execute_sweep(checked: CheckedSweep) -> dict[str, Any]:
    """Run a checked sweep request (`run_sweep`'s summary); nothing is validated again."""
    request, out, workers = checked.request, checked.out, checked.workers
    preset, scale = request.preset.name, request.scale
    started = time.perf_counter()
    counts = {"finished": 0, "diverged": 0, "failed": 0}
    rebuilt = _rebuild(preset, scale, out, checked.specs) if request.rebuild else None
    sweep = SweepDirectory(out)
    with _open_for(preset, scale, out) as store:
        entries = _entries(list(checked.selected))
        store.register(preset, scale, entries)
        done = store.done_keys()
        tasks = [RunTask(key, kind, spec, str(sweep.run(key).root)) for key, kind, spec in entries if key not in done]
        extended = seed_extensions(tasks, sweep.runs)  # a longer run of a finished one goes on from its checkpoint
        bar = Progress(
            len(entries),
            initial=len(entries) - len(tasks),
            desc=f"{preset}/{scale}",
            enabled=request.progress,
            unit="run",
        )
        with bar:
            for task in tasks:
                store.mark_running(task.key)
            if request.batch_seeds or request.pack:
                varying = SEED_FIELDS if request.batch_seeds else PACK_VARYING_FIELDS
                items = group_into_packs(tasks, workers, varying=varying)
            else:
                items = list(tasks)
            for outcome in run_tasks(items, request.backend, workers=workers, address=request.address):
                if outcome.ok:
                    store.record_result(outcome.key, outcome.metrics, outcome.provenance)  # committed before we go on
                    counts["diverged" if outcome.metrics.get("diverged") else "finished"] += 1
                else:
                    store.record_failure(outcome.key, outcome.error or "unknown error")
                    counts["failed"] += 1
                    bar.write(f"run {outcome.key[:12]} failed: {(outcome.error or '').splitlines()[0]}")
                bar.update(1)
        # Every curve at hand, finished or not, into curves.csv: what a report needs once the run directories are gone.
        sweep.collect_curves([row.hash for row in store.rows() if row.kind == "train"])
        seconds = time.perf_counter() - started
    executed = len(tasks)
    extra = {} if rebuilt is None else {key: rebuilt[key] for key in ("restored", "moved_aside", "damaged")}
    return {
        "preset": preset,
        "scale": scale,
        "runs": len(entries),
        "skipped": len(entries) - executed,
        "extended": len(extended),
        **counts,
        "seconds": seconds,
        "runs_per_second": executed / seconds if seconds > 0 else float("nan"),
        "store": str(sweep.store),
        **extra,
    }
