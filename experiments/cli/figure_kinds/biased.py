"""`attnrank figure biased --out DIR`: Theorem 3's budget sweep and floor thresholds (docs/biased.md).

Writes ``biased_budget.csv`` (held-out error and the certified floor per rank and Frobenius budget, at ``--d``),
``biased_threshold.csv`` (the norm-sum threshold S*^2 below which the floor stays above 1/40, at ``--threshold-d``)
and ``biased_budget.png``, and prints both tables and the fitted growth exponent c of S*^2 in d - r.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from experiments.analysis.biased_tables import budget_table, threshold_table
from experiments.cli.arguments import check_output_dir, path_argument
from experiments.cli.figure_kinds._tables import write_rows_csv
from experiments.figures.biased import draw
from theory.validation import check_int, check_sample_count

BUDGETS = np.logspace(0, 8, 9)
"""(9,) Frobenius budgets of the sweep, 1 to 1e8."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "biased",
        help="Theorem 3: error against the weight budget, and the floor's thresholds",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--out", type=path_argument, required=True, help="output directory")
    parser.add_argument("--d", type=int, default=4, help="dimension of the budget sweep (>= 2; default 4)")
    parser.add_argument(
        "--threshold-d", type=int, default=8, help="dimension of the floor threshold table (>= 3; default 8)"
    )
    parser.add_argument(
        "--samples", type=int, default=20_000, help="Monte Carlo contexts of the Gram statistics (>= 2)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (>= 0)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    check_int("--d", args.d, minimum=2)
    check_int("--threshold-d", args.threshold_d, minimum=3)
    check_sample_count("--samples", args.samples)
    check_int("--seed", args.seed, minimum=0)
    out = check_output_dir(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = budget_table(args.d, list(range(args.d, 0, -1)), BUDGETS, args.samples, args.seed)
    write_rows_csv(rows, out / "biased_budget.csv")
    draw(rows, out / "biased_budget.png")
    for row in rows:
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    thresholds, c_fit, c_closed = threshold_table(args.threshold_d)
    write_rows_csv(thresholds, out / "biased_threshold.csv")
    for row in thresholds:
        print(f"d={row['d']} r={row['r']} d-r={row['d_minus_r']} S*^2={row['threshold_S2']:.4g}")
    print(f"fitted c = {c_fit:.3f} (closed-form bound exponent {c_closed:.3f}; e^c per unit of d - r)")
    return 0 if math.isfinite(c_fit) else 1
