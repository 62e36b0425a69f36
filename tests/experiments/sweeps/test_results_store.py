"""The SQLite results store: WAL mode, one row per key, first result kept, failures retried, sweep membership."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from experiments.config import TrainConfig
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_file import StoreError

PROV = {"git_revision": "abc", "versions": {"torch": "x"}}


SPEC = TrainConfig().to_dict()
"""A valid train spec (rows are checked when read back: a spec must be one a run could have)."""


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
        runs = [("a", "train", {**SPEC, "seed": 0}), ("b", "train", {**SPEC, "seed": 1})]
        assert store.register("p", "quick", runs) == 2
        assert store.register("p", "quick", runs) == 0
        assert store.register("q", "quick", runs[:1]) == 0  # same run in another sweep: no new row
        assert store.sweeps() == [("p", "quick"), ("q", "quick")]
        assert [r.hash for r in store.rows("p", "quick")] == ["a", "b"]
        assert [r.hash for r in store.rows("q")] == ["a"]
        assert store.status_counts()["pending"] == 2


def _result(loss: float, seconds: float) -> dict[str, Any]:
    """A trained run's metric record (no evaluation)."""
    return {"final_loss": loss, "best_loss": loss, "steps": 10, "diverged": False, "seconds": seconds}


def test_first_result_is_kept_and_survives_reopening(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.register("p", "quick", [("a", "train", SPEC)])
        store.mark_running("a")
        assert store.record_result("a", _result(0.5, 1.0), PROV)
        assert not store.record_result("a", _result(0.1, 2.0), PROV)  # duplicate finish ignored
        store.mark_running("a")  # a finished run is never put back to running
        store.record_failure("a", "late error")  # nor marked failed
    with _store(tmp_path) as store:  # a new connection sees the committed row
        [row] = store.rows()
        assert (row.status, row.metrics, row.attempts, row.error) == (
            "finished",
            _result(0.5, 1.0),
            1,
            None,
        )
        assert row.git_revision == "abc" and row.versions == {"torch": "x"}
        assert store.done_keys() == {"a"}


def test_diverged_failed_and_retry(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.register("p", "quick", [("a", "train", SPEC), ("b", "train", SPEC)])
        store.record_result("a", {**_result(float("nan"), 1.0), "final_loss": float("nan"), "diverged": True}, PROV)
        store.mark_running("b")
        store.record_failure("b", "boom")
        assert store.status_counts() == {"pending": 0, "running": 0, "finished": 0, "diverged": 1, "failed": 1}
        assert store.done_keys() == {"a"}  # diverged is a result; failed is retried
        store.mark_running("b")
        assert store.record_result("b", _result(0.2, 1.0), PROV)
        rows = {r.hash: r for r in store.rows()}
        assert rows["a"].metrics is not None and rows["a"].metrics["best_loss"] == "nan"  # non-finite as a string
        assert rows["b"].attempts == 2 and rows["b"].error is None


def test_concurrent_reader_sees_only_committed_rows(tmp_path: Path) -> None:
    with _store(tmp_path) as writer:
        writer.register("p", "quick", [("a", "train", SPEC)])
        reader = sqlite3.connect(tmp_path / "results.sqlite")
        writer.connection.execute("BEGIN IMMEDIATE")
        writer.connection.execute("UPDATE runs SET status = 'finished' WHERE hash = 'a'")
        assert reader.execute("SELECT status FROM runs").fetchone()[0] == "pending"  # uncommitted: invisible
        writer.connection.execute("ROLLBACK")  # as if the process died before COMMIT
        assert reader.execute("SELECT status FROM runs").fetchone()[0] == "pending"
        reader.close()


def test_check_constraint_rejects_unknown_status(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        store.register("p", "quick", [("a", "train", SPEC)])
        with pytest.raises(sqlite3.IntegrityError):
            store.connection.execute("UPDATE runs SET status = 'done' WHERE hash = 'a'")


# ---------------------------------------------------------------------------------------------------------------------
# A damaged or foreign file is refused with one line that says how to rebuild it; nothing is written to it.
# ---------------------------------------------------------------------------------------------------------------------


def _good_store(tmp_path: Path) -> Path:
    with _store(tmp_path) as store:
        store.register(
            "p",
            "quick",
            [(f"k{i}", "train", {**SPEC, "model": "theory", "seed": i, "init": "x" * 2000}) for i in range(20)],
        )
    return tmp_path / "results.sqlite"


def _damage(path: Path, how: str) -> None:
    if how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2 + 100])
    elif how == "truncated-at-a-page":
        page_size = int.from_bytes(path.read_bytes()[16:18], "big")
        path.write_bytes(path.read_bytes()[: 2 * page_size])
    elif how == "garbage":
        path.write_bytes(bytes(range(256)) * 40)
    elif how == "zeroed-header":
        data = bytearray(path.read_bytes())
        data[:100] = bytes(100)
        path.write_bytes(bytes(data))
    else:  # foreign: another program's SQLite database
        path.unlink()
        connection = sqlite3.connect(path)
        connection.execute("CREATE TABLE photos (id INTEGER, name TEXT)")
        connection.commit()
        connection.close()


@pytest.mark.parametrize("how", ["truncated", "truncated-at-a-page", "garbage", "zeroed-header", "foreign"])
@pytest.mark.parametrize("readonly", [False, True])
def test_damaged_or_foreign_store_is_refused_in_one_line(tmp_path: Path, how: str, readonly: bool) -> None:
    path = _good_store(tmp_path)
    for side in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        side.unlink(missing_ok=True)
    _damage(path, how)
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        ResultsStore(path, readonly=readonly)
    message = str(caught.value)
    assert "\n" not in message and "--rebuild-store" in message and str(path) in message
    assert ("not an attnrank results store" in message) == (how == "foreign")
    assert caught.value.damaged
    assert path.read_bytes() == before  # refused before anything was written


def test_readonly_store_cannot_write_and_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no results store"):
        ResultsStore(tmp_path / "missing.sqlite", readonly=True)
    assert not (tmp_path / "missing.sqlite").exists()
    path = _good_store(tmp_path)
    with ResultsStore(path, readonly=True) as store:
        assert len(store.rows()) == 20
        with pytest.raises(StoreError, match="readonly") as caught:
            store.mark_running("k0")  # SQLite refuses the write: one-line StoreError, not a traceback
        assert not caught.value.damaged  # nothing to rebuild


def test_store_error_is_a_value_error_for_the_cli() -> None:
    assert issubclass(StoreError, ValueError)  # the attnrank entry point turns it into one line, exit 2


def test_a_locked_store_is_busy_not_damaged(tmp_path: Path) -> None:
    path = _good_store(tmp_path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another sweep in the middle of a write
    try:
        with pytest.raises(StoreError, match="busy") as caught:
            ResultsStore(path, timeout=0.1)
        assert not caught.value.damaged  # a rebuild must not move a busy store aside
        assert "\n" not in str(caught.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
