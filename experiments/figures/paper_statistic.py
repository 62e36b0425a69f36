"""The paper's statistic beside our population error, against rank (drawing only; the numbers come from
`experiments.analysis.paper_statistic`).

One panel per depth L, one colour per remaining cell (the width c, and whatever else varies): the solid line is the
paper's statistic (per cell, the lowest epoch-mean training loss of the best run), the dashed line the population
error of that same run, and the paper's published values (training losses, as its figure plots them) are crosses.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from experiments.analysis.paper_statistic import CellStatistic

PaperPoint = tuple[int, str, float, float]
"""A published value to mark: (layers, series label, rank, value)."""


def series_label(cell: CellStatistic) -> str:
    """The cell's colour: its varying fields other than rank and depth (``c=8``), or "all" when none remain."""
    shown = {"width": "c"}
    parts = [f"{shown.get(name, name)}={value}" for name, value in cell.cell if name not in ("rank", "layers")]
    return " ".join(parts) or "all"


def plot_paper_statistic(cells: Sequence[CellStatistic], paper: Sequence[PaperPoint], path: Path, title: str) -> Path:
    """Draw ``cells`` (rank on a log2 axis, log loss) with ``paper``'s values as crosses; return ``path``."""
    panels = sorted({int(c.field("layers")) for c in cells})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.9), squeeze=False, sharey=True)
    for ax, layers in zip(axes[0], panels, strict=True):
        lines: dict[str, list[CellStatistic]] = defaultdict(list)
        for cell in cells:
            if int(cell.field("layers")) == layers:
                lines[series_label(cell)].append(cell)
        colours: dict[str, Any] = {}
        for index, (label, members) in enumerate(sorted(lines.items())):
            colour = colours.setdefault(label, f"C{index % 10}")
            members = sorted(members, key=lambda c: int(c.field("rank")))
            ranks = [int(c.field("rank")) for c in members]
            ax.plot(ranks, [c.best for c in members], marker="o", color=colour, label=f"{label}: paper's statistic")
            measured = [(r, c.population[0]) for r, c in zip(ranks, members, strict=True) if c.population]
            if measured:
                ax.plot(
                    [r for r, _ in measured],
                    [e for _, e in measured],
                    marker="s",
                    linestyle="--",
                    color=colour,
                    label=f"{label}: its population error",
                )
        for paper_layers, label, rank, value in paper:
            if paper_layers == layers:
                ax.scatter([rank], [value], marker="x", s=40, color=colours.get(label, "black"), zorder=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("rank r", fontsize=8)
        ax.set_title(f"L={layers}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if lines:
            ax.legend(fontsize=6)
    axes[0][0].set_ylabel("MSE (x: the paper's published value)", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
