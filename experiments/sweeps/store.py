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

Damage. Opening checks the file before anything is written: the SQLite header, the page count against the file size
(a truncated file), ``PRAGMA quick_check``, and that its tables are this store's (``runs`` and ``sweep_runs`` with
their columns; `experiments.sweeps.store_file` holds the tables and these checks). A file that fails (garbage bytes, a
truncated copy, another program's SQLite database) is refused with one line, `StoreError` (a ValueError), that says
how to rebuild it from the runs' ``result.json`` files (``attnrank sweep PRESET --scale SCALE --out DIR
--rebuild-store``, `experiments.sweeps.runner.rebuild_store`); no table is ever created in a file this module did not
create. ``readonly=True`` (``attnrank report``) opens the file with SQLite's ``mode=ro`` URI, so a reader can never
write to it. Any SQLite error raised later by a method is the same one-line StoreError.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from experiments.config import TrainConfig
from experiments.json_files import JsonTooDeep, jsonable, parse_json_text
from experiments.sweeps.run_specs import SPEC_KINDS, spec_from_record
from experiments.sweeps.store_file import SCHEMA, StoreError, check_header, check_schema, damaged_store
from experiments.training.run_record import MIGRATION_HINT, RunRecord
from theory.validation import check_choice

STATUSES = ("pending", "running", "finished", "diverged", "failed")
DONE_STATUSES = ("finished", "diverged")
"""Statuses a re-run skips (a diverged run is a result, not an error; a failed one is retried)."""

_T = TypeVar("_T")


def _guarded(method: Callable[..., _T]) -> Callable[..., _T]:
    """Turn any SQLite error of a store method into a one-line StoreError naming the store and the rebuild."""

    @functools.wraps(method)
    def wrapper(self: ResultsStore, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.IntegrityError:
            raise  # a constraint violation is a bug in the caller, not damage
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StoreError(
                    f"{self.path} is busy ({text}): another sweep may be writing to it; retry later"
                ) from exc
            if "readonly" in text:
                raise StoreError(f"{self.path} was opened read-only ({text})") from exc
            raise damaged_store(self.path, f"SQLite: {text}") from exc
        except sqlite3.DatabaseError as exc:
            raise damaged_store(self.path, f"SQLite: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise damaged_store(self.path, f"a stored JSON field is unreadable: {exc}") from exc

    return wrapper


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
    """Open (creating if needed, unless ``readonly``) the store at ``path``, refusing a damaged or foreign file.

    Args:
        path: the SQLite file (``<out>/results.sqlite``).
        timeout: seconds to wait for another process's lock.
        readonly: open with SQLite's ``mode=ro`` (the file must exist and hold this store's tables); nothing can be
            written through this connection.

    Raises:
        StoreError: the file is damaged (garbage, truncated), another program's SQLite database, missing (readonly),
            or SQLite cannot read it; the message is one line and says how to rebuild the store.
    """

    def __init__(self, path: Path | str, timeout: float = 60.0, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly and not self.path.is_file():
            raise StoreError(f"{self.path}: no results store; run `attnrank sweep PRESET --out {self.path.parent}`")
        if self.path.is_file():
            check_header(self.path)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if readonly:
                uri = f"file:{urllib.parse.quote(str(self.path.resolve()))}?mode=ro"
                self.connection = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
            else:
                self.connection = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise damaged_store(self.path, f"SQLite: {exc}") from exc
        try:
            self._open()
        except BaseException:
            self.connection.close()
            raise

    @_guarded
    def _open(self) -> None:
        ours = check_schema(self.connection, self.path)
        if self.readonly:
            if not ours:
                raise StoreError(f"{self.path} holds no tables: not an attnrank results store")
            return
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

    @_guarded
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

    @_guarded
    def mark_running(self, key: str) -> None:
        """A run was handed to a worker (unless it is already done)."""
        with self._transaction():
            self.connection.execute(
                "UPDATE runs SET status = 'running', started = ?, attempts = attempts + 1 "
                "WHERE hash = ? AND status NOT IN ('finished', 'diverged')",
                (time.time(), key),
            )

    @_guarded
    def record_result(self, key: str, metrics: Mapping[str, Any], provenance: Mapping[str, Any]) -> bool:
        """Store a run's result durably (status finished, or diverged if metrics say so).

        Returns:
            True if this call stored it, False if the run was already done (the first result is kept).

        Raises:
            ValueError naming the field when ``metrics`` is not the one metric record (nothing is stored).
        """
        RunRecord.read(metrics)
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

    @_guarded
    def record_failure(self, key: str, error: str) -> None:
        """A run raised: status failed with the message (retried on the next sweep)."""
        with self._transaction():
            self.connection.execute(
                "UPDATE runs SET status = 'failed', error = ? "
                "WHERE hash = ? AND status NOT IN ('finished', 'diverged')",
                (error, key),
            )

    @_guarded
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
        return [_row(values, self.path) for values in cursor.fetchall()]

    @_guarded
    def sweeps(self) -> list[tuple[str, str]]:
        """(preset, scale) pairs recorded in the store."""
        cursor = self.connection.execute("SELECT DISTINCT preset, scale FROM sweep_runs ORDER BY preset, scale")
        return [(str(p), str(s)) for p, s in cursor.fetchall()]

    @_guarded
    def status_counts(self, keys: Iterable[str] | None = None) -> dict[str, int]:
        """Number of runs per status (optionally among ``keys``)."""
        counts = dict.fromkeys(STATUSES, 0)
        wanted = None if keys is None else set(keys)
        for key, status in self.connection.execute("SELECT hash, status FROM runs").fetchall():
            if wanted is None or key in wanted:
                counts[check_choice("status", status, STATUSES)] += 1
        return counts

    @_guarded
    def done_keys(self) -> set[str]:
        """Hashes of finished or diverged runs."""
        cursor = self.connection.execute("SELECT hash FROM runs WHERE status IN ('finished', 'diverged')")
        return {str(k) for (k,) in cursor.fetchall()}


_COLUMNS = "hash, kind, spec, status, metrics, error, attempts, started, finished, seconds, git_revision, versions"


def _is_number(value: Any) -> bool:
    """A JSON number, or one of the strings `experiments.json_files.jsonable` writes for non-finite floats."""
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or value in ("nan", "inf", "-inf")


def _json_object(path: Path, key: str, field: str, text: Any, *, optional: bool) -> dict[str, Any] | None:
    """A row's JSON column as a dict (None for an optional NULL); StoreError naming the run and the field."""
    if text is None and optional:
        return None
    try:
        if not isinstance(text, str):
            raise TypeError(type(text).__name__)
        value = parse_json_text(text, f"run {str(key)[:10]}: field {field}")
    except JsonTooDeep as exc:
        raise damaged_store(path, str(exc)) from None
    except (TypeError, ValueError):
        raise damaged_store(path, f"run {str(key)[:10]}: field {field} is not JSON text") from None
    if not isinstance(value, dict):
        raise damaged_store(
            path, f"run {str(key)[:10]}: field {field} must be a JSON object, got {type(value).__name__}"
        )
    return value


def _check_metrics(path: Path, key: str, metrics: Mapping[str, Any]) -> None:
    """StoreError naming the run and the field unless ``metrics`` is the one metric record
    (`experiments.training.run_record.RunRecord.read`); a record from before it names the migration, not a rebuild."""
    try:
        RunRecord.read(metrics)
    except ValueError as exc:
        detail = f"run {str(key)[:10]}: {str(exc).replace('field ', 'field metrics.', 1)}"
        if MIGRATION_HINT in detail:  # old, not damaged: the remedy is the migration, not a rebuild
            raise StoreError(f"{path}: {detail}") from None
        raise damaged_store(path, detail) from None


def _row(values: Sequence[Any], path: Path) -> RunRow:
    """A row read back, checked (the file is untrusted: a report must meet a damaged row as one line naming it)."""
    key, kind, spec, status, metrics, error, attempts, started, finished, seconds, revision, versions = values
    run = f"run {str(key)[:10]}"
    if kind not in SPEC_KINDS:
        raise damaged_store(path, f"{run}: field kind must be one of {', '.join(SPEC_KINDS)}, got {kind!r:.40}")
    if status not in STATUSES:
        raise damaged_store(path, f"{run}: field status must be one of {', '.join(STATUSES)}, got {status!r:.40}")
    spec_object = _json_object(path, key, "spec", spec, optional=False)
    assert spec_object is not None
    if kind == "train":
        missing = [name for name in TrainConfig.always_recorded() if name not in spec_object]
        if missing:
            raise damaged_store(path, f"{run}: field spec lacks {', '.join(missing[:3])} (every train spec records it)")
    try:
        spec_from_record(kind, spec_object)
    except (TypeError, ValueError) as exc:
        raise damaged_store(
            path, f"{run}: field spec is not a valid {kind} spec ({' '.join(str(exc).split())})"
        ) from None
    metrics_object = _json_object(path, key, "metrics", metrics, optional=True)
    if metrics_object is not None:
        _check_metrics(path, key, metrics_object)
    for name, value in (("seconds", seconds), ("started", started), ("finished", finished)):
        if value is not None and not _is_number(value):
            raise damaged_store(path, f"{run}: field {name} must be a number, got {value!r:.40}")
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise damaged_store(path, f"{run}: field attempts must be an integer, got {attempts!r:.40}")
    return RunRow(
        hash=key,
        kind=kind,
        spec=spec_object,
        status=status,
        metrics=metrics_object,
        error=error,
        attempts=attempts,
        started=started,
        finished=finished,
        seconds=seconds,
        git_revision=revision,
        versions=_json_object(path, key, "versions", versions, optional=True),
    )


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) on an autocommit connection."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def __enter__(self) -> None:
        self.connection.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.connection.execute("ROLLBACK" if exc_type is not None else "COMMIT")
