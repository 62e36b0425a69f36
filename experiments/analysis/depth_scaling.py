"""Depth (docs/paper.md section 5): Theorem 5's head counts and the Conjecture 6 scaling in N, as tables of rows.

- :func:`heads_rows`: heads needed for error eps at rank 1, two layers (the majority vote, exact quadrature,
  H ~ d / eps^2) against one layer (Theorem 2's lower bound ``min_heads(d, 1, eps)``);
- :func:`majority_rows`: the majority vote's exact error beside its asymptotes and a Monte Carlo estimate;
- :func:`scaling_rows`, :func:`needed_table`, :func:`fit_exponent`: Monte Carlo error of the rank-1 plurality vote +
  round robin (fresh heads per sample, theory.plurality_vote) against H for several N, the heads needed for a target
  error against N, and the least-squares exponent of that count in N (Conjecture 6's evidence);
- :func:`head_edge_rows`: how much better than chance one random rank-1 head picks the nearest token.

The figures of `experiments.figures.depth` draw these rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from theory.bounds import min_heads
from theory.majority_vote_error import majority_vote_asymptote, majority_vote_error, majority_vote_heads
from theory.monte_carlo import DEFAULT_Z
from theory.plurality_vote import plurality_vote_errors
from theory.validation import check_real


def heads_rows(
    d_values: Sequence[int] = (16, 32, 64), eps_values: Sequence[float] | None = None
) -> list[dict[str, Any]]:
    """Rows (d, eps, two-layer heads, its asymptote d/eps^2, log10 of Theorem 2's one-layer minimum).

    Args:
        d_values: dimensions.
        eps_values: target errors (default: 9 log-spaced values from 0.3 to 0.03).
    """
    eps_grid = list(eps_values) if eps_values is not None else list(np.geomspace(0.3, 0.03, 9))
    rows = []
    for d in d_values:
        for eps in eps_grid:
            one_layer = min_heads(d, 1, eps)
            rows.append(
                {
                    "d": d,
                    "eps": eps,
                    "two_layer_heads": majority_vote_heads(d, eps),
                    "asymptote_heads": d / eps**2,
                    "one_layer_min_heads_log10": math.log10(one_layer),
                }
            )
    return rows


def majority_rows(d_values: Sequence[int], head_values: Sequence[int], samples: int, seed: int) -> list[dict[str, Any]]:
    """Rows (d, H, exact error, sqrt(d/H), refined asymptote, Monte Carlo mean and s.e. with fresh heads per sample)."""
    rows = []
    for d in d_values:
        estimates = plurality_vote_errors(d, 2, head_values, samples, np.random.default_rng([seed, d]))
        for H, estimate in estimates.items():
            rows.append(
                {
                    "d": d,
                    "H": H,
                    "exact": majority_vote_error(d, H),
                    "asymptote": majority_vote_asymptote(d, H),
                    "refined_asymptote": majority_vote_asymptote(d, H, refined=True),
                    "mc": estimate.mean,
                    "mc_stderr": estimate.stderr,
                    "n_samples": estimate.n_samples,
                }
            )
    return rows


def scaling_rows(
    d: int, n_values: Sequence[int], head_grid: Sequence[int], samples: int, seed: int, keys: str = "orthonormal"
) -> list[dict[str, Any]]:
    """Monte Carlo rows (d, N, H, error, stderr, n_samples, layer/scratch costs) of the plurality vote + round robin."""
    rows = []
    for N in n_values:
        estimates = plurality_vote_errors(d, N, head_grid, samples, np.random.default_rng([seed, N]), keys=keys)
        for H, estimate in estimates.items():
            rows.append(
                {
                    "d": d,
                    "N": N,
                    "H": H,
                    "keys": keys,
                    "error": estimate.mean,
                    "stderr": estimate.stderr,
                    "n_samples": estimate.n_samples,
                    "layers": 3,
                    "scratch_p": 1 + 2 * N + d,
                    "later_heads": N * (N - 1) // 2 + N + 1,
                }
            )
    return rows


def head_edge_rows(d: int, n_values: Sequence[int], samples: int, seed: int) -> list[dict[str, Any]]:
    """Per N: probability that one random rank-1 head picks the nearest token, vs chance 1/N (D_N keys).

    A wrong pick costs exactly 2 on D_N, so P(right) = 1 - error(H = 1) / 2.
    """
    rows = []
    for N in n_values:
        estimate = plurality_vote_errors(d, N, [1], samples, np.random.default_rng([seed, N, 1]))[1]
        right = 1.0 - estimate.mean / 2.0
        rows.append(
            {
                "N": N,
                "p_right": right,
                "p_right_stderr": estimate.stderr / 2.0,
                "chance": 1.0 / N,
                "edge": right - 1.0 / N,
            }
        )
    return rows


def heads_needed(rows: Sequence[dict[str, Any]], N: int, eps: float, shift: float = 0.0) -> float:
    """Heads where the error (plus shift standard errors) crosses eps: log-log interpolation on the grid; inf if never.

    Args:
        rows: scaling rows.
        N: context length to read.
        eps: target error (> 0).
        shift: standard errors added to each error (+4 gives a pessimistic, -4 an optimistic head count).

    Returns:
        The interpolated head count (1.0 if the smallest grid H already reaches eps, inf if the largest does not).
    """
    eps = check_real("eps", eps, minimum=0.0, strict_minimum=True)
    mine = sorted((r for r in rows if r["N"] == N), key=lambda r: r["H"])
    values = [(r["H"], r["error"] + shift * r["stderr"]) for r in mine]
    if not values:
        raise ValueError(f"no rows for N = {N}")
    if values[0][1] <= eps:
        return float(values[0][0])
    for (h0, e0), (h1, e1) in zip(values, values[1:], strict=False):
        if e1 <= eps < e0:
            if e1 <= 0:
                return float(h1)
            frac = (math.log(e0) - math.log(eps)) / (math.log(e0) - math.log(e1))
            return float(math.exp(math.log(h0) + frac * (math.log(h1) - math.log(h0))))
    return math.inf


def needed_table(rows: Sequence[dict[str, Any]], eps: float) -> list[dict[str, Any]]:
    """Per N: heads needed for error eps (with a 4-s.e. band), scratch width, layers, later-layer heads."""
    table = []
    for N in sorted({r["N"] for r in rows}):
        first = next(r for r in rows if r["N"] == N)
        table.append(
            {
                "N": N,
                "eps": eps,
                "heads_needed": heads_needed(rows, N, eps),
                "heads_needed_low": heads_needed(rows, N, eps, -DEFAULT_Z),
                "heads_needed_high": heads_needed(rows, N, eps, DEFAULT_Z),
                "scratch_p": first["scratch_p"],
                "layers": first["layers"],
                "later_heads": first["later_heads"],
                "full_rank_heads": 1,
            }
        )
    return table


def fit_exponent(table: Sequence[dict[str, Any]]) -> float:
    """Least-squares slope of log heads_needed against log N over the finite entries."""
    points = [(math.log(r["N"]), math.log(r["heads_needed"])) for r in table if math.isfinite(r["heads_needed"])]
    if len(points) < 2:
        return math.nan
    x, y = np.array(points).T
    return float(np.polyfit(x, y, 1)[0])
