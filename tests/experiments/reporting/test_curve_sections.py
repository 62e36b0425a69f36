"""experiments/reporting/curve_sections.py: the fig1-d64 report's curve table, trends and depth ladder, read from a
committed curves.csv alone (no run directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.analysis.run_curves import write_curves_file
from experiments.analysis.sweep_directory import CURVES_NAME
from experiments.reporting.curve_sections import deep_column_markers, depth_ladder_section, projection_section
from experiments.studies import get_preset


def _records() -> list[dict[str, Any]]:
    preset = get_preset("fig1-d64")
    return [
        {**c.to_dict(), "hash": c.config_hash(), "kind": "train", "status": "running"} for c in preset.runs("quick")
    ]


def _curve(start: float, end: float, last: int, every: int = 10) -> list[tuple[int, float]]:
    steps = list(range(every, last + 1, every))
    return [(s, start + (end - start) * i / (len(steps) - 1)) for i, s in enumerate(steps)]


@pytest.fixture()
def store(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    records = _records()
    cells = {(r["d"], r["layers"], r["rank"], r["seed"]): r["hash"] for r in records}
    curves = {
        cells[(16, 1, 8, 0)]: _curve(1.0, 0.7, 60),  # the quick grid's d = 64 cells at d / 4
        cells[(16, 3, 8, 0)]: _curve(1.0, 0.35, 40),  # shorter: the ladder compares at step 40
        cells[(4, 1, 2, 0)]: _curve(1.0, 0.8, 60),
    }
    write_curves_file(tmp_path / CURVES_NAME, curves, dict.fromkeys(curves, "run"))
    return tmp_path, records


def test_the_ladder_compares_both_depths_at_the_step_both_reached(store: tuple[Path, list[dict[str, Any]]]) -> None:
    out, records = store
    lines, figures = depth_ladder_section(get_preset("fig1-d64"), records, out, "quick")
    row = next(line for line in lines if line.startswith("| 16 |"))
    one_at_40 = 1.0 + (0.7 - 1.0) * 3 / 5  # L = 1's best epoch up to step 40 (its 4th of 6 epochs)
    assert row == f"| 16 | 40 | {one_at_40:.3g} | 0.35 | {one_at_40 / 0.35:.3g} |"
    assert any(line.startswith("| 4 | - | 60 steps | no curve yet |") for line in lines)
    assert [p.name for p in figures] == ["fig1-d64-quick-ladder.png"] and figures[0].is_file()


def test_the_curve_table_names_every_run_and_draws_the_largest_d(store: tuple[Path, list[dict[str, Any]]]) -> None:
    out, records = store
    lines, figures = projection_section(get_preset("fig1-d64"), records, out, "quick")
    table = [line for line in lines if line.startswith("| d=")]
    assert len(table) == len(records)
    assert any(line.startswith("| d=16 L=1 r=8 seed=0 steps=60 | 60 (200) | 0.7 | 0.7 |") for line in table)
    assert sum("no curve yet" in line for line in table) == len(records) - 3
    assert [p.name for p in figures] == ["fig1-d64-quick-curves.png"] and figures[0].is_file()


def test_runs_of_one_cell_at_two_budgets_are_told_apart_and_ordered_by_budget(tmp_path: Path) -> None:
    """A store that extends a run holds the cell twice (here at 60 and 120 steps): two rows, shorter first."""
    first = _records()[0]
    longer = {**first, "steps": 2 * int(first["steps"]), "hash": "e" * 64}
    write_curves_file(
        tmp_path / CURVES_NAME,
        {first["hash"]: _curve(1.0, 0.7, 60), "e" * 64: _curve(1.0, 0.6, 120)},
        {first["hash"]: "run", "e" * 64: "run"},
    )
    lines, _ = projection_section(get_preset("fig1-d64"), [longer, first], tmp_path, "quick")
    cell = f"d={first['d']} L={first['layers']} r={first['rank']} seed={first['seed']}"
    rows = [line for line in lines if line.startswith(f"| {cell} ")]
    assert [row.split(" | ")[0] for row in rows] == [f"| {cell} steps=60", f"| {cell} steps=120"]


def test_recovered_curves_are_said_to_be(tmp_path: Path) -> None:
    records = _records()
    key = records[0]["hash"]
    write_curves_file(tmp_path / CURVES_NAME, {key: _curve(1.0, 0.5, 60)}, {key: "re-run abc123: best_loss x"})
    lines, _ = projection_section(get_preset("fig1-d64"), records, tmp_path, "quick")
    assert "(Curves recovered by re-running the runs, curves.csv: re-run abc123.)" in lines


def _run(d: int, layers: int, rank: int) -> dict[str, Any]:
    return {"d": d, "layers": layers, "rank": rank, "width": 1}


def test_the_figures_paper_levels_are_those_of_the_cells_drawn() -> None:
    """fig1-d64-replay draws L = 1 at half rank and L = 3 at half and full rank: the paper's L = 1 full-rank level
    (0.015 in its Figure 1) has no curve there and is left out; a drawn L = 1 full-rank run brings it back."""
    preset = get_preset("fig1-d64-replay")
    drawn = [_run(64, 1, 32), _run(64, 3, 32), _run(64, 3, 64)]
    labels = [label for label, _ in deep_column_markers(preset, drawn)]
    assert labels == ["L=1 r=d/2 0.7", "L=3 r=d/2 0.05", "L=3 full rank 0.003"]
    with_full = [label for label, _ in deep_column_markers(preset, [*drawn, _run(64, 1, 64)])]
    assert with_full == ["L=1 r=d/2 0.7", "L=1 full rank 0.015", "L=3 r=d/2 0.05", "L=3 full rank 0.003"]
    assert deep_column_markers(preset, [_run(64, 3, 16)]) == []
