"""The report section that grades a grid with the paper's own statistic and puts our population error beside it
(issue 47): fig1's paper scale (the paper's grid in its regime) and every sweep built from the reference's files.

Per cell, the paper's statistic (`experiments.analysis.paper_statistic`: the lowest epoch-mean training loss of the
best run of the cell), the spread it was picked from, the population error of the picked run with its standard error,
the range of population errors over the cell's runs, the gap, and the paper's value where it publishes one; then one
figure of the two against rank (`experiments.figures.paper_statistic`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Sequence
from pathlib import Path

from experiments.analysis.paper_statistic import CellStatistic, paper_statistic
from experiments.analysis.records import Record
from experiments.figures.paper_statistic import PaperPoint, plot_paper_statistic, series_label
from experiments.sweeps.grading import PaperNumber, range_text, value_text
from experiments.sweeps.preset_kit import Preset, ReportSection


def _paper_number(cell: CellStatistic, paper: Sequence[PaperNumber]) -> PaperNumber | None:
    """The published number whose selector the cell's picked run matches (None: the paper has none for it)."""
    for number in paper:
        if all(cell.best_run.get(key) == wanted for key, wanted in number.where.items()):
            return number
    return None


def _cell_text(cell: CellStatistic) -> str:
    shown = {"layers": "L", "width": "c", "rank": "r"}
    return " ".join(f"{shown.get(name, name)}={value}" for name, value in cell.cell) or "every run"


def _picked_text(run: Record) -> str:
    seed = run.get("data_seed") if run.get("data_seed") is not None else run.get("seed")
    return f"data seed {seed}, batch {run.get('batch_size')}"


def paper_statistic_section(
    preset: Preset, records: Sequence[Record], out: Path, scale: str, *, scales: Collection[str] | None = None
) -> tuple[list[str], list[Path]]:
    """Markdown lines and the figure of the section (nothing at a scale outside ``scales``, or without a finished
    run)."""
    if scales is not None and scale not in scales:
        return [], []
    cells = paper_statistic(records)
    if not cells:
        return [], []
    lines = [
        "### The paper's statistic and the population error",
        "",
        "The paper's figure plots, per cell, the minimum over the cell's runs of each run's lowest epoch-mean "
        "training loss (on a replayed set, a loss on that set); the column 'paper's statistic' computes exactly that "
        "from our runs, naming the run it picks, and 'spread over runs' the values it was picked from (lowest - "
        "highest over the cell's runs). Beside it: the population error of the picked run on held-out samples no "
        "run trains on (mean +- standard error), the range of population errors over the cell's runs, and the gap "
        "(the picked run's population error minus its last epoch's training loss). The theorems bound the "
        "population error.",
        "",
        "| cell | runs | paper's statistic (picked run) | spread over runs | population error of the picked run | "
        "population over runs | gap | paper |",
        "|---|---|---|---|---|---|---|---|",
    ]
    points: list[PaperPoint] = []
    for cell in cells:
        number = _paper_number(cell, preset.paper)
        population = "-"
        if cell.population is not None:
            error, stderr = cell.population
            population = value_text(error) + ("" if math.isnan(stderr) else f" +- {stderr:.2g}")
        gap = "-" if cell.gap is None else value_text(cell.gap)
        lines.append(
            f"| {_cell_text(cell)} | {cell.runs} | {value_text(cell.best)} ({_picked_text(cell.best_run)}) | "
            f"{range_text((cell.best, cell.worst))} | {population} | {range_text(cell.population_range)} | {gap} | "
            f"{'-' if number is None else range_text(number.value)} |"
        )
        if number is not None and number.value[0] == number.value[1]:
            points.append((int(cell.field("layers")), series_label(cell), int(cell.field("rank")), number.value[0]))
    lines.append("")
    if len({cell.field("rank") for cell in cells}) < 2:
        return lines, []
    name = f"{preset.name}-{scale}-paper-statistic.png"
    title = f"{preset.name} ({scale}): the paper's statistic (solid) and its run's population error (dashed)"
    path = plot_paper_statistic(cells, points, out / name, title)
    return [*lines, f"![{preset.name} {scale} paper statistic]({name})", "", f"Figure: [{name}]({name}).", ""], [path]


def paper_statistic_at(scales: Collection[str] | None = None) -> ReportSection:
    """The section as a preset holds it, drawn at ``scales`` only (None: at every scale)."""
    return ReportSection("paper-statistic", functools.partial(paper_statistic_section, scales=scales))
