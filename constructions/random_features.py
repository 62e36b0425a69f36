"""Random rank-1 hardmax heads with optimal output weights V_h = a_h I (docs/paper.md sections 3 and 6).

Setting (N = 2 keys from D_2, hardmax). A rank-1 head (q, k) with V = I outputs the key x_i maximising
<q, y> <k, x_i>. With u = (x_1 - x_2)/sqrt 2 (uniform, independent of y) and s_h = sign<q_h, y> sign<k_h, u>,

    f_h = (x_1 + x_2)/2 + s_h (x_1 - x_2)/2,        f* = (x_1 + x_2)/2 + sign<u, y> (x_1 - x_2)/2.

Since x_1 and x_2 are orthonormal, (x_1 + x_2)/2 and (x_1 - x_2)/2 are orthogonal with squared norm 1/2 each, so

    E<f_h, f_h'> = 1/2 + (1/2) E[s_h s_h'] = C_hh'  (theory.kernels.head_kernel_matrix),
    E<f_h, f*>   = 1/2 + (1/2) E[s_h sign<u, y>] = b_h  (theory.kernels.head_target_kernel, sign expansion),
    E||f*||^2   = 1.

Expanding the square, the model sum_h a_h f_h (value maps V_h = a_h I) has the exact error

    E(a) = E||sum_h a_h f_h - f*||^2 = a^T C a - 2 a^T b + 1,

a convex quadratic. Its minimum over a solves C a = b and equals 1 - b^T C^{-1} b (the paper's curve). Every error
reported here is E(a) for explicit weights a (up to float64 rounding), so it is an achievable error, never below the
true optimum for that dictionary of heads by more than the stated solver tolerance.

Linear algebra (what happens when C is ill-conditioned). C is positive semi-definite. ``optimal_output_weights``
factors C by Cholesky; if that fails (C numerically singular), it falls back to an eigendecomposition that drops the
eigen-directions with eigenvalue <= H * eps * lambda_max (eps = float64 machine epsilon) and uses the pseudo-inverse
on the rest. The dropped directions carry at most cutoff * ||a||^2 of the objective, and the reported error is always
recomputed as E(a) for the a actually returned, so it stays a valid achievable error.

Speed (``prefix_errors``, used for the paper's curve with nested prefixes of one draw of heads):
* C is formed row block by row block straight into its output array; the arcsin is evaluated in place by torch
  (vectorised, multi-threaded, accurate to about 1 ulp in float64), which is ~15x faster than numpy's arcsin.
* The errors of all prefixes m <= m0 come from one Cholesky factor L of the leading m0 x m0 block: the leading
  block of L factors every leading block of C, so with z = L^{-1} b the error of the first m heads is
  1 - sum_{i<m} z_i^2.
* A larger prefix m > m0 is reached by block elimination (below, ``_schur_extension``): the Schur complement
  S = C_22 - C_21 C_11^{-1} C_12 is well conditioned in practice (measured condition numbers 3-5 for d = 8 .. 64,
  H = 8192: the shared low-degree directions are already explained by the first block), so conjugate gradients
  solve it in a few dozen matrix-vector products instead of an O(m^3) factorisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.linalg
import scipy.optimize
import scipy.sparse.linalg
import torch

from constructions.weights_io import save_weights
from theory.attention import multihead_attention
from theory.kernels import head_target_kernel
from theory.monte_carlo import MonteCarloEstimate, estimate_error
from theory.sphere import sample_context, sample_sphere
from theory.targets import nearest_neighbor
from theory.validation import (
    check_array,
    check_choice,
    check_dimension,
    check_generator,
    check_heads,
    check_instance,
    check_int,
    check_output_file,
    check_real,
    check_sample_count,
    check_seed,
)

FloatArray = npt.NDArray[np.float64]

DISTRIBUTIONS = ("uniform-cosine", "independent", "aligned")
"""Head distributions: "uniform-cosine" (the paper's: q uniform, cos angle(q, k) uniform on [-1, 1]), "independent"
(q, k independent uniform), "aligned" (q = k uniform)."""

_EPS = float(np.finfo(np.float64).eps)
_ROW_BLOCK = 1024  # rows of C formed at once (a (1024, H) float64 temporary: 134 MB at H = 16384)
DIRECT_SIZE = 4096
"""Largest leading block of C factored by Cholesky in ``nested_optimal_errors``; larger prefixes use CG."""
CG_RTOL = 1e-12
"""Relative residual of the conjugate-gradient solves of the Schur complement systems."""


# ---------------------------------------------------------------------------------------------------------------------
# Heads and kernels
# ---------------------------------------------------------------------------------------------------------------------


def sample_heads(
    H: int, d: int, rng: np.random.Generator, distribution: str = "uniform-cosine"
) -> tuple[FloatArray, FloatArray]:
    """Draw H rank-1 heads (unit query and key directions).

    "uniform-cosine": q uniform; k = t q + sqrt(1 - t^2) w with t uniform on [-1, 1] and w uniform on the unit sphere
    of q's orthogonal complement, so cos angle(q, k) = t is uniform. The first m heads of a draw are a draw of m heads.

    Args:
        H: number of heads (>= 1).
        d: dimension (>= 2).
        rng: source of randomness.
        distribution: one of DISTRIBUTIONS.

    Returns:
        q (H, d) and k (H, d), unit rows.
    """
    H = check_heads(H)
    d = check_dimension(d)
    rng = check_generator(rng)
    distribution = check_choice("distribution", distribution, DISTRIBUTIONS)
    q = sample_sphere(H, d, rng)  # (H, d)
    if distribution == "aligned":
        return q, q.copy()
    if distribution == "independent":
        return q, sample_sphere(H, d, rng)
    t = rng.uniform(-1.0, 1.0, size=H)  # (H,) cosines
    w = rng.standard_normal((H, d))  # (H, d)
    w -= np.sum(w * q, axis=1, keepdims=True) * q  # project out q: (H, d)
    w /= np.linalg.norm(w, axis=1, keepdims=True)  # zero norm has probability 0
    k = t[:, None] * q + np.sqrt(1.0 - t * t)[:, None] * w  # (H, d), unit rows
    k /= np.linalg.norm(k, axis=1, keepdims=True)  # remove rounding
    return q, k


def _check_heads_pair(q: Any, k: Any) -> tuple[FloatArray, FloatArray]:
    """Validate (H, d) query and key directions with non-zero rows and return them normalised."""
    q = check_array("q", q, ndim=2)
    if q.shape[0] < 1 or q.shape[1] < 2:
        raise ValueError(f"q must have shape (H, d) with H >= 1 and d >= 2, got {q.shape}")
    k = check_array("k", k, shape=q.shape)
    rows = []
    for name, value in (("q", q), ("k", k)):
        norms = np.linalg.norm(value, axis=1, keepdims=True)  # (H, 1)
        if np.any(norms == 0.0):
            raise ValueError(f"{name} must have non-zero rows (head directions)")
        rows.append(value / norms)
    return rows[0], rows[1]


def kernel_matrix(q: Any, k: Any) -> FloatArray:
    """C = 1/2 + (2/pi^2) arcsin(q q^T) arcsin(k k^T), formed block-wise in place (fast path of head_kernel_matrix).

    Peak memory: the (H, H) result plus one (1024, H) block.

    Args:
        q: (H, d) query directions (non-zero rows, normalised here).
        k: (H, d) key directions.

    Returns:
        (H, H) float64 symmetric matrix with unit diagonal.
    """
    q, k = _check_heads_pair(q, k)
    H = q.shape[0]
    out = np.empty((H, H))  # (H, H)
    scratch = np.empty((min(_ROW_BLOCK, H), H))  # (block, H)
    # torch views share memory with the numpy arrays; torch's matmul (MKL) is faster than numpy's for small d.
    q_t, k_t = torch.from_numpy(q), torch.from_numpy(k)  # (H, d)
    for start in range(0, H, _ROW_BLOCK):
        stop = min(start + _ROW_BLOCK, H)
        rows = out[start:stop]  # (m, H) view, C-contiguous
        keys = scratch[: stop - start]  # (m, H)
        torch.mm(q_t[start:stop], q_t.T, out=torch.from_numpy(rows))  # (m, H) query cosines
        torch.mm(k_t[start:stop], k_t.T, out=torch.from_numpy(keys))  # (m, H) key cosines
        for block in (rows, keys):
            diagonal = block[:, start:stop]  # (m, m): its diagonal holds <q_h, q_h> = 1 up to rounding
            np.fill_diagonal(diagonal, 1.0)
            np.clip(block, -1.0, 1.0, out=block)
            torch.asin_(torch.from_numpy(block))  # in place on the numpy memory
        rows *= keys
        rows *= 2.0 / math.pi**2
        rows += 0.5
    return out


def target_kernel(q: Any, k: Any) -> FloatArray:
    """b_h = P(head h picks the nearest of two D_2 keys), from the sign expansion (theory.kernels).

    Args:
        q: (H, d) query directions.  k: (H, d) key directions.

    Returns:
        (H,) values in [0, 1].
    """
    q, k = _check_heads_pair(q, k)
    cosines = np.clip(np.sum(q * k, axis=1), -1.0, 1.0)  # (H,)
    return np.asarray(head_target_kernel(cosines, q.shape[1]), dtype=np.float64)


def _check_system(C: Any, b: Any) -> tuple[FloatArray, FloatArray]:
    """Validate a symmetric (H, H) kernel C and (H,) vector b."""
    C = check_array("C", C, ndim=2)
    if C.shape[0] != C.shape[1] or C.shape[0] < 1:
        raise ValueError(f"C must be a square (H, H) matrix with H >= 1, got shape {C.shape}")
    b = check_array("b", b, shape=(C.shape[0],))
    return C, b


def weight_error(C: Any, b: Any, a: Any) -> float:
    """Exact error E(a) = a^T C a - 2 a^T b + 1 of the model sum_h a_h f_h (V_h = a_h I).

    Args:
        C: (H, H) head kernel.  b: (H,) head-target kernel.  a: (H,) output weights.

    Returns:
        E||sum_h a_h f_h - f*||^2 under D_2.
    """
    C, b = _check_system(C, b)
    a = check_array("a", a, shape=b.shape)
    return float(a @ (C @ a) - 2.0 * (a @ b) + 1.0)


# ---------------------------------------------------------------------------------------------------------------------
# Optimal weights without a norm limit
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputWeights:
    """Output weights a and their exact error E(a).

    Attributes:
        a: (H,) weights.
        error: E(a) = a^T C a - 2 a^T b + 1, recomputed for this a.
        method: "cholesky" or "eigh-cutoff" (C numerically singular).
        discarded: number of eigen-directions dropped by the cutoff (0 for "cholesky").
        cutoff: eigenvalue cutoff used (0.0 for "cholesky").
    """

    a: FloatArray
    error: float
    method: str
    discarded: int
    cutoff: float


def optimal_output_weights(C: Any, b: Any) -> OutputWeights:
    """Minimise E(a) = a^T C a - 2 a^T b + 1: solve C a = b (optimum 1 - b^T C^{-1} b).

    Cholesky first; if C is numerically singular, the pseudo-inverse on eigenvalues > H eps lambda_max.

    Args:
        C: (H, H) symmetric positive semi-definite head kernel.
        b: (H,) head-target kernel.

    Returns:
        OutputWeights (a, E(a), method, discarded directions, cutoff).
    """
    C, b = _check_system(C, b)
    try:
        factor = scipy.linalg.cho_factor(C, lower=True, check_finite=False)
        a = scipy.linalg.cho_solve(factor, b, check_finite=False)
        return OutputWeights(a=a, error=weight_error(C, b, a), method="cholesky", discarded=0, cutoff=0.0)
    except scipy.linalg.LinAlgError:
        pass
    eigenvalues, vectors = scipy.linalg.eigh(C, check_finite=False)  # (H,), (H, H)
    cutoff = C.shape[0] * _EPS * max(float(eigenvalues[-1]), 0.0)
    keep = eigenvalues > cutoff  # (H,)
    coefficients = (vectors[:, keep].T @ b) / eigenvalues[keep]  # (kept,)
    a = vectors[:, keep] @ coefficients  # (H,)
    return OutputWeights(
        a=a, error=weight_error(C, b, a), method="eigh-cutoff", discarded=int(np.sum(~keep)), cutoff=cutoff
    )


def _check_counts(counts: Any, H: int) -> npt.NDArray[np.int64]:
    """Validate head counts: a non-empty strictly increasing sequence of integers in [1, H]."""
    values = np.asarray(counts)
    if values.ndim != 1 or values.size < 1 or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"counts must be a non-empty 1-d sequence of integers, got {counts!r}")
    if values[0] < 1 or values[-1] > H or np.any(np.diff(values) <= 0):
        raise ValueError(f"counts must be strictly increasing integers in [1, {H}], got {values.tolist()}")
    return values.astype(np.int64)


def _schur_extension(
    C: FloatArray, b: FloatArray, factor: FloatArray, w1: FloatArray, m: int
) -> tuple[float, FloatArray, int]:
    """Gain r^T x of extending the first m0 heads (Cholesky factor ``factor``) to the first m heads.

    Block elimination: with C_m = [[C11, C12], [C21, C22]] (C11 = first m0 heads), b = (b1, b2), w1 = C11^{-1} b1,
        b^T C_m^{-1} b = b1^T w1 + r^T S^{-1} r,   S = C22 - C21 C11^{-1} C12,   r = b2 - C21 w1,
    so error(m) = error(m0) - r^T S^{-1} r. CG iterates x_j maximise 2 r^T x - x^T S x over growing Krylov spaces and
    satisfy x_j^T S x_j = r^T x_j, so r^T x_j increases towards r^T S^{-1} r from below: the weights
    a = (w1 - C11^{-1} C12 x_j, x_j) achieve exactly error(m0) - r^T x_j, an achievable error at every iterate.

    Returns:
        (r^T x, x (m - m0,), number of CG iterations).
    """
    m0 = factor.shape[0]
    lower = C[m0:m, :m0]  # (m - m0, m0) view: C21
    trailing = C[m0:m, m0:m]  # (m - m0, m - m0) view: C22
    residual = b[m0:m] - lower @ w1  # (m - m0,)

    def schur_matvec(v: FloatArray) -> FloatArray:
        v = np.ravel(v)  # (m - m0,)
        eliminated = scipy.linalg.cho_solve((factor, True), lower.T @ v, check_finite=False)  # (m0,)
        return np.asarray(trailing @ v - lower @ eliminated)  # (m - m0,)

    operator = scipy.sparse.linalg.LinearOperator((m - m0, m - m0), matvec=schur_matvec, dtype=np.float64)
    iterations = 0

    def count(_: FloatArray) -> None:
        nonlocal iterations
        iterations += 1

    x, info = scipy.sparse.linalg.cg(operator, residual, rtol=CG_RTOL, atol=0.0, maxiter=10 * (m - m0), callback=count)
    if info != 0:
        raise RuntimeError(f"conjugate gradients did not converge for the Schur complement of size {m - m0} ({info})")
    return float(residual @ x), x, iterations


@dataclass(frozen=True)
class NestedErrors:
    """Optimal errors of nested prefixes of one dictionary of heads.

    Attributes:
        counts: (P,) head counts m (prefix lengths).
        errors: (P,) achievable errors, equal to 1 - b_m^T C_m^{-1} b_m up to rounding and the CG tolerance.
        direct_size: size m0 of the leading block factored by Cholesky.
        cg_iterations: (P,) CG iterations per count (0 for counts <= m0).
    """

    counts: npt.NDArray[np.int64]
    errors: FloatArray
    direct_size: int
    cg_iterations: npt.NDArray[np.int64]


def nested_optimal_errors(C: Any, b: Any, counts: Any, *, direct_size: int = DIRECT_SIZE) -> NestedErrors:
    """Optimal error 1 - b_m^T C_m^{-1} b_m of the first m heads, for every m in counts.

    One Cholesky factor of the leading m0 x m0 block (m0 = the largest count <= direct_size, or direct_size) gives all
    counts <= m0 (error(m) = 1 - sum_{i<m} z_i^2, z = L^{-1} b); each larger count uses block elimination and CG.

    Args:
        C: (H, H) head kernel (positive definite on the leading m0 block).
        b: (H,) head-target kernel.
        counts: (P,) strictly increasing head counts in [1, H].
        direct_size: largest block factored directly (>= 1).

    Returns:
        NestedErrors.
    """
    C, b = _check_system(C, b)
    H = C.shape[0]
    counts = _check_counts(counts, H)
    direct_size = check_int("direct_size", direct_size, minimum=1)
    small = counts[counts <= direct_size]
    m0 = int(small[-1]) if small.size else min(direct_size, H)
    factor = scipy.linalg.cholesky(C[:m0, :m0], lower=True, check_finite=False)  # (m0, m0)
    z = scipy.linalg.solve_triangular(factor, b[:m0], lower=True, check_finite=False)  # (m0,)
    cumulative = np.cumsum(z * z)  # (m0,): b_m^T C_m^{-1} b_m for m = 1 .. m0
    error_m0 = 1.0 - float(cumulative[-1])
    w1 = scipy.linalg.solve_triangular(factor, z, lower=True, trans="T", check_finite=False)  # (m0,) C11^{-1} b1
    errors = np.empty(counts.size)
    iterations = np.zeros(counts.size, dtype=np.int64)
    for index, m in enumerate(counts):
        if m <= m0:
            errors[index] = 1.0 - cumulative[m - 1]
        else:
            gain, _, iterations[index] = _schur_extension(C, b, factor, w1, int(m))
            errors[index] = error_m0 - gain
    return NestedErrors(counts=counts, errors=errors, direct_size=m0, cg_iterations=iterations)


def prefix_errors(q: Any, k: Any, counts: Any, *, direct_size: int = DIRECT_SIZE) -> NestedErrors:
    """Optimal errors of the first m heads of (q, k) for every m in counts (forms C and b, then nested solves).

    Args:
        q: (H, d) query directions.  k: (H, d) key directions.
        counts: (P,) strictly increasing head counts in [1, H].
        direct_size: largest block factored directly.

    Returns:
        NestedErrors.
    """
    q, k = _check_heads_pair(q, k)
    counts = _check_counts(counts, q.shape[0])
    top = int(counts[-1])
    C = kernel_matrix(q[:top], k[:top])  # (top, top)
    b = target_kernel(q[:top], k[:top])  # (top,)
    return nested_optimal_errors(C, b, counts, direct_size=direct_size)


@dataclass(frozen=True)
class RandomFeatureCurve:
    """Optimal error of random rank-1 heads against the number of heads.

    Attributes:
        dims: (D,) dimensions.  head_counts: (P,) head counts.  distribution: head distribution.
        errors: (D, T, P) error for dimension, trial (independent draw of heads), head count.
    """

    dims: npt.NDArray[np.int64]
    head_counts: npt.NDArray[np.int64]
    distribution: str
    errors: FloatArray

    def mean(self) -> FloatArray:
        """(D, P) mean over trials."""
        return np.asarray(np.mean(self.errors, axis=1))

    def spread(self) -> tuple[FloatArray, FloatArray]:
        """(D, P) minimum and maximum over trials."""
        return np.min(self.errors, axis=1), np.max(self.errors, axis=1)


def random_feature_curve(
    dims: Any,
    head_counts: Any,
    trials: int,
    rng: np.random.Generator,
    distribution: str = "uniform-cosine",
) -> RandomFeatureCurve:
    """The paper's random-feature curve: per dimension and trial, one draw of max(head_counts) heads, nested prefixes.

    Args:
        dims: (D,) dimensions >= 2.
        head_counts: (P,) strictly increasing head counts >= 1.
        trials: independent draws per dimension (>= 1).
        rng: source of randomness (draws in the order dims x trials).
        distribution: one of DISTRIBUTIONS.

    Returns:
        RandomFeatureCurve with errors (D, T, P).
    """
    dimensions = np.asarray([check_dimension(d, name="dims") for d in np.atleast_1d(np.asarray(dims))], dtype=np.int64)
    counts = np.asarray(head_counts)
    if counts.ndim != 1 or counts.size < 1:
        raise ValueError(f"head_counts must be a non-empty 1-d sequence of integers, got {head_counts!r}")
    counts = _check_counts(counts, int(np.max(counts)))
    trials = check_int("trials", trials, minimum=1)
    rng = check_generator(rng)
    distribution = check_choice("distribution", distribution, DISTRIBUTIONS)
    errors = np.empty((dimensions.size, trials, counts.size))  # (D, T, P)
    for i, d in enumerate(dimensions):
        for trial in range(trials):
            q, k = sample_heads(int(counts[-1]), int(d), rng, distribution)
            errors[i, trial] = prefix_errors(q, k, counts).errors
    return RandomFeatureCurve(dims=dimensions, head_counts=counts, distribution=distribution, errors=errors)


# ---------------------------------------------------------------------------------------------------------------------
# Weight-norm-constrained version: min E(a) subject to ||a||_2 <= B, with a dual certificate
# ---------------------------------------------------------------------------------------------------------------------
#
# Dual. L(a, mu) = a^T C a - 2 b^T a + 1 + mu (||a||^2 - B^2), mu >= 0. For mu > 0 (or C > 0) the minimiser over a is
# a = (C + mu I)^{-1} b, so
#     g(mu) = min_a L(a, mu) = 1 - b^T (C + mu I)^{-1} b - mu B^2,
# and weak duality gives g(mu) <= E(a) for every feasible a and every mu >= 0: each mu certifies a lower bound on the
# error of ANY output weights of norm <= B for this dictionary of heads. (Strong duality holds: the problem is a
# trust-region subproblem, so the best mu closes the gap.) We solve the primal with cvxpy in the eigenbasis of C
# (C = U diag(lambda) U^T, w = U^T a: ||a|| = ||w|| and the objective is separable, sum lambda_i w_i^2 - 2 c^T w + 1
# with c = U^T b), which keeps the conic program at H variables and O(H) non-zeros for H in the thousands. The dual
# value is evaluated from a Cholesky factor of C + mu I (independent of the eigendecomposition), at cvxpy's multiplier
# (norm constraint ||w|| <= B with multiplier nu: stationarity gives mu = nu / (2 ||w||)) and at the root of the
# secular equation ||(C + mu I)^{-1} b|| = B (the optimal mu), and the larger is reported.


@dataclass(frozen=True)
class BudgetSolution:
    """Norm-constrained output weights with a dual lower bound.

    Attributes:
        budget: B.  a: (H,) feasible weights (||a|| <= B).  primal: E(a).  dual: certified lower bound g(mu) on
        min_{||a|| <= B} E(a).  mu: the multiplier giving ``dual``.  gap: primal - dual (>= 0 up to rounding).
        unconstrained_error: min_a E(a) without the limit.  active: whether the constraint binds.
    """

    budget: float
    a: FloatArray
    primal: float
    dual: float
    mu: float
    gap: float
    unconstrained_error: float
    active: bool


def dual_bound(C: Any, b: Any, budget: float, mu: float) -> float:
    """g(mu) = 1 - b^T (C + mu I)^{-1} b - mu B^2, a lower bound on min_{||a|| <= B} E(a) for every mu >= 0.

    Args:
        C: (H, H) PSD head kernel.  b: (H,).  budget: B >= 0.  mu: multiplier >= 0.

    Returns:
        g(mu) (-inf when C + mu I is singular, a valid but useless bound).
    """
    C, b = _check_system(C, b)
    budget = check_real("budget", budget, minimum=0.0)
    mu = check_real("mu", mu, minimum=0.0)
    shifted = C + mu * np.eye(C.shape[0])  # (H, H)
    try:
        factor = scipy.linalg.cho_factor(shifted, lower=True, check_finite=False)
    except scipy.linalg.LinAlgError:
        return -math.inf
    quadratic = float(b @ scipy.linalg.cho_solve(factor, b, check_finite=False))
    return 1.0 - quadratic - mu * budget * budget


class _Eigensystem:
    """C = U diag(lambda) U^T (eigenvalues clipped at 0) and c = U^T b, shared by every budget."""

    def __init__(self, C: FloatArray, b: FloatArray) -> None:
        eigenvalues, self.vectors = scipy.linalg.eigh(C, check_finite=False)  # (H,), (H, H)
        self.eigenvalues = np.maximum(eigenvalues, 0.0)  # C is PSD; negatives are rounding
        self.c = self.vectors.T @ b  # (H,)
        cutoff = C.shape[0] * _EPS * max(float(self.eigenvalues[-1]), 0.0)
        keep = self.eigenvalues > cutoff
        self.unconstrained_w = np.where(keep, self.c / np.where(keep, self.eigenvalues, 1.0), 0.0)  # (H,)
        self.unconstrained_norm = float(np.linalg.norm(self.unconstrained_w))

    def weights_norm(self, mu: float) -> float:
        """||(C + mu I)^{-1} b|| (inf when C + mu I is singular along c)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(self.c == 0.0, 0.0, self.c / (self.eigenvalues + mu))  # (H,)
        return float(np.linalg.norm(ratios))


def _solve_budget(C: FloatArray, b: FloatArray, system: _Eigensystem, budget: float, solver: str) -> BudgetSolution:
    import cvxpy as cp

    H = C.shape[0]
    unconstrained_a = system.vectors @ system.unconstrained_w  # (H,)
    unconstrained_error = weight_error(C, b, unconstrained_a)
    w = cp.Variable(H)
    objective = cp.sum(cp.multiply(system.eigenvalues, cp.square(w))) - 2.0 * (system.c @ w) + 1.0
    constraint = cp.norm(w, 2) <= budget
    problem = cp.Problem(cp.Minimize(objective), [constraint])
    problem.solve(solver=solver)
    if w.value is None:
        raise RuntimeError(f"cvxpy ({solver}) returned no solution for budget {budget}: status {problem.status}")
    w_value = np.asarray(w.value, dtype=np.float64)
    norm = float(np.linalg.norm(w_value))
    if norm > budget:  # interior-point solutions may overshoot by the solver tolerance: project back
        w_value *= budget / norm
        norm = budget
    a = system.vectors @ w_value  # (H,)
    primal = weight_error(C, b, a)
    multipliers = []
    nu = constraint.dual_value
    if nu is not None and norm > 0.0:
        multipliers.append(max(float(nu), 0.0) / (2.0 * norm))
    active = system.unconstrained_norm > budget
    if budget == 0.0:
        multipliers.append(1e12 * float(b @ b))  # g(mu) -> 1 = E(0) as mu -> inf
    elif active:
        # Root of ||(C + mu I)^{-1} b|| = B: the norm decreases in mu from >= ||C^+ b|| > B (mu -> 0+) to 0.
        low = 0.0 if system.eigenvalues[0] > 0.0 else _EPS * max(float(system.eigenvalues[-1]), _EPS)
        high = 1.0
        while system.weights_norm(high) > budget:
            high *= 2.0
        if system.weights_norm(low) > budget:
            multipliers.append(
                scipy.optimize.brentq(lambda mu: system.weights_norm(mu) - budget, low, high, xtol=1e-300, rtol=1e-14)
            )
    else:
        multipliers.append(0.0)
    best_mu, best_dual = 0.0, -math.inf
    for mu in multipliers:
        value = dual_bound(C, b, budget, mu)
        if value > best_dual:
            best_mu, best_dual = mu, value
    return BudgetSolution(
        budget=budget,
        a=a,
        primal=primal,
        dual=best_dual,
        mu=best_mu,
        gap=primal - best_dual,
        unconstrained_error=unconstrained_error,
        active=bool(active),
    )


def constrained_output_weights(C: Any, b: Any, budget: float, *, solver: str = "CLARABEL") -> BudgetSolution:
    """min E(a) subject to ||a||_2 <= B, solved with cvxpy, with a dual lower bound (see the comment above).

    Args:
        C: (H, H) PSD head kernel.  b: (H,).  budget: B >= 0.  solver: a cvxpy conic solver name.

    Returns:
        BudgetSolution.
    """
    C, b = _check_system(C, b)
    budget = check_real("budget", budget, minimum=0.0)
    solver = check_choice("solver", solver, ("CLARABEL", "SCS"))
    return _solve_budget(C, b, _Eigensystem(C, b), budget, solver)


@dataclass(frozen=True)
class BudgetCurve:
    """Error against the weight-norm budget B.

    Attributes:
        budgets: (M,) budgets.  primal: (M,) E(a) of the cvxpy solutions.  dual: (M,) certified lower bounds.
        gap: (M,) primal - dual.  unconstrained_error: min_a E(a).  unconstrained_norm: ||C^{-1} b|| (the budget
        beyond which the limit no longer binds).
    """

    budgets: FloatArray
    primal: FloatArray
    dual: FloatArray
    gap: FloatArray
    unconstrained_error: float
    unconstrained_norm: float


def budget_curve(C: Any, b: Any, budgets: Any, *, solver: str = "CLARABEL") -> BudgetCurve:
    """How the optimal error trades against the weight-norm budget B (one eigendecomposition, one QP per budget).

    Args:
        C: (H, H) PSD head kernel.  b: (H,).  budgets: (M,) budgets >= 0.  solver: cvxpy solver name.

    Returns:
        BudgetCurve.
    """
    C, b = _check_system(C, b)
    values = check_array("budgets", budgets, ndim=1)
    if values.size < 1 or np.any(values < 0.0):
        raise ValueError(f"budgets must be a non-empty 1-d array of numbers >= 0, got {values.tolist()}")
    solver = check_choice("solver", solver, ("CLARABEL", "SCS"))
    system = _Eigensystem(C, b)
    solutions = [_solve_budget(C, b, system, float(B), solver) for B in values]
    return BudgetCurve(
        budgets=values,
        primal=np.array([s.primal for s in solutions]),
        dual=np.array([s.dual for s in solutions]),
        gap=np.array([s.gap for s in solutions]),
        unconstrained_error=solutions[0].unconstrained_error,
        unconstrained_norm=system.unconstrained_norm,
    )


# ---------------------------------------------------------------------------------------------------------------------
# Monte Carlo through the reference evaluator, and weight files
# ---------------------------------------------------------------------------------------------------------------------


def attention_weights_of(q: Any, k: Any, a: Any) -> dict[str, FloatArray]:
    """Single-layer tensors of the heads: Q (H, 1, d) = q_h, K (H, 1, d) = k_h, V (H, d, d) = a_h I.

    Args:
        q: (H, d).  k: (H, d).  a: (H,) output weights.

    Returns:
        {"Q", "K", "V"} float64 arrays.
    """
    q = check_array("q", q, ndim=2)
    k = check_array("k", k, shape=q.shape)
    a = check_array("a", a, shape=(q.shape[0],))
    d = q.shape[1]
    return {
        "Q": q[:, None, :].copy(),  # (H, 1, d)
        "K": k[:, None, :].copy(),  # (H, 1, d)
        "V": a[:, None, None] * np.eye(d)[None, :, :],  # (H, d, d)
    }


def monte_carlo_error(
    q: Any, k: Any, a: Any, n_samples: int, rng: np.random.Generator, *, batch_size: int | None = None
) -> MonteCarloEstimate:
    """Estimate E||f - f*||^2 on D_2 by running the heads through theory.attention.multihead_attention (hardmax).

    Args:
        q: (H, d).  k: (H, d).  a: (H,).  n_samples: samples (>= 2).  rng: source of randomness.
        batch_size: samples per batch (default: keeps the evaluator's (n, H, d) temporaries near 16M numbers).

    Returns:
        MonteCarloEstimate (mean, standard error, n_samples).
    """
    tensors = attention_weights_of(q, k, a)
    H, _, d = tensors["Q"].shape
    n_samples = check_sample_count("n_samples", n_samples)
    rng = check_generator(rng)
    if batch_size is None:
        batch_size = max(1, min(20000, (1 << 24) // (H * d)))
    batch_size = check_int("batch_size", batch_size, minimum=1)

    def model(X: FloatArray, y: FloatArray) -> FloatArray:
        return multihead_attention(tensors["Q"], tensors["K"], tensors["V"], X, y)  # (n, d)

    def sampler(n: int, generator: np.random.Generator) -> tuple[FloatArray, FloatArray]:
        return sample_context(n, 2, d, generator)  # D_2: orthonormal keys, uniform query

    return estimate_error(model, nearest_neighbor, sampler, n_samples, rng, batch_size=batch_size)


@dataclass(frozen=True)
class RandomFeatureConstruction:
    """A drawn dictionary of heads with its optimal output weights."""

    q: FloatArray
    k: FloatArray
    weights: OutputWeights
    distribution: str

    @property
    def predicted_error(self) -> float:
        return self.weights.error


def construct_random_features(
    d: int, H: int, rng: np.random.Generator, distribution: str = "uniform-cosine"
) -> RandomFeatureConstruction:
    """Draw H rank-1 heads and solve for their optimal output weights.

    Args:
        d: dimension (>= 2).  H: heads (>= 1).  rng: source of randomness.  distribution: one of DISTRIBUTIONS.

    Returns:
        RandomFeatureConstruction (q, k, OutputWeights, distribution).
    """
    q, k = sample_heads(H, d, rng, distribution)
    weights = optimal_output_weights(kernel_matrix(q, k), target_kernel(q, k))
    return RandomFeatureConstruction(q=q, k=k, weights=weights, distribution=distribution)


def random_features_metadata(construction: RandomFeatureConstruction, seed: int) -> dict[str, Any]:
    """Weight-file metadata of a construction (single-layer layout, hardmax, nearest-neighbour task, N = 2)."""
    H, d = construction.q.shape
    return {
        "construction": "random-features",
        "layout": "single-layer",
        "d": d,
        "r": 1,
        "H": H,
        "temperature": math.inf,
        "predicted_error": construction.predicted_error,
        "task": "nearest",
        "N": 2,
        "seed": seed,
        "distribution": construction.distribution,
        "solver": construction.weights.method,
    }


def save_random_features(path: str | Path, construction: RandomFeatureConstruction, seed: int) -> Path:
    """Write a construction as a single-layer hardmax weight file (Q_h = q_h, K_h = k_h, V_h = a_h I; task nearest,
    N = 2), so that `attnrank eval`, `export` and the public `evaluate` read it like any other construction.

    Args:
        path: output file.
        construction: the heads and their output weights (construct_random_features).
        seed: the seed the heads were drawn with (stored as metadata; an integer >= 0).

    Returns:
        The path written.
    """
    path = check_output_file("path", path)
    what = "a RandomFeatureConstruction (construct_random_features)"
    construction = check_instance("construction", construction, RandomFeatureConstruction, what)
    seed = check_seed("seed", seed)
    tensors = attention_weights_of(construction.q, construction.k, construction.weights.a)
    return save_weights(path, tensors, random_features_metadata(construction, seed))
