"""The reference evaluator of multi-head attention: the definition every torch model and construction is tested against.

docs/paper.md section 1. Head h has a query map Q_h and key map K_h in R^{r x d} and a value/output map V_h in
R^{d_out x d}. For a context X = (x_1, ..., x_N) and a query y,

    scores[h, i] = temperature * (<Q_h y, K_h x_i> + score_bias[h, i]),
    w[h, :]      = softmax_i(scores[h, :]),
    f(X, y)      = sum_h sum_i w[h, i] V_h x_i.

temperature = math.inf is hardmax, taken as the limit of softmax: the weight is spread uniformly over the keys whose
score equals the maximal score exactly (a unique maximiser gets weight 1). Finite temperatures use the stable form
softmax(s) = exp(s - max s) / sum exp(s - max s), computed as exp(temperature * (raw - max raw)), so no overflow and no
inf - inf can occur, and exact ties in the raw scores always receive equal weights.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from theory.validation import check_array, check_temperature

FloatArray = npt.NDArray[np.float64]


def _check_heads(Q: Any, K: Any, V: Any | None) -> tuple[FloatArray, FloatArray, FloatArray | None]:
    """Validate Q (H, r, d), K (H, r, d) and optionally V (H, d_out, d)."""
    Q = check_array("Q", Q)
    if Q.ndim != 3 or min(Q.shape) < 1:
        raise ValueError(f"Q must have shape (H, r, d) with H, r, d >= 1, got {Q.shape}")
    H, r, d = Q.shape
    K = check_array("K", K)
    if K.shape != Q.shape:
        raise ValueError(f"K must have shape (H, r, d) = ({H}, {r}, {d}) to match Q, got {K.shape}")
    if V is None:
        return Q, K, None
    V = check_array("V", V)
    if V.ndim != 3 or V.shape[0] != H or V.shape[2] != d or V.shape[1] < 1:
        raise ValueError(f"V must have shape (H, d_out, d) = ({H}, d_out, {d}) to match Q, got {V.shape}")
    return Q, K, V


def _check_inputs(X: Any, y: Any | None, d: int) -> tuple[FloatArray, FloatArray | None]:
    """Validate a context X (n, N, d) and optionally queries y (n, d)."""
    X = check_array("X", X)
    if X.ndim != 3 or X.shape[2] != d or X.shape[1] < 1:
        raise ValueError(f"X must have shape (n, N, d) with N >= 1 and d = {d} (the heads' input size), got {X.shape}")
    if y is None:
        return X, None
    y = check_array("y", y)
    n = X.shape[0]
    if y.shape != (n, d):
        raise ValueError(f"y must have shape (n, d) = ({n}, {d}) to match X of shape {X.shape}, got {y.shape}")
    return X, y


def _softmax_last(scores: FloatArray, temperature: float) -> FloatArray:
    """Softmax over the last axis at the given inverse temperature; inf gives uniform weight on exact maxima."""
    top = np.max(scores, axis=-1, keepdims=True)  # (..., 1)
    if math.isinf(temperature):
        unnormalised = (scores == top).astype(np.float64)  # (..., N); indicator of the exact ties at the maximum
    else:
        shifted = scores - top  # (..., N); <= 0, equal to 0 exactly at the maxima
        with np.errstate(over="ignore", under="ignore"):
            unnormalised = np.exp(temperature * shifted)  # (..., N); in [0, 1], 1 at the maxima
    return unnormalised / np.sum(unnormalised, axis=-1, keepdims=True)


def attention_weights(
    Q: Any, K: Any, X: Any, y: Any, temperature: float = math.inf, score_bias: Any | None = None
) -> FloatArray:
    """Attention weights of every head for every input.

    Args:
        Q: (H, r, d) query maps.
        K: (H, r, d) key maps.
        X: (n, N, d) contexts.
        y: (n, d) queries.
        temperature: inverse temperature > 0; math.inf is hardmax (uniform weight over exact ties).
        score_bias: optional (H, N) additive score biases (added before the temperature).

    Returns:
        (n, H, N) weights, non-negative, summing to 1 over the last axis.
    """
    Q, K, _ = _check_heads(Q, K, None)
    H, _, d = Q.shape
    X, y = _check_inputs(X, y, d)
    assert y is not None
    temperature = check_temperature(temperature)
    N = X.shape[1]
    # Indices: n sample, h head, r low-rank coordinate, d input coordinate, i key.
    queries = np.einsum("hrd,nd->nhr", Q, y)  # (n, H, r)
    keys = np.einsum("hrd,nid->nhir", K, X)  # (n, H, N, r)
    scores = np.einsum("nhr,nhir->nhi", queries, keys)  # (n, H, N)
    if score_bias is not None:
        bias = check_array("score_bias", score_bias)
        if bias.shape != (H, N):
            raise ValueError(f"score_bias must have shape (H, N) = ({H}, {N}), got {bias.shape}")
        scores = scores + bias[None, :, :]  # (n, H, N)
    return _softmax_last(scores, temperature)


def multihead_attention(
    Q: Any, K: Any, V: Any, X: Any, y: Any, temperature: float = math.inf, score_bias: Any | None = None
) -> FloatArray:
    """Output of H-head attention, f(X, y) = sum_h sum_i w[h, i] V_h x_i.

    Args:
        Q: (H, r, d) query maps.
        K: (H, r, d) key maps.
        V: (H, d_out, d) value/output maps.
        X: (n, N, d) contexts.
        y: (n, d) queries.
        temperature: inverse temperature > 0; math.inf is hardmax (uniform weight over exact ties).
        score_bias: optional (H, N) additive score biases.

    Returns:
        (n, d_out) outputs.
    """
    Q, K, V = _check_heads(Q, K, V)
    assert V is not None
    weights = attention_weights(Q, K, X, y, temperature=temperature, score_bias=score_bias)  # (n, H, N)
    X = np.asarray(X, dtype=np.float64)
    # Indices: n sample, h head, i key, d input coordinate, o output coordinate.
    mixed = np.einsum("nhi,nid->nhd", weights, X)  # (n, H, d): each head's weighted token average
    return np.einsum("hod,nhd->no", V, mixed)  # (n, d_out)


def self_attention(Q: Any, K: Any, V: Any, X: Any, temperature: float = math.inf) -> FloatArray:
    """Self-attention: every token x_j of X queries the whole context X with the same heads.

    Args:
        Q: (H, r, d) query maps.
        K: (H, r, d) key maps.
        V: (H, d_out, d) value/output maps.
        X: (n, N, d) contexts (also the queries).
        temperature: inverse temperature > 0; math.inf is hardmax (uniform weight over exact ties).

    Returns:
        (n, N, d_out): row j of sample m is multihead_attention evaluated at (X[m], X[m, j]).
    """
    Q, K, V = _check_heads(Q, K, V)
    assert V is not None
    d = Q.shape[2]
    X, _ = _check_inputs(X, None, d)
    temperature = check_temperature(temperature)
    # Indices: n sample, j query token, i key token, h head, r low-rank coordinate, d input, o output coordinate.
    queries = np.einsum("hrd,njd->njhr", Q, X)  # (n, N, H, r)
    keys = np.einsum("hrd,nid->nhir", K, X)  # (n, H, N, r)
    scores = np.einsum("njhr,nhir->njhi", queries, keys)  # (n, N, H, N)
    weights = _softmax_last(scores, temperature)  # (n, N, H, N)
    mixed = np.einsum("njhi,nid->njhd", weights, X)  # (n, N, H, d)
    return np.einsum("hod,njhd->njo", V, mixed)  # (n, N, d_out)
