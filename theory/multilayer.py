"""The multi-layer theory transformer: the reference evaluator of every multi-layer construction.

docs/paper.md section 5 (depth with concatenated positional/scratch coordinates). Semantics, fixed here once:

Streams. Every token carries a residual stream of dimension D = d + p (``embed_dim``). Context token i
(i = 0 .. N-1) starts as ``[x_i, context_codes[i]]``, the query as ``[y, query_code]``: d content coordinates followed
by p positional/scratch coordinates.

Layer l (l = 0 .. L-1) has H_l heads of rank r: Q (H_l, r, D), K (H_l, r, D), V (H_l, D, D). With s_q the query's
stream and s_i the context streams, all taken from the START of the layer (the layer's updates are simultaneous):

    w[h, i]  = softmax_i( temperature * <Q_h s_q, K_h s_i> )        (hardmax for temperature = inf: uniform weight
                                                                     over the exact ties of the maximal score)
    s_q     <- s_q + sum_h sum_i w[h, i] V_h s_i                     (residual connection)

Keys and values are the N context streams only: the query never attends to itself.

Which tokens are updated is the ``update`` mode:
- ``"query"``: only the query's stream changes; the context streams stay [x_i, context_codes[i]] in every layer.
- ``"all"``: in addition every context token j is a query over the context (itself included) with the same heads,
  s_j <- s_j + sum_h sum_i w^{(j)}[h, i] V_h s_i with w^{(j)} = softmax_i(temperature * <Q_h s_j, K_h s_i>); the query
  still attends over the context tokens only and is never a key.

Output: ``readout @ s_q`` after the last layer, a vector in R^d (readout has shape (d, D)).

Reduction to one layer (the statement tested in tests/theory/test_multilayer.py): for L = 1, p = 0 and readout = I_d,
``multilayer_forward(w, X, y) - y == multihead_attention(Q, K, V, X, y)`` (the residual adds y; the attention update
itself is exactly the single-layer reference evaluator's output), for every temperature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from theory.attention import attention_weights
from theory.validation import check_array, check_choice, check_int, check_temperature

FloatArray = npt.NDArray[np.float64]

UPDATE_MODES = ("query", "all")
"""Which streams a layer updates (see the module docstring)."""

_BATCH_ELEMENTS = 4_000_000
"""Largest number of (sample, head, key, rank) score entries held at once; batches are sized from it."""


@dataclass(frozen=True)
class AttentionLayer:
    """One layer of H rank-r heads on residual streams of dimension D.

    Attributes:
        Q: (H, r, D) query maps.
        K: (H, r, D) key maps.
        V: (H, D, D) value/output maps (written into the residual stream).
    """

    Q: FloatArray
    K: FloatArray
    V: FloatArray

    @property
    def heads(self) -> int:
        return int(self.Q.shape[0])


@dataclass(frozen=True)
class MultiLayerWeights:
    """Weights of the multi-layer theory transformer (constructions/multilayer_layout.py writes them as files).

    Attributes:
        layers: the L layers, in order.
        context_codes: (N, p) positional/scratch coordinates of the context tokens.
        query_code: (p,) positional/scratch coordinates of the query.
        readout: (d, D) linear map from the query's final stream to the output.
    """

    layers: tuple[AttentionLayer, ...]
    context_codes: FloatArray
    query_code: FloatArray
    readout: FloatArray

    def __post_init__(self) -> None:
        readout = check_array("readout", self.readout, ndim=2)
        codes = check_array("context_codes", self.context_codes, ndim=2)
        query_code = check_array("query_code", self.query_code, ndim=1)
        d, embed_dim = readout.shape
        N, p = codes.shape
        if d < 1 or N < 1:
            raise ValueError(
                f"readout must have d >= 1 rows and context_codes N >= 1 rows, got {readout.shape}, {codes.shape}"
            )
        if embed_dim != d + p:
            raise ValueError(f"readout must have shape (d, d + p) = ({d}, {d + p}), got {readout.shape}")
        if query_code.shape != (p,):
            raise ValueError(f"query_code must have shape (p,) = ({p},), got {query_code.shape}")
        if len(self.layers) < 1:
            raise ValueError("layers must hold at least one layer (L >= 1), got 0")
        rank = None
        checked = []
        for index, layer in enumerate(self.layers):
            Q = check_array(f"layers[{index}].Q", layer.Q, ndim=3)
            K = check_array(f"layers[{index}].K", layer.K, ndim=3)
            V = check_array(f"layers[{index}].V", layer.V, ndim=3)
            h, r, query_dim = Q.shape
            if h < 1 or r < 1 or query_dim != embed_dim:
                raise ValueError(
                    f"layers[{index}].Q must have shape (H, r, D) with H, r >= 1 and D = {embed_dim}, got {Q.shape}"
                )
            if K.shape != Q.shape:
                raise ValueError(f"layers[{index}].K must have shape {Q.shape} to match Q, got {K.shape}")
            if V.shape != (h, embed_dim, embed_dim):
                raise ValueError(f"layers[{index}].V must have shape ({h}, {embed_dim}, {embed_dim}), got {V.shape}")
            if rank is not None and r != rank:
                raise ValueError(f"every layer must have the same rank r; layer 0 has {rank}, layer {index} has {r}")
            rank = r
            checked.append(AttentionLayer(Q=Q, K=K, V=V))
        object.__setattr__(self, "layers", tuple(checked))
        object.__setattr__(self, "context_codes", codes)
        object.__setattr__(self, "query_code", query_code)
        object.__setattr__(self, "readout", readout)

    @property
    def d(self) -> int:
        """Token dimension."""
        return int(self.readout.shape[0])

    @property
    def p(self) -> int:
        """Number of positional/scratch coordinates."""
        return int(self.context_codes.shape[1])

    @property
    def N(self) -> int:
        """Context length the codes are written for."""
        return int(self.context_codes.shape[0])

    @property
    def embed_dim(self) -> int:
        """Residual stream dimension D = d + p."""
        return self.d + self.p

    @property
    def rank(self) -> int:
        """Query/key rank r of every head."""
        return int(self.layers[0].Q.shape[1])

    @property
    def layer_heads(self) -> list[int]:
        """Head counts H_l per layer."""
        return [layer.heads for layer in self.layers]


def _check_weights(weights: MultiLayerWeights) -> None:
    if not isinstance(weights, MultiLayerWeights):
        raise ValueError(f"weights must be a MultiLayerWeights, got {type(weights).__name__}")


def _layer_update(layer: AttentionLayer, context: FloatArray, queries: FloatArray, temperature: float) -> FloatArray:
    """Attention update sum_h sum_i w[h, i] V_h s_i for each query stream over its sample's context streams.

    Args:
        layer: the layer's heads.
        context: (m, N, D) context streams.
        queries: (m, D) query streams (row k queries context[k]).
        temperature: inverse temperature (inf = hardmax).

    Returns:
        (m, D) updates.
    """
    weights = attention_weights(layer.Q, layer.K, context, queries, temperature=temperature)  # (m, H, N)
    mixed = np.matmul(weights, context)  # (m, H, D) = (m, H, N) @ (m, N, D): each head's weighted stream average
    m, h, embed_dim = mixed.shape
    # out[m, o] = sum_h sum_e V[h, o, e] mixed[m, h, e], as one BLAS product over the flattened (h, e) axis.
    values = np.transpose(layer.V, (0, 2, 1)).reshape(h * embed_dim, embed_dim)  # (H * D, D)
    return mixed.reshape(m, h * embed_dim) @ values  # (m, D)


def multilayer_streams(
    weights: MultiLayerWeights,
    X: Any,
    y: Any,
    temperature: float = math.inf,
    update: str = "query",
) -> tuple[FloatArray, FloatArray]:
    """Final residual streams of the query and the context tokens (no batching; see `multilayer_forward`).

    Args:
        weights: the network.
        X: (n, N, d) contexts (N must equal the weights' context length).
        y: (n, d) queries.
        temperature: inverse temperature > 0 shared by all layers; math.inf is hardmax.
        update: "query" (only the query's stream is updated) or "all" (every token's).

    Returns:
        (query streams (n, D), context streams (n, N, D)).
    """
    _check_weights(weights)
    temperature = check_temperature(temperature)
    update = check_choice("update", update, UPDATE_MODES)
    X = check_array("X", X, ndim=3)
    n, N, d = X.shape
    if d != weights.d or N != weights.N:
        raise ValueError(
            f"X must have shape (n, N, d) = (n, {weights.N}, {weights.d}) to match the weights, got {X.shape}"
        )
    y = check_array("y", y)
    if y.shape != (n, d):
        raise ValueError(f"y must have shape (n, d) = ({n}, {d}) to match X, got {y.shape}")
    p = weights.p
    context = np.concatenate([X, np.broadcast_to(weights.context_codes, (n, N, p))], axis=2)  # (n, N, D)
    query = np.concatenate([y, np.broadcast_to(weights.query_code, (n, p))], axis=1)  # (n, D)
    for layer in weights.layers:
        query_update = _layer_update(layer, context, query, temperature)  # (n, D)
        if update == "all":
            embed_dim = context.shape[2]
            # Every context token j queries its own sample's context: repeat each context N times, one per query token.
            repeated = np.repeat(context, N, axis=0)  # (n * N, N, D); row n*N + j is sample n's context
            flat_context = context.reshape(n * N, embed_dim)  # (n * N, D): every context token as a query
            context_update = _layer_update(layer, repeated, flat_context, temperature)  # (n * N, D)
            context = context + context_update.reshape(n, N, embed_dim)  # (n, N, D)
        query = query + query_update
    return query, context


def multilayer_forward(
    weights: MultiLayerWeights,
    X: Any,
    y: Any,
    temperature: float = math.inf,
    update: str = "query",
    batch_size: int | None = None,
) -> FloatArray:
    """Output readout @ s_q of the multi-layer theory transformer (semantics in the module docstring).

    Args:
        weights: the network.
        X: (n, N, d) contexts.
        y: (n, d) queries.
        temperature: inverse temperature > 0 shared by all layers; math.inf is hardmax (uniform over exact ties).
        update: "query" or "all" (which streams each layer updates).
        batch_size: samples evaluated at once (>= 1); default keeps about 4e6 score entries in memory.

    Returns:
        (n, d) outputs.
    """
    _check_weights(weights)
    X = check_array("X", X, ndim=3)
    y = check_array("y", y)
    n = X.shape[0]
    if batch_size is None:
        per_sample = max(max(weights.layer_heads) * weights.N * weights.rank * weights.embed_dim, 1)
        if update == "all":
            per_sample *= weights.N
        batch_size = max(1, _BATCH_ELEMENTS // per_sample)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if n == 0:
        multilayer_streams(weights, X, y, temperature, update)  # validates shapes and arguments
        return np.zeros((0, weights.d))
    outputs = []
    for start in range(0, n, batch_size):
        stop = min(n, start + batch_size)
        query, _ = multilayer_streams(weights, X[start:stop], y[start:stop], temperature, update)  # (m, D)
        outputs.append(query @ weights.readout.T)  # (m, d)
    return np.concatenate(outputs, axis=0)
