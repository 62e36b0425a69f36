"""Kernels of random rank-1 hardmax heads on D_2: the Grothendieck identity, head-vs-head C and head-vs-target b.

Setting (docs/paper.md sections 3 and 6). Under D_2 the keys x_1, x_2 are orthonormal and y is uniform and independent;
u = (x_1 - x_2) / sqrt 2 is uniform on the sphere and independent of y. A rank-1 hardmax head (q, k) with V = I picks
x_1 iff <q, y> <k, x_1> > <q, y> <k, x_2>, i.e. iff s = sign<q, y> sign<k, u> = +1, so its output is
f = (x_1 + x_2)/2 + s (x_1 - x_2)/2; the nearest-neighbour target is f* = (x_1 + x_2)/2 + sign<u, y> (x_1 - x_2)/2.
Because ||x_1 + x_2||^2 = ||x_1 - x_2||^2 = 2 and <x_1 + x_2, x_1 - x_2> = 0,

    E<f_h, f_h'> = 1/2 + (1/2) E[s_h s_h'],      E<f_h, f*> = 1/2 + (1/2) E[s_h sign<u, y>] = P(head h is right).

Only the directions of q and k matter (the choice is invariant under positive rescaling), so inputs are normalised.

Grothendieck identity: for unit a, b and y uniform (or Gaussian), E[sign<y, a> sign<y, b>] = (2/pi) arcsin<a, b>
(the hyperplane {<y, .> = 0} separates a and b with probability angle/pi). With y and u independent this gives

    C_hh' = 1/2 + (1/2) (2/pi)^2 arcsin<q_h, q_h'> arcsin<k_h, k_h'> = 1/2 + (2/pi^2) arcsin(q q^T) arcsin(k k^T).

The head-vs-target kernel b has no such elementary form; we compute it from the Gegenbauer expansion of sign (see
``head_target_kernel``).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from theory.harmonics import log_abs_sign_coefficient, log_sign_energy, sign_energy_tail
from theory.validation import check_array, check_dimension, check_real

FloatArray = npt.NDArray[np.float64]

COSINE_SLACK = 1e-12
"""Cosines may exceed 1 in absolute value by this much (rounding of dot products) and are then clipped to [-1, 1]."""

DEFAULT_TOLERANCE = 1e-12
"""Default guaranteed absolute truncation error of ``head_target_kernel``."""


def _check_cosines(name: str, value: Any) -> tuple[FloatArray, bool]:
    """Validate cosines in [-1, 1] (up to COSINE_SLACK, then clipped); return (array, was_scalar)."""
    cosines = check_array(name, value)
    if np.any(np.abs(cosines) > 1.0 + COSINE_SLACK):
        worst = float(cosines.flat[np.argmax(np.abs(cosines))])
        raise ValueError(f"{name} must contain cosines in [-1, 1], got {worst!r}")
    return np.clip(cosines, -1.0, 1.0), cosines.ndim == 0


def _unit_rows(name: str, value: Any, d: int | None = None) -> FloatArray:
    """Validate an (H, d) array of non-zero rows and return the rows divided by their norms."""
    rows = check_array(name, value, ndim=2)
    if rows.shape[0] < 1 or rows.shape[1] < 2 or (d is not None and rows.shape[1] != d):
        expected = f"(H, {d})" if d is not None else "(H, d) with H >= 1, d >= 2"
        raise ValueError(f"{name} must have shape {expected}, got {rows.shape}")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)  # (H, 1)
    if np.any(norms == 0.0):
        raise ValueError(f"{name} must have non-zero rows (a head's direction), got a zero row")
    return rows / norms


def sign_correlation(cos: Any) -> Any:
    """Grothendieck identity: E[sign<y, a> sign<y, b>] = (2/pi) arcsin(cos) for unit a, b with <a, b> = cos.

    Args:
        cos: scalar or array (any shape) of cosines in [-1, 1].

    Returns:
        (2/pi) arcsin(cos), same shape (a float for scalar input).
    """
    cosines, scalar = _check_cosines("cos", cos)
    values = (2.0 / math.pi) * np.arcsin(cosines)
    return float(values) if scalar else values


def head_kernel_matrix(q: Any, k: Any) -> FloatArray:
    """Head-vs-head kernel C_hh' = E<f_h, f_h'> of rank-1 hardmax heads with V = I on D_2.

    Memory: two (H, H) float64 arrays at the peak (about 4 GB for H = 16384); block the heads for more.
    Accuracy: arcsin of a rounded cosine c; near c = +-1 its slope 1/sqrt(1 - c^2) turns a rounding error delta
    into up to sqrt(2 delta) (about 1e-7 for d ~ 10); the diagonal is exact. ``head_head_kernel`` is accurate there.

    Args:
        q: (H, d) query directions (non-zero rows; normalised here).
        k: (H, d) key directions (non-zero rows; normalised here).

    Returns:
        (H, H) symmetric matrix C = 1/2 + (2/pi^2) arcsin(q q^T) arcsin(k k^T), with unit diagonal.
    """
    queries = _unit_rows("q", q)
    keys = _unit_rows("k", k, queries.shape[1])
    if keys.shape != queries.shape:
        raise ValueError(f"k must have shape (H, d) = {queries.shape} to match q, got {keys.shape}")
    kernel = queries @ queries.T  # (H, H) cosines between query directions
    np.fill_diagonal(kernel, 1.0)  # exact for unit rows; removes rounding just above or below 1
    np.clip(kernel, -1.0, 1.0, out=kernel)
    np.arcsin(kernel, out=kernel)
    key_angles = keys @ keys.T  # (H, H)
    np.fill_diagonal(key_angles, 1.0)
    np.clip(key_angles, -1.0, 1.0, out=key_angles)
    np.arcsin(key_angles, out=key_angles)
    kernel *= key_angles
    del key_angles
    kernel *= 2.0 / math.pi**2
    kernel += 0.5
    return kernel


def head_head_kernel(q: Any, k: Any, q2: Any, k2: Any) -> float:
    """One entry of ``head_kernel_matrix``: E<f, f'> for heads (q, k) and (q2, k2).

    Args:
        q, k: (d,) query and key directions of the first head (non-zero).
        q2, k2: (d,) query and key directions of the second head (non-zero).

    Returns:
        1/2 + (2/pi^2) arcsin<q, q2> arcsin<k, k2> (directions normalised).
    """
    vectors: list[FloatArray] = []
    for name, value in (("q", q), ("k", k), ("q2", q2), ("k2", k2)):
        vector = check_array(name, value, ndim=1)
        vectors.append(_unit_rows(name, vector[None, :], None if not vectors else vectors[0].shape[0])[0])
    query_term = _stable_arcsin_cos(vectors[0], vectors[2])
    key_term = _stable_arcsin_cos(vectors[1], vectors[3])
    return 0.5 + (2.0 / math.pi**2) * query_term * key_term


def _stable_arcsin_cos(a: FloatArray, b: FloatArray) -> float:
    """arcsin<a, b> for unit a, b via the half angle 2 atan2(|a - b|, |a + b|), accurate near <a, b> = +-1."""
    angle = 2.0 * math.atan2(float(np.linalg.norm(a - b)), float(np.linalg.norm(a + b)))
    return math.pi / 2 - angle


# ---------------------------------------------------------------------------------------------------------------------
# Head-vs-target kernel b from the sign expansion
# ---------------------------------------------------------------------------------------------------------------------
#
# Derivation (Funk-Hecke). Write sign(t) = sum_k N(d,k) beta_k P_k(t) (odd k only), P_k normalised with P_k(1) = 1.
# 1. Average over y: by the addition theorem E_y[P_j(<q,y>) P_k(<u,y>)] = delta_jk P_k(<q,u>) / N(d,k), hence
#        E_y[sign<q,y> sign<u,y>] = sum_k N(d,k)^2 beta_k^2 P_k(<q,u>) / N(d,k) = sum_k e_k P_k(<q,u>),
#    with e_k = N(d,k) beta_k^2 (this is the Gegenbauer expansion of (2/pi) arcsin<q,u>).
# 2. Average over u: by Funk-Hecke, E_u[g(<k,u>) P_j(<q,u>)] = E_t[g(t) P_j(t)] P_j(<q,k>); for g = sign the
#    first factor is beta_j (the coefficient's definition), so
#        E_u[sign<k,u> P_j(<q,u>)] = beta_j P_j(<q,k>).
# 3. Together: E[s sign<u,y>] = sum_k e_k beta_k P_k(<q,k>) and
#        b(c) = 1/2 + (1/2) sum_{k odd} N(d,k) beta_k^3 P_k(c),   c = <q,k> (unit q, k).
# Consequences checked by the tests: b(-c) = 1 - b(c) (odd polynomials), b(0) = 1/2.
#
# Truncation. For c in [-1, 1], |P_k(c)| <= 1, so |N beta_k^3 P_k(c)| <= e_k |beta_k|. For odd k = 2j + 1,
# |beta_k| = B(k/2, d/2)/pi and |beta_{k+2}| / |beta_k| = (j + 1/2) / (j + (d+1)/2) < 1, so |beta_k| decreases in k.
# Keeping the odd degrees k <= K therefore errs by at most
#        (1/2) |beta_{K+2}| sum_{k > K} e_k = (1/2) |beta_{K+2}| sign_energy_tail(d, K)
# (and sum_k e_k = 1 keeps this <= |beta_{K+2}| / 2 in any case). We take the smallest odd K whose bound is <= tol.
# Typical cut-offs for tol = 1e-12: d = 2: ~4e5, d = 3: ~5e4, d = 8: ~400, d = 16: ~100, d = 64: ~30.
#
# Evaluation: P_0..P_K at all cosines at once by the stable forward recurrence for normalised Gegenbauer polynomials
#        (k + d - 2) P_{k+1}(c) = (2k + d - 2) c P_k(c) - k P_{k-1}(c),   P_0 = 1, P_1 = c,
# keeping only two previous rows, so the cost is O(K * size) time and O(size) memory.


def _tail_energy(d: int, K: int) -> float:
    """sum_{k > K} e_k from theory.harmonics, clipped to 1 (our truncation bound needs only a few correct digits)."""
    return min(float(sign_energy_tail(d, K)), 1.0)


@functools.lru_cache(maxsize=256)
def _series(d: int, tol: float) -> tuple[int, float, FloatArray]:
    """Cut-off K, its error bound and the coefficients N(d,k) beta_k^3 for k = 0..K (zero at even k)."""
    # For every odd K up to a horizon F: tail(K) = sum_{K < k <= F} e_k + tail(F), summed from the small end; the
    # bound (1/2) |beta_{K+2}| tail(K) decreases in K, so the first K meeting tol is the smallest. Double F until found.
    horizon = 63
    while True:
        odd_degrees = np.arange(1, horizon + 1, 2)  # (J,): 1, 3, ..., F
        energies = np.exp(np.asarray(log_sign_energy(d, odd_degrees)))  # (J,)
        above = np.cumsum(energies[::-1])[::-1]  # (J,): sum over odd degrees >= k
        tails = np.append(above[1:], 0.0) + _tail_energy(d, horizon)  # (J,): sum over degrees > k
        bounds = 0.5 * np.exp(np.asarray(log_abs_sign_coefficient(d, odd_degrees + 2))) * np.minimum(tails, 1.0)
        good = np.flatnonzero(bounds <= tol)
        if good.size:
            K, bound = int(odd_degrees[good[0]]), float(bounds[good[0]])
            break
        horizon = 2 * horizon + 1
        if horizon > 1 << 26:
            raise ValueError(f"tol = {tol} needs more than 2^26 terms in dimension d = {d}; use a larger tol")
    degrees = np.arange(K + 1)  # (K + 1,)
    odd = degrees % 2 == 1
    logs = np.full(K + 1, -np.inf)
    logs[odd] = np.asarray(log_sign_energy(d, degrees[odd])) + np.asarray(log_abs_sign_coefficient(d, degrees[odd]))
    signs = np.where((degrees // 2) % 2 == 1, -1.0, 1.0)  # sign(beta_{2j+1}) = (-1)^j
    coefficients = np.where(odd, signs * np.exp(logs), 0.0)  # (K + 1,): N beta^3 = e_k beta_k
    return K, bound, coefficients


def head_target_series(d: int, tol: float = DEFAULT_TOLERANCE) -> tuple[int, float]:
    """Cut-off degree and guaranteed truncation error of the series used by ``head_target_kernel``.

    Args:
        d: ambient dimension (>= 2).
        tol: requested absolute error (> 0).

    Returns:
        (K, bound): odd degrees k <= K are summed and |b - b_K| <= bound <= tol on [-1, 1].
    """
    d = check_dimension(d)
    tol = check_real("tol", tol, minimum=0.0, strict_minimum=True)
    K, bound, _ = _series(d, tol)
    return K, bound


def head_target_kernel(cos_qk: Any, d: int, tol: float = DEFAULT_TOLERANCE) -> Any:
    """Head-vs-target kernel b = P(a rank-1 hardmax head (q, k) picks the nearest of two D_2 keys).

    b(c) = 1/2 + (1/2) sum_{k odd} N(d,k) beta_k^3 P_k(c) with c = cos angle(q, k), summed to the cut-off of
    ``head_target_series`` (absolute error <= tol). Cost O(K * cos_qk.size): K ~ 400 for d = 8, ~ 30 for d = 64.

    Args:
        cos_qk: scalar or array (any shape) of cosines in [-1, 1].
        d: ambient dimension (>= 2).
        tol: guaranteed absolute truncation error (> 0); default 1e-12.

    Returns:
        b, same shape as cos_qk (a float for scalar input), values in [0, 1].
    """
    cosines, scalar = _check_cosines("cos_qk", cos_qk)
    d = check_dimension(d)
    tol = check_real("tol", tol, minimum=0.0, strict_minimum=True)
    K, _, coefficients = _series(d, tol)
    flat = cosines.reshape(-1)  # (M,)
    total = coefficients[1] * flat  # (M,): the k = 1 term (P_1 = c)
    previous = np.ones_like(flat)  # P_0
    current = flat.copy()  # P_1
    scratch = np.empty_like(flat)
    for degree in range(1, K):
        # (degree + d - 2) P_{degree+1} = (2 degree + d - 2) c P_degree - degree P_{degree-1}
        np.multiply(flat, current, out=scratch)
        scratch *= (2 * degree + d - 2) / (degree + d - 2)
        previous *= degree / (degree + d - 2)
        np.subtract(scratch, previous, out=previous)  # previous now holds P_{degree+1}
        previous, current = current, previous
        if (degree + 1) % 2 == 1:
            total += coefficients[degree + 1] * current
    values = (0.5 + 0.5 * total).reshape(cosines.shape)
    return float(values) if scalar else values
