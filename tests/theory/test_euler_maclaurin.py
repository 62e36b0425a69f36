"""Tests of theory.euler_maclaurin against closed forms: Hurwitz zeta tails and mpmath derivatives."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import special

from theory.euler_maclaurin import log_gamma_ratio_derivative, log_linear_derivative, odd_degree_tail

EPS = float(np.finfo(np.float64).eps)


def _normalised_power_tail(p: float, m: int) -> tuple[float, float, float]:
    """Estimate, omitted-term size and allowed rounding for sum_{i >= 1} (1 + 2i/m)^{-p} (u(x) = (x/m)^{-p})."""

    def log_term(x):
        return -p * np.log(x / m)

    derivatives = (-p / m, p / m**2, -2.0 * p / m**3)
    estimate, omitted = odd_degree_tail(log_term, derivatives, m, scale=1.0)
    return estimate, omitted, 64 * EPS * 16 * estimate


@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
@pytest.mark.parametrize("m", [1001, 5001, 123457, 10**9 + 1])
def test_slow_power_law_tail_matches_hurwitz_zeta(p, m):
    """sum_{i >= 1} (1 + 2i/m)^{-p} = (m/2)^p zeta(p, m/2 + 1) (Hurwitz zeta, mpmath at 60 digits)."""
    mpmath.mp.dps = 60
    exact = float((mpmath.mpf(m) / 2) ** p * mpmath.zeta(p, mpmath.mpf(m) / 2 + 1))
    estimate, omitted, rounding = _normalised_power_tail(p, m)
    assert abs(estimate - exact) <= omitted + rounding, (estimate, exact, omitted)
    assert omitted < 1e-6 * exact  # the error estimate is not vacuous


@pytest.mark.parametrize(("p", "m"), [(7.5, 1001), (40.0, 1001), (40.0, 5001), (40.0, 123457), (400.0, 5001)])
def test_steep_power_law_tail_matches_a_direct_sum(p, m):
    """Steep laws (Theorem 2's tail at astronomically many heads): against a direct fsum to e^{-46} of the first term.

    (mpmath's Hurwitz zeta is unreliable here: it changes in the 11th digit between 40 and 120 digits.)
    """
    n_terms = math.ceil(m * (math.exp(46.0 / p) - 1.0) / 2.0) + 10
    i = np.arange(1, n_terms + 1, dtype=np.float64)  # (n_terms,)
    exact = math.fsum(np.exp(-p * np.log1p(2.0 * i / m)).tolist())
    estimate, omitted, rounding = _normalised_power_tail(p, m)
    assert abs(estimate - exact) <= omitted + rounding + 1e-15 * exact, (estimate, exact, omitted)


def test_a_wrong_derivative_is_detected():
    """Negative control: dropping the u' correction (L' = 0) moves the estimate by ~u(m)/6 * p/m, caught above."""
    p, m = 3.0, 1001

    def log_term(x):
        return -p * np.log(x)

    estimate, omitted = odd_degree_tail(log_term, (0.0, p / m**2, -2.0 * p / m**3), m, scale=1.0)
    exact = 2.0**-p * float(special.zeta(p, m / 2.0 + 1.0))  # scipy is accurate to ~1e-13 here
    assert abs(estimate - exact) > 100 * (omitted + 1e-14 * exact)


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize(("x", "up", "down"), [(1001.0, 14.0, 14.0), (1001.0, 8.0, 14.0), (5e5, 1.0, 62.0)])
def test_log_gamma_ratio_derivative_matches_mpmath(order, x, up, down):
    mpmath.mp.dps = 40
    exact = mpmath.diff(lambda t: mpmath.loggamma(t + up) - mpmath.loggamma(t + down), mpmath.mpf(x), order + 1)
    assert log_gamma_ratio_derivative(order, x, up, down) == pytest.approx(float(exact), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_log_linear_derivative_matches_mpmath(n):
    mpmath.mp.dps = 40
    exact = mpmath.diff(lambda t: mpmath.log(2 * t + 62), mpmath.mpf(1001), n)
    assert log_linear_derivative(n, 1001.0, 2.0, 62.0) == pytest.approx(float(exact), rel=1e-12)
    assert math.isfinite(log_linear_derivative(n, 1e12, 2.0, 62.0))
