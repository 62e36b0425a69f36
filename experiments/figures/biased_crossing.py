"""Theorem 3 at reachable sizes: error against H for full rank and rank r < d, constructed and trained (issue 19).

docs/biased.md ("Measured: error against H, full rank vs rank r"). Three families of one-layer models on the biased
nearest-neighbour task (N = 2, D_2 keys, Gaussian query, the default bias grid of M = 2 d^2 + 1 thresholds):

- ``construction``: Theorem 3's full-rank heads Q = K = I_d, hardmax, score biases on H evenly spaced thresholds
  (H = M: the construction itself, exact), output weights by least squares with the simple part granted
  (`experiments.analysis.biased_separation`);
- ``constructed``: rank-r dictionaries (aligned heads on S random r-planes at every threshold, plus as many random
  rank-r heads; H = 2 S M), least squares the same way (same module);
- ``trained``: one-layer theory models (`model="theory"`, full value maps, softmax at temperature 1, no score bias:
  the trainable model has none) of rank r and H heads, AdamW from a random start (`experiments.training.loop.train`),
  scored on fresh contexts (`experiments.training.evaluation.evaluate_run`). Every rank including r = d (reference).

"Reaching" an error level at 4 standard errors: the upper end mean + 4 s.e. is at or below it; "missing" it: the lower
end mean - 4 s.e. is above it; otherwise undecided (`level_status`). For each d and level the table says at which H
(the first on the grid) each family reaches the level, or that it reached it nowhere on the grid (`reach_table`).

Usage:

    python -m experiments.figures.biased_crossing --out DIR [--dims 4,6] [--seeds 0,1] [--steps 1500]
        [--batch-size 256] [--max-heads-factor 16] [--eval-samples 20000] [--fit-samples 50000]
        [--heldout-samples 20000] [--planes 1,2,4] [--seed 0] [--no-train] [--no-construct]

writes DIR/biased_crossing.csv (one row per model), DIR/biased_crossing_reach.csv (the reach table),
DIR/biased_crossing.png, keeps the training run directories under DIR/runs/, and prints both tables. Bad arguments: one
line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

import matplotlib.pyplot as plt
import numpy as np

from experiments.analysis.biased_separation import oscillation_energy, separation_rows
from experiments.config import TrainConfig
from experiments.figures import use_file_backend
from experiments.training.evaluation import evaluate_run
from experiments.training.loop import train
from theory.monte_carlo import DEFAULT_Z
from theory.validation import check_dimension, check_int, check_rank, check_real

FAMILIES = ("construction", "constructed", "trained")
"""Model families, in the order they are drawn and tabulated (module docstring)."""

FLOOR_LEVEL = 1.0 / 40.0
"""The absolute error level of docs/biased.md's floor tables (`experiments.analysis.biased_tables`)."""


@dataclasses.dataclass(frozen=True)
class CrossingRow:
    """One model: its family, (d, r, H), seed (-1 for least-squares fits), error estimate and cost.

    ``error`` and ``stderr`` are the mean and standard error of ||f - F||^2 on ``n_eval`` fresh contexts; ``fit`` is
    the in-sample error of a least-squares fit or the last epoch's training loss; ``steps`` is 0 for fits.
    """

    d: int
    family: str
    r: int
    H: int
    seed: int
    error: float
    stderr: float
    n_eval: int
    fit: float
    steps: int
    seconds: float


def level_status(error: float, stderr: float, level: float, z: float = DEFAULT_Z) -> str:
    """ "below" if error + z stderr <= level, "above" if error - z stderr > level, else "undecided"."""
    check_real("level", level, minimum=0.0, strict_minimum=True)
    check_real("z", z, minimum=0.0)
    if not (math.isfinite(error) and math.isfinite(stderr)):
        return "above" if error == math.inf else "undecided"
    if error + z * stderr <= level:
        return "below"
    if error - z * stderr > level:
        return "above"
    return "undecided"


def reach_table(
    rows: Iterable[CrossingRow], levels: Mapping[int, Sequence[float]], z: float = DEFAULT_Z
) -> list[dict[str, object]]:
    """For each (d, level, family, r): the first H on the grid at which a model of that kind is "below" the level.

    Trained models count one by one (any seed below the level counts: "the best model found").

    Args:
        rows: the models. levels: error levels per d (a d without levels is left out). z: standard errors.

    Returns:
        rows with keys d, level, family, r, first_H (None when no model is below), max_H (largest H tried),
        models (how many were tried), above (how many are "above" at z s.e.), best (lowest error) and best_stderr.
    """
    groups: dict[tuple[int, str, int], list[CrossingRow]] = {}
    for row in rows:
        groups.setdefault((row.d, row.family, row.r), []).append(row)
    table: list[dict[str, object]] = []
    for d in sorted({key[0] for key in groups} & set(levels)):
        for level in levels[d]:
            for family in FAMILIES:
                for r in sorted({key[2] for key in groups if key[0] == d and key[1] == family}, reverse=True):
                    members = sorted(groups[(d, family, r)], key=lambda row: (row.H, row.seed))
                    status = [level_status(row.error, row.stderr, level, z) for row in members]
                    below = [row.H for row, s in zip(members, status, strict=True) if s == "below"]
                    best = min(members, key=lambda row: row.error if math.isfinite(row.error) else math.inf)
                    table.append(
                        {
                            "d": d,
                            "level": level,
                            "family": family,
                            "r": r,
                            "first_H": min(below) if below else None,
                            "max_H": max(row.H for row in members),
                            "models": len(members),
                            "above": status.count("above"),
                            "best": best.error,
                            "best_stderr": best.stderr,
                        }
                    )
    return table


def trained_heads(d: int, factor: int) -> list[int]:
    """H = d, 2 d, 4 d, ... up to factor d: every rank 1 <= r <= d then has an integer width H r / d."""
    d = check_dimension(d)
    factor = check_int("factor", factor, minimum=1)
    return [d * 2**k for k in range(int(math.log2(factor)) + 1)]


def construction_heads(d: int, trained: Sequence[int]) -> list[int]:
    """Threshold counts of the full-rank construction: the trained grid below M, about M / 2, M - 1 and M."""
    M = 2 * d * d + 1
    return sorted({H for H in trained if H < M} | {(M + 1) // 2, M - 1, M})


def crossing_ranks(d: int) -> list[int]:
    """Ranks compared at dimension d: d (full), d - 1, d // 2 and 1, largest first."""
    return sorted({d, d - 1, max(1, d // 2), 1}, reverse=True)


def trained_config(d: int, r: int, H: int, seed: int, steps: int, batch_size: int) -> TrainConfig:
    """One-layer rank-r theory model with H heads and full value maps on the biased task (softmax, temperature 1),
    AdamW at lr = min(0.01, 0.25 / sqrt(H d)) (the tightness preset's rule, `experiments.sweeps.presets`)."""
    d = check_dimension(d)
    r = check_rank(r, d)
    H = check_int("H", H, minimum=1)
    if (H * r) % d:
        raise ValueError(f"H r must be a multiple of d = {d} (width H r / d), got H = {H}, r = {r}")
    return TrainConfig(
        task="biased",
        N=2,
        keys="orthonormal",
        model="theory",
        layers=1,
        value="full",
        d=d,
        rank=r,
        width=H * r // d,
        temperature=1.0,
        lr=min(0.01, 0.25 / math.sqrt(H * d)),
        steps=steps,
        batch_size=batch_size,
        log_every=max(50, steps // 30),
        checkpoint_every=steps,
        device="cpu",
        seed=seed,
    )


def trained_rows(
    d: int,
    ranks: Sequence[int],
    heads: Sequence[int],
    seeds: Sequence[int],
    steps: int,
    batch_size: int,
    eval_samples: int,
    run_root: Path,
) -> list[CrossingRow]:
    """Train every (r, H, seed) (resuming finished runs from ``run_root``) and score it on fresh contexts."""
    rows = []
    for r in ranks:
        for H in heads:
            for seed in seeds:
                config = trained_config(d, r, H, seed, steps, batch_size)
                run_dir = run_root / f"d{d}_r{r}_H{H}_s{seed}"
                start = time.perf_counter()
                result = train(config, run_dir, progress=False)
                score = evaluate_run(config, run_dir, samples=eval_samples)
                seconds = time.perf_counter() - start
                rows.append(
                    CrossingRow(
                        d,
                        "trained",
                        r,
                        H,
                        seed,
                        score["population_error"],
                        score["population_stderr"],
                        score["population_samples"],
                        result.final_loss,
                        result.steps,
                        seconds,
                    )
                )
                error, stderr = score["population_error"], score["population_stderr"]
                print(f"d={d} trained r={r} H={H} seed={seed}: {error:.5g} +- {stderr:.2g}", flush=True)
    return rows


def constructed_rows(
    d: int,
    ranks: Sequence[int],
    full_heads: Sequence[int],
    planes: Sequence[int],
    fit_samples: int,
    heldout_samples: int,
    seed: int,
) -> list[CrossingRow]:
    """Theorem 3's construction at ``full_heads`` thresholds and rank-r dictionaries at ``planes`` (least squares)."""
    start = time.perf_counter()
    rng = np.random.default_rng([seed, d])
    rows = separation_rows(d, ranks, full_heads, planes, fit_samples, heldout_samples, rng)
    seconds = (time.perf_counter() - start) / max(1, len(rows))  # the fits share one stream: the mean per model
    out = []
    for row in rows:
        family = "construction" if row.r == d else "constructed"
        out.append(
            CrossingRow(
                d, family, row.r, row.H, -1, row.heldout, row.heldout_stderr, row.n_heldout, row.in_sample, 0, seconds
            )
        )
        print(f"d={d} {family} r={row.r} H={row.H}: {row.heldout:.5g} +- {row.heldout_stderr:.2g}", flush=True)
    return out


def draw(
    rows: Sequence[CrossingRow], energies: Mapping[int, float], levels: Mapping[int, Sequence[float]], path: Path
) -> Path:
    """One panel per d: error (4 s.e. bars) against H; construction solid black, constructed dashed, trained dots
    (every seed) with their per-H minimum joined; the sawtooth energy and the levels as horizontal lines."""
    dims = sorted({row.d for row in rows})
    fig, axes = plt.subplots(1, len(dims), figsize=(5.6 * len(dims), 4.4), squeeze=False)
    floor = 1e-6  # where an error of (numerically) 0 is drawn on the log axis
    for ax, d in zip(axes[0], dims, strict=True):
        mine = [row for row in rows if row.d == d]
        ranks = sorted({row.r for row in mine}, reverse=True)
        colours = {r: f"C{i % 10}" for i, r in enumerate(ranks)}
        for family in FAMILIES:
            for r in ranks:
                part = sorted((row for row in mine if row.family == family and row.r == r), key=lambda row: row.H)
                if not part:
                    continue
                if family == "trained":
                    ax.scatter(
                        [row.H for row in part],
                        [max(row.error, floor) for row in part],
                        s=9,
                        color=colours[r],
                        alpha=0.5,
                    )
                    hs = sorted({row.H for row in part})
                    best = [min(row.error for row in part if row.H == H) for H in hs]
                    ax.plot(
                        hs,
                        [max(b, floor) for b in best],
                        color=colours[r],
                        marker="o",
                        ms=3,
                        lw=1,
                        label=f"trained r = {r}" + (" (full rank, no score bias)" if r == d else ""),
                    )
                    continue
                ax.errorbar(
                    [row.H for row in part],
                    [max(row.error, floor) for row in part],
                    yerr=[DEFAULT_Z * row.stderr for row in part],
                    color="black" if family == "construction" else colours[r],
                    ls="-" if family == "construction" else "--",
                    marker="s" if family == "construction" else "^",
                    ms=4,
                    capsize=2,
                    label="Theorem 3's construction (full rank, biases)"
                    if family == "construction"
                    else f"constructed r = {r} (LS, simple part free)",
                )
        ax.annotate("0 (exact) drawn at 1e-6", (min(row.H for row in mine), floor), fontsize=7, va="bottom")
        ax.axhline(energies[d], color="grey", ls=":", lw=1, label=f"sawtooth energy ||O'||^2 = {energies[d]:.3f}")
        for level in levels[d]:
            ax.axhline(level, color="red", lw=0.6, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("heads H")
        ax.set_ylabel("held-out error E ||f - F||^2 (4 s.e. bars)", fontsize=8)
        ax.set_title(
            f"d = {d} (M = {2 * d * d + 1}); red: levels {', '.join(f'{x:.3g}' for x in levels[d])}", fontsize=9
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle("Theorem 3 at reachable sizes: full rank vs rank r, error against H", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def read_rows(path: Path) -> list[CrossingRow]:
    """The rows of a biased_crossing.csv written by :func:`main` (to redraw or tabulate without recomputing)."""
    with open(path, newline="") as handle:
        return [
            CrossingRow(
                int(row["d"]),
                row["family"],
                int(row["r"]),
                int(row["H"]),
                int(row["seed"]),
                float(row["error"]),
                float(row["stderr"]),
                int(row["n_eval"]),
                float(row["fit"]),
                int(row["steps"]),
                float(row["seconds"]),
            )  # fmt: skip
            for row in csv.DictReader(handle)
        ]


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line ``PROG: error: MESSAGE`` and exit status 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one integer, got {text!r}")
    return values


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = _OneLineParser(prog="python -m experiments.figures.biased_crossing", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--dims", type=_int_list, default=[4, 6], help="comma-separated dimensions d (2 <= d <= 8)")
    parser.add_argument("--seeds", type=_int_list, default=[0, 1], help="training seeds")
    parser.add_argument("--steps", type=int, default=1500, help="optimiser steps per trained model")
    parser.add_argument("--batch-size", type=int, default=256, help="training batch size")
    parser.add_argument("--max-heads-factor", type=int, default=16, help="trained H = d, 2d, ..., up to this times d")
    parser.add_argument("--eval-samples", type=int, default=20_000, help="fresh contexts scoring each trained model")
    parser.add_argument("--fit-samples", type=int, default=50_000, help="contexts of each least-squares fit")
    parser.add_argument("--heldout-samples", type=int, default=20_000, help="fresh contexts scoring each fit")
    parser.add_argument("--planes", type=_int_list, default=[1, 2, 4], help="r-planes S of the rank-r dictionaries")
    parser.add_argument("--seed", type=int, default=0, help="seed of the constructions' random streams")
    parser.add_argument("--no-train", action="store_true", help="skip the trained models")
    parser.add_argument("--no-construct", action="store_true", help="skip the least-squares constructions")
    args = parser.parse_args(argv)
    try:
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
        for name in ("eval_samples", "fit_samples", "heldout_samples"):
            check_int(f"--{name.replace('_', '-')}", getattr(args, name), minimum=2)
        check_int("--seed", args.seed, minimum=0)
        if args.no_train and args.no_construct:
            raise ValueError("--no-train and --no-construct together leave nothing to measure")
        if args.out.exists() and not args.out.is_dir():
            raise ValueError(f"--out {args.out} exists and is not a directory")
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    use_file_backend()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows: list[CrossingRow] = []
    energies = {}
    for d in args.dims:
        energies[d] = oscillation_energy(d)
        ranks = crossing_ranks(d)
        heads = trained_heads(d, args.max_heads_factor)
        if not args.no_construct:
            rows += constructed_rows(
                d, ranks, construction_heads(d, heads), args.planes, args.fit_samples, args.heldout_samples, args.seed
            )
        if not args.no_train:
            rows += trained_rows(
                d, ranks, heads, args.seeds, args.steps, args.batch_size, args.eval_samples, args.out / "runs"
            )
    levels = {d: [FLOOR_LEVEL, 0.5 * energy] for d, energy in energies.items()}
    with open(args.out / "biased_crossing.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in dataclasses.fields(CrossingRow)])
        writer.writeheader()
        writer.writerows(dataclasses.asdict(row) for row in rows)
    table = reach_table(rows, levels)
    with open(args.out / "biased_crossing_reach.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    draw(rows, energies, levels, args.out / "biased_crossing.png")
    for entry in table:
        first = entry["first_H"]
        print(
            f"d={entry['d']} level={entry['level']:.4g} {entry['family']} r={entry['r']}: "
            + (f"below at H={first}" if first is not None else f"below nowhere up to H={entry['max_H']}")
            + f" ({entry['above']}/{entry['models']} above at {DEFAULT_Z:g} s.e.; best {entry['best']:.4g})"
        )
    for d, energy in energies.items():
        print(f"d={d}: sawtooth energy ||O'||^2 = {energy:.5f}")
    print(f"wall time {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
