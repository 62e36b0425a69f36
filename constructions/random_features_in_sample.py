"""Random rank-1 heads with output weights fitted on n samples: the in-sample error beside the population error.

docs/random_features.md ("In-sample errors"). `constructions.random_features` solves the population problem exactly
(C a = b with the closed-form kernels). A fit on a finite Monte Carlo sample, scored on that same sample, reports a
lower number: the weights also fit the sample's noise. This module computes both for the same heads, so that a
published curve can be compared like for like.

Derivation. With u = (x_1 - x_2)/sqrt 2, m = (x_1 + x_2)/sqrt 2 (orthonormal under D_2), s_h = sign<q_h, y>
sign<k_h, u> and s = sign<u, y>, head h outputs (m + s_h u)/sqrt 2 and the target is (m + s u)/sqrt 2, so for every
sample ||sum_h a_h f_h - f*||^2 = ((1^T a - 1)^2 + (<s_., a> - s)^2) / 2 exactly (constructions.random_rank_heads,
module docstring). On n samples (y_i, u_i), independent uniform (the law of (y, u) under D_2), the empirical error is

    L_n(a) = (a^T G a - 2 a^T g + 2) / 2,   G = S^T S / n + 1 1^T,   g = S^T s / n + 1   (S: the (n, H) signs),

the sample version of a^T C a - 2 a^T b + 1 with C = G/2, b = g/2. Its minimum over the first m heads is
1 - |z_{:m}|^2 / 2 with z = L^{-1} g, G = L L^T (the leading block of L factors every leading block of G), and the
weights are a_m = L_m^{-T} z_{:m}; their population error is E(a_m) = a_m^T C a_m - 2 a_m^T b + 1 with the exact
kernels (`constructions.random_features.kernel_matrix`, `target_kernel`).

Arithmetic: S holds +-1, so each block's S^T S is formed in float32 exactly (integer sums below 2^24 per block of at
most 2^14 samples) and accumulated in float64. Cost n H^2 multiply-adds: H = 4096, n = 10^5 takes about a minute on
one core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.linalg
import torch

from constructions.random_features import kernel_matrix, target_kernel, weight_error
from theory.sphere import sample_sphere
from theory.validation import check_array, check_generator, check_sample_count

FloatArray = npt.NDArray[np.float64]

_BLOCK = 16_384
"""Samples per block: a (16384, H) float32 sign matrix (256 MB at H = 4096); integer Gram sums stay below 2^24."""


@dataclass(frozen=True)
class InSampleCurve:
    """Errors of output weights fitted on one sample of n contexts, for nested prefixes of the heads.

    Attributes:
        n_samples: n. counts: (P,) head counts m.
        in_sample: (P,) minimum of the empirical error over the first m heads (the fit scored on its own sample).
        population: (P,) exact population error of those same fitted weights.
        weights: (counts[-1],) the fitted output weights of the largest prefix.
    """

    n_samples: int
    counts: npt.NDArray[np.int64]
    in_sample: FloatArray
    population: FloatArray
    weights: FloatArray


def sample_signs(
    q: FloatArray, k: FloatArray, n: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Head signs S (n, H) and target signs s (n,) on n fresh pairs (y, u), as float32 (+-1).

    Args:
        q, k: (H, d) unit query and key directions. n: samples. rng: the source of randomness.
    """
    d = q.shape[1]
    y = sample_sphere(n, d, rng)  # (n, d)
    u = sample_sphere(n, d, rng)  # (n, d)
    signs = np.sign(y @ q.T) * np.sign(u @ k.T)  # (n, H): s_h = sign<q_h, y> sign<k_h, u>
    target = np.sign(np.einsum("nd,nd->n", y, u))  # (n,)
    return signs.astype(np.float32), target.astype(np.float32)


def empirical_system(q: Any, k: Any, n_samples: int, rng: np.random.Generator) -> tuple[FloatArray, FloatArray]:
    """(G, g) of the module docstring on n_samples fresh samples, accumulated in blocks.

    Args:
        q, k: (H, d) query and key directions (rows normalised here). n_samples: n (>= 1). rng: randomness.

    Returns:
        G (H, H), g (H,).
    """
    q = check_array("q", q, ndim=2)
    k = check_array("k", k, shape=q.shape)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    k = k / np.linalg.norm(k, axis=1, keepdims=True)
    n_samples = check_sample_count("n_samples", n_samples, minimum=1)
    rng = check_generator(rng)
    H = q.shape[0]
    G = np.zeros((H, H))
    g = np.zeros(H)
    done = 0
    while done < n_samples:
        m = min(_BLOCK, n_samples - done)
        signs, target = sample_signs(q, k, m, rng)
        S = torch.from_numpy(signs)  # (m, H) float32, exact +-1
        G += (S.T @ S).numpy().astype(np.float64)  # (H, H): integer sums, exact in float32
        g += (S.T @ torch.from_numpy(target)).numpy().astype(np.float64)  # (H,)
        done += m
    return G / n_samples + 1.0, g / n_samples + 1.0


def in_sample_errors(q: Any, k: Any, counts: Any, n_samples: int, rng: np.random.Generator) -> InSampleCurve:
    """Fit the output weights of the first m heads on one sample of n contexts, for every m in counts.

    Args:
        q, k: (H, d) query and key directions.
        counts: (P,) strictly increasing head counts in [1, H].
        n_samples: size of the fitting sample (>= 1; with n < m the fit interpolates and the in-sample error is ~0).
        rng: the source of randomness.

    Returns:
        InSampleCurve with the in-sample and the exact population errors of the same weights.
    """
    q = check_array("q", q, ndim=2)
    k = check_array("k", k, shape=q.shape)
    counts_array = np.asarray(counts)
    if counts_array.ndim != 1 or counts_array.size == 0 or not np.issubdtype(counts_array.dtype, np.integer):
        raise ValueError(f"counts must be a non-empty 1-d sequence of integers, got {counts!r}")
    if np.any(np.diff(counts_array) <= 0) or counts_array[0] < 1 or counts_array[-1] > q.shape[0]:
        raise ValueError(f"counts must increase strictly within [1, H = {q.shape[0]}], got {counts_array.tolist()}")
    top = int(counts_array[-1])
    G, g = empirical_system(q[:top], k[:top], n_samples, rng)  # (top, top), (top,)
    # A tiny ridge (eps trace G = H eps times the mean diagonal) keeps the factor finite when n < m (an interpolating
    # fit); it moves the in-sample error by at most that ridge times ||a||^2.
    G[np.diag_indices_from(G)] += np.finfo(np.float64).eps * np.trace(G)
    L = scipy.linalg.cholesky(G, lower=True, check_finite=False)  # (top, top)
    z = scipy.linalg.solve_triangular(L, g, lower=True, check_finite=False)  # (top,)
    C = kernel_matrix(q[:top], k[:top])  # (top, top), exact population kernel
    b = target_kernel(q[:top], k[:top])  # (top,)
    in_sample, population = [], []
    a = np.zeros(0)
    for m in counts_array:
        m = int(m)
        in_sample.append(1.0 - 0.5 * float(z[:m] @ z[:m]))
        a = scipy.linalg.solve_triangular(L[:m, :m], z[:m], lower=True, trans="T", check_finite=False)  # (m,)
        population.append(weight_error(C[:m, :m], b[:m], a))
    return InSampleCurve(
        n_samples=n_samples,
        counts=counts_array.astype(np.int64),
        in_sample=np.asarray(in_sample),
        population=np.asarray(population),
        weights=np.asarray(a, dtype=np.float64),
    )
