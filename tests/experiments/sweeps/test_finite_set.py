"""The finite-set study (issue 38) at its quick scale: Theorem 2's bound holds for every population error, a one-batch
set carries the training loss below it, and the claim's predicate fails the records it must fail."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.reporting.sweep_report import write_report
from experiments.studies import PRESETS, run_sweep
from experiments.studies.finite_set import training_below_population_above
from experiments.sweeps.grading import Grade
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_records import sweep_records
from tests.run_records import evaluated
from theory.bounds import rank_lower_bound


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("finite-set")
    run_sweep("finite-set", "quick", out, workers=1, progress=False)
    write_report(out, PRESETS)
    assert (out / "finite-set-quick.png").is_file() and "Training data:" in (out / "report.md").read_text()
    with ResultsStore(SweepDirectory(out).store, readonly=True) as store:
        return sweep_records(store, "finite-set", "quick")


def test_the_bound_holds_for_every_population_error(records: list[dict[str, Any]]) -> None:
    """Against the certified bound computed here (not the stored one): mean + 4 s.e. >= the bound's lower end."""
    assert len(records) == 6 and all(r["status"] == "finished" for r in records)
    for r in records:
        bound = rank_lower_bound(r["d"], r["rank"], r["heads"]).lower
        assert r["population_error"] + 4 * r["population_stderr"] >= bound, r["hash"]
        assert r["population_samples"] == 20_000


def test_a_one_batch_set_is_memorised_below_the_bound(records: list[dict[str, Any]]) -> None:
    one = next(r for r in records if r.get("train_batches") == 1)
    bound = rank_lower_bound(one["d"], one["rank"], one["heads"]).lower
    assert one["best_loss"] < bound < one["population_error"]
    fresh = next(r for r in records if not r.get("train_batches"))
    assert fresh["best_loss"] > bound  # on fresh batches the training loss estimates the population error
    assert training_below_population_above(records).grade == Grade.MAGNITUDE


def test_the_predicate_fails_what_it_must(records: list[dict[str, Any]]) -> None:
    """Negative controls: a population error below its bound is a contradiction; training losses all above the bound
    are at most DIRECTION."""
    below = copy.deepcopy(records)
    last, lower = below[-1], below[-1]["theorem2"]["bound_lower"]
    cell = (last["d"], last["rank"], last["heads"], lower)
    last.update(evaluated(0.5 * lower, last["population_stderr"], bound=cell))  # its bound record follows the error
    assert training_below_population_above(below).grade == Grade.NOT_REPRODUCED
    above = copy.deepcopy(records)
    for r in above:
        r["best_loss"] = max(r["best_loss"], 1.01 * r["theorem2"]["bound_lower"])
    assert training_below_population_above(above).grade in (Grade.DIRECTION, Grade.NOT_REPRODUCED)
    assert training_below_population_above([]).grade == Grade.NOT_EVALUATED
