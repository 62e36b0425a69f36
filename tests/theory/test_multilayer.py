"""The multi-layer theory transformer: reduction to one layer, both update modes against a naive loop, ties."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import dimension_and_rank, dimensions, random_multilayer_network, seeds, temperatures
from theory.attention import multihead_attention
from theory.multilayer import AttentionLayer, MultiLayerWeights, multilayer_forward, multilayer_streams

temperature_or_hardmax = st.one_of(st.just(math.inf), temperatures(0.1, 100.0))


def _naive_forward(weights, X, y, temperature, update):
    """Loop-by-loop restatement of the documented semantics (independent of the vectorised code)."""
    n, N, d = X.shape
    out = np.zeros((n, d))
    for m in range(n):
        context = [np.concatenate([X[m, i], weights.context_codes[i]]) for i in range(N)]
        query = np.concatenate([y[m], weights.query_code])
        for layer in weights.layers:

            def attend(s, context=context, layer=layer):
                total = np.zeros_like(s)
                for h in range(layer.Q.shape[0]):
                    scores = np.array([float(layer.Q[h] @ s @ (layer.K[h] @ c)) for c in context])
                    if math.isinf(temperature):
                        w = (scores == scores.max()).astype(float)
                    else:
                        w = np.exp(temperature * (scores - scores.max()))
                    w /= w.sum()
                    for i, c in enumerate(context):
                        total += w[i] * (layer.V[h] @ c)
                return total

            new_query = query + attend(query)
            if update == "all":
                context = [c + attend(c) for c in context]
            query = new_query
        out[m] = weights.readout @ query
    return out


@given(dr=dimension_and_rank(2, 6), h=st.integers(1, 4), N=st.integers(1, 4), seed=seeds, T=temperature_or_hardmax)
def test_one_layer_without_scratch_reduces_to_multihead_attention(dr, h, N, seed, T):
    d, r = dr
    rng = np.random.default_rng(seed)
    Q, K, V = rng.standard_normal((h, r, d)), rng.standard_normal((h, r, d)), rng.standard_normal((h, d, d))
    weights = MultiLayerWeights(
        layers=(AttentionLayer(Q=Q, K=K, V=V),),
        context_codes=np.zeros((N, 0)),
        query_code=np.zeros(0),
        readout=np.eye(d),
    )
    X, y = rng.standard_normal((7, N, d)), rng.standard_normal((7, d))
    got = multilayer_forward(weights, X, y, temperature=T) - y
    want = multihead_attention(Q, K, V, X, y, temperature=T)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=15)
@given(
    d=dimensions(2, 4),
    p=st.integers(0, 3),
    N=st.integers(1, 3),
    heads=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    r=st.integers(1, 2),
    seed=seeds,
    T=temperature_or_hardmax,
    update=st.sampled_from(["query", "all"]),
)
def test_matches_a_naive_loop_of_the_documented_semantics(d, p, N, heads, r, seed, T, update):
    rng = np.random.default_rng(seed)
    weights = random_multilayer_network(rng, d, p, N, heads, min(r, d + p))
    X, y = rng.standard_normal((3, N, d)), rng.standard_normal((3, d))
    got = multilayer_forward(weights, X, y, temperature=T, update=update)
    want = _naive_forward(weights, X, y, T, update)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_update_modes_differ_and_query_mode_keeps_the_context_streams():
    rng = np.random.default_rng(3)
    weights = random_multilayer_network(rng, 3, 2, 3, [2, 2], 1)
    X, y = rng.standard_normal((4, 3, 3)), rng.standard_normal((4, 3))
    _, context = multilayer_streams(weights, X, y, temperature=2.0, update="query")
    start = np.concatenate([X, np.broadcast_to(weights.context_codes, (4, 3, 2))], axis=2)
    np.testing.assert_array_equal(context, start)
    a = multilayer_forward(weights, X, y, temperature=2.0, update="query")
    b = multilayer_forward(weights, X, y, temperature=2.0, update="all")
    assert np.max(np.abs(a - b)) > 1e-6  # the second layer sees updated context streams under "all"


def test_hardmax_ties_split_evenly():
    d = 2
    Q = np.zeros((1, 1, d))  # all scores 0: an exact tie between every key
    weights = MultiLayerWeights(
        layers=(AttentionLayer(Q=Q, K=Q.copy(), V=np.eye(d)[None]),),
        context_codes=np.zeros((3, 0)),
        query_code=np.zeros(0),
        readout=np.eye(d),
    )
    X = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    y = np.zeros((1, d))
    np.testing.assert_allclose(multilayer_forward(weights, X, y), [[2 / 3, 2 / 3]], atol=1e-15)


def test_batching_does_not_change_the_output():
    rng = np.random.default_rng(5)
    weights = random_multilayer_network(rng, 3, 1, 2, [3, 1], 1)
    X, y = rng.standard_normal((11, 2, 3)), rng.standard_normal((11, 3))
    np.testing.assert_allclose(
        multilayer_forward(weights, X, y, batch_size=1), multilayer_forward(weights, X, y), rtol=0, atol=1e-13
    )


def test_invalid_inputs_name_the_problem():
    rng = np.random.default_rng(0)
    weights = random_multilayer_network(rng, 3, 1, 2, [2], 1)
    X, y = rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 3))
    with pytest.raises(ValueError, match="N, d"):
        multilayer_forward(weights, rng.standard_normal((2, 3, 3)), y)
    with pytest.raises(ValueError, match="update"):
        multilayer_forward(weights, X, y, update="some")
    with pytest.raises(ValueError, match="temperature"):
        multilayer_forward(weights, X, y, temperature=0.0)
    with pytest.raises(ValueError, match="readout"):
        MultiLayerWeights(weights.layers, weights.context_codes, weights.query_code, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="same rank"):
        MultiLayerWeights(
            (weights.layers[0], AttentionLayer(np.zeros((1, 2, 4)), np.zeros((1, 2, 4)), np.zeros((1, 4, 4)))),
            weights.context_codes,
            weights.query_code,
            weights.readout,
        )
    with pytest.raises(ValueError, match="MultiLayerWeights"):
        multilayer_forward({"readout": weights.readout}, X, y)


def test_the_residual_stream_dimension_is_embed_dim_and_width_is_not_a_name_for_it():
    """`width` means c (averaged attention blocks) everywhere; the stream dimension D = d + p is ``embed_dim``."""
    d, p, N = 3, 2, 4
    layer = AttentionLayer(Q=np.ones((2, 1, d + p)), K=np.ones((2, 1, d + p)), V=np.zeros((2, d + p, d + p)))
    weights = MultiLayerWeights((layer,), np.zeros((N, p)), np.zeros(p), np.zeros((d, d + p)))
    assert weights.embed_dim == d + p == 5
    assert not hasattr(weights, "width")
    narrow = AttentionLayer(Q=np.ones((2, 1, 4)), K=np.ones((2, 1, 4)), V=layer.V)  # keys of dimension 4, not 5
    with pytest.raises(ValueError, match=r"D = 5"):
        MultiLayerWeights((narrow,), np.zeros((N, p)), np.zeros(p), np.zeros((d, d + p)))
