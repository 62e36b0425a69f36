"""The SQLite results store: WAL mode, one row per key, first result kept, failures retried, sweep membership."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from experiments.sweeps.store import ResultsStore

PROV = {"git_revision": "abc", "versions": {"torch": "x"}}


def _store(tmp_path: Path) -> ResultsStore:
    return ResultsStore(tmp_path / "results.sqlite")


def test_wal_mode_and_schema(tmp_path: Path) -> None:
    with _store(tmp_path):
        pass
    connection = sqlite3.connect(tmp_path / "results.sqlite")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {t for (t,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "sweep_runs"} <= tables


def test_register_is_idempotent_and_shares_runs_between_sweeps(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        runs = [("a", "train", {"seed": 0}), ("b", "train", {"seed": 1})]
        assert store.register("p", "quick", runs) == 2
        assert store.register("p", "quick", runs) == 0
        assert store.register("q", "quick", runs[:1]) == 0  # same run in another sweep: no new row
        assert store.sweeps() == [("p", "quick"), ("q", "quick")]
        assert [r.hash for r in store.rows("p", "quick")] == ["a", "b"]
        assert [r.hash for r in store.rows("q")] == ["a"]
        assert store.status_counts()["pending"] == 2


def test_first_result_is_kept_and_survives_reopening(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.register("p", "quick", [("a", "train", {})])
        store.mark_running("a")
        assert store.record_result("a", {"best_loss": 0.5, "seconds": 1.0}, PROV)
        assert not store.record_result("a", {"best_loss": 0.1, "seconds": 2.0}, PROV)  # duplicate finish ignored
        store.mark_running("a")  # a finished run is never put back to running
        store.record_failure("a", "late error")  # nor marked failed
    with _store(tmp_path) as store:  # a new connection sees the committed row
        [row] = store.rows()
        assert (row.status, row.metrics, row.attempts, row.error) == (
            "finished",
            {"best_loss": 0.5, "seconds": 1.0},
            1,
            None,
        )
        assert row.git_revision == "abc" and row.versions == {"torch": "x"}
        assert store.done_keys() == {"a"}


def test_diverged_failed_and_retry(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.register("p", "quick", [("a", "train", {}), ("b", "train", {})])
        store.record_result("a", {"diverged": True, "best_loss": float("nan"), "seconds": 1.0}, PROV)
        store.mark_running("b")
        store.record_failure("b", "boom")
        assert store.status_counts() == {"pending": 0, "running": 0, "finished": 0, "diverged": 1, "failed": 1}
        assert store.done_keys() == {"a"}  # diverged is a result; failed is retried
        store.mark_running("b")
        assert store.record_result("b", {"best_loss": 0.2, "seconds": 1.0}, PROV)
        rows = {r.hash: r for r in store.rows()}
        assert rows["a"].metrics is not None and rows["a"].metrics["best_loss"] == "nan"  # non-finite as a string
        assert rows["b"].attempts == 2 and rows["b"].error is None


def test_concurrent_reader_sees_only_committed_rows(tmp_path: Path) -> None:
    with _store(tmp_path) as writer:
        writer.register("p", "quick", [("a", "train", {})])
        reader = sqlite3.connect(tmp_path / "results.sqlite")
        writer.connection.execute("BEGIN IMMEDIATE")
        writer.connection.execute("UPDATE runs SET status = 'finished' WHERE hash = 'a'")
        assert reader.execute("SELECT status FROM runs").fetchone()[0] == "pending"  # uncommitted: invisible
        writer.connection.execute("ROLLBACK")  # as if the process died before COMMIT
        assert reader.execute("SELECT status FROM runs").fetchone()[0] == "pending"
        reader.close()


def test_check_constraint_rejects_unknown_status(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.register("p", "quick", [("a", "train", {})])
        with pytest.raises(sqlite3.IntegrityError):
            store.connection.execute("UPDATE runs SET status = 'done' WHERE hash = 'a'")
