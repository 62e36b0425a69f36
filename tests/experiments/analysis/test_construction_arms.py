"""experiments/analysis/construction_arms.py and its report table: start, steps to a target, final error per arm."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from experiments.analysis.construction_arms import (
    construction_arms,
    predicted_start_error,
    steps_to_target,
)
from experiments.analysis.run_curves import read_metrics_curve as epoch_curve
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.config import TrainConfig
from experiments.reporting.construction_arms_report import construction_arms_lines
from experiments.studies.depth import DEPTH_ARM_TARGET, depth_trained
from tests.run_records import evaluated
from theory.bounds import full_rank_error
from theory.majority_vote_error import majority_vote_error

D = 8


def _config(init: str | None, seed: int = 0) -> TrainConfig:
    return TrainConfig(
        task="nearest", d=D, N=2, keys="orthonormal", model="theory", rank=D, value="full", layers=1, width=1,
        seed=seed, steps=200, log_every=50, device="cpu", init=init,
    )  # fmt: skip


def _record(config: TrainConfig, error: float, status: str = "finished") -> dict[str, Any]:
    metrics = {"best_loss": error, "final_loss": error, "steps": config.steps, "seconds": 1.0}
    return {**config.to_dict(), "status": status, "hash": config.config_hash(), "kind": "train", **metrics,
            **evaluated(error, bound=(config.d, config.rank, config.heads, 0.0))}  # fmt: skip


def _curve(path: Path, losses: list[float], every: int = 50) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    rows = ["step,loss,lr,time"] + [f"{every * (i + 1)},{loss!r},0.01,{i}" for i, loss in enumerate(losses)]
    (path / "metrics.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path / "metrics.csv"


def test_curves_are_checked_and_steps_to_target_read_the_first_epoch_at_or_below(tmp_path: Path) -> None:
    curve, why = epoch_curve(_curve(tmp_path / "a", [0.9, 0.2, 0.05, 0.01]))
    assert curve == [(50, 0.9), (100, 0.2), (150, 0.05), (200, 0.01)] and why == ""
    assert steps_to_target(curve, 0.05) == 150 and steps_to_target(curve, 0.001) is None
    assert epoch_curve(tmp_path / "absent" / "metrics.csv")[0] is None
    bad = tmp_path / "b"
    bad.mkdir()
    (bad / "metrics.csv").write_text("step,value\n50,0.1\n", encoding="utf-8")
    curve, why = epoch_curve(bad / "metrics.csv")
    assert curve is None and "header must be step,loss" in why
    (bad / "metrics.csv").write_text("step,loss\n100,0.9\n50,0.01\n", encoding="utf-8")
    assert epoch_curve(bad / "metrics.csv")[0] is None  # steps out of order: not trusted
    (bad / "metrics.csv").write_text("step,loss\n", encoding="utf-8")
    assert epoch_curve(bad / "metrics.csv")[0] is None  # no epoch at all


def test_predictions_are_the_constructions_exact_errors() -> None:
    assert math.isnan(predicted_start_error(_config(None)))
    assert predicted_start_error(_config("construction:full-rank@100")) == full_rank_error(D, 100.0)
    assert predicted_start_error(_config("construction:full-rank")) == full_rank_error(D, 1.0)
    majority = TrainConfig(
        task="nearest", d=D, N=2, keys="orthonormal", model="theory", rank=1, value="full", layers=2,
        positional="concat", positional_dim=D + 1, init="construction:majority-vote@100",
    )  # fmt: skip
    assert predicted_start_error(majority) == majority_vote_error(D, 17, 100.0)


def test_arms_measure_start_steps_and_final(tmp_path: Path) -> None:
    """Fact 1 at lambda = 100 starts below the target (steps 0); the scratch twin starts near 1 (random init) and takes
    the steps its metrics.csv shows; a twin without a run directory says so; unfinished runs are left out."""
    fact1, scratch, scratch1 = _config("construction:full-rank@100"), _config(None), _config(None, seed=1)
    records = [_record(fact1, 0.004), _record(scratch, 0.02), _record(scratch1, 0.03),
               _record(_config(None, seed=2), 0.5, status="failed")]  # fmt: skip
    sweep = SweepDirectory(tmp_path)
    _curve(sweep.run(scratch.config_hash()).root, [0.8, 0.3, 0.04, 0.02])
    arms = construction_arms(records, sweep, DEPTH_ARM_TARGET)
    assert [(a.init, len(a.runs)) for a in arms] == [(None, 2), ("construction:full-rank@100", 1)]
    scratch_arm, fact_arm = arms
    assert fact_arm.runs[0].steps_to_target == 0 and fact_arm.runs[0].start < DEPTH_ARM_TARGET
    assert fact_arm.predicted == full_rank_error(D, 100.0) and fact_arm.runs[0].final == 0.004
    assert scratch_arm.runs[0].start > 0.5 and scratch_arm.runs[0].steps_to_target == 150
    assert (scratch_arm.runs[0].first_epoch, scratch_arm.runs[0].worst_epoch) == (0.8, 0.8)
    assert scratch_arm.runs[1].steps_to_target == -1 and "absent" in scratch_arm.runs[1].note
    assert math.isnan(scratch_arm.runs[1].first_epoch)
    lines = construction_arms_lines(records, sweep, DEPTH_ARM_TARGET)
    table = [line for line in lines if line.startswith("| 1 |")]
    assert len(table) == 2 and "150 / ?" in table[0] and "| 0 |" in table[1]
    assert (
        construction_arms_lines([_record(scratch, 0.02)], sweep, DEPTH_ARM_TARGET) == []
    )  # no construction arm: no table


def test_a_record_that_does_not_rebuild_its_run_is_refused(tmp_path: Path) -> None:
    record = {**_record(_config("construction:full-rank"), 0.01), "hash": "0" * 64}
    with pytest.raises(ValueError, match="hash differs"):
        construction_arms([record], SweepDirectory(tmp_path), DEPTH_ARM_TARGET)


def test_depth_claim_leaves_construction_runs_out() -> None:
    """A two-layer run started from the majority vote far below the bound must not make the claim magnitude."""
    base: dict[str, Any] = {"model": "theory", "task": "nearest", "N": 2, "rank": 1, "d": D, "seed": 0}
    one = {**base, "status": "finished", "layers": 1, "width": 2, "positional_dim": 0,
           **evaluated(0.17, bound=(D, 1, 16, 0.15))}  # fmt: skip
    two = {**base, "status": "finished", "layers": 2, "width": 1, "positional_dim": D, **evaluated(0.01)}  # fmt: skip
    assert depth_trained([two, one]).grade.value == "magnitude"
    assert depth_trained([{**two, "init": "construction:majority-vote"}, one]).grade.value == "not evaluated"
