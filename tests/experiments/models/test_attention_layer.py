"""RankedMultiheadAttention against the numpy reference evaluator and against stock torch.nn.MultiheadAttention.

Every comparison runs in float64; the tolerance 1e-12 (absolute, on outputs of size O(1)) is a few hundred float64
epsilons, the accumulated rounding of sums over at most a few hundred products.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from experiments.models.attention import IMPLEMENTATIONS, RankedMultiheadAttention, hardmax, use_implementation
from tests.strategies import dimensions, head_counts, seeds
from theory.attention import attention_weights, multihead_attention, self_attention

TOL = 1e-12
f64 = torch.float64


def unit_rows(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Rows uniform on the sphere: shape (..., d)."""
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def full_module(Q: np.ndarray, K: np.ndarray, V: np.ndarray, **kwargs: object) -> RankedMultiheadAttention:
    """A full-value module holding the evaluator's heads, unscaled scores, no biases."""
    H, r, d = Q.shape
    module = RankedMultiheadAttention(d, r, heads=H, value="full", bias=False, score_scale=1.0, dtype=f64, **kwargs)
    module.load_heads(torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V))
    return module


def query_to_context(module: RankedMultiheadAttention, X: np.ndarray, y: np.ndarray, **kwargs: object) -> np.ndarray:
    """Module output for queries y (n, d) over contexts X (n, N, d): (n, d)."""
    with torch.no_grad():
        out = module(torch.from_numpy(y)[:, None, :], torch.from_numpy(X), **kwargs)  # (n, 1, d)
    return out[:, 0].numpy()


@given(
    d=dimensions(2, 12),
    r_frac=st.floats(0.0, 1.0),
    H=head_counts(9),
    N=st.integers(1, 7),
    temperature=st.sampled_from([0.3, 1.0, 7.0, math.inf]),
    seed=seeds,
)
def test_full_value_matches_evaluator(d: int, r_frac: float, H: int, N: int, temperature: float, seed: int) -> None:
    """Full-value heads (softmax at several temperatures, and hardmax) equal theory.attention.multihead_attention."""
    r = 1 + int(r_frac * (d - 1))
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((2, H, r, d))
    V = rng.standard_normal((H, d, d))
    X, y = unit_rows(rng, 5, N, d), unit_rows(rng, 5, d)
    attention = "hardmax" if math.isinf(temperature) else "softmax"
    module = full_module(Q, K, V, attention=attention, temperature=temperature)
    ours = query_to_context(module, X, y)
    reference = multihead_attention(Q, K, V, X, y, temperature=temperature)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=TOL * max(1.0, np.abs(V).sum()))


@pytest.mark.parametrize("attention", ["softmax", "hardmax"])
def test_full_value_self_attention_matches_evaluator(attention: str) -> None:
    """Self-attention (x_context=None) equals theory.attention.self_attention."""
    rng = np.random.default_rng(1)
    H, r, d, N = 5, 3, 8, 6
    Q, K = rng.standard_normal((2, H, r, d))
    V = rng.standard_normal((H, d, d))
    X = unit_rows(rng, 4, N, d)
    temperature = 2.5 if attention == "softmax" else math.inf
    module = full_module(Q, K, V, attention=attention, temperature=temperature)
    with torch.no_grad():
        ours = module(torch.from_numpy(X)).numpy()  # (n, N, d)
    np.testing.assert_allclose(ours, self_attention(Q, K, V, X, temperature=temperature), rtol=0, atol=TOL * 10)


@pytest.mark.parametrize(("d", "r", "c"), [(8, 1, 1), (8, 2, 3), (12, 4, 2), (6, 6, 2)])
@pytest.mark.parametrize("attention", ["softmax", "hardmax"])
def test_standard_value_matches_evaluator(d: int, r: int, c: int, attention: str) -> None:
    """Standard (rank-r value/output) heads equal the evaluator with V_h = (1/c) O^h W_v^h built here from the raw
    parameters, and temperature * score_scale as the evaluator's temperature."""
    gen = torch.Generator().manual_seed(d * 100 + r * 10 + c)
    module = RankedMultiheadAttention(d, r, width=c, bias=False, attention=attention, temperature=1.7, dtype=f64)
    module.reset_parameters(generator=gen)
    H = c * d // r
    w = module.in_proj_weight.detach().numpy()  # (3 H r, d)
    Q, K, Wv = (w[i * H * r : (i + 1) * H * r].reshape(H, r, d) for i in range(3))  # 3 x (H, r, d)
    O = module.out_proj_weight.detach().numpy()  # (d, H r)
    V = np.stack([O[:, h * r : (h + 1) * r] @ Wv[h] for h in range(H)]) / c  # (H, d, d)
    temperature = math.inf if attention == "hardmax" else 1.7 / math.sqrt(r)
    rng = np.random.default_rng(0)
    X, y = unit_rows(rng, 6, 5, d), unit_rows(rng, 6, d)
    reference = multihead_attention(Q, K, V, X, y, temperature=temperature)
    np.testing.assert_allclose(query_to_context(module, X, y), reference, rtol=0, atol=TOL)
    form = module.evaluator_weights()
    np.testing.assert_allclose(form["V"].numpy(), V, rtol=0, atol=TOL)  # type: ignore[union-attr]
    assert form["temperature"] == temperature


def test_score_bias_matches_evaluator() -> None:
    """Per-head, per-position score biases enter as in the evaluator: temperature * (<Qy, Kx> + bias)."""
    rng = np.random.default_rng(2)
    H, r, d, N = 4, 2, 6, 3
    Q, K = rng.standard_normal((2, H, r, d))
    V = rng.standard_normal((H, d, d))
    bias = rng.standard_normal((H, N))
    X, y = unit_rows(rng, 8, N, d), unit_rows(rng, 8, d)
    for temperature in (0.7, 4.0, math.inf):
        attention = "hardmax" if math.isinf(temperature) else "softmax"
        module = full_module(Q, K, V, attention=attention, temperature=temperature)
        ours = query_to_context(module, X, y, score_bias=torch.from_numpy(bias))
        reference = multihead_attention(Q, K, V, X, y, temperature=temperature, score_bias=bias)
        np.testing.assert_allclose(ours, reference, rtol=0, atol=TOL * 10)


@pytest.mark.parametrize("attention", ["softmax", "hardmax"])
def test_causal_mask_equals_prefix_evaluation(attention: str) -> None:
    """Causal self-attention at position j equals the evaluator with query x_j over the prefix x_1..x_j."""
    rng = np.random.default_rng(3)
    H, r, d, N = 3, 2, 5, 6
    Q, K = rng.standard_normal((2, H, r, d))
    V = rng.standard_normal((H, d, d))
    X = unit_rows(rng, 4, N, d)
    temperature = 1.3 if attention == "softmax" else math.inf
    module = full_module(Q, K, V, attention=attention, temperature=temperature, causal=True)
    with torch.no_grad():
        ours = module(torch.from_numpy(X)).numpy()  # (n, N, d)
    for j in range(N):
        reference = multihead_attention(Q, K, V, X[:, : j + 1], X[:, j], temperature=temperature)
        np.testing.assert_allclose(ours[:, j], reference, rtol=0, atol=TOL * 10)


def random_blocks(d: int, r: int, c: int, seed: int, bias: bool = True) -> list[torch.nn.MultiheadAttention]:
    """c stock nn.MultiheadAttention blocks (d / r heads each) with random non-zero biases."""
    torch.manual_seed(seed)
    blocks = [torch.nn.MultiheadAttention(d, d // r, bias=bias, batch_first=True, dtype=f64) for _ in range(c)]
    if bias:
        with torch.no_grad():
            for block in blocks:
                block.in_proj_bias.normal_()
                block.out_proj.bias.normal_()
    return blocks


@pytest.mark.parametrize(("d", "r", "c"), [(8, 8, 1), (8, 2, 1), (8, 1, 3), (16, 4, 4)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_averaged_torch_blocks_equal_one_module(d: int, r: int, c: int, causal: bool, implementation: str) -> None:
    """(1/c) sum of c nn.MultiheadAttention blocks (d/r heads each) = our module with H = c d / r heads: outputs and
    input gradients, self-attention and cross-attention, under every implementation."""
    blocks = random_blocks(d, r, c, seed=d + r + c)
    module = RankedMultiheadAttention(d, r, width=c, causal=causal, implementation=implementation, dtype=f64)
    module.load_torch_blocks(blocks)
    assert module.heads == c * d // r
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 7, d, dtype=f64, generator=gen, requires_grad=True)
    mask = torch.ones(7, 7, dtype=torch.bool).triu(1) if causal else None
    reference = sum(b(x, x, x, need_weights=False, attn_mask=mask)[0] for b in blocks) / c  # (3, 7, d)
    ours = module(x)
    torch.testing.assert_close(ours, reference, rtol=0, atol=TOL)
    (g_ref,) = torch.autograd.grad(reference.pow(2).sum(), x)
    (g_ours,) = torch.autograd.grad(ours.pow(2).sum(), x)
    torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=TOL * 10)
    if not causal:
        z = torch.randn(3, 2, d, dtype=f64, generator=gen)
        with torch.no_grad():
            reference = sum(b(z, x, x, need_weights=False)[0] for b in blocks) / c  # (3, 2, d)
            torch.testing.assert_close(module(z, x), reference, rtol=0, atol=TOL)


def test_one_head_blocks_run_one_block_per_group() -> None:
    """r = d: the default groups hold one block each (no layout copy), and outputs and gradients still equal the
    averaged stock blocks."""
    d, c = 6, 3
    blocks = random_blocks(d, d, c, seed=5)
    module = RankedMultiheadAttention(d, d, width=c, dtype=f64)
    assert module.block_chunk == 1 and RankedMultiheadAttention(d, 2, width=c).block_chunk == 4
    module.load_torch_blocks(blocks)
    x = torch.randn(4, 5, d, dtype=f64, generator=torch.Generator().manual_seed(2))
    reference = sum(b(x, x, x, need_weights=False)[0] for b in blocks) / c
    ours = module(x)
    torch.testing.assert_close(ours, reference, rtol=0, atol=TOL)
    reference.pow(3).sum().backward()
    ours.pow(3).sum().backward()
    assert module.in_proj_weight.grad is not None
    for b, block in enumerate(blocks):
        rows = slice(b * d, (b + 1) * d)
        grad_in = module.in_proj_weight.grad.view(3, c * d, d)[:, rows].reshape(3 * d, d)
        torch.testing.assert_close(grad_in, block.in_proj_weight.grad, rtol=0, atol=TOL * 10)


@pytest.mark.parametrize("block_chunk", [1, 2, 4])
def test_parameter_gradients_match_torch_blocks(block_chunk: int) -> None:
    """Parameter gradients of the averaged blocks equal ours, mapped block by block (so training dynamics agree), for
    the blockwise path in groups of 1 and 2 blocks (split weights, addmm accumulation) and in one group of all 3."""
    d, r, c = 8, 2, 3
    blocks = random_blocks(d, r, c, seed=11)
    module = RankedMultiheadAttention(d, r, width=c, dtype=f64)
    module.block_chunk = block_chunk
    module.load_torch_blocks(blocks)
    x = torch.randn(4, 5, d, dtype=f64, generator=torch.Generator().manual_seed(1))
    (sum(b(x, x, x, need_weights=False)[0] for b in blocks) / c).pow(3).sum().backward()
    module(x).pow(3).sum().backward()
    assert module.in_proj_weight.grad is not None and module.out_proj_weight.grad is not None
    for b, block in enumerate(blocks):
        rows = slice(b * d, (b + 1) * d)
        grad_in = module.in_proj_weight.grad.view(3, c * d, d)[:, rows].reshape(3 * d, d)
        torch.testing.assert_close(grad_in, block.in_proj_weight.grad, rtol=0, atol=TOL * 10)
        torch.testing.assert_close(
            module.out_proj_weight.grad[:, rows], block.out_proj.weight.grad, rtol=0, atol=TOL * 10
        )
        assert module.out_proj_bias is not None and module.out_proj_bias.grad is not None
        torch.testing.assert_close(module.out_proj_bias.grad[b], block.out_proj.bias.grad, rtol=0, atol=TOL * 10)
        assert module.in_proj_bias is not None and module.in_proj_bias.grad is not None
        grad_bias = module.in_proj_bias.grad.view(3, c * d)[:, rows].reshape(3 * d)
        torch.testing.assert_close(grad_bias, block.in_proj_bias.grad, rtol=0, atol=TOL * 10)


def test_hardmax_splits_exact_ties_like_the_evaluator() -> None:
    """A context with a duplicated winning token: hardmax gives each copy weight 1/2, as the evaluator does."""
    rng = np.random.default_rng(4)
    H, r, d = 2, 2, 4
    Q, K = rng.standard_normal((2, H, r, d))
    V = rng.standard_normal((H, d, d))
    X = unit_rows(rng, 3, 3, d)
    X[:, 2] = X[:, 0]
    y = unit_rows(rng, 3, d)
    module = full_module(Q, K, V, attention="hardmax", temperature=math.inf)
    with torch.no_grad():
        ours = module.attention_weights(torch.from_numpy(y)[:, None], torch.from_numpy(X))[:, :, 0]  # (n, H, N)
    reference = attention_weights(Q, K, X, y, temperature=math.inf)
    np.testing.assert_array_equal(ours.numpy(), reference)
    assert np.any(reference == 0.5)


def test_hardmax_gradients() -> None:
    """No gradient reaches the scores through hardmax by default; straight-through gives the softmax gradient."""
    scores = torch.tensor([[0.3, 1.2, -0.5]], dtype=f64, requires_grad=True)
    weights = hardmax(scores)
    assert torch.equal(weights, torch.tensor([[0.0, 1.0, 0.0]], dtype=f64))
    assert not weights.requires_grad
    soft = torch.softmax(2.0 * scores, dim=-1)
    st_weights = hardmax(scores, surrogate=soft)
    torch.testing.assert_close(st_weights, weights, rtol=0, atol=0)
    probe = torch.tensor([[1.0, -2.0, 0.5]], dtype=f64)
    (g_st,) = torch.autograd.grad((st_weights * probe).sum(), scores)
    (g_soft,) = torch.autograd.grad((torch.softmax(2.0 * scores, dim=-1) * probe).sum(), scores)
    torch.testing.assert_close(g_st, g_soft, rtol=0, atol=TOL)
    assert g_st.abs().sum() > 0
    module = RankedMultiheadAttention(4, 2, attention="hardmax", dtype=f64)
    x = torch.randn(2, 3, 4, dtype=f64, generator=torch.Generator().manual_seed(0))
    module(x).sum().backward()
    assert module.in_proj_weight.grad is not None
    qk_rows = 2 * module.heads * module.rank  # 8
    assert torch.all(module.in_proj_weight.grad[:qk_rows] == 0)  # q and k rows get no gradient
    assert module.in_proj_weight.grad[qk_rows:].abs().sum() > 0  # value rows do


def test_shapes_and_head_counts() -> None:
    """H = c d / r for any width, independent of d / r; output shapes (B, N_q, d)."""
    for d, r, c in [(16, 1, 4), (16, 16, 8), (16, 4, 1)]:
        module = RankedMultiheadAttention(d, r, width=c)
        assert (module.heads, module.width) == (c * d // r, c)
        assert module(torch.randn(2, 5, d)).shape == (2, 5, d)
        assert module(torch.randn(2, 1, d), torch.randn(2, 5, d)).shape == (2, 1, d)
    full = RankedMultiheadAttention(10, 3, heads=7, value="full")
    assert full.heads == 7
    assert full(torch.randn(2, 4, 10)).shape == (2, 4, 10)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"embed_dim": 8, "rank": 9}, "rank"),
        ({"embed_dim": 8, "rank": 0}, "rank"),
        ({"embed_dim": 8, "rank": 3}, "rank must divide"),
        ({"embed_dim": 8, "rank": 2, "heads": 3}, "heads"),
        ({"embed_dim": 8, "rank": 2, "width": 0}, "width"),
        ({"embed_dim": 8, "rank": 2, "value": "low"}, "value"),
        ({"embed_dim": 8, "rank": 2, "attention": "sparsemax"}, "attention"),
        ({"embed_dim": 8, "rank": 2, "temperature": 0.0}, "temperature"),
        ({"embed_dim": 8, "rank": 2, "temperature": math.inf}, "temperature"),
        ({"embed_dim": 8, "rank": 2, "score_scale": -1.0}, "score_scale"),
    ],
)
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RankedMultiheadAttention(**kwargs)


def test_invalid_inputs() -> None:
    module = RankedMultiheadAttention(8, 2, causal=True)
    with pytest.raises(ValueError, match="x_query"):
        module(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match="causal"):
        module(torch.randn(2, 1, 8), torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="x_context"):
        RankedMultiheadAttention(8, 2)(torch.randn(2, 1, 8), torch.randn(3, 3, 8))
    with pytest.raises(ValueError, match="score_bias"):
        RankedMultiheadAttention(8, 2)(torch.randn(2, 3, 8), score_bias=torch.zeros(4, 2))


@pytest.mark.parametrize("r", [1, 2, 8])
@pytest.mark.parametrize("causal", [False, True])
def test_every_implementation_computes_the_same_map(r: int, causal: bool) -> None:
    """Every implementation of self-attention (groups of whole blocks with an uneven last group, one fused call over
    all heads, plain ops) equals the cross-attention evaluation of x over itself through scaled_dot_product_attention,
    in outputs and in input and parameter gradients."""
    d, c, B, N = 8, 3, 2, 5
    module = RankedMultiheadAttention(d, r, width=c, causal=causal, temperature=1.3, dtype=f64)
    module.reset_parameters(generator=torch.Generator().manual_seed(r))
    with torch.no_grad():
        assert module.in_proj_bias is not None
        module.in_proj_bias.normal_(generator=torch.Generator().manual_seed(1))
    module.block_chunk = 2  # c = 3 blocks: one group of 2 and one of 1
    x = torch.randn(B, N, d, dtype=f64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    module.implementation = "fused"
    reference = module(x, x)  # cross-attention path: scaled_dot_product_attention over all heads at once
    params = [x, module.in_proj_weight, module.out_proj_weight]
    grads_ref = torch.autograd.grad(reference.pow(3).sum(), params)
    for implementation in IMPLEMENTATIONS:
        module.implementation = implementation
        out = module(x)
        torch.testing.assert_close(out, reference, rtol=0, atol=TOL)
        grads = torch.autograd.grad(out.pow(3).sum(), params)
        for g, g_ref in zip(grads, grads_ref, strict=True):
            torch.testing.assert_close(g, g_ref, rtol=0, atol=TOL * 10)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_implementations_agree_on_cross_attention_with_score_bias(implementation: str) -> None:
    """Cross-attention with a score bias (the general path) is the evaluator's map under every implementation."""
    rng = np.random.default_rng(7)
    H, r, d, N, n = 3, 2, 5, 4, 6
    Q, K, V = rng.standard_normal((H, r, d)), rng.standard_normal((H, r, d)), rng.standard_normal((H, d, d))
    bias = rng.standard_normal((H, N))
    module = full_module(Q, K, V, temperature=0.7)
    module.implementation = implementation
    X, y = unit_rows(rng, n, N, d), unit_rows(rng, n, d)
    ours = query_to_context(module, X, y, score_bias=torch.from_numpy(bias))
    reference = multihead_attention(Q, K, V, X, y, temperature=0.7, score_bias=bias)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=TOL * 10)


def test_implementation_is_validated_and_set_model_wide() -> None:
    """An unknown implementation is refused by name; use_implementation reaches every attention layer of a model."""
    with pytest.raises(ValueError, match="implementation"):
        RankedMultiheadAttention(8, 2, implementation="chunked")
    model = torch.nn.Sequential(RankedMultiheadAttention(8, 2), RankedMultiheadAttention(8, 4))
    with pytest.raises(ValueError, match="implementation"):
        model[0].implementation = "chunked"
    use_implementation(model, "plain")
    assert [layer.implementation for layer in model] == ["plain", "plain"]
