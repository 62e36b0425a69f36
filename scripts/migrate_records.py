"""Upgrade the metric records of stores and run directories to the one record, once (idempotent).

    python scripts/migrate_records.py DIR [DIR ...]

Each DIR is a store directory (``results/<name>/``: its ``results.sqlite``), a sweep directory (its store and every
``runs/<hash>/``) or a run directory (``attnrank train --out DIR``). Every record written before the one record
(`experiments.training.run_record`) is rewritten in it (`experiments.sweeps.record_migration`: which shapes, and what
each becomes); a record already current is not touched, so running the script twice changes nothing the second time
(the second run prints ``0 upgraded`` everywhere and leaves every file byte for byte).

Never point it at a sweep a driver is still writing: ``scripts/snapshot_store.py`` migrates its copy of such a store.
A DIR that is none of the three, or a record that cannot be upgraded, is refused with one line on stderr (exit status
2); a store is upgraded in one transaction, so a refused store is left as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments.analysis.sweep_directory import RUNS_NAME, STORE_NAME, SweepDirectory
from experiments.sweeps.record_migration import migrate_run_directory, migrate_store
from experiments.training.run_directory import CONFIG_NAME, RESULT_NAME


def migrate(directory: Path) -> list[str]:
    """Upgrade every record under ``directory``; one line per store or run directory looked at."""
    if not directory.is_dir():
        raise ValueError(f"DIR: {directory} is not a directory")
    sweep = SweepDirectory(directory)
    store = sweep.store
    runs = sorted(p for p in sweep.runs.glob("*") if p.is_dir()) if sweep.runs.is_dir() else []
    is_run = (directory / CONFIG_NAME).is_file() or (directory / RESULT_NAME).is_file()
    if not (store.is_file() or runs or is_run):
        raise ValueError(f"DIR: {directory} holds no {STORE_NAME}, no {RUNS_NAME}/ and no run records")
    lines = []
    if store.is_file():
        done = migrate_store(store)
        lines.append(f"{store}: {done.upgraded} upgraded of {done.records} records")
    changed = [path for run in ([directory] if is_run else runs) for path in migrate_run_directory(run)]
    if is_run or runs:
        where = directory if is_run else sweep.runs
        lines.append(f"{where}: {len(changed)} upgraded files" + "".join(f"\n  {path}" for path in changed))
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python scripts/migrate_records.py DIR [DIR ...]", file=sys.stderr)
        return 2
    try:
        for directory in argv:
            for line in migrate(Path(directory)):
                print(line)
    except (OSError, ValueError) as exc:
        print(" ".join(str(exc).split()), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
