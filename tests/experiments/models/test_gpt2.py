"""Tests of the GPT-2-style backbone (experiments/models/gpt2.py): shapes, causality, head layout, bad input."""

from __future__ import annotations

import pytest
import torch

from experiments.models.gpt2 import GPT2Backbone
from experiments.models.spec import AttentionSpec


def _model(causal: bool = True, rank: int = 4) -> GPT2Backbone:
    torch.manual_seed(0)
    return GPT2Backbone(
        d_in=5,
        d_out=1,
        embed_dim=16,
        attention=AttentionSpec(rank, causal=causal),
        layers=2,
        ffn_dim=32,
        max_length=12,
    )


def test_output_shape_and_head_count() -> None:
    model = _model(rank=4)
    out = model(torch.randn(3, 12, 5))
    assert out.shape == (3, 12, 1)
    assert all(block.attn.heads == 16 // 4 for block in model.blocks)


def test_causal_outputs_ignore_later_tokens() -> None:
    """Changing token t changes no output before t (causal); the non-causal model does see it (negative control)."""
    tokens = torch.randn(2, 12, 5)
    changed = tokens.clone()
    changed[:, 7] += 1.0
    causal = _model(causal=True)
    assert torch.equal(causal(tokens)[:, :7], causal(changed)[:, :7])
    assert not torch.allclose(causal(tokens)[:, 7:], causal(changed)[:, 7:])
    bidirectional = _model(causal=False)
    assert not torch.allclose(bidirectional(tokens)[:, :7], bidirectional(changed)[:, :7])


def test_positions_make_the_model_order_aware() -> None:
    """Learned positions: permuting the context changes the outputs even without a mask."""
    model = _model(causal=False)
    tokens = torch.randn(1, 12, 5)
    permuted = tokens[:, torch.randperm(12, generator=torch.Generator().manual_seed(1))]
    assert not torch.allclose(model(tokens).sort(dim=1).values, model(permuted).sort(dim=1).values)


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (torch.randn(2, 12, 4), "tokens must have shape"),
        (torch.randn(2, 13, 5), "sequence length must be <= max_length = 12"),
    ],
)
def test_bad_input_is_named(tokens: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _model()(tokens)
