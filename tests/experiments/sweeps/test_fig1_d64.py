"""The fig1-d64 preset (issue 28): its runs follow the paper's schedule, its claim grades both comparisons, and the
sweep's --only selection runs a disjoint part of it."""

from __future__ import annotations

import pytest

from experiments.config import TrainConfig
from experiments.studies import get_preset
from experiments.studies.fig1 import fig1_d64_depth
from experiments.sweeps.grading import Grade
from experiments.sweeps.preflight import select_runs


def cell(layers: int, rank: int, loss: float, seed: int = 0, steps: int = 20_000, d: int = 64) -> dict:
    return {"status": "finished", "d": d, "N": 16, "width": 1, "layers": layers, "rank": rank, "seed": seed,
            "steps": steps, "best_loss": loss}  # fmt: skip


def test_the_cpu_runs_are_the_first_20k_steps_of_the_papers_schedule() -> None:
    runs = [r for r in get_preset("fig1-d64").runs("cpu") if isinstance(r, TrainConfig)]
    paper = [r for r in get_preset("fig1-d64").runs("paper") if isinstance(r, TrainConfig)]
    assert len(runs) == len(paper) == 8
    for prefix, whole in zip(runs, paper, strict=True):
        assert (prefix.steps, prefix.schedule_steps, prefix.warmup_steps, prefix.warmup_fraction) == (
            20_000, 100_000, 5000, 0.0)  # fmt: skip
        assert (prefix.d, prefix.N, prefix.ffn_dim, prefix.batch_size, prefix.lr) in {
            (d, 16, 2048, 256, 0.01) for d in (16, 32, 64)}  # fmt: skip
        assert prefix.layer_init == "copies" and whole.extends(prefix)  # the paper scale extends each cpu run
    cells = {(r.d, r.layers, r.rank, r.seed) for r in runs}
    assert {(64, 3, 32, 0), (64, 3, 32, 1), (64, 3, 64, 0), (64, 1, 32, 0)} <= cells
    assert {(d, L, d // 2, 0) for d in (16, 32) for L in (1, 3)} <= cells


def test_the_claim_grades_both_comparisons_and_takes_the_lower() -> None:
    paper_like = [cell(1, 32, 0.70), cell(3, 32, 0.05), cell(3, 32, 0.06, seed=1), cell(3, 64, 0.003)]
    assert fig1_d64_depth(paper_like).grade is Grade.MAGNITUDE
    # The 0.435 plateau the issue measured at 5k steps: depth helps (direction) but nowhere near 0.05.
    plateau = [cell(1, 32, 0.72), cell(3, 32, 0.435), cell(3, 64, 0.003)]
    verdict = fig1_d64_depth(plateau)
    assert verdict.grade is Grade.DIRECTION and "ratio 1.66x" in verdict.explanation
    # The index names each comparison's numbers: 0.72 / 0.435 and 0.435 / 0.003, the worse seeds' losses.
    assert verdict.numbers == pytest.approx(
        {"depth ratio": 0.72 / 0.435, "L = 3 half rank worst": 0.435, "full-rank ratio": 0.435 / 0.003,
         "L = 3 full rank worst": 0.003})  # fmt: skip
    # Negative control: three layers no better than one at half rank.
    assert fig1_d64_depth([cell(1, 32, 0.70), cell(3, 32, 0.71), cell(3, 64, 0.003)]).grade is Grade.NOT_REPRODUCED
    # A missing cell, or only smaller d, is not evaluated; the longest budget is the one graded.
    assert fig1_d64_depth(paper_like[:3]).grade is Grade.NOT_EVALUATED
    assert fig1_d64_depth([cell(1, 8, 0.7, d=16), cell(3, 8, 0.05, d=16)]).grade is Grade.NOT_EVALUATED
    longer = [{**c, "steps": 100_000} for c in paper_like]
    assert fig1_d64_depth(plateau + longer).grade is Grade.MAGNITUDE


def test_a_cell_extended_alone_waits_for_the_others_and_the_grade_stays_at_the_common_budget() -> None:
    """fig1-d64-replay extends its r = 32 cell first: the grade stays at the largest budget that every cell has."""
    at_20k = [cell(1, 32, 0.70), cell(3, 32, 0.183), cell(3, 32, 0.19, seed=1), cell(3, 64, 0.0497)]
    alone = fig1_d64_depth(at_20k)
    extended = fig1_d64_depth([*at_20k, cell(3, 32, 0.02, steps=40_000)])
    assert extended.grade is alone.grade is Grade.DIRECTION
    assert extended.numbers == alone.numbers and extended.explanation.startswith("at 20000 steps: ")
    assert "(runs of 40000 steps wait until every run has one)" in extended.explanation
    assert "wait" not in alone.explanation
    # Every cell at 40k but one seed of r = 32 still at 20k: the grade waits for that seed too.
    cells_at_40k = [cell(1, 32, 0.70, steps=40_000), cell(3, 32, 0.05, steps=40_000), cell(3, 64, 0.003, steps=40_000)]
    assert fig1_d64_depth([*at_20k, *cells_at_40k]).numbers == alone.numbers
    # Once every run has the longer budget, it is the one graded (here, a paper-like 40k that reaches magnitude).
    graded = fig1_d64_depth([*at_20k, *cells_at_40k, cell(3, 32, 0.06, seed=1, steps=40_000)])
    assert graded.grade is Grade.MAGNITUDE and graded.explanation.startswith("at 40000 steps: ")


def test_only_selects_runs_and_refuses_what_selects_nothing() -> None:
    runs = get_preset("fig1-d64").runs("cpu")
    one_layer = select_runs(runs, {"layers": 1})
    assert len(one_layer) == 3 and all(isinstance(r, TrainConfig) and r.layers == 1 for r in one_layer)
    assert select_runs(runs, {}) == runs
    assert len(select_runs(runs, {"d": 64, "layers": 3, "rank": 32, "seed": 0})) == 1
    with pytest.raises(ValueError, match="only must name fields of the runs; unknown: layer"):
        select_runs(runs, {"layer": 1})
    with pytest.raises(ValueError, match="only is layers=7, which matches none of the 8 runs"):
        select_runs(runs, {"layers": 7})


def test_reports_show_the_schedule_only_where_a_run_names_it() -> None:
    from experiments.figures.sweeps import parameter_line

    named = [{"d": 64, "steps": 20_000, "schedule_steps": 100_000, "warmup_steps": 5000, "layer_init": "copies"}]
    assert "20000 steps, of a 100000-step schedule, warm-up 5000 steps" in parameter_line(named)
    assert "layers start as copies" in parameter_line(named)
    plain = [{"d": 16, "steps": 3000, "schedule_steps": 0, "warmup_steps": 0, "layer_init": "independent"}]
    assert "schedule" not in parameter_line(plain) and "warm-up" not in parameter_line(plain)
    assert "layers start" not in parameter_line(plain)
