"""Tests of theory.harmonics: harmonic dimensions, normalised Gegenbauer polynomials, the sign expansion and its tail.

Every closed form is compared with something computed independently of the module: exact integer or sympy
arithmetic, mpmath at 40 digits, classical formulas (Chebyshev, Legendre coefficients of sign, the d -> infinity
limit), Gauss-Jacobi quadrature from scipy (exact for polynomial integrands), or Parseval's identity sum_k e_k = 1.
Tolerances are stated next to each comparison and come from float64 epsilon or from the requested quadrature
accuracy.
"""

from __future__ import annotations

import math
import re

import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import example, given
from hypothesis import strategies as st
from scipy import special
from sympy.concrete.gosper import gosper_term

from tests.strategies import dimensions, harmonic_degrees, odd_degrees
from theory.harmonics import (
    _gegenbauer_recurrence,
    gegenbauer,
    gegenbauer_coefficients,
    log_abs_sign_coefficient,
    log_num_harmonics,
    log_sign_energy,
    num_harmonics,
    sign_coefficient,
    sign_coefficient_exact,
    sign_energy,
    sign_energy_exact,
    sign_energy_tail,
)

EPS = float(np.finfo(np.float64).eps)
# Energies and coefficients are a handful of float64 operations on O(1)-sized logs: a few ulps each.
FLOAT_RTOL = 64 * EPS  # 1.4e-14
# sign_energy_tail integrates with quad(epsrel=1e-13); that is the accuracy it can promise.
TAIL_RTOL = 1e-13
# The constant in tail ~ c K^{-1/2} (K << d) and ~ c sqrt(d) / K (K >> d): from e_k -> (2/pi)^{3/2} k^{-3/2}
# (d -> infinity limit with Wallis' product) and from k^2 e_k -> 2 Gamma(d/2)^2 2^d / ((d-2)! pi^2) ~ 2 c sqrt(d)
# (Stirling); summing over odd k halves the density of terms.
TAIL_CONSTANT = (2.0 / math.pi) ** 1.5


def _comb(n: int, m: int) -> int:
    return math.comb(n, m) if 0 <= m <= n else 0


# ---------------------------------------------------------------------------------------------------------------------
# num_harmonics
# ---------------------------------------------------------------------------------------------------------------------


@given(d=dimensions(2, 60), k=harmonic_degrees(0, 60))
@example(d=2, k=1)
@example(d=2, k=0)
def test_num_harmonics_matches_homogeneous_polynomial_count(d: int, k: int) -> None:
    # Harmonic polys of degree k = homogeneous degree-k polys minus |x|^2 times homogeneous degree-(k-2) polys.
    expected = _comb(d + k - 1, k) - _comb(d + k - 3, k - 2)
    assert num_harmonics(d, k) == expected


def test_num_harmonics_low_dimensions() -> None:
    # Circle: cos(k theta), sin(k theta); 2-sphere: 2k + 1 spherical harmonics.
    assert [num_harmonics(2, k) for k in range(6)] == [1, 2, 2, 2, 2, 2]
    assert [num_harmonics(3, k) for k in range(6)] == [1, 3, 5, 7, 9, 11]
    assert isinstance(num_harmonics(10**5, 50), int)


@pytest.mark.parametrize(
    ("d", "k"), [(2, 7), (10, 5), (64, 33), (1000, 101), (3, 10**5), (10**5, 1000), (10**5, 99999)]
)
def test_log_num_harmonics_matches_exact_integer(d: int, k: int) -> None:
    exact = math.log(num_harmonics(d, k))  # math.log of an exact (arbitrarily large) int
    # betaln sums three lgamma values of size <= lgamma(d + k): allow 8 ulps of that magnitude.
    tolerance = 8 * EPS * (abs(special.gammaln(d + k)) + 1.0)
    assert abs(float(log_num_harmonics(d, k)) - exact) <= tolerance
    array = log_num_harmonics(d, np.array([0, k]))
    assert isinstance(array, np.ndarray) and array.shape == (2,) and array[0] == 0.0


# ---------------------------------------------------------------------------------------------------------------------
# Gegenbauer polynomials
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3, 4, 7, 64, 1000])
@pytest.mark.parametrize("k", [0, 1, 2, 5, 50, 2000])
def test_gegenbauer_normalised_and_bounded(d: int, k: int) -> None:
    t = np.linspace(-1.0, 1.0, 2001)  # (2001,) includes both endpoints
    values = np.asarray(gegenbauer(k, d, t))
    assert values.shape == t.shape and np.all(np.isfinite(values))
    assert abs(values[-1] - 1.0) <= 4 * EPS
    assert abs(values[0] - (-1.0) ** k) <= 4 * EPS
    # |P_k| <= 1 on [-1, 1] for alpha = (d-2)/2 >= 0; allow the recurrence's rounding, at most k^2 eps.
    assert np.max(np.abs(values)) <= 1.0 + max(k * k, 1) * EPS


@pytest.mark.parametrize("k", [0, 1, 3, 17, 2000])
def test_gegenbauer_d2_is_chebyshev(k: int) -> None:
    theta = np.linspace(0.0, math.pi, 1001)  # (1001,)
    # T_k(cos theta) = cos(k theta); cos(k theta) carries rounding of k * theta, about k * pi * eps.
    tolerance = 8 * (k + 1) * math.pi * EPS
    assert np.max(np.abs(np.asarray(gegenbauer(k, 2, np.cos(theta))) - np.cos(k * theta))) <= tolerance


@pytest.mark.parametrize("k", [0, 1, 4, 25, 2000])
def test_gegenbauer_d3_is_legendre(k: int) -> None:
    t = np.linspace(-1.0, 1.0, 1001)  # (1001,)
    reference = special.eval_legendre(k, t)
    assert np.max(np.abs(np.asarray(gegenbauer(k, 3, t)) - reference)) <= (k + 1) * 8 * EPS


@given(d=dimensions(2, 300), k=harmonic_degrees(0, 300), t=st.floats(-1.0, 1.0))
def test_gegenbauer_scipy_path_matches_recurrence(d: int, k: int, t: float) -> None:
    # Two independent evaluations: scipy's eval_jacobi / binom and our normalised three-term recurrence.
    reference = _gegenbauer_recurrence(k, d, np.asarray(t))[k]
    assert abs(float(gegenbauer(k, d, t)) - float(reference)) <= max(k * k, 1) * EPS


@pytest.mark.parametrize("t", [1.0, 0.9999, 0.999, -0.9995, 0.98, 0.3])
def test_gegenbauer_overflow_region_against_mpmath(t: float) -> None:
    # d = 1000, k = 2000: binom(k + a, k) ~ e^1250 overflows, so the recurrence path is used.
    d, k = 1000, 2000
    mpmath.mp.dps = 40
    alpha = mpmath.mpf(d - 2) / 2
    reference = mpmath.gegenbauer(k, alpha, t) / mpmath.gegenbauer(k, alpha, 1)
    value = float(gegenbauer(k, d, t))
    assert math.isfinite(value) and abs(value) <= 1.0
    assert abs(value - float(reference)) <= 1e-13 * max(abs(float(reference)), 1e-300) + 1e-300


def test_gegenbauer_large_dimension_tends_to_monomial() -> None:
    # For fixed k and t, P_k(t) -> t^k as d -> infinity, with an O(k^2 / d) correction.
    t = np.linspace(-1.0, 1.0, 41)  # (41,)
    for k in (1, 2, 3, 6):
        deviation = np.max(np.abs(np.asarray(gegenbauer(k, 10**7, t)) - t**k))
        assert deviation <= k * k / 10**7


@given(d=dimensions(2, 40), j=harmonic_degrees(0, 30))
def test_gegenbauer_orthogonality(d: int, j: int) -> None:
    # E[P_j P_k] = delta_jk / N(d, k) (addition theorem); Gauss-Jacobi with n >= (j + k + 1)/2 nodes is exact.
    k_max, n_nodes = 30, 32
    coefficients = gegenbauer_coefficients(lambda t: gegenbauer(j, d, t), d, k_max, n_nodes=n_nodes)  # (31,)
    expected = np.zeros(k_max + 1)
    expected[j] = 1.0 / num_harmonics(d, j)
    # Rounding budget of a weighted n-term dot product, n eps sum_i w_i |P_j P_k|, times (j + k + 1) for the
    # O(eps) node errors of the rule amplified by |P_k'| = O(k) (Bernstein's inequality, away from the ends).
    nodes, weights = special.roots_jacobi(n_nodes, (d - 3) / 2, (d - 3) / 2)
    weights = weights / weights.sum()
    table = np.abs(_gegenbauer_recurrence(k_max, d, nodes))  # (31, n_nodes)
    scale = table @ (weights * table[j])  # (31,) sum_i w_i |P_k(t_i) P_j(t_i)|
    degrees = np.arange(k_max + 1)
    tolerance = (j + degrees + 1) * n_nodes * EPS * scale
    worst = int(np.argmax(np.abs(coefficients - expected) / tolerance))
    assert abs(coefficients[worst] - expected[worst]) <= tolerance[worst], f"k = {worst}"


@pytest.mark.parametrize("d", [2, 3, 5, 16])
@pytest.mark.parametrize("s", [0.5, 3.0])
def test_gegenbauer_coefficients_of_exponential(d: int, s: float) -> None:
    # Funk-Hecke with a Bessel function: E[exp(s t) P_k(t)] = Gamma(d/2) (2/s)^{d/2-1} I_{k+d/2-1}(s).
    k_max = 20
    coefficients = gegenbauer_coefficients(lambda t: np.exp(s * t), d, k_max)
    k = np.arange(k_max + 1)
    reference = special.gamma(d / 2) * (2.0 / s) ** (d / 2 - 1) * special.iv(k + d / 2 - 1, s)
    # exp(s t) is entire: the 104-node rule is exact to rounding; coefficients are O(1) sums.
    assert np.max(np.abs(coefficients - reference)) <= 1e-14 * max(1.0, math.exp(s))


def _sign_coefficient_by_half_interval_quadrature(d: int, k: int, n_nodes: int) -> float:
    """beta_k = E[sign P_k] = int_0^1 P_k w / int_0^1 w, w = (1 - t^2)^{(d-3)/2}, for odd k.

    In the polar angle t = cos(phi), w dt = sin(phi)^{d-2} dphi: the integrand P_k(cos phi) sin(phi)^{d-2} is entire,
    so Gauss-Legendre on [0, pi/2] converges geometrically (splitting at t = 0 removes the jump of sign).
    """
    x, weights = special.roots_legendre(n_nodes)  # (n_nodes,) on [-1, 1]
    phi = (x + 1.0) * math.pi / 4.0  # (n_nodes,) in [0, pi/2]
    density = np.sin(phi) ** (d - 2)
    values = np.asarray(gegenbauer(k, d, np.cos(phi)))
    return float(np.sum(weights * density * values) / np.sum(weights * density))


@pytest.mark.parametrize("d", [2, 3, 4, 6, 17, 64])
@pytest.mark.parametrize("k", [1, 3, 7, 15, 31])
def test_sign_coefficient_against_split_quadrature(d: int, k: int) -> None:
    n = k + d + 40
    coarse = _sign_coefficient_by_half_interval_quadrature(d, k, n)
    fine = _sign_coefficient_by_half_interval_quadrature(d, k, 2 * n)
    beta = sign_coefficient(d, k)
    # Converged: doubling the rule moves the value by rounding only (n-term sums of O(1) terms: n eps).
    assert abs(coarse - fine) <= 2 * n * EPS
    assert abs(fine - beta) <= 2 * n * EPS + FLOAT_RTOL * abs(beta)


# ---------------------------------------------------------------------------------------------------------------------
# Sign coefficients and energies
# ---------------------------------------------------------------------------------------------------------------------


@given(d=dimensions(2, 12), k=harmonic_degrees(0, 25))
@example(d=2, k=1)
@example(d=3, k=25)
def test_float_versions_agree_with_exact(d: int, k: int) -> None:
    beta_exact = float(sign_coefficient_exact(d, k))
    energy_exact = float(sign_energy_exact(d, k))
    assert abs(sign_coefficient(d, k) - beta_exact) <= FLOAT_RTOL * abs(beta_exact)
    assert abs(float(sign_energy(d, k)) - energy_exact) <= FLOAT_RTOL * energy_exact
    if k % 2 == 0:
        assert beta_exact == 0.0 and energy_exact == 0.0
        assert float(log_sign_energy(d, k)) == -math.inf and float(log_abs_sign_coefficient(d, k)) == -math.inf


@pytest.mark.parametrize(("d", "k"), [(50, 1), (50, 101), (200, 61), (333, 7), (1000, 251)])
def test_log_versions_against_exact_at_moderate_size(d: int, k: int) -> None:
    log_energy = sympy.log(sign_energy_exact(d, k)).evalf(40)
    log_beta = sympy.log(abs(sign_coefficient_exact(d, k))).evalf(40)
    assert abs(float(log_sign_energy(d, k)) - float(log_energy)) <= FLOAT_RTOL * max(1.0, abs(float(log_energy)))
    # betaln's absolute error grows like eps * lgamma(d + k).
    tolerance = 8 * EPS * (abs(special.gammaln(d + k)) + 1.0)
    assert abs(float(log_abs_sign_coefficient(d, k)) - float(log_beta)) <= tolerance


def test_exact_values_are_rationals_times_powers_of_pi() -> None:
    assert sign_energy_exact(3, 1) == sympy.Rational(3, 4)
    assert sign_coefficient_exact(2, 1) == 2 / sympy.pi
    assert sign_energy_exact(2, 5) == 8 / (25 * sympy.pi**2)  # square wave: e_k = 8 / (pi^2 k^2)
    assert sign_energy_exact(6, 4) == 0


@pytest.mark.parametrize("j", range(0, 21))
def test_d3_matches_classical_legendre_series(j: int) -> None:
    # sign(x) = sum_j (-1)^j (4j + 3) (2j)! / (2^{2j+1} j! (j+1)!) P_{2j+1}(x), so beta_{2j+1} is that over (4j + 3).
    classical = (
        sympy.Integer(-1) ** j
        * sympy.factorial(2 * j)
        / (2 ** (2 * j + 1) * sympy.factorial(j) * sympy.factorial(j + 1))
    )
    assert sympy.simplify(sign_coefficient_exact(3, 2 * j + 1) - classical) == 0


@pytest.mark.parametrize("k", [1, 3, 5, 11, 21, 51])
def test_large_dimension_limit(k: int) -> None:
    # e_k -> (2/pi) ((k-2)!!)^2 / k! as d -> infinity; measured first-order correction ~ k / (2d).
    limit = 2.0 / math.pi * float(sympy.factorial2(k - 2) ** 2 / sympy.factorial(k))
    deviations = []
    for d in (10**5, 10**6):
        deviation = math.exp(float(log_sign_energy(d, k))) / limit - 1.0
        assert abs(deviation) <= k / d
        deviations.append(deviation)
    assert 8.0 <= deviations[0] / deviations[1] <= 12.0  # deviation = O(1/d): a tenfold d shrinks it tenfold


def test_log_sign_energy_vectorised_and_finite_at_1e5() -> None:
    k = np.arange(0, 10**5 + 1)  # (100001,)
    for d in (2, 64, 10**5):
        logs = np.asarray(log_sign_energy(d, k))
        assert logs.shape == k.shape
        assert np.all(np.isfinite(logs[1::2])) and np.all(logs[0::2] == -np.inf)
        assert np.array_equal(np.asarray(sign_energy(d, k[:9])), np.exp(logs[:9]))
    grid = np.array([[1, 3], [5, 7]])
    assert np.asarray(sign_energy(5, grid)).shape == (2, 2)


# ---------------------------------------------------------------------------------------------------------------------
# Parseval and the tail
# ---------------------------------------------------------------------------------------------------------------------


@given(d=dimensions(2, 64), K=st.integers(0, 3000))
@example(d=2, K=0)
@example(d=64, K=3000)
def test_partial_sums_plus_tail_equal_one(d: int, K: int) -> None:
    partial = math.fsum(np.asarray(sign_energy(d, np.arange(K + 1))).tolist())
    # each term has a few ulps of relative error and they add to <= 1; the tail adds its quadrature error.
    assert abs(partial + sign_energy_tail(d, K) - 1.0) <= 16 * EPS + TAIL_RTOL * sign_energy_tail(d, K)


@pytest.mark.parametrize(("d", "K"), [(1000, 10**5), (10**5, 2 * 10**5), (7, 10**6)])
def test_partial_sums_plus_tail_equal_one_large(d: int, K: int) -> None:
    partial = math.fsum(np.asarray(sign_energy(d, np.arange(K + 1))).tolist())
    assert abs(partial + sign_energy_tail(d, K) - 1.0) <= 16 * EPS + TAIL_RTOL * sign_energy_tail(d, K)


@pytest.mark.parametrize("K", [0, 1, 10, 1001, 10**6 + 1, 10**9, 10**12])
def test_tail_d2_closed_form(K: int) -> None:
    # d = 2: e_k = 8 / (pi^2 k^2), so sum_{k odd > K} e_k = (8 / pi^2) sum_i 1 / (f + 2i)^2 = (2 / pi^2) psi'(f / 2)
    # with f the first odd degree above K (psi' = trigamma).
    first = K + 1 if K % 2 == 0 else K + 2
    reference = 2.0 / math.pi**2 * float(special.polygamma(1, first / 2.0))
    assert abs(sign_energy_tail(2, K) / reference - 1.0) <= TAIL_RTOL


_GOSPER_TAILS: dict[int, object] = {}


def _gosper_tail(d: int, J: int) -> float:
    """sum_{j >= J} e_{2j+1} for odd d from Gosper's algorithm: T(j) = R(j) a(j) with T(j+1) - T(j) = a(j), so the
    tail is -T(J). The summand a(j) = N(d, 2j+1) beta_{2j+1}^2 is written out here from docs/paper.md's formulas."""
    if d not in _GOSPER_TAILS:
        j = sympy.Symbol("j", integer=True, nonnegative=True)
        D, half = sympy.Integer(d), sympy.Rational(1, 2)
        n_dim = (4 * j + D) * sympy.gamma(2 * j + D - 1) / (sympy.gamma(2 * j + 2) * sympy.gamma(D - 1))
        beta = sympy.gamma(D / 2) * sympy.gamma(j + half) / (sympy.pi * sympy.gamma(j + (D + 1) / 2))
        summand = n_dim * beta**2
        ratio = gosper_term(summand, j)
        assert ratio is not None, "odd d is Gosper-summable"
        _GOSPER_TAILS[d] = sympy.lambdify(j, -ratio * summand, "mpmath")
    mpmath.mp.dps = 30
    return float(_GOSPER_TAILS[d](mpmath.mpf(J)))  # type: ignore[operator]


@pytest.mark.parametrize("d", [3, 5, 7])
@pytest.mark.parametrize("K", [0, 4, 999, 123456, 10**9])
def test_tail_odd_dimension_gosper_closed_form(d: int, K: int) -> None:
    first = K + 1 if K % 2 == 0 else K + 2
    reference = _gosper_tail(d, (first - 1) // 2)
    assert abs(sign_energy_tail(d, K) / reference - 1.0) <= TAIL_RTOL


@pytest.mark.parametrize("d", [10**7, 10**9])
@pytest.mark.parametrize("K", [11, 101, 1001, 10001])
def test_tail_order_below_dimension(d: int, K: int) -> None:
    # K << d: tail = c K^{-1/2} (1 + O(1/K) + O(K/d)); measured coefficients ~ -0.42 / K and ~ -0.5 K / d.
    tail = sign_energy_tail(d, K)
    assert abs(tail * math.sqrt(K) / TAIL_CONSTANT - 1.0) <= 1.0 / K + K / d
    slope = math.log(sign_energy_tail(d, 2 * K + 1) / tail) / math.log((2 * K + 1) / K)
    assert abs(slope + 0.5) <= 1.0 / K + 2 * K / d


@pytest.mark.parametrize("d", [4, 16, 64, 256])
@pytest.mark.parametrize("ratio", [100, 1000, 10000])
def test_tail_order_above_dimension(d: int, ratio: int) -> None:
    # K >> d: tail = c sqrt(d) / K (1 + O(1/d) + O(d/K)); measured coefficients ~ -0.76 / d and ~ -0.45 d / K.
    K = ratio * d + 1
    tail = sign_energy_tail(d, K)
    assert abs(tail * K / (TAIL_CONSTANT * math.sqrt(d)) - 1.0) <= 1.0 / d + d / K
    slope = math.log(sign_energy_tail(d, 2 * K + 1) / tail) / math.log((2 * K + 1) / K)
    assert abs(slope + 1.0) <= d / K


def test_tail_is_monotone_and_starts_at_one() -> None:
    for d in (2, 3, 64, 10**5):
        tails = [sign_energy_tail(d, K) for K in range(0, 12)]
        assert abs(tails[0] - 1.0) <= 16 * EPS
        assert all(later <= earlier for earlier, later in zip(tails, tails[1:], strict=False))
        # odd degrees carry the energy: the tail only drops when K passes an odd degree.
        assert abs(tails[1] - (1.0 - float(sign_energy(d, 1)))) <= 16 * EPS


# ---------------------------------------------------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: num_harmonics(1, 3), "d"),
        (lambda: num_harmonics(True, 3), "d"),
        (lambda: num_harmonics(3, -1), "k"),
        (lambda: log_num_harmonics(3, np.array([1, -2])), "k"),
        (lambda: gegenbauer(1.5, 3, 0.2), "k"),  # type: ignore[arg-type]
        (lambda: gegenbauer(2, 0, 0.2), "d"),
        (lambda: gegenbauer(2, 3, [0.1, float("nan")]), "t"),
        (lambda: sign_coefficient(3.5, 1), "d"),  # type: ignore[arg-type]
        (lambda: sign_energy(3, [1, -1]), "k"),
        (lambda: sign_energy(3, np.array([1.5])), "k"),
        (lambda: sign_energy(3, np.array([True])), "k"),
        (lambda: log_sign_energy(3, "1"), "k"),
        (lambda: log_abs_sign_coefficient(1, 1), "d"),
        (lambda: sign_coefficient_exact(3, -3), "k"),
        (lambda: sign_energy_exact(1, 1), "d"),
        (lambda: sign_energy_tail(3, -1), "K"),
        (lambda: gegenbauer_coefficients(1.0, 3, 4), "f"),  # type: ignore[arg-type]
        (lambda: gegenbauer_coefficients(np.sin, 3, -1), "k_max"),
        (lambda: gegenbauer_coefficients(np.sin, 3, 4, n_nodes=0), "n_nodes"),
        (lambda: gegenbauer_coefficients(lambda t: t[:2], 3, 4, n_nodes=8), "f(t)"),
    ],
)
def test_bad_arguments_raise_value_error_naming_parameter(call, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} must"):
        call()


@given(k=odd_degrees(61))
def test_sign_coefficient_signs_alternate(k: int) -> None:
    # beta_{2j+1} has sign (-1)^j: sign(t) P_k(t) integrates positively for k = 1 mod 4.
    expected = 1.0 if (k // 2) % 2 == 0 else -1.0
    for d in (2, 5, 40):
        assert math.copysign(1.0, sign_coefficient(d, k)) == expected
