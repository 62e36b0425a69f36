"""experiments/sweeps/record_migration.py, scripts/migrate_records.py and the snapshot: every record written before
the one metric record upgrades to it once, moving numbers and computing none, and a second run changes nothing."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from experiments.studies import get_preset
from experiments.sweeps.record_migration import (
    LEGACY_DEPTH_SAMPLES,
    migrate_run_directory,
    migrate_store,
    upgrade_record,
)
from experiments.sweeps.store import ResultsStore
from experiments.training.run_directory import RunDirectory
from experiments.training.run_record import RunRecord

REPOSITORY = Path(__file__).resolve().parents[3]
OUTCOME = {"final_loss": 0.33, "best_loss": 0.32, "steps": 2000, "diverged": False, "seconds": 20.0}
OLD_BOUND = {"d": 8, "r": 2, "H": 4, "bound_lower": 0.15, "bound_upper": 0.1501, "bound_applies": True}


def _old_theorem2(error: float, stderr: float = 0.002) -> dict[str, Any]:
    """Shape 1: the bound record holding its own estimate, as one-layer theory runs wrote it before."""
    estimate = {"error": error, "error_stderr": stderr, "n_samples": 20_000, "error_upper_4se": error + 4 * stderr}
    return {**OUTCOME, "theorem2": {**OLD_BOUND, **estimate, "consistent": error + 4 * stderr >= 0.15}}


def test_shape_one_moves_the_estimate_beside_the_bound() -> None:
    old = _old_theorem2(0.31)
    new = upgrade_record(old, "train")
    assert (new["population_error"], new["population_stderr"], new["population_samples"]) == (0.31, 0.002, 20_000)
    assert new["theorem2"] == {**OLD_BOUND, "consistent": True}
    assert {k: new[k] for k in OUTCOME} == OUTCOME
    assert RunRecord.read(new).to_dict() == new


def test_shape_one_beside_a_recipe_estimate_keeps_the_recipe_and_rechecks_consistent() -> None:
    """Revision 8cecfd9 wrote two independent estimates; the record keeps the recipe's and says whether it is
    consistent with the bound (here the second estimate sat below the bound, the recipe's above it)."""
    old = {**_old_theorem2(0.14), "population_error": 0.2, "population_stderr": 0.003, "population_samples": 20_000}
    assert old["theorem2"]["consistent"] is False
    new = upgrade_record(old, "train")
    assert (new["population_error"], new["population_stderr"]) == (0.2, 0.003)
    assert new["theorem2"]["consistent"] is True


def test_shape_two_records_the_depth_runs_sample_count() -> None:
    old = {**OUTCOME, "packed": 2, "error": 0.012, "error_stderr": 0.0004}
    new = upgrade_record(old, "train")
    assert new == {**OUTCOME, "packed": 2, "population_error": 0.012, "population_stderr": 0.0004,
                   "population_samples": LEGACY_DEPTH_SAMPLES}  # fmt: skip
    with pytest.raises(ValueError, match="field error is at the top level of a least-squares-heads record"):
        upgrade_record(old, "least-squares-heads")


def test_shape_three_gives_a_construction_the_bound_record() -> None:
    old = {"d": 8, "r": 2, "H": 4, "error": 0.3, "error_stderr": 0.001, "n_samples": 4000,
           "chosen_temperature": "inf", "in_sample": 0.29, "validation": {"inf": 0.3}, "bound_lower": 0.15,
           "bound_upper": 0.1501, "consistent": True, "weight_norm": 1.5, "best_loss": 0.3, "final_loss": 0.3,
           "diverged": False, "seconds": 0.2}  # fmt: skip
    new = upgrade_record(old, "least-squares-heads")
    assert new["theorem2"] == {**OLD_BOUND, "consistent": True}
    assert (new["population_error"], new["population_stderr"], new["population_samples"]) == (0.3, 0.001, 4000)
    assert not {"d", "r", "H", "error", "error_stderr", "n_samples", "bound_lower"} & set(new)  # d, r, H: the spec's
    assert new["weight_norm"] == 1.5 and new["validation"] == {"inf": 0.3}
    with pytest.raises(ValueError, match="field bound_lower is at the top level of a train record"):
        upgrade_record(old, "train")


def test_a_current_record_is_returned_unchanged() -> None:
    current = upgrade_record(_old_theorem2(0.31), "train")
    assert upgrade_record(current, "train") == current
    assert upgrade_record(OUTCOME, "train") == OUTCOME  # a run stored before any evaluation: nothing to move


def test_a_record_no_shape_explains_is_refused() -> None:
    with pytest.raises(ValueError, match="field colour is not in the run record"):
        upgrade_record({**OUTCOME, "colour": "red"}, "train")
    with pytest.raises(ValueError, match="field theorem2.n_samples is missing"):
        broken = _old_theorem2(0.31)
        del broken["theorem2"]["n_samples"]
        upgrade_record(broken, "train")


def _legacy_store(path: Path, rows: list[tuple[str, dict[str, Any] | None]]) -> Path:
    """A store whose rows hold records from before the one record, written past the store's writer as old code
    did; in rollback-journal mode, as committed stores are."""
    specs = get_preset("bound-vs-trained").runs("quick")[: len(rows)]
    with ResultsStore(path) as store:
        store.register("bound-vs-trained", "quick", [(s.config_hash(), "train", s.to_dict()) for s in specs])
        for spec, (status, metrics) in zip(specs, rows, strict=True):
            store.connection.execute(
                "UPDATE runs SET status = ?, metrics = ?, seconds = 1.0 WHERE hash = ?",
                (status, None if metrics is None else json.dumps(metrics, sort_keys=True), spec.config_hash()),
            )
        store.connection.execute("PRAGMA journal_mode=DELETE")
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_store_is_upgraded_once_and_a_second_run_changes_no_byte(tmp_path: Path) -> None:
    rows = [("finished", _old_theorem2(0.31)), ("finished", {**OUTCOME, "error": 0.2, "error_stderr": 0.01})]
    path = _legacy_store(tmp_path / "results.sqlite", [*rows, ("finished", OUTCOME), ("pending", None)])
    first = migrate_store(path)
    assert (first.records, first.upgraded) == (3, 2)  # a pending run has no record; OUTCOME is one already
    digest = _digest(path)
    second = migrate_store(path)
    assert (second.records, second.upgraded) == (3, 0) and _digest(path) == digest
    with ResultsStore(path, readonly=True) as store:
        metrics = [row.metrics for row in store.rows() if row.status == "finished"]
    assert sorted(str(m.get("population_error")) for m in metrics if m) == ["0.2", "0.31", "None"]
    assert not list(tmp_path.glob("*-wal")) and not list(tmp_path.glob("*-journal"))


def test_a_store_with_a_row_it_cannot_upgrade_is_left_as_it_was(tmp_path: Path) -> None:
    broken = _old_theorem2(0.31)
    del broken["theorem2"]["error_stderr"]
    path = _legacy_store(tmp_path / "results.sqlite", [("finished", _old_theorem2(0.2)), ("finished", broken)])
    digest = _digest(path)
    with pytest.raises(ValueError, match=r"results.sqlite: run [0-9a-f]{10}: metrics: field theorem2.error_stderr"):
        migrate_store(path)
    assert _digest(path) == digest  # one transaction: the first row's upgrade was rolled back
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 10)
    with pytest.raises(ValueError, match="junk.sqlite"):
        migrate_store(tmp_path / "junk.sqlite")


def test_a_run_directory_is_upgraded_file_by_file(tmp_path: Path) -> None:
    files = RunDirectory(tmp_path)
    files.config.write_text("{}")  # a trained run's directory (the migration reads no more of it)
    old = _old_theorem2(0.31)
    files.result.write_text(json.dumps(old))
    files.evaluation.write_text(json.dumps({"theorem2": old["theorem2"]}))
    files.analysis.write_text(json.dumps({"run": {"d": 8}, "population_error": 0.31, "population_stderr": 0.002,
                                          "population_samples": 20_000, "theorem2": old["theorem2"]}))  # fmt: skip
    assert migrate_run_directory(tmp_path) == [files.result, files.evaluation, files.analysis]
    assert files.read_result_record()["theorem2"] == {**OLD_BOUND, "consistent": True}
    assert files.read_evaluation() is not None
    assert json.loads(files.analysis.read_text())["run"] == {"d": 8}
    before = {path: _digest(path) for path in (files.result, files.evaluation, files.analysis)}
    assert migrate_run_directory(tmp_path) == []
    assert {path: _digest(path) for path in before} == before


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPOSITORY / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_refuses_what_it_cannot_migrate_in_one_line(tmp_path: Path) -> None:
    script = str(REPOSITORY / "scripts" / "migrate_records.py")
    env = {"PYTHONPATH": str(REPOSITORY), "PATH": "/usr/bin:/bin"}
    outcome = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True, env=env)
    assert outcome.returncode == 2 and outcome.stdout == ""
    assert outcome.stderr.count("\n") == 1 and "holds no results.sqlite" in outcome.stderr
    store = _legacy_store(tmp_path / "s" / "results.sqlite", [("finished", _old_theorem2(0.31))])
    outcome = subprocess.run([sys.executable, script, str(store.parent)], capture_output=True, text=True, env=env)
    assert outcome.returncode == 0 and "1 upgraded of 1 records" in outcome.stdout, outcome.stderr
    outcome = subprocess.run([sys.executable, script, str(store.parent)], capture_output=True, text=True, env=env)
    assert outcome.returncode == 0 and "0 upgraded of 1 records" in outcome.stdout


def test_the_snapshot_of_a_live_store_holding_old_records_commits_the_one_record(tmp_path: Path) -> None:
    """A run frozen at an old revision writes the old record into the live store; the snapshot migrates its copy and
    never writes the live store."""
    live = tmp_path / "live"
    live.mkdir()
    path = _legacy_store(live / "results.sqlite", [("finished", _old_theorem2(0.31)), ("running", None)])
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode=WAL")  # a live sweep's store
    before = _digest(path)
    report = _script("snapshot_store").snapshot(live, tmp_path / "committed")
    assert report.is_file() and _digest(path) == before
    committed = tmp_path / "committed" / "results.sqlite"
    with ResultsStore(committed, readonly=True) as store:
        [finished] = [row for row in store.rows() if row.status == "finished"]
    assert finished.metrics is not None and finished.metrics["population_error"] == 0.31
    assert migrate_store(committed).upgraded == 0


def test_every_committed_store_is_in_the_one_record(tmp_path: Path) -> None:
    """The committed stores were migrated once (scripts/migrate_records.py): a copy of each upgrades nothing."""
    stores = sorted(REPOSITORY.glob("results/*/results.sqlite"))
    assert len(stores) >= 15
    for store in stores:
        copy = tmp_path / store.parent.name / "results.sqlite"
        copy.parent.mkdir()
        shutil.copyfile(store, copy)
        assert migrate_store(copy).upgraded == 0, store
