"""experiments/training/run_record.py: the one metric record of every kind of run, and its checked reader (issue 48)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from experiments.json_files import jsonable
from experiments.sweeps.store import ResultsStore, StoreError
from experiments.training.run_directory import RunDirectory
from experiments.training.run_record import (
    MIGRATION_HINT,
    Evaluation,
    PopulationError,
    RunRecord,
    TheoremTwoBound,
)
from theory.bounds import rank_lower_bound
from theory.monte_carlo import MonteCarloEstimate

POPULATION = PopulationError(0.31, 0.002, 20_000)
BOUND = TheoremTwoBound.certify(8, 2, 4, POPULATION, applies=True)


def _trained() -> dict[str, Any]:
    """A one-layer theory run's record: its outcome, its population error, Theorem 2's bound beside it."""
    record = RunRecord(0.30, 0.29, False, 12.5, steps=2000, evaluation=Evaluation(POPULATION, BOUND))
    return record.to_dict()


def _least_squares() -> dict[str, Any]:
    details = {"chosen_temperature": "inf", "in_sample": 0.28, "validation": {"0.25": 0.4, "inf": 0.3}}
    record = RunRecord(0.31, 0.31, False, 0.4, evaluation=Evaluation(POPULATION, BOUND), details=details)
    return record.to_dict()


RECORDS = {
    "trained with a bound": _trained,
    "trained in a pack, no bound": lambda: {**{k: v for k, v in _trained().items() if k != "theorem2"}, "packed": 2},
    "least squares": _least_squares,
    "random features": lambda: RunRecord(
        0.2, 0.2, False, 0.1, details={"head_counts": [1, 4], "errors": [0.5, 0.2]}
    ).to_dict(),
    "diverged": lambda: RunRecord(math.nan, math.inf, True, 3.0, steps=40).to_dict(),
}


@pytest.mark.parametrize("name", RECORDS)
def test_every_kind_reads_back_as_written(name: str) -> None:
    """The record of each kind survives JSON (non-finite losses as strings) and its reader unchanged."""
    record = RECORDS[name]()
    text = json.loads(json.dumps(jsonable(record), allow_nan=False))
    read = RunRecord.read(text)
    assert jsonable(read.to_dict()) == text


def test_the_bound_is_certified_once_and_stands_beside_the_population_error() -> None:
    certified = rank_lower_bound(8, 2, 4)
    assert (BOUND.lower, BOUND.upper) == (certified.lower, certified.upper)
    assert BOUND.consistent == (0.31 + 4 * 0.002 >= certified.lower)
    fields = Evaluation(POPULATION, BOUND).fields()
    assert set(fields["theorem2"]) == {"d", "r", "H", "bound_lower", "bound_upper", "bound_applies", "consistent"}
    assert fields["population_error"] == 0.31 and "error" not in fields["theorem2"]  # one estimate, once
    below = PopulationError(0.01, 0.001, 100)
    assert TheoremTwoBound.certify(8, 1, 8, below, applies=True).consistent is False  # 0.014 < ~0.158
    estimate = MonteCarloEstimate(mean=0.5, stderr=0.01, n_samples=1000)
    assert PopulationError.of(estimate) == PopulationError(0.5, 0.01, 1000)


def _set(path: str, value: Any) -> Any:
    def change(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = record
        for name in parents:
            target = target[name]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value

    return change


_DELETE = object()
MALFORMED = {
    "a string loss": ("best_loss", "abc", "field best_loss must be"),
    "a negative population error": ("population_error", -0.1, "field population_error must be >= 0"),
    "a nan population error": ("population_error", "nan", "field population_error must be a finite number"),
    "a fractional sample count": ("population_samples", 200.5, "field population_samples must be an integer >= 2"),
    "one sample": ("population_samples", 1, "field population_samples must be an integer >= 2"),
    "a missing population field": ("population_stderr", _DELETE, "field population_stderr is missing"),
    "a bound without its fields": ("theorem2.bound_upper", _DELETE, "field theorem2.bound_upper is missing"),
    "a bound record that is a list": ("theorem2", [1, 2], "field theorem2 must be a JSON object"),
    "a rank of zero": ("theorem2.r", 0, "field theorem2.r must be an integer >= 1"),
    "an upper end below the lower": ("theorem2.bound_upper", 0.0, "field theorem2.bound_upper must be >= bound_lower"),
    "consistent that its numbers deny": ("theorem2.consistent", False, "field theorem2.consistent must be True"),
    "bound_applies as text": ("theorem2.bound_applies", "yes", "field theorem2.bound_applies must be true or false"),
    "an unknown field": ("colour", "red", "field colour is not in the run record"),
    "a zero pack": ("packed", 0, "field packed must be an integer >= 1"),
    "negative steps": ("steps", -1, "field steps must be an integer >= 0"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_the_reader_refuses_a_malformed_record_in_one_line_naming_the_field(name: str) -> None:
    path, value, message = MALFORMED[name]
    record = copy.deepcopy(_trained())
    _set(path, value)(record)
    with pytest.raises(ValueError, match=message) as caught:
        RunRecord.read(record)
    assert "\n" not in str(caught.value)


def test_a_bound_without_a_population_error_is_refused() -> None:
    record = _trained()
    for key in ("population_error", "population_stderr", "population_samples"):
        del record[key]
    with pytest.raises(ValueError, match="field theorem2 needs the population error beside it"):
        RunRecord.read(record)


LEGACY = {
    "the bound with its own estimate (before the one record)": {
        **{k: v for k, v in _trained().items() if not k.startswith("population")},
        "theorem2": {**BOUND.fields(), "error": 0.31, "error_stderr": 0.002, "n_samples": 20_000},
    },
    "a depth run's error at the top level": {"final_loss": 0.1, "best_loss": 0.1, "steps": 5, "diverged": False,
                                              "seconds": 1.0, "error": 0.1, "error_stderr": 0.01},
    "a least-squares run's bound at the top level": {"final_loss": 0.3, "best_loss": 0.3, "diverged": False,
                                                     "seconds": 0.1, "error": 0.3, "bound_lower": 0.2},
}  # fmt: skip


@pytest.mark.parametrize("name", LEGACY)
def test_a_record_from_before_is_refused_naming_the_migration(name: str) -> None:
    with pytest.raises(ValueError, match="scripts/migrate_records.py") as caught:
        RunRecord.read(LEGACY[name])
    assert MIGRATION_HINT in str(caught.value)


def test_a_solved_construction_records_no_steps_but_a_training_run_must_close_its_losses() -> None:
    assert RunRecord.read(_least_squares()).steps is None
    with pytest.raises(ValueError, match="field best_loss must be at most final_loss"):
        RunRecord.read({**_trained(), "best_loss": 0.5})
    with pytest.raises(ValueError, match="field seconds is missing"):
        RunRecord.read({k: v for k, v in _trained().items() if k != "seconds"})
    with pytest.raises(ValueError, match=r"field validation must map temperatures > 0"):
        RunRecord.read({**_least_squares(), "validation": {"cold": 0.3}})
    with pytest.raises(ValueError, match="field chosen_temperature must be > 0"):
        RunRecord.read({**_least_squares(), "chosen_temperature": 0})


def test_writers_refuse_what_readers_would_refuse(tmp_path: Path) -> None:
    """result.json and a store row are written only as the one record: a legacy record is never written."""
    files = RunDirectory(tmp_path)
    with pytest.raises(ValueError, match="field error is not in the run record"):
        files.write_result(LEGACY["a depth run's error at the top level"])
    assert not files.result.exists()
    files.write_result(_trained())
    assert files.read_result_record() == json.loads(files.result.read_text())
    evaluation = Evaluation(POPULATION, BOUND)
    files.write_evaluation(evaluation)
    assert files.read_evaluation() == evaluation
    files.evaluation.write_text(json.dumps({**evaluation.fields(), "step": 3}))
    with pytest.raises(ValueError, match=r"evaluation.json: field step is not an evaluation field"):
        files.read_evaluation()


def _store_with(tmp_path: Path, metrics: dict[str, Any]) -> Path:
    from experiments.config import TrainConfig

    spec = TrainConfig(steps=5)
    path = tmp_path / "results.sqlite"
    with ResultsStore(path) as store:
        store.register("p", "quick", [(spec.config_hash(), "train", spec.to_dict())])
        store.connection.execute("UPDATE runs SET status = 'finished', metrics = ?", (json.dumps(metrics),))
    return path


def test_the_store_refuses_a_row_naming_the_file_the_row_and_the_field(tmp_path: Path) -> None:
    bad = _trained()
    bad["theorem2"]["H"] = "four"
    path = _store_with(tmp_path / "bad", bad)
    with ResultsStore(path, readonly=True) as store, pytest.raises(StoreError) as caught:
        store.rows()
    message = str(caught.value)
    assert str(path) in message and "run " in message and "field metrics.theorem2.H must be an integer" in message
    assert caught.value.damaged and "\n" not in message
    old = _store_with(tmp_path / "old", LEGACY["the bound with its own estimate (before the one record)"])
    with ResultsStore(old, readonly=True) as store, pytest.raises(StoreError) as caught:
        store.rows()
    assert "field metrics.theorem2.error" in str(caught.value) and "migrate_records.py" in str(caught.value)
    assert not caught.value.damaged  # old, not damaged: the remedy is the migration, never a rebuild
    with ResultsStore(tmp_path / "new.sqlite") as store, pytest.raises(ValueError, match="field error"):
        store.record_result("x", LEGACY["a depth run's error at the top level"], {})
