"""Unit and property tests of theory.bounds: Theorem 2's certified bound, min_heads, the regimes, Fact 1's error.

Independent references: exact integer arithmetic (math.comb, theory.harmonics.num_harmonics), sympy rationals
(rank_lower_bound_exact), mpmath at 40 digits, and Fact 1's closed form at d = 3.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from tests.strategies import dimension_and_rank, head_counts, huge_head_counts, target_errors, temperatures
from theory.bounds import (
    FULL_RANK_ASYMPTOTE_LIMIT,
    HIGH_DIMENSIONAL_DEGREE_CONSTANT,
    captured_degree,
    full_rank_constant,
    full_rank_error,
    full_rank_error_asymptote,
    high_accuracy_regime,
    high_dimensional_regime,
    log_rank_capacity,
    min_heads,
    rank_lower_bound,
    rank_lower_bound_exact,
)
from theory.harmonics import log_sign_energy, num_harmonics, sign_energy_tail

EPS = float(np.finfo(np.float64).eps)


# ------------------------------------------------------------------------------------------------ building blocks


def test_betaln_error_is_within_the_documented_budget():
    """The rounding budget assumes |betaln error| <= 22 eps (a + b + |value|); check it (with margin 32) vs mpmath."""
    mpmath.mp.dps = 40
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(150):
        a = float(round(math.exp(rng.uniform(0.0, math.log(1e10)))))
        b = float(round(math.exp(rng.uniform(0.0, math.log(2e4)))))
        exact = mpmath.log(mpmath.beta(mpmath.mpf(a), mpmath.mpf(b)))
        err = abs(float(mpmath.mpf(special.betaln(a, b)) - exact))
        worst = max(worst, err / (EPS * (a + b + abs(float(exact)))))
    assert worst <= 32.0, f"betaln error {worst:.1f} eps * (a + b + |v|) exceeds the budget's 32"


@pytest.mark.parametrize(("d", "r"), [(2, 1), (3, 1), (5, 2), (16, 4), (64, 8), (64, 63), (300, 17)])
def test_log_rank_capacity_matches_exact_integers(d, r):
    """log rho_k against log(C(k+r-1, r-1)) - log(N(d, k)) computed from exact Python ints."""
    ks = np.array([1, 3, 7, 21, 101, 999, 4001])
    computed = log_rank_capacity(d, r, ks)
    for k, value in zip(ks, computed, strict=True):
        exact = math.log(math.comb(int(k) + r - 1, r - 1)) - math.log(num_harmonics(d, int(k)))
        assert abs(value - exact) <= 1e-9 * (1 + abs(exact)), (d, r, k, value, exact)


@pytest.mark.parametrize("d", [2, 3, 4, 7, 20, 65])
def test_capacity_is_non_increasing_in_k_for_r_below_d(d):
    """The derived fact the truncation relies on: rho_{k+1} <= rho_k for r <= d - 1 (exact rationals)."""
    for r in sorted({1, max(1, d // 2), max(1, d - 2), d - 1}):
        rho = [(math.comb(k + r - 1, r - 1), num_harmonics(d, k)) for k in range(1, 120)]  # (numerator, denominator)
        for (a, b), (c, e) in zip(rho[:-1], rho[1:], strict=True):
            assert c * b <= a * e, (d, r)


@pytest.mark.parametrize("d", [2, 3, 10, 64])
def test_rank_d_minus_one_needs_only_two_heads_to_void_the_bound(d):
    """2 C(k+d-2, d-2) >= N(d, k) for every k: the bound is exactly 0 for r = d - 1 and H >= 2, positive for H = 1."""
    for k in range(1, 200, 2):
        assert 2 * math.comb(k + d - 2, d - 2) >= num_harmonics(d, k)
        # closed form used in the docstring: rho_k = (k + d - 2) / (2k + d - 2) at r = d - 1
        assert math.comb(k + d - 2, d - 2) * (2 * k + d - 2) == (k + d - 2) * num_harmonics(d, k)
    assert tuple(rank_lower_bound(d, d - 1, 2)) == (0.0, 0.0)
    assert rank_lower_bound(d, d - 1, 1).lower > 0.0


def test_d2_rank1_single_head_is_one_quarter():
    """d = 2, r = 1: rho_k = 1/2 for every k, so B(2, 1, 1) = (1/2)(1/2) sum_k e_k = 1/4 exactly."""
    lower, upper = rank_lower_bound(2, 1, 1)
    assert lower <= 0.25 <= upper
    assert upper - lower < 1e-12


# ------------------------------------------------------------------------------------- against independent values


def _mpmath_bound(d: int, r: int, H: int, k_max: int) -> tuple[float, float]:
    """Independent bracket of B at 40 digits: exact partial sum to k_max plus the monotone remainder bracket."""
    mpmath.mp.dps = 40
    total = mpmath.mpf(0)
    energy_sum = mpmath.mpf(0)
    half = mpmath.mpf(1) / 2
    for k in range(1, k_max + 1, 2):
        j = (k - 1) // 2
        beta = mpmath.gamma(mpmath.mpf(d) / 2) * mpmath.gamma(j + half) / (mpmath.pi * mpmath.gamma(j + (d + 1) * half))
        e_k = num_harmonics(d, k) * beta**2
        energy_sum += e_k
        bracket = 1 - mpmath.mpf(H * math.comb(k + r - 1, r - 1)) / num_harmonics(d, k)
        total += e_k * max(bracket, 0)
    tail = 1 - energy_sum
    k_next = k_max + 2
    b_next = max(1 - mpmath.mpf(H * math.comb(k_next + r - 1, r - 1)) / num_harmonics(d, k_next), 0)
    b_inf = 1 if r <= d - 2 else max(1 - mpmath.mpf(H) / 2, 0)
    return float((total + b_next * tail) / 2), float((total + b_inf * tail) / 2)


@pytest.mark.parametrize(
    ("d", "r", "H", "k_max"), [(5, 1, 10, 1201), (8, 2, 3, 801), (16, 4, 40, 601), (64, 8, 512, 401), (64, 32, 2, 401)]
)
def test_float_interval_overlaps_an_independent_mpmath_bracket(d, r, H, k_max):
    """Both intervals are certified, so they must overlap; the float one must also be tight (< 1e-10 wide)."""
    ref_low, ref_high = _mpmath_bound(d, r, H, k_max)
    lower, upper = rank_lower_bound(d, r, H)
    slack = 1e-15
    assert lower <= ref_high + slack and ref_low <= upper + slack, (lower, upper, ref_low, ref_high)
    assert upper - lower < 1e-10


def _direct_bracket(d: int, r: int, H: int, k_max: int) -> tuple[float, float, float]:
    """Explicit float64 sum over odd k <= k_max (about 2 million terms) plus the monotone remainder bracket.

    Independent of the Euler-Maclaurin remainder; returns (low, high, rounding slack) for B.
    """
    k = np.arange(1, k_max + 1, 2, dtype=np.int64)  # (k_max // 2 + 1,)
    log_e = np.asarray(log_sign_energy(d, k))
    exponent = np.minimum(math.log(H) + np.asarray(log_rank_capacity(d, r, k)), 1.0)
    terms = np.exp(log_e) * np.maximum(0.0, -np.expm1(exponent))
    total = math.fsum(terms.tolist())
    tail = sign_energy_tail(d, k_max)
    b_next = max(0.0, -math.expm1(math.log(H) + float(log_rank_capacity(d, r, k_max + 2))))
    b_inf = 1.0 if r <= d - 2 else max(0.0, 1.0 - H / 2)
    slack = 1e-12 * total + 1e-15  # per-term log-space rounding (<= ~1e-13 relative) summed
    return 0.5 * (total + b_next * tail), 0.5 * (total + b_inf * tail), slack


@pytest.mark.parametrize(
    ("d", "r", "H"), [(16, 14, 1), (16, 15, 1), (64, 62, 1), (256, 254, 8), (16, 8, 10**30), (64, 8, 10**300)]
)
def test_euler_maclaurin_remainder_lies_in_a_long_direct_bracket(d, r, H):
    """Where the bound switches to the Euler-Maclaurin remainder (slow convergence near full rank, huge H), its
    interval must overlap a bracket from 2 million explicit terms and stay tight (the old monotone remainder left
    widths up to 2e-6 here after 65536 terms)."""
    low, high, slack = _direct_bracket(d, r, H, (1 << 22) - 1)
    lower, upper = rank_lower_bound(d, r, H)
    assert lower <= high + slack and low <= upper + slack, (lower, upper, low, high)
    assert upper - lower <= 1e-10, (upper - lower, high - low)


def test_direct_bracket_detects_a_wrong_remainder():
    """Negative control: the same bracket rejects the bound computed with the weighted tail dropped (T alone)."""
    d, r, H = 64, 62, 1
    low, high, slack = _direct_bracket(d, r, H, (1 << 22) - 1)
    lower, _ = rank_lower_bound(d, r, H)
    k_last = 1535  # where rank_lower_bound switches to the remainder for this case
    wrong = lower + 0.5 * float(np.exp(log_rank_capacity(d, r, k_last))) * sign_energy_tail(d, k_last)
    assert wrong > high + slack


@pytest.mark.parametrize(("d", "r", "H", "k_max"), [(3, 1, 1, 9), (4, 2, 2, 11), (6, 2, 5, 13), (7, 3, 1, 9)])
def test_exact_sympy_partial_sum_agrees_with_float(d, r, H, k_max):
    """rank_lower_bound_exact (sympy) plus the remainder bracket [b_next T, b_inf T]/2 must meet the float interval."""
    exact = float(rank_lower_bound_exact(d, r, H, k_max))
    tail = sign_energy_tail(d, k_max)
    k_next = k_max + 2
    b_next = max(0.0, 1 - H * math.comb(k_next + r - 1, r - 1) / num_harmonics(d, k_next))
    b_inf = 1.0 if r <= d - 2 else max(0.0, 1 - H / 2)
    low, high = exact + 0.5 * b_next * tail, exact + 0.5 * b_inf * tail
    lower, upper = rank_lower_bound(d, r, H)
    assert lower <= high + 1e-14 and low <= upper + 1e-14, (lower, upper, low, high)


def test_exact_variant_is_a_rational_combination_of_energies():
    """d = 3 (odd d: e_k rational): the exact bound is a sympy Rational."""
    value = rank_lower_bound_exact(3, 1, 1, 5)
    assert value.is_rational
    # e_1 = 3/4 at d = 3 (docs/paper.md), bracket 1 - 1/3: first term (1/2)(3/4)(2/3) = 1/4
    assert rank_lower_bound_exact(3, 1, 1, 1) == pytest.approx(0.25, abs=0)


# ------------------------------------------------------------------------------------------------------- properties


@given(dimension_and_rank(2, 200), head_counts(10**6))
def test_interval_is_ordered_and_inside_the_trivial_range(dr, H):
    d, r = dr
    lower, upper = rank_lower_bound(d, r, H)
    assert 0.0 <= lower <= upper <= 0.5


@settings(max_examples=15)
@given(dimension_and_rank(3, 120), head_counts(10**5), st.integers(min_value=1, max_value=10**4))
def test_bound_never_increases_with_heads(dr, H, extra):
    d, r = dr
    assert rank_lower_bound(d, r, H + extra).lower <= rank_lower_bound(d, r, H).upper


@given(dimension_and_rank(3, 120), head_counts(10**5))
def test_bound_never_increases_with_rank(dr, H):
    d, r = dr
    if r < d:
        assert rank_lower_bound(d, r + 1, H).lower <= rank_lower_bound(d, r, H).upper


@given(st.integers(min_value=2, max_value=2000), huge_head_counts())
def test_full_rank_bound_is_zero(d, H):
    assert tuple(rank_lower_bound(d, d, H)) == (0.0, 0.0)


@settings(max_examples=12)
@given(st.integers(min_value=4, max_value=10**4), st.integers(min_value=1, max_value=32), huge_head_counts())
def test_huge_head_counts_and_dimensions_stay_certified(d, r, H):
    r = min(r, d - 2)
    lower, upper = rank_lower_bound(d, r, H)
    assert 0.0 <= lower <= upper <= 0.5
    # Every term has bracket <= 1 and only degrees with H rho_k < 1 count: the bound is at most T(1)/2 < 1/2.
    assert upper <= 0.5 * sign_energy_tail(d, 0) + 1e-12


def test_huge_heads_as_float_and_int_agree():
    assert tuple(rank_lower_bound(64, 8, 1e300)) == tuple(rank_lower_bound(64, 8, 10**300))


@settings(max_examples=12)
@given(
    st.integers(min_value=3, max_value=64).flatmap(lambda d: st.tuples(st.just(d), st.integers(1, d))), target_errors()
)
def test_min_heads_is_consistent_with_the_bound_on_both_sides(dr, eps):
    d, r = dr
    h = min_heads(d, r, eps)
    assert rank_lower_bound(d, r, h).lower <= eps
    if h > 1:
        assert rank_lower_bound(d, r, h - 1).lower > eps


@pytest.mark.parametrize("bad", [0.0, -0.1, 0.6, math.nan, math.inf])
def test_min_heads_rejects_bad_eps(bad):
    with pytest.raises(ValueError, match="eps"):
        min_heads(16, 2, bad)


def test_min_heads_refuses_answers_beyond_the_printable_range():
    with pytest.raises(ValueError, match="more than 10\\^4096 heads"):
        min_heads(10_000, 1, 1e-3)


def test_min_heads_rejects_unreachable_eps():
    with pytest.raises(ValueError, match="below what can be certified"):
        min_heads(8, 1, 1e-16)


@pytest.mark.parametrize(
    ("args", "name"), [((1, 1, 1), "d"), ((8, 0, 1), "r"), ((8, 9, 1), "r"), ((8, 2, 0), "H"), ((8, 2, 1.5), "H")]
)
def test_rank_lower_bound_rejects_bad_arguments(args, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        rank_lower_bound(*args)


# ---------------------------------------------------------------------------------------------------------- regimes


def test_captured_degree_follows_the_derived_one_over_eps_squared_law():
    """K_eps (d = 1e4, i.e. near the d -> inf energies) vs (2/pi)^3/(16 eps^2): ratio -> 1 as eps -> 0."""
    for eps in (0.02, 0.01):
        k = captured_degree(10**4, eps)
        ratio = k / (HIGH_DIMENSIONAL_DEGREE_CONSTANT / eps**2)
        assert 0.9 < ratio < 1.1, (eps, k, ratio)


@pytest.mark.parametrize(("d", "r", "eps"), [(256, 1, 0.05), (1024, 4, 0.05), (4096, 2, 0.02), (64, 8, 0.03)])
def test_high_dimensional_regime_is_a_valid_lower_bound(d, r, eps):
    assert high_dimensional_regime(d, r, eps) <= math.log(min_heads(d, r, eps))


@pytest.mark.parametrize(("d", "r"), [(16, 1), (32, 4), (64, 8), (64, 32)])
def test_high_accuracy_regime_is_a_valid_lower_bound(d, r):
    eps = sign_energy_tail(d, d - 2) / 4
    assert high_accuracy_regime(d, r, eps) <= math.log(min_heads(d, r, eps))
    with pytest.raises(ValueError, match="eps"):
        high_accuracy_regime(d, r, 2 * eps)


# ----------------------------------------------------------------------------------------------------------- Fact 1


def _closed_form_d3(lam: float) -> float:
    """d = 3: t is uniform on [-1, 1], so E = (2/A) [s - log(1 + e^s) + 1/(1 + e^s)]_0^A with A = sqrt2 lambda."""
    a = math.sqrt(2.0) * lam

    def antiderivative(s: float) -> float:
        return s - (s + math.log1p(math.exp(-s))) + special.expit(-s)

    return 2.0 / a * (antiderivative(a) - antiderivative(0.0))


@pytest.mark.parametrize("lam", [0.01, 0.3, 1.0, 7.0, 100.0, 1e4])
def test_full_rank_error_matches_the_closed_form_at_d3(lam):
    assert full_rank_error(3, lam) == pytest.approx(_closed_form_d3(lam), rel=1e-10)


def test_full_rank_error_limits():
    assert full_rank_error(16, math.inf) == 0.0
    assert full_rank_error_asymptote(16, math.inf) == 0.0
    # lambda -> 0: uniform weights 1/2 -> error 2 * (1/2)^2 = 1/2
    for d in (2, 3, 16, 1000):
        assert full_rank_error(d, 1e-9) == pytest.approx(0.5, abs=1e-8)


@given(st.integers(min_value=2, max_value=2000), temperatures(0.01, 1e5), st.floats(1.01, 10.0))
def test_full_rank_error_decreases_in_temperature(d, lam, factor):
    assert full_rank_error(d, lam * factor) < full_rank_error(d, lam)


def _moment(j: int) -> float:
    value, _ = integrate.quad(lambda s: s**j * special.expit(-s) ** 2, 0.0, np.inf, epsabs=0.0, epsrel=1e-13)
    return value


@given(st.integers(min_value=7, max_value=2000), st.floats(min_value=3.0, max_value=1e4))
def test_full_rank_error_matches_its_asymptote_to_order_d_over_lambda_squared(d, ratio):
    """E / asymptote - 1 lies in [-a m2/(2 m0 lam^2), that + a(a-1) m4/(8 m0 lam^4)] up to e^{-2 sqrt2 lam}.

    a = (d - 3)/2; lam = ratio * sqrt(d) so that d / lam^2 <= 1/9. Moments by independent quadrature.
    """
    lam = ratio * math.sqrt(d)
    m0, m2, m4 = _moment(0), _moment(2), _moment(4)
    a = (d - 3) / 2
    first = -a * m2 / (2 * m0 * lam**2)
    second = a * (a - 1) * m4 / (8 * m0 * lam**4)
    relative = full_rank_error(d, lam) / full_rank_error_asymptote(d, lam) - 1
    slack = 1e-10 + 10 * math.exp(-2 * math.sqrt(2) * lam)
    assert first - slack <= relative <= first + second + slack, (d, lam, relative, first, second)


def test_full_rank_constant_limit():
    """C_d -> 2 (ln 2 - 1/2)/sqrt(pi) = 0.21795 (docs/paper.md: 0.2179), increasing in d."""
    assert FULL_RANK_ASYMPTOTE_LIMIT == pytest.approx(0.21794, abs=1e-5)
    values = [full_rank_constant(d) for d in (4, 16, 64, 1024, 10**6)]
    assert all(b > a for a, b in zip(values[:-1], values[1:], strict=True))
    assert values[-1] == pytest.approx(FULL_RANK_ASYMPTOTE_LIMIT, rel=1e-5)  # C_d = C_inf (1 - O(1/d))
