"""Figures and tables for depth (PAPER.md section 5): Theorem 5's head counts and the Conjecture 6 scaling in N.

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

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from theory.bounds import min_heads  # noqa: E402
from theory.majority_vote_error import (  # noqa: E402
    majority_vote_asymptote,
    majority_vote_error,
    majority_vote_heads,
)
from theory.monte_carlo import DEFAULT_Z  # noqa: E402
from theory.plurality_vote import plurality_vote_errors  # noqa: E402
from theory.validation import check_real  # noqa: E402


def heads_rows(d_values: Sequence[int], eps_values: Sequence[float]) -> list[dict[str, Any]]:
    """Rows (d, eps, two-layer heads, its asymptote d/eps^2, log10 of Theorem 2's one-layer minimum)."""
    rows = []
    for d in d_values:
        for eps in eps_values:
            one_layer = min_heads(d, 1, eps)
            rows.append(
                {
                    "d": d,
                    "eps": eps,
                    "two_layer_heads": majority_vote_heads(d, eps),
                    "asymptote_heads": d / eps**2,
                    "one_layer_min_heads_log10": math.log10(one_layer),
                }
            )
    return rows


def majority_rows(d_values: Sequence[int], head_values: Sequence[int], samples: int, seed: int) -> list[dict[str, Any]]:
    """Rows (d, H, exact error, sqrt(d/H), refined asymptote, Monte Carlo mean and s.e. with fresh heads per sample)."""
    rows = []
    for d in d_values:
        estimates = plurality_vote_errors(d, 2, head_values, samples, np.random.default_rng([seed, d]))
        for H, estimate in estimates.items():
            rows.append(
                {
                    "d": d,
                    "H": H,
                    "exact": majority_vote_error(d, H),
                    "asymptote": majority_vote_asymptote(d, H),
                    "refined_asymptote": majority_vote_asymptote(d, H, refined=True),
                    "mc": estimate.mean,
                    "mc_stderr": estimate.stderr,
                    "n_samples": estimate.n_samples,
                }
            )
    return rows


def draw_heads_figure(
    path: Path, d_values: Sequence[int] = (16, 32, 64), eps_values: Sequence[float] | None = None
) -> list[dict[str, Any]]:
    """Draw heads-for-error: majority vote (2 layers) vs Theorem 2 (1 layer), rank 1. Returns the rows drawn."""
    eps_grid = list(eps_values) if eps_values is not None else list(np.geomspace(0.3, 0.03, 9))
    rows = heads_rows(d_values, eps_grid)
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
    return rows


def scaling_rows(
    d: int, n_values: Sequence[int], head_grid: Sequence[int], samples: int, seed: int, keys: str = "orthonormal"
) -> list[dict[str, Any]]:
    """Monte Carlo rows (d, N, H, error, stderr, n_samples, layer/scratch costs) of the plurality vote + round robin."""
    rows = []
    for N in n_values:
        estimates = plurality_vote_errors(d, N, head_grid, samples, np.random.default_rng([seed, N]), keys=keys)
        for H, estimate in estimates.items():
            rows.append(
                {
                    "d": d,
                    "N": N,
                    "H": H,
                    "keys": keys,
                    "error": estimate.mean,
                    "stderr": estimate.stderr,
                    "n_samples": estimate.n_samples,
                    "layers": 3,
                    "scratch_p": 1 + 2 * N + d,
                    "later_heads": N * (N - 1) // 2 + N + 1,
                }
            )
    return rows


def head_edge_rows(d: int, n_values: Sequence[int], samples: int, seed: int) -> list[dict[str, Any]]:
    """Per N: probability that one random rank-1 head picks the nearest token, vs chance 1/N (D_N keys).

    A wrong pick costs exactly 2 on D_N, so P(right) = 1 - error(H = 1) / 2.
    """
    rows = []
    for N in n_values:
        estimate = plurality_vote_errors(d, N, [1], samples, np.random.default_rng([seed, N, 1]))[1]
        right = 1.0 - estimate.mean / 2.0
        rows.append(
            {
                "N": N,
                "p_right": right,
                "p_right_stderr": estimate.stderr / 2.0,
                "chance": 1.0 / N,
                "edge": right - 1.0 / N,
            }
        )
    return rows


def heads_needed(rows: Sequence[dict[str, Any]], N: int, eps: float, shift: float = 0.0) -> float:
    """Heads where the error (plus shift standard errors) crosses eps: log-log interpolation on the grid; inf if never.

    Args:
        rows: scaling rows.
        N: context length to read.
        eps: target error (> 0).
        shift: standard errors added to each error (+4 gives a pessimistic, -4 an optimistic head count).

    Returns:
        The interpolated head count (1.0 if the smallest grid H already reaches eps, inf if the largest does not).
    """
    eps = check_real("eps", eps, minimum=0.0, strict_minimum=True)
    mine = sorted((r for r in rows if r["N"] == N), key=lambda r: r["H"])
    values = [(r["H"], r["error"] + shift * r["stderr"]) for r in mine]
    if not values:
        raise ValueError(f"no rows for N = {N}")
    if values[0][1] <= eps:
        return float(values[0][0])
    for (h0, e0), (h1, e1) in zip(values, values[1:], strict=False):
        if e1 <= eps < e0:
            if e1 <= 0:
                return float(h1)
            frac = (math.log(e0) - math.log(eps)) / (math.log(e0) - math.log(e1))
            return float(math.exp(math.log(h0) + frac * (math.log(h1) - math.log(h0))))
    return math.inf


def needed_table(rows: Sequence[dict[str, Any]], eps: float) -> list[dict[str, Any]]:
    """Per N: heads needed for error eps (with a 4-s.e. band), scratch width, layers, later-layer heads."""
    table = []
    for N in sorted({r["N"] for r in rows}):
        first = next(r for r in rows if r["N"] == N)
        table.append(
            {
                "N": N,
                "eps": eps,
                "heads_needed": heads_needed(rows, N, eps),
                "heads_needed_low": heads_needed(rows, N, eps, -DEFAULT_Z),
                "heads_needed_high": heads_needed(rows, N, eps, DEFAULT_Z),
                "scratch_p": first["scratch_p"],
                "layers": first["layers"],
                "later_heads": first["later_heads"],
                "full_rank_heads": 1,
            }
        )
    return table


def fit_exponent(table: Sequence[dict[str, Any]]) -> float:
    """Least-squares slope of log heads_needed against log N over the finite entries."""
    points = [(math.log(r["N"]), math.log(r["heads_needed"])) for r in table if math.isfinite(r["heads_needed"])]
    if len(points) < 2:
        return math.nan
    x, y = np.array(points).T
    return float(np.polyfit(x, y, 1)[0])


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
    quick = args.quick
    n_values = [2, 4, 8] if quick else [2, 3, 4, 6, 8, 12, 16]
    head_grid = [16, 64, 256, 1024, 4096] if quick else [16, 64, 256, 1024, 4096, 16384]
    samples = args.samples or (1000 if quick else 4000)
    heads = draw_heads_figure(args.out_dir / "theorem5_heads.png")
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
