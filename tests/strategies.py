"""Hypothesis strategies shared by every property test.

Each strategy's docstring states the restriction of its domain. Draws that need randomness beyond hypothesis
(unit vectors, orthonormal frames) are built from a drawn integer seed through ``numpy.random.default_rng`` so
that failures shrink to a reproducible seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from theory.multilayer import AttentionLayer, MultiLayerWeights

seeds = st.integers(min_value=0, max_value=2**32 - 1)
"""Seeds for ``numpy.random.default_rng``."""


def dimensions(min_value: int = 2, max_value: int = 64) -> st.SearchStrategy[int]:
    """Ambient dimensions d in [min_value, max_value] (default 2..64, small enough for dense linear algebra)."""
    return st.integers(min_value=min_value, max_value=max_value)


@st.composite
def dimension_and_rank(draw: st.DrawFn, min_d: int = 2, max_d: int = 64) -> tuple[int, int]:
    """Pairs (d, r) with 1 <= r <= d."""
    d = draw(dimensions(min_d, max_d))
    r = draw(st.integers(min_value=1, max_value=d))
    return d, r


def head_counts(max_value: int = 4096) -> st.SearchStrategy[int]:
    """Head counts H in [1, max_value]."""
    return st.integers(min_value=1, max_value=max_value)


def temperatures(min_value: float = 0.1, max_value: float = 1e4) -> st.SearchStrategy[float]:
    """Finite softmax inverse temperatures, log-uniform-ish in [min_value, max_value]."""
    return st.floats(min_value=np.log(min_value), max_value=np.log(max_value)).map(lambda t: float(np.exp(t)))


@st.composite
def unit_vectors(draw: st.DrawFn, d: int) -> np.ndarray:
    """A uniform random unit vector in R^d (shape (d,)), built from a drawn seed."""
    rng = np.random.default_rng(draw(seeds))
    v = rng.standard_normal(d)
    return v / np.linalg.norm(v)


@st.composite
def orthonormal_frames(draw: st.DrawFn, n: int, d: int) -> np.ndarray:
    """n <= d orthonormal rows in R^d (shape (n, d)), the first n rows of a Haar-random orthogonal matrix."""
    if n > d:
        raise ValueError(f"orthonormal_frames needs n <= d, got n={n}, d={d}")
    rng = np.random.default_rng(draw(seeds))
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    q = q * np.sign(np.diag(r))
    return q[:, :n].T.copy()


@st.composite
def attention_shapes(
    draw: st.DrawFn, max_n: int = 6, max_heads: int = 4, max_d: int = 8, max_tokens: int = 6
) -> tuple[int, int, int, int, int, int]:
    """Small attention problem sizes (n, H, r, d, N, d_out): 1 <= n, H, N, d_out; 1 <= r <= d; 2 <= d <= max_d."""
    n = draw(st.integers(min_value=1, max_value=max_n))
    heads = draw(st.integers(min_value=1, max_value=max_heads))
    d = draw(st.integers(min_value=2, max_value=max_d))
    r = draw(st.integers(min_value=1, max_value=d))
    tokens = draw(st.integers(min_value=1, max_value=max_tokens))
    d_out = draw(st.integers(min_value=1, max_value=max_d))
    return n, heads, r, d, tokens, d_out


@st.composite
def huge_head_counts(draw: st.DrawFn, max_log10: int = 300) -> int:
    """Head counts H = m * 10^e with 1 <= m <= 999 and 0 <= e <= max_log10 (exact Python ints, up to ~1e303)."""
    mantissa = draw(st.integers(min_value=1, max_value=999))
    exponent = draw(st.integers(min_value=0, max_value=max_log10))
    return mantissa * 10**exponent


def target_errors(min_value: float = 0.02, max_value: float = 0.5) -> st.SearchStrategy[float]:
    """Target errors eps in [min_value, max_value] (default 0.02..0.5: min_heads < ~1e100 heads for d <= 64)."""
    return st.floats(min_value=min_value, max_value=max_value, allow_nan=False, allow_infinity=False)


def harmonic_degrees(min_value: int = 0, max_value: int = 30) -> st.SearchStrategy[int]:
    """Spherical-harmonic degrees k in [min_value, max_value] (default 0..30: exact sympy arithmetic stays fast)."""
    return st.integers(min_value=min_value, max_value=max_value)


def odd_degrees(max_value: int = 31) -> st.SearchStrategy[int]:
    """Odd degrees k = 1, 3, ..., <= max_value (the degrees where the sign expansion is non-zero)."""
    return st.integers(min_value=0, max_value=(max_value - 1) // 2).map(lambda j: 2 * j + 1)


def random_multilayer_network(
    rng: np.random.Generator, d: int, p: int, N: int, heads: Sequence[int], r: int
) -> MultiLayerWeights:
    """A multi-layer theory network with Gaussian weights: residual streams of dimension d + p, heads[l] heads of rank
    r in layer l."""
    embed_dim = d + p
    layers = tuple(
        AttentionLayer(
            Q=rng.standard_normal((h, r, embed_dim)),
            K=rng.standard_normal((h, r, embed_dim)),
            V=rng.standard_normal((h, embed_dim, embed_dim)) / math.sqrt(embed_dim),
        )
        for h in heads
    )
    return MultiLayerWeights(
        layers=layers,
        context_codes=rng.standard_normal((N, p)),
        query_code=rng.standard_normal(p),
        readout=rng.standard_normal((d, embed_dim)),
    )
