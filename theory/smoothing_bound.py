"""The Gaussian-smoothing lower bound of Theorem 3: low-rank heads barely correlate with the sawtooth part.

docs/paper.md section 4 (the argument is only sketched there; the derivation and constants below are ours).

Setting (theory/biased_target.py): F = A + O with O = z psi(s), z = x_1 - x_2, s = <z, y>, psi(s) = saw(s / delta),
y ~ N(0, I_d) independent of the keys. A head h of rank r (generalized attention) outputs f_h = V_h sum_i w_{h,i} x_i,
with weights w_{h,i} >= 0 summing to 1 that may be ANY function of (Q_h y, X) (score biases, positions, MLP scores...).
The model is f = sum_h f_h, optionally plus alpha A for any alpha (granting the simple part for free only strengthens
the model, so the bound below holds for the pure low-rank class a fortiori).

Derivation (every step rigorous unless marked):

1. Let P be the orthogonal projector onto the row space of Q_h (rank <= r; the worst case is rank exactly r, since a
   smaller row space only adds noise). y = P y + (I - P) y with independent Gaussian parts, and
   s = <z, P y> + <(I - P) z, y>, the second term N(0, sigma^2) given (P y, X) with sigma^2 = ||(I - P) z||^2.
2. Hence E[psi(s) | P y, X] = (psi * N(0, sigma^2))(<z, P y>) = sum_k sin(2 pi k t / delta) e^{-2 pi^2 k^2 sigma^2 /
   delta^2} / (pi k) (the sawtooth's Fourier series, each mode damped by its Gaussian characteristic function), whose
   absolute value is at most m(sigma) = min(1/2, sum_{k >= 1} e^{-2 pi^2 k^2 sigma^2 / delta^2} / (pi k)).
   f_h is a function of (Q_h y, X), so by the tower property
   |<f_h, O>| = |E[<f_h, z> E[psi | P y, X]]| <= ||V_h|| E[||z|| m(sigma)] =: ||V_h|| kappa(d, r),
   using ||sum_i w_i x_i|| <= 1. Under D_2, ||z|| = sqrt 2 and sigma^2 = 2 B with B ~ Beta((d - r)/2, r/2) (squared
   norm of the projection of a uniform direction onto a fixed (d - r)-plane); with i.i.d. keys ||z||^2 = 2 (1 - t),
   t = <x_1, x_2>, and sigma^2 = ||z||^2 B with B independent of t. kappa is computed by quadrature.
3. Let O' = O - (<O, A> / ||A||^2) A, orthogonal to A. For f = alpha A + sum_h f_h, by Cauchy-Schwarz
   ||F - f||^2 >= <F - f, O'>^2 / ||O'||^2 and <F - f, O'> = ||O'||^2 - sum_h <f_h, O'>, with
   |<f_h, O'>| <= |<f_h, O>| + (|<O, A>| / ||A||) ||f_h|| <= ||V_h|| (kappa + eta), eta = |<O, A>| / ||A||.
   So, with S = sum_h ||V_h|| <= H max_h ||V_h||:
       E ||F - f||^2 >= ([||O'||^2 - S (kappa + eta)]_+)^2 / ||O'||^2          (`error_floor`).
4. Closed form (rigorous for 2 <= r < d, D_2): E_B e^{-lambda B} <= Gamma(d/2) / Gamma(r/2) lambda^{-(d-r)/2} (drop
   (1 - x)^{r/2 - 1} <= 1), so kappa <= (sqrt 2 / pi) zeta(d - r + 1) Gamma(d/2) / Gamma(r/2) (delta / (2 pi))^{d - r}
   <= (sqrt 2 pi / 6) (delta sqrt(d/2) / (2 pi))^{d - r}: exponentially small in d - r once delta < 2 pi sqrt(2/d).
   The error stays above eps whenever S^2 < ((||O'||^2 - sqrt(eps ||O'||^2)) / (kappa + eta))^2 ~ e^{c (d - r)},
   c = 2 log(2 pi sqrt(2/d) / delta). For the default grid (delta = 4 sqrt 2 / d^2), c = 2 log(pi d^{3/2} / 2).

Heuristic (the paper's sketch, NOT a bound): replace sigma^2 by its mean 2 (d - r) / d, i.e. damp the frequency
omega = 2 pi / delta mode by exp(-omega^2 (d - r) / d) (`heuristic_correlation`). Because E e^{-lambda B} >=
e^{-lambda E B} (Jensen), the heuristic UNDERSTATES the correlation: the lower tail of B (heads whose row space
happens to contain most of z) dominates, giving polynomial-in-delta rather than Gaussian-in-delta decay.

Budgets. The paper's condition is on d H max_h ||V_h||^2 =: B. Our route controls S = sum_h ||V_h|| <= H max ||V_h||
= sqrt(H B / d), so it needs H B / d (not B alone) below e^{c (d - r)}; `value_norm_sum` converts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.special import betainc, betaln, gammaln, roots_jacobi, zeta

from theory.biased_target import BiasGrid, bias_grid, population_moments
from theory.sphere import KEY_KINDS
from theory.validation import check_array, check_choice, check_dimension, check_heads, check_rank, check_real

FloatArray = npt.NDArray[np.float64]

BUDGET_NORMS = ("max", "frobenius")
"""How a value-norm budget is measured: "max" = d H max_h ||V_h||^2 (the paper's), "frobenius" = sum_h ||V_h||_F^2."""


def _grid(d: int, grid: Any) -> BiasGrid:
    if grid is None:
        return bias_grid(d)
    if not isinstance(grid, BiasGrid):
        raise ValueError(f"grid must be a BiasGrid or None, got {type(grid).__name__}")
    return grid


def _damping_rate(sigma: float, delta: float) -> float:
    """rho = 2 pi^2 sigma^2 / delta^2: mode k of the sawtooth is damped by exp(-rho k^2)."""
    return 2.0 * math.pi**2 * sigma * sigma / (delta * delta)


def _uncapped_sum(rho: float) -> float:
    """sum_{k >= 1} e^{-rho k^2} / (pi k) for rho >= 1e-9 (terms beyond e^{-45} dropped: relative error < 1e-19)."""
    k_max = int(math.ceil(math.sqrt(45.0 / rho))) + 1  # e^{-rho k^2} < e^{-45} beyond
    k = np.arange(1, k_max + 1, dtype=np.float64)  # (k_max,)
    return float(np.sum(np.exp(-rho * k * k) / (math.pi * k)))


def _damped_sum(rho: float) -> float:
    """sum_{k >= 1} e^{-rho k^2} / (pi k), capped at 1/2 (the sawtooth's sup); rho >= 0."""
    if rho < 1e-9:
        return 0.5  # the sum exceeds 1/2 long before: it is 1/2 already at rho ~ 0.6
    return min(0.5, _uncapped_sum(rho))


def smoothed_sawtooth(t: Any, sigma: float, delta: float, n_terms: int = 2000) -> FloatArray:
    """E[saw((t + sigma g) / delta)] for g ~ N(0, 1), by the damped Fourier series.

    Args:
        t: (n,) points.
        sigma: smoothing standard deviation (> 0).
        delta: period (> 0).
        n_terms: Fourier modes kept (>= 1); the tail is below e^{-rho n_terms^2} / (pi n_terms).

    Returns:
        (n,) values.
    """
    t = check_array("t", t, ndim=1)
    sigma = check_real("sigma", sigma, minimum=0.0, strict_minimum=True)
    delta = check_real("delta", delta, minimum=0.0, strict_minimum=True)
    rho = _damping_rate(sigma, delta)
    k = np.arange(1, int(n_terms) + 1, dtype=np.float64)  # (K,)
    modes = np.sin(2.0 * math.pi * np.outer(t, k) / delta)  # (n, K)
    return modes @ (np.exp(-rho * k * k) / (math.pi * k))  # (n,)


def smoothed_sawtooth_sup_bound(sigma: Any, delta: float) -> Any:
    """m(sigma) = min(1/2, sum_k e^{-2 pi^2 k^2 sigma^2 / delta^2} / (pi k)) >= sup_t |E saw((t + sigma g) / delta)|.

    Args:
        sigma: smoothing standard deviation(s) (>= 0); scalar or array.
        delta: period (> 0).

    Returns:
        m(sigma), same shape.
    """
    delta = check_real("delta", delta, minimum=0.0, strict_minimum=True)
    scalar = np.ndim(sigma) == 0
    values = check_array("sigma", sigma)
    if np.any(values < 0):
        raise ValueError("sigma must be >= 0")
    out = np.array([_damped_sum(_damping_rate(float(v), delta)) for v in values.ravel()]).reshape(values.shape)
    return float(out) if scalar else out


def _cap_rate() -> float:
    """The damping rate rho* at which the damped sum equals 1/2 (m is capped for rho < rho*)."""
    return float(brentq(lambda rho: _uncapped_sum(rho) - 0.5, 1e-6, 50.0, xtol=1e-14))


def _beta_expectation_of_m(zeta_norm2: float, a: float, b: float, delta: float) -> float:
    """Upper bound on E[m(sqrt(zeta_norm2 * B))] for B ~ Beta(a, b), by adaptive quadrature in log B.

    The part below B = e^{-L} (L = 700 / a capped at 700) is bounded by (1/2) P(B < e^{-L}).
    """
    log_beta = betaln(a, b)
    rho_of = 2.0 * math.pi**2 * zeta_norm2 / (delta * delta)  # rho = rho_of * B
    rho_star = _cap_rate()
    u_kink = math.log(rho_star / rho_of)  # m is capped at 1/2 for log B < u_kink

    def in_log(u: float) -> float:
        x = math.exp(u)
        log_pdf = (a - 1.0) * u + (b - 1.0) * math.log1p(-x) - log_beta if x < 1.0 else -math.inf
        return _damped_sum(rho_of * x) * math.exp(log_pdf + u)

    lower = -min(700.0, 60.0 / a)
    split = math.log(0.5)
    points = [u_kink] if lower < u_kink < split else None
    left, _ = quad(in_log, lower, split, points=points, limit=400, epsabs=1e-16, epsrel=1e-10)

    def direct(x: float) -> float:
        return _damped_sum(rho_of * x) * x ** (a - 1.0) / math.exp(log_beta)

    # (1 - x)^{b - 1} handled as an algebraic weight on [1/2, 1] (singular when b < 1).
    right, _ = quad(direct, 0.5, 1.0, weight="alg", wvar=(0.0, b - 1.0), limit=200, epsabs=1e-16, epsrel=1e-10)
    tail = 0.5 * float(betainc(a, b, math.exp(lower)))
    return min(0.5, left + right + tail)


def head_correlation_bound(d: int, r: int, grid: BiasGrid | None = None, keys: str = "orthonormal") -> float:
    """kappa(d, r): |<f_h, O>| <= ||V_h|| kappa for every rank-r generalized-attention head (step 2 of the module doc).

    Args:
        d: ambient dimension (>= 2).
        r: query rank, 1 <= r <= d (r = d gives the trivial E||z|| / 2).
        grid: the bias grid (default `bias_grid(d)`).
        keys: "orthonormal" (D_2) or "iid".

    Returns:
        kappa as a float.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    grid = _grid(d, grid)
    keys = check_choice("keys", keys, KEY_KINDS)
    a, b = 0.5 * (d - r), 0.5 * r
    if keys == "orthonormal":
        if r == d:
            return math.sqrt(2.0) * 0.5
        return math.sqrt(2.0) * _beta_expectation_of_m(2.0, a, b, grid.delta)
    exponent = 0.5 * (d - 3)
    nodes, weights = roots_jacobi(64, exponent, exponent)  # (64,) t = <x_1, x_2>
    weights = weights / np.sum(weights)
    total = 0.0
    for t, w in zip(nodes, weights, strict=True):
        zeta_norm2 = 2.0 * (1.0 - t)
        inner = 0.5 if r == d else _beta_expectation_of_m(zeta_norm2, a, b, grid.delta)
        total += w * math.sqrt(zeta_norm2) * inner
    return float(total)


def closed_form_correlation_bound(d: int, r: int, delta: float) -> float:
    """(sqrt 2 / pi) zeta(d - r + 1) Gamma(d/2) / Gamma(r/2) (delta / (2 pi))^{d - r} >= kappa (D_2, 2 <= r < d).

    Args:
        d: ambient dimension (>= 3).
        r: query rank, 2 <= r < d.
        delta: the bias spacing (> 0).

    Returns:
        The bound (possibly > kappa's trivial value sqrt 2 / 2; it is informative only when small).
    """
    d = check_dimension(d, minimum=3)
    r = check_rank(r, d)
    if not 2 <= r < d:
        raise ValueError(f"r must satisfy 2 <= r < d = {d} for the closed-form bound, got {r}")
    delta = check_real("delta", delta, minimum=0.0, strict_minimum=True)
    log_value = (
        0.5 * math.log(2.0)
        - math.log(math.pi)
        + math.log(float(zeta(d - r + 1)))
        + gammaln(0.5 * d)
        - gammaln(0.5 * r)
        + (d - r) * math.log(delta / (2.0 * math.pi))
    )
    return math.exp(log_value)


def budget_exponent(d: int, delta: float) -> float:
    """c = 2 log(2 pi sqrt(2/d) / delta): the closed-form kappa bound ~ e^{-c (d - r) / 2}, so S*^2 ~ e^{c (d - r)}.

    Args:
        d: ambient dimension (>= 2).
        delta: bias spacing (> 0).

    Returns:
        c (positive only when delta < 2 pi sqrt(2/d)).
    """
    d = check_dimension(d)
    delta = check_real("delta", delta, minimum=0.0, strict_minimum=True)
    return 2.0 * math.log(2.0 * math.pi * math.sqrt(2.0 / d) / delta)


def heuristic_correlation(d: int, r: int, grid: BiasGrid | None = None) -> float:
    """The paper's sketch: sqrt 2 m(sqrt(2 (d - r) / d)) (mean smoothing variance). NOT an upper bound on kappa.

    Args:
        d: ambient dimension (>= 2).
        r: query rank, 1 <= r <= d.
        grid: the bias grid (default `bias_grid(d)`).

    Returns:
        The heuristic correlation per unit value norm.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    grid = _grid(d, grid)
    return math.sqrt(2.0) * float(smoothed_sawtooth_sup_bound(math.sqrt(2.0 * (d - r) / d), grid.delta))


def mode_damping(omega: Any, d: int, r: int) -> Any:
    """exp(-omega^2 (d - r) / d): the paper's damping of a frequency-omega mode (mean smoothing variance 2(d-r)/d).

    Args:
        omega: angular frequency (scalar or array, >= 0).
        d: ambient dimension (>= 2).
        r: query rank, 1 <= r <= d.

    Returns:
        Same shape as omega.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    scalar = np.ndim(omega) == 0
    values = check_array("omega", omega)
    out = np.exp(-values * values * (d - r) / d)
    return float(out) if scalar else out


def value_norm_sum(d: int, H: int, budget: float, norm: str = "max") -> float:
    """The largest S = sum_h ||V_h|| (operator norms) allowed by a value-norm budget.

    Args:
        d: ambient dimension (>= 2).
        H: number of heads (>= 1).
        budget: B >= 0.
        norm: "max" (d H max_h ||V_h||^2 <= B, so S <= sqrt(H B / d)) or "frobenius" (sum_h ||V_h||_F^2 <= B, so
            S <= sqrt(H B) in general; for V_h = a_h I it is sqrt(H B / d), as for "max").

    Returns:
        The bound on S.
    """
    d = check_dimension(d)
    H = check_heads(H)
    budget = check_real("budget", budget, minimum=0.0)
    norm = check_choice("norm", norm, BUDGET_NORMS)
    return math.sqrt(H * budget / d) if norm == "max" else math.sqrt(H * budget)


def error_floor(
    d: int, r: int, H: int, max_value_norm: float, grid: BiasGrid | None = None, keys: str = "orthonormal"
) -> float:
    """Lower bound ([||O'||^2 - H max||V|| (kappa + eta)]_+)^2 / ||O'||^2 on the error of rank-r generalized attention.

    Args:
        d: ambient dimension (>= 2).
        r: query rank, 1 <= r <= d.
        H: number of heads (>= 1).
        max_value_norm: max_h ||V_h|| (operator norm, >= 0).
        grid: the bias grid (default `bias_grid(d)`).
        keys: "orthonormal" (D_2) or "iid".

    Returns:
        The floor (the same for any model with sum_h ||V_h|| <= H max_value_norm, plus any multiple of A).
    """
    d = check_dimension(d)
    H = check_heads(H)
    max_value_norm = check_real("max_value_norm", max_value_norm, minimum=0.0)
    return error_floor_from_norm_sum(d, r, H * max_value_norm, grid, keys)


def _floor_terms(d: int, r: int, grid: BiasGrid, keys: str, free_simple: bool) -> tuple[float, float, float]:
    """(energy, offset, per-unit-norm correlation) so that floor = ([energy - offset - S corr]_+)^2 / energy."""
    moments = population_moments(grid, d, keys)
    kappa = head_correlation_bound(d, r, grid, keys)
    if free_simple:  # project on O' (orthogonal to A): any multiple of A is free
        eta = abs(moments.overlap) / math.sqrt(moments.simple_energy)
        return moments.residual_oscillation_energy, 0.0, kappa + eta
    # pure low-rank class: project on O itself; <F, O> = ||O||^2 + <A, O>
    return moments.oscillation_energy, abs(moments.overlap), kappa


def error_floor_from_norm_sum(
    d: int,
    r: int,
    norm_sum: float,
    grid: BiasGrid | None = None,
    keys: str = "orthonormal",
    free_simple: bool = True,
) -> float:
    """The floor of `error_floor` as a function of S = sum_h ||V_h||.

    Args:
        d: ambient dimension (>= 2).
        r: query rank, 1 <= r <= d.
        norm_sum: S >= 0.
        grid: the bias grid (default `bias_grid(d)`).
        keys: "orthonormal" or "iid".
        free_simple: True: the model may add any multiple of A (bound via O', step 3); False: pure sum of heads,
            bound ([||O||^2 - |<A, O>| - S kappa]_+)^2 / ||O||^2 (no eta term).

    Returns:
        The floor.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    norm_sum = check_real("norm_sum", norm_sum, minimum=0.0)
    grid = _grid(d, grid)
    keys = check_choice("keys", keys, KEY_KINDS)
    energy, offset, corr = _floor_terms(d, r, grid, keys, bool(free_simple))
    return max(0.0, energy - offset - norm_sum * corr) ** 2 / energy


def threshold_norm_sum(
    d: int,
    r: int,
    level: float,
    grid: BiasGrid | None = None,
    keys: str = "orthonormal",
    free_simple: bool = True,
) -> float:
    """The S = sum_h ||V_h|| below which the floor stays >= level * ||O'||^2 (so the error is at least that).

    Args:
        d: ambient dimension (>= 2).
        r: query rank, 1 <= r <= d.
        level: fraction of the oscillation energy, 0 < level < 1.
        grid: the bias grid (default `bias_grid(d)`).
        keys: "orthonormal" or "iid".
        free_simple: as in `error_floor_from_norm_sum`.

    Returns:
        S* = (E - offset - sqrt(level) E) / corr with (E, offset, corr) of the chosen class.
    """
    d = check_dimension(d)
    r = check_rank(r, d)
    level = check_real("level", level, minimum=0.0, maximum=1.0, strict_minimum=True, strict_maximum=True)
    grid = _grid(d, grid)
    keys = check_choice("keys", keys, KEY_KINDS)
    energy, offset, corr = _floor_terms(d, r, grid, keys, bool(free_simple))
    return max(0.0, energy * (1.0 - math.sqrt(level)) - offset) / corr
