"""`attnrank figure biased-separation --out DIR`: Theorem 3 measured by least-squares fits (docs/biased.md).

Full rank reaches zero error at H = M thresholds; every rank r < d stays at the sawtooth energy. Writes
``biased_separation.csv`` and ``biased_separation.png`` and prints each row's held-out error.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from experiments.analysis.biased_separation import SeparationRow, oscillation_energy, separation_rows
from experiments.cli.arguments import check_output_dir, path_argument
from experiments.cli.figure_kinds._tables import int_list, write_rows_csv
from experiments.figures.biased_separation import draw
from theory.validation import check_int, check_sample_count

PLANES = (1, 2, 4)
"""Numbers S of r-planes of the rank-r dictionaries (2 S M heads each)."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "biased-separation",
        help="Theorem 3: full rank reaches 0, low rank stays at the sawtooth energy",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("--out", type=path_argument, required=True, help="output directory")
    parser.add_argument("--dims", type=int_list, default=[4, 6, 8], help="comma-separated dimensions (>= 2)")
    parser.add_argument("--fit-samples", type=int, default=50_000, help="contexts of the least-squares fit (>= 2)")
    parser.add_argument("--heldout-samples", type=int, default=20_000, help="fresh contexts of the held-out error")
    parser.add_argument("--seed", type=int, default=0, help="seed (>= 0)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    for d in args.dims:
        check_int("--dims", d, minimum=2)
    check_sample_count("--fit-samples", args.fit_samples)
    check_sample_count("--heldout-samples", args.heldout_samples)
    check_int("--seed", args.seed, minimum=0)
    out = check_output_dir(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[SeparationRow] = []
    energies = {}
    for d in args.dims:
        M = 2 * d * d + 1  # thresholds of the default grid
        ranks = sorted({d, d - 1, max(1, d // 2), 1}, reverse=True)
        full_heads = sorted({(M + 3) // 4, (M + 1) // 2, M - 1, M})
        rng = np.random.default_rng([args.seed, d])
        rows += separation_rows(d, ranks, full_heads, PLANES, args.fit_samples, args.heldout_samples, rng)
        energies[d] = oscillation_energy(d)
    write_rows_csv([dataclasses.asdict(row) for row in rows], out / "biased_separation.csv")
    draw(rows, energies, out / "biased_separation.png")
    for row in rows:
        print(
            f"d={row.d} r={row.r} H={row.H}: held-out {row.heldout:.5f} +- {row.heldout_stderr:.5f} "
            f"(in-sample {row.in_sample:.5f}; sawtooth energy {energies[row.d]:.5f})"
        )
    return 0
