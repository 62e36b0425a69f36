"""A results store's file as untrusted input: its tables, and the checks that refuse a file that is not a usable store.

`experiments.sweeps.store.ResultsStore` checks a file here before SQLite writes anything to it (:func:`check_header`:
the SQLite header and the page count against the file size, a truncated copy; :func:`check_schema`: ``PRAGMA
quick_check`` and this store's tables and columns), and every refusal is a one-line :class:`StoreError` that says how
to rebuild the store from its runs' ``result.json`` files (:func:`rebuild_hint`). Its rows are checked as they are read
back (`experiments.sweeps.store`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.training.run_directory import RESULT_NAME

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'finished', 'diverged', 'failed')),
    metrics TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    seconds REAL,
    git_revision TEXT,
    versions TEXT
);
CREATE TABLE IF NOT EXISTS sweep_runs (
    preset TEXT NOT NULL,
    scale TEXT NOT NULL,
    hash TEXT NOT NULL REFERENCES runs(hash),
    position INTEGER NOT NULL,
    PRIMARY KEY (preset, scale, hash)
);
"""


COLUMNS = {
    "runs": {
        "hash", "kind", "spec", "status", "metrics", "error", "attempts", "created", "started", "finished", "seconds",
        "git_revision", "versions",
    },
    "sweep_runs": {"preset", "scale", "hash", "position"},
}  # fmt: skip
"""The columns of this store's tables: a file whose tables lack them is not an attnrank results store."""

SQLITE_HEADER = b"SQLite format 3\x00"


class StoreError(ValueError):
    """The results store cannot be used (damaged, truncated, foreign, busy, read-only): one line, with how to rebuild.

    ``damaged`` is True when rebuilding is the remedy (garbage, truncated, foreign tables, unreadable), False when
    the file is fine but cannot be used now (locked by another sweep, opened read-only, missing).
    """

    def __init__(self, message: str, *, damaged: bool = False) -> None:
        super().__init__(message)
        self.damaged = damaged


def rebuild_hint(path: Path) -> str:
    """The one-line instruction to rebuild the store at ``path`` from its runs' result.json files."""
    runs = SweepDirectory(path.parent).runs
    return (
        f"rebuild it from {runs}/*/{RESULT_NAME} with `attnrank sweep PRESET --scale SCALE --out "
        f"{path.parent} --rebuild-store` (the damaged file is moved aside, not deleted; once per sweep the directory "
        "held)"
    )


def damaged_store(path: Path, reason: str) -> StoreError:
    """The StoreError of a damaged store at ``path``: why, and how to rebuild it."""
    return StoreError(f"{path} is not a usable results store ({reason}); {rebuild_hint(path)}", damaged=True)


def check_header(path: Path) -> None:
    """StoreError unless ``path`` starts with the SQLite header and is as long as its header says (not truncated).

    The page size is at byte 16 (2 bytes, big endian; 1 means 65536) and the page count at byte 28 (valid when the
    change counter at byte 24 equals the version-valid-for number at byte 92; SQLite's file format, section 1.3).
    The page count is not compared while a non-empty WAL file exists beside the store (SQLite completes an interrupted
    checkpoint from it).
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        header = handle.read(100)
    if size == 0:
        return  # an empty file is what SQLite creates before the first write
    if len(header) < 100 or not header.startswith(SQLITE_HEADER):
        raise damaged_store(path, "not a SQLite database: unknown header")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        valid = False  # a checkpoint interrupted by a crash may leave the file short; SQLite redoes it from the WAL
    if page_size < 512 or size % page_size != 0 or (valid and size < pages * page_size):
        raise damaged_store(
            path, f"truncated: {size} bytes, not the {pages} pages of {page_size} bytes its header names"
        )


def check_schema(connection: sqlite3.Connection, path: Path) -> bool:
    """True if the file holds this store's tables, False if it holds no table at all; StoreError otherwise."""
    (verdict,) = connection.execute("PRAGMA quick_check").fetchone()
    if verdict != "ok":
        raise damaged_store(path, f"quick_check: {' '.join(str(verdict).split())[:120]}")
    tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return False
    for table, columns in COLUMNS.items():
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")} if table in tables else set()
        if not columns <= present:
            listed = ", ".join(sorted(tables)[:6])
            raise StoreError(
                f"{path} is a SQLite database but not an attnrank results store (its tables: {listed}); "
                f"it is left untouched: point --out at another directory, or {rebuild_hint(path)}",
                damaged=True,
            )
    return True
