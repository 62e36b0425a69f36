"""The paper's statistic per cell (issue 47): the minimum over a cell's runs of their lowest epoch-mean training loss,
pooled over data seeds and the supplementary runs' batch and schedule, never over learning rates; the population error
of the run it picks beside it; and the report section that prints and draws them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.analysis.paper_statistic import paper_statistic
from experiments.reporting.paper_statistic_section import paper_statistic_at, paper_statistic_section
from experiments.studies import get_preset


def _run(rank: int, data_seed: int, best: float, population: float | None = None, **fields: Any) -> dict[str, Any]:
    record = {"kind": "train", "status": "finished", "d": 64, "N": 16, "layers": 3, "width": 64, "rank": rank,
              "lr": 0.01, "seed": 0, "data_seed": data_seed, "batch_size": 256, "steps": 100_000, "best_loss": best,
              "final_loss": best + 0.01,
              "rank_class": "half" if rank == 32 else "low", "hash": f"{rank}-{data_seed}-{best}"}  # fmt: skip
    if population is not None:
        record.update(population_error=population, population_stderr=0.002)
    return {**record, **fields}


RECORDS = [
    _run(32, 0, 0.20, 0.61),
    _run(32, 1, 0.15, 0.64),
    _run(32, 6, 0.09, 0.66, batch_size=64, steps=200_000),  # a supplementary run: pooled into the cell
    _run(16, 0, 0.40, 0.70),
    _run(16, 1, 0.35),  # its population error not measured
    _run(16, 2, 0.30, 0.75, status="running"),  # unfinished: left out
    _run(16, 3, float("nan"), 0.9),  # diverged: left out
]


def test_the_cell_minimum_pools_seeds_and_the_supplementary_runs() -> None:
    cells = {cell.field("rank"): cell for cell in paper_statistic(RECORDS)}
    assert set(cells) == {16, 32}
    half, low = cells[32], cells[16]
    assert (half.runs, half.best, half.worst, half.best_run["data_seed"]) == (3, 0.09, 0.20, 6)
    assert half.population == (0.66, 0.002) and half.population_range == (0.61, 0.66)
    assert half.gap == pytest.approx(0.66 - (0.09 + 0.01))  # population minus the picked run's last epoch loss
    assert (low.runs, low.best, low.best_run["data_seed"], low.population) == (2, 0.35, 1, None)
    assert low.population_range == (0.70, 0.70) and low.gap is None
    assert half.cell == (("rank", 32),)  # only the varying cell field names the cell


def test_learning_rates_are_never_pooled() -> None:
    """The paper's figure keeps lr 0.01; a grid over rates (the supplementary sweep's) has a cell per rate."""
    records = [_run(32, 6, 0.05, lr=0.1), _run(32, 6, 0.09, lr=0.01), _run(32, 7, 0.08, lr=0.01)]
    cells = paper_statistic(records)
    assert [(c.field("lr"), c.best, c.runs) for c in cells] == [(0.01, 0.08, 2), (0.1, 0.05, 1)]


def test_the_section_prints_every_cell_and_the_papers_value(tmp_path: Path) -> None:
    preset = get_preset("fig1")
    lines, figures = paper_statistic_section(preset, RECORDS, tmp_path, "paper")
    text = "\n".join(lines)
    assert "| r=32 | 3 | 0.09 (data seed 6, batch 64) | 0.09 - 0.2 | 0.66 +- 0.002 | 0.61 - 0.66 | 0.56 | 0.055 |" in (
        text
    )
    assert "| r=16 | 2 | 0.35 (data seed 1, batch 256) | 0.35 - 0.4 | - | 0.7 | - | 0.04 - 0.8 |" in text
    assert [p.name for p in figures] == ["fig1-paper-paper-statistic.png"] and figures[0].stat().st_size > 1000


def test_fig1_draws_the_section_at_its_paper_scale_only(tmp_path: Path) -> None:
    (section,) = get_preset("fig1").report_sections
    assert section.render(get_preset("fig1"), RECORDS, tmp_path, "cpu") == ([], [])
    assert section.render(get_preset("fig1"), RECORDS, tmp_path, "paper")[0]
    assert paper_statistic_at(None).render(get_preset("fig1"), [], tmp_path, "cpu") == ([], [])
