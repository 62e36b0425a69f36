"""`attnrank check [--quick | --full]`: every paper claim, with a report."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments.reporting.check import all_passed, format_table, run_checks


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="run every paper check and write reports/check.md",
        description="Run the paper checks (pytest paper_checks/) and print and write the claim table "
        "(claim, status, measured value, reference or bound, seconds). Exit status 0 only if every check passes.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="skip checks marked slow (the default; minutes on 2 cores)")
    mode.add_argument("--full", action="store_true", help="run every check, including slow ones, and draw figures")
    parser.add_argument("--report-dir", type=Path, default=Path("reports"), help="where check.md and figures go")
    parser.add_argument(
        "-k", dest="keyword", default=None, help="only checks matching this pytest -k expression (for debugging)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    extra = ["-k", args.keyword] if args.keyword else []
    results = run_checks(full=args.full, report_dir=args.report_dir, extra_pytest_args=extra)
    table = format_table(results, mode="full" if args.full else "quick", wall_seconds=time.perf_counter() - start)
    path = args.report_dir / "check.md"
    path.write_text(table, encoding="utf-8")
    print(table)
    print(f"report written to {path}")
    return 0 if all_passed(results) else 1
