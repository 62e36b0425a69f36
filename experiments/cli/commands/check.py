"""`attnrank check [--quick | --full]`: every paper claim, with a report."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments.allocator import HELP as ALLOCATOR_HELP
from experiments.cli.arguments import check_output_dir, check_output_file, path_argument
from experiments.json_files import write_text_atomically
from experiments.reporting.check import all_passed, figure_links, format_table, run_checks


def check_keyword(expression: str) -> str:
    """Validate a pytest ``-k`` expression with pytest's own parser (before any check runs or any file is written)."""
    if expression.strip() == "":
        raise ValueError("-k must be a non-empty pytest -k expression, e.g. 'theorem2 and not slow'")
    # pytest is a dev dependency (the checks need it anyway): imported only when -k is given.
    from _pytest.mark import expression as pytest_expression

    # pytest < 9 raises its own ParseError, pytest >= 9 a SyntaxError.
    errors = (SyntaxError, getattr(pytest_expression, "ParseError", SyntaxError))
    try:
        pytest_expression.Expression.compile(expression)
    except errors as exc:
        raise ValueError(f"-k {expression!r} is not a pytest -k expression ({exc})") from exc
    return expression


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="run every paper check and write reports/check.md",
        description="Run the paper checks (pytest paper_checks/) and print and write the claim table "
        "(claim, status, measured value, reference or bound, seconds). Exit status 0 only if every check passes.",
        epilog=ALLOCATOR_HELP,
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        action="store_true",
        help="skip checks marked slow (the default; about 5 minutes on 2 CPU cores)",
    )
    mode.add_argument(
        "--full",
        action="store_true",
        help="run every check, including slow ones, and draw figures (about 15-25 minutes on 2 CPU cores)",
    )
    parser.add_argument(
        "--report-dir", type=path_argument, default=Path("reports"), help="where check.md and figures go"
    )
    parser.add_argument(
        "-k", dest="keyword", default=None, help="only checks matching this pytest -k expression (for debugging)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    extra = ["-k", check_keyword(args.keyword)] if args.keyword is not None else []
    check_output_dir(args.report_dir, "--report-dir")
    check_output_file(args.report_dir / "check.md", "--report-dir")
    try:
        results = run_checks(full=args.full, report_dir=args.report_dir, extra_pytest_args=extra)
    except RuntimeError as exc:
        raise ValueError(f"{exc}; {args.report_dir / 'check.md'} left unchanged") from exc
    if not results:
        selected = f" match -k {args.keyword!r}" if args.keyword is not None else " ran"
        raise ValueError(f"no checks{selected}; {args.report_dir / 'check.md'} left unchanged")
    table = format_table(
        results,
        mode="full" if args.full else "quick",
        wall_seconds=time.perf_counter() - start,
        figures=figure_links(args.report_dir),
    )
    path = args.report_dir / "check.md"
    write_text_atomically(path, table)
    print(table)
    print(f"report written to {path}")
    return 0 if all_passed(results) else 1
