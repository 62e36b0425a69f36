"""Theorem 3 figure: achievable error against the value-norm budget for rank-r dictionaries, with the smoothing floor.

The rows come from `experiments.analysis.biased_tables` (budget_table, threshold_table); this module draws them
(drawing only). ``attnrank figure biased --out DIR [--d 4] [--samples 20000] [--seed 0]`` computes and writes
DIR/biased_budget.csv, DIR/biased_threshold.csv and DIR/biased_budget.png, and prints the tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from experiments.analysis.biased_tables import FLOOR_LEVEL_ABSOLUTE


def draw(rows: list[dict[str, Any]], path: Path) -> None:
    """Plot held-out and certified error against budget, per rank, with the smoothing floor."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for r in sorted({row["r"] for row in rows}, reverse=True):
        part = [row for row in rows if row["r"] == r]
        b = [row["budget"] for row in part]
        (line,) = ax.plot(b, [row["heldout"] for row in part], marker="o", label=f"r = {r}: held-out error")
        ax.plot(
            b, [row["dual"] for row in part], ls=":", color=line.get_color(), label=f"r = {r}: certified (empirical)"
        )
        ax.plot(b, [row["floor"] for row in part], ls="--", color=line.get_color(), alpha=0.6, label=f"r = {r}: floor")
    ax.axhline(FLOOR_LEVEL_ABSOLUTE, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("budget B: sum_h ||V_h||_F^2 <= B (contains d H max ||V_h||^2 <= B)")
    ax.set_ylabel("E ||f - F||^2")
    ax.set_title(f"Theorem 3, d = {rows[0]['d']}: low rank stays at the sawtooth energy")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
