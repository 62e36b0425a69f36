"""`attnrank figure biased-crossing --out DIR`: Theorem 3 at reachable sizes (docs/biased.md,
results/theorem3-crossing).

Fits the constructions and trains small biased-target models under ``DIR/runs`` (resumed when already there), then
writes ``biased_crossing.csv`` (every measured row), ``biased_crossing_reach.csv`` (where each family first falls
below each level) and ``biased_crossing.png``, and prints the reach table.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from experiments.analysis.biased_crossing import crossing_study
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.cli.arguments import check_output_dir, path_argument
from experiments.cli.figure_kinds._tables import int_list, write_rows_csv
from experiments.figures.biased_crossing import draw
from theory.monte_carlo import DEFAULT_Z
from theory.validation import check_int, check_sample_count


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "biased-crossing",
        help="Theorem 3 at reachable sizes: constructions and trained models against the floor",
        description="Theorem 3 at reachable sizes: where least-squares constructions and trained models of each "
        "rank first fall below the floor level.",
    )
    parser.add_argument("--out", type=path_argument, required=True, help="output directory")
    parser.add_argument("--dims", type=int_list, default=[4, 6], help="comma-separated dimensions d (2 <= d <= 8)")
    parser.add_argument("--seeds", type=int_list, default=[0, 1], help="training seeds")
    parser.add_argument("--steps", type=int, default=1500, help="optimiser steps per trained model")
    parser.add_argument("--batch-size", type=int, default=256, help="training batch size")
    parser.add_argument("--max-heads-factor", type=int, default=16, help="trained H = d, 2d, ..., up to this times d")
    parser.add_argument("--eval-samples", type=int, default=20_000, help="fresh contexts scoring each trained model")
    parser.add_argument("--fit-samples", type=int, default=50_000, help="contexts of each least-squares fit")
    parser.add_argument("--heldout-samples", type=int, default=20_000, help="fresh contexts scoring each fit")
    parser.add_argument("--planes", type=int_list, default=[1, 2, 4], help="r-planes S of the rank-r dictionaries")
    parser.add_argument("--seed", type=int, default=0, help="seed of the constructions' random streams")
    parser.add_argument("--no-train", action="store_true", help="skip the trained models")
    parser.add_argument("--no-construct", action="store_true", help="skip the least-squares constructions")
    parser.set_defaults(handler=run)


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse (ValueError naming the flag) anything out of range, before anything is computed or written."""
    for d in args.dims:
        check_int("--dims", d, minimum=2, maximum=8)
    for seed in args.seeds:
        check_int("--seeds", seed, minimum=0)
    for S in args.planes:
        check_int("--planes", S, minimum=1)
    check_int("--steps", args.steps, minimum=1)
    check_int("--batch-size", args.batch_size, minimum=1)
    factor = check_int("--max-heads-factor", args.max_heads_factor, minimum=1, maximum=256)
    if factor & (factor - 1):
        raise ValueError(f"--max-heads-factor must be a power of 2, got {factor}")
    for flag in ("--eval-samples", "--fit-samples", "--heldout-samples"):
        check_sample_count(flag, getattr(args, flag[2:].replace("-", "_")))
    check_int("--seed", args.seed, minimum=0)
    if args.no_train and args.no_construct:
        raise ValueError("--no-train and --no-construct together leave nothing to measure")
    check_output_dir(args.out)


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    study = crossing_study(
        args.dims,
        seeds=args.seeds,
        steps=args.steps,
        batch_size=args.batch_size,
        max_heads_factor=args.max_heads_factor,
        eval_samples=args.eval_samples,
        fit_samples=args.fit_samples,
        heldout_samples=args.heldout_samples,
        planes=args.planes,
        seed=args.seed,
        train_models=not args.no_train,
        construct=not args.no_construct,
        run_root=SweepDirectory(args.out).runs,  # the trained models' run directories, where a sweep keeps its own
    )
    write_rows_csv([dataclasses.asdict(row) for row in study.rows], args.out / "biased_crossing.csv")
    write_rows_csv(study.table, args.out / "biased_crossing_reach.csv")
    draw(study.rows, study.energies, study.levels, args.out / "biased_crossing.png")
    for entry in study.table:
        first = entry["first_H"]
        print(
            f"d={entry['d']} level={entry['level']:.4g} {entry['family']} r={entry['r']}: "
            + (f"below at H={first}" if first is not None else f"below nowhere up to H={entry['max_H']}")
            + f" ({entry['above']}/{entry['models']} above at {DEFAULT_Z:g} s.e.; best {entry['best']:.4g})"
        )
    for d, energy in study.energies.items():
        print(f"d={d}: sawtooth energy ||O'||^2 = {energy:.5f}")
    print(f"wall time {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0
