"""The tightness preset: its grid, the least-squares run spec, the worker that solves it, and its claim predicate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.config import TrainConfig
from experiments.studies import get_preset, judge
from experiments.studies.tightness import tightness_band, tightness_heads
from experiments.sweeps.grading import Grade
from experiments.sweeps.least_squares_spec import LeastSquaresHeadsSpec
from experiments.sweeps.run_specs import spec_from_record, spec_kind
from experiments.sweeps.solve_least_squares import solve_least_squares_heads
from experiments.training.run_record import RunRecord
from tests.run_records import evaluated
from theory.bounds import rank_lower_bound


@pytest.mark.parametrize("scale", ["quick", "cpu", "paper"])
def test_every_spec_round_trips(scale: str) -> None:
    specs = get_preset("tightness").runs(scale)
    for spec in specs:
        again = spec_from_record(spec_kind(spec), spec.to_dict())
        assert again == spec and again.config_hash() == spec.config_hash()


def test_cpu_grid_is_the_issues() -> None:
    """d in {8, 16, 32}, r in {1, 2, d/4}, >= 5 head counts up to 1024, three seeds, one construction per cell, one
    plateau control per d with four times the steps."""
    specs = get_preset("tightness").runs("cpu")
    trained = [s for s in specs if isinstance(s, TrainConfig)]
    built = [s for s in specs if isinstance(s, LeastSquaresHeadsSpec)]
    cells = {(s.d, s.r, s.H) for s in built}
    assert {(d, r) for d, r, _ in cells} == {(d, r) for d in (8, 16, 32) for r in {1, 2, d // 4}}
    for d, r in {(d, r) for d, r, _ in cells}:
        heads = sorted(H for dd, rr, H in cells if (dd, rr) == (d, r))
        assert len(heads) >= 5 and heads[-1] == 1024 and heads[0] == max(4, d // r)
    main = [s for s in trained if s.steps * s.batch_size == 1500 * 128]  # d = 32: 3000 steps of 64
    assert {(s.d, s.rank, s.heads) for s in main} == cells
    assert all(sorted(s.seed for s in main if (s.d, s.rank, s.heads) == c) == [0, 1, 2] for c in cells)
    assert all(s.model == "theory" and s.value == "full" and s.layers == 1 and s.N == 2 for s in trained)
    assert all(s.lr == min(0.01, 0.25 / (s.heads * s.d) ** 0.5) and s.temperature == 4.0 for s in trained)
    controls = [s for s in trained if s.steps * s.batch_size == 4 * 1500 * 128]
    assert sorted(s.d for s in controls) == [8, 16, 32] and all(s.heads == 64 for s in controls)


def test_head_counts_are_log_spaced_multiples_of_d_over_r() -> None:
    assert tightness_heads(32, 1, 1024, 5) == (32, 64, 256, 512, 1024)
    assert tightness_heads(8, 2, 1024, 5) == (4, 16, 64, 256, 1024)


def test_spec_encodes_hardmax_and_rejects_unknown_keys() -> None:
    spec = LeastSquaresHeadsSpec(8, 2, 16, (0.5, math.inf), 100, 100, 100)
    assert spec.to_dict()["temperatures"] == [0.5, "inf"]
    assert LeastSquaresHeadsSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(ValueError, match="unknown least-squares-heads key"):
        LeastSquaresHeadsSpec.from_dict({**spec.to_dict(), "steps": 3})
    with pytest.raises(ValueError, match="r"):
        LeastSquaresHeadsSpec(8, 9, 16, (1.0,), 100, 100, 100)
    with pytest.raises(ValueError, match="temperatures"):
        LeastSquaresHeadsSpec(8, 2, 16, (), 100, 100, 100)


def test_solve_writes_its_result_beside_the_bound(tmp_path: Path) -> None:
    spec = LeastSquaresHeadsSpec(6, 2, 8, (0.25, math.inf), 2000, 1000, 4000)
    metrics = solve_least_squares_heads(spec.to_dict(), tmp_path)
    assert json.loads((tmp_path / "result.json").read_text()) == metrics
    assert RunRecord.read(metrics).to_dict() == metrics  # the one metric record, as the store and reports read it
    bound = metrics["theorem2"]
    assert (bound["d"], bound["r"], bound["H"], bound["bound_applies"]) == (6, 2, 8, True)
    assert bound["bound_lower"] == rank_lower_bound(6, 2, 8).lower
    upper = metrics["population_error"] + 4 * metrics["population_stderr"]
    assert bound["consistent"] and upper >= bound["bound_lower"]
    assert metrics["population_samples"] == 4000 and metrics["best_loss"] == metrics["population_error"]
    assert metrics["chosen_temperature"] in (0.25, "inf")


def _trained(d: int, r: int, H: int, error: float, stderr: float = 0.001) -> dict:
    record = {"status": "finished", "kind": "train", "steps": 100, "seed": 0, "hash": "x"}
    return {**record, **evaluated(error, stderr, bound=(d, r, H, rank_lower_bound(d, r, H).lower))}


def _built(d: int, r: int, H: int, error: float, stderr: float = 0.001) -> dict:
    record = {"status": "finished", "kind": "least-squares-heads", "d": d, "r": r, "H": H}
    return {**record, **evaluated(error, stderr, bound=(d, r, H, rank_lower_bound(d, r, H).lower))}


def test_claim_holds_above_the_bound_and_reports_the_ratio() -> None:
    bound = rank_lower_bound(8, 1, 64).lower
    verdict = tightness_band([_trained(8, 1, 64, 2 * bound), _built(8, 1, 64, 3 * bound)])
    assert verdict.grade is Grade.MAGNITUDE
    assert verdict.numbers["largest_ratio"] == pytest.approx(2.0)
    assert judge("tightness", [_trained(8, 1, 64, 2 * bound)]).grade is Grade.MAGNITUDE  # type: ignore[union-attr]


def test_claim_negative_control_a_model_below_its_bound() -> None:
    """A (fabricated) model 10 standard errors below its certified bound must be NOT REPRODUCED."""
    bound = rank_lower_bound(8, 1, 64).lower
    assert tightness_band([_built(8, 1, 64, bound - 0.01, 0.001)]).grade is Grade.NOT_REPRODUCED
    assert tightness_band([_trained(8, 1, 64, bound - 0.01, 0.001)]).grade is Grade.NOT_REPRODUCED
    assert tightness_band([]).grade is Grade.NOT_EVALUATED
