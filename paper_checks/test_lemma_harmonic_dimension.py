"""Lemma (docs/paper.md section 3, proof of Theorem 2, step 2): the dimension of the degree-k spherical harmonics.

Claim, in our words: the degree-k spherical harmonics on S^{d-1} (restrictions of homogeneous harmonic polynomials of
degree k in d variables) form a space of dimension N(d, k) = (2k + d - 2)/k * C(k + d - 3, k - 1) (N(d, 0) = 1), and
the zonal harmonic of that space, normalised to P_k(1) = 1, satisfies E[P_k(t)^2] = 1 / N(d, k) (the addition theorem),
which is what makes e_k = N(d, k) beta_k^2 the energy of degree k.

Independent references:
- a direct count: the nullity of the Laplacian as an exact integer matrix from homogeneous degree-k polynomials to
  degree k - 2 (rank over the rationals with sympy's DomainMatrix), for d <= 5, k <= 6;
- E[P_k^2] by adaptive quadrature (scipy.integrate.quad with the algebraic weight) with P_k from scipy's Gegenbauer
  polynomials normalised at 1.
Negative controls: the number of monomials C(d + k - 1, k) (forgetting the Laplacian) and N(d - 1, k) (the wrong
sphere) must both disagree with the direct count; the unnormalised Gegenbauer polynomial must fail the addition check.
Assumptions: none beyond the standard definitions (harmonic = annihilated by the Laplacian).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, special
from sympy import QQ
from sympy.polys.matrices import DomainMatrix

from theory.harmonics import num_harmonics

SMALL_CASES = [(d, k) for d in range(2, 6) for k in range(0, 7)]
QUAD_RTOL = 1e-12


def _monomials(d: int, k: int) -> list[tuple[int, ...]]:
    """Exponent vectors of the degree-k monomials in d variables (empty for k < 0)."""
    if k < 0:
        return []
    return [tuple(c.count(i) for i in range(d)) for c in itertools.combinations_with_replacement(range(d), k)]


def _laplacian_nullity(d: int, k: int) -> int:
    """dim ker(Laplacian: homogeneous degree k -> degree k - 2), by exact rational rank."""
    columns = _monomials(d, k)
    if k < 2:
        return len(columns)  # constants and linear forms are all harmonic
    rows = {alpha: index for index, alpha in enumerate(_monomials(d, k - 2))}
    entries: list[list[int]] = [[0] * len(columns) for _ in rows]  # (n_rows, n_columns)
    for column, alpha in enumerate(columns):
        for i in range(d):
            if alpha[i] >= 2:  # d^2/dx_i^2 x^alpha = alpha_i (alpha_i - 1) x^{alpha - 2 e_i}
                target = alpha[:i] + (alpha[i] - 2,) + alpha[i + 1 :]
                entries[rows[target]][column] += alpha[i] * (alpha[i] - 1)
    matrix = DomainMatrix([[QQ(v) for v in row] for row in entries], (len(rows), len(columns)), QQ)
    return len(columns) - int(matrix.rank())


@pytest.mark.claim("Step 2: N(d,k) = (2k+d-2)/k C(k+d-3,k-1) is the dimension of the degree-k spherical harmonics")
def test_dimension_equals_laplacian_nullity(record_claim):
    rows = []
    for d, k in SMALL_CASES:
        direct = _laplacian_nullity(d, k)
        assert num_harmonics(d, k) == direct, f"d={d}, k={k}: formula {num_harmonics(d, k)}, direct count {direct}"
        rows.append(f"{d},{k}:{direct}")
    record_claim(
        measured="N(d,k) = Laplacian nullity for all d in 2..5, k in 0..6 (d,k:N): " + " ".join(rows),
        reference="exact rational rank of the Laplacian on homogeneous polynomials (sympy DomainMatrix)",
    )


@pytest.mark.claim("Negative control: monomial counts and the wrong sphere's N(d-1,k) fail the direct count")
def test_wrong_dimension_formulas_fail(record_claim):
    mismatches_monomials = 0
    mismatches_wrong_sphere = 0
    cases = [(d, k) for d, k in SMALL_CASES if k >= 2 and d >= 3]
    for d, k in cases:
        direct = _laplacian_nullity(d, k)
        mismatches_monomials += math.comb(d + k - 1, k) != direct
        mismatches_wrong_sphere += num_harmonics(d - 1, k) != direct
    assert mismatches_monomials == len(cases) and mismatches_wrong_sphere == len(cases)
    record_claim(
        measured=f"C(d+k-1,k) wrong in {mismatches_monomials}/{len(cases)} cases, N(d-1,k) wrong in "
        f"{mismatches_wrong_sphere}/{len(cases)} (d in 3..5, k in 2..6)",
        reference="both must disagree with the direct Laplacian count (they do)",
    )


def _mean_square(d: int, k: int, normalised: bool = True) -> float:
    """E[P_k(t)^2] under the density proportional to (1 - t^2)^{(d-3)/2}, by quad on [0, 1] (P_k^2 is even)."""
    a = (d - 3) / 2.0
    alpha = (d - 2) / 2.0
    scale = special.eval_gegenbauer(k, alpha, 1.0) if normalised else 1.0

    def integral(h) -> float:  # type: ignore[no-untyped-def]
        value, _ = integrate.quad(
            lambda t: h(t) * (1.0 + t) ** a, 0.0, 1.0, weight="alg", wvar=(0.0, a), epsabs=0.0, epsrel=QUAD_RTOL
        )
        return float(value)

    return integral(lambda t: (special.eval_gegenbauer(k, alpha, t) / scale) ** 2) / integral(lambda t: 1.0)


@pytest.mark.claim("Step 2: the zonal harmonic with P_k(1) = 1 has E[P_k(t)^2] = 1/N(d,k) (addition theorem)")
def test_addition_theorem_normalisation(record_claim):
    worst = 0.0
    for d in (3, 4, 5, 8, 16, 40):
        for k in range(0, 11):
            product = _mean_square(d, k) * num_harmonics(d, k)
            worst = max(worst, abs(product - 1.0))
            assert abs(product - 1.0) <= 100 * QUAD_RTOL, f"d={d}, k={k}: N E[P_k^2] = {product!r}"
    wrong = [abs(_mean_square(d, k, normalised=False) * num_harmonics(d, k) - 1.0) for d in (4, 8) for k in (1, 3, 6)]
    assert min(wrong) > 100 * QUAD_RTOL
    record_claim(
        measured=f"max |N(d,k) E[P_k^2] - 1| = {worst:.1e} (d in 3,4,5,8,16,40; k <= 10); unnormalised control "
        f"min deviation {min(wrong):.3f}",
        reference=f"1 (addition theorem); quad epsrel {QUAD_RTOL:g}, tolerance {100 * QUAD_RTOL:g}",
    )


@pytest.mark.claim("Reference sanity: the direct count gives 2k + 1 harmonics on S^2 and 2 on the circle")
def test_direct_count_examples(record_claim):
    sphere = [_laplacian_nullity(3, k) for k in range(5)]
    circle = [_laplacian_nullity(2, k) for k in range(5)]
    assert sphere == [1, 3, 5, 7, 9]
    assert circle == [1, 2, 2, 2, 2]
    assert np.isclose(_mean_square(3, 2), 1 / 5)
    record_claim(
        measured=f"S^2: {sphere}; circle: {circle}; E[P_2^2] (d=3) = {_mean_square(3, 2):.15f}",
        reference="classical: 2k + 1 (Legendre), cos/sin k theta, 1/5",
    )
