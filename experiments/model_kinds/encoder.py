"""The ``encoder`` kind: the paper's encoder (`experiments.models.encoder`).

Post-norm TransformerEncoder layers with L2 norms, H = c D / r heads of rank r per layer, any positional encoding,
layers drawn apart or as copies. Its runs pack with standard value maps, each run with its own rank (H r = c D
whatever r is, so the parameters stack), except on the causal icl task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.model_kinds.base import LAYER_INITS, POSITIONALS, ModelKind


@dataclass(frozen=True)
class EncoderKind(ModelKind):
    """The encoder: a `ModelKind` whose causal runs (icl) are trained alone."""

    def packing_refusal(self, config: Any) -> str | None:
        refusal = super().packing_refusal(config)
        if refusal is None and config.task == "icl":
            return "the causal encoder (icl) is trained alone"
        return refusal


KIND = EncoderKind(
    name="encoder",
    label="encoder",
    builder="experiments.models.factory:build_encoder",
    feed="sequence",
    icl_head=True,
    positionals=POSITIONALS,
    layer_inits=LAYER_INITS,
    trains_icl=True,
    loads_init=False,
    packed_value="standard",
    pack_varies=("rank",),
    generalized_attention=False,
    example={"d": 4, "N": 3, "rank": 2, "ffn_dim": 8, "steps": 5, "batch_size": 4},
)
