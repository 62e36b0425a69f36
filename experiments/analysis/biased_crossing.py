"""Theorem 3 at reachable sizes: error against H for full rank and rank r < d, constructed and trained (issue 19).

docs/biased.md ("Measured: error against H, full rank vs rank r"). Three families of one-layer models on the biased
nearest-neighbour task (N = 2, D_2 keys, Gaussian query, the default bias grid of M = 2 d^2 + 1 thresholds):

- ``construction``: Theorem 3's full-rank heads Q = K = I_d, hardmax, score biases on H evenly spaced thresholds
  (H = M: the construction itself, exact), output weights by least squares with the simple part granted
  (`experiments.analysis.biased_separation`);
- ``constructed``: rank-r dictionaries (aligned heads on S random r-planes at every threshold, plus as many random
  rank-r heads; H = 2 S M), least squares the same way (same module);
- ``trained``: one-layer theory models (`model="theory"`, full value maps, softmax at temperature 1, no score bias:
  the trainable model has none) of rank r and H heads, AdamW from a random start (`experiments.training.loop.train`,
  each in its own run directory, so a re-run resumes), scored by the one evaluation recipe
  (`experiments.training.evaluation.evaluate_run`). Every rank including r = d (reference).

"Reaching" an error level at 4 standard errors: the upper end mean + 4 s.e. is at or below it; "missing" it: the lower
end mean - 4 s.e. is above it; otherwise undecided (`level_status`). For each d and level the table says at which H
(the first on the grid) each family reaches the level, or that it reached it nowhere on the grid (`reach_table`).

`crossing_study` computes all of it and writes the rows; ``attnrank figure biased-crossing`` runs it and draws
`experiments.figures.biased_crossing.draw` (docs/biased.md).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from experiments.analysis.biased_separation import oscillation_energy, separation_rows
from experiments.config import TrainConfig
from experiments.training.evaluation import evaluate_run
from experiments.training.head_count_runs import head_count_run
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
    AdamW at lr = min(0.01, 0.25 / sqrt(H d)) (the tightness preset's rule, `experiments.training.head_count_runs`)."""
    d = check_dimension(d)
    r = check_rank(r, d)
    H = check_int("H", H, minimum=1)
    return head_count_run(
        task="biased",
        d=d,
        r=r,
        H=H,
        temperature=1.0,
        seed=seed,
        steps=steps,
        batch_size=batch_size,
        log_every=max(50, steps // 30),
        checkpoint_every=steps,
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
                print(
                    f"d={d} trained r={r} H={H} seed={seed}: {error:.5g} +- {stderr:.2g}", file=sys.stderr, flush=True
                )
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
        print(
            f"d={d} {family} r={row.r} H={row.H}: {row.heldout:.5g} +- {row.heldout_stderr:.2g}",
            file=sys.stderr,
            flush=True,
        )
    return out


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


def write_rows(rows: Sequence[CrossingRow], path: Path) -> Path:
    """Write the rows as ``biased_crossing.csv`` (one row per model; :func:`read_rows` reads it back)."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in dataclasses.fields(CrossingRow)])
        writer.writeheader()
        writer.writerows(dataclasses.asdict(row) for row in rows)
    return path


@dataclasses.dataclass(frozen=True)
class CrossingStudy:
    """What `crossing_study` measured: the rows, each d's sawtooth energy and levels, and the reach table."""

    rows: list[CrossingRow]
    energies: dict[int, float]
    levels: dict[int, list[float]]
    table: list[dict[str, object]]


def crossing_study(
    dims: Sequence[int],
    *,
    seeds: Sequence[int],
    steps: int,
    batch_size: int,
    max_heads_factor: int,
    eval_samples: int,
    fit_samples: int,
    heldout_samples: int,
    planes: Sequence[int],
    seed: int,
    train_models: bool,
    construct: bool,
    run_root: Path,
) -> CrossingStudy:
    """Every family at every d (module docstring): constructions fitted, models trained under ``run_root`` (resumed
    when already there), the levels (the floor level and half the sawtooth energy) and the reach table."""
    rows: list[CrossingRow] = []
    energies: dict[int, float] = {}
    for d in dims:
        energies[d] = oscillation_energy(d)
        ranks = crossing_ranks(d)
        heads = trained_heads(d, max_heads_factor)
        if construct:
            rows += constructed_rows(d, ranks, construction_heads(d, heads), planes, fit_samples, heldout_samples, seed)
        if train_models:
            rows += trained_rows(d, ranks, heads, seeds, steps, batch_size, eval_samples, run_root)
    levels = {d: [FLOOR_LEVEL, 0.5 * energy] for d, energy in energies.items()}
    return CrossingStudy(rows, energies, levels, reach_table(rows, levels))
