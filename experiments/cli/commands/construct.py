"""`attnrank construct KIND ... --out FILE`: write one of the paper's constructions as a safetensors weight file."""

from __future__ import annotations

import argparse

from experiments.cli import construct_kinds
from experiments.cli.kinds import add_kind_parsers


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "construct",
        help="write a paper construction as a weight file",
        description="Build one of the paper's explicit constructions and write it as a safetensors weight file "
        "(layout documented in the README). Use `attnrank construct KIND --help` for each kind's options.",
    )
    add_kind_parsers(parser, construct_kinds, dest="kind", metavar="KIND")
