"""`attnrank sweep PRESET --scale S --out DIR`: run one experiment of the paper as a resumable sweep."""

from __future__ import annotations

import argparse
import json
from typing import Any

from experiments.allocator import HELP as ALLOCATOR_HELP
from experiments.cli.arguments import path_argument
from experiments.cli.output import emit
from experiments.studies import PRESETS, get_preset
from experiments.sweeps.backends import BACKENDS
from experiments.sweeps.preflight import check_sweep_request
from experiments.sweeps.runner import execute_sweep


def _key_values(items: list[str], flag: str) -> dict[str, Any]:
    """``KEY=VALUE`` items as a dictionary (VALUE parsed as JSON when it is JSON, else kept as text)."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} expects KEY=VALUE (a TrainConfig field), got {item!r}")
        if key in values:  # a second value would silently replace the first
            raise ValueError(
                f"{flag} names {key} twice ({key}={json.dumps(values[key])} and {item}); give each KEY once "
                + ("(a run must match every selector)" if flag == "--only" else "(one value per field)")
            )
        try:
            values[key] = json.loads(text)
        except json.JSONDecodeError:
            values[key] = text
    return values


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    listing = "; ".join(f"{name}: {p.description} (scales {', '.join(p.scales)})" for name, p in PRESETS.items())
    parser = subparsers.add_parser(
        "sweep",
        help="run a paper experiment as a resumable sweep (results in DIR/results.sqlite)",
        description="Run every run of PRESET at --scale into --out: one row per run in --out/results.sqlite keyed "
        "by the hash of its resolved config, one directory per run in --out/runs/<hash>/. Re-running the same "
        "command skips finished runs and resumes unfinished ones from their checkpoints; a killed sweep loses no "
        f"finished result. Presets: {listing}.",
        epilog=ALLOCATOR_HELP,
    )
    parser.add_argument("preset", metavar="PRESET", help=f"one of: {', '.join(PRESETS)}")
    parser.add_argument(
        "--scale",
        default="quick",
        help="quick (sized for a few minutes per preset on 2 CPU cores), cpu (sized for at most 45 minutes per preset "
        "with 2 workers; measured times in results/README.md), paper (GPU hours)",
    )
    parser.add_argument("--out", required=True, type=path_argument, help="sweep directory")
    parser.add_argument("--backend", default="local", choices=BACKENDS, help="default %(default)s")
    parser.add_argument("--workers", type=int, default=None, help="local worker processes (default: os.cpu_count())")
    parser.add_argument("--address", default=None, help="Ray cluster address (backend ray; default: start one)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TrainConfig field in every training run (JSON value), e.g. --set steps=10000; repeatable",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run only the preset's runs whose field KEY equals VALUE (JSON value), e.g. --only layers=1; repeatable "
        "(a run must match all); drivers with disjoint --only selections may share one --out",
    )
    parser.add_argument(
        "--batch-seeds",
        action="store_true",
        help="pack only runs that differ in their seeds alone (seed and data_seed; default packs: seed, data seed, "
        "temperature and encoder rank); each run keeps its own directory, checkpoints and evaluation",
    )
    parser.add_argument(
        "--no-pack",
        action="store_true",
        help="train every run alone (default: runs that may share a pack, equal but for seed, data seed, temperature "
        "and encoder rank, are trained together in one process, each with its own run directory and checkpoints; "
        "docs/training.md)",
    )
    parser.add_argument(
        "--rebuild-store",
        action="store_true",
        help="rebuild DIR/results.sqlite from DIR/runs/*/result.json first (a damaged store is moved aside, never "
        "deleted), then run what is left",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar or lines")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    request = check_sweep_request(  # the one check (sweeps.preflight); its messages name the flags (cli.main)
        get_preset(args.preset),
        args.scale,
        args.out,
        backend=args.backend,
        workers=args.workers,
        address=args.address,
        overrides=_key_values(args.set, "--set"),
        only=_key_values(args.only, "--only"),
        progress=not args.no_progress,
        batch_seeds=args.batch_seeds,
        pack=not args.no_pack,
        rebuild=args.rebuild_store,
    )
    summary = execute_sweep(request)
    summary["seconds"] = round(summary["seconds"], 3)
    emit(summary, as_json=args.json, title=None if args.json else f"sweep {args.preset} ({args.scale}) -> {args.out}")
    return 1 if summary["failed"] else 0
