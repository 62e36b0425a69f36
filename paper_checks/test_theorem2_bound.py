"""Theorem 2 (docs/paper.md section 3): low-rank attention needs many heads; the harmonic lower bound as a number.

Claim, in our words: on D_2 (N = 2 orthonormal keys, independent uniform query), every H-head attention layer whose
query/key maps have rank r (any value maps, any score function of the projected query: "generalized attention") has
error E||f - f*||^2 >= B(d, r, H) = (1/2) sum_{k odd} e_k [1 - H C(k+r-1, r-1)/N(d,k)]_+
(docs/paper.md section 3, step 4).
theory.bounds.rank_lower_bound returns a certified interval for B.

Checks:
- Shape of the bound on a grid of (d, r, H): positive for r <= d - 2 (any H) and for r = d - 1 with one head, exactly 0
  for r = d (and for r = d - 1 with H >= 2, which we derived: 2 C(k+d-2, d-2) >= N(d, k)); non-increasing in r and H.
- The d = 64, H = c d / r table of docs/paper.md (an independent reconstruction) to 3 decimals.
- Constructions never beat the bound: the full-rank head at r = d; random rank-1 hardmax heads with optimal output
  weights (constructions/random_features.py, exact kernel error); a Monte Carlo estimate (4 standard errors) of random
  rank-r softmax heads with least-squares output weights through theory.attention.multihead_attention. Negative
  control: the full-rank head (lambda = 50) measured against the rank-1 bound must violate it, and does.
Assumptions (docs/paper.md "Open items"): the verbatim theorem, its constants and epsilon ranges are unknown; we check
the proof's explicit bound (step 4), not the asymptotic statement (see test_theorem2_regimes.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from constructions.full_rank import full_rank_head
from theory.attention import attention_weights, multihead_attention
from theory.bounds import full_rank_error, rank_lower_bound
from theory.monte_carlo import DEFAULT_Z, MonteCarloEstimate, estimate_mean
from theory.sphere import sample_context
from theory.targets import nearest_neighbor

Z = DEFAULT_Z  # acceptance half-width in standard errors (one value for every statistical check)
PAPER_TABLE = {  # docs/paper.md section 3 step 4: d = 64, H = c d / r
    1: {1: 0.179, 4: 0.178, 8: 0.178, 16: 0.175, 32: 0.162},
    64: {1: 0.174, 4: 0.154, 8: 0.124, 16: 0.115, 32: 0.079},
}


def _respects_bound(estimate: MonteCarloEstimate, bound_lower: float) -> bool:
    """A measured error is consistent with the bound unless it lies more than Z standard errors below it."""
    return estimate.mean + Z * estimate.stderr >= bound_lower


@pytest.mark.claim("Theorem 2: bound > 0 for r < d (one head), = 0 for r = d; non-increasing in r and H")
def test_theorem2_bound_shape_on_a_grid(record_claim):
    problems = []
    count = 0
    heads_grid = (1, 2, 64, 10**4)
    for d in (3, 5, 8, 16, 64):
        ranks = sorted({1, 2, d // 2, d - 2, d - 1, d} - {0})
        for r in ranks:
            previous = None
            for H in heads_grid:
                count += 1
                interval = rank_lower_bound(d, r, H)
                if r == d or (r == d - 1 and H >= 2):
                    if tuple(interval) != (0.0, 0.0):
                        problems.append(("not zero", d, r, H, tuple(interval)))
                elif r <= d - 2 or H == 1:
                    if not interval.lower > 0:
                        problems.append(("not positive", d, r, H, tuple(interval)))
                if previous is not None and interval.lower > previous.upper:
                    problems.append(("increases with H", d, r, H))
                if r > 1 and interval.lower > rank_lower_bound(d, r - 1, H).upper:
                    problems.append(("increases with r", d, r, H))
                previous = interval
    record_claim(
        measured=f"{count} grid points (d in 3..64, r in 1..d, H in 1..1e4): {len(problems)} violations; "
        f"B(64,63,1) = {rank_lower_bound(64, 63, 1).lower:.4f}, B(64,63,2) = 0, B(64,62,1e6) = "
        f"{rank_lower_bound(64, 62, 10**6).lower:.2e}",
        reference="B > 0 for r <= d-2 (all H) and r = d-1, H = 1; B = 0 for r = d and r = d-1, H >= 2 (derived)",
    )
    assert not problems, problems[:5]


@pytest.mark.claim("Theorem 2: d = 64, H = c d / r bound table reproduces docs/paper.md to 3 decimals")
def test_theorem2_paper_table(record_claim):
    measured, mismatches = [], []
    for c, row in PAPER_TABLE.items():
        for r, paper_value in row.items():
            interval = rank_lower_bound(64, r, c * 64 // r)
            measured.append(f"c={c} r={r}: {interval.lower:.5f}")
            # docs/paper.md's numbers agree with truncation to 3 decimals; accept rounding or truncation.
            if not (paper_value - 5e-4 <= interval.lower and interval.upper < paper_value + 1e-3):
                mismatches.append((c, r, interval.lower, paper_value))
    record_claim(
        measured="; ".join(measured),
        reference="docs/paper.md: c=1: 0.179 0.178 0.178 0.175 0.162; c=64: 0.174 0.154 0.124 0.115 0.079 "
        "(our values truncate to these; 4 of 10 round up instead)",
    )
    assert not mismatches, mismatches


def _random_rank_r_model_error(
    d: int, r: int, H: int, temperature: float, rng: np.random.Generator
) -> MonteCarloEstimate:
    """Random Gaussian rank-r heads, V_h = a_h I with a fitted by least squares on a training sample; MC test error."""
    Q = rng.standard_normal((H, r, d)) / math.sqrt(d)  # (H, r, d)
    K = rng.standard_normal((H, r, d)) / math.sqrt(d)  # (H, r, d)
    X, y = sample_context(10_000, 2, d, rng)
    weights = attention_weights(Q, K, X, y, temperature=temperature)  # (n, H, N)
    features = np.einsum("nhi,nid->nhd", weights, X)  # (n, H, d): head h's output with V_h = I
    target = nearest_neighbor(X, y)  # (n, d)
    gram = np.einsum("nhd,ngd->hg", features, features) / X.shape[0]  # (H, H)
    cross = np.einsum("nhd,nd->h", features, target) / X.shape[0]  # (H,)
    a = np.linalg.solve(gram + 1e-12 * np.eye(H), cross)  # (H,)
    V = a[:, None, None] * np.eye(d)[None]  # (H, d, d)
    X_test, y_test = sample_context(20_000, 2, d, rng)
    diff = multihead_attention(Q, K, V, X_test, y_test, temperature=temperature) - nearest_neighbor(X_test, y_test)
    return estimate_mean(np.sum(diff * diff, axis=1))


def _full_rank_error_estimate(d: int, temperature: float, rng: np.random.Generator) -> MonteCarloEstimate:
    X, y = sample_context(20_000, 2, d, rng)
    Q, K, V = full_rank_head(d)
    diff = multihead_attention(Q, K, V, X, y, temperature=temperature) - nearest_neighbor(X, y)
    return estimate_mean(np.sum(diff * diff, axis=1))


@pytest.mark.claim("Theorem 2: constructions and fitted low-rank models never beat the bound (with a negative control)")
def test_theorem2_constructions_respect_the_bound(record_claim, full_mode, report_dir):
    from constructions.random_features import kernel_matrix, optimal_output_weights, sample_heads, target_kernel

    rng = np.random.default_rng(12)
    d = 16
    lines, violations = [], []
    # 1. The full-rank head at r = d: bound 0, error > 0 for finite lambda and = 0 for hardmax.
    full_bound = rank_lower_bound(d, d, 1)
    if full_rank_error(d, 50.0) < full_bound.lower:
        violations.append("full-rank head")
    lines.append(f"full-rank lam=50: {full_rank_error(d, 50.0):.4f} >= {full_bound.lower}")
    # 2. Random rank-1 hardmax heads with optimal output weights (exact error 1 - b^T C^-1 b).
    q, k = sample_heads(256, d, rng)
    rf = []
    for H in (1, 4, 16, 64, 256):
        error = optimal_output_weights(kernel_matrix(q[:H], k[:H]), target_kernel(q[:H], k[:H])).error
        bound = rank_lower_bound(d, 1, H)
        rf.append((H, error, bound.lower))
        if error < bound.lower - 1e-9:
            violations.append(("random rank-1", H, error, bound.lower))
    lines.append("random rank-1 (H, error, bound): " + ", ".join(f"({h}, {e:.3f}, {b:.3f})" for h, e, b in rf))
    # 3. Random rank-r softmax heads with least-squares value weights (Monte Carlo, 4 s.e.).
    for r, H in ((1, 8), (2, 8), (4, 4)):
        estimate = _random_rank_r_model_error(d, r, H, 4.0, rng)
        bound = rank_lower_bound(d, r, H)
        lines.append(
            f"fitted softmax r={r} H={H}: {estimate.mean:.3f} +- {estimate.stderr:.3f} vs bound {bound.lower:.3f}"
        )
        if not _respects_bound(estimate, bound.lower):
            violations.append(("fitted softmax", r, H, estimate.mean, bound.lower))
    # Negative control: a full-rank head (lambda = 50) judged against the rank-1, one-head bound must fail.
    control = _full_rank_error_estimate(d, 50.0, rng)
    rank1 = rank_lower_bound(d, 1, 1)
    control_caught = not _respects_bound(control, rank1.lower)
    lines.append(f"control: full-rank {control.mean:.4f} +- {control.stderr:.4f} vs rank-1 bound {rank1.lower:.3f}")
    record_claim(measured="; ".join(lines), reference=f"Theorem 2 bound (certified lower end), d = {d}, z = {Z}")
    if full_mode:
        _draw_figure(report_dir, rng)
    assert not violations, violations
    assert control_caught, "the negative control (full-rank head vs the rank-1 bound) was not caught"


def _draw_figure(report_dir, rng: np.random.Generator) -> None:
    """The bound curves at d = 64 with the random rank-1 heads' exact errors overlaid (full mode only)."""
    from constructions.random_features import kernel_matrix, optimal_output_weights, sample_heads, target_kernel
    from experiments.figures.bound import draw_bound_figure

    q, k = sample_heads(2048, 64, rng)
    counts = np.array([1, 4, 16, 64, 256, 1024, 2048])
    errors = np.array(
        [optimal_output_weights(kernel_matrix(q[:h], k[:h]), target_kernel(q[:h], k[:h])).error for h in counts]
    )
    draw_bound_figure(
        report_dir / "theorem2_bound.png", d=64, overlays={"random rank-1 heads (exact)": (counts, errors)}
    )
