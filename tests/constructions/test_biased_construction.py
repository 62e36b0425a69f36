"""Tests of constructions/biased.py, constructions/biased_dictionary.py and `attnrank construct biased`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.biased import asymptotic_error, build_biased_construction, predicted_error, save_biased_construction
from constructions.biased_dictionary import (
    aligned_heads,
    budget_threshold,
    concatenate,
    dictionary_model,
    first_key_weights,
    gram_statistics,
    random_heads,
    solve_budget,
)
from constructions.weights_io import load_weights
from tests.strategies import dimensions, seeds
from theory.attention import attention_weights
from theory.biased_target import bias_grid, biased_target, sample_biased_context


@settings(max_examples=10)
@given(d=dimensions(2, 6), T=st.floats(0.5, 1e4))
def test_error_decreases_in_temperature(d, T):
    grid = bias_grid(d)
    assert predicted_error(d, 2 * T, grid) < predicted_error(d, T, grid)
    assert predicted_error(d, math.inf, grid) == 0.0


def test_large_temperature_asymptote_and_budget():
    d = 5
    grid = bias_grid(d)
    T = 1e5
    assert predicted_error(d, T, grid) == pytest.approx(asymptotic_error(d, T, grid), rel=1e-3)
    c = build_biased_construction(d, 10.0, grid)
    assert c.heads == 2 * d * d + 1 and c.budget == pytest.approx(d * c.heads)
    # score difference of head j is s - b_j: weight on x_1 is exactly 1/2 at s = b_j
    X = np.zeros((1, 2, d))
    X[0, 0, 0] = X[0, 1, 1] = 1.0
    j = 7
    y = np.zeros((1, d))
    y[0, 0] = grid.biases[j]
    w = attention_weights(c.Q[j : j + 1], c.K[j : j + 1], X, y, 10.0, c.score_bias[j : j + 1])
    assert w[0, 0, 0] == pytest.approx(0.5)


@given(seed=seeds)
def test_dictionary_weights_agree_with_the_reference_evaluator(seed):
    d, r = 4, 2
    grid = bias_grid(d, m=3)
    rng = np.random.default_rng(seed)
    D = concatenate(aligned_heads(d, r, 1, grid, rng), random_heads(d, r, 6, rng))
    X, y = sample_biased_context(50, d, rng)
    ref = np.stack(
        [
            attention_weights(D.Q[h : h + 1], D.K[h : h + 1], X, y, float(D.temperature[h]), D.score_bias[h : h + 1])[
                :, 0, 0
            ]
            for h in range(D.heads)
        ],
        axis=1,
    )
    assert np.allclose(first_key_weights(D, X, y), ref, atol=1e-12)


def test_dual_below_primal_and_gram_matches_direct_evaluation():
    d, r = 4, 3
    grid = bias_grid(d)
    rng = np.random.default_rng(5)
    D = concatenate(aligned_heads(d, r, 1, grid, rng), random_heads(d, r, 6, rng))
    stats = gram_statistics(D, grid, 3000, np.random.default_rng(11))
    for norm in ("max", "frobenius"):
        for B in (0.0, 1.0, 100.0, 1e6):
            sol = solve_budget(stats, B, norm)
            assert sol.dual <= sol.primal + 1e-12
            assert sol.gap < 1e-4
    # the Gram-based empirical error equals the direct evaluation through multihead_attention on the same sample
    sol = solve_budget(stats, 50.0, "frobenius")
    X, y = sample_biased_context(3000, d, np.random.default_rng(11))
    model = dictionary_model(D, sol.weights, sol.alpha, grid)
    direct = np.mean(np.sum((model(X, y) - biased_target(X, y, grid)) ** 2, axis=1))
    assert direct == pytest.approx(sol.primal, rel=1e-8, abs=1e-10)


def test_certificate_catches_a_bad_claim():
    """Negative control: full-rank heads drive the certified error to ~0 (a low-rank floor check would fail)."""
    d = 3
    grid = bias_grid(d)
    D = aligned_heads(d, d, 1, grid, np.random.default_rng(0))
    stats = gram_statistics(D, grid, 2000, np.random.default_rng(1))
    sol = solve_budget(stats, d * D.heads, "max")
    assert sol.primal < 1e-8


def test_budget_threshold_interpolates():
    budgets = np.array([1.0, 10.0, 100.0])
    assert budget_threshold(budgets, np.array([1.0, 0.5, 0.1]), 0.75) == pytest.approx(math.sqrt(10))
    assert budget_threshold(budgets, np.array([1.0, 0.9, 0.8]), 0.1) == math.inf
    with pytest.raises(ValueError, match="budgets"):
        budget_threshold(np.array([2.0, 1.0]), np.array([1.0, 0.5]), 0.7)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: build_biased_construction(1), "d"),
        (lambda: build_biased_construction(3, temperature=0.0), "temperature"),
        (lambda: predicted_error(3, 1.0, keys="x"), "keys"),
        (lambda: aligned_heads(3, 4, 1, bias_grid(3), np.random.default_rng(0)), "r"),
        (lambda: random_heads(3, 2, 0, np.random.default_rng(0)), "count"),
        (lambda: solve_budget(None, -1.0), "budget"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_hardmax_file_predicts_zero_error(tmp_path):
    saved = save_biased_construction(tmp_path / "c.safetensors", build_biased_construction(3, math.inf))
    assert load_weights(saved).predicted_error == 0.0
