"""How tight is Theorem 2: the band between the certified bound and the best one-layer rank-r attention found.

Computations for the ``tightness`` preset (docs/bounds.md, "How tight is the bound"), from its sweep records (one
run's spec fields merged with its metrics, `experiments.reporting.sweep_report.sweep_records`):

- per cell (d, r, H): the certified lower end of ``rank_lower_bound(d, r, H)``; the best trained one-layer model (the
  lowest fresh Monte Carlo error over seeds, with its standard error and the spread over seeds); the least-squares
  construction (random rank-r heads, `constructions.random_rank_heads`); for r = 1 Theorem 5's two-layer majority
  vote with the same H (`theory.majority_vote_error`, exact); the best found (trained or constructed) and its ratio to
  the bound;
- the ratio's trend in H (least-squares slope of log ratio against log H);
- head counts for a target error: ``min_heads`` (the fewest heads the bound allows) against the smallest H of the
  grid at which something found reaches the target (mean + 4 s.e. <= target);
- the training curves (``metrics.csv`` of each run directory, when present) and how much each best seed still gained
  in its last quarter of steps; the plateau controls (one run per d at H = 64 with four times the steps).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.analysis.records import Record, evaluation
from theory.bounds import min_heads, rank_lower_bound
from theory.majority_vote_error import majority_vote_error
from theory.monte_carlo import DEFAULT_Z

Curve = list[tuple[int, float]]
"""A training curve: (step, epoch-mean training loss) rows of a run's metrics.csv."""


@dataclass(frozen=True)
class TrainedRun:
    """One trained one-layer run: its hash, steps, seed and fresh error (mean, standard error)."""

    hash: str
    steps: int
    seed: int
    error: float
    stderr: float


@dataclass(frozen=True)
class TightnessCell:
    """One (d, r, H) of the tightness preset.

    Attributes:
        d, r, H: dimension, rank, heads.
        bound: certified lower end of rank_lower_bound(d, r, H).
        trained: the best seed of the main schedule (lowest fresh error), or None; seeds: all of its seeds.
        construction: (fresh error, standard error) of the least-squares construction, or None.
        majority_vote: Theorem 5's two-layer error with H voting heads (r = 1 only), else None.
        controls: trained runs with more steps than the main schedule (the plateau controls).
    """

    d: int
    r: int
    H: int
    bound: float
    trained: TrainedRun | None
    seeds: tuple[TrainedRun, ...]
    construction: tuple[float, float] | None
    majority_vote: float | None
    controls: tuple[TrainedRun, ...] = ()

    @property
    def best_found(self) -> tuple[float, float, str] | None:
        """(error, standard error, "trained" or "construction") of the lower of the two, or None."""
        options = []
        if self.trained is not None:
            options.append((self.trained.error, self.trained.stderr, "trained"))
        if self.construction is not None:
            options.append((*self.construction, "construction"))
        return min(options) if options else None

    @property
    def ratio(self) -> float:
        """best found / bound (inf when the bound is 0, nan when nothing was found)."""
        best = self.best_found
        if best is None:
            return math.nan
        return best[0] / self.bound if self.bound > 0 else math.inf


def tightness_cells(records: Sequence[Record]) -> list[TightnessCell]:
    """The cells of a tightness sweep, sorted by (d, r, H).

    Args:
        records: sweep records (finished trained runs and least-squares constructions with a ``theorem2`` bound).

    Returns:
        one TightnessCell per (d, r, H) that has a finished run.
    """
    trained: dict[tuple[int, int, int], list[TrainedRun]] = {}
    constructions: dict[tuple[int, int, int], tuple[float, float]] = {}
    for record in records:
        found = evaluation(record)
        if found is None or found.theorem2 is None:
            continue
        bound, population = found.theorem2, found.population
        key = (bound.d, bound.r, bound.H)
        if record.get("kind") == "least-squares-heads":
            candidate = (population.error, population.stderr)
            constructions[key] = min(constructions.get(key, candidate), candidate)
        else:
            run = TrainedRun(
                str(record.get("hash", "")),
                int(record["steps"]),
                int(record["seed"]),
                population.error,
                population.stderr,
            )
            trained.setdefault(key, []).append(run)
    cells = []
    for key in sorted(set(trained) | set(constructions)):
        d, r, H = key
        runs = trained.get(key, [])
        main_steps = min((run.steps for run in runs), default=0)  # the schedule; longer runs are plateau controls
        main = tuple(sorted((run for run in runs if run.steps == main_steps), key=lambda run: run.seed))
        controls = tuple(run for run in runs if run.steps > main_steps)
        cells.append(
            TightnessCell(
                d=d,
                r=r,
                H=H,
                bound=rank_lower_bound(d, r, H).lower,
                trained=min(main, key=lambda run: run.error) if main else None,
                seeds=main,
                construction=constructions.get(key),
                majority_vote=majority_vote_error(d, H) if r == 1 else None,
                controls=controls,
            )
        )
    return cells


def ratio_slope(cells: Sequence[TightnessCell]) -> float:
    """Least-squares slope of log(best found / bound) against log H over cells with a positive bound (nan if < 2).

    A slope s means the ratio grows like H^s along the cells (one (d, r) at a time).
    """
    points = [(math.log(c.H), math.log(c.ratio)) for c in cells if c.bound > 0 and math.isfinite(c.ratio)]
    if len(points) < 2:
        return math.nan
    x, y = np.asarray(points).T  # (P,), (P,)
    return float(np.polyfit(x, y, 1)[0])


@dataclass(frozen=True)
class TargetHeads:
    """Head counts for a target error eps at one (d, r).

    Attributes:
        eps: the target. certified: min_heads(d, r, eps), the fewest heads the bound allows (None beyond its range).
        found: the smallest H of the grid at which a model found reaches eps (error + 4 s.e. <= eps), or None.
        largest_tried: the largest H of the grid.
    """

    eps: float
    certified: int | None
    found: int | None
    largest_tried: int


def heads_for_target(cells: Sequence[TightnessCell], eps: float) -> TargetHeads:
    """min_heads against the smallest H found reaching ``eps`` (cells of one (d, r))."""
    if not cells:
        raise ValueError("cells must hold at least one cell of one (d, r)")
    d, r = cells[0].d, cells[0].r
    if any((c.d, c.r) != (d, r) for c in cells):
        raise ValueError("cells must all have the same (d, r)")
    try:
        certified: int | None = min_heads(d, r, eps)
    except ValueError:
        certified = None
    reached = []
    for c in cells:
        best = c.best_found
        if best is not None and best[0] + DEFAULT_Z * best[1] <= eps:
            reached.append(c.H)
    return TargetHeads(eps, certified, min(reached) if reached else None, max(c.H for c in cells))


def last_quarter_gain(curve: Curve) -> float:
    """Relative drop of the epoch-mean loss over the last quarter of steps: (L(3T/4) - L(T)) / L(T) (nan if short).

    L(3T/4) is the first logged epoch at or after three quarters of the run. With the cosine schedule part of this
    drop is the learning rate's decay averaging out gradient noise, so it bounds, rather than measures, what more
    steps of the same schedule would still find (the plateau controls measure that directly).
    """
    if len(curve) < 4:
        return math.nan
    last_step, last = curve[-1]
    three_quarters = next(loss for step, loss in curve if step >= 0.75 * last_step)
    return (three_quarters - last) / last if last > 0 else math.nan
