"""Conjecture 6 (docs/paper.md section 5): depth does not rescue low rank for long contexts. EVIDENCE, NOT PROOF.

Conjecture in our words: no low-rank multi-layer transformer of a size fixed independently of N approximates the
nearest neighbour for every context length N; full rank is needed regardless of depth. What we can check numerically
is narrower: for the extension of Theorem 5's majority vote that we built (constructions/tournament.py: a rank-1
plurality vote over N tokens, a round robin of pairwise comparisons and a selection layer; 3 layers, all heads rank 1),
every cost grows with N at a fixed target error: the layer-1 heads needed (measured by Monte Carlo), the scratch width
p = 1 + 2N + d and the later-layer heads N(N-1)/2 + N + 1 (by construction). One full-rank head (Q = K = V = I, hardmax)
is exact for every N, so its cost does not grow. The per-head edge over chance shrinks as N grows.

Would falsify the conjecture: a family of rank-1 (or rank << d) multi-layer networks whose heads, width and depth stay
bounded as N grows while the error stays below a fixed eps on D_N; in our measurements that would show up as a
heads-needed curve that flattens in N. Our construction not flattening is evidence about one construction, not a
lower bound for all networks.

Compared with what: the error of the extension at a fixed head count vs its error at other N (4 standard errors); the
N = 2 head count (exact quadrature) vs the error of larger N at 4x that many heads; the full-rank head's Monte Carlo
error (exactly 0). Negative control: the growth criterion, applied to the full-rank head, must fail (and does).

Assumptions: D_N orthonormal keys (N <= d); hardmax; errors averaged over fresh random heads per sample
(theory.plurality_vote, checked against the construction through the multi-layer evaluator); ties in the plurality go to
the lowest index.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from constructions.tournament import build_tournament
from theory.attention import multihead_attention
from theory.majority_vote_error import majority_vote_heads
from theory.monte_carlo import DEFAULT_Z, MonteCarloEstimate, estimate_error, estimate_mean
from theory.multilayer import multilayer_forward
from theory.plurality_vote import plurality_vote_errors
from theory.sphere import sample_context
from theory.targets import nearest_neighbor

D = 16


def grows_with_n(estimates: dict[int, MonteCarloEstimate]) -> bool:
    """True when every step to a larger N raises the error by more than 4 combined standard errors."""
    ordered = [estimates[N] for N in sorted(estimates)]
    return all(
        b.mean - a.mean > DEFAULT_Z * math.hypot(a.stderr, b.stderr) for a, b in zip(ordered, ordered[1:], strict=False)
    )


@pytest.fixture(scope="module")
def fixed_heads_errors():
    H = 256
    return H, {N: plurality_vote_errors(D, N, [H], 3000, np.random.default_rng([6, N]))[H] for N in (2, 4, 8, 16)}


@pytest.mark.claim("Conjecture 6 evidence: at a fixed rank-1 head count the extension's error grows with N")
def test_error_grows_with_n_at_fixed_heads(fixed_heads_errors, record_claim):
    H, estimates = fixed_heads_errors
    record_claim(
        measured=f"d={D}, H={H}: "
        + ", ".join(f"N={N}: {e.mean:.3f} +- {e.stderr:.3f}" for N, e in estimates.items())
        + " (n=3000 each)",
        reference="each step up in N must raise the error by > 4 combined s.e.; full-rank head: 0 for every N",
    )
    assert grows_with_n(estimates)


@pytest.mark.claim("Conjecture 6 evidence: heads for a fixed error grow with N (twice the N=2 count is not enough)")
def test_heads_needed_grow_with_n(record_claim):
    eps = 0.25
    h2 = majority_vote_heads(D, eps)  # exact N = 2 count (quadrature)
    estimates = {N: plurality_vote_errors(D, N, [2 * h2], 3000, np.random.default_rng([7, N]))[2 * h2] for N in (4, 8)}
    widths = {N: build_tournament(D, N, 1, np.random.default_rng(0)).weights.p for N in (2, 4, 8, 16)}
    later = {N: N * (N - 1) // 2 + N + 1 for N in widths}
    record_claim(
        measured=f"eps={eps}: N=2 needs H={h2} (exact); at H={2 * h2}: "
        + ", ".join(f"N={N}: {e.mean:.3f} +- {e.stderr:.3f}" for N, e in estimates.items())
        + f"; scratch p: {widths}; layer-2+3 heads: {later}; layers: 3",
        reference=f"target eps={eps}; one full-rank head: H=1, r=d, p=0, 1 layer for every N",
    )
    for N, estimate in estimates.items():
        assert estimate.mean - DEFAULT_Z * estimate.stderr > eps, (N, estimate)
    assert all(widths[a] < widths[b] for a, b in zip(sorted(widths), sorted(widths)[1:], strict=False))


@pytest.fixture(scope="module")
def full_rank_errors():
    d = D
    eye = np.eye(d)[None]
    estimates = {}
    for N in (2, 4, 8, 16):
        estimates[N] = estimate_error(
            lambda X, y: multihead_attention(eye, eye, eye, X, y),
            nearest_neighbor,
            lambda n, rng, N=N: sample_context(n, N, d, rng),
            3000,
            np.random.default_rng([8, N]),
        )
    return estimates


@pytest.mark.claim("Conjecture 6 contrast: one full-rank head is exact for every N (its cost does not grow)")
def test_full_rank_head_is_exact_for_every_n(full_rank_errors, record_claim):
    record_claim(
        measured=", ".join(f"N={N}: {e.mean:.3g} +- {e.stderr:.1g}" for N, e in full_rank_errors.items())
        + " (n=3000 each, hardmax, 1 head of rank d)",
        reference="0 (Fact 1, hardmax)",
    )
    assert all(e.mean == 0.0 for e in full_rank_errors.values())


@pytest.mark.claim("Conjecture 6 (negative control): the growth criterion fails for the full-rank head")
def test_negative_control_growth_criterion_rejects_full_rank(full_rank_errors, fixed_heads_errors, record_claim):
    record_claim(
        measured=f"grows_with_n(full rank) = {grows_with_n(full_rank_errors)}, "
        f"grows_with_n(rank-1 extension) = {grows_with_n(fixed_heads_errors[1])}",
        reference="False for a cost that does not grow with N",
    )
    assert not grows_with_n(full_rank_errors)


@pytest.mark.claim(
    "Conjecture 6 evidence: the 3-layer rank-1 extension, run through the evaluator, matches its simulator"
)
def test_extension_through_evaluator_matches_simulator(record_claim):
    d, N, H = 8, 6, 41
    rng = np.random.default_rng(60)
    batch_means = []
    for _ in range(30):
        built = build_tournament(d, N, H, rng)
        X, y = sample_context(400, N, d, rng)
        out = multilayer_forward(built.weights, X, y)
        batch_means.append(np.mean(np.sum((out - nearest_neighbor(X, y)) ** 2, axis=1)))
    through = estimate_mean(np.array(batch_means))
    simulated = plurality_vote_errors(d, N, [H], 12_000, np.random.default_rng(61))[H]
    record_claim(
        measured=f"d={d}, N={N}, H={H}: evaluator {through.mean:.4f} +- {through.stderr:.4f} (30 constructions x 400)",
        reference=f"fresh-heads simulator {simulated.mean:.4f} +- {simulated.stderr:.4f} (n=12000)",
    )
    assert abs(through.mean - simulated.mean) <= DEFAULT_Z * math.hypot(through.stderr, simulated.stderr)


@pytest.mark.slow
@pytest.mark.claim("Conjecture 6 evidence (table): heads needed for error 0.25 grow polynomially in N (d = 16)")
def test_scaling_table(record_claim, full_mode, report_dir):
    from experiments.analysis.depth_scaling import fit_exponent, needed_table, scaling_rows
    from experiments.figures.depth import draw_scaling_figure

    rows = scaling_rows(D, [2, 4, 8, 16], [64, 256, 1024, 4096, 16384], 2000, seed=1)
    table = needed_table(rows, 0.25)
    exponent = fit_exponent(table)
    record_claim(
        measured="heads for eps=0.25: "
        + ", ".join(f"N={r['N']}: {r['heads_needed']:.0f}" for r in table)
        + f"; exponent in N {exponent:.2f}",
        reference="a bounded (flat) curve would be evidence against Conjecture 6; full rank: 1 head",
    )
    needed = [r["heads_needed"] for r in table]
    assert all(b > a for a, b in zip(needed, needed[1:], strict=False)) and exponent > 0.3
    if full_mode:
        draw_scaling_figure(rows, table, report_dir / "conjecture6_scaling.png")
