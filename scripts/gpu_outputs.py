"""What the GPU scripts (scripts/gpu_paper.sh, scripts/gpu_fig1_paper.sh) bring back from a call, written once for both.

    python scripts/gpu_outputs.py machine OUT_FILE DRY_RUN [NOTE]
        OUT_FILE gets three lines: the GPU (nvidia-smi's name, memory and driver; "no GPU used (DRY_RUN=1)" on a
        rehearsal or where nvidia-smi is missing), torch's version and whether CUDA is available, and the repository's
        revision followed by NOTE (what the call trained).
    python scripts/gpu_outputs.py keep OUT_DIR TIMING_JSONL SUMMARY_NAME
        For each line of TIMING_JSONL, one sweep the script ran, a consistent copy of that sweep's store (no run
        directories, no checkpoints: a call brings back a few small files) in OUT_DIR/<keep_as>/, its report written
        there by `attnrank report`, and OUT_DIR/SUMMARY_NAME: per sweep, wall seconds, its time limit, its exit status,
        whether it was stopped at the limit, and its runs by status.

A line of TIMING_JSONL, as the scripts write it: {"key": summary key, "sweep_dir": the sweep's directory, "keep_as":
the kept folder's name under OUT_DIR, "limit_s", "start", "end" (seconds since the epoch), "status": the sweep's exit
status, "missing": what to say when the sweep left no store}.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

TIMEOUT_STATUSES = (124, 137)  # GNU timeout's status when it stopped the command: TERM, then KILL after the grace


def describe_machine(out_file: Path, dry_run: bool, note: str) -> None:
    """The three lines of gpu.txt (module docstring)."""
    gpu = f"no GPU used (DRY_RUN={int(dry_run)})"
    if not dry_run and shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
        gpu = subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip() or gpu
    import torch

    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    lines = [
        gpu,
        f"torch {torch.__version__} cuda {torch.cuda.is_available()}",
        f"revision {revision.stdout.strip() or 'unknown'}" + (f"; {note}" if note else ""),
    ]
    out_file.write_text("\n".join(lines) + "\n")


def keep_sweep(row: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Copy one sweep's store into OUT_DIR/<keep_as>/, report it there; its summary entry."""
    entry: dict[str, Any] = {
        "wall_s": round(row["end"] - row["start"], 1),
        "limit_s": row["limit_s"],
        "exit_status": row["status"],
        "stopped_at_limit": row["status"] in TIMEOUT_STATUSES,
    }
    store = Path(row["sweep_dir"]) / "results.sqlite"
    if not store.is_file():
        return {**entry, "runs": {}, "note": row["missing"]}
    keep = out_dir / row["keep_as"]
    keep.mkdir(parents=True, exist_ok=True)
    (keep / "results.sqlite").unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as source:
        with contextlib.closing(sqlite3.connect(keep / "results.sqlite")) as copy:
            source.backup(copy)  # a consistent copy, whatever the store's journal still holds
            copy.execute("PRAGMA journal_mode=DELETE")  # one file to keep (no -wal / -shm beside it)
        entry["runs"] = dict(source.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
    report = subprocess.run(
        [sys.executable, "-m", "experiments.cli.main", "report", str(keep)], capture_output=True, text=True, check=False
    )
    entry["report_exit_status"] = report.returncode
    if report.returncode:
        entry["report_error"] = report.stderr.strip()[-500:]
    return entry


def keep_sweeps(out_dir: Path, timing: Path, summary_name: str) -> None:
    """Every sweep of TIMING_JSONL kept and reported; the summary written and printed as one JSON line."""
    rows = [json.loads(line) for line in timing.read_text().splitlines() if line.strip()]
    summary = {row["key"]: keep_sweep(row, out_dir) for row in rows}
    (out_dir / summary_name).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))


def main(argv: list[str]) -> int:
    if len(argv) in (3, 4) and argv[0] == "machine":
        describe_machine(Path(argv[1]), argv[2] == "1", argv[3] if len(argv) == 4 else "")
        return 0
    if len(argv) == 4 and argv[0] == "keep":
        keep_sweeps(Path(argv[1]), Path(argv[2]), argv[3])
        return 0
    print(
        "usage: gpu_outputs.py machine OUT_FILE DRY_RUN [NOTE] | keep OUT_DIR TIMING_JSONL SUMMARY_NAME",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
