"""`attnrank report DIR`: DIR/report.md with one PNG per figure and our numbers beside the paper's.

`attnrank report --index DIR` writes the generated part of DIR/README.md instead: the index of the committed stores
under DIR (`experiments.publish.results_index`). `attnrank report --docs DIR` (DIR the repository root) rewrites every
generated block of the docs from its source (`experiments.publish.doc_blocks`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.cli.arguments import check_output_file, path_argument
from experiments.cli.output import emit
from experiments.publish.doc_blocks import write_docs
from experiments.publish.results_index import README_NAME, write_index
from experiments.reporting.run_report import is_run_directory, write_run_report
from experiments.reporting.sweep_report import write_csv, write_report
from experiments.studies import PRESETS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write DIR/report.md (figures, paper-vs-ours table, claims) from a sweep directory",
        description="Read DIR/results.sqlite (written by `attnrank sweep`) and write DIR/report.md: for every sweep "
        "in the store its figure (DIR/<preset>-<scale>.png, the paper's axes and log scales), a table that puts "
        "our numbers beside the paper's (docs/paper.md section 6) graded per cell, each claim's grade (magnitude: the "
        "paper's ratio or gap is reached; direction: only the ordering holds; not reproduced), and every run's losses "
        "and time. The store is opened read-only: the report never writes to it. For a run directory (config.json, no "
        "store: a run of `attnrank train` or `attnrank import`) it writes DIR/report.md from DIR/analysis.json (run "
        "`attnrank analyze DIR` first): the error on the task, Theorem 2's bound where it was computed, the import's "
        "source, and every head's score form.",
    )
    parser.add_argument("out", type=path_argument, metavar="DIR", help="sweep directory, or a run directory")
    parser.add_argument(
        "--csv",
        action="store_true",
        help="also write DIR/runs.csv: one tidy row per run (config, seed, metrics, status)",
    )
    parser.add_argument(
        "--index",
        action="store_true",
        help="DIR is a results folder (results/): rewrite the generated index between the marker comments of "
        "DIR/README.md from every committed DIR/<store>/results.sqlite (preset, scale, runs, claim grades, numbers, "
        "training and wall time, revisions), leaving the hand-written rest of the file as it is",
    )
    parser.add_argument(
        "--docs",
        action="store_true",
        help="DIR is the repository root: rewrite every generated block (between <!-- BEGIN GENERATED: NAME --> and "
        "<!-- END GENERATED: NAME -->) of README.md, docs/*.md, results/README.md and results/*/README.md from its "
        "source (stores, benchmark records, the GPU calls' archives), leaving the hand-written rest as it is; a doc "
        "whose markers do not pair is refused and nothing is written",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.docs:
        return run_docs(args)
    if args.index:
        return run_index(args)
    if not args.out.is_dir():
        raise ValueError(f"DIR: sweep directory not found: {args.out}")
    check_output_file(SweepDirectory(args.out).report, "DIR")  # a run directory's report has the same name
    if is_run_directory(args.out):
        if args.csv:
            raise ValueError("--csv applies to a sweep directory (DIR/results.sqlite), not to a run directory")
        path = write_run_report(args.out)
        emit({"report": str(path), "figures": []}, as_json=args.json, title=None if args.json else "report written")
        return 0
    if args.csv:
        check_output_file(SweepDirectory(args.out).runs_csv, "DIR")
    report = write_report(args.out, PRESETS)
    figures = sorted(str(p) for p in Path(args.out).glob("*.png"))
    summary: dict[str, object] = {"report": str(report), "figures": figures}
    if args.csv:
        summary["csv"] = str(write_csv(args.out))
    emit(summary, as_json=args.json, title=None if args.json else "report written")
    return 0


def run_index(args: argparse.Namespace) -> int:
    """`attnrank report --index DIR`: the generated part of DIR/README.md (the committed stores' index)."""
    if args.csv:
        raise ValueError("--csv applies to a sweep directory, not to --index (a results folder)")
    if not args.out.is_dir():
        raise ValueError(f"DIR: results folder not found: {args.out}")
    check_output_file(args.out / README_NAME, "DIR")
    readme, stores = write_index(args.out)
    emit({"index": str(readme), "stores": stores}, as_json=args.json, title=None if args.json else "index written")
    return 0


def run_docs(args: argparse.Namespace) -> int:
    """`attnrank report --docs DIR`: every generated block of the docs under the repository root DIR."""
    if args.csv:
        raise ValueError("--csv applies to a sweep directory, not to --docs (the repository root)")
    if args.index:
        raise ValueError("--index and --docs write different files: give one of them")
    changed, blocks = write_docs(args.out)
    summary = {"docs": [str(path) for path in changed], "blocks": blocks}
    emit(summary, as_json=args.json, title=None if args.json else "generated blocks written")
    return 0
