"""`attnrank figure depth --out DIR [--quick]`: Theorem 5's head counts and Conjecture 6's N-scaling (docs/depth.md).

Writes ``theorem5_heads.png``, ``conjecture6_scaling.png`` and ``depth_tables.json`` (the majority-vote, head-count,
N-scaling, heads-needed and head-edge tables, and the fitted exponent of heads needed in N), and prints the tables.
"""

from __future__ import annotations

import argparse
import json

from experiments.analysis.depth_scaling import (
    fit_exponent,
    head_edge_rows,
    heads_rows,
    majority_rows,
    needed_table,
    scaling_rows,
)
from experiments.cli.arguments import check_output_dir, finite_float, path_argument
from experiments.cli.figure_kinds._tables import markdown_table
from experiments.figures.depth import draw_heads_figure, draw_scaling_figure
from theory.validation import check_int, check_real, check_sample_count

MAJORITY_COLUMNS = ("d", "H", "exact", "asymptote", "refined_asymptote", "mc", "mc_stderr", "n_samples")
HEADS_COLUMNS = ("d", "eps", "two_layer_heads", "asymptote_heads", "one_layer_min_heads_log10")
NEEDED_COLUMNS = (
    "N",
    "heads_needed",
    "heads_needed_low",
    "heads_needed_high",
    "scratch_p",
    "layers",
    "later_heads",
    "full_rank_heads",
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "depth",
        help="Theorem 5's head counts and Conjecture 6's N-scaling",
        description="Draw the Theorem 5 head-count figure and the Conjecture 6 N-scaling figure, with their tables.",
    )
    parser.add_argument("--out", type=path_argument, required=True, help="where PNGs and JSON go")
    parser.add_argument("--quick", action="store_true", help="small grid (a few minutes on 2 cores)")
    parser.add_argument("--d", type=int, default=16, help="token dimension of the N-scaling study (>= 2)")
    parser.add_argument("--eps", type=finite_float, default=0.25, help="target error of the N-scaling table, in (0, 1)")
    parser.add_argument("--samples", type=int, default=None, help="Monte Carlo samples per (N, H) (>= 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed (>= 0)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    d = check_int("--d", args.d, minimum=2)
    eps = check_real("--eps", args.eps, minimum=0.0, maximum=1.0, strict_minimum=True, strict_maximum=True)
    seed = check_int("--seed", args.seed, minimum=0)
    samples = args.samples or (1000 if args.quick else 4000)
    check_sample_count("--samples", samples)
    out = check_output_dir(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n_values = [2, 4, 8] if args.quick else [2, 3, 4, 6, 8, 12, 16]
    head_grid = [16, 64, 256, 1024, 4096] if args.quick else [16, 64, 256, 1024, 4096, 16384]
    heads = heads_rows()
    draw_heads_figure(heads, out / "theorem5_heads.png")
    majority = majority_rows([16, 64], [11, 101, 1001] if args.quick else [11, 101, 1001, 10001], samples * 5, seed)
    rows = scaling_rows(d, n_values, head_grid, samples, seed)
    table = needed_table(rows, eps)
    edges = head_edge_rows(d, n_values, samples * 5, seed)
    draw_scaling_figure(rows, table, out / "conjecture6_scaling.png")
    report = {
        "majority": majority,
        "heads": heads,
        "scaling": rows,
        "needed": table,
        "needed_exponent_in_N": fit_exponent(table),
    }
    (out / "depth_tables.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(
        markdown_table(majority, ["d", "H", "exact", "asymptote", "refined_asymptote", "mc", "mc_stderr", "n_samples"])
    )
    print()
    print(markdown_table(heads, HEADS_COLUMNS))
    print()
    print(markdown_table(rows, ["N", "H", "error", "stderr", "n_samples"]))
    print()
    print(markdown_table(table, NEEDED_COLUMNS))
    print()
    print(markdown_table(edges, ["N", "p_right", "p_right_stderr", "chance", "edge"]))
    print(f"\nfitted exponent of heads_needed in N: {report['needed_exponent_in_N']:.3f}")
    return 0
