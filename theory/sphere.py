"""Geometry and sampling on the unit sphere S^{d-1}: uniform points, the D_N key distribution, coordinate laws.

Distributions used throughout the paper (docs/paper.md section 1):

- uniform on S^{d-1}: a standard Gaussian vector divided by its norm (rotation invariance of the Gaussian);
- D_N keys: the first N columns of a Haar-random orthogonal d x d matrix, stored as the N rows of an (N, d) array;
- i.i.d. keys: N independent uniform points;
- a context (X, y): keys of either kind and a query y uniform on the sphere, independent of X.

The first coordinate t = <u, e> of a uniform point u has density c_d (1 - t^2)^{(d-3)/2} on [-1, 1], with
c_d = Gamma(d/2) / (sqrt(pi) Gamma((d-1)/2)); for d = 2 this is the arcsine density 1 / (pi sqrt(1 - t^2)).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln

from theory.validation import check_array, check_choice, check_dimension, check_generator, check_int

FloatArray = npt.NDArray[np.float64]

KEY_KINDS = ("orthonormal", "iid")
"""Key distributions accepted by :func:`sample_context`."""


def sample_sphere(n: int, d: int, rng: np.random.Generator) -> FloatArray:
    """Sample points uniformly on S^{d-1}.

    Args:
        n: number of samples (>= 0).
        d: ambient dimension (>= 2).
        rng: the source of randomness.

    Returns:
        (n, d) array of unit rows.
    """
    n = check_int("n", n, minimum=0)
    d = check_dimension(d)
    rng = check_generator(rng)
    gaussian = rng.standard_normal((n, d))  # (n, d)
    norms = np.linalg.norm(gaussian, axis=1, keepdims=True)  # (n, 1); zero has probability 0
    return gaussian / norms


def sample_orthonormal_keys(n: int, N: int, d: int, rng: np.random.Generator) -> FloatArray:
    """Sample D_N keys: per sample, the first N columns of a Haar-random orthogonal matrix, as rows.

    The first N columns of the Haar matrix obtained from the QR factorisation of a d x d Gaussian (with the signs of
    R's diagonal moved into Q) depend only on the first N Gaussian columns, so we factorise a d x N Gaussian directly.

    Args:
        n: number of samples (>= 0).
        N: number of keys per sample, 1 <= N <= d.
        d: ambient dimension (>= 2).
        rng: the source of randomness.

    Returns:
        (n, N, d) array; the N rows of each sample are orthonormal.
    """
    n = check_int("n", n, minimum=0)
    d = check_dimension(d)
    N = check_int("N", N, minimum=1, maximum=d)
    rng = check_generator(rng)
    gaussian = rng.standard_normal((n, d, N))  # (n, d, N)
    q, r = np.linalg.qr(gaussian)  # q (n, d, N), r (n, N, N); batched over the leading axis
    diagonal = np.diagonal(r, axis1=1, axis2=2)  # (n, N)
    signs = np.where(diagonal < 0.0, -1.0, 1.0)  # (n, N); makes the factorisation unique, hence Haar
    q = q * signs[:, None, :]  # (n, d, N)
    return np.ascontiguousarray(np.swapaxes(q, 1, 2))  # (n, N, d)


def sample_iid_keys(n: int, N: int, d: int, rng: np.random.Generator) -> FloatArray:
    """Sample N independent uniform keys per sample.

    Args:
        n: number of samples (>= 0).
        N: number of keys per sample (>= 1).
        d: ambient dimension (>= 2).
        rng: the source of randomness.

    Returns:
        (n, N, d) array of unit rows.
    """
    n = check_int("n", n, minimum=0)
    N = check_int("N", N, minimum=1)
    d = check_dimension(d)
    rng = check_generator(rng)
    return sample_sphere(n * N, d, rng).reshape(n, N, d)  # (n, N, d)


def sample_context(
    n: int, N: int, d: int, rng: np.random.Generator, keys: str = "orthonormal"
) -> tuple[FloatArray, FloatArray]:
    """Sample contexts X and independent uniform queries y.

    Args:
        n: number of samples (>= 0).
        N: number of keys per sample (>= 1; <= d for orthonormal keys).
        d: ambient dimension (>= 2).
        rng: the source of randomness.
        keys: "orthonormal" (the paper's D_N) or "iid" (independent uniform keys).

    Returns:
        X of shape (n, N, d) and y of shape (n, d).
    """
    keys = check_choice("keys", keys, KEY_KINDS)
    if keys == "orthonormal":
        X = sample_orthonormal_keys(n, N, d, rng)
    else:
        X = sample_iid_keys(n, N, d, rng)
    y = sample_sphere(n, d, rng)
    return X, y


def coordinate_density_constant(d: int) -> float:
    """The normalising constant c_d = Gamma(d/2) / (sqrt(pi) Gamma((d-1)/2)) of the coordinate density.

    Args:
        d: ambient dimension (>= 2).

    Returns:
        c_d as a float (computed through log-gamma, so it is accurate for large d).
    """
    d = check_dimension(d)
    return math.exp(gammaln(d / 2.0) - gammaln((d - 1) / 2.0) - 0.5 * math.log(math.pi))


def coordinate_density(t: Any, d: int) -> Any:
    """Density of t = <u, e> for u uniform on S^{d-1} and a fixed unit vector e.

    Args:
        t: real scalar or array (any shape); values outside [-1, 1] have density 0.
        d: ambient dimension (>= 2); d = 2 gives the arcsine density (infinite at t = +-1).

    Returns:
        c_d (1 - t^2)^{(d-3)/2}, same shape as t (a float for scalar t).
    """
    d = check_dimension(d)
    scalar = np.ndim(t) == 0
    values = check_array("t", t, finite=True)
    log_c = gammaln(d / 2.0) - gammaln((d - 1) / 2.0) - 0.5 * math.log(math.pi)
    inside = np.abs(values) < 1.0
    one_minus = np.where(inside, 1.0 - values * values, 1.0)  # placeholder 1 outside, masked below
    density = np.exp(log_c + 0.5 * (d - 3) * np.log(one_minus))
    density = np.where(inside, density, 0.0)
    at_pole = np.abs(values) == 1.0
    if np.any(at_pole):
        # (1 - t^2)^{(d-3)/2} at t = +-1: infinite for d = 2, c_3 = 1/2 for d = 3, zero for d > 3.
        pole_value = math.inf if d == 2 else (0.5 if d == 3 else 0.0)
        density = np.where(at_pole, pole_value, density)
    if scalar:
        return float(density)
    return density


def sample_coordinate(n: int, d: int, rng: np.random.Generator) -> FloatArray:
    """Sample t = <u, e_1> for u uniform on S^{d-1}, without drawing u.

    t^2 = g_1^2 / (g_1^2 + chi^2_{d-1}) is Beta(1/2, (d-1)/2) distributed and the sign of t is an independent fair coin.

    Args:
        n: number of samples (>= 0).
        d: ambient dimension (>= 2).
        rng: the source of randomness.

    Returns:
        (n,) array with values in [-1, 1].
    """
    n = check_int("n", n, minimum=0)
    d = check_dimension(d)
    rng = check_generator(rng)
    squared = rng.beta(0.5, 0.5 * (d - 1), size=n)  # (n,)
    signs = np.where(rng.random(n) < 0.5, -1.0, 1.0)  # (n,)
    return signs * np.sqrt(squared)
