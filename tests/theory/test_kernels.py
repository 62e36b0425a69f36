"""Tests of theory.kernels against Monte Carlo (4 standard errors), an independent quadrature and exact identities.

The independent quadrature for b. With y and u independent, E_y[sign<q,y> sign<u,y>] = (2/pi) arcsin<q,u>
(Grothendieck), so b = 1/2 + (1/2) E_u[sign<k,u> (2/pi) arcsin<q,u>]. Only the projection of u onto span(q, k)
matters: u -> rho (cos phi, sin phi) with phi uniform and, for d >= 3, rho with density
(d - 2) rho (1 - rho^2)^{(d-4)/2} on [0, 1] (rho = 1 for d = 2). Taking k = e_1 and q at angle theta from it, and
using that the integrand changes sign under phi -> phi + pi,

    b = 1/2 + (1/(2 pi)) int_{-pi/2}^{pi/2} G(cos(phi - theta)) dphi,   G(x) = E_rho[(2/pi) arcsin(rho x)].

No harmonics are involved, so this checks the sign expansion, the Funk-Hecke steps and the truncation bound.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate

from tests.strategies import dimensions, head_counts, seeds
from theory.attention import multihead_attention
from theory.kernels import (
    head_head_kernel,
    head_kernel_matrix,
    head_target_kernel,
    head_target_series,
    sign_correlation,
)
from theory.monte_carlo import DEFAULT_Z, estimate_mean
from theory.sphere import sample_context, sample_sphere
from theory.targets import nearest_neighbor

Z = DEFAULT_Z  # acceptance half-width in standard errors (one value for every statistical check)


def _b_by_quadrature(cos_qk: float, d: int) -> float:
    """b from the two-dimensional projection integral above (scipy.integrate.quad, absolute accuracy ~1e-11)."""
    theta = math.acos(cos_qk)
    if d == 2:

        def inner(x: float) -> float:
            return (2 / math.pi) * math.asin(max(-1.0, min(1.0, x)))

    else:
        a = (d - 4) / 2.0

        def inner(x: float) -> float:
            # int_0^1 (d-2) (1+rho)^a (2/pi) arcsin(rho x) * rho^1 (1-rho)^a drho  (QUADPACK algebraic weight)
            value, _ = integrate.quad(
                lambda rho: (d - 2) * (1 + rho) ** a * (2 / math.pi) * math.asin(rho * x),
                0.0,
                1.0,
                weight="alg",
                wvar=(1.0, a),
                epsabs=1e-13,
                epsrel=1e-12,
            )
            return value

    points = [theta] if -math.pi / 2 < theta < math.pi / 2 else None
    outer, _ = integrate.quad(
        lambda phi: inner(math.cos(phi - theta)), -math.pi / 2, math.pi / 2, points=points, epsabs=1e-12, epsrel=1e-12
    )
    return 0.5 + outer / (2 * math.pi)


def _head_with_cosine(cos_qk: float, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random unit q, k in R^d with <q, k> = cos_qk."""
    frame = np.linalg.qr(rng.standard_normal((d, 2)))[0].T  # (2, d) orthonormal
    k = frame[0]
    q = cos_qk * frame[0] + math.sqrt(max(0.0, 1 - cos_qk**2)) * frame[1]
    return q, k


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.clip(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0))


def test_sign_correlation_special_values() -> None:
    np.testing.assert_allclose(
        sign_correlation(np.array([-1.0, -0.5, 0.0, 0.5, 1.0])), [-1, -1 / 3, 0, 1 / 3, 1], atol=1e-15
    )
    assert isinstance(sign_correlation(0.2), float)
    assert sign_correlation(1 + 1e-13) == 1.0  # rounding slack is clipped


@pytest.mark.parametrize("d", [2, 5, 20])
def test_sign_correlation_matches_monte_carlo(d: int) -> None:
    """n = 40000 uniform y per dimension; each cosine within 4 standard errors."""
    rng = np.random.default_rng(20 + d)
    y = sample_sphere(40_000, d, rng)
    for cos in (-0.8, -0.2, 0.4, 0.9):
        a, b = _head_with_cosine(cos, d, rng)
        estimate = estimate_mean(np.sign(y @ a) * np.sign(y @ b))
        assert estimate.contains(sign_correlation(cos), Z), f"d = {d}, cos = {cos}: {estimate}"


@given(H=head_counts(12), d=dimensions(2, 12), seed=seeds)
def test_head_kernel_matrix_structure(H: int, d: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((H, d)), rng.standard_normal((H, d))
    C = head_kernel_matrix(q, k)
    assert C.shape == (H, H)
    np.testing.assert_array_equal(C, C.T)
    np.testing.assert_array_equal(np.diag(C), 1.0)
    # C is the Gram matrix of the head outputs in L^2(D_2), hence positive semi-definite.
    assert np.linalg.eigvalsh(C).min() >= -1e-12
    # Entries lie in [0, 1]: E<f, f'> of unit-norm outputs, and 1/2 +- (2/pi^2)(pi/2)^2.
    assert np.all((C >= 0.0) & (C <= 1.0))
    # Only directions matter. Tolerance: a cosine rounded by delta ~ 4 d eps moves arcsin by at most sqrt(2 delta)
    # (the worst case, at cosines near +-1), and the product is scaled by (2/pi^2)(pi/2) < 1.
    atol = math.sqrt(8 * d * np.finfo(float).eps)
    np.testing.assert_allclose(head_kernel_matrix(3.0 * q, 0.5 * k), C, rtol=0, atol=atol)
    for i in range(min(H, 3)):
        for j in range(min(H, 3)):
            assert head_head_kernel(q[i], k[i], q[j], k[j]) == pytest.approx(C[i, j], abs=atol)
            assert head_head_kernel(q[i], k[i], q[j], k[j]) == pytest.approx(
                0.5 + (2 / math.pi**2) * math.asin(_cos(q[i], q[j])) * math.asin(_cos(k[i], k[j])), abs=atol
            )
    assert head_head_kernel(q[0], k[0], 7.0 * q[0], k[0]) == 1.0


def test_head_kernel_matrix_matches_sign_monte_carlo() -> None:
    """C_hh' vs 1/2 + (1/2) sign<q_h,y> sign<k_h,u> sign<q_h',y> sign<k_h',u>, y, u uniform; n = 40000, d = 5, 4 s.e."""
    d, H, n = 5, 5, 40_000
    rng = np.random.default_rng(31)
    q, k = rng.standard_normal((H, d)), rng.standard_normal((H, d))
    C = head_kernel_matrix(q, k)
    y, u = sample_sphere(n, d, rng), sample_sphere(n, d, rng)
    s = np.sign(y @ q.T) * np.sign(u @ k.T)  # (n, H)
    for i in range(H):
        for j in range(i + 1, H):
            estimate = estimate_mean(0.5 + 0.5 * s[:, i] * s[:, j])
            assert estimate.contains(C[i, j], Z), f"C[{i}, {j}] = {C[i, j]:.4f}, Monte Carlo {estimate}"


@pytest.mark.parametrize("d", [2, 3, 4, 5, 8, 16, 64])
def test_head_target_kernel_matches_independent_quadrature(d: int) -> None:
    """Series (tol 1e-12, and a coarse tol 1e-5 whose bound must also hold) vs the 2-D projection integral.

    The quadrature is accurate to about 1e-11, so the fine series must agree within 1e-9.
    """
    cosines = np.array([-1.0, -0.7, -0.2, 0.0, 0.35, 0.8, 1.0])
    reference = np.array([_b_by_quadrature(c, d) for c in cosines])
    tol = 1e-10 if d == 2 else 1e-12  # d = 2 needs ~4e5 terms for 1e-12
    fine = head_target_kernel(cosines, d, tol=tol)
    assert np.max(np.abs(fine - reference)) < 1e-9, f"d = {d}: {fine} vs {reference}"
    K, bound = head_target_series(d, 1e-5)
    coarse = head_target_kernel(cosines, d, tol=1e-5)
    assert bound <= 1e-5
    assert np.max(np.abs(coarse - reference)) <= bound + 1e-9, f"d = {d}, K = {K}"


def test_head_target_kernel_closed_form_on_the_circle() -> None:
    """d = 2, q = k: b = 1/2 + (1/(2 pi)) int_{-pi/2}^{pi/2} (1 - 2|phi|/pi) dphi = 3/4, and b(-1) = 1/4.

    (On the circle G(cos phi) = (2/pi) arcsin(cos phi) = 1 - 2|phi|/pi for |phi| <= pi/2; the integral is pi/2.)
    """
    tol = 1e-10
    assert head_target_kernel(1.0, 2, tol=tol) == pytest.approx(0.75, abs=tol + 1e-13)
    assert head_target_kernel(-1.0, 2, tol=tol) == pytest.approx(0.25, abs=tol + 1e-13)


@given(d=st.sampled_from([2, 3, 4, 5, 8, 13, 16, 40, 64]), cos=st.floats(-1.0, 1.0))
def test_head_target_kernel_symmetries(d: int, cos: float) -> None:
    """b(-c) = 1 - b(c) (only odd polynomials appear), b(0) = 1/2, 0 <= b <= 1."""
    tol = 1e-8
    b = head_target_kernel(np.array([cos, -cos, 0.0]), d, tol=tol)
    assert b[0] + b[1] == pytest.approx(1.0, abs=2 * tol)
    assert b[2] == pytest.approx(0.5, abs=1e-15)
    assert -tol <= b[0] <= 1 + tol


@pytest.mark.parametrize("d", [3, 8])
def test_head_target_kernel_matches_the_reference_evaluator(d: int) -> None:
    """P(hardmax head (q, k) with V = I picks the nearest D_2 key), n = 20000 contexts per cosine, within 4 s.e."""
    rng = np.random.default_rng(40 + d)
    X, y = sample_context(20_000, 2, d, rng)
    target = nearest_neighbor(X, y)
    cosines = np.array([-1.0, -0.3, 0.5, 1.0])
    predicted = head_target_kernel(cosines, d, tol=1e-9)  # far below the standard error ~ 3e-3
    for cos, b in zip(cosines, predicted, strict=True):
        q, k = _head_with_cosine(cos, d, rng)
        output = multihead_attention(q[None, None], k[None, None], np.eye(d)[None], X, y)  # (n, d)
        correct = np.all(output == target, axis=1).astype(np.float64)  # (n,)
        estimate = estimate_mean(correct)
        assert estimate.contains(b, Z), f"d = {d}, cos = {cos}: b = {b:.4f}, Monte Carlo {estimate}"


def test_head_target_kernel_shapes_and_speed_path() -> None:
    cosines = np.linspace(-1, 1, 12).reshape(3, 4)
    values = head_target_kernel(cosines, 16)
    assert values.shape == (3, 4)
    np.testing.assert_allclose(values.reshape(-1), head_target_kernel(cosines.reshape(-1), 16), rtol=0, atol=0)
    assert isinstance(head_target_kernel(0.3, 16), float)


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: sign_correlation(1.01), "cos"),
        (lambda: sign_correlation(np.nan), "cos"),
        (lambda: head_target_kernel(-1.5, 8), "cos_qk"),
        (lambda: head_target_kernel(0.5, 1), "d"),
        (lambda: head_target_kernel(0.5, 8, tol=0.0), "tol"),
        (lambda: head_target_series(8, tol=-1.0), "tol"),
        (lambda: head_kernel_matrix(np.ones((3, 4)), np.ones((3, 5))), "k"),
        (lambda: head_kernel_matrix(np.ones((3, 4)), np.ones((2, 4))), "k"),
        (lambda: head_kernel_matrix(np.ones(4), np.ones(4)), "q"),
        (lambda: head_kernel_matrix(np.zeros((2, 4)), np.ones((2, 4))), "q"),
        (lambda: head_head_kernel(np.ones(3), np.ones(3), np.ones(4), np.ones(3)), "q2"),
        (lambda: head_head_kernel(np.ones(3), np.zeros(3), np.ones(3), np.ones(3)), "k"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_parameter(call, parameter: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=rf"^{parameter} must"):
        call()
