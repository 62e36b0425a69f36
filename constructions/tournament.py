"""Conjecture 6 evidence: extending the rank-1 majority vote to N > 2 tokens as a plurality vote + round robin.

docs/paper.md section 5. Every head has rank 1 (Q_h^T K_h has rank exactly 1); evaluated by
`theory.multilayer.multilayer_forward` with update = "query". Three layers for every N (the most economical depth we
found: one rank-1 head can only choose between the two extremes of a fixed per-token scalar, so "pick the token with
the largest count" needs a round robin of pairwise comparisons and then a selection layer).

Stream layout (D = d + p, p = 1 + 2N + d):

    [0, d)                content (x_j or y), never written
    d                     "one": 1 for the query, 0 for the context tokens
    [d+1, d+1+N)          "id": token j holds e_j; the query starts at 0 and layer 1 writes the vote counts here
    [d+1+N, d+1+2N)       "wins": 0; layer 2 writes each token's number of round-robin wins into the query's block
    [d+1+2N, 2d+1+2N)     "out": 0; layer 3 writes the winner's content into the query's block

Layer 1, H heads: Q_h = K_h = q_h^T on the content block; head h picks argmax_j <q_h, y><q_h, x_j>, i.e. the token most
aligned with the direction sign(<q_h, y>) q_h, which lies in y's hemisphere. V_h copies the id block into the id block,
so the query's id block becomes the counts n_j = #(heads picking j). P(head picks the nearest token) is the largest
pick probability (reflect across the bisector of x_a - x_b: the nearer token always gains), so the plurality winner
converges to the nearest neighbour as H grows, but the nearest token's edge over the runner-up shrinks with N.

Layer 2, N(N-1)/2 heads, one per pair a < b: Q = (e_id_a - e_id_b + 1/2 e_one)^T so alpha = n_a - n_b + 1/2 (counts are
integers, so alpha != 0: ties go to the lower index), K = (e_id_a - e_id_b)^T so beta_j = +1 (j = a), -1 (j = b),
0 otherwise. score_j = T alpha beta_j is largest at a if alpha > 0, at b if alpha < 0, and 0 elsewhere: the head picks
the pair's winner. V copies the id block into the wins block: wins_j = number of pairs j wins. The plurality winner w
(largest count, lowest index among equals) wins all N - 1 of its games; every other token loses at least one.

Layer 3, N + 1 heads. Head i < N: Q = (e_wins_i - (N - 3/2) e_one)^T, K = e_id_i^T: score_j = alpha_i 1[j = i] with
alpha_i = wins_i - (N - 3/2) > 0 only for the winner. The winner's head picks itself; every other head i has a negative
score at i and 0 elsewhere, so it spreads its weight evenly over the other N - 1 tokens. With V = gamma (out <- content)
the heads sum to gamma [x_w N/(N-1) + (N-2) S/(N-1)], S = sum_j x_j. Head N (Q = e_one^T, K = sum_j e_id_j^T: equal
scores, uniform weights) with V = delta (out <- content) adds delta S / N. gamma = (N-1)/N and delta = -(N-2) leave
exactly x_w in the out block (hardmax). The readout reads the out block.

Costs: L = 3, heads [H, N(N-1)/2, N+1], p = 1 + 2N + d; the head count H needed for a fixed error grows with N
(measured in docs/depth.md). One full-rank head (Q = K = V = I) is exact for every N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from constructions.multilayer_layout import multilayer_metadata
from theory.multilayer import AttentionLayer, MultiLayerWeights
from theory.sphere import sample_sphere
from theory.validation import check_dimension, check_generator, check_heads, check_int, check_temperature

FloatArray = npt.NDArray[np.float64]

CONSTRUCTION_NAME = "tournament"


@dataclass(frozen=True)
class Tournament:
    """A built plurality-vote + round-robin transformer.

    Attributes:
        weights: multi-layer weights (L = 3, heads [H, N(N-1)/2, N+1], r = 1, p = 1 + 2N + d).
        directions: (H, d) layer-1 directions.
        temperature: inverse temperature it is meant for.
        predicted_error: Monte Carlo estimate of the construction-averaged error if computed, else nan.
    """

    weights: MultiLayerWeights
    directions: FloatArray
    temperature: float
    predicted_error: float

    def metadata(self) -> dict[str, object]:
        """Metadata for constructions.weights_io.save_weights (multi-layer layout)."""
        return multilayer_metadata(self.weights, CONSTRUCTION_NAME, self.temperature, self.predicted_error)


def tournament_weights(directions: npt.ArrayLike, N: int) -> MultiLayerWeights:
    """The three-layer rank-1 plurality vote + round robin for N tokens (see the module docstring).

    Args:
        directions: (H, d) layer-1 directions q_h.
        N: context length (>= 2).

    Returns:
        MultiLayerWeights with L = 3, heads [H, N(N-1)/2, N+1], rank 1, p = 1 + 2N + d.
    """
    q = np.asarray(directions, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] < 1 or q.shape[1] < 2 or not np.all(np.isfinite(q)):
        raise ValueError(f"directions must be a finite (H, d) array with H >= 1, d >= 2, got shape {q.shape}")
    N = check_int("N", N, minimum=2)
    H, d = q.shape
    p = 1 + 2 * N + d
    embed_dim = d + p
    one = d
    ids = np.arange(d + 1, d + 1 + N)  # (N,) id / count coordinates
    wins = np.arange(d + 1 + N, d + 1 + 2 * N)  # (N,) wins coordinates
    out = slice(d + 1 + 2 * N, 2 * d + 1 + 2 * N)  # output block

    # Layer 1: rank-1 votes; V copies the id block onto itself (the query's id block accumulates counts).
    q1 = np.zeros((H, 1, embed_dim))
    q1[:, 0, :d] = q  # (H, 1, D)
    v1 = np.zeros((H, embed_dim, embed_dim))
    v1[:, ids, ids] = 1.0  # (H, D, D)
    layer1 = AttentionLayer(Q=q1, K=q1.copy(), V=v1)

    # Layer 2: one head per pair a < b; alpha = n_a - n_b + 1/2, beta_j = 1[j = a] - 1[j = b]; V: wins <- id.
    pairs = [(a, b) for a in range(N) for b in range(a + 1, N)]
    q2 = np.zeros((len(pairs), 1, embed_dim))
    k2 = np.zeros((len(pairs), 1, embed_dim))
    for h, (a, b) in enumerate(pairs):
        q2[h, 0, ids[a]], q2[h, 0, ids[b]], q2[h, 0, one] = 1.0, -1.0, 0.5
        k2[h, 0, ids[a]], k2[h, 0, ids[b]] = 1.0, -1.0
    v2 = np.zeros((len(pairs), embed_dim, embed_dim))
    v2[:, wins, ids] = 1.0  # (P, D, D)
    layer2 = AttentionLayer(Q=q2, K=k2, V=v2)

    # Layer 3: selection heads i < N and one uniform head; gamma = (N-1)/N, delta = -(N-2) (module docstring).
    q3 = np.zeros((N + 1, 1, embed_dim))
    k3 = np.zeros((N + 1, 1, embed_dim))
    v3 = np.zeros((N + 1, embed_dim, embed_dim))
    for i in range(N):
        q3[i, 0, wins[i]], q3[i, 0, one] = 1.0, -(N - 1.5)
        k3[i, 0, ids[i]] = 1.0
        v3[i, out, :d] = (N - 1) / N * np.eye(d)
    q3[N, 0, one] = 1.0
    k3[N, 0, ids] = 1.0
    v3[N, out, :d] = -(N - 2) * np.eye(d)
    layer3 = AttentionLayer(Q=q3, K=k3, V=v3)

    codes = np.zeros((N, p))  # (N, p); scratch index s <-> stream index d + s
    codes[np.arange(N), 1 + np.arange(N)] = 1.0  # token j's id e_j
    query_code = np.zeros(p)
    query_code[0] = 1.0  # the query's "one"
    readout = np.zeros((d, embed_dim))
    readout[:, out] = np.eye(d)
    return MultiLayerWeights(
        layers=(layer1, layer2, layer3), context_codes=codes, query_code=query_code, readout=readout
    )


def build_tournament(d: int, N: int, heads: int, rng: np.random.Generator, temperature: float = math.inf) -> Tournament:
    """Draw H uniform directions and build the N-token plurality vote + round robin (prediction not computed).

    Args:
        d: token dimension (>= 2).
        N: context length (>= 2).
        heads: number of layer-1 heads H (>= 1).
        rng: source of the random directions.
        temperature: inverse temperature the weights are meant for (inf = hardmax).

    Returns:
        Tournament with predicted_error = nan (use theory.plurality_vote.plurality_vote_errors).
    """
    d = check_dimension(d)
    N = check_int("N", N, minimum=2)
    heads = check_heads(heads)
    rng = check_generator(rng)
    temperature = check_temperature(temperature)
    directions = sample_sphere(heads, d, rng)  # (H, d)
    return Tournament(
        weights=tournament_weights(directions, N),
        directions=directions,
        temperature=temperature,
        predicted_error=math.nan,
    )
