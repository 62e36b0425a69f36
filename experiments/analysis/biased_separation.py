"""Theorem 3 measured: error against the number of heads, full rank against rank r, on the biased target.

docs/biased.md ("Separation at constant error, measured"). For each rank r and head count H we build a dictionary of
H heads, fit the output weights V_h = a_h I by unconstrained least squares on one Monte Carlo sample (the target's
simple part A granted with a free coefficient, as in `constructions.biased_dictionary`), and report the held-out
error of those weights on fresh contexts (mean and standard error). No weight-norm limit is imposed: the budget is
the proof's device, and the question here is whether the separation shows without it.

Dictionaries:

- full rank (r = d): Theorem 3's heads Q = K = I with hardmax and score biases on H evenly spaced thresholds over the
  target's bias range (H = M = 2 d^2 + 1 thresholds is the construction itself, exact: error 0 up to rounding);
- rank r < d: for S random r-planes U, the aligned heads Q = K = U with every threshold of the target's grid
  (`constructions.biased_dictionary.aligned_heads`, "the best a rank-r head can do with the construction's
  thresholds"), H = S M, plus the same number of random rank-r heads (random Q, K, biases and temperatures).

The oscillating part's energy ||O'||^2 (`theory.biased_target.population_moments`, the part no low-rank head
correlates with, docs/biased.md) is the constant that the low-rank errors are compared with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from constructions.biased_dictionary import (
    BudgetSolution,
    HeadDictionary,
    aligned_heads,
    concatenate,
    gram_statistics,
    heldout_error,
    random_heads,
)
from theory.biased_target import BiasGrid, bias_grid, population_moments
from theory.validation import check_dimension, check_generator, check_int, check_rank


def threshold_biases(grid: BiasGrid, H: int) -> np.ndarray:
    """H thresholds evenly spaced over the grid's range [b_{-m}, b_m] (the grid itself when H = M; 0 when H = 1)."""
    H = check_int("H", H, minimum=1)
    if H == grid.count:
        return np.asarray(grid.biases, dtype=np.float64)
    if H == 1:
        return np.zeros(1)
    return np.linspace(float(grid.biases[0]), float(grid.biases[-1]), H)  # (H,)


def full_rank_dictionary(d: int, H: int, grid: BiasGrid) -> HeadDictionary:
    """H hardmax heads Q = K = I_d with score biases (-b/2, +b/2): head b picks x_1 iff <y, x_1 - x_2> > b."""
    d = check_dimension(d)
    biases = threshold_biases(grid, H)  # (H,)
    Q = np.repeat(np.eye(d)[None], H, axis=0)  # (H, d, d)
    score_bias = np.stack([-0.5 * biases, 0.5 * biases], axis=1)  # (H, 2)
    labels = tuple("full rank" for _ in range(H))
    return HeadDictionary(Q=Q, K=Q.copy(), score_bias=score_bias, temperature=np.full(H, math.inf), labels=labels)


def low_rank_dictionary(d: int, r: int, planes: int, grid: BiasGrid, rng: np.random.Generator) -> HeadDictionary:
    """Aligned rank-r heads on ``planes`` random r-planes (every threshold) plus as many random rank-r heads."""
    d = check_dimension(d)
    r = check_rank(r, d)
    planes = check_int("planes", planes, minimum=1)
    aligned = aligned_heads(d, r, planes, grid, rng)
    return concatenate(aligned, random_heads(d, r, aligned.heads, rng))


def least_squares_solution(
    dictionary: HeadDictionary, grid: BiasGrid, n_samples: int, rng: np.random.Generator
) -> BudgetSolution:
    """Unconstrained least-squares weights (A free) on one sample: the empirical minimiser and its empirical error.

    The reduced normal equations G a = g (`GramStatistics.reduced`) are solved by least squares (minimum norm when G
    is singular, e.g. hardmax heads whose threshold lies outside every sampled margin).
    """
    stats = gram_statistics(dictionary, grid, n_samples, rng)
    G, g, c = stats.reduced()
    a = np.asarray(np.linalg.lstsq(G, g, rcond=None)[0], dtype=np.float64)  # (H,)
    primal = float(a @ G @ a - 2.0 * g @ a + c)
    return BudgetSolution(math.inf, "frobenius", a, stats.alpha(a), primal, math.nan, "least squares")


@dataclass(frozen=True)
class SeparationRow:
    """One (d, r, H): the in-sample error of the fit and its held-out error (mean, standard error, samples)."""

    d: int
    r: int
    H: int
    in_sample: float
    heldout: float
    heldout_stderr: float
    n_fit: int
    n_heldout: int


def separation_rows(
    d: int,
    ranks: Sequence[int],
    full_rank_heads: Sequence[int],
    planes: Sequence[int],
    n_fit: int,
    n_heldout: int,
    rng: np.random.Generator,
) -> list[SeparationRow]:
    """Held-out error against H: full rank at ``full_rank_heads`` thresholds, every r < d in ``ranks`` at 2 S M heads
    for S in ``planes`` (S aligned planes plus as many random heads).

    Args:
        d: dimension (the default grid: M = 2 d^2 + 1 thresholds). ranks: ranks to run (r = d is full rank).
        full_rank_heads: head counts of the full-rank dictionaries. planes: numbers of r-planes for r < d.
        n_fit: fitting sample size. n_heldout: fresh sample size. rng: the source of randomness.

    Returns:
        rows, full rank first.
    """
    d = check_dimension(d)
    rng = check_generator(rng)
    grid = bias_grid(d)
    rows = []
    for r in sorted(ranks, reverse=True):
        check_rank(r, d)
        dictionaries = (
            [full_rank_dictionary(d, H, grid) for H in full_rank_heads]
            if r == d
            else [low_rank_dictionary(d, r, S, grid, rng) for S in planes]
        )
        for dictionary in dictionaries:
            solution = least_squares_solution(dictionary, grid, n_fit, rng)
            fresh = heldout_error(dictionary, grid, solution, n_heldout, rng)
            rows.append(
                SeparationRow(d, r, dictionary.heads, solution.primal, fresh.mean, fresh.stderr, n_fit, n_heldout)
            )
    return rows


def oscillation_energy(d: int) -> float:
    """||O'||^2 of the default grid under D_2: the sawtooth energy that no low-rank head correlates with."""
    return float(population_moments(bias_grid(d), d).residual_oscillation_energy)
