"""The ``gpt2`` kind: a GPT-2-style causal backbone (`experiments.models.gpt2`) of residual width ``embed_dim``, with
learned absolute positions; its runs are trained alone."""

from __future__ import annotations

from experiments.model_kinds.base import ModelKind

KIND = ModelKind(
    name="gpt2",
    label="GPT-2 backbone",
    builder="experiments.models.factory:build_gpt2",
    feed="sequence",
    positionals=("additive",),
    positional_note="learned absolute positions",
    trains_icl=True,
    loads_init=False,
    sized_by_embed_dim=True,
    packed_value=None,
    generalized_attention=False,
    example={
        "model": "gpt2",
        "task": "icl",
        "embed_dim": 8,
        "positional": "additive",
        "d": 4,
        "N": 3,
        "rank": 8,
        "ffn_dim": 8,
        "steps": 5,
        "batch_size": 4,
    },
)
