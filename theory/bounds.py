"""Theorem 2 as a computable, certified number, its two asymptotic regimes, and Fact 1's exact full-rank error.

docs/paper.md section 3. For N = 2 keys from D_2, any H-head rank-r generalized attention f satisfies

    E||f - f*||^2 >= B(d, r, H) = (1/2) sum_{k odd} e_k [1 - H rho_k]_+,   rho_k = C(k + r - 1, r - 1) / N(d, k),

with e_k the degree-k energy of sign (theory.harmonics; sum_k e_k = 1) and N(d, k) the number of degree-k spherical
harmonics. ``rank_lower_bound`` returns a certified interval [lower, upper] containing B.

Facts about rho_k used below (derived here, checked in tests/test_bounds.py):

* rho is non-increasing in k when r <= d - 1:
  rho_{k+1} / rho_k = (k + r)(2k + d - 2) / ((k + d - 2)(2k + d)) <= 1 (the two factors are <= 1 for r <= d - 2;
  for r = d - 1 the product is (2k^2 + (3d-4)k + (d-1)(d-2)) / (2k^2 + (3d-4)k + d(d-2)) < 1 for d > 2, = 1 for d = 2).
  Hence the bracket b_k = [1 - H rho_k]_+ is non-decreasing in k, b_k = 0 below the first odd k0 with H rho_k < 1.
* N(d, k) = C(k + d - 2, d - 2) + C(k + d - 3, d - 2) and C(k+d-3, d-2) / C(k+d-2, d-2) = k / (k + d - 2), so for
  r = d - 1, rho_k = (k + d - 2) / (2k + d - 2), decreasing to 1/2 (the bound is exactly 0 as soon as H >= 2);
  for r <= d - 2, rho_k -> 0 (b_k -> 1).
* For r = d, C(k + d - 1, d - 1) >= N(d, k) (all degree-k polynomials vs harmonic ones): the bound is exactly 0.

Truncation: the odd degrees below k0 contribute exactly 0; the odd degrees k0 .. K are summed term by term
(``math.fsum``); the rest, sum_{k > K} e_k b_k, lies in [b_{K+2} T(K), b_inf T(K)] by monotonicity of b, with
T(K) = sum_{k > K} e_k (exact remainder: 1 - partial sum for K <= 2^15, else ``theory.harmonics.sign_energy_tail``)
and b_inf = lim b_k (1 for r <= d - 2, [1 - H/2]_+ for r = d - 1). When that bracket is narrower than
``_TARGET_WIDTH`` the sum stops. When b_k approaches b_inf slowly (near full rank, where 1 - b_k/b_inf ~ 1/k, and
when k0 is huge, i.e. astronomically many heads) the bracket would need millions of terms; instead, once K >= 1001
and u_k = H e_k rho_k changes by at most 2% per step, the remainder is computed as
sum_{k > K} e_k b_k = T(K) - H sum_{k > K} e_k rho_k (every bracket past k0 is positive) with the second sum by
Euler-Maclaurin on the analytic extension of u (``theory.euler_maclaurin``), whose error budget is 100 times the
first omitted term plus the log-space rounding budget; the interval is intersected with the monotone bracket.
This keeps every evaluation with d <= 1024 to a few ms (benchmarks/bench_bound.py) and widths near 1e-12 (e.g.
7e-12 at d = 64, r = 62, H = 1; 5e-15 at d = 64, r = 8, H = 1e300, where the monotone bracket alone left 1e-7).

Rounding: log rho_k goes through scipy's ``betaln(a, b)``, whose absolute error is <= 22 eps (a + b + |betaln|)
(measured against mpmath for a, b up to 1e12, see tests/test_bounds.py); log e_k comes from theory.harmonics (a few
ulps). Each exponentiated term gets a relative error budget: delta_e = 64 eps (16 + |log e_k|) for e_k and
delta_rho = 64 eps (16 + 4 (k + d + r) + 3 |log rho_k|) for rho_k; the lower end is lowered and the upper end raised
by sum_k e_k (delta_e b_k + delta_rho H rho_k) plus 4 eps (fsum is correctly rounded), and T(K) carries its own
budget (``_energy_tail``). The interval is thus certified up to the stated accuracy of the helper functions it uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import sympy
from scipy import integrate, special

from theory.euler_maclaurin import log_gamma_ratio_derivative, log_linear_derivative, odd_degree_tail
from theory.harmonics import (
    log_num_harmonics_real,
    log_sign_energy,
    log_sign_energy_derivatives,
    log_sign_energy_real,
    num_harmonics,
    sign_energy_exact,
    sign_energy_tail,
)
from theory.sphere import coordinate_density, coordinate_density_constant
from theory.validation import check_dimension, check_int, check_rank, check_real, check_temperature

FloatArray = npt.NDArray[np.float64]

_EPS = float(np.finfo(np.float64).eps)
# Stop adding explicit terms once the remainder interval is narrower than this (absolute, on the sum before the 1/2).
_TARGET_WIDTH = 1e-14
# Explicit odd degrees summed at most (in chunks that double); beyond it the remainder interval stays as it is.
_MAX_TERMS = 1 << 16
_FIRST_CHUNK = 256
# Odd degrees must be exact in float64 (the explicit sum) and in int64 (sign_energy_tail).
_MAX_EXPLICIT_DEGREE = 1 << 52
# Relative error budget per exponentiated log-space term, in units of eps * Lambda (see module docstring).
_ROUNDING_FACTOR = 64.0
# min_heads refuses answers above 10^_MAX_LOG10_HEADS (Python prints ints of at most 4300 digits by default).
_MAX_LOG10_HEADS = 4096
# Tails up to this degree are 1 - (partial sum), beyond it theory.harmonics.sign_energy_tail.
_DIRECT_TAIL_DEGREE = 1 << 15
# The Euler-Maclaurin remainder of H sum_k e_k rho_k is used from this last explicit degree on, and only where
# u(k) = e_k rho_k changes slowly over one step of 2: 2 |(log u)'(m)| <= _EM_MAX_STEP_SLOPE.
_EM_MIN_DEGREE = 1001
_EM_MAX_STEP_SLOPE = 0.02
# The Euler-Maclaurin error budget is _EM_SAFETY times the omitted-term estimate plus the log-space rounding budget.
_EM_SAFETY = 100.0


@dataclass(frozen=True)
class BoundInterval:
    """A certified interval [lower, upper] containing Theorem 2's bound B(d, r, H); iterable as (lower, upper)."""

    lower: float
    upper: float

    def __post_init__(self) -> None:
        lower = check_real("lower", self.lower)
        upper = check_real("upper", self.upper, minimum=lower)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    def __iter__(self) -> Any:
        return iter((self.lower, self.upper))

    @property
    def width(self) -> float:
        return self.upper - self.lower


def _log_heads(H: Any) -> float:
    """Natural log of a head count given as a (possibly huge) Python int."""
    return math.log(H)  # math.log is exact-rounded-ish for ints of any size (no float conversion overflow)


def _check_bound_heads(H: Any) -> int:
    if isinstance(H, float) and not math.isfinite(H):
        raise ValueError(f"H must be an integer >= 1, got {H!r}")
    return check_int("H", H, minimum=1)


def log_rank_capacity(d: int, r: int, k: Any) -> float | FloatArray:
    """log rho_k = log C(k + r - 1, r - 1) - log N(d, k): share of degree-k harmonics one rank-r head can express.

    Args:
        d: dimension >= 2.  r: rank, 1 <= r <= d.
        k: degree >= 1, integer or integer array (any shape; float arrays of integral values are accepted).
    Returns:
        log rho_k, float or array of k's shape.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    scalar = np.ndim(k) == 0
    x = np.asarray(k, dtype=np.float64)
    if np.any(x < 1) or not np.all(np.isfinite(x)):
        raise ValueError("k must be an integer >= 1 (or an array of them)")
    values = _log_rank_capacity_real(d, r, x)
    return float(values) if scalar else values


def _log_rank_capacity_real(d: int, r: int, x: FloatArray) -> FloatArray:
    """log rho(x) for real x >= 1 (the analytic extension; shape of x), through betaln (accurate for huge x)."""
    # C(x + r - 1, r - 1) = 1 / ((x + r) B(x + 1, r)); N(d, x) from theory.harmonics (also through betaln).
    log_comb = -np.log(x + r) - special.betaln(x + 1.0, float(r))
    return np.asarray(log_comb - log_num_harmonics_real(d, x), dtype=np.float64)


def _rounding_budgets(
    d: int, r: int, k: FloatArray, log_e: FloatArray, log_rho: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Relative error budgets of e_k and of rho_k after exponentiation (module docstring), shapes of k."""
    delta_e = _ROUNDING_FACTOR * _EPS * (16.0 + np.abs(log_e))
    delta_rho = _ROUNDING_FACTOR * _EPS * (16.0 + 4.0 * (k + d + r) + 3.0 * np.abs(log_rho))
    return delta_e, delta_rho


def _energy_tail(d: int, K: int) -> tuple[float, float]:
    """T(K) = sum_{k > K} e_k and an absolute error budget for it.

    Up to _DIRECT_TAIL_DEGREE: 1 - fsum(e_1, ..., e_K) (cheap; absolute error <= sum_k e_k delta_k + 2 eps, which is
    all the bound needs since T enters additively). Beyond: theory.harmonics.sign_energy_tail (a few ulps relative,
    budgeted as 1e-13 relative).
    """
    if K <= _DIRECT_TAIL_DEGREE:
        k = np.arange(1, K + 1, 2, dtype=np.int64)  # (K//2 + 1,) odd degrees
        log_e = np.asarray(log_sign_energy(d, k), dtype=np.float64)
        energy = np.exp(log_e)
        delta_e = _ROUNDING_FACTOR * _EPS * (16.0 + np.abs(log_e))
        tail = 1.0 - math.fsum(energy.tolist())
        error = float(np.sum(energy * delta_e)) + 4 * _EPS
        return max(tail, 0.0), error
    tail = sign_energy_tail(d, K)
    return tail, 1e-13 * tail


def _log_capacity_derivatives(d: int, r: int, x: float) -> tuple[float, float, float]:
    """First three derivatives of log rho(x) = log Gamma(x + r) - log Gamma(x + d - 2) - log(2x + d - 2) + const.

    (C(x + r - 1, r - 1) = Gamma(x + r) / (Gamma(x + 1) Gamma(r)) and
    N(d, x) = (2x + d - 2) Gamma(x + d - 2) / (Gamma(x + 1) Gamma(d - 1)); the Gamma(x + 1) cancel.)
    """
    values = [
        log_gamma_ratio_derivative(n - 1, x, float(r), float(d - 2)) - log_linear_derivative(n, x, 2.0, float(d - 2))
        for n in (1, 2, 3)
    ]
    return values[0], values[1], values[2]


def _weighted_tail(d: int, r: int, log_h: float, m: int) -> tuple[float, float] | None:
    """H sum_{odd k > m} e_k rho_k by Euler-Maclaurin (theory.euler_maclaurin) and an absolute error budget.

    Returns None where the formula is not trusted: m < _EM_MIN_DEGREE, or u = e rho H changes by more than
    _EM_MAX_STEP_SLOPE (relative) per step of 2 at m. The budget is _EM_SAFETY times the first omitted term plus the
    log-space rounding budget of u, 64 eps (16 + |log H| + |log e_m| + |log rho_m| + 4 (m + d + r)) relative (the
    per-term budget of the explicit sum, with betaln's error growing with its arguments; tests/test_euler_maclaurin.py
    checks the formula against Hurwitz zeta sums and direct sums).
    """
    if m < _EM_MIN_DEGREE:
        return None
    e1, e2, e3 = log_sign_energy_derivatives(d, float(m))
    c1, c2, c3 = _log_capacity_derivatives(d, r, float(m))
    slope = e1 + c1
    if 2.0 * abs(slope) > _EM_MAX_STEP_SLOPE:
        return None

    def log_weighted(x: FloatArray) -> FloatArray:
        return log_sign_energy_real(d, x) + _log_rank_capacity_real(d, r, x) + log_h

    estimate, omitted = odd_degree_tail(log_weighted, (slope, e2 + c2, e3 + c3), m, float(d))
    x = np.asarray(float(m))
    log_sizes = abs(log_h) + abs(float(log_sign_energy_real(d, x))) + abs(float(_log_rank_capacity_real(d, r, x)))
    rounding = _ROUNDING_FACTOR * _EPS * (16.0 + log_sizes + 4.0 * (m + d + r))
    return estimate, _EM_SAFETY * omitted + rounding * abs(estimate)


def _first_active_degree(d: int, r: int, log_h: float) -> int | None:
    """Smallest odd k with log H + log rho_k < 0 (None if there is none: rho_k >= 1/H for every k)."""
    limit_log = -math.inf if r <= d - 2 else math.log(0.5)  # lim log rho_k
    if r >= d or log_h + limit_log >= 0.0:
        return None

    def active(j: int) -> bool:  # odd degree 2j + 1
        return log_h + float(log_rank_capacity(d, r, 2 * j + 1)) < 0.0

    if active(0):
        return 1
    hi = 1
    while not active(hi):
        hi *= 2
        if 2 * hi + 1 > 1 << 62:
            return (1 << 62) + 1  # beyond int64: handled by the caller as "far out"
    lo = hi // 2  # active(lo) is False, active(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if active(mid):
            hi = mid
        else:
            lo = mid
    return 2 * hi + 1


def rank_lower_bound(d: int, r: int, H: Any) -> BoundInterval:
    """Certified interval for Theorem 2's bound (1/2) sum_{k odd} e_k [1 - H C(k+r-1, r-1)/N(d,k)]_+.

    Args:
        d: dimension, integer >= 2 (tested up to 1e4).
        r: query/key rank, 1 <= r <= d.
        H: number of heads, integer >= 1 (Python ints beyond float range are fine; tested up to 1e300).
    Returns:
        BoundInterval(lower, upper) with 0 <= lower <= B(d, r, H) <= upper <= 1/2.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    H = _check_bound_heads(H)
    log_h = _log_heads(H)
    k0 = _first_active_degree(d, r, log_h)
    if k0 is None:
        return BoundInterval(0.0, 0.0)
    b_inf = 1.0 if r <= d - 2 else max(0.0, 1.0 - H / 2.0)
    if k0 > _MAX_EXPLICIT_DEGREE:
        # Every degree below k0 contributes 0 and every term is <= e_k: B <= T(K) / 2 for the last odd K < k0 we
        # can represent. T(2^52) < 1e-13 * sqrt(d), so this only concerns bounds that are essentially 0.
        tail = sign_energy_tail(d, _MAX_EXPLICIT_DEGREE - 1)
        return BoundInterval(0.0, min(0.5, 0.5 * b_inf * tail * (1.0 + 1e-12)))
    start = max(1, k0 - 4)  # a few degrees before k0 so that rounding at the boundary is covered by the pad
    total = 0.0
    pad = 0.0
    count = 0
    chunk = _FIRST_CHUNK
    next_k = start
    while True:
        n_terms = min(chunk, _MAX_TERMS - count, (_MAX_EXPLICIT_DEGREE - next_k) // 2)
        k: FloatArray = next_k + 2.0 * np.arange(n_terms, dtype=np.float64)  # (n_terms,) odd degrees
        k_int = k.astype(np.int64)
        log_e = np.asarray(log_sign_energy(d, k_int), dtype=np.float64)  # (n_terms,)
        log_rho = np.asarray(log_rank_capacity(d, r, k), dtype=np.float64)  # (n_terms,)
        exponent = np.minimum(log_h + log_rho, 1.0)  # log(H rho_k), capped: only whether it exceeds 0 matters
        bracket = np.maximum(0.0, -np.expm1(exponent))  # [1 - H rho_k]_+
        energy = np.exp(log_e)
        delta_e, delta_rho = _rounding_budgets(d, r, k, log_e, log_rho)
        terms = energy * bracket
        total += math.fsum(terms.tolist())
        # error of e_k times the bracket, plus e_k times the error of the bracket (H rho_k delta_rho)
        pad += float(np.sum(energy * (delta_e * bracket + delta_rho * np.exp(exponent))))
        count += n_terms
        next_k = int(k_int[-1]) + 2
        b_next = max(0.0, -math.expm1(min(log_h + float(log_rank_capacity(d, r, next_k)), 1.0)))
        if (b_inf - b_next) <= _TARGET_WIDTH or count >= _MAX_TERMS or next_k + 2 * chunk > _MAX_EXPLICIT_DEGREE:
            weighted = None
            break
        # Slow convergence (b_k -> b_inf like a power of 1/k): switch to the Euler-Maclaurin remainder.
        weighted = _weighted_tail(d, r, log_h, next_k - 2)
        if weighted is not None:
            break
        chunk *= 2
    last = next_k - 2  # last odd degree summed explicitly
    tail, tail_error = _energy_tail(d, last)
    # remainder sum_{k > last} e_k b_k in [b_next T, b_inf T] (b non-decreasing) ...
    remainder_low, remainder_high = b_next * (tail - tail_error), b_inf * (tail + tail_error)
    if weighted is not None:
        # ... and = T - H sum_{k > last} e_k rho_k (every bracket past k0 is positive), the tighter of the two
        weighted_sum, weighted_error = weighted
        remainder_low = max(remainder_low, tail - tail_error - weighted_sum - weighted_error)
        remainder_high = min(remainder_high, tail + tail_error - weighted_sum + weighted_error)
    rounding = pad + 4 * _EPS * (total + 1.0)
    low_sum = total - rounding + remainder_low
    high_sum = total + rounding + remainder_high
    lower = min(0.5, max(0.0, 0.5 * low_sum))
    upper = min(0.5, max(lower, 0.5 * high_sum))
    return BoundInterval(lower, upper)


def rank_lower_bound_exact(d: int, r: int, H: int, k_max: int) -> sympy.Expr:
    """Exact truncated bound (1/2) sum_{k odd <= k_max} e_k [1 - H C(k+r-1, r-1)/N(d,k)]_+ in sympy arithmetic.

    The bracket is an exact rational; e_k comes from ``theory.harmonics.sign_energy_exact`` (rational, or rational
    over pi^2 for even d). The untruncated bound lies in [this + b_{k_max+2} T(k_max)/2, this + T(k_max)/2].

    Args:
        d: dimension >= 2.  r: rank, 1 <= r <= d.  H: heads >= 1 (exact int).
        k_max: last degree included, integer >= 1 (keep it small: cost grows like k_max times sympy simplification).
    Returns:
        sympy expression (exact).
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    H = _check_bound_heads(H)
    k_max = check_int("k_max", k_max, minimum=1)
    total: sympy.Expr = sympy.Integer(0)
    for k in range(1, k_max + 1, 2):
        bracket = 1 - sympy.Rational(H * math.comb(k + r - 1, r - 1), num_harmonics(d, k))
        if bracket > 0:
            total += sign_energy_exact(d, k) * bracket
    return total / 2


# ---------------------------------------------------------------------------------------------------------------------
# The number of heads needed for a target error
# ---------------------------------------------------------------------------------------------------------------------


def _check_eps(eps: Any) -> float:
    return check_real("eps", eps, minimum=0.0, maximum=0.5, strict_minimum=True)


def min_heads(d: int, r: int, eps: float) -> int:
    """Smallest H whose certified LOWER end satisfies rank_lower_bound(d, r, H).lower <= eps.

    Certification: for every H' < min_heads(...), rank_lower_bound(d, r, H').lower > eps, so the true bound exceeds
    eps and no H'-head rank-r (generalized) attention reaches error eps on D_2: at least this many heads are needed.
    (The smallest H with B(d, r, H) <= eps itself can be larger only where the interval straddles eps.)

    Args:
        d: dimension >= 2.  r: rank, 1 <= r <= d.  eps: target error, 0 < eps <= 1/2.
    Returns:
        the head count as an exact Python int (may be astronomically large; see ``math.log10``).
    Raises:
        ValueError: eps out of (0, 1/2], eps so small that the answer exceeds 10^4096 heads, or so small that
            the certified interval near the answer is wider than eps (only for astronomically large answers).
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    eps = _check_eps(eps)

    def ok(h: int) -> bool:
        return rank_lower_bound(d, r, h).lower <= eps

    if ok(1):
        return 1
    # Exponential search on log10 H, then bisection on floats of log H, then on integers.
    log10_hi = 1.0
    while not ok(_int_from_log10(log10_hi)):
        log10_hi *= 2.0
        if log10_hi > _MAX_LOG10_HEADS:
            raise ValueError(
                f"eps = {eps} needs more than 10^{_MAX_LOG10_HEADS} heads at d = {d}, r = {r}; choose a larger eps"
            )
    lo, hi = 1, _int_from_log10(log10_hi)  # ok(lo) False, ok(hi) True
    _check_resolution(d, r, eps, hi)
    log10_lo = 0.0
    # Bisect in log space while the integers are far apart (each step halves the exponent range).
    while hi > 2 * lo + 1 and log10_hi - log10_lo > 1e-13 * max(1.0, log10_hi):
        mid_log = 0.5 * (log10_lo + log10_hi)
        mid = _int_from_log10(mid_log)
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            hi, log10_hi = mid, mid_log
        else:
            lo, log10_lo = mid, mid_log
    # Integer bisection; when H is beyond float resolution, log H takes few distinct values and this ends quickly
    # through the float-resolution check below.
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _log_heads(mid) == _log_heads(lo):
            lo = mid
            continue
        if _log_heads(mid) == _log_heads(hi):
            hi = mid
            continue
        if ok(mid):
            hi = mid
        else:
            lo = mid
    _check_resolution(d, r, eps, hi)
    return hi


def _check_resolution(d: int, r: int, eps: float, h: int) -> None:
    """Refuse answers where the certified interval at h is wider than eps (the crossing is not resolved)."""
    interval = rank_lower_bound(d, r, h)
    if interval.width > eps:
        raise ValueError(
            f"eps = {eps} is below what can be certified at d = {d}, r = {r}: near H = 10^{math.log10(h):.1f} the "
            f"bound is only known to lie in [{interval.lower:.3g}, {interval.upper:.3g}]; choose a larger eps"
        )


def _int_from_log10(log10_h: float) -> int:
    """An integer close to 10^log10_h (exact Python int, works beyond float range)."""
    if log10_h < 15:
        return max(1, round(10.0**log10_h))
    whole = math.floor(log10_h)
    mantissa = 10.0 ** (log10_h - whole)  # in [1, 10)
    digits = 15
    return int(round(mantissa * 10**digits)) * 10 ** (whole - digits)


# ---------------------------------------------------------------------------------------------------------------------
# The two regimes of Theorem 2, with explicit constants
# ---------------------------------------------------------------------------------------------------------------------
#
# Key inequality (for every odd K): the terms k >= K have rho_k <= rho_K, so
#     B(d, r, H) >= (1/2) (1 - H rho_K) T(K - 2),   T(K - 2) = sum_{k >= K} e_k.
# If T(K - 2) >= 4 eps, then B <= eps forces 1 - H rho_K <= 1/2, i.e.   H >= 1 / (2 rho_K).        (*)
# Let K_eps = the largest odd K with T(K - 2) >= 4 eps ("degree that must be captured").
#
# High-dimensional regime (d/r -> inf, eps fixed). From N(d,k) >= C(k + d - 2, k) and
# C(k + d - 2, k) / C(k + r - 1, k) = prod_{i=1..k} (d - 2 + i)/(r - 1 + i) >= ((d + k - 2)/(r + k - 1))^k,
#     log H_min >= K_eps log((d + K_eps - 2)/(r + K_eps - 1)) - log 2,
# i.e. H_min >= (d/r)^{K_eps (1 - o(1))} when K_eps << r. As d -> inf, e_k -> (2/pi) ((k-2)!!)^2 / k! ~ (2/pi)^{3/2}
# k^{-3/2}, so T(K) ~ (2/pi)^{3/2} K^{-1/2} and K_eps ~ (2/pi)^3 / (16 eps^2): the exponent is Theta(1/eps^2),
# stronger than the reported Omega(1/eps).
#
# High-accuracy regime (eps <= T(d - 2) / 4, which is of order 1/sqrt(d)). Then K_eps >= d, and (*) with K = d
# (rho non-increasing) gives H_min >= N(d, d) / (2 C(d + r - 1, r - 1)). With N(d, d) >= C(2d - 2, d)
# >= 4^{d-1} (d - 1) / ((2d - 1) d) and C(d + r - 1, r - 1) <= (e (d + r - 1)/(r - 1))^{r-1} (r >= 2; = 1 for r = 1):
#     log H_min >= (d - 1) log 4 - log(2d - 1) + log((d - 1)/d) - (r - 1) log(e (d + r - 1)/(r - 1)) - log 2,
# i.e. exp(Omega(d) - O(r log(d/r))) with the constants log 4 and 1.

HIGH_DIMENSIONAL_DEGREE_CONSTANT = (2.0 / math.pi) ** 3 / 16.0
"""K_eps ~ HIGH_DIMENSIONAL_DEGREE_CONSTANT / eps^2 as d -> inf (derived above)."""


def captured_degree(d: int, eps: float) -> int:
    """K_eps: the largest odd K with sum_{k >= K} e_k >= 4 eps (0 if even K = 1 fails, i.e. eps > 1/4).

    Args:
        d: dimension >= 2.  eps: target error in (0, 1/2].
    Returns:
        K_eps (int, odd, or 0).
    """
    d = check_dimension(d)
    eps = _check_eps(eps)
    if 4 * eps > 1.0:
        return 0

    # T(K - 2) is decreasing in K: exponential search, then bisection over odd K = 2j + 1.
    def enough(j: int) -> bool:
        return sign_energy_tail(d, 2 * j - 1) >= 4 * eps if j > 0 else True

    hi = 1
    while enough(hi):
        hi *= 2
        if hi > 1 << 60:
            raise ValueError(f"eps = {eps} is too small to locate the captured degree at d = {d}")
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            lo = mid
        else:
            hi = mid
    return 2 * lo + 1


def high_dimensional_regime(d: int, r: int, eps: float) -> float:
    """Derived lower bound on log(min_heads): K_eps log((d + K_eps - 2)/(r + K_eps - 1)) - log 2 (natural log).

    Args:
        d: dimension >= 2.  r: rank, 1 <= r <= d.  eps: target error in (0, 1/4].
    Returns:
        the natural log of a head count that min_heads(d, r, eps) is proven to reach (derivation above).
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    eps = check_real("eps", eps, minimum=0.0, maximum=0.25, strict_minimum=True)
    k_eps = captured_degree(d, eps)
    return k_eps * math.log((d + k_eps - 2) / (r + k_eps - 1)) - math.log(2.0)


def high_accuracy_regime(d: int, r: int, eps: float) -> float:
    """Derived lower bound on log(min_heads) for eps <= T(d - 2)/4: (d-1) log 4 - O(r log(d/r)) (natural log).

    Args:
        d: dimension >= 3.  r: rank, 1 <= r <= d.  eps: target error with 0 < eps <= sign_energy_tail(d, d - 2) / 4.
    Returns:
        (d - 1) log 4 - log(2d - 1) + log((d - 1)/d) - (r - 1) log(e (d + r - 1)/(r - 1)) - log 2.
    """
    d = check_dimension(d, minimum=3)
    r = check_rank(r, d)
    limit = sign_energy_tail(d, d - 2) / 4.0
    eps = check_real("eps", eps, minimum=0.0, maximum=limit, strict_minimum=True)
    capacity = 0.0 if r == 1 else (r - 1) * math.log(math.e * (d + r - 1) / (r - 1))
    return (d - 1) * math.log(4.0) - math.log(2 * d - 1) + math.log((d - 1) / d) - capacity - math.log(2.0)


# ---------------------------------------------------------------------------------------------------------------------
# Fact 1: one full-rank softmax head
# ---------------------------------------------------------------------------------------------------------------------
#
# Q = lambda I, K = V = I, N = 2 keys x_1 _|_ x_2 (D_2), query y. The softmax over two scores is a sigmoid:
# w_2 = sigmoid(-lambda <y, x_1 - x_2>). If x_1 is the nearest key, f - f* = -w_2 x_1 + w_2 x_2, so
# ||f - f*||^2 = 2 w_2^2 (orthonormal keys); symmetrically otherwise. With u = (x_1 - x_2)/sqrt 2 (a unit vector
# independent of y) and t = <y, u>:   E = 2 E[sigmoid(-sqrt2 lambda |t|)^2],  t ~ c_d (1 - t^2)^{(d-3)/2}.
# Substituting s = sqrt2 lambda t:  E = (4 c_d / (sqrt2 lambda)) int_0^{sqrt2 lambda} sigmoid(-s)^2 (1 - s^2/(2
# lambda^2))^{(d-3)/2} ds, and as lambda -> inf the integral tends to m_0 = int_0^inf (1 + e^s)^{-2} ds = ln 2 - 1/2
# (since (1+e^s)^{-2} = (1+e^s)^{-1} - e^s (1+e^s)^{-2}). Hence E ~ 2 sqrt2 (ln 2 - 1/2) c_d / lambda = C_d sqrt(d) /
# lambda with C_d = 2 sqrt2 (ln 2 - 1/2) c_d / sqrt(d) -> 2 (ln 2 - 1/2) / sqrt(pi) = 0.21795 (c_d ~ sqrt(d / (2 pi))).
# Next order: with a = (d-3)/2 and g(x) = (1-x)^a = 1 - a x + R(x), 0 <= R <= a(a-1) x^2 / 2 (a >= 2), the relative
# correction is E / asymptote - 1 = -a m_2 / (2 m_0 lambda^2) + O(a^2 m_4 / (8 m_0 lambda^4)) - O(e^{-2 sqrt2 lambda}),
# m_j = int_0^inf s^j (1+e^s)^{-2} ds (m_2 = 3 zeta(3)/2 - pi^2/6, m_4 = 45 zeta(5)/2 - 7 pi^4/30): O(d / lambda^2).

FULL_RANK_ASYMPTOTE_LIMIT = 2.0 * (math.log(2.0) - 0.5) / math.sqrt(math.pi)
"""lim_{d -> inf} C_d = 2 (ln 2 - 1/2) / sqrt(pi) = 0.21795..."""


def full_rank_error(d: int, temperature: float) -> float:
    """Fact 1: exact D_2 error of the softmax head Q = lambda I, K = V = I, as a 1-D integral (scipy quad).

    E = 2 E[sigmoid(-sqrt2 lambda |t|)^2] with t the coordinate density c_d (1 - t^2)^{(d-3)/2} (derivation above);
    temperature = inf (hardmax) gives exactly 0.

    Args:
        d: dimension >= 2.  temperature: lambda > 0 or math.inf.
    Returns:
        the error E||f - f*||^2 (float, accurate to ~1e-12 relative).
    """
    d = check_dimension(d)
    lam = check_temperature(temperature)
    if math.isinf(lam):
        return 0.0
    a = np.sqrt(2.0) * lam

    def sig2(t: float) -> float:
        return float(special.expit(-a * t) ** 2)

    # Effective support: sigmoid(-a t)^2 <= e^{-80} beyond t = 40/a, (1 - t^2)^{(d-3)/2} <= e^{-72} beyond 12/sqrt(d-3).
    cut = min(1.0, 40.0 / a, 12.0 / math.sqrt(d - 3) if d > 3 else 1.0)
    if cut < 0.5:
        value, _ = integrate.quad(
            lambda t: sig2(t) * coordinate_density(t, d), 0.0, cut, epsabs=0.0, epsrel=1e-12, limit=200
        )
    else:
        # Whole interval with the algebraic end-point weight (1 - t)^{(d-3)/2} handled by QUADPACK (d = 2 is singular).
        beta = 0.5 * (d - 3)
        c_d = coordinate_density_constant(d)
        value, _ = integrate.quad(
            lambda t: sig2(t) * c_d * (1.0 + t) ** beta,
            0.0,
            1.0,
            weight="alg",
            wvar=(0.0, beta),
            epsabs=0.0,
            epsrel=1e-12,
            limit=200,
        )
    return 4.0 * value  # 2 E[...] = 2 * 2 int_0^1 (symmetric density)


def full_rank_error_asymptote(d: int, temperature: float) -> float:
    """Fact 1's rate: C_d sqrt(d) / lambda with C_d = 2 sqrt2 (ln 2 - 1/2) c_d / sqrt(d) (-> 0.21795); 0 for hardmax.

    Args:
        d: dimension >= 2.  temperature: lambda > 0 or math.inf.
    Returns:
        2 sqrt2 (ln 2 - 1/2) c_d / lambda (float); relative error vs full_rank_error is O(d / lambda^2).
    """
    d = check_dimension(d)
    lam = check_temperature(temperature)
    if math.isinf(lam):
        return 0.0
    return full_rank_constant(d) * math.sqrt(d) / lam


def full_rank_constant(d: int) -> float:
    """C_d = 2 sqrt2 (ln 2 - 1/2) c_d / sqrt(d), the constant of Fact 1's rate (-> 0.21795 as d -> inf).

    Args:
        d: dimension >= 2.
    Returns:
        C_d (float).
    """
    d = check_dimension(d)
    return 2.0 * math.sqrt(2.0) * (math.log(2.0) - 0.5) * coordinate_density_constant(d) / math.sqrt(d)
