"""Theorem 3 (docs/paper.md section 4): an exponential separation at constant error, with biased nearest neighbours.

Claim in our words: the sum F of M = 2 d^2 + 1 biased nearest-neighbour functions (x_1 chosen iff <x_1 - x_2, y> > b_j)
is approximated to vanishing error by M full-rank heads (one per summand, bias inside the score), while any rank-r
generalized attention whose value norms are below a budget exponential in d - r has error at least a constant.

Assumptions (docs/paper.md section 7 lists Theorem 3's biases, key law and constant as unknown; these are ours):
- N = 2, D_2 orthonormal keys, Gaussian query y ~ N(0, I_d) (not normalised), independent of the keys.
- Biases b_j = j delta, j = -d^2 .. d^2, delta = 4 sqrt(2) / d^2 (they span +-4 standard deviations of s = <z, y>).
- Unnormalised sum F = sum_j f_{b_j}; its sawtooth part O = z saw(s / delta) has energy ~1/6, the "constant".
- The lower-bound class: heads whose weights are non-negative, sum to 1 and depend on (Q_h y, X) only; the model may
  also add any multiple of the simple part A for free in the dictionary checks (this only strengthens the model).
- Our rigorous floor controls S = sum_h ||V_h|| (not d H max ||V_h||^2 alone): S^2 <= H B / d for B = d H max||V||^2.
- The dictionary certificate is for the EMPIRICAL distribution of a fixed Monte Carlo sample; population error is
  reported by held-out Monte Carlo (4 standard errors) beside it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from constructions.biased import (
    asymptotic_error,
    build_biased_construction,
    predicted_error,
    save_biased_construction,
)
from constructions.biased_dictionary import (
    aligned_heads,
    concatenate,
    gram_statistics,
    heldout_error,
    random_heads,
    solve_budget,
)
from constructions.evaluate import evaluate_weight_file
from theory.attention import multihead_attention
from theory.biased_target import (
    bias_grid,
    biased_target,
    bulk_simple_part,
    in_bulk,
    margin,
    oscillating_part,
    population_moments,
    sample_biased_context,
    sawtooth,
)
from theory.monte_carlo import DEFAULT_Z, estimate_error, estimate_mean
from theory.smoothing_bound import (
    budget_exponent,
    closed_form_correlation_bound,
    error_floor_from_norm_sum,
    head_correlation_bound,
    heuristic_correlation,
)
from theory.targets import biased_nearest_neighbor


@pytest.mark.claim("Theorem 3: the biased sum is a simple term plus (x1 - x2) times a sawtooth of <x1 - x2, y>")
def test_decomposition(record_claim):
    d = 6
    grid = bias_grid(d)
    rng = np.random.default_rng(301)
    X, y = sample_biased_context(20000, d, rng)
    # Independent target: the literal sum of theory.targets.biased_nearest_neighbor over the biases.
    F = sum(biased_nearest_neighbor(X, y, b) for b in grid.biases)  # (n, d)
    s = margin(X, y)
    bulk = in_bulk(s, grid)
    identity = np.max(np.abs(F - bulk_simple_part(X, y, grid) - oscillating_part(X, y, grid))[bulk])
    assert identity < 1e-10 * grid.count, f"decomposition identity off by {identity}"
    # Periodicity straight from the target: shifting y by delta z / ||z||^2 moves s by delta and F by exactly z.
    z = X[:, 0] - X[:, 1]  # (n, d)
    shifted = y + grid.delta * z / np.sum(z * z, axis=1, keepdims=True)  # (n, d)
    F_shift = sum(biased_nearest_neighbor(X, shifted, b) for b in grid.biases)
    both = (
        bulk & (np.abs(s + grid.delta) < grid.bulk_half_width) & (np.abs(margin(X, shifted) - s - grid.delta) < 1e-12)
    )
    periodic = np.max(np.abs(F_shift - F - z)[both])
    assert periodic < 1e-10 * grid.count, f"F(s + delta) - F(s) differs from z by {periodic}"
    # Fourier content of the sawtooth over one period: sine coefficients 1 / (pi k), no cosines.
    u = (np.arange(4096) + 0.5) / 4096
    values = sawtooth(u)
    k = np.arange(1, 6)
    sines = 2 * np.mean(values[None, :] * np.sin(2 * np.pi * k[:, None] * u[None, :]), axis=1)
    cosines = 2 * np.mean(values[None, :] * np.cos(2 * np.pi * k[:, None] * u[None, :]), axis=1)
    assert np.allclose(sines, 1 / (np.pi * k), atol=1e-5) and np.max(np.abs(cosines)) < 1e-5
    # Energy of the oscillating part: quadrature vs Monte Carlo.
    moments = population_moments(grid, d)
    O = oscillating_part(X, y, grid)
    energy = estimate_mean(np.sum(O * O, axis=1))
    assert energy.contains(moments.oscillation_energy), (energy, moments.oscillation_energy)
    record_claim(
        measured=f"identity err {identity:.1e}, periodicity err {periodic:.1e}, sine coeffs {np.round(sines, 5)}, "
        f"||O||^2 MC {energy.mean:.5f} +- {energy.stderr:.5f}",
        reference="exact sum of biased NN (theory.targets); 1/(pi k); "
        f"quadrature ||O||^2 = {moments.oscillation_energy:.5f}",
    )


@pytest.mark.claim("Theorem 3: 2 d^2 + 1 full-rank heads approximate the biased sum, error -> 0 with temperature")
def test_full_rank_construction(record_claim, tmp_path):
    d = 6
    grid = bias_grid(d)
    rng = np.random.default_rng(302)
    temperatures = [3.0, 30.0, 300.0, 3000.0]
    predicted, measured = [], []
    for T in temperatures:
        c = build_biased_construction(d, T, grid)
        exact = predicted_error(d, T, grid)
        est = estimate_error(
            lambda X, y, c=c, T=T: multihead_attention(c.Q, c.K, c.V, X, y, T, c.score_bias),
            lambda X, y: biased_target(X, y, grid),  # equals the literal sum (test_decomposition)
            lambda n, r: sample_biased_context(n, d, r),
            12000,
            rng,
        )
        assert est.contains(exact), f"T={T}: MC {est.mean} +- {est.stderr} vs quadrature {exact}"
        predicted.append(exact)
        measured.append(est)
    assert all(a > b for a, b in zip(predicted, predicted[1:], strict=False)), predicted
    ratio = predicted[-1] / asymptotic_error(d, temperatures[-1], grid)
    assert abs(ratio - 1) < 0.01, ratio
    hard = build_biased_construction(d, math.inf, grid)
    X, y = sample_biased_context(5000, d, rng)
    exact_error = np.max(
        np.abs(
            multihead_attention(hard.Q, hard.K, hard.V, X, y, math.inf, hard.score_bias)
            - sum(biased_nearest_neighbor(X, y, b) for b in grid.biases)
        )
    )
    assert exact_error < 1e-10
    path = save_biased_construction(tmp_path / "biased.safetensors", build_biased_construction(d, 300.0, grid))
    result = evaluate_weight_file(path, task="biased", samples=20000, seed=3)
    assert result["within_4_stderr"], result
    record_claim(
        measured="T: "
        + ", ".join(f"{T:g}: {m.mean:.2e}+-{m.stderr:.1e}" for T, m in zip(temperatures, measured, strict=True))
        + f"; hardmax max err {exact_error:.1e}; attnrank eval at T=300: {result['mse']:.3e}+-{result['stderr']:.1e}",
        reference="quadrature "
        + ", ".join(f"{p:.2e}" for p in predicted)
        + f"; asymptote 2(2ln2-1)/T sum p(b_j) ratio {ratio:.4f}; budget d H = {d * grid.count}",
    )


@pytest.mark.claim("Theorem 3: low-rank error >= constant until the value-norm budget is exponential in d - r")
def test_smoothing_floor_threshold(record_claim):
    d = 8
    grid = bias_grid(d)
    moments = population_moments(grid, d)
    level = (1.0 / 40.0) / moments.oscillation_energy
    from theory.smoothing_bound import threshold_norm_sum

    ranks = list(range(1, d))
    s2 = np.array([threshold_norm_sum(d, r, level, grid, free_simple=False) ** 2 for r in ranks])
    gaps = np.array([d - r for r in ranks], dtype=float)
    slope, intercept = np.polyfit(gaps, np.log(s2), 1)
    residual = np.log(s2) - (slope * gaps + intercept)
    kappas = [head_correlation_bound(d, r, grid) for r in ranks]
    closed = [closed_form_correlation_bound(d, r, grid.delta) for r in ranks if r >= 2]
    # The closed form is an independent (cruder) upper bound on kappa: it must dominate the quadrature value.
    assert all(k <= cf * (1 + 1e-6) for k, cf in zip(kappas[1:], closed, strict=True))
    # The paper's heuristic (mean smoothing variance) understates the correlation (Jensen), as derived.
    heuristics = [heuristic_correlation(d, r, grid) for r in ranks]
    assert all(h <= k for h, k in zip(heuristics, kappas, strict=True))
    assert np.all(np.diff(s2[::-1]) > 0), "threshold must grow with d - r"
    assert slope > 1.0 and np.max(np.abs(residual)) < 2.0, (slope, residual)
    # Floor at a polynomial budget (S = H max||V|| with H = M heads of norm 1, the construction's size) for r = d - 2.
    floor = error_floor_from_norm_sum(d, d - 2, grid.count * 1.0, grid, free_simple=False)
    assert floor > 1.0 / 40.0
    record_claim(
        measured=f"d = {d}: S*^2 (floor >= 1/40) for d - r = 1..7: {', '.join(f'{v:.2e}' for v in s2[::-1])}; "
        f"fitted c = {slope:.2f}; floor at r = d-2 with S = M = {grid.count}: {floor:.4f}",
        reference=f"closed-form exponent 2 log(2 pi sqrt(2/d) / delta) = {budget_exponent(d, grid.delta):.2f}; "
        f"kappa <= closed form; heuristic kappa (paper sketch) <= rigorous kappa; 1/40 = 0.025",
    )


@pytest.mark.claim("Theorem 3: certified best output weights of rank-r dictionaries stay at the sawtooth energy")
def test_dictionary_certificate(record_claim):
    d = 4
    grid = bias_grid(d)
    budgets = [10.0, 1e3, 1e6]
    rows = {}
    for r in (d, d - 1, d - 2):
        rng = np.random.default_rng([303, r])
        dictionary = concatenate(aligned_heads(d, r, 2, grid, rng), random_heads(d, r, 8, rng))
        stats = gram_statistics(dictionary, grid, 10000, rng)
        _, _, base = stats.reduced()
        results = []
        for B in budgets:
            sol = solve_budget(stats, B, norm="frobenius")
            assert sol.dual <= sol.primal + 1e-12, (sol.dual, sol.primal)
            held = heldout_error(dictionary, grid, sol, 10000, np.random.default_rng([304, r]))
            norm_sum = float(np.sum(np.abs(sol.weights)))
            floor = error_floor_from_norm_sum(d, r, norm_sum, grid)
            # The rigorous floor must not exceed the held-out (population) error, up to 4 standard errors.
            assert held.mean + DEFAULT_Z * held.stderr >= floor, (r, B, held, floor)
            results.append((B, sol.primal, sol.dual, held.mean, held.stderr, floor))
        rows[r] = (dictionary.heads, base, results)
    # Low rank: even at B = 1e6 the certified empirical error stays >= 97% of the sawtooth energy left after A.
    for r in (d - 1, d - 2):
        heads, base, results = rows[r]
        assert results[-1][2] >= 0.97 * base, (r, results[-1], base)
    # Negative control: full rank reaches (numerically) zero at a polynomial budget, so the check above can fail.
    heads, base, results = rows[d]
    assert results[1][1] < 1e-6, results
    record_claim(
        measured="; ".join(
            f"r={r} (H={rows[r][0]}): "
            + ", ".join(f"B={B:g}: P={p:.4f} D={q:.4f} held={h:.4f}+-{e:.4f}" for B, p, q, h, e, _ in rows[r][2])
            for r in rows
        ),
        reference=f"energy after projecting out A ~ {rows[d - 1][1]:.4f}; floor at the solutions' sum|a_h| "
        + ", ".join(f"r={r}: {rows[r][2][-1][5]:.4f}" for r in rows)
        + "; control r = d must reach ~0",
    )


@pytest.mark.slow
@pytest.mark.claim("Theorem 3: achievable error vs budget (figure) and Remark 4's weight-norm dependence")
def test_budget_figure(record_claim, report_dir, full_mode):
    from experiments.analysis.biased_tables import budget_table, threshold_table
    from experiments.figures.biased import draw

    rows = budget_table(4, [4, 3, 2, 1], np.logspace(0, 8, 9), 20000, 0)
    for row in rows:
        assert row["dual"] <= row["primal"] + 1e-12
        assert row["heldout"] + DEFAULT_Z * row["heldout_se"] >= row["floor"]
    low = [row for row in rows if row["r"] < 4]
    assert min(row["dual"] for row in low) > 0.16
    control = [row for row in rows if row["r"] == 4 and row["budget"] >= 100]
    assert max(row["primal"] for row in control) < 1e-6
    thresholds, c_fit, c_closed = threshold_table(8)
    if full_mode:
        draw(rows, report_dir / "theorem3_budget.png")
    record_claim(
        measured=f"min certified low-rank error {min(row['dual'] for row in low):.4f} over B in [1, 1e8]; "
        f"floor threshold exponent c = {c_fit:.2f} (d = 8)",
        reference=f"sawtooth energy 1/6; closed-form exponent {c_closed:.2f}; r = d control reaches < 1e-6 at B >= 100",
    )


@pytest.mark.slow
@pytest.mark.claim("Theorem 3: rich rank-r dictionaries (coarser grid) improve held-out error only at d - r = 1")
def test_rich_dictionary_thresholds(record_claim):
    from experiments.analysis.biased_tables import dictionary_threshold_table

    d, m = 6, 6  # 13 biases (delta = 0.94): a coarser target on which low-rank heads do correlate a little
    curves, thresholds, _ = dictionary_threshold_table(d, m, [d - 1, d - 2], np.logspace(-1, 5, 7), 10000, 0)
    for row in curves:
        assert row["dual"] <= row["primal"] + 1e-12
    best = {r: min(row["heldout"] + DEFAULT_Z * row["heldout_se"] for row in curves if row["r"] == r) for r in (5, 4)}
    start = {r: next(row["heldout"] for row in curves if row["r"] == r) for r in (5, 4)}
    # d - r = 1: a genuine (held-out) improvement; d - r = 2: none beyond 4 standard errors at any budget <= 1e5.
    assert best[5] < start[5] - 0.01
    lowest_4 = min(row["heldout"] for row in curves if row["r"] == 4)
    se_4 = max(row["heldout_se"] for row in curves if row["r"] == 4 and row["budget"] <= 1.0)
    assert lowest_4 > start[4] - DEFAULT_Z * math.sqrt(2.0) * se_4
    record_claim(
        measured="; ".join(
            f"r={r}: "
            + ", ".join(
                f"B={row['budget']:g}: held {row['heldout']:.4f} cert {row['dual']:.4f}"
                for row in curves
                if row["r"] == r
            )
            for r in (5, 4)
        ),
        reference="threshold (held-out <= 0.9 x start): "
        + ", ".join(f"d-r={row['d_minus_r']}: {row['threshold_heldout']:.3g}" for row in thresholds),
    )
