"""Figures for depth (docs/paper.md section 5): Theorem 5's head counts and the Conjecture 6 scaling in N.

The rows come from `experiments.analysis.depth_scaling`; this module draws them (drawing only).

1. ``theorem5_heads.png``: heads needed for error eps at rank 1 against 1/eps, for several d: two layers (the
   majority vote, exact quadrature, H ~ d / eps^2) vs one layer (Theorem 2's lower bound ``min_heads(d, 1, eps)``,
   exponential). The one-layer curve is a LOWER bound on heads, the two-layer curve an achievable count.
2. ``conjecture6_scaling.png``: Monte Carlo error of the rank-1 plurality vote + round robin (fresh heads per sample,
   theory.plurality_vote) against H for several N, and the heads needed for a target error against N, next to the one
   full-rank head whose cost does not depend on N.

    attnrank figure depth --out reports/depth [--quick]

computes the rows, writes the two PNGs and ``depth_tables.json`` (every row) and prints the tables in Markdown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.depth_scaling import (
    fit_exponent,
)
from theory.majority_vote_error import majority_vote_asymptote
from theory.monte_carlo import DEFAULT_Z


def draw_heads_figure(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Draw heads-for-error: majority vote (2 layers) vs Theorem 2 (1 layer), rank 1, from :func:`heads_rows`.

    Returns:
        the path written.
    """
    d_values = sorted({r["d"] for r in rows})
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for index, d in enumerate(d_values):
        color = f"C{index}"
        mine = [r for r in rows if r["d"] == d]
        x = [1 / r["eps"] for r in mine]
        ax.plot(x, [math.log10(r["two_layer_heads"]) for r in mine], "o-", color=color, label=f"2 layers, d={d}")
        one_layer = [r["one_layer_min_heads_log10"] for r in mine]
        ax.plot(x, one_layer, "s--", color=color, label=f"1 layer, Thm 2 lower bound, d={d}")
    ax.set_xscale("log")
    ax.set_xlabel("1 / eps")
    ax.set_ylabel("log10 heads for error eps (rank 1)")
    ax.set_title("Rank-1 heads: majority vote (2 layers) vs Theorem 2 (1 layer)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def draw_scaling_figure(rows: Sequence[dict[str, Any]], table: Sequence[dict[str, Any]], path: Path) -> None:
    """Draw error vs H per N (left) and heads needed vs N (right)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    for index, N in enumerate(sorted({r["N"] for r in rows})):
        mine = sorted((r for r in rows if r["N"] == N), key=lambda r: r["H"])
        left.errorbar(
            [r["H"] for r in mine],
            [r["error"] for r in mine],
            yerr=[DEFAULT_Z * r["stderr"] for r in mine],
            fmt="o-",
            color=f"C{index % 10}",
            label=f"N={N}",
            capsize=2,
        )
    d = rows[0]["d"]
    grid = np.array(sorted({r["H"] for r in rows}), dtype=float)
    left.plot(grid, [majority_vote_asymptote(d, h) for h in grid], "k:", label="sqrt(d/H) (N=2)")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("layer-1 heads H (rank 1)")
    left.set_ylabel("error E||f - f*||^2 (4 s.e. bars)")
    left.set_title(f"Plurality vote + round robin, d={d}")
    left.legend(fontsize=7)
    finite = [r for r in table if math.isfinite(r["heads_needed"])]
    right.plot([r["N"] for r in finite], [r["heads_needed"] for r in finite], "o-", label="rank 1, 3 layers")
    right.fill_between(
        [r["N"] for r in finite],
        [r["heads_needed_low"] for r in finite],
        [min(r["heads_needed_high"], 4 * max(grid)) for r in finite],  # inf = beyond the grid: clipped
        alpha=0.2,
        label="4 s.e. band (clipped at 4x the largest H)",
    )
    right.plot([r["N"] for r in table], [1 for _ in table], "k--", label="one full-rank head (error 0)")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("context length N")
    right.set_ylabel(f"heads for error {table[0]['eps']}")
    right.set_title(f"Conjecture 6 evidence (slope {fit_exponent(table):.2f})")
    right.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
