"""The query-to-context theory transformer in torch: theory/multilayer.py's semantics, trainable and batched.

docs/paper.md sections 1 and 5. Streams of width D = d + p: context token i starts as [x_i, context_codes[i]], the query
as [y, query_code]. Layer l (H_l heads of rank r, `RankedMultiheadAttention` with value maps V_h (D, D) by default)
updates, with every stream taken from the start of the layer,

    s_q <- s_q + sum_h sum_i w[h, i] V_h s_i,   w[h, :] = softmax_i(temperature * score_scale * <Q_h s_q, K_h s_i>)

(hardmax for temperature = inf), keys and values being the N context streams only. With update = "all" each
context stream s_j is updated the same way as a query over the context (itself included). The output is
readout @ s_q (readout (d, D), initialised to [I_d | 0]).

``residual=False`` drops the "s_q +" (only meaningful for one layer): with L = 1, p = 0 and readout = I_d the model
is then exactly theory.attention.multihead_attention, including an optional per-head, per-position ``score_bias``
(H, N) (the single-layer weight-file layout); `TheoryModel.single_layer` builds that special case.

Hardmax (temperature = inf): forward is the one-hot argmax with exact ties split evenly; by default no gradient
flows through the weights (their derivative is 0 almost everywhere), so training moves only V and the readout;
``hardmax_gradient="straight-through"`` instead back-propagates through softmax at ``surrogate_temperature``.

A pack of K theory models (`experiments.models.run_axis.stack_models`; softmax, the query-only update) is the same
module with a leading run axis on every parameter and input: X (K, B, N, d), y (K, B, d).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from experiments.models.attention import RankedMultiheadAttention
from experiments.models.run_axis import linear
from experiments.models.spec import AttentionSpec
from theory.validation import check_choice, check_int

UPDATE_MODES = ("query", "all")


class TheoryModel(nn.Module):
    """Multi-layer query-to-context theory transformer (semantics in the module docstring).

    Args:
        d: token dimension (>= 1).
        attention: every layer's attention (`AttentionSpec.theory` builds the theory's convention: full value maps,
            no biases, unscaled scores, hardmax for temperature = inf); rank r must satisfy 1 <= r <= D.
        heads: head count of every layer, or one count per layer (overrides the spec's).
        layers: number of layers L (>= 1); must equal len(heads) when heads is a sequence.
        positional_dim: p >= 0 scratch/positional coordinates (then ``context_length`` is required).
        context_length: N, needed for p > 0 (one code row per position) and for ``score_bias``; inputs must then
            have exactly N context tokens.
        update: "query" or "all" (which streams each layer updates).
        residual: add the attention update to the stream (False only with one layer: plain multi-head attention).
        score_bias: learn a per-head, per-position additive score term (H, N) (one layer only).
        device, dtype: factory arguments.
    """

    def __init__(
        self,
        d: int,
        attention: AttentionSpec,
        heads: int | Sequence[int],
        layers: int = 1,
        positional_dim: int = 0,
        context_length: int | None = None,
        update: str = "query",
        residual: bool = True,
        score_bias: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        self.num_layers = check_int("layers", layers, minimum=1)
        if isinstance(heads, Sequence):
            head_counts = [check_int(f"heads[{i}]", h, minimum=1) for i, h in enumerate(heads)]
            if len(head_counts) != self.num_layers:
                raise ValueError(f"heads must list one count per layer (layers = {self.num_layers}), got {len(heads)}")
        else:
            head_counts = [check_int("heads", heads, minimum=1)] * self.num_layers
        self.p = check_int("positional_dim", positional_dim, minimum=0)
        self.embed_dim = self.d + self.p  # D: the residual stream (``width`` is c, the heads multiplier, elsewhere)
        self.context_length = None if context_length is None else check_int("context_length", context_length, minimum=1)
        if (self.p > 0 or score_bias) and self.context_length is None:
            raise ValueError("context_length must be an integer >= 1 when positional_dim > 0 or score_bias is set")
        self.temperature = attention.score_temperature  # math.inf for hardmax (the weight files' convention)
        self.update = check_choice("update", update, UPDATE_MODES)
        self.residual = bool(residual)
        if not self.residual and self.num_layers != 1:
            raise ValueError(f"residual=False needs layers = 1 (plain multi-head attention), got {self.num_layers}")
        if score_bias and (self.num_layers != 1 or self.update != "query"):
            raise ValueError(
                f"score_bias needs layers = 1 and update = 'query' (the single-layer layout), got layers = "
                f"{self.num_layers}, update = {self.update!r}"
            )
        self.attention_layers = nn.ModuleList(
            attention.build(self.embed_dim, heads=h, device=device, dtype=dtype) for h in head_counts
        )
        self.rank = self.attention_layers[0].rank
        self.layer_heads = head_counts
        n_codes = 0 if self.context_length is None else self.context_length  # (N, p) as in the weight files
        self.context_codes = nn.Parameter(torch.zeros(n_codes, self.p, device=device, dtype=dtype))  # (N, p)
        self.query_code = nn.Parameter(torch.zeros(self.p, device=device, dtype=dtype))  # (p,)
        self.readout = nn.Parameter(torch.zeros(self.d, self.embed_dim, device=device, dtype=dtype))  # (d, D)
        self.score_bias: nn.Parameter | None = None
        if score_bias:
            assert self.context_length is not None
            self.score_bias = nn.Parameter(torch.zeros(head_counts[0], self.context_length, device=device, dtype=dtype))
        self.reset_parameters()

    @classmethod
    def single_layer(
        cls,
        d: int,
        attention: AttentionSpec,
        heads: int,
        context_length: int | None = None,
        score_bias: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> TheoryModel:
        """Plain H-head attention f(X, y) = sum_h sum_i w[h, i] V_h x_i (theory.attention.multihead_attention)."""
        return cls(
            d,
            attention,
            heads,
            layers=1,
            positional_dim=0,
            context_length=context_length,
            residual=False,
            score_bias=score_bias,
            device=device,
            dtype=dtype,
        )

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Attention layers as in `RankedMultiheadAttention`; codes ~ N(0, 1/p); readout [I_d | 0]; score bias 0."""
        for layer in self.attention_layers:
            assert isinstance(layer, RankedMultiheadAttention)
            layer.reset_parameters(generator=generator)
        if self.p > 0:
            self.context_codes.normal_(0.0, 1.0 / math.sqrt(self.p), generator=generator)
            self.query_code.normal_(0.0, 1.0 / math.sqrt(self.p), generator=generator)
        self.readout.zero_()
        self.readout[:, : self.d].copy_(torch.eye(self.d))
        if self.score_bias is not None:
            self.score_bias.zero_()

    runs: int | None = None
    """K for a pack of K theory models (inputs (K, B, N, d) and (K, B, d)), None for a single run's."""

    def streams(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Final residual streams.

        Args:
            X: (B, N, d) contexts; a pack's (K, B, N, d).
            y: (B, d) queries; a pack's (K, B, d).

        Returns:
            (query streams (B, D), context streams (B, N, D)); a pack's with the leading K.
        """
        lead = () if self.runs is None else (self.runs,)
        form = "".join(f"{k}, " for k in lead)
        if X.dim() != len(lead) + 3 or X.shape[: len(lead)] != lead or X.shape[-1] != self.d or X.shape[-2] < 1:
            raise ValueError(f"X must have shape ({form}B, N, {self.d}) with N >= 1, got {tuple(X.shape)}")
        B, N, _ = X.shape[-3:]
        if self.context_length is not None and N != self.context_length:
            raise ValueError(f"X must have N = context_length = {self.context_length} tokens, got {N}")
        if y.shape != (*lead, B, self.d):
            raise ValueError(f"y must have shape ({form}{B}, {self.d}) to match X, got {tuple(y.shape)}")
        context, query = X, y.unsqueeze(-2)  # (B, N, d), (B, 1, d)
        if self.p > 0:
            codes = self.context_codes.unsqueeze(-3).expand(*X.shape[:-1], self.p)  # (B, N, p)
            context = torch.cat([X, codes], dim=-1)  # (B, N, D)
            code = self.query_code.unsqueeze(-2).expand(*y.shape[:-1], self.p)  # (B, p)
            query = torch.cat([y, code], dim=-1).unsqueeze(-2)  # (B, 1, D)
        for layer in self.attention_layers:
            if self.update == "all":
                # One call: queries are the N context tokens and the query token, keys/values the context only.
                update = layer(torch.cat([context, query], dim=-2), context)  # (B, N + 1, D)
                context = context + update[..., :N, :]  # (B, N, D)
                query = query + update[..., N:, :]  # (B, 1, D)
            else:
                update = layer(query, context, score_bias=self.score_bias)  # (B, 1, D)
                query = query + update if self.residual else update
        return query[..., 0, :], context

    def forward(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Args: X (B, N, d) contexts, y (B, d) queries (a pack's with the leading K). Returns: (B, d) outputs
        readout @ s_q."""
        query, _ = self.streams(X, y)  # (B, D)
        return linear(query, self.readout)  # (B, d)
