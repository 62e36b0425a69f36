"""One run's training curve, fitted and projected: where a prefix of a long schedule is heading.

A run that trains the first S steps of a longer schedule (``TrainConfig.schedule_steps``) has a curve of epoch-mean
training losses. After its warm-up, the law of `experiments.analysis.compute_scaling`,

    L(n) = floor + a n^(-b),   n = step x batch size (samples seen),

is fitted to the curve's epochs (least squares on log L, the same bounded solver) and evaluated at the schedule's end,
with a `SCALING_INTERVAL` interval from the same parametric bootstrap (seeded, so a report prints the same digits
every time).

What the projection is and is not. It extends the prefix's own trend at the prefix's learning rate: the rest of the
schedule also decays the learning rate (cosine to 0), which usually lowers the loss further, and a loss that drops
suddenly later (a phase change, as deep farthest-point models show) is invisible in the prefix. So the projection is a
trend, not a prediction; the report prints it beside the measured best loss and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.analysis.compute_scaling import (
    BOOTSTRAP_DRAWS,
    MIN_RUNS_TO_FIT,
    PowerLawFit,
    bootstrap_interval,
    fit_power_law,
)

PROJECTION_SEED = 0
"""Seed of the bootstrap draws (a fixed seed: the interval is part of a report that must regenerate exactly)."""


@dataclass(frozen=True)
class CurveProjection:
    """A curve's fit after the warm-up and its value at the schedule's end.

    Attributes:
        last_step: the curve's last step. epochs: epochs fitted (those after the warm-up). fit: the law, or None
        with fewer than `MIN_RUNS_TO_FIT` epochs. at_end: (fitted loss, interval low, interval high) at
        ``end_step``, or None. end_step: the schedule's last step.
    """

    last_step: int
    epochs: int
    fit: PowerLawFit | None
    end_step: int
    at_end: tuple[float, float, float] | None


def project_curve(
    curve: Sequence[tuple[int, float]], batch_size: int, warmup_steps: int, end_step: int
) -> CurveProjection:
    """Fit the epochs of ``curve`` after ``warmup_steps`` and evaluate the fit at ``end_step``.

    Args:
        curve: (step, epoch-mean loss) rows in step order (`SweepDirectory.run_curve`).
        batch_size: samples per step (n = step x batch size).
        warmup_steps: epochs ending at or before this step are left out (the loss there follows the rising rate).
        end_step: the schedule's last step (100k for the paper's fig1).
    """
    kept = [(s, v) for s, v in curve if s > warmup_steps and math.isfinite(v) and v > 0]
    last = curve[-1][0] if curve else 0
    n = np.array([s * batch_size for s, _ in kept], dtype=float)
    loss = np.array([v for _, v in kept], dtype=float)
    fit = fit_power_law(n, loss) if len(kept) >= MIN_RUNS_TO_FIT else None
    if fit is None:
        return CurveProjection(last, len(kept), None, end_step, None)
    at = float(end_step * batch_size)
    draws = fit.draws(BOOTSTRAP_DRAWS, np.random.default_rng(PROJECTION_SEED))  # (draws, 3)
    values = draws[:, 0] + draws[:, 1] * at ** (-draws[:, 2])  # (draws,)
    low, high = bootstrap_interval(values)
    return CurveProjection(last, len(kept), fit, end_step, (float(fit(at)), low, high))
