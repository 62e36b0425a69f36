"""Where theory meets a finite training set (a study of ours, issue 38; docs/training.md, "Training data"): Theorem 2
bounds the population error of every H-head rank-r attention on D_2, not its training loss. One-layer rank-1 theory
models on Theorem 2's own task (nearest neighbour, N = 2, orthonormal keys, d = 8) are trained on a fixed set of K
batches of 64 (K = 1 ... 256, replayed every epoch of K steps) and on fresh batches, at two head counts; each run's
best epoch loss (its training loss on the set) and its population error (held-out samples) are set beside the
certified bound `theory.bounds.rank_lower_bound` (d, r, H). A small set lets the training loss fall below the bound;
the population error may not.

In this file, in order: the grids per scale, the claim, the preset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from experiments.analysis.records import Record, evaluation
from experiments.config import TrainConfig
from experiments.figures.finite_set import FINITE_SET
from experiments.sweeps.grading import Claim, Verdict, fmt, graded, not_evaluated
from experiments.sweeps.preset_kit import Preset, at_scales
from experiments.sweeps.run_specs import RunSpec

# --------------------------------------------------------------------------------------------------------------------
# Grids per scale.
# --------------------------------------------------------------------------------------------------------------------


SET_SIZES = (1, 4, 16, 64, 256)
"""K, batches in the fixed set (0 in a run's config: fresh batches every step, the population limit)."""
THEOREM2_SETTING: dict[str, Any] = {
    "task": "nearest",
    "N": 2,
    "keys": "orthonormal",
    "model": "theory",
    "layers": 1,
    "value": "full",
    "d": 8,
    "rank": 1,
    "batch_size": 64,
    "device": "cpu",
}
"""Theorem 2's setting at d = 8, rank 1 (bound 0.157 at H = 8, 0.143 at H = 32: trained models come near it, so a
finite set can carry the training loss below it; a pilot of 2048 to 8192 steps chose the sizes)."""
FRESH_EPOCH = 64
"""Steps per epoch (metrics row) of the fresh-batch runs (a fixed-set run's epoch is its K steps)."""


def _run(width: int, K: int, seed: int, steps: int) -> TrainConfig:
    return TrainConfig(
        **THEOREM2_SETTING,
        width=width,
        train_batches=K,
        log_every=K or FRESH_EPOCH,
        steps=steps,
        checkpoint_every=steps // 4,
        seed=seed,
    )


def _finite_set(scale: str) -> list[RunSpec]:
    """quick: H = 8, 1024 steps, one seed (the test's scale); cpu: H = 8 and 32, 8192 steps, two seeds."""
    if scale == "quick":
        return [_run(1, K, 0, 1024) for K in (*SET_SIZES, 0)]
    widths, seeds, steps = ((1, 4), (0, 1), 8192) if scale == "cpu" else ((1, 4, 16), (0, 1, 2), 32_768)
    return [_run(w, K, s, steps) for w in widths for K in (*SET_SIZES, 0) for s in seeds]


# --------------------------------------------------------------------------------------------------------------------
# Claim.
# --------------------------------------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _evaluated(record: Record) -> tuple[float, float, float, float] | None:
    """(best_loss, population error, its stderr, certified bound) of a finished, evaluated run; None otherwise."""
    found = evaluation(record)
    best = _number(record.get("best_loss"))
    if found is None or found.theorem2 is None or best is None:
        return None
    return best, found.population.error, found.population.stderr, found.theorem2.lower


Z = 4.0
"""Standard errors of the population estimate allowed below the bound before a run contradicts the theorem."""


def training_below_population_above(records: Sequence[Record]) -> Verdict:
    """finite-set: the training loss on a small set falls below Theorem 2's bound; the population error never does.

    Rule (stated in advance, before any run of this preset). Per run: training loss = best_loss (the lowest epoch
    mean on its set), population error = ``population_error`` with its standard error, bound = the certified lower
    end of rank_lower_bound(d, r, H) (``theorem2.bound_lower``).

    - Every run's population error + 4 s.e. must be at or above its bound (the theorem as a number); one run below
      is ``not reproduced`` (it would contradict Theorem 2, so it means a defect).
    - ``magnitude``: moreover, at every head count some set size K has the training loss of every seed below the
      bound (the bound does not hold for training losses);
    - ``direction``: the population errors hold, and at every head count the smallest K's training loss is below
      the fresh-batch runs' (memorisation shows), but no training loss is below the bound;
    - ``not evaluated``: no evaluated run.
    """
    by_cell: dict[tuple[int, int], list[tuple[float, float, float, float]]] = {}
    for r in records:
        values = _evaluated(r)
        if values is not None:
            by_cell.setdefault((int(r["heads"]), int(r.get("train_batches") or 0)), []).append(values)
    if not by_cell:
        return not_evaluated("no evaluated runs")
    contradictions = [
        f"H={H} K={K or 'fresh'}: population {fmt(p)} +- {s:.2g} < bound {fmt(b)}"
        for (H, K), runs in sorted(by_cell.items())
        for _, p, s, b in runs
        if p + Z * s < b
    ]
    parts, beaten, ordered = [], [], []
    for H in sorted({H for H, _ in by_cell}):
        sizes = sorted(K for h, K in by_cell if h == H and K > 0)
        bound = by_cell[(H, sizes[0] if sizes else 0)][0][3]
        below = [K for K in sizes if all(t < b for t, _, _, b in by_cell[(H, K)])]
        beaten.append(bool(below))
        fresh = by_cell.get((H, 0))
        if sizes and fresh:
            ordered.append(max(t for t, *_ in by_cell[(H, sizes[0])]) < min(t for t, *_ in fresh))
        cells = ", ".join(
            f"K={K or 'fresh'}: train {fmt(max(t for t, *_ in runs))}, population {fmt(max(p for _, p, _, _ in runs))}"
            for K, runs in sorted(((K, v) for (h, K), v in by_cell.items() if h == H), key=lambda kv: kv[0] or math.inf)
        )
        parts.append(
            f"H={H} (bound {fmt(bound)}): training loss below the bound at K = {', '.join(map(str, below)) or 'none'}; "
            f"{cells} (worst seed)"
        )
    text = "; ".join(parts)
    if contradictions:
        return graded(False, False, "population below its bound: " + "; ".join(contradictions) + "; " + text)
    return graded(all(ordered) or all(beaten), all(beaten), text)


CLAIM = Claim(
    "a finite training set carries the training loss below Theorem 2's bound, never the population error",
    training_below_population_above,
    "every population error + 4 s.e. at or above its bound, and at every H some K with every seed's training loss "
    "below the bound",
    "every population error + 4 s.e. at or above its bound, and the smallest set's training loss below the fresh "
    "runs' at every H",
)


# --------------------------------------------------------------------------------------------------------------------
# Preset.
# --------------------------------------------------------------------------------------------------------------------


PRESET = Preset(
    name="finite-set",
    description=(
        "Training loss and population error against the size of a fixed training set, beside Theorem 2's bound "
        "(one-layer rank-1 theory models on D_2, d = 8)"
    ),
    figure=FINITE_SET,
    scales=at_scales(_finite_set),
    paper=(),
    expected={
        "quick": "6 runs x 1024 steps, under a minute on 2 cores",
        "cpu": "24 runs x 8192 steps, ~10 s a run on an idle core (pilot), a few minutes",
        "paper": "54 runs x 32768 steps",
    },
    rule=CLAIM,
)


PRESETS = (PRESET,)
"""This module's presets, in the order `experiments.studies` lists them."""
