"""Copy a live sweep's store into the repository while its runs go on: a consistent store, its curves, and a report.

    python scripts/snapshot_store.py SWEEP_DIR DEST_DIR

``SWEEP_DIR`` is a sweep directory that may be in use (its drivers keep writing ``results.sqlite`` and ``runs/``);
``DEST_DIR`` (for example ``results/fig1-d64-cpu``) receives:

- ``results.sqlite``: a consistent copy made with SQLite's online backup (never a file copy of a database in WAL
  mode), in rollback-journal mode so that it is one self-contained file, its records upgraded to the one metric
  record (`experiments.sweeps.record_migration.migrate_store`: runs frozen at an older revision keep writing the
  older records into the live store, and the committed copy holds one schema);
- ``curves.csv`` (and ``population.csv``): every run's curve so far, from its run directory's ``metrics.csv``
  (`experiments.analysis.sweep_directory.SweepDirectory.collect_curves`; unfinished runs included, so a report can
  show them);
- ``report.md`` and its figures, written by ``attnrank report DEST_DIR`` from those two files alone.

Nothing in ``SWEEP_DIR`` is written (the copy is upgraded, never the live store). Run it from the repository root so
the report names the store as committed.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.reporting.sweep_report import write_report
from experiments.studies import PRESETS
from experiments.sweeps.record_migration import migrate_store


def snapshot(sweep_dir: Path, dest: Path) -> Path:
    """Copy the store and the curves of ``sweep_dir`` into ``dest`` and write its report there; the report's path."""
    live, kept = SweepDirectory(sweep_dir), SweepDirectory(dest)
    source = live.store
    if not source.is_file():
        raise ValueError(f"SWEEP_DIR: {sweep_dir} holds no {source.name}")
    dest.mkdir(parents=True, exist_ok=True)
    target = kept.store
    tmp = target.with_name(f"{target.name}.tmp")
    tmp.unlink(missing_ok=True)
    reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=60)
    writer = sqlite3.connect(tmp)
    try:
        reader.backup(writer)
        writer.execute("PRAGMA journal_mode=DELETE")
        writer.commit()
        keys = [row[0] for row in writer.execute("SELECT hash FROM runs WHERE kind = 'train'")]
    finally:
        writer.close()
        reader.close()
    try:
        migrate_store(tmp)  # the copy in the one metric record, before it replaces the committed store
    except ValueError:
        tmp.unlink(missing_ok=True)  # the committed store stays as it was
        raise
    tmp.replace(target)
    kept.collect_curves(keys, source=live)
    return write_report(dest, PRESETS)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python scripts/snapshot_store.py SWEEP_DIR DEST_DIR", file=sys.stderr)
        return 2
    try:
        print(snapshot(Path(argv[0]), Path(argv[1])))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
