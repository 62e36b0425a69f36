"""Merge a milestone watcher's records into a store's ``milestones.csv``.

    python scripts/collect_milestones.py WATCHER_DIR STORE_DIR

``WATCHER_DIR`` is the output of `scripts/milestone_evaluations.py` (``<hash>/step-<S>.json``); ``STORE_DIR`` a
committed store (for example ``results/fig1-d64-replay-cpu``). Rows already in the store's file are kept; a record
for a (run, step) the file already holds must equal it (the evaluation is deterministic), else the merge is refused
in one line and nothing is written (`experiments.analysis.milestones`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments.analysis.milestones import read_watcher_records, write_milestones
from experiments.analysis.sweep_directory import SweepDirectory


def collect(watcher_dir: Path, store_dir: Path) -> int:
    """Merge, write, and return how many rows the store's file holds now."""
    if not watcher_dir.is_dir():
        raise ValueError(f"WATCHER_DIR: {watcher_dir} is not a directory")
    store = SweepDirectory(store_dir)
    target = store.milestones
    merged = store.read_milestones()
    for record in read_watcher_records(watcher_dir):
        key = (record.hash, record.step)
        if key in merged and merged[key] != record:
            raise ValueError(
                f"{target}: run {key[0][:12]} at step {key[1]} holds another evaluation than the watcher's"
            )
        merged[key] = record
    write_milestones(target, merged.values())
    return len(merged)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python scripts/collect_milestones.py WATCHER_DIR STORE_DIR", file=sys.stderr)
        return 2
    try:
        print(f"{collect(Path(argv[0]), Path(argv[1]))} milestone rows")
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
