"""Tests of experiments/models/reference_layout.py: the reference encoder's state dict read into our PaperEncoder.

The independent side is `reference_checkpoints`: state dicts assembled from stock torch modules under the published
key layout and the reference forward written from its description with stock nn.MultiheadAttention. Our encoder
holding the translated weights must compute the same map in float64 to 1e-10 (the two sum the same products in a
different order: rounding differences stay at a few ulps of the O(1) outputs); a wrong head count must not.
"""

from __future__ import annotations

import pytest
import torch

from experiments.config import TrainConfig
from experiments.models.encoder import PaperEncoder
from experiments.models.reference_layout import (
    encoder_state_from_reference,
    read_reference_layout,
    reference_config,
    reference_state_from_encoder,
)
from experiments.models.spec import AttentionSpec
from experiments.tasks import make_task
from experiments.training.run import build_run
from tests.experiments.models.reference_checkpoints import random_reference_state, reference_forward

TOLERANCE = 1e-10
"""float64: the two forwards differ only in summation order, a few ulps (2.2e-16) of O(1) outputs per layer."""

CASES = {
    "one block, no positions": dict(d=4, num_heads=2, width=1, layers=1, task="farthest", N=5),
    "widened, concatenated codes, two layers": dict(
        d=4, num_heads=3, width=2, layers=2, positional_dim=2, max_length=4, task="nearest", N=3
    ),
    "additive table, no biases": dict(
        d=5, num_heads=1, width=1, layers=2, additive=True, max_length=6, bias=False, task="farthest", N=6
    ),
    "rank one heads, three blocks": dict(d=3, num_heads=3, width=3, layers=1, task="nearest", N=2),
}


def _imported_encoder(
    state: dict[str, torch.Tensor], num_heads: int, task: str, N: int
) -> tuple[TrainConfig, torch.nn.Module]:
    layout = read_reference_layout(state)
    config = reference_config(layout, num_heads, task, N)
    _, model = build_run(config, torch.device("cpu"))
    length = make_task(config.task, config.d, config.N, config.keys).sequence_length
    model.network.double().load_state_dict(encoder_state_from_reference(layout, length))
    return config, model.network.eval()


@pytest.mark.parametrize("case", list(CASES))
def test_the_imported_encoder_computes_the_reference_forward(case: str) -> None:
    spec = dict(CASES[case])
    task, N = spec.pop("task"), spec.pop("N")
    state = random_reference_state(**spec, seed=len(case))
    config, network = _imported_encoder(state, spec["num_heads"], task, N)
    T = make_task(task, config.d, N, config.keys).sequence_length
    X = torch.randn(7, config.d, T, generator=torch.Generator().manual_seed(1), dtype=torch.float64)  # (B, d, T)
    with torch.no_grad():
        expected = reference_forward(state, X, spec["num_heads"])  # (B, d, T)
        ours = network(X.permute(0, 2, 1)).permute(0, 2, 1)  # (B, d, T)
    gap = float((ours - expected).abs().max())
    print(f"{case}: max |ours - reference| = {gap:.3g} (tolerance {TOLERANCE:g}, outputs of norm ~1)")
    assert gap < TOLERANCE, f"{case}: imported encoder differs from the reference forward by {gap:.3g}"
    assert config.heads == spec["num_heads"] * spec.get("width", 1)
    assert config.positional == (
        "concat" if spec.get("positional_dim") else "additive" if spec.get("additive") else "none"
    )


def test_a_wrong_head_count_is_caught_by_the_same_comparison() -> None:
    """Negative control: the weights do not record num_heads; reading 4 heads as 1 must change the outputs."""
    state = random_reference_state(d=4, num_heads=4, width=1, layers=1, seed=3)
    _, network = _imported_encoder(state, 1, "farthest", 5)
    X = torch.randn(5, 4, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        gap = float((network(X.permute(0, 2, 1)).permute(0, 2, 1) - reference_forward(state, X, 4)).abs().max())
    assert gap > 1e3 * TOLERANCE, gap


def test_shapes_are_inferred_and_the_prefix_found() -> None:
    state = random_reference_state(
        d=4, num_heads=3, width=2, layers=3, ffn_dim=5, positional_dim=2, max_length=7, prefix="model."
    )
    layout = read_reference_layout(state)
    assert (layout.prefix, layout.layers, layout.width, layout.embed_dim, layout.d) == ("model.", 3, 2, 6, 4)
    assert (layout.positional_dim, layout.ffn_dim, layout.bias, layout.max_length) == (2, 5, True, 7)
    config = reference_config(layout, 3, "nearest")  # N from the table: 7 positions = 6 keys + the query
    assert (config.N, config.rank, config.width, config.heads) == (6, 2, 2, 6)
    assert reference_config(layout, 3, "farthest").N == 7


def test_our_encoder_round_trips_through_the_reference_layout() -> None:
    torch.manual_seed(0)
    encoder = PaperEncoder(4, AttentionSpec(2, width=2), layers=2, ffn_dim=6, positional="additive", max_length=5)
    state = reference_state_from_encoder(encoder, prefix="model.")
    layout = read_reference_layout(state)
    back = encoder_state_from_reference(layout, 5)
    ours = encoder.state_dict()
    assert set(back) == set(ours)
    assert all(torch.equal(back[k], ours[k].double()) for k in ours)
    X = torch.randn(3, 4, 5, dtype=torch.float64)
    with torch.no_grad():
        gap = (
            (encoder.double()(X.permute(0, 2, 1)).permute(0, 2, 1) - reference_forward(state, X, 2, "model."))
            .abs()
            .max()
        )
    assert float(gap) < TOLERANCE


def test_a_learned_readout_cannot_be_written_in_the_reference_layout() -> None:
    encoder = PaperEncoder(3, AttentionSpec(1), positional="concat", positional_dim=2, max_length=4)
    reference_state_from_encoder(encoder)  # [I | 0] at initialisation: writable
    with torch.no_grad():
        encoder.readout.weight[0, 4] = 0.5  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="readout"):
        reference_state_from_encoder(encoder)


def _damaged(edit: str) -> dict[str, torch.Tensor]:
    state = random_reference_state(d=4, num_heads=2, width=2, layers=2, positional_dim=2, max_length=4)
    key = "encoder.layers.1.widened_self_attn.1.in_proj_weight"
    if edit == "missing":
        del state[key]
    elif edit == "extra":
        state["encoder.layers.0.dropout.weight"] = torch.zeros(1)
    elif edit == "layernorm":
        state["encoder.layers.0.norm1.weight"] = torch.ones(6)
    elif edit == "shape":
        state[key] = state[key][:, :3]
    elif edit == "bias-missing":
        del state["encoder.layers.1.linear2.bias"]
    elif edit == "layer-gap":
        state = {k.replace("layers.1.", "layers.2."): v for k, v in state.items()}
    elif edit == "block-gap":
        state = {k.replace("widened_self_attn.1.", "widened_self_attn.2."): v for k, v in state.items()}
    elif edit == "prefixes":
        state = {("a." if "layers.0" in k else "b.") + k: v for k, v in state.items()}
    elif edit == "no-table":
        del state["positional_encodings"]
    elif edit == "both-tables":
        state["additive_positional"] = torch.zeros(4, 4)
    elif edit == "ffn-width":
        state["encoder.layers.1.linear1.weight"] = torch.zeros(9, 6)
    return state


@pytest.mark.parametrize(
    "edit, named",
    [
        ("missing", "encoder.layers.1.widened_self_attn.1.in_proj_weight"),
        ("extra", "encoder.layers.0.dropout.weight"),
        ("layernorm", "LayerNorm"),
        ("shape", "encoder.layers.1.widened_self_attn.1.in_proj_weight"),
        ("bias-missing", "encoder.layers.1.linear2.bias"),
        ("layer-gap", "layers skip 1"),
        ("block-gap", "widened_self_attn.1.in_proj_weight"),
        ("prefixes", "several prefixes"),
        ("no-table", "positional_encodings"),
        ("both-tables", "additive_positional"),
        ("ffn-width", "encoder.layers.1.linear1.weight"),
    ],
)
def test_every_inconsistency_is_one_line_naming_the_key(edit: str, named: str) -> None:
    with pytest.raises(ValueError) as caught:
        read_reference_layout(_damaged(edit), source="ckpt")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("ckpt: ") and named in message, message


def test_config_refusals_name_the_argument() -> None:
    layout = read_reference_layout(random_reference_state(d=4, num_heads=2, positional_dim=2, max_length=3))
    with pytest.raises(ValueError, match="num_heads must divide"):
        reference_config(layout, 4, "farthest")
    with pytest.raises(ValueError, match="N must be <= 2: task nearest feeds 4 tokens"):
        reference_config(layout, 2, "nearest", N=3)
    with pytest.raises(ValueError, match="icl"):
        reference_config(layout, 2, "icl", N=2)
    bare = read_reference_layout(random_reference_state(d=4, num_heads=2))
    with pytest.raises(ValueError, match="N must be given"):
        reference_config(bare, 2, "farthest")
    with pytest.raises(TypeError, match="state_dict"):
        read_reference_layout({"x": 1.0})  # type: ignore[dict-item]
