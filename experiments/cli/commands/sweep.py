"""`attnrank sweep PRESET --scale S --out DIR`: run one experiment of the paper as a resumable sweep.

`attnrank sweep --reference CONFIG.yaml [SWEEP.yaml] --out DIR` trains instead the grid of the reference
implementation's own config files, in its regime (`experiments.sweeps.reference_configs`), recorded as preset
``reference``, scale ``files``. ``--print-config`` prints the resolved runs (and the keys skipped) and trains nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from experiments.allocator import HELP as ALLOCATOR_HELP
from experiments.cli.arguments import path_argument
from experiments.cli.output import emit, warn
from experiments.config import TrainConfig
from experiments.json_files import MAX_JSON_DEPTH, JsonTooDeep, jsonable, parse_json_text
from experiments.studies import PRESETS, get_preset
from experiments.studies.reference import FILES, with_runs
from experiments.sweeps.backends import BACKENDS, WorkerDied
from experiments.sweeps.preflight import SweepRequest, check_sweep_request, resolve_runs, select_runs
from experiments.sweeps.preset_kit import Preset
from experiments.sweeps.reference_configs import ReferenceGrid, read_reference
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
            values[key] = parse_json_text(text, f"{flag} {key}")
        except JsonTooDeep:  # refused, not taken as text (the one JSON reader's depth bound)
            raise ValueError(f"{flag} {key}: the value nests more than {MAX_JSON_DEPTH} levels") from None
        except ValueError:
            values[key] = text
    return values


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    listing = "; ".join(
        f"{name}: {p.description} (scales {', '.join(p.scales)})" for name, p in PRESETS.items() if not p.files_only
    )
    parser = subparsers.add_parser(
        "sweep",
        help="run a paper experiment as a resumable sweep (results in DIR/results.sqlite)",
        description="Run every run of PRESET at --scale into --out: one row per run in --out/results.sqlite keyed "
        "by the hash of its resolved config, one directory per run in --out/runs/<hash>/. Re-running the same "
        "command skips finished runs and resumes unfinished ones from their checkpoints; a killed sweep loses no "
        f"finished result. Presets: {listing}. With --reference CONFIG.yaml [SWEEP.yaml] instead of PRESET: the grid "
        "of the reference implementation's own files, in its regime (recorded as preset reference, scale files).",
        epilog=ALLOCATOR_HELP,
    )
    named = [name for name, p in PRESETS.items() if not p.files_only]
    parser.add_argument("preset", metavar="PRESET", nargs="?", help=f"one of: {', '.join(named)}")
    parser.add_argument(
        "--scale",
        default=None,
        help="quick (sized for a few minutes per preset on 2 CPU cores; the default), cpu (sized for at most 45 "
        "minutes per preset with 2 workers; measured times in results/README.md), paper (the paper's grid; GPU "
        "hours), and a preset's own (fig1: fresh, long, gpu)",
    )
    parser.add_argument(
        "--reference",
        nargs="+",
        type=path_argument,
        metavar="FILE",
        help="instead of PRESET: CONFIG.yaml [SWEEP.yaml], the reference implementation's own LightningCLI config and "
        "sweep file (lists of values, their product the grid), trained in its regime: its sampler and fixed set of "
        "trainer.limit_train_batches batches, max_epochs x K steps, warm-up max_epochs // 20 epochs, the learning "
        "rate stepped once per epoch; keys that change nothing here (loggers, strategy, devices, callbacks) are "
        "reported and skipped, a key or value that cannot be honoured is refused (docs/sweeps.md)",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved runs (with --set and --only applied; with --reference also the keys skipped) and "
        "train nothing, write nothing",
    )
    parser.add_argument("--out", type=path_argument, help="sweep directory (required unless --print-config)")
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


def _preset_and_scale(args: argparse.Namespace) -> tuple[Preset, str, ReferenceGrid | None]:
    """The preset and scale the flags name: a registered preset, or the reference preset holding the files' runs."""
    if args.reference is None:
        if args.preset is None:
            raise ValueError("PRESET is required (or --reference CONFIG.yaml [SWEEP.yaml])")
        preset = get_preset(args.preset)
        if preset.files_only:
            raise ValueError(
                f"preset {preset.name} takes its runs from files: use --reference CONFIG.yaml [SWEEP.yaml]"
            )
        return preset, "quick" if args.scale is None else args.scale, None
    if args.preset is not None:
        raise ValueError(f"--reference trains the files' grid; drop PRESET ({args.preset}) or drop --reference")
    if args.scale is not None:
        raise ValueError(
            f"--scale applies to a preset; --reference trains the files' grid as they give it, got {args.scale!r}"
        )
    if len(args.reference) > 2:
        raise ValueError(f"--reference takes CONFIG.yaml and at most one SWEEP.yaml, got {len(args.reference)} files")
    grid = read_reference(*args.reference)
    return with_runs(grid.runs), FILES, grid


def _print_config(preset: Preset, scale: str, args: argparse.Namespace, grid: ReferenceGrid | None) -> int:
    """Print the runs the flags resolve to, and the keys a reference file had skipped; nothing is trained."""
    runs = select_runs(resolve_runs(preset, scale, _key_values(args.set, "--set")), _key_values(args.only, "--only"))
    listing = {
        "preset": preset.name,
        "scale": scale,
        "runs": [{"kind": type(spec).__name__, "hash": spec.config_hash(), **spec.to_dict()} for spec in runs],
    }
    if grid is not None:
        listing["skipped_keys"] = [str(key) for key in grid.skipped]
    if args.json:
        print(json.dumps(jsonable(listing), allow_nan=False))
        return 0
    print(f"sweep {preset.name} ({scale}): {len(runs)} runs")
    for key in listing.get("skipped_keys", []):
        print(f"  skipped: {key}")
    for spec in runs:
        fields = spec.to_dict()
        if isinstance(spec, TrainConfig):
            defaults = TrainConfig().to_dict()
            fields = {k: v for k, v in fields.items() if v != defaults.get(k)}
        print(f"  {spec.config_hash()[:12]} " + " ".join(f"{k}={json.dumps(v)}" for k, v in fields.items()))
    return 0


def run(args: argparse.Namespace) -> int:
    preset, scale, grid = _preset_and_scale(args)
    if args.print_config:
        return _print_config(preset, scale, args, grid)
    if args.out is None:
        raise ValueError("--out is required (the sweep directory), unless --print-config")
    request = SweepRequest(
        preset,
        scale,
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
    checked = check_sweep_request(request)  # the one check (sweeps.preflight); its messages name the flags (cli.main)
    if grid is not None:
        for key in grid.skipped:
            print(f"attnrank sweep: skipped: {key}", file=sys.stderr)
    try:
        summary = execute_sweep(checked)
    except WorkerDied as exc:  # not bad input (exit 2): the sweep ran and stopped; one line, exit 1
        print(f"attnrank sweep: error: {exc}", file=sys.stderr)
        return 1
    for line in summary.get("damaged", []):  # result.json files --rebuild-store refused to store
        warn("sweep", f"not restored: {line}")
    if "damaged" in summary and not args.json:
        summary["damaged"] = len(summary["damaged"])
    summary["seconds"] = round(summary["seconds"], 3)
    if grid is not None:
        summary["skipped_keys"] = [str(key) for key in grid.skipped]
    emit(summary, as_json=args.json, title=None if args.json else f"sweep {preset.name} ({scale}) -> {args.out}")
    return 1 if summary["failed"] else 0
