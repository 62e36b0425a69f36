"""The docs' answer on Figure 1's deep columns (``deep-columns:STORE``, issue 47): its numbers against the store's own
SQLite rows, and its status line both before and after every cell reaches the schedule's end."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from experiments.analysis.milestones import read_milestones
from experiments.analysis.sweep_directory import MILESTONES_NAME
from experiments.publish import deep_columns_block
from experiments.reporting.doc_sources import DocSources
from experiments.reporting.milestone_section import MilestoneRow
from experiments.studies import PRESETS

REPOSITORY = Path(__file__).resolve().parents[3]
STORE = "fig1-d64-replay-cpu"


@pytest.fixture
def sources(tmp_path: Path) -> DocSources:
    """A copy of the committed replay store under tmp_path/results/."""
    shutil.copytree(REPOSITORY / "results" / STORE, tmp_path / "results" / STORE)
    return DocSources(tmp_path, PRESETS)


def _row(lines: list[str], label: str) -> list[str]:
    line = next(line for line in lines if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.split("|")[1:-1]]


def _one_layer_furthest(sources: DocSources) -> tuple[int, float, float]:
    """(S, best_loss at S, population error at S) of L = 1 r = 32 (one data seed), read straight from the store's files:
    its furthest fifth of the schedule among its finished runs (SQLite) and its live run's milestones
    (milestones.csv, written at each 20k a run passes)."""
    root = sources.root / "results" / STORE
    with sqlite3.connect(root / "results.sqlite") as db:
        runs = db.execute("SELECT hash, spec, metrics FROM runs").fetchall()
    one_layer = {key: json.loads(metrics or "{}") for key, spec, metrics in runs if json.loads(spec)["layers"] == 1}
    found = {
        m["steps"]: (m["best_loss"], m["population_error"]) for m in one_layer.values() if m.get("population_error")
    }
    for (key, step), milestone in read_milestones(root / MILESTONES_NAME).items():
        if key in one_layer:
            found[step] = (milestone.best_loss, milestone.population_error)
    step = max(s for s in found if s % 20_000 == 0)
    return step, *found[step]


def test_the_one_layer_cell_is_its_furthest_fifths_best_loss_against_the_papers(sources: DocSources) -> None:
    """L = 1 r = 32 (one data seed): the block's statistic, ratio and population error are its run's best_loss,
    best_loss / 0.70 (the paper's Figure 1 cell) and population_error at the furthest fifth it reached."""
    step, best_loss, population_error = _one_layer_furthest(sources)
    cells = _row(deep_columns_block.deep_columns(sources, STORE), "d=64 L=1 r=32")
    assert cells[1] == f"{step:,}"
    assert cells[2] == f"{best_loss:.3g}"
    assert cells[3] == "0.7"
    assert cells[4] == f"{best_loss / 0.7:#.3g}x"
    assert cells[6].startswith(f"0: {population_error:.3g} +- ")


def test_short_of_the_schedule_it_says_it_is_not_the_answer_and_grades_nothing(sources: DocSources) -> None:
    lines = deep_columns_block.deep_columns(sources, STORE)
    assert lines[-1].startswith("Not the answer yet: the furthest fifth reached is ")
    step, _, _ = _one_layer_furthest(sources)
    assert step < 100_000  # the precondition: L = 1 still trains (this test's time ends when it reaches 100k)
    assert f"{step:,} for d=64 L=1 r=32" in lines[-1]
    assert not any(line.startswith("- Claim (") for line in lines)


def test_at_the_schedules_end_it_says_so_and_gives_the_claims_grade(
    sources: DocSources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The positive control of the status line: every row moved to step 100,000 (the schedule's end) and the block
    drops "not the answer yet" for the claim's grade."""
    real = deep_columns_block.milestone_rows

    def at_the_end(records: list[dict[str, object]], out: Path) -> list[MilestoneRow]:
        return [dataclasses.replace(row, step=100_000) for row in real(records, out)]

    monkeypatch.setattr(deep_columns_block, "milestone_rows", at_the_end)
    lines = deep_columns_block.deep_columns(sources, STORE)
    assert "Every cell has reached the full 100,000-step schedule." in lines
    assert lines[-1].startswith("- Claim (")
    assert not any(line.startswith("Not the answer yet") for line in lines)


def test_a_store_without_a_curve_is_refused_naming_it(sources: DocSources, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deep_columns_block, "milestone_rows", lambda records, out: [])
    with pytest.raises(ValueError, match=f"results/{STORE}: no training run with a curve"):
        deep_columns_block.deep_columns(sources, STORE)
