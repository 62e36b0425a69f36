"""`attnrank figure trained DIR... --out FILE`: trained errors against Theorem 2's bound, per rank (docs/training.md).

Each DIR is a run directory already analysed by `attnrank analyze DIR` (its population error and "theorem2" bound
record are read).
"""

from __future__ import annotations

import argparse

from experiments.analysis.trained import records_from_runs
from experiments.cli.arguments import check_output_file, path_argument
from experiments.figures.trained import plot_trained_vs_bound


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "trained",
        help="trained errors against Theorem 2's bound, per rank",
        description="Plot the analysed runs' errors (4 s.e. bars) against the certified Theorem 2 bound, per rank.",
    )
    parser.add_argument("run_dirs", nargs="+", type=path_argument, metavar="DIR", help="analysed run directories")
    parser.add_argument("--out", type=path_argument, required=True, help="output image (.png)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    out = check_output_file(args.out)
    print(plot_trained_vs_bound(records_from_runs(args.run_dirs), out))
    return 0
