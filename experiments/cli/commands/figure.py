"""`attnrank figure NAME ... --out DIR`: compute one of the standalone studies' rows and draw its figure.

The studies here are not sweeps (the sweep figures are drawn by `attnrank report`): each computes its rows with
`experiments.analysis` (Monte Carlo tables, least-squares constructions, small trained models) and hands them to a
module of `experiments.figures`, which only draws. Use `attnrank figure NAME --help` for each study's options.
"""

from __future__ import annotations

import argparse

from experiments.cli import figure_kinds
from experiments.cli.kinds import add_kind_parsers


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "figure",
        help="compute a standalone study's tables and draw its figure",
        description="Compute one standalone study (not a sweep) and write its tables (CSV or JSON) and figure (PNG) "
        "under --out. Use `attnrank figure NAME --help` for each study's options.",
    )
    add_kind_parsers(parser, figure_kinds, dest="figure", metavar="NAME")
