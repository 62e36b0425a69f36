"""Tests of theory/smoothing_bound.py: monotonicity, independent bounds, and the smoothing identity itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theory.biased_target import bias_grid, sawtooth
from theory.monte_carlo import estimate_mean
from theory.smoothing_bound import (
    closed_form_correlation_bound,
    error_floor,
    error_floor_from_norm_sum,
    head_correlation_bound,
    heuristic_correlation,
    mode_damping,
    smoothed_sawtooth,
    smoothed_sawtooth_sup_bound,
    threshold_norm_sum,
    value_norm_sum,
)


def test_smoothed_sawtooth_matches_monte_carlo():
    """Step 2's identity E saw((t + sigma g) / delta) = damped Fourier series, against direct sampling."""
    rng = np.random.default_rng(0)
    t = np.array([0.05, 0.13, 0.31])
    sigma, delta = 0.06, 0.35
    series = smoothed_sawtooth(t, sigma, delta)
    for ti, si in zip(t, series, strict=True):
        samples = sawtooth((ti + sigma * rng.standard_normal(200000)) / delta)
        assert estimate_mean(samples).contains(si)
    assert np.all(np.abs(series) <= smoothed_sawtooth_sup_bound(sigma, delta) + 1e-15)


@settings(max_examples=20)
@given(sigma=st.floats(0.0, 2.0), delta=st.floats(0.05, 3.0))
def test_sup_bound_is_monotone_and_at_most_one_half(sigma, delta):
    m1 = smoothed_sawtooth_sup_bound(sigma, delta)
    m2 = smoothed_sawtooth_sup_bound(sigma * 1.1 + 1e-3, delta)
    assert 0.0 <= m2 <= m1 <= 0.5


def test_correlation_bound_decreases_as_rank_drops_and_dominated_by_closed_form():
    d = 7
    grid = bias_grid(d)
    kappas = [head_correlation_bound(d, r, grid) for r in range(1, d + 1)]
    assert all(a < b for a, b in zip(kappas, kappas[1:], strict=False))
    assert kappas[-1] == pytest.approx(math.sqrt(2) / 2)
    for r in range(2, d):
        assert kappas[r - 1] <= closed_form_correlation_bound(d, r, grid.delta) * (1 + 1e-6)
        assert heuristic_correlation(d, r, grid) <= kappas[r - 1]


def test_correlation_bound_against_mpmath_kummer():
    """Independent route: E_B e^{-lambda_k B} = 1F1(a; a + b; -lambda_k) (mpmath), summed without the 1/2 cap."""
    import mpmath

    d, r = 6, 4
    grid = bias_grid(d)
    a, b = (d - r) / 2, r / 2
    total = mpmath.mpf(0)
    for k in range(1, 400):
        lam = 4 * mpmath.pi**2 * k * k / grid.delta**2
        total += mpmath.hyp1f1(a, a + b, -lam) / (mpmath.pi * k)
    uncapped = math.sqrt(2) * float(total)
    kappa = head_correlation_bound(d, r, grid)
    assert kappa <= uncapped * (1 + 1e-6)
    assert kappa >= 0.5 * uncapped  # the cap only bites for B tiny


@settings(max_examples=15)
@given(S1=st.floats(0, 50), S2=st.floats(0, 50), r=st.integers(1, 5))
def test_floor_is_monotone_in_norm_and_rank(S1, S2, r):
    d = 6
    grid = bias_grid(d)
    lo, hi = sorted((S1, S2))
    assert error_floor_from_norm_sum(d, r, hi, grid) <= error_floor_from_norm_sum(d, r, lo, grid) + 1e-15
    assert error_floor_from_norm_sum(d, r + 1, lo, grid) <= error_floor_from_norm_sum(d, r, lo, grid) + 1e-15


def test_floor_in_heads_and_value_norm_and_threshold():
    d, r = 6, 4
    grid = bias_grid(d)
    assert error_floor(d, r, 10, 1.0, grid) >= error_floor(d, r, 20, 1.0, grid) >= error_floor(d, r, 20, 2.0, grid)
    assert error_floor(d, r, 1, 0.0, grid) == pytest.approx(1 / 6, rel=1e-5)
    s_star = threshold_norm_sum(d, r, 0.25, grid)
    assert error_floor_from_norm_sum(d, r, s_star, grid) == pytest.approx(0.25 * (1 / 6), rel=1e-4)
    assert value_norm_sum(d, 10, 40.0, "max") == pytest.approx(math.sqrt(10 * 40 / d))
    assert float(mode_damping(0.0, d, r)) == 1.0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: head_correlation_bound(4, 5), "r"),
        (lambda: head_correlation_bound(4, 2, keys="x"), "keys"),
        (lambda: error_floor(4, 2, 0, 1.0), "H"),
        (lambda: error_floor(4, 2, 1, -1.0), "max_value_norm"),
        (lambda: closed_form_correlation_bound(5, 1, 0.1), "r"),
        (lambda: threshold_norm_sum(4, 2, 1.5), "level"),
        (lambda: value_norm_sum(4, 2, 1.0, "spectral"), "norm"),
        (lambda: smoothed_sawtooth_sup_bound(0.1, 0.0), "delta"),
    ],
)
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
