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
from experiments.publish.store_blocks import claim_line
from experiments.reporting.doc_sources import DocSources
from experiments.reporting.milestone_section import Lineage, MilestoneRow, lineages
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


def test_short_of_the_schedule_it_says_it_is_not_the_answer_and_grades_nothing(
    sources: DocSources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-layer cell held back to its 80k row (as the store stood before it finished): the block names it as
    the cell short of the schedule and grades nothing."""
    real = deep_columns_block.milestone_rows

    def one_layer_at_80k(records: list[dict[str, object]], out: Path) -> list[MilestoneRow]:
        return [row for row in real(records, out) if not (row.cell[1] == 1 and row.step > 80_000)]

    monkeypatch.setattr(deep_columns_block, "milestone_rows", one_layer_at_80k)
    lines = deep_columns_block.deep_columns(sources, STORE)
    assert lines[-1].startswith("Not the answer yet: the furthest fifth reached is 80,000 for d=64 L=1 r=32, of ")
    assert _row(lines, "d=64 L=1 r=32")[1] == "80,000"
    assert not any(line.startswith("- Claim (") for line in lines)


def _at_the_end(monkeypatch: pytest.MonkeyPatch, still_training: tuple[tuple[int, int, int, int], int] | None) -> None:
    """Move every milestone row, and every lineage's curve but that of ``still_training`` (cell, data seed), to step
    100,000 (the schedule's end); the curve of ``still_training`` stops short of it."""
    real_rows, real_lineages = deep_columns_block.milestone_rows, deep_columns_block.lineages

    def rows_at_the_end(records: list[dict[str, object]], out: Path) -> list[MilestoneRow]:
        return [dataclasses.replace(row, step=100_000) for row in real_rows(records, out)]

    def lineages_at_the_end(records: list[dict[str, object]], out: Path) -> list[Lineage]:
        return [
            dataclasses.replace(g, curve=[point for point in g.curve if point[0] < 100_000])
            if (g.cell, g.data_seed) == still_training
            else dataclasses.replace(g, curve=[*g.curve, (100_000, 0.5)])
            for g in real_lineages(records, out)
        ]

    monkeypatch.setattr(deep_columns_block, "milestone_rows", rows_at_the_end)
    monkeypatch.setattr(deep_columns_block, "lineages", lineages_at_the_end)


def test_at_the_schedules_end_it_says_so_and_gives_the_claims_grade(
    sources: DocSources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The positive control of the status line: every row and every data seed's curve moved to step 100,000 (the
    schedule's end) and the block drops "not the answer yet" for the claim's grade."""
    _at_the_end(monkeypatch, still_training=None)
    lines = deep_columns_block.deep_columns(sources, STORE)
    assert "Every cell has reached the full 100,000-step schedule." in lines
    assert lines[-1].startswith("- Claim (")
    assert sum(line.startswith("- Claim (") for line in lines) == 1
    assert not any(line.startswith("Not the answer yet") for line in lines)


def test_a_data_seed_still_training_gets_the_rules_grade_and_an_upper_bound_without_it(
    sources: DocSources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every cell at the end on some data seed, data seed 1 of L = 3 r = 32 short of it: the block names that data
    seed with its curve's last step, gives the claim's grade on every run, then the same rule on the records of every
    other data seed (selected here by the records' own data_seed field)."""
    half_rank = (64, 3, 32, 1)
    _at_the_end(monkeypatch, still_training=(half_rank, 1))
    lines = deep_columns_block.deep_columns(sources, STORE)
    preset, scale, records = sources.sweeps(STORE)[0]
    [seed_one] = [g for g in lineages(records, sources.root / "results" / STORE) if g.data_seed == 1]
    assert seed_one.cell == half_rank
    [status] = [line for line in lines if line.startswith("Every cell has reached")]
    last = max(step for step, _ in seed_one.curve if step < 100_000)
    named = f"data seed 1 of d=64 L=3 r=32, at step {last:,}"
    assert f"on at least one data seed; still training: {named} (" in status
    without_seed_one = [r for r in records if r.get("data_seed") != 1]
    assert len(without_seed_one) < len(records)
    claims = [line for line in lines if line.startswith("- Claim (")]
    assert claims == [claim_line(preset, scale, records), claim_line(preset, scale, without_seed_one)]
    assert lines[-1] == claims[-1]


def test_a_store_without_a_curve_is_refused_naming_it(sources: DocSources, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deep_columns_block, "milestone_rows", lambda records, out: [])
    with pytest.raises(ValueError, match=f"results/{STORE}: no training run with a curve"):
        deep_columns_block.deep_columns(sources, STORE)
