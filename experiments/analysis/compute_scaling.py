"""Compute scaling of the multi-layer claims: how a deciding cell's loss moves with the training budget, a fitted law,
its projection to the paper's budget, and the scaling verdict of each rule (`experiments.sweeps.claims.SCALING_RULES`).

Data: the long scale's runs (`experiments.sweeps.presets.budget_ladder`): every deciding cell trained at several
budgets, each budget a run with its own warm-up + cosine schedule. A run contributes one point (n, L): n = steps x
batch size (samples seen), L = its best_loss (the paper's metric, the lowest epoch-mean training loss).

The law, fitted per cell to all of its runs (every seed of every budget):

    L(n) = floor + a n^(-b),   floor >= 0, a >= 0, 0 < b <= 2,

by least squares on log L (losses span decades; a multiplicative error model), with scipy's bounded trust-region
solver. Its covariance is s^2 (J^T J)^-1 at the optimum (s^2 the residual variance on m - 3 degrees of freedom, J the
Jacobian of the log residuals); a cell with fewer than 4 runs is not fitted. Projections and crossing budgets carry a
`SCALING_INTERVAL` interval from a parametric bootstrap: parameter vectors drawn from the normal law of the estimate
(clipped to the bounds), the projected quantity computed for each. With 4 to 7 points and 3 parameters these
intervals are wide, and they say so.

The verdict of a rule (`scaling_verdict`): ``reaches`` (the rule's magnitude holds at a measured budget: the smallest
such), ``projected`` (on the fitted curves it holds from some n beyond the ladder, up to `PROJECTION_LIMIT` times the
paper's budget), ``flattens`` (it never holds on the fitted curves, and their floors alone fail it: a loss floor,
not a budget, keeps the claim from its magnitude) or ``not evaluated`` (a cell has too few runs to fit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from experiments.analysis.best_seed import Record
from experiments.sweeps.claims import (
    PAPER_SAMPLES,
    SCALING_INTERVAL,
    Grade,
    ScalingRule,
    Verdict,
    matches,
    scaling_rule_at_budget,
)

PROJECTION_LIMIT = 1000.0
"""Crossings are searched up to this many times the paper's budget (beyond it a projection means nothing)."""
BOOTSTRAP_DRAWS = 2000
MIN_RUNS_TO_FIT = 4
EXPONENT_BOUNDS = (1e-3, 2.0)


def samples_seen(record: Record) -> int:
    """Samples a run trained on: steps x batch size."""
    return int(record["steps"]) * int(record["batch_size"])


def _finished_points(records: Sequence[Record]) -> tuple[np.ndarray, np.ndarray]:
    points = [
        (samples_seen(r), float(r["best_loss"]))
        for r in records
        if r.get("status") == "finished" and isinstance(r.get("best_loss"), (int, float)) and r["best_loss"] > 0
    ]
    n = np.array([p[0] for p in points], dtype=float)
    loss = np.array([p[1] for p in points], dtype=float)
    return n, loss


@dataclass(frozen=True)
class PowerLawFit:
    """L(n) = floor + amplitude n^(-exponent), fitted to a cell's runs (module docstring).

    Attributes:
        floor, amplitude, exponent: the estimate. covariance: (3, 3) of (floor, amplitude, exponent).
        runs: points fitted. rms_log_residual: root-mean-square residual of log L.
    """

    floor: float
    amplitude: float
    exponent: float
    covariance: np.ndarray
    runs: int
    rms_log_residual: float

    def __call__(self, n: np.ndarray | float) -> np.ndarray:
        """The fitted loss at n samples."""
        return self.floor + self.amplitude * np.asarray(n, dtype=float) ** (-self.exponent)

    def draws(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """(count, 3) parameter vectors from the estimate's normal law, clipped to the bounds of the fit."""
        mean = np.array([self.floor, self.amplitude, self.exponent])
        covariance = self.covariance if np.all(np.isfinite(self.covariance)) else np.zeros((3, 3))
        sample = rng.multivariate_normal(mean, covariance, size=count, method="eigh")  # (count, 3)
        sample[:, 0] = np.clip(sample[:, 0], 0.0, None)
        sample[:, 1] = np.clip(sample[:, 1], 0.0, None)
        sample[:, 2] = np.clip(sample[:, 2], *EXPONENT_BOUNDS)
        return sample


def fit_power_law(n: np.ndarray, loss: np.ndarray) -> PowerLawFit | None:
    """The law's least-squares fit on log L (module docstring), or None with fewer than `MIN_RUNS_TO_FIT` points."""
    if len(n) < MIN_RUNS_TO_FIT:
        return None
    # Parameters scaled for the solver: n in units of its largest value, so the amplitude is a loss.
    scale = float(n.max())
    x = n / scale

    def residuals(theta: np.ndarray) -> np.ndarray:
        floor, amplitude, exponent = theta
        return np.log(floor + amplitude * x ** (-exponent) + 1e-300) - np.log(loss)

    start = np.array([0.5 * loss.min(), max(loss.max() - 0.5 * loss.min(), 1e-6), 0.5])
    solution = least_squares(
        residuals,
        start,
        bounds=([0.0, 0.0, EXPONENT_BOUNDS[0]], [np.inf, np.inf, EXPONENT_BOUNDS[1]]),
        method="trf",
        x_scale="jac",
    )
    floor, amplitude_scaled, exponent = solution.x
    dof = max(len(n) - 3, 1)
    variance = float(np.sum(solution.fun**2)) / dof
    jacobian = solution.jac  # (m, 3)
    try:
        covariance_scaled = variance * np.linalg.pinv(jacobian.T @ jacobian)
    except np.linalg.LinAlgError:
        covariance_scaled = np.full((3, 3), np.nan)
    # Back to n in samples: a_scaled x^-b = a_scaled scale^b n^-b, so a = a_scaled scale^b.
    amplitude = amplitude_scaled * scale**exponent
    # Delta method for the change of variables (floor, a_scaled, b) -> (floor, a, b).
    transform = np.eye(3)
    transform[1, 1] = scale**exponent
    transform[1, 2] = amplitude * math.log(scale)
    covariance = transform @ covariance_scaled @ transform.T
    rms = float(np.sqrt(np.mean(solution.fun**2)))
    return PowerLawFit(float(floor), float(amplitude), float(exponent), covariance, len(n), rms)


def _interval(values: np.ndarray) -> tuple[float, float]:
    tail = (1.0 - SCALING_INTERVAL) / 2.0
    finite = values[np.isfinite(values)]
    if len(finite) < len(values) * (1 - tail):  # more than the tail is infinite: the upper end is infinite
        low = float(np.quantile(np.where(np.isfinite(values), values, np.inf), tail))
        return low, math.inf
    return float(np.quantile(values, tail)), float(np.quantile(values, 1.0 - tail))


def _holds(rule: ScalingRule, worse: np.ndarray, better: np.ndarray) -> np.ndarray:
    """Whether the rule's magnitude holds for fitted losses (arrays broadcast together)."""
    ok = worse >= rule.ratio * better
    if rule.ceiling is not None:
        ok = ok & (better <= rule.ceiling)
    return ok & (worse > better)


@dataclass
class ScalingVerdict:
    """A rule's verdict along the ladder (module docstring).

    Attributes:
        rule: the rule. kind: "reaches", "projected", "flattens" or "not evaluated". text: one line with the numbers.
        budgets: (steps, grade, explanation) at every measured budget.
        fits: cell ("worse" / "better") -> its fit (None when not fitted).
        crossing_samples: the projected n from which the rule holds (None unless "projected"), with its interval.
        at_paper: cell -> (fitted loss at the paper's budget, interval low, interval high).
    """

    rule: ScalingRule
    kind: str
    text: str
    budgets: list[tuple[int, Grade, str]] = field(default_factory=list)
    fits: dict[str, PowerLawFit | None] = field(default_factory=dict)
    crossing_samples: tuple[float, float, float] | None = None
    at_paper: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def _crossing(rule: ScalingRule, worse: np.ndarray, better: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Per parameter draw (rows), the first grid n where the rule holds, inf when it never does: (draws,)."""
    ok = _holds(rule, worse, better)  # (draws, G)
    first = np.argmax(ok, axis=1)
    return np.where(ok.any(axis=1), grid[first], np.inf)


def scaling_verdict(rule: ScalingRule, records: Sequence[Record], seed: int = 0) -> ScalingVerdict:
    """The rule's scaling verdict on a long sweep's records (both of its cells, every budget)."""
    worse_runs = [r for r in records if matches(r, rule.worse)]
    better_runs = [r for r in records if matches(r, rule.better)]
    steps = sorted({int(r["steps"]) for r in worse_runs} & {int(r["steps"]) for r in better_runs})
    budgets = []
    for budget in steps:
        subset = [r for r in worse_runs + better_runs if int(r["steps"]) == budget]
        verdict: Verdict = scaling_rule_at_budget(rule, subset)
        budgets.append((budget, verdict.grade, verdict.explanation))
    fits = {
        "worse": fit_power_law(*_finished_points(worse_runs)),
        "better": fit_power_law(*_finished_points(better_runs)),
    }
    result = ScalingVerdict(rule, "not evaluated", "", budgets, fits)
    reached = [b for b, grade, _ in budgets if grade is Grade.MAGNITUDE]
    batch = int((worse_runs + better_runs)[0]["batch_size"]) if worse_runs + better_runs else 1
    if fits["worse"] is None or fits["better"] is None:
        result.kind = "reaches" if reached else "not evaluated"
        result.text = (
            f"reaches magnitude at {reached[0]:,} steps" if reached else "too few runs to fit (needs 4 per cell)"
        )
        return result
    rng = np.random.default_rng(seed)
    worse_fit, better_fit = fits["worse"], fits["better"]
    worse_draws, better_draws = worse_fit.draws(BOOTSTRAP_DRAWS, rng), better_fit.draws(BOOTSTRAP_DRAWS, rng)

    def curve(params: np.ndarray, n: np.ndarray) -> np.ndarray:
        return params[:, :1] + params[:, 1:2] * n[None, :] ** (-params[:, 2:3])  # (draws, len(n))

    paper = np.array([float(PAPER_SAMPLES)])
    for name, fit, draws in (("worse", worse_fit, worse_draws), ("better", better_fit, better_draws)):
        low, high = _interval(curve(draws, paper)[:, 0])
        result.at_paper[name] = (float(fit(PAPER_SAMPLES)), low, high)
    if reached:
        result.kind = "reaches"
        result.text = f"reaches magnitude at {reached[0]:,} steps ({reached[0] * batch:,} samples)"
        return result
    measured = max(steps) * batch if steps else 1
    grid = np.geomspace(measured, PROJECTION_LIMIT * PAPER_SAMPLES, 400)  # (G,)
    point_worse, point_better = worse_fit(grid)[None, :], better_fit(grid)[None, :]  # (1, G)
    point = _crossing(rule, point_worse, point_better, grid)[0]
    draws = _crossing(rule, curve(worse_draws, grid), curve(better_draws, grid), grid)  # (draws,)
    low, high = _interval(draws)
    if math.isfinite(point):
        result.kind = "projected"
        result.crossing_samples = (float(point), low, high)
        steps_needed = point / batch
        result.text = (
            f"projected to reach magnitude at {steps_needed:,.0f} steps ({point:.3g} samples; "
            f"{int(SCALING_INTERVAL * 100)}% interval {low:.3g} to {high:.3g} samples; the paper trains "
            f"{PAPER_SAMPLES:.3g})"
        )
        return result
    floors_hold = bool(_holds(rule, np.array([worse_fit.floor]), np.array([better_fit.floor]))[0])
    share = float(np.mean(np.isfinite(draws)))
    result.kind = "flattens" if not floors_hold else "not evaluated"
    floor_text = f"fitted floors {worse_fit.floor:.3g} (worse) vs {better_fit.floor:.3g} (better)"
    if result.kind == "flattens":
        result.text = (
            f"flattens: {floor_text} fail the rule, so more steps of this set-up do not close the gap "
            f"({share:.0%} of the bootstrap draws cross by {PROJECTION_LIMIT:g}x the paper's budget)"
        )
    else:
        result.text = (
            f"undetermined: the floors pass the rule but the fitted curves do not cross by {PROJECTION_LIMIT:g}x"
        )
    return result


def scaling_rows(verdict: ScalingVerdict) -> list[dict[str, Any]]:
    """Tidy rows of a verdict for tables and CSV: one per measured budget."""
    return [
        {"rule": verdict.rule.name, "steps": steps, "grade": grade.value, "explanation": text}
        for steps, grade, text in verdict.budgets
    ]
