"""Target functions of the paper: nearest neighbour, farthest point (self-attention form), biased nearest neighbour.

docs/paper.md section 1 (nearest neighbour f*(X, y) = x_{argmax_i <x_i, y>}), section 4 (biased nearest neighbour with a
bias inside the score, N = 2) and section 6 (the experiments' self-attention task: each token's target is the
farthest token, x_{argmin_j <x_i, x_j>}). Exact ties (probability zero under the sampling distributions) go to the
lowest index, as numpy's argmax/argmin do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from theory.validation import check_array

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


def _check_context(X: Any, y: Any) -> tuple[FloatArray, FloatArray]:
    """Validate a context X (n, N, d) and queries y (n, d) that agree in n and d."""
    X = check_array("X", X, ndim=3)
    n, _, d = X.shape
    y = check_array("y", y)
    if y.shape != (n, d):
        raise ValueError(f"y must have shape (n, d) = ({n}, {d}) to match X of shape {X.shape}, got {y.shape}")
    return X, y


def nearest_index(X: Any, y: Any) -> IntArray:
    """Index of the key most aligned with the query, argmax_i <x_i, y>.

    Args:
        X: (n, N, d) keys.
        y: (n, d) queries.

    Returns:
        (n,) integer indices in [0, N).
    """
    X, y = _check_context(X, y)
    if X.shape[1] == 0:
        raise ValueError("X must hold at least one key (N >= 1), got N = 0")
    scores = np.einsum("nid,nd->ni", X, y)  # (n, N); n sample, i key, d coordinate
    return np.argmax(scores, axis=1)


def nearest_neighbor(X: Any, y: Any) -> FloatArray:
    """The nearest-neighbour target f*(X, y) = x_{argmax_i <x_i, y>}.

    Args:
        X: (n, N, d) keys.
        y: (n, d) queries.

    Returns:
        (n, d) the selected keys.
    """
    X, y = _check_context(X, y)
    index = nearest_index(X, y)  # (n,)
    return X[np.arange(X.shape[0]), index]  # (n, d)


def farthest_point(X: Any) -> FloatArray:
    """Self-attention farthest-point target: token i maps to x_{argmin_j <x_i, x_j>}, j over all tokens.

    j = i is allowed but never wins unless N = 1 or all tokens coincide, because <x_i, x_i> = 1 >= <x_i, x_j> for unit
    tokens.

    Args:
        X: (n, N, d) tokens.

    Returns:
        (n, N, d): row i of sample m is the token of sample m least aligned with token i.
    """
    X = check_array("X", X, ndim=3)
    n, N, _ = X.shape
    if N == 0:
        raise ValueError("X must hold at least one token (N >= 1), got N = 0")
    gram = np.einsum("nid,njd->nij", X, X)  # (n, N, N); i query token, j candidate token
    index = np.argmin(gram, axis=2)  # (n, N)
    return X[np.arange(n)[:, None], index]  # (n, N, d)


def biased_nearest_neighbor(X: Any, y: Any, bias: Any) -> FloatArray:
    """Biased nearest neighbour for N = 2: x_1 if <x_1 - x_2, y> > bias, else x_2.

    Args:
        X: (n, 2, d) keys.
        y: (n, d) queries.
        bias: real scalar or (n,) array of biases.

    Returns:
        (n, d) the selected keys.
    """
    X, y = _check_context(X, y)
    n = X.shape[0]
    if X.shape[1] != 2:
        raise ValueError(f"X must have shape (n, 2, d) for the biased nearest neighbour, got {X.shape}")
    b = check_array("bias", bias)
    if b.ndim > 1 or (b.ndim == 1 and b.shape[0] != n):
        raise ValueError(f"bias must be a scalar or have shape (n,) = ({n},), got {b.shape}")
    margin = np.einsum("nd,nd->n", X[:, 0] - X[:, 1], y)  # (n,)
    first = margin > b  # (n,)
    return np.where(first[:, None], X[:, 0], X[:, 1])  # (n, d)
