"""Figures for depth (docs/paper.md section 5): Theorem 5's head counts and the Conjecture 6 scaling in N.

The rows come from `experiments.analysis.depth_scaling`; this module draws them and, as a command, prints them.

1. ``theorem5_heads.png``: heads needed for error eps at rank 1 against 1/eps, for several d: two layers (the
   majority vote, exact quadrature, H ~ d / eps^2) vs one layer (Theorem 2's lower bound ``min_heads(d, 1, eps)``,
   exponential). The one-layer curve is a LOWER bound on heads, the two-layer curve an achievable count.
2. ``conjecture6_scaling.png``: Monte Carlo error of the rank-1 plurality vote + round robin (fresh heads per sample,
   theory.plurality_vote) against H for several N, and the heads needed for a target error against N, next to the one
   full-rank head whose cost does not depend on N.

    python -m experiments.figures.depth --out-dir reports/depth [--quick] [--json]

writes the two PNGs and ``depth_tables.json`` (every row) and prints the tables in Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.depth_scaling import (
    fit_exponent,
    head_edge_rows,
    heads_rows,
    majority_rows,
    needed_table,
    scaling_rows,
)
from experiments.figures import use_file_backend
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


def _markdown(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> str:
    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.figures.depth",
        description="Draw the Theorem 5 head-count figure and the Conjecture 6 N-scaling figure, with their tables.",
    )
    parser.add_argument("--out-dir", type=Path, default=Path("reports/depth"), help="where PNGs and JSON go")
    parser.add_argument("--quick", action="store_true", help="small grid (a few minutes on 2 cores)")
    parser.add_argument("--d", type=int, default=16, help="token dimension of the N-scaling study")
    parser.add_argument("--eps", type=float, default=0.25, help="target error of the N-scaling table")
    parser.add_argument("--samples", type=int, default=None, help="Monte Carlo samples per (N, H)")
    parser.add_argument("--seed", type=int, default=0, help="seed")
    args = parser.parse_args(argv)
    use_file_backend()
    quick = args.quick
    n_values = [2, 4, 8] if quick else [2, 3, 4, 6, 8, 12, 16]
    head_grid = [16, 64, 256, 1024, 4096] if quick else [16, 64, 256, 1024, 4096, 16384]
    samples = args.samples or (1000 if quick else 4000)
    heads = heads_rows()
    draw_heads_figure(heads, args.out_dir / "theorem5_heads.png")
    majority = majority_rows([16, 64], [11, 101, 1001] if quick else [11, 101, 1001, 10001], samples * 5, args.seed)
    rows = scaling_rows(args.d, n_values, head_grid, samples, args.seed)
    table = needed_table(rows, args.eps)
    edges = head_edge_rows(args.d, n_values, samples * 5, args.seed)
    draw_scaling_figure(rows, table, args.out_dir / "conjecture6_scaling.png")
    report = {
        "majority": majority,
        "heads": heads,
        "scaling": rows,
        "needed": table,
        "needed_exponent_in_N": fit_exponent(table),
    }
    (args.out_dir / "depth_tables.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(_markdown(majority, ["d", "H", "exact", "asymptote", "refined_asymptote", "mc", "mc_stderr", "n_samples"]))
    print()
    print(_markdown(heads, ["d", "eps", "two_layer_heads", "asymptote_heads", "one_layer_min_heads_log10"]))
    print()
    print(_markdown(rows, ["N", "H", "error", "stderr", "n_samples"]))
    print()
    print(
        _markdown(
            table,
            [
                "N",
                "heads_needed",
                "heads_needed_low",
                "heads_needed_high",
                "scratch_p",
                "layers",
                "later_heads",
                "full_rank_heads",
            ],
        )
    )
    print()
    print(_markdown(edges, ["N", "p_right", "p_right_stderr", "chance", "edge"]))
    print(f"\nfitted exponent of heads_needed in N: {report['needed_exponent_in_N']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
