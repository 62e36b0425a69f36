"""The ``theory`` kind: the query-to-context theory model (`experiments.models.theory_model`).

Generalized attention, the class Theorem 2 bounds, so its evaluation on Theorem 2's task stands beside a bound that
applies to it. No additive positions (its scratch coordinates are concatenated) and no feed-forward block; the only
kind that starts from a weight file or a construction (``init``). Its runs pack with full value maps on the query
tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from experiments.model_kinds.base import ModelKind, work_sizes


@dataclass(frozen=True)
class TheoryKind(ModelKind):
    """The theory model: one query attends to the context, so its step's work and its packs are its own."""

    def packing_refusal(self, config: Any) -> str | None:
        refusal = super().packing_refusal(config)
        if refusal is None and config.task == "farthest":
            return "the theory model on the farthest task is trained alone"
        return refusal

    def step_work(self, spec: Mapping[str, Any]) -> float:
        """`ModelKind.step_work` of the theory model: B H D (D + N) per layer (its query's scores, mixing and value
        maps)."""
        steps, layers, batch, D, heads = work_sizes(spec)
        return float(steps * layers * batch * heads * D * (D + int(spec.get("N", 1)))) / 1e6


KIND = TheoryKind(
    name="theory",
    label="theory model",
    builder="experiments.models.factory:build_theory",
    feed="context",
    positionals=("none", "concat"),
    positional_note="it has no additive encodings",
    trains_icl=False,
    loads_init=True,
    packed_value="full",
    generalized_attention=True,
    feed_forward=False,
    example={
        "model": "theory",
        "value": "full",
        "task": "nearest",
        "keys": "iid",
        "d": 4,
        "N": 3,
        "rank": 2,
        "steps": 5,
        "batch_size": 4,
    },
)
