"""Tails of sums over odd degrees, sum_{i >= 1} u(m + 2i), by the Euler-Maclaurin formula.

Used for the energy tail of sign (theory.harmonics.sign_energy_tail) and for the weighted tail
sum_k e_k H rho_k of Theorem 2's bound (theory.bounds.rank_lower_bound). In both, u(x) = exp(L(x)) is a ratio of
Gamma functions times rational factors, analytic for Re x > 0 (every pole lies on the non-positive real axis),
decreasing, with relative derivatives L^(n)(x) of size ~ (p / x)^n for a local power-law exponent p.

Derivation. With g(i) = u(m + 2i) the Euler-Maclaurin formula on [0, inf) reads

    sum_{i >= 1} g(i) = int_0^inf g - g(0)/2 - g'(0)/12 + g'''(0)/720 - g^(5)(0)/30240 + ...,

and g^(n)(0) = 2^n u^(n)(m), int_0^inf g = (1/2) int_m^inf u. Hence

    sum_{i >= 1} u(m + 2i) = (1/2) int_m^inf u - u(m)/2 - u'(m)/6 + u'''(m)/90 - (32/30240) u^(5)(m) + ...

with u' = u L', u''' = u (L''' + 3 L' L'' + L'^3). We keep the terms through u''' and report the size of the first
omitted one as an error estimate: for u = x^{-p}, |u^(5)(m)| = u(m) p (p+1) .. (p+4) / m^5 <= u(m) ((p + 4) / m)^5,
and we use p = m |L'(m)|. For the sums in this package (p <= a few hundred, m >= 1000 whenever this is called with
p large, see the callers' step-slope guard) the omitted term is below 1e-12 of the sum.

The integral is done in v = log x by composite Gauss-Legendre: u(x) x is smooth in v and analytic in the strip
|Im v| < pi. Steep power laws (u ~ x^{-p} with p in the hundreds, as in Theorem 2's tail at astronomically many
heads) make u(x) x = e^{-(p - 1) v} steep in v too, so panel widths adapt to the measured decay
(``_log_space_integral``). A breakpoint at log(scale) (e.g. log d, where the decay changes from the x << d to the
x >> d regime) separates the regimes; past it the integration stops once the integrand is e^{-46} below its peak.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import special

FloatArray = npt.NDArray[np.float64]

# Composite Gauss-Legendre rule for the integral in v = log x (panel width and nodes per panel).
_PANEL_WIDTH = 2.0
_NODES, _WEIGHTS = special.roots_legendre(24)
# How far past log(max(m, scale)) the integral runs at most (u(x) x decays at least like x^{-1/2} there).
_LOG_RANGE = 80.0
# Target drop of log(u x) across one panel, and the drop below the peak at which the integration stops.
_PANEL_DROP = 8.0
_STOP_DROP = 46.0


def odd_degree_tail(
    log_term: Callable[[FloatArray], FloatArray],
    log_derivatives: tuple[float, float, float],
    m: int,
    scale: float,
) -> tuple[float, float]:
    """sum_{i >= 1} u(m + 2i) for u = exp(log_term) by Euler-Maclaurin, and the size of the first omitted term.

    Args:
        log_term: L(x) = log u(x), vectorised over float arrays of any shape (x >= m).
        log_derivatives: (L'(m), L''(m), L'''(m)).
        m: the last degree NOT included (the sum starts at m + 2); m >= 1.
        scale: where u changes regime (a breakpoint of the quadrature when it exceeds m), e.g. the dimension d.
    Returns:
        (estimate, omitted): the Euler-Maclaurin estimate and |(32/30240) u^(5)(m)| bounded as in the module
        docstring (an estimate of the truncation error, not a rigorous bound).
    """
    integral = _log_space_integral(log_term, m, scale, log_derivatives[0])
    u_m = math.exp(float(log_term(np.asarray(float(m)))))
    l1, l2, l3 = log_derivatives
    u1 = u_m * l1
    u3 = u_m * (l3 + 3.0 * l1 * l2 + l1**3)
    estimate = 0.5 * integral - 0.5 * u_m - u1 / 6.0 + u3 / 90.0
    exponent = m * abs(l1)
    omitted = (32.0 / 30240.0) * u_m * ((exponent + 4.0) / m) ** 5
    return estimate, omitted


def _log_space_integral(
    log_term: Callable[[FloatArray], FloatArray], m: int, scale: float, initial_slope: float
) -> float:
    """int_m^inf u(x) dx = int u(e^v) e^v dv by Gauss-Legendre panels whose widths follow the integrand's decay.

    A panel's width is chosen so that log(u x) drops by about _PANEL_DROP across it (at most _PANEL_WIDTH wide; a
    panel never straddles log(scale)): Gauss-Legendre with 24 nodes integrates exp(a t) on [-1, 1] to a relative
    error ~ a^48 / 48!, below 1e-17 for a drop 2a <= 16. The integration stops once v >= log(max(m, scale)) + 1
    (past the regime change, where the decay only steepens) and log(u x) has fallen _STOP_DROP below its largest
    value, or at log(max(m, scale)) + _LOG_RANGE.
    """

    def log_integrand(v: FloatArray) -> FloatArray:
        return np.asarray(log_term(np.exp(v)), dtype=np.float64) + v

    start = math.log(m)
    past_regime = math.log(max(m, scale)) + 1.0
    v_stop = math.log(max(m, scale)) + _LOG_RANGE
    breakpoint = math.log(scale) if scale > m else None
    peak = current = float(log_integrand(np.asarray(start)))
    # d/dv log(u x) = x L'(x) + 1: the first width from the slope at m, later ones from the measured drops
    width = min(_PANEL_WIDTH, _PANEL_DROP / max(abs(m * initial_slope + 1.0), _PANEL_DROP / _PANEL_WIDTH))
    pieces: list[float] = []
    v = start
    while v < v_stop:
        end = min(v + width, v_stop)
        if breakpoint is not None and v < breakpoint < end:
            end = breakpoint
        half = (end - v) / 2.0
        points = np.append(v + half + half * _NODES, end)  # (25,): the 24 nodes, then the panel's end
        values = log_integrand(points)  # (25,)
        after = float(values[-1])
        drop = current - after
        if abs(drop) > 2.0 * _PANEL_DROP:  # steeper than planned: retry with a narrower panel
            width = (end - v) / 4.0
            continue
        pieces.append(half * float(np.exp(values[:-1]) @ _WEIGHTS))
        peak = max(peak, after)
        if end >= past_regime and after <= peak - _STOP_DROP:
            break
        width = min(_PANEL_WIDTH, 2.0 * half * _PANEL_DROP / max(abs(drop), _PANEL_DROP / 64.0))
        v, current = end, after
    return math.fsum(pieces)


def log_gamma_ratio_derivative(order: int, x: float, shift_up: float, shift_down: float) -> float:
    """d^(order+1)/dx^(order+1) of [log Gamma(x + shift_up) - log Gamma(x + shift_down)] (polygamma difference)."""
    return float(special.polygamma(order, x + shift_up) - special.polygamma(order, x + shift_down))


def log_linear_derivative(n: int, x: float, slope: float, offset: float) -> float:
    """d^n/dx^n of log(slope x + offset), n >= 1: (-1)^(n-1) (n-1)! slope^n / (slope x + offset)^n."""
    return (-1) ** (n - 1) * math.factorial(n - 1) * slope**n / (slope * x + offset) ** n
