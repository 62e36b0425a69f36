"""TheoryModel (torch) against the numpy reference evaluators theory.attention and theory.multilayer.

float64; outputs are O(1) sums of at most a few hundred products, so the absolute tolerance 1e-12 is a few hundred
float64 epsilons (scaled by the size of the value maps where they are random Gaussians).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from experiments.models.attention import RankedMultiheadAttention
from experiments.models.spec import AttentionSpec
from experiments.models.theory_model import TheoryModel
from tests.strategies import dimensions, head_counts, seeds
from theory.attention import multihead_attention
from theory.multilayer import AttentionLayer, MultiLayerWeights, multilayer_forward, multilayer_streams

TOL = 1e-12
f64 = torch.float64


def unit_rows(rng: np.random.Generator, *shape: int) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def random_multilayer(rng: np.random.Generator, d: int, p: int, N: int, r: int, heads: list[int]) -> MultiLayerWeights:
    """Random weights; V scaled by 1/sqrt(H D) so streams stay O(1) over a few layers."""
    D = d + p
    layers = tuple(
        AttentionLayer(
            Q=rng.standard_normal((h, r, D)),
            K=rng.standard_normal((h, r, D)),
            V=rng.standard_normal((h, D, D)) / math.sqrt(h * D),
        )
        for h in heads
    )
    return MultiLayerWeights(
        layers=layers,
        context_codes=rng.standard_normal((N, p)),
        query_code=rng.standard_normal(p),
        readout=rng.standard_normal((d, D)),
    )


def set_weights(model: TheoryModel, weights: MultiLayerWeights) -> None:
    """Copy evaluator weights into the model parameter by parameter (independent of experiments.models.from_weights)."""
    with torch.no_grad():
        for layer, src in zip(model.attention_layers, weights.layers, strict=True):
            assert isinstance(layer, RankedMultiheadAttention)
            layer.load_heads(*(torch.from_numpy(a) for a in (src.Q, src.K, src.V)))
        model.context_codes.copy_(torch.from_numpy(weights.context_codes))
        model.query_code.copy_(torch.from_numpy(weights.query_code))
        model.readout.copy_(torch.from_numpy(weights.readout))


@given(
    d=dimensions(2, 8),
    r_frac=st.floats(0.0, 1.0),
    H=head_counts(6),
    N=st.integers(1, 6),
    temperature=st.sampled_from([0.5, 3.0, math.inf]),
    seed=seeds,
)
def test_single_layer_matches_multihead_attention(
    d: int, r_frac: float, H: int, N: int, temperature: float, seed: int
) -> None:
    """TheoryModel.single_layer = theory.attention.multihead_attention (softmax and hardmax)."""
    r = 1 + int(r_frac * (d - 1))
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((2, H, r, d))
    V = rng.standard_normal((H, d, d))
    X, y = unit_rows(rng, 4, N, d), unit_rows(rng, 4, d)
    model = TheoryModel.single_layer(d, AttentionSpec.theory(r, temperature), H, dtype=f64)
    layer = model.attention_layers[0]
    assert isinstance(layer, RankedMultiheadAttention)
    layer.load_heads(torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V))
    with torch.no_grad():
        ours = model(torch.from_numpy(X), torch.from_numpy(y)).numpy()
    reference = multihead_attention(Q, K, V, X, y, temperature=temperature)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=TOL * max(1.0, np.abs(V).sum()))


@pytest.mark.parametrize("update", ["query", "all"])
@pytest.mark.parametrize("temperature", [0.8, 5.0, math.inf])
@pytest.mark.parametrize(
    ("d", "p", "N", "r", "heads"), [(4, 3, 3, 2, [3, 2]), (5, 0, 4, 1, [4, 1, 2]), (3, 2, 1, 5, [2])]
)
def test_multilayer_matches_reference(
    update: str, temperature: float, d: int, p: int, N: int, r: int, heads: list[int]
) -> None:
    """Outputs and final streams equal theory.multilayer (both update modes, softmax and hardmax, L = 1..3)."""
    rng = np.random.default_rng(d * 10 + p + N)
    weights = random_multilayer(rng, d, p, N, r, heads)
    model = TheoryModel(
        d,
        AttentionSpec.theory(r, temperature),
        heads,
        layers=len(heads),
        positional_dim=p,
        context_length=N,
        update=update,
        dtype=f64,
    )
    set_weights(model, weights)
    X, y = unit_rows(rng, 6, N, d), unit_rows(rng, 6, d)
    with torch.no_grad():
        out = model(torch.from_numpy(X), torch.from_numpy(y)).numpy()
        q_stream, c_stream = model.streams(torch.from_numpy(X), torch.from_numpy(y))
    reference = multilayer_forward(weights, X, y, temperature=temperature, update=update)
    ref_q, ref_c = multilayer_streams(weights, X, y, temperature=temperature, update=update)
    np.testing.assert_allclose(out, reference, rtol=0, atol=TOL * 10)
    np.testing.assert_allclose(q_stream.numpy(), ref_q, rtol=0, atol=TOL)
    np.testing.assert_allclose(c_stream.numpy(), ref_c, rtol=0, atol=TOL)


def test_residual_one_layer_is_query_plus_attention() -> None:
    """L = 1, p = 0, readout = I with the residual: y + multihead_attention (theory/multilayer.py's reduction)."""
    rng = np.random.default_rng(7)
    d, r, H, N = 5, 2, 3, 4
    Q, K = rng.standard_normal((2, H, r, d))
    V = rng.standard_normal((H, d, d))
    model = TheoryModel(d, AttentionSpec.theory(r, 2.0), H, dtype=f64)
    layer = model.attention_layers[0]
    assert isinstance(layer, RankedMultiheadAttention)
    layer.load_heads(torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V))
    X, y = unit_rows(rng, 5, N, d), unit_rows(rng, 5, d)
    with torch.no_grad():
        ours = model(torch.from_numpy(X), torch.from_numpy(y)).numpy()
    np.testing.assert_allclose(ours - y, multihead_attention(Q, K, V, X, y, temperature=2.0), rtol=0, atol=TOL * 10)


def test_standard_values_in_theory_model() -> None:
    """value='standard': the evaluator with V_h = (1/c) O^h W_v^h read from the module's raw parameters."""
    d, r, N = 6, 2, 4
    model = TheoryModel.single_layer(d, AttentionSpec.theory(r, 1.5, value="standard"), heads=6, dtype=f64)
    layer = model.attention_layers[0]
    assert isinstance(layer, RankedMultiheadAttention)
    layer.reset_parameters(generator=torch.Generator().manual_seed(3))
    H, c = 6, 2
    w = layer.in_proj_weight.detach().numpy()
    Q, K, Wv = (w[i * H * r : (i + 1) * H * r].reshape(H, r, d) for i in range(3))
    assert layer.out_proj_weight is not None
    O = layer.out_proj_weight.detach().numpy()
    V = np.stack([O[:, h * r : (h + 1) * r] @ Wv[h] for h in range(H)]) / c  # (H, d, d)
    rng = np.random.default_rng(0)
    X, y = unit_rows(rng, 5, N, d), unit_rows(rng, 5, d)
    with torch.no_grad():
        ours = model(torch.from_numpy(X), torch.from_numpy(y)).numpy()
    np.testing.assert_allclose(ours, multihead_attention(Q, K, V, X, y, temperature=1.5), rtol=0, atol=TOL)


def test_hardmax_gradients_in_theory_model() -> None:
    """Hardmax: by default only V and the readout get gradients; straight-through also reaches Q and K."""
    X = torch.randn(8, 3, 4, dtype=f64, generator=torch.Generator().manual_seed(0))
    y = torch.randn(8, 4, dtype=f64, generator=torch.Generator().manual_seed(1))
    for mode, expect_qk in (("none", False), ("straight-through", True)):
        model = TheoryModel(4, AttentionSpec.theory(2, math.inf, hardmax_gradient=mode), heads=3, dtype=f64)
        model(X, y).pow(2).sum().backward()
        layer = model.attention_layers[0]
        assert isinstance(layer, RankedMultiheadAttention)
        assert layer.value_weight is not None and layer.value_weight.grad is not None
        assert layer.value_weight.grad.abs().sum() > 0
        assert model.readout.grad is not None and model.readout.grad.abs().sum() > 0
        qk_grad = layer.in_proj_weight.grad  # None when Q and K are not in the graph at all
        assert (qk_grad is not None and bool(qk_grad.abs().sum() > 0)) == expect_qk


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d": 4, "rank": 5, "heads": 1}, "rank"),
        ({"d": 4, "rank": 2, "heads": 0}, "heads"),
        ({"d": 4, "rank": 2, "heads": [1, 2], "layers": 3}, "heads must list"),
        ({"d": 4, "rank": 2, "heads": 1, "positional_dim": 2}, "context_length"),
        ({"d": 4, "rank": 2, "heads": 1, "update": "some"}, "update"),
        ({"d": 4, "rank": 2, "heads": 1, "layers": 2, "residual": False}, "residual"),
        ({"d": 4, "rank": 2, "heads": 1, "layers": 2, "score_bias": True, "context_length": 2}, "score_bias"),
        ({"d": 4, "rank": 2, "heads": 1, "temperature": -1.0}, "temperature"),
        ({"d": 4, "rank": 2, "heads": 1, "value": "standard"}, "heads"),
    ],
)
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    spec_fields = {k: kwargs.pop(k) for k in ("rank", "temperature", "value") if k in kwargs}
    with pytest.raises(ValueError, match=match):
        TheoryModel(attention=AttentionSpec.theory(**spec_fields), **kwargs)


def test_invalid_inputs() -> None:
    model = TheoryModel(4, AttentionSpec.theory(2), heads=2, positional_dim=1, context_length=3)
    with pytest.raises(ValueError, match="context_length"):
        model(torch.randn(2, 4, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match="y must have shape"):
        model(torch.randn(2, 3, 4), torch.randn(3, 4))
    with pytest.raises(ValueError, match="X must have shape"):
        model(torch.randn(2, 3, 5), torch.randn(2, 5))
