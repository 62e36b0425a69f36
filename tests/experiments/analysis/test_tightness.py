"""experiments/analysis/tightness.py: cells, ratio trend, head counts for a target, plateau statistics."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from experiments.analysis.run_curves import read_metrics_curve
from experiments.analysis.tightness import (
    heads_for_target,
    last_quarter_gain,
    ratio_slope,
    tightness_cells,
)
from tests.run_records import evaluated
from theory.bounds import min_heads, rank_lower_bound
from theory.majority_vote_error import majority_vote_error


def _trained(d: int, r: int, H: int, error: float, seed: int = 0, steps: int = 100, key: str = "") -> dict:
    record = {"status": "finished", "kind": "train", "steps": steps, "seed": seed, "hash": key}
    return {**record, **evaluated(error, bound=(d, r, H, 0.0))}


def test_cells_take_the_best_seed_and_separate_the_controls() -> None:
    records = [
        _trained(8, 1, 64, 0.20, seed=0, key="a"),
        _trained(8, 1, 64, 0.17, seed=1, key="b"),
        _trained(8, 1, 64, 0.16, seed=0, steps=400, key="c"),
        {"status": "finished", "kind": "least-squares-heads", **evaluated(0.18, 0.002, bound=(8, 1, 64, 0.0))},
        {"status": "failed", "kind": "train", "steps": 100, "seed": 2, "hash": "d"},
    ]
    (cell,) = tightness_cells(records)
    assert cell.trained is not None and cell.trained.hash == "b" and len(cell.seeds) == 2
    assert [c.hash for c in cell.controls] == ["c"]
    assert cell.construction == (0.18, 0.002)
    assert cell.bound == rank_lower_bound(8, 1, 64).lower
    assert cell.majority_vote == majority_vote_error(8, 64)
    assert cell.best_found == (0.17, 0.001, "trained")
    assert cell.ratio == pytest.approx(0.17 / cell.bound)


def test_ratio_slope_recovers_a_power_law() -> None:
    """Errors set to bound * H^0.3 give a log-log slope of 0.3 (up to rounding)."""
    records = []
    for H in (8, 32, 128, 512):
        bound = rank_lower_bound(8, 1, H).lower
        records.append(_trained(8, 1, H, bound * H**0.3))
    assert ratio_slope(tightness_cells(records)) == pytest.approx(0.3, abs=1e-9)
    assert math.isnan(ratio_slope(tightness_cells(records[:1])))


def test_heads_for_target_is_min_heads_and_the_smallest_h_reaching_it() -> None:
    records = [_trained(8, 1, 8, 0.30), _trained(8, 1, 32, 0.19), _trained(8, 1, 128, 0.16)]
    target = heads_for_target(tightness_cells(records), 0.2)
    assert target.certified == min_heads(8, 1, 0.2)
    assert target.found == 32 and target.largest_tried == 128
    assert heads_for_target(tightness_cells(records), 0.15).found is None


def test_curve_and_last_quarter_gain(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss,lr,time\n100,0.5,0.01,1\n200,0.3,0.01,2\n300,0.22,0.01,3\n400,0.2,0.0,4\n")
    curve, _ = read_metrics_curve(path)
    assert curve is not None
    assert curve == [(100, 0.5), (200, 0.3), (300, 0.22), (400, 0.2)]
    assert last_quarter_gain(curve) == pytest.approx((0.22 - 0.2) / 0.2)
    assert read_metrics_curve(tmp_path / "missing.csv")[0] is None
