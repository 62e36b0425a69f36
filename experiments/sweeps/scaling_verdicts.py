"""The scaling verdict of each rule of the long scale (`experiments.studies.SCALING_RULES`): graded at every
measured budget, fitted per cell (`experiments.analysis.compute_scaling`) and projected beyond the ladder.

Verdicts: ``reaches`` (the rule's magnitude holds at a measured budget: the smallest such), ``projected`` (on the
fitted curves it holds from some n beyond the ladder, up to `PROJECTION_LIMIT` times the paper's budget),
``flattens`` (on the fitted curves it does not hold by then: the curves level off before the rule is met, so a loss
floor, not the budget, keeps the claim from its magnitude) or ``not evaluated`` (a cell has too few runs to fit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from experiments.analysis.compute_scaling import (
    BOOTSTRAP_DRAWS,
    PAPER_SAMPLES,
    PROJECTION_LIMIT,
    SCALING_INTERVAL,
    PowerLawFit,
    bootstrap_interval,
    finished_points,
    fit_power_law,
)
from experiments.analysis.records import Record
from experiments.sweeps.grading import Grade, ScalingRule, Verdict, matches, scaling_rule_at_budget


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
        "worse": fit_power_law(*finished_points(worse_runs)),
        "better": fit_power_law(*finished_points(better_runs)),
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
        low, high = bootstrap_interval(curve(draws, paper)[:, 0])
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
    low, high = bootstrap_interval(draws)
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
    share = float(np.mean(np.isfinite(draws)))
    result.kind = "flattens"
    result.text = (
        f"flattens: on the fitted curves the rule does not hold by {PROJECTION_LIMIT:g}x the paper's budget "
        f"(fitted floors {worse_fit.floor:.3g} worse vs {better_fit.floor:.3g} better; {share:.0%} of the bootstrap "
        "draws cross), so more steps of this set-up do not close the gap"
    )
    return result


def scaling_rows(verdict: ScalingVerdict) -> list[dict[str, Any]]:
    """Tidy rows of a verdict for tables and CSV: one per measured budget."""
    return [
        {"rule": verdict.rule.name, "steps": steps, "grade": grade.value, "explanation": text}
        for steps, grade, text in verdict.budgets
    ]
