"""Sweep orchestration: resolve a preset's runs, skip finished ones, execute the rest, store each result durably.

Layout of a sweep directory ``out``:

- ``out/results.sqlite``: the results store (`experiments.sweeps.store`);
- ``out/runs/<hash>/``: one directory per run (train()'s config.json, metrics.csv, checkpoint.pt, result.json).

Re-running a sweep skips runs whose row is finished or diverged and re-submits the others; a training run resumes
from its checkpoint (train() does that on its own directory), so a sweep killed at any moment loses at most the
steps since each unfinished run's last checkpoint and never a finished result, and stores each run once.

Everything a sweep is given is validated before its first run starts: the preset and scale, ``workers`` (>= 1), every
override (each run's TrainConfig is built first; a weight file named by ``init`` is loaded and matched against its
config). A damaged or foreign store is refused (`experiments.sweeps.store.StoreError`); :func:`rebuild_store`
(``attnrank sweep ... --rebuild-store``) moves it aside and rebuilds it from the runs' ``result.json`` files.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.analysis.run_curves import collect_curves
from experiments.config import TrainConfig
from experiments.packing import PACK_VARYING_FIELDS, SEED_FIELDS
from experiments.sweeps.backends import run_tasks
from experiments.sweeps.grouping import group_into_packs
from experiments.sweeps.preflight import check_sweep_request
from experiments.sweeps.preset_kit import with_overrides
from experiments.sweeps.presets import get_preset
from experiments.sweeps.run_specs import RunSpec, spec_kind
from experiments.sweeps.store import DONE_STATUSES, ResultsStore, StoreError
from experiments.sweeps.work import RunTask
from experiments.training.progress import Progress
from experiments.training.run_directory import RunDirectory
from theory.validation import check_int

STORE_NAME = "results.sqlite"
RUNS_DIR = "runs"


def store_path(out: Path | str) -> Path:
    """``<out>/results.sqlite``."""
    return Path(out) / STORE_NAME


def resolve_runs(preset: str, scale: str, overrides: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """The sweep's run specs with ``overrides`` applied, every one validated before any run starts.

    Every TrainConfig is built (a bad value names its field); overrides on a preset without training runs are
    refused (they would change nothing); a weight file named by ``init`` must exist, be readable and match its run.
    """
    specs = get_preset(preset).runs(scale)
    if overrides:
        if not any(isinstance(s, TrainConfig) for s in specs):
            raise ValueError(f"--set overrides TrainConfig fields, but preset {preset} has no training runs")
        specs = with_overrides(specs, overrides)
    checked: set[str] = set()
    for spec in specs:
        if isinstance(spec, TrainConfig) and spec.init is not None:
            if spec.model != "theory":
                raise ValueError(
                    f"init: weight files load into the theory model, but preset {preset} trains {spec.model!r}"
                )
            key = json.dumps({k: v for k, v in spec.to_dict().items() if k != "seed"}, sort_keys=True)
            if key not in checked:
                # torch (via the model factory) is imported only when a run loads a weight file: a sweep's driver
                # otherwise never loads it (see experiments.sweeps.backends).
                from experiments.models.factory import theory_network_from_file

                theory_network_from_file(spec)
                checked.add(key)
    return specs


def select_runs(specs: list[RunSpec], only: Mapping[str, Any] | None) -> list[RunSpec]:
    """The specs whose fields equal every ``KEY: VALUE`` of ``only`` (all of them when ``only`` is empty).

    ValueError naming ``only`` when a key is no field of any spec, or when no spec matches (a typo would otherwise
    run nothing and report success).
    """
    if not only:
        return specs
    fields = sorted({key for spec in specs for key in spec.to_dict()})
    unknown = sorted(set(only) - set(fields))
    if unknown:
        known = ", ".join(fields)
        raise ValueError(f"only must name fields of the runs; unknown: {', '.join(unknown)} (fields: {known})")
    kept = [s for s in specs if all(s.to_dict().get(key) == value for key, value in only.items())]
    if not kept:
        wanted = ", ".join(f"{key}={value!r}" for key, value in only.items())
        raise ValueError(f"only is {wanted}, which matches none of the {len(specs)} runs")
    return kept


def _entries(specs: list[RunSpec]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(s.config_hash(), spec_kind(s), s.to_dict()) for s in specs]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _has_evaluation(metrics: Mapping[str, Any]) -> bool:
    return all(key in metrics for key in ("population_error", "population_stderr", "population_samples"))


def _evaluation_beside(files: RunDirectory) -> dict[str, Any] | None:
    """evaluation.json of a run evaluated after its training, or None (absent, damaged or incomplete)."""
    try:
        evaluation = files.read_evaluation()
    except ValueError:
        return None
    return evaluation if evaluation is not None and _has_evaluation(evaluation) else None


def _open_for(preset: str, scale: str, out: Path) -> ResultsStore:
    """The sweep's store; a refusal names this sweep's own rebuild command."""
    try:
        return ResultsStore(store_path(out))
    except StoreError as exc:
        message = str(exc).replace("PRESET --scale SCALE", f"{preset} --scale {scale}")
        raise StoreError(message, damaged=exc.damaged) from exc


def rebuild_store(
    preset: str, scale: str, out: Path | str, *, overrides: Mapping[str, Any] | None = None
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

    Returns:
        restored (runs stored from their files), pending (left to the sweep), moved_aside (path or None).
    """
    out = Path(out)
    entries = _entries(resolve_runs(preset, scale, overrides))
    path = store_path(out)
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
    with ResultsStore(path) as store:
        store.register(preset, scale, entries)
        done = store.done_keys()
        for key, kind, _ in entries:
            files = RunDirectory(out / RUNS_DIR / key)
            metrics = files.read_result_metrics()
            if key in done or metrics is None:
                continue
            config = _read_json(files.config) or {}
            if kind == "train" and config.get("config_hash") != key:
                continue  # a directory whose config is not this run's: leave the run to the sweep
            if kind == "train" and not metrics.get("diverged") and not _has_evaluation(metrics):
                evaluation = _evaluation_beside(files)
                if evaluation is None:
                    continue  # trained, never evaluated: the sweep evaluates it
                metrics = {**metrics, **evaluation}
            required = ("best_loss", "final_loss", "seconds")
            if not all(isinstance(metrics.get(k), (int, float, str)) for k in required):
                continue
            provenance = {"git_revision": config.get("git_revision"), "versions": config.get("versions") or {}}
            store.mark_running(key)
            restored += int(store.record_result(key, metrics, provenance))
        counts = store.status_counts(k for k, _, _ in entries)
    return {
        "restored": restored,
        "pending": sum(v for s, v in counts.items() if s not in DONE_STATUSES),
        "moved_aside": None if moved is None else str(moved),
    }


def run_sweep(
    preset: str,
    scale: str,
    out: Path | str,
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    only: Mapping[str, Any] | None = None,
    progress: bool = True,
    batch_seeds: bool = False,
    pack: bool = True,
    rebuild: bool = False,
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
        only: run only the specs whose fields equal these (:func:`select_runs`); the others are neither run nor
            registered, so drivers with disjoint selections can share one store (each state change is its own
            transaction).
        progress: show progress over runs on stderr (a bar on a terminal, else a line every 10 s: training/progress).
        batch_seeds: pack only the runs that differ in their seeds alone (`experiments.packing.SEED_FIELDS`), even
            with ``pack`` False.
        pack: train the runs that may share a pack together (`experiments.sweeps.grouping`,
            `experiments.training.packed`: one process and one step for several runs, each in its own run directory
            with its own checkpoints); False trains every run alone.
        rebuild: first rebuild the store from the runs' files (:func:`rebuild_store`; a damaged store is moved
            aside), then run what is left.

    Returns:
        summary: preset, scale, runs, skipped (already done), finished, diverged, failed (this call), seconds,
        runs_per_second (runs executed by this call per wall second), store; with ``rebuild`` also restored and
        moved_aside.
    """
    check_sweep_request(
        preset,
        scale,
        out,
        backend=backend,
        workers=workers,
        address=address,
        overrides=overrides,
        progress=progress,
        batch_seeds=batch_seeds,
        pack=pack,
        rebuild=rebuild,
    )  # every argument, and the memory of the runs in flight, before anything is written (sweeps.preflight)
    if workers is not None:
        check_int("workers", workers, minimum=1)
    spec_list = select_runs(resolve_runs(preset, scale, overrides), only)
    out = Path(out)
    started = time.perf_counter()
    counts = {"finished": 0, "diverged": 0, "failed": 0}
    rebuilt = rebuild_store(preset, scale, out, overrides=overrides) if rebuild else None
    with _open_for(preset, scale, out) as store:
        entries = _entries(spec_list)
        store.register(preset, scale, entries)
        done = store.done_keys()
        tasks = [RunTask(key, kind, spec, str(out / RUNS_DIR / key)) for key, kind, spec in entries if key not in done]
        bar = Progress(
            len(entries), initial=len(entries) - len(tasks), desc=f"{preset}/{scale}", enabled=progress, unit="run"
        )
        with bar:
            for task in tasks:
                store.mark_running(task.key)
            if batch_seeds or pack:
                varying = SEED_FIELDS if batch_seeds else PACK_VARYING_FIELDS
                items = group_into_packs(
                    tasks, workers if workers is not None else (os.cpu_count() or 1), varying=varying
                )
            else:
                items = list(tasks)
            for outcome in run_tasks(items, backend, workers=workers, address=address):
                if outcome.ok:
                    store.record_result(outcome.key, outcome.metrics, outcome.provenance)  # committed before we go on
                    counts["diverged" if outcome.metrics.get("diverged") else "finished"] += 1
                else:
                    store.record_failure(outcome.key, outcome.error or "unknown error")
                    counts["failed"] += 1
                    bar.write(f"run {outcome.key[:12]} failed: {(outcome.error or '').splitlines()[0]}")
                bar.update(1)
        # Every curve at hand, finished or not, into <out>/curves.csv: what a report needs once runs/ is gone.
        collect_curves(out, out / RUNS_DIR, [row.hash for row in store.rows() if row.kind == "train"])
        seconds = time.perf_counter() - started
    executed = len(tasks)
    extra = {} if rebuilt is None else {"restored": rebuilt["restored"], "moved_aside": rebuilt["moved_aside"]}
    return {
        "preset": preset,
        "scale": scale,
        "runs": len(entries),
        "skipped": len(entries) - executed,
        **counts,
        "seconds": seconds,
        "runs_per_second": executed / seconds if seconds > 0 else float("nan"),
        "store": str(store_path(out)),
        **extra,
    }
