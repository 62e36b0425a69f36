"""Grothendieck's identity, the lemma behind the head-vs-head kernel (docs/paper.md sections 3 and 6).

Claim, in our words: for unit vectors a, b in R^d and y uniform on the sphere (equivalently Gaussian),
E[sign<y, a> sign<y, b>] = (2/pi) arcsin<a, b>, in every dimension d >= 2. (The hyperplane orthogonal to y separates
a and b with probability angle(a, b)/pi, so the expectation is 1 - 2 angle/pi = (2/pi) arcsin<a, b>.)

Check: Monte Carlo with n = 50000 uniform y per dimension d in {2, 3, 8, 64}, for 7 cosines from -0.95 to 0.95
(a fresh random pair (a, b) per cosine); every estimate must lie within 4 standard errors of
theory.kernels.sign_correlation.
Negative control: the linear guess E[...] = <a, b> must be rejected by the same test at every cosine other than 0.
Assumptions: none beyond the lemma's (unit vectors, uniform y).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from theory.kernels import sign_correlation
from theory.monte_carlo import DEFAULT_Z, estimate_mean
from theory.sphere import sample_sphere

N_SAMPLES = 50_000
Z = DEFAULT_Z  # acceptance half-width in standard errors (one value for every statistical check)
DIMENSIONS = (2, 3, 8, 64)
COSINES = (-0.95, -0.6, -0.25, 0.0, 0.3, 0.7, 0.95)


def _pair(cos: float, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random pair of unit vectors in R^d with inner product cos."""
    frame = np.linalg.qr(rng.standard_normal((d, 2)))[0].T  # (2, d) orthonormal
    return frame[0], cos * frame[0] + math.sqrt(1 - cos * cos) * frame[1]


@pytest.mark.claim("Grothendieck identity: E[sign<y,a> sign<y,b>] = (2/pi) arcsin<a,b> for y uniform on the sphere")
def test_grothendieck_identity_matches_monte_carlo(record_claim) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(2024)
    worst_z, linear_rejected, linear_tested = 0.0, 0, 0
    failures = []
    for d in DIMENSIONS:
        y = sample_sphere(N_SAMPLES, d, rng)  # (n, d)
        for cos in COSINES:
            a, b = _pair(cos, d, rng)
            estimate = estimate_mean(np.sign(y @ a) * np.sign(y @ b))
            predicted = sign_correlation(cos)
            z = abs(estimate.mean - predicted) / estimate.stderr
            worst_z = max(worst_z, z)
            if not estimate.contains(predicted, Z):
                failures.append(
                    f"d = {d}, cos = {cos}: MC {estimate.mean:.4f} +- {estimate.stderr:.4f}, prediction {predicted:.4f}"
                )
            if cos != 0.0:
                linear_tested += 1
                linear_rejected += not estimate.contains(cos, Z)
    record_claim(
        measured=f"max |MC - (2/pi) asin| = {worst_z:.2f} s.e. over {len(DIMENSIONS) * len(COSINES)} (d, cos) pairs, "
        f"n = {N_SAMPLES} each; linear guess <a,b> rejected in {linear_rejected}/{linear_tested}",
        reference="(2/pi) arcsin<a,b>, accepted within 4 s.e.; negative control <a,b> must be rejected",
    )
    assert not failures, "; ".join(failures)
    assert linear_rejected == linear_tested, "negative control: the linear guess <a,b> was not rejected everywhere"
