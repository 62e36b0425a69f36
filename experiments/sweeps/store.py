"""The results store: one SQLite file (``<out>/results.sqlite``, WAL mode) with one row per run.

A run is keyed by the hash of its resolved spec (``TrainConfig.config_hash()``); a row holds the spec, its status
(pending / running / finished / diverged / failed), the metrics (JSON), timings, the git revision and library
versions. A second table records which (preset, scale) sweeps contain which runs, so one directory can hold several
sweeps that share runs.

Durability: every state change is its own transaction (``with connection``: BEGIN ... COMMIT), and WAL mode with
``synchronous=FULL`` makes a committed transaction survive a crash of the process (and of the machine). A finished
result is committed before the sweep reports it, so a sweep killed at any moment has either the whole row or the
previous state; re-running it finds the row and skips the run. Finishing is idempotent: recording a run that is
already finished leaves the first result in place (``UPDATE ... WHERE status NOT IN finished states``), so a run
finished twice (e.g. by a worker orphaned by a killed driver) is stored once.

Only the sweep driver process writes (workers return results to it), so there is one writer per store; SQLite's
file locking with a busy timeout keeps a second, concurrent driver (or a reader such as ``attnrank report``) safe.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.json_files import jsonable
from theory.validation import check_choice

STATUSES = ("pending", "running", "finished", "diverged", "failed")
DONE_STATUSES = ("finished", "diverged")
"""Statuses a re-run skips (a diverged run is a result, not an error; a failed one is retried)."""

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


@dataclass(frozen=True)
class RunRow:
    """One row of the store."""

    hash: str
    kind: str
    spec: dict[str, Any]
    status: str
    metrics: dict[str, Any] | None
    error: str | None
    attempts: int
    started: float | None
    finished: float | None
    seconds: float | None
    git_revision: str | None
    versions: dict[str, Any] | None


class ResultsStore:
    """Open (creating if needed) the store at ``path``.

    Args:
        path: the SQLite file (``<out>/results.sqlite``).
        timeout: seconds to wait for another process's lock.
    """

    def __init__(self, path: Path | str, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("PRAGMA foreign_keys=ON")
        with self._transaction():
            for statement in SCHEMA.strip().split(";"):
                if statement.strip():
                    self.connection.execute(statement)

    def _transaction(self) -> Any:
        return _Transaction(self.connection)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, preset: str, scale: str, runs: Sequence[tuple[str, str, Mapping[str, Any]]]) -> int:
        """Add runs (hash, kind, spec dict) as pending unless already present; attach them to the sweep.

        Returns:
            the number of runs newly inserted.
        """
        now = time.time()
        inserted = 0
        with self._transaction():
            for position, (key, kind, spec) in enumerate(runs):
                cursor = self.connection.execute(
                    "INSERT OR IGNORE INTO runs (hash, kind, spec, status, created) VALUES (?, ?, ?, 'pending', ?)",
                    (key, kind, json.dumps(jsonable(dict(spec)), sort_keys=True), now),
                )
                inserted += cursor.rowcount
                self.connection.execute(
                    "INSERT OR IGNORE INTO sweep_runs (preset, scale, hash, position) VALUES (?, ?, ?, ?)",
                    (preset, scale, key, position),
                )
        return inserted

    def mark_running(self, key: str) -> None:
        """A run was handed to a worker (unless it is already done)."""
        with self._transaction():
            self.connection.execute(
                "UPDATE runs SET status = 'running', started = ?, attempts = attempts + 1 "
                "WHERE hash = ? AND status NOT IN ('finished', 'diverged')",
                (time.time(), key),
            )

    def record_result(self, key: str, metrics: Mapping[str, Any], provenance: Mapping[str, Any]) -> bool:
        """Store a run's result durably (status finished, or diverged if metrics say so).

        Returns:
            True if this call stored it, False if the run was already done (the first result is kept).
        """
        status = "diverged" if metrics.get("diverged") else "finished"
        with self._transaction():
            cursor = self.connection.execute(
                "UPDATE runs SET status = ?, metrics = ?, error = NULL, finished = ?, seconds = ?, git_revision = ?, "
                "versions = ? WHERE hash = ? AND status NOT IN ('finished', 'diverged')",
                (
                    status,
                    json.dumps(jsonable(dict(metrics)), sort_keys=True, allow_nan=False),
                    time.time(),
                    float(metrics.get("seconds", float("nan"))),
                    provenance.get("git_revision"),
                    json.dumps(jsonable(dict(provenance.get("versions", {}))), sort_keys=True),
                    key,
                ),
            )
            return cursor.rowcount == 1

    def record_failure(self, key: str, error: str) -> None:
        """A run raised: status failed with the message (retried on the next sweep)."""
        with self._transaction():
            self.connection.execute(
                "UPDATE runs SET status = 'failed', error = ? "
                "WHERE hash = ? AND status NOT IN ('finished', 'diverged')",
                (error, key),
            )

    def rows(self, preset: str | None = None, scale: str | None = None) -> list[RunRow]:
        """Every run (of one sweep when preset/scale are given), in sweep order."""
        if preset is None:
            cursor = self.connection.execute(f"SELECT {_COLUMNS} FROM runs ORDER BY created, hash")
        else:
            query = (
                f"SELECT {', '.join('r.' + c for c in _COLUMNS.split(', '))} FROM runs r "
                "JOIN sweep_runs s ON s.hash = r.hash WHERE s.preset = ?"
            )
            params: list[Any] = [preset]
            if scale is not None:
                query += " AND s.scale = ?"
                params.append(scale)
            cursor = self.connection.execute(query + " ORDER BY s.scale, s.position", params)
        return [_row(values) for values in cursor.fetchall()]

    def sweeps(self) -> list[tuple[str, str]]:
        """(preset, scale) pairs recorded in the store."""
        cursor = self.connection.execute("SELECT DISTINCT preset, scale FROM sweep_runs ORDER BY preset, scale")
        return [(str(p), str(s)) for p, s in cursor.fetchall()]

    def status_counts(self, keys: Iterable[str] | None = None) -> dict[str, int]:
        """Number of runs per status (optionally among ``keys``)."""
        counts = dict.fromkeys(STATUSES, 0)
        wanted = None if keys is None else set(keys)
        for key, status in self.connection.execute("SELECT hash, status FROM runs").fetchall():
            if wanted is None or key in wanted:
                counts[check_choice("status", status, STATUSES)] += 1
        return counts

    def done_keys(self) -> set[str]:
        """Hashes of finished or diverged runs."""
        cursor = self.connection.execute("SELECT hash FROM runs WHERE status IN ('finished', 'diverged')")
        return {str(k) for (k,) in cursor.fetchall()}


_COLUMNS = "hash, kind, spec, status, metrics, error, attempts, started, finished, seconds, git_revision, versions"


def _row(values: Sequence[Any]) -> RunRow:
    key, kind, spec, status, metrics, error, attempts, started, finished, seconds, revision, versions = values
    return RunRow(
        hash=key,
        kind=kind,
        spec=json.loads(spec),
        status=status,
        metrics=None if metrics is None else json.loads(metrics),
        error=error,
        attempts=int(attempts),
        started=started,
        finished=finished,
        seconds=seconds,
        git_revision=revision,
        versions=None if versions is None else json.loads(versions),
    )


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) on an autocommit connection."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> None:
        self.connection.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.connection.execute("ROLLBACK" if exc_type is not None else "COMMIT")
