"""Theorem 3's tables: achievable error against the value-norm budget for rank-r dictionaries, and the smoothing floor.

For each (d, r): a dictionary of rank-r heads (constructions.biased_dictionary.standard_dictionary), its empirical Gram
statistics on n Monte Carlo contexts, the certified best error under each budget B (Frobenius budget
sum_h ||V_h||_F^2 = d sum_h a_h^2 <= B, which contains the paper's d H max ||V_h||^2 <= B), the held-out error of those
weights on fresh contexts, and the rigorous smoothing floor at the solution's S = sum_h |a_h| (:func:`budget_table`).
Also the floor's threshold budget S*^2 (where the floor drops below 1/40) against d - r, with the fitted exponent c
(:func:`threshold_table`), and the budget thresholds of richer dictionaries (:func:`dictionary_threshold_table`).
`experiments.figures.biased` draws and writes these rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from constructions.biased_dictionary import (
    HeadDictionary,
    aligned_heads,
    budget_threshold,
    concatenate,
    gram_statistics,
    heldout_error,
    random_heads,
    solve_budget,
    standard_dictionary,
)
from theory.biased_target import bias_grid, population_moments
from theory.smoothing_bound import budget_exponent, error_floor_from_norm_sum, threshold_norm_sum
from theory.validation import check_dimension, check_int, check_sample_count

FLOOR_LEVEL_ABSOLUTE = 1.0 / 40.0
"""The constant error reported for Theorem 3 by one source; thresholds are where the floor drops below it."""


def budget_table(
    d: int, ranks: list[int], budgets: np.ndarray, n_samples: int, seed: int, n_heldout: int | None = None
) -> list[dict[str, Any]]:
    """Rows (d, r, H, budget, primal, dual, heldout, heldout_se, floor) for each rank and budget.

    Args:
        d: ambient dimension (>= 2).
        ranks: ranks 1 <= r <= d.
        budgets: (k,) Frobenius budgets.
        n_samples: training sample size of the Gram statistics.
        seed: base seed.
        n_heldout: held-out sample size (default n_samples).

    Returns:
        list of row dicts.
    """
    d = check_dimension(d)
    n_samples = check_sample_count("n_samples", n_samples)
    n_heldout = n_samples if n_heldout is None else check_int("n_heldout", n_heldout, minimum=2)
    grid = bias_grid(d)
    rows: list[dict[str, Any]] = []
    for r in ranks:
        rng = np.random.default_rng([seed, d, r])
        dictionary = standard_dictionary(d, r, grid, rng)
        stats = gram_statistics(dictionary, grid, n_samples, rng)
        heldout_rng = np.random.default_rng([seed, d, r, 1])
        for budget in budgets:
            solution = solve_budget(stats, float(budget), norm="frobenius")
            held = heldout_error(dictionary, grid, solution, n_heldout, heldout_rng)
            norm_sum = float(np.sum(np.abs(solution.weights)))
            rows.append(
                {
                    "d": d,
                    "r": r,
                    "H": dictionary.heads,
                    "budget": float(budget),
                    "primal": solution.primal,
                    "dual": solution.dual,
                    "heldout": held.mean,
                    "heldout_se": held.stderr,
                    "norm_sum": norm_sum,
                    "floor": error_floor_from_norm_sum(d, r, norm_sum, grid),
                }
            )
    return rows


def rich_dictionary(d: int, r: int, grid: Any, rng: np.random.Generator, n_subspaces: int = 4) -> HeadDictionary:
    """Aligned heads on a 4x finer bias grid (hardmax and softmax at T = 4 / delta) on n_subspaces r-planes + 16 random.

    The finer grid lets combinations of aligned heads oscillate with the sawtooth's period (the construction's own grid
    cannot: a staircase with steps at the sawtooth's jumps has no component at its frequency).
    """
    fine = bias_grid(d, m=4 * grid.m + 3, delta=grid.delta / 4)
    return concatenate(
        aligned_heads(d, r, n_subspaces, fine, rng),
        aligned_heads(d, r, n_subspaces, fine, rng, temperature=4.0 / grid.delta),
        random_heads(d, r, 16, rng),
    )


def dictionary_threshold_table(
    d: int, m: int, ranks: list[int], budgets: np.ndarray, n_samples: int, seed: int, level: float = 0.9
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    """Budget thresholds of rich rank-r dictionaries on the target with 2 m + 1 biases (delta = 4 sqrt 2 / m).

    Args:
        d: ambient dimension (>= 2).
        m: bias half-count (>= 1).
        ranks: ranks r < d.
        budgets: (k,) increasing Frobenius budgets.
        n_samples: Monte Carlo contexts for the Gram statistics and (separately) for the held-out errors.
        seed: base seed.
        level: threshold = first budget where the held-out error <= level * (error at budget 0).

    Returns:
        (curve rows, threshold rows (r, d - r, B*_heldout, B*_certified, S*^2 floor), fitted c over d - r).
    """
    grid = bias_grid(d, m=m, delta=4.0 * math.sqrt(2.0) / m)
    energy = population_moments(grid, d).residual_oscillation_energy
    curves: list[dict[str, Any]] = []
    thresholds: list[dict[str, Any]] = []
    for r in ranks:
        rng = np.random.default_rng([seed, d, m, r])
        dictionary = rich_dictionary(d, r, grid, rng)
        stats = gram_statistics(dictionary, grid, n_samples, rng)
        base = stats.reduced()[2]
        held, certified = [], []
        for budget in budgets:
            solution = solve_budget(stats, float(budget), norm="frobenius")
            estimate = heldout_error(dictionary, grid, solution, n_samples, np.random.default_rng([seed, d, m, r, 1]))
            held.append(estimate.mean)
            certified.append(solution.dual)
            curves.append(
                {
                    "d": d,
                    "m": m,
                    "r": r,
                    "H": dictionary.heads,
                    "budget": float(budget),
                    "primal": solution.primal,
                    "dual": solution.dual,
                    "heldout": estimate.mean,
                    "heldout_se": estimate.stderr,
                }
            )
        thresholds.append(
            {
                "d": d,
                "r": r,
                "d_minus_r": d - r,
                "threshold_heldout": budget_threshold(budgets, np.array(held), level * base),
                "threshold_certified": budget_threshold(budgets, np.array(certified), level * base),
                "floor_threshold_S2": threshold_norm_sum(
                    d, r, level * base / energy if level * base < energy else 0.99, grid
                )
                ** 2,
            }
        )
    finite = [row for row in thresholds if math.isfinite(row["threshold_heldout"])]
    c_fit = math.nan
    if len(finite) >= 2:
        x = np.array([row["d_minus_r"] for row in finite], dtype=np.float64)
        c_fit = float(np.polyfit(x, np.log([row["threshold_heldout"] for row in finite]), 1)[0])
    return curves, thresholds, c_fit


def threshold_table(d: int) -> tuple[list[dict[str, Any]], float, float]:
    """The floor's threshold S*^2 (floor >= 1/40 while sum_h ||V_h|| <= S*) for r = 1 .. d - 1, and the fitted c.

    Args:
        d: ambient dimension (>= 3).

    Returns:
        (rows (d, r, d - r, S*^2), fitted c = slope of log S*^2 in d - r, closed-form c of budget_exponent).
    """
    d = check_dimension(d, minimum=3)
    grid = bias_grid(d)
    energy = population_moments(grid, d).oscillation_energy
    level = FLOOR_LEVEL_ABSOLUTE / energy
    rows = []
    for r in range(1, d):
        s_star = threshold_norm_sum(d, r, level, grid, free_simple=False)
        rows.append({"d": d, "r": r, "d_minus_r": d - r, "threshold_S2": s_star**2})
    x = np.array([row["d_minus_r"] for row in rows], dtype=np.float64)
    y = np.log([row["threshold_S2"] for row in rows])
    slope = float(np.polyfit(x, y, 1)[0])
    return rows, slope, budget_exponent(d, grid.delta)
