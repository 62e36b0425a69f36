"""`attnrank report DIR`: DIR/report.md with one PNG per figure and our numbers beside the paper's."""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.cli.output import emit
from experiments.reporting.sweep_report import write_report


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write DIR/report.md (figures, paper-vs-ours table, claims) from a sweep directory",
        description="Read DIR/results.sqlite (written by `attnrank sweep`) and write DIR/report.md: for every sweep "
        "in the store its figure (DIR/<preset>-<scale>.png, the paper's axes and log scales), a table that puts "
        "our numbers beside the paper's (PAPER.md section 6) with a verdict per row, whether the qualitative claim "
        "is reproduced, and every run's losses and time.",
    )
    parser.add_argument("out", type=Path, metavar="DIR", help="sweep directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    report = write_report(args.out)
    figures = sorted(str(p) for p in Path(args.out).glob("*.png"))
    emit({"report": str(report), "figures": figures}, as_json=args.json, title=None if args.json else "report written")
    return 0
