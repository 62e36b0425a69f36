"""The paper's encoder against stock torch.nn.TransformerEncoderLayer / TransformerEncoder (norms swapped for L2Norm).

float64 throughout; outputs are unit-scale, so the absolute tolerance 1e-12 is a few thousand float64 epsilons, the
rounding of the FFN's sums over ffn_dim products.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from experiments.models.attention import RankedMultiheadAttention
from experiments.models.encoder import L2Norm, PaperEncoder, PaperEncoderLayer
from experiments.models.spec import AttentionSpec

TOL = 1e-12
f64 = torch.float64


def torch_layer(d: int, r: int, ffn_dim: int, seed: int) -> nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer (post-norm, ReLU, dropout 0, batch_first) with its LayerNorms replaced by L2Norm
    (scales set away from 1) and random non-zero biases."""
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(
        d,
        d // r,
        dim_feedforward=ffn_dim,
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=False,
        dtype=f64,
    )
    layer.norm1 = L2Norm(init_scale=1.3, dtype=f64)  # type: ignore[assignment]
    layer.norm2 = L2Norm(init_scale=0.8, dtype=f64)  # type: ignore[assignment]
    with torch.no_grad():
        layer.self_attn.in_proj_bias.normal_()
        layer.self_attn.out_proj.bias.normal_()
    return layer.train()  # train mode (dropout is 0) keeps torch off its fused inference path, which needs LayerNorm


def inputs(B: int, N: int, d: int, seed: int = 0) -> torch.Tensor:
    x = torch.randn(B, N, d, dtype=f64, generator=torch.Generator().manual_seed(seed))
    return (x / x.norm(dim=-1, keepdim=True)).requires_grad_()


@pytest.mark.parametrize("r", [16, 4, 1])
def test_layer_equals_torch_encoder_layer(r: int) -> None:
    """With H r = d, c = 1: outputs and input gradients equal nn.TransformerEncoderLayer's."""
    d = 16
    reference = torch_layer(d, r, ffn_dim=40, seed=r)
    ours = PaperEncoderLayer(d, AttentionSpec(r), ffn_dim=40, dtype=f64)
    ours.load_torch_layer(reference)
    x = inputs(3, 6, d)
    out_ref, out = reference(x), ours(x)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=TOL)
    (g_ref,) = torch.autograd.grad(out_ref.pow(3).sum(), x)
    (g,) = torch.autograd.grad(out.pow(3).sum(), x)
    torch.testing.assert_close(g, g_ref, rtol=0, atol=TOL * 10)


def test_encoder_equals_torch_encoder() -> None:
    """L = 3 layers equal nn.TransformerEncoder built from the same (L2-normed) layers."""
    d, r, L = 8, 2, 3
    layers = [torch_layer(d, r, ffn_dim=24, seed=10 + i) for i in range(L)]
    reference = nn.TransformerEncoder(layers[0], num_layers=L, enable_nested_tensor=False)
    reference.layers = nn.ModuleList(layers)
    ours = PaperEncoder(d, AttentionSpec(r), layers=L, ffn_dim=24, dtype=f64)
    for mine, theirs in zip(ours.layers, layers, strict=True):
        mine.load_torch_layer(theirs)
    x = inputs(4, 5, d, seed=1)
    torch.testing.assert_close(ours(x), reference.train()(x), rtol=0, atol=TOL)


def test_copied_layers_start_as_torchs_transformer_encoder_starts_them() -> None:
    """layer_init = "copies": nn.TransformerEncoder(layer, L) deep-copies its one layer, so its L layers start equal
    and apart in storage; ours do the same, so the model is its first layer applied L times."""
    d, r, L = 8, 2, 3
    stock = nn.TransformerEncoder(torch_layer(d, r, ffn_dim=24, seed=3), num_layers=L, enable_nested_tensor=False)
    torch.manual_seed(4)
    ours = PaperEncoder(d, AttentionSpec(r), layers=L, ffn_dim=24, dtype=f64, layer_init="copies")
    torch.manual_seed(4)
    independent = PaperEncoder(d, AttentionSpec(r), layers=L, ffn_dim=24, dtype=f64)
    for model in (stock, ours):
        first = model.layers[0].state_dict()
        for layer in model.layers[1:]:
            for name, value in layer.state_dict().items():
                assert torch.equal(value, first[name]), name
                assert value.data_ptr() != first[name].data_ptr(), name  # copies, not shared tensors
    # Our first layer is the one an independent model draws first (the same RNG draws); its later layers differ.
    first_ours, first_independent = ours.layers[0].state_dict(), independent.layers[0].state_dict()
    assert all(torch.equal(first_ours[k], first_independent[k]) for k in first_ours)
    assert not torch.equal(independent.layers[1].linear1.weight, independent.layers[0].linear1.weight)
    x = inputs(4, 5, d, seed=1)
    layer = ours.layers[0]
    torch.testing.assert_close(ours(x), layer(layer(layer(x))), rtol=0, atol=TOL)
    # Copies train apart: a step on one layer's weight leaves the others where they were.
    with torch.no_grad():
        ours.layers[1].linear1.weight.add_(1.0)
    assert torch.equal(ours.layers[0].linear1.weight, ours.layers[2].linear1.weight)


def test_wide_layer_equals_averaged_torch_blocks() -> None:
    """c = 3 blocks: the layer equals norm2(h + FFN(h)), h = norm1(x + mean of c nn.MultiheadAttention blocks)."""
    d, r, c = 8, 2, 3
    torch.manual_seed(3)
    blocks = [nn.MultiheadAttention(d, d // r, batch_first=True, dtype=f64) for _ in range(c)]
    ours = PaperEncoderLayer(d, AttentionSpec(r, width=c), ffn_dim=12, dtype=f64)
    ours.self_attn.load_torch_blocks(blocks)
    x = inputs(2, 7, d, seed=2)
    h = x + sum(b(x, x, x, need_weights=False)[0] for b in blocks) / c
    h = h / h.norm(dim=-1, keepdim=True)
    out = h + ours.linear2(torch.relu(ours.linear1(h)))
    out = out / out.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(ours(x), out, rtol=0, atol=TOL)


def test_l2norm() -> None:
    """Rows come out with norm |scale| in the input's direction; the scale is learned (gets a gradient)."""
    norm = L2Norm(init_scale=2.5, dtype=f64)
    x = torch.randn(5, 7, dtype=f64, generator=torch.Generator().manual_seed(0))
    y = norm(x)
    torch.testing.assert_close(y.norm(dim=-1), torch.full((5,), 2.5, dtype=f64), rtol=0, atol=TOL)
    torch.testing.assert_close(y * x.norm(dim=-1, keepdim=True) / 2.5, x, rtol=0, atol=TOL * 10)
    y.sum().backward()
    assert norm.scale.grad is not None and norm.scale.grad.abs() > 0


def test_additive_positions() -> None:
    """Additive encodings = the same layers applied to x + P[:N]."""
    d, r, N = 8, 4, 5
    ours = PaperEncoder(d, AttentionSpec(r), layers=2, ffn_dim=16, positional="additive", max_length=9, dtype=f64)
    plain = PaperEncoder(d, AttentionSpec(r), layers=2, ffn_dim=16, dtype=f64)
    plain.load_state_dict({k: v for k, v in ours.state_dict().items() if k != "position_table"})
    x = inputs(3, N, d)
    assert ours.position_table is not None
    torch.testing.assert_close(ours(x), plain(x + ours.position_table[:N]), rtol=0, atol=0)


@pytest.mark.parametrize("readout", ["linear", "first"])
def test_concatenated_positions(readout: str) -> None:
    """Concatenated encodings: layers of width d + p run on [x, P[:N]]; linear readout starts as the first d
    coordinates and stays a learned (d, d + p) map."""
    d, p, r, N = 6, 2, 4, 5
    ours = PaperEncoder(
        d, AttentionSpec(r), layers=2, ffn_dim=16, positional="concat", positional_dim=p, max_length=N, readout=readout
    )
    ours = ours.to(f64)
    assert ours.embed_dim == d + p and ours.layers[0].self_attn.embed_dim == d + p
    x = inputs(2, N, d)
    assert ours.position_table is not None
    stream = torch.cat([x, ours.position_table.unsqueeze(0).expand(2, N, p)], dim=-1)  # (B, N, d + p)
    for layer in ours.layers:
        stream = layer(stream)
    out = ours(x)
    assert out.shape == (2, N, d)
    torch.testing.assert_close(out, stream[..., :d], rtol=0, atol=0)
    if readout == "linear":
        assert ours.readout is not None
        out.sum().backward()
        assert ours.readout.weight.grad is not None and ours.readout.weight.grad.abs().sum() > 0


def test_causal_encoder_sees_only_the_prefix() -> None:
    """With causal=True, changing tokens after position j leaves outputs up to j unchanged (and changes later ones)."""
    d, r = 8, 2
    model = PaperEncoder(d, AttentionSpec(r, causal=True), layers=2, ffn_dim=16, dtype=f64)
    x = inputs(2, 6, d).detach()
    x2 = x.clone()
    x2[:, 4:] = -x2[:, 4:]
    with torch.no_grad():
        a, b = model(x), model(x2)
    torch.testing.assert_close(a[:, :4], b[:, :4], rtol=0, atol=TOL)
    assert (a[:, 4:] - b[:, 4:]).abs().max() > 1e-3


def test_value_full_and_hardmax_encoder_runs() -> None:
    """Other attention options build and keep the shapes; the attention module is the ranked one."""
    model = PaperEncoder(8, AttentionSpec(2, width=2, value="full", attention="hardmax"), layers=2, ffn_dim=8)
    assert isinstance(model.layers[0].self_attn, RankedMultiheadAttention)
    assert model.layers[0].self_attn.heads == 8
    assert model(torch.randn(3, 4, 8)).shape == (3, 4, 8)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d": 8, "rank": 3}, "rank must divide"),
        ({"d": 8, "rank": 9}, "rank"),
        ({"d": 8, "rank": 2, "layers": 0}, "layers"),
        ({"d": 8, "rank": 2, "ffn_dim": 0}, "ffn_dim"),
        ({"d": 8, "rank": 2, "positional": "rotary"}, "positional"),
        ({"d": 8, "rank": 2, "positional": "additive"}, "max_length"),
        ({"d": 8, "rank": 2, "positional": "concat", "max_length": 4}, "positional_dim"),
        ({"d": 8, "rank": 2, "positional_dim": 3}, "positional_dim"),
        ({"d": 6, "rank": 3, "positional": "concat", "positional_dim": 2, "max_length": 4}, "rank must divide"),
        ({"d": 8, "rank": 2, "readout": "mean"}, "readout"),
    ],
)
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    rank = kwargs.pop("rank")
    with pytest.raises(ValueError, match=match):
        PaperEncoder(attention=AttentionSpec(rank), **kwargs)


def test_too_long_input_is_refused() -> None:
    model = PaperEncoder(8, AttentionSpec(2), ffn_dim=8, positional="additive", max_length=4)
    with pytest.raises(ValueError, match="max_length"):
        model(torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match="x must have shape"):
        model(torch.randn(1, 3, 7))
