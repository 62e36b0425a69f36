"""The public store readers (`attnrank.read_store`, `attnrank.read_curves`): what a store holds, read back unchanged
and without writing, and a directory that is no store refused by name."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import attnrank
from experiments.analysis.run_curves import write_curves_file
from experiments.config import TrainConfig
from experiments.sweeps.store import ResultsStore
from tests.run_records import evaluated

KEYS = (hashlib.sha256(b"first").hexdigest(), hashlib.sha256(b"second").hexdigest())
_RESULT = {"final_loss": 0.25, "best_loss": 0.25, "steps": 2, "diverged": False, "seconds": 1.0}
SPECS = (TrainConfig(seed=0).to_dict(), TrainConfig(seed=1).to_dict())


def _store(root: Path) -> Path:
    """A store of two runs, the first finished, with training curves for both and a population curve for one; in
    SQLite's rollback-journal mode, as committed stores are (scripts/snapshot_store.py)."""
    with ResultsStore(root / "results.sqlite") as store:
        store.register("p", "quick", [(KEYS[0], "train", SPECS[0]), (KEYS[1], "train", SPECS[1])])
        store.record_result(KEYS[0], {**_RESULT, **evaluated(0.5)}, {})
        store.connection.execute("PRAGMA journal_mode=DELETE")
    write_curves_file(
        root / "curves.csv", {KEYS[0]: [(1, 0.5), (2, 0.25)], KEYS[1]: [(1, 0.75)]}, dict.fromkeys(KEYS, "run")
    )
    write_curves_file(root / "population.csv", {KEYS[0]: [(2, 0.5)]}, {KEYS[0]: "run"}, column="population")
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(root.iterdir())}


def test_the_readers_give_back_what_the_store_holds(tmp_path: Path) -> None:
    root = _store(tmp_path)
    before = _files(root)
    rows = sorted(attnrank.read_store(root), key=lambda row: KEYS.index(row.hash))
    assert [row.hash for row in rows] == list(KEYS)
    assert [row.spec["seed"] for row in rows] == [0, 1]
    assert [row.status for row in rows] == ["finished", "pending"]
    assert rows[0].metrics == {**_RESULT, **evaluated(0.5)} and rows[1].metrics is None
    assert attnrank.read_curves(str(root)) == {KEYS[0]: [(1, 0.5), (2, 0.25)], KEYS[1]: [(1, 0.75)]}
    assert attnrank.read_curves(root, "population") == {KEYS[0]: [(2, 0.5)]}
    assert _files(root) == before  # read only: not a byte written, no file added


def test_a_committed_store_reads_as_its_runs() -> None:
    """Every run of the committed finite-set store has a training curve and a population curve under its hash."""
    store = Path(__file__).resolve().parents[3] / "results" / "finite-set-cpu"
    rows = attnrank.read_store(store)
    assert rows and all(row.status == "finished" for row in rows)
    for column in ("loss", "population"):
        assert set(attnrank.read_curves(store, column)) == {row.hash for row in rows}


def test_a_directory_that_is_no_store_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="directory holds no results store"):
        attnrank.read_store(tmp_path)
    with pytest.raises(FileNotFoundError, match="directory holds no population.csv"):
        attnrank.read_curves(tmp_path, "population")
    with pytest.raises(FileNotFoundError, match="directory is not an existing directory"):
        attnrank.read_store(tmp_path / "missing")
    with pytest.raises(ValueError, match="column must be one of 'loss', 'population'"):
        attnrank.read_curves(_store(tmp_path), "losses")
