"""`attnrank figure NAME ... --out DIR`: compute one of the standalone studies' rows and draw its figure.

The studies here are not sweeps (the sweep figures are drawn by `attnrank report`): each computes its rows with
`experiments.analysis` (Monte Carlo tables, least-squares constructions, small trained models) and hands them to a
module of `experiments.figures`, which only draws. Use `attnrank figure NAME --help` for each study's options.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from experiments.cli import figure_kinds


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "figure",
        help="compute a standalone study's tables and draw its figure",
        description="Compute one standalone study (not a sweep) and write its tables (CSV or JSON) and figure (PNG) "
        "under --out. Use `attnrank figure NAME --help` for each study's options.",
    )
    kinds = parser.add_subparsers(dest="figure", metavar="NAME")
    kinds.required = True
    for module_info in sorted(pkgutil.iter_modules(figure_kinds.__path__), key=lambda m: m.name):
        if not module_info.name.startswith("_"):
            importlib.import_module(f"{figure_kinds.__name__}.{module_info.name}").add_parser(kinds)
