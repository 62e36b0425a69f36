"""Theorem 3's target: a sum of biased nearest-neighbour functions, and its "simple + sawtooth" decomposition.

docs/paper.md section 4. The paper's exact biases, key law and normalisation are unknown (section 7, "Open items"); the
choices below are ours and every check that uses this module restates them.

Assumptions (ours):

- N = 2 keys. Default key law D_2 (x_1, x_2 orthonormal, Haar); i.i.d. uniform keys are supported too.
- Gaussian query y ~ N(0, I_d), independent of the keys (not normalised). Then, given the keys, the margin
  s = <x_1 - x_2, y> is exactly N(0, ||x_1 - x_2||^2): N(0, 2) under D_2. With i.i.d. keys ||z||^2 = 2 (1 - <x_1, x_2>)
  varies from sample to sample, so s is a scale mixture of Gaussians; nothing else changes.
- Biases b_j = j * delta, j = -m .. m, i.e. M = 2 m + 1 biases; default m = d^2 (the reported 2 d^2 + 1) and
  delta = coverage * sqrt(2) / m with coverage = 4: the biases span +-4 standard deviations of s under D_2
  (P(|s| > 4 sqrt 2) = 6.3e-5). Evenly spaced biases are what make the remainder exactly periodic.
- No normalisation: F(X, y) = sum_j f_{b_j}(X, y), where f_b = x_1 if s > b else x_2. Dividing by M would scale every
  squared error by 1 / M^2; unnormalised, the oscillating part carries a constant energy (about 1/6 under D_2), which is
  what makes "error at least a constant" meaningful while the full-rank model's error goes to 0.

Decomposition. With z = x_1 - x_2 and c(s) = #{j : b_j < s}, F = M x_2 + c(s) z. For s / delta in (-m - 1, m + 1)
(the "bulk"), c(s) = m + 1/2 + s / delta + saw(s / delta) with saw(u) = ceil(u) - u - 1/2 (a period-1 sawtooth in
(-1/2, 1/2], mean 0, Fourier series saw(u) = sum_{k >= 1} sin(2 pi k u) / (pi k)), so in the bulk

    F = (M/2) (x_1 + x_2) + z s / delta  +  z psi(s),       psi(s) = saw(s / delta)   (period delta).
        `------- simple part A -------'     `- oscillating part O -'

Globally we *define* O = z psi(s) (psi periodic on all of R) and A = F - O; A equals the closed form above in the bulk
and differs from it only in the Gaussian tail beyond the last bias.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import roots_jacobi, roots_legendre

from theory.sphere import KEY_KINDS, sample_iid_keys, sample_orthonormal_keys
from theory.validation import (
    check_array,
    check_choice,
    check_dimension,
    check_generator,
    check_int,
    check_real,
)

FloatArray = npt.NDArray[np.float64]

DEFAULT_COVERAGE = 4.0
"""Default half-width of the bias range, in standard deviations of s = <x_1 - x_2, y> under D_2 (std sqrt 2)."""


@dataclass(frozen=True)
class BiasGrid:
    """Evenly spaced biases b_j = j * delta, j = -m .. m.

    Attributes:
        m: half the number of biases minus one half (M = 2 m + 1 biases), >= 0.
        delta: the spacing (> 0), which is also the period of the sawtooth psi.
    """

    m: int
    delta: float

    @property
    def count(self) -> int:
        """M = 2 m + 1, the number of biased nearest-neighbour functions in the sum."""
        return 2 * self.m + 1

    @property
    def biases(self) -> FloatArray:
        """(M,) the biases in increasing order."""
        return self.delta * np.arange(-self.m, self.m + 1, dtype=np.float64)

    @property
    def bulk_half_width(self) -> float:
        """(m + 1) delta: the decomposition's closed form for A holds for |s| < this."""
        return (self.m + 1) * self.delta


def bias_grid(d: int, m: int | None = None, delta: float | None = None, coverage: float = DEFAULT_COVERAGE) -> BiasGrid:
    """The bias grid of the target in dimension d.

    Args:
        d: ambient dimension (>= 2).
        m: half-count (>= 1); default d^2, i.e. 2 d^2 + 1 biases.
        delta: spacing (> 0); default coverage * sqrt(2) / m.
        coverage: half-width of the bias range in standard deviations of s under D_2 (> 0), used when delta is None.

    Returns:
        The BiasGrid.
    """
    d = check_dimension(d)
    m = d * d if m is None else check_int("m", m, minimum=1)
    coverage = check_real("coverage", coverage, minimum=0.0, strict_minimum=True)
    delta = (
        coverage * math.sqrt(2.0) / m if delta is None else check_real("delta", delta, minimum=0.0, strict_minimum=True)
    )
    return BiasGrid(m=m, delta=delta)


def _require_grid(grid: Any) -> BiasGrid:
    if not isinstance(grid, BiasGrid):
        raise ValueError(f"grid must be a BiasGrid (see theory.biased_target.bias_grid), got {type(grid).__name__}")
    return grid


def _check_grid(grid: Any, d: int) -> BiasGrid:
    if grid is None:
        return bias_grid(d)
    if not isinstance(grid, BiasGrid):
        raise ValueError(
            f"grid must be a BiasGrid (see theory.biased_target.bias_grid) or None, got {type(grid).__name__}"
        )
    return grid


def sample_biased_context(
    n: int, d: int, rng: np.random.Generator, keys: str = "orthonormal"
) -> tuple[FloatArray, FloatArray]:
    """Sample (X, y): two keys (D_2 orthonormal or i.i.d. uniform) and an independent Gaussian query y ~ N(0, I_d).

    Args:
        n: number of samples (>= 0).
        d: ambient dimension (>= 2).
        rng: the source of randomness.
        keys: "orthonormal" (D_2, default) or "iid".

    Returns:
        X (n, 2, d) and y (n, d).
    """
    n = check_int("n", n, minimum=0)
    d = check_dimension(d)
    rng = check_generator(rng)
    keys = check_choice("keys", keys, KEY_KINDS)
    X = sample_orthonormal_keys(n, 2, d, rng) if keys == "orthonormal" else sample_iid_keys(n, 2, d, rng)
    y = rng.standard_normal((n, d))  # (n, d); Gaussian, NOT normalised
    return X, y


def _check_pair_context(X: Any, y: Any) -> tuple[FloatArray, FloatArray]:
    X = check_array("X", X, ndim=3)
    if X.shape[1] != 2:
        raise ValueError(f"X must have shape (n, 2, d) for the biased target (N = 2), got {X.shape}")
    n, _, d = X.shape
    y = check_array("y", y)
    if y.shape != (n, d):
        raise ValueError(f"y must have shape (n, d) = ({n}, {d}) to match X of shape {X.shape}, got {y.shape}")
    return X, y


def margin(X: Any, y: Any) -> FloatArray:
    """The margin s = <x_1 - x_2, y> that every summand thresholds.

    Args:
        X: (n, 2, d) keys.
        y: (n, d) queries.

    Returns:
        (n,) margins.
    """
    X, y = _check_pair_context(X, y)
    return np.einsum("nd,nd->n", X[:, 0] - X[:, 1], y)  # (n,)


def bias_count(s: Any, grid: BiasGrid) -> FloatArray:
    """c(s) = #{j : b_j < s}, the number of summands that pick x_1.

    Args:
        s: (n,) margins.
        grid: the bias grid.

    Returns:
        (n,) counts in [0, M], as floats.
    """
    s = check_array("s", s, ndim=1)
    grid = _require_grid(grid)
    return np.searchsorted(grid.biases, s, side="left").astype(np.float64)  # (n,); side=left counts b_j < s


def biased_target(X: Any, y: Any, grid: BiasGrid | None = None) -> FloatArray:
    """F(X, y) = sum_j f_{b_j}(X, y) = M x_2 + c(s) (x_1 - x_2) (unnormalised sum of M biased nearest neighbours).

    Args:
        X: (n, 2, d) keys.
        y: (n, d) queries.
        grid: the bias grid (default `bias_grid(d)`).

    Returns:
        (n, d) target values.
    """
    X, y = _check_pair_context(X, y)
    grid = _check_grid(grid, X.shape[2])
    count = bias_count(margin(X, y), grid)  # (n,)
    return grid.count * X[:, 1] + count[:, None] * (X[:, 0] - X[:, 1])  # (n, d)


def sawtooth(u: Any) -> Any:
    """The period-1 sawtooth saw(u) = ceil(u) - u - 1/2, values in [-1/2, 1/2), mean 0 over a period.

    Args:
        u: real scalar or array.

    Returns:
        saw(u), same shape (float for a scalar).
    """
    scalar = np.ndim(u) == 0
    values = check_array("u", u)
    out = np.ceil(values) - values - 0.5
    return float(out) if scalar else out


def sawtooth_sine_coefficient(k: Any) -> Any:
    """Fourier sine coefficient of saw: saw(u) = sum_{k >= 1} sin(2 pi k u) / (pi k) (cosine coefficients vanish).

    Args:
        k: integer frequency (>= 1) or array of them.

    Returns:
        1 / (pi k), same shape.
    """
    if np.ndim(k) == 0:
        return 1.0 / (math.pi * check_int("k", k, minimum=1))
    ks = check_array("k", k)
    if np.any(ks < 1) or np.any(ks != np.round(ks)):
        raise ValueError("k must contain only integers >= 1")
    return 1.0 / (math.pi * ks)


def psi(s: Any, grid: BiasGrid) -> Any:
    """psi(s) = saw(s / delta): the oscillating factor (period delta, amplitude 1/2).

    Args:
        s: margins (scalar or array).
        grid: the bias grid.

    Returns:
        psi(s), same shape.
    """
    grid = _require_grid(grid)
    scalar = np.ndim(s) == 0
    values = check_array("s", s)
    out = sawtooth(values / grid.delta)
    return float(out) if scalar else out


def oscillating_part(X: Any, y: Any, grid: BiasGrid | None = None) -> FloatArray:
    """O(X, y) = (x_1 - x_2) psi(<x_1 - x_2, y>).

    Args:
        X: (n, 2, d) keys.
        y: (n, d) queries.
        grid: the bias grid (default `bias_grid(d)`).

    Returns:
        (n, d).
    """
    X, y = _check_pair_context(X, y)
    grid = _check_grid(grid, X.shape[2])
    return psi(margin(X, y), grid)[:, None] * (X[:, 0] - X[:, 1])  # (n, d)


def simple_part(X: Any, y: Any, grid: BiasGrid | None = None) -> FloatArray:
    """A = F - O, the non-oscillating part (equal to `bulk_simple_part` wherever |s| < (m + 1) delta).

    Args:
        X: (n, 2, d) keys.
        y: (n, d) queries.
        grid: the bias grid (default `bias_grid(d)`).

    Returns:
        (n, d).
    """
    X, y = _check_pair_context(X, y)
    grid = _check_grid(grid, X.shape[2])
    return biased_target(X, y, grid) - oscillating_part(X, y, grid)


def bulk_simple_part(X: Any, y: Any, grid: BiasGrid | None = None) -> FloatArray:
    """The closed form (M/2)(x_1 + x_2) + (x_1 - x_2) s / delta of the simple part in the bulk.

    Args:
        X: (n, 2, d) keys.
        y: (n, d) queries.
        grid: the bias grid (default `bias_grid(d)`).

    Returns:
        (n, d).
    """
    X, y = _check_pair_context(X, y)
    grid = _check_grid(grid, X.shape[2])
    s = margin(X, y)  # (n,)
    return 0.5 * grid.count * (X[:, 0] + X[:, 1]) + (s / grid.delta)[:, None] * (X[:, 0] - X[:, 1])  # (n, d)


def in_bulk(s: Any, grid: BiasGrid) -> npt.NDArray[np.bool_]:
    """Whether |s| < (m + 1) delta, where F = bulk_simple_part + oscillating_part exactly.

    Args:
        s: (n,) margins.
        grid: the bias grid.

    Returns:
        (n,) booleans.
    """
    s = check_array("s", s, ndim=1)
    grid = _require_grid(grid)
    return np.abs(s) < grid.bulk_half_width


@dataclass(frozen=True)
class BiasedMoments:
    """Exact population second moments of the decomposition F = A + O (Gaussian query, given key law).

    Attributes:
        oscillation_energy: E ||O||^2 (about E||z||^2 / 12).
        overlap: E <A, O> (tiny: Gaussian-smoothed sawtooth against a line, plus tail terms).
        simple_energy: E ||A||^2.
        target_energy: E ||F||^2.
    """

    oscillation_energy: float
    overlap: float
    simple_energy: float
    target_energy: float

    @property
    def residual_oscillation_energy(self) -> float:
        """||O'||^2 = ||O||^2 - <A, O>^2 / ||A||^2, the energy of O orthogonal to A."""
        return self.oscillation_energy - self.overlap**2 / self.simple_energy


def gaussian_expectation(
    func: Callable[[FloatArray], FloatArray], scale: float, grid: BiasGrid, refine: float | None = None
) -> float:
    """E[func(s)] for s ~ N(0, scale^2), func smooth between multiples of delta (16-node Gauss-Legendre per piece).

    Args:
        func: vectorised (P,) -> (P,) function, smooth between consecutive multiples of grid.delta.
        scale: standard deviation of s (> 0).
        grid: the bias grid (its spacing gives the breakpoints).
        refine: optional boundary-layer width w > 0: each piece is also split at distances w 2^k (k >= 0, w 2^k <
            delta / 2) from both ends, for integrands like sigmoid(T (s - b)) - 1[s > b] with w = 1 / T.

    Returns:
        The expectation (integration range +-12 scale; the Gaussian mass outside is ~4e-33).
    """
    scale = check_real("scale", scale, minimum=0.0, strict_minimum=True)
    grid = _require_grid(grid)
    half_width = 12.0 * scale  # P(|s| > 12 sd) ~ 4e-33
    k_lo = math.floor(-half_width / grid.delta)
    k_hi = math.ceil(half_width / grid.delta)
    edges = grid.delta * np.arange(k_lo, k_hi + 1, dtype=np.float64)  # (P + 1,) breakpoints at multiples of delta
    if refine is not None:
        width = check_real("refine", refine, minimum=0.0, strict_minimum=True)
        offsets = width * 2.0 ** np.arange(0, 64)  # (64,)
        offsets = offsets[offsets < 0.5 * grid.delta]  # (K,)
        extra = np.concatenate(
            [(edges[:, None] + offsets[None, :]).ravel(), (edges[:, None] - offsets[None, :]).ravel()]
        )
        edges = np.unique(np.concatenate([edges, extra]))  # sorted, graded towards every multiple of delta
    nodes, weights = roots_legendre(16)  # (16,)
    lo, hi = edges[:-1], edges[1:]  # (P,)
    points = 0.5 * (hi - lo)[:, None] * nodes[None, :] + 0.5 * (hi + lo)[:, None]  # (P, 16)
    w = 0.5 * (hi - lo)[:, None] * weights[None, :]  # (P, 16)
    density = np.exp(-0.5 * (points / scale) ** 2) / (scale * math.sqrt(2.0 * math.pi))  # (P, 16)
    values = func(points.ravel()).reshape(points.shape)  # (P, 16)
    return float(np.sum(w * density * values))


def population_moments(grid: BiasGrid, d: int, keys: str = "orthonormal", n_nodes: int = 48) -> BiasedMoments:
    """Exact (quadrature) moments of A and O under the Gaussian query and the given keys.

    For unit keys, <x_2, z> = -||z||^2 / 2 with z = x_1 - x_2, so with zeta = ||z||^2 and s | zeta ~ N(0, zeta):
    <O, O> = zeta psi^2, <A, O> = zeta (c - M/2 - psi) psi, ||A||^2 = M^2 + zeta (c - psi)(c - psi - M),
    ||F||^2 = M^2 + zeta c (c - M). Under D_2, zeta = 2; with i.i.d. keys zeta = 2 (1 - t), t = <x_1, x_2> with the
    coordinate density on [-1, 1], integrated by Gauss-Jacobi quadrature (n_nodes nodes).

    Args:
        grid: the bias grid.
        d: ambient dimension (>= 2).
        keys: "orthonormal" or "iid".
        n_nodes: Gauss-Jacobi nodes over t for i.i.d. keys (>= 4).

    Returns:
        BiasedMoments.
    """
    grid = _require_grid(grid)
    d = check_dimension(d)
    keys = check_choice("keys", keys, KEY_KINDS)
    n_nodes = check_int("n_nodes", n_nodes, minimum=4)
    M = float(grid.count)
    biases = grid.biases

    def moments_given(zeta: float) -> FloatArray:
        def integrand(s: FloatArray) -> FloatArray:
            c = np.searchsorted(biases, s, side="left").astype(np.float64)  # (P,)
            p = sawtooth(s / grid.delta)  # (P,)
            return np.stack(
                [
                    zeta * p * p,
                    zeta * (c - 0.5 * M - p) * p,
                    M * M + zeta * (c - p) * (c - p - M),
                    M * M + zeta * c * (c - M),
                ]
            )  # (4, P)

        def component(i: int) -> Callable[[FloatArray], FloatArray]:
            return lambda s: integrand(s)[i]

        return np.array([gaussian_expectation(component(i), math.sqrt(zeta), grid) for i in range(4)])  # (4,)

    if keys == "orthonormal":
        values = moments_given(2.0)
    else:
        exponent = 0.5 * (d - 3)  # density of t proportional to (1 - t)^a (1 + t)^a with a = (d - 3) / 2
        nodes, weights = roots_jacobi(n_nodes, exponent, exponent)  # (n_nodes,)
        weights = weights / np.sum(weights)
        values = sum(w * moments_given(2.0 * (1.0 - t)) for t, w in zip(nodes, weights, strict=True))
    return BiasedMoments(
        oscillation_energy=float(values[0]),
        overlap=float(values[1]),
        simple_energy=float(values[2]),
        target_energy=float(values[3]),
    )
