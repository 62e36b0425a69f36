"""AttentionSpec: validation, the theory's convention, and layers identical to RankedMultiheadAttention's."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.models.attention import RankedMultiheadAttention
from experiments.models.spec import AttentionSpec


def test_build_equals_the_layer_built_directly() -> None:
    """Same arguments and same seed: the same parameters, bit for bit, and the same settings."""
    spec = AttentionSpec(2, width=3, causal=True, temperature=1.5, implementation="plain")
    torch.manual_seed(0)
    built = spec.build(8, dtype=torch.float64)
    torch.manual_seed(0)
    direct = RankedMultiheadAttention(
        8, 2, width=3, causal=True, temperature=1.5, implementation="plain", dtype=torch.float64
    )
    assert built.extra_repr() == direct.extra_repr()
    for (name, a), (_, b) in zip(built.named_parameters(), direct.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    assert spec.build(8, heads=8).heads == 8  # a per-layer head count overrides width


def test_theory_convention() -> None:
    """temperature = inf is hardmax (the surrogate temperature goes to the layer); no biases; unscaled scores."""
    hard = AttentionSpec.theory(2, math.inf, surrogate_temperature=3.0, hardmax_gradient="straight-through")
    assert (hard.attention, hard.temperature, hard.score_temperature) == ("hardmax", 3.0, math.inf)
    soft = AttentionSpec.theory(2, 4.0)
    assert (soft.attention, soft.temperature, soft.score_temperature, soft.bias) == ("softmax", 4.0, 4.0, False)
    assert soft.value == "full" and soft.score_scale == 1.0


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"value": "low"}, "value"),
        ({"attention": "sparsemax"}, "attention"),
        ({"hardmax_gradient": "sometimes"}, "hardmax_gradient"),
        ({"implementation": "chunked"}, "implementation"),
    ],
)
def test_invalid_choices_are_refused_by_name(fields: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AttentionSpec(2, **fields)
