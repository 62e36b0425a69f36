"""Sub-subcommands discovered from a package: one module per kind (`attnrank construct KIND`, `attnrank figure NAME`).

Each module of the package whose name does not start with ``_`` defines ``add_parser(subparsers)``; adding a kind
never touches a shared file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from types import ModuleType


def add_kind_parsers(parser: argparse.ArgumentParser, package: ModuleType, dest: str, metavar: str) -> None:
    """Give ``parser`` a required sub-subcommand ``dest`` with one choice per module of ``package``, in name order."""
    kinds = parser.add_subparsers(dest=dest, metavar=metavar)
    kinds.required = True
    for module_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not module_info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{module_info.name}").add_parser(kinds)
