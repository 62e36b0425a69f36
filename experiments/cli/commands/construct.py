"""`attnrank construct KIND ... --out FILE`: write one of the paper's constructions as a safetensors weight file."""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from experiments.cli import construct_kinds


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "construct",
        help="write a paper construction as a weight file",
        description="Build one of the paper's explicit constructions and write it as a safetensors weight file "
        "(layout documented in the README). Use `attnrank construct KIND --help` for each kind's options.",
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND")
    kinds.required = True
    for module_info in sorted(pkgutil.iter_modules(construct_kinds.__path__), key=lambda m: m.name):
        if not module_info.name.startswith("_"):
            importlib.import_module(f"{construct_kinds.__name__}.{module_info.name}").add_parser(kinds)
