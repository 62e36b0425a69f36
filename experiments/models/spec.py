"""`AttentionSpec`: how every attention layer of a model is built, in one value the model constructors pass along.

The encoder, its layers, the GPT-2 backbone and the theory model all build `RankedMultiheadAttention` layers that
differ only in their width (and, for the theory model, the head count of each layer); everything else about those
layers is one frozen `AttentionSpec`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from experiments.model_kinds import ATTENTIONS, VALUE_MAPS
from experiments.models.attention import HARDMAX_GRADIENTS, IMPLEMENTATIONS, RankedMultiheadAttention
from theory.validation import check_choice, check_real, check_temperature


@dataclass(frozen=True)
class AttentionSpec:
    """The arguments of `RankedMultiheadAttention` shared by all attention layers of a model (all but the width).

    Attributes:
        rank: query/key rank r of every head.
        width: c, averaged standard blocks per layer (H = c D / r); ignored when ``heads`` is given.
        heads: explicit head count per layer (overrides width).
        value: "standard" (rank-r value/output maps, blocks averaged) or "full" (V_h in R^{D x D}, heads summed).
        attention: "softmax" or "hardmax".
        temperature: inverse temperature on the scores (for hardmax, the straight-through surrogate's).
        bias: learned biases on the projections (the encoder layer's feed-forward block follows it too).
        causal: mask keys after the query position.
        score_scale: factor on <q, k> inside the temperature; None means 1 / sqrt(r).
        hardmax_gradient: "none" or "straight-through".
        implementation: how softmax attention is computed (`attention.IMPLEMENTATIONS`; same map).
    """

    rank: int
    width: int = 1
    heads: int | None = None
    value: str = "standard"
    attention: str = "softmax"
    temperature: float = 1.0
    bias: bool = True
    causal: bool = False
    score_scale: float | None = None
    hardmax_gradient: str = "none"
    implementation: str = "blockwise"

    def __post_init__(self) -> None:
        check_choice("value", self.value, VALUE_MAPS)
        check_choice("attention", self.attention, ATTENTIONS)
        check_choice("hardmax_gradient", self.hardmax_gradient, HARDMAX_GRADIENTS)
        check_choice("implementation", self.implementation, IMPLEMENTATIONS)

    @classmethod
    def theory(
        cls,
        rank: int,
        temperature: float = math.inf,
        *,
        value: str = "full",
        score_scale: float = 1.0,
        hardmax_gradient: str = "none",
        surrogate_temperature: float = 1.0,
    ) -> AttentionSpec:
        """The theory's convention: no biases, unscaled scores, temperature = inf for hardmax.

        Args:
            rank: query/key rank r.
            temperature: inverse temperature > 0 of softmax; math.inf is hardmax.
            value: "full" (the theory's V_h) or "standard".
            score_scale: factor on <Q s_q, K s_i> (1.0: the theory's scores).
            hardmax_gradient: "none" or "straight-through" (hardmax only).
            surrogate_temperature: softmax temperature of the straight-through gradient (hardmax only).
        """
        temperature = check_temperature(temperature)
        surrogate = check_real("surrogate_temperature", surrogate_temperature, minimum=0.0, strict_minimum=True)
        hardmax = math.isinf(temperature)
        return cls(
            rank,
            value=value,
            attention="hardmax" if hardmax else "softmax",
            temperature=surrogate if hardmax else temperature,
            bias=False,
            score_scale=score_scale,
            hardmax_gradient=hardmax_gradient,
        )

    @property
    def score_temperature(self) -> float:
        """The temperature in the theory's convention: math.inf for hardmax, else ``temperature``."""
        return math.inf if self.attention == "hardmax" else self.temperature

    def build(
        self,
        embed_dim: int,
        *,
        heads: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> RankedMultiheadAttention:
        """A freshly initialised attention layer of width ``embed_dim`` (``heads`` overrides the spec's head count)."""
        return RankedMultiheadAttention(
            embed_dim,
            self.rank,
            width=self.width,
            heads=self.heads if heads is None else heads,
            value=self.value,
            attention=self.attention,
            temperature=self.temperature,
            bias=self.bias,
            causal=self.causal,
            score_scale=self.score_scale,
            hardmax_gradient=self.hardmax_gradient,
            implementation=self.implementation,
            device=device,
            dtype=dtype,
        )
