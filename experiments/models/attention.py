"""Multi-head attention whose head count H and query/key rank r are independent, vectorised across heads.

docs/paper.md sections 1 and 6. One module holds all H heads of a layer. Head h has a query map W_q^h and a key map
W_k^h in R^{r x d} (rows of ``in_proj_weight``) with optional biases. For queries z_j (rows of ``x_query``) and
context tokens x_i (rows of ``x_context``) its scores are

    s[h, j, i] = temperature * (score_scale * <W_q^h z_j + b_q^h, W_k^h x_i + b_k^h> + score_bias[h, i]),

with ``score_scale = 1 / sqrt(r)`` by default (as in ``torch.nn.MultiheadAttention``; pass ``score_scale=1.0`` for the
theory's unscaled scores) and ``score_bias`` an optional (H, N) forward argument (zero by default). The weights are
w[h, j, :] = softmax_i(s[h, j, :]) ("softmax") or the one-hot argmax with exact ties split evenly ("hardmax", the
temperature -> infinity limit; see `hardmax`). An optional causal mask lets query j see only keys i <= j.

Two value/output maps:

``value="standard"`` (rank-r values and outputs, as in nn.MultiheadAttention). The H = c d / r heads form c blocks of
    d / r heads; head h has a value map W_v^h (r, d) with bias b_v^h and an output map O^h (d, r); block b has an
    output bias b_o^b (d,). The layer AVERAGES the c blocks (each block is one standard multi-head attention):

        out_j = (1/c) sum_b ( sum_{h in b} O^h sum_i w[h, j, i] (W_v^h x_i + b_v^h) + b_o^b ).

    Without biases this is the theory's form with V_h = (1/c) O^h W_v^h (rank <= r).
``value="full"`` (the theory's model, docs/paper.md section 1): head h has a full value/output map V_h (d, d) and

        out_j = sum_h sum_i w[h, j, i] V_h x_i  (+ one output bias b_o (d,) when ``bias``),

    computed as V_h (sum_i w[h, j, i] x_i), i.e. tokens are mixed before the d x d map is applied.

Vectorisation: every projection of all heads is one matrix product (``in_proj_weight`` stacks the q, k, v rows of
all heads; the c output maps are one (d, H r) matrix, whose product with the concatenated head outputs is the sum
over blocks), and the attention of all heads is one batched call (``torch.nn.functional.scaled_dot_product_attention``
for softmax, which never stores the (B, H, N, N) score tensor, or batched matmuls for hardmax). No Python loop runs
over heads; the default "blockwise" path loops over a few groups of whole blocks to stay in cache (`IMPLEMENTATIONS`
lists the interchangeable ways softmax attention is computed).

Packs (`experiments.models.run_axis`): a module stacked by `run_axis.stack_models` computes K runs at once, its
parameters and inputs carrying a leading run axis, by the same code (products through `run_axis.linear`). Each run
keeps its own score scale, folded into its query rows, and with standard value maps its own rank: H r = c d whatever
r is, so the runs' parameters stack, and the attention core is called once per group of consecutive runs of equal
rank. A pack computes softmax attention by the "blockwise" or "fused" path (not hardmax, not "plain"), all blocks of
a layer in one group (its K runs already make the products wide); a pack of full-value heads with one query token
(the theory model's) mixes its context by its own short path (`RankedMultiheadAttention._pack_full_value_mix`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from experiments.model_kinds import ATTENTIONS, VALUE_MAPS
from experiments.models.attention_cores import grouped_attention
from experiments.models.run_axis import linear, per_run
from theory.validation import check_choice, check_heads, check_int, check_rank, check_real, check_temperature

HARDMAX_GRADIENTS = ("none", "straight-through")
IMPLEMENTATIONS = ("blockwise", "fused", "plain")
"""How softmax attention is computed; all three compute the same map (equal up to float rounding):

- "blockwise" (default, the fast training path): standard-value softmax self-attention runs a group of
  ``block_chunk`` whole blocks at a time through ``attention_cores.grouped_attention`` (projections stay in cache);
  every other case (cross-attention, score bias, full values, hardmax) is computed as by "fused".
- "fused": one ``scaled_dot_product_attention`` call over all heads for softmax (never stores the (B, H, N_q, N)
  scores); hardmax through explicit scores.
- "plain": explicit scores, ``torch.softmax`` and a batched matmul (stores the scores): the arithmetic written out,
  the reference the other two are tested against.
"""


def hardmax(scores: torch.Tensor, *, surrogate: torch.Tensor | None = None) -> torch.Tensor:
    """One-hot argmax over the last axis, with exact ties sharing the weight evenly.

    Args:
        scores: (..., N) scores; entries equal to -inf (masked) never win unless a whole row is -inf.
        surrogate: optional (..., N) softmax weights for a straight-through gradient: the forward value is the
            hardmax and the backward pass uses the Jacobian of ``surrogate``. Without it the result carries no
            gradient to ``scores`` (the hardmax is piecewise constant, so its true derivative is 0 almost everywhere).

    Returns:
        (..., N) weights, non-negative, summing to 1 over the last axis.
    """
    with torch.no_grad():
        top = scores.amax(dim=-1, keepdim=True)  # (..., 1)
        ties = (scores == top).to(scores.dtype)  # (..., N): indicator of the exact maxima
        hard = ties / ties.sum(dim=-1, keepdim=True)  # (..., N)
    if surrogate is None:
        return hard
    return hard + (surrogate - surrogate.detach())


class RankedMultiheadAttention(nn.Module):
    """H heads of query/key rank r in one vectorised module (see the module docstring for the exact maps).

    Args:
        embed_dim: token width d (>= 1).
        rank: query/key rank r of every head, 1 <= r <= d; for ``value="standard"`` r must divide d.
        width: c >= 1, the number of averaged standard blocks; H = c d / r heads. Ignored when ``heads`` is given.
        heads: explicit head count H (>= 1). With ``value="standard"`` H r must be a multiple of d (whole blocks of
            d / r heads; then c = H r / d); with ``value="full"`` any H is allowed.
        value: "standard" (rank-r value and output maps, blocks averaged) or "full" (V_h in R^{d x d}, heads summed).
        attention: "softmax" or "hardmax".
        temperature: inverse temperature > 0 multiplying the scores (finite for softmax; for hardmax it only sets
            the straight-through surrogate's softmax, and may be math.inf when ``hardmax_gradient="none"``).
        bias: learned biases on the q/k/v projections and the output (as nn.MultiheadAttention).
        causal: mask keys after the query position (self-attention with N_q = N only).
        score_scale: factor on <q, k> inside the temperature; None means 1 / sqrt(r).
        hardmax_gradient: "none" (no gradient through the hardmax weights) or "straight-through" (softmax gradient
            at the same temperature).
        implementation: how softmax attention is computed (same map, see `IMPLEMENTATIONS`); settable later through
            the ``implementation`` attribute (e.g. `use_implementation` on a whole model).
        device, dtype: factory arguments for the parameters.
    """

    runs: int | None = None
    """K when this module computes a pack of K runs (`run_axis.stack_models`), None for a single run."""

    def __init__(
        self,
        embed_dim: int,
        rank: int,
        width: int = 1,
        heads: int | None = None,
        value: str = "standard",
        attention: str = "softmax",
        temperature: float = 1.0,
        bias: bool = True,
        causal: bool = False,
        score_scale: float | None = None,
        hardmax_gradient: str = "none",
        implementation: str = "blockwise",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        d = check_int("embed_dim", embed_dim, minimum=1)
        r = check_rank(rank, d, name="rank")
        self.value = check_choice("value", value, VALUE_MAPS)
        self.attention = check_choice("attention", attention, ATTENTIONS)
        self.hardmax_gradient = check_choice("hardmax_gradient", hardmax_gradient, HARDMAX_GRADIENTS)
        if self.value == "standard" and d % r != 0:
            raise ValueError(f"rank must divide embed_dim = {d} for value='standard' (blocks of d / r heads), got {r}")
        if heads is None:
            c = check_int("width", width, minimum=1)
            if self.value == "standard":
                H = c * (d // r)
            else:
                if (c * d) % r != 0:
                    raise ValueError(f"width * embed_dim = {c * d} must be a multiple of rank = {r}, or give heads")
                H = c * d // r
        else:
            H = check_heads(heads, name="heads")
            if self.value == "standard":
                if (H * r) % d != 0:
                    raise ValueError(
                        f"heads * rank must be a multiple of embed_dim = {d} for value='standard' "
                        f"(whole blocks of d / r = {d // r} heads), got heads = {H}"
                    )
                c = H * r // d
            else:
                c = max(1, H * r // d)
        if self.attention == "softmax" or self.hardmax_gradient == "straight-through":
            temperature = check_real("temperature", temperature, minimum=0.0, strict_minimum=True)
        else:
            temperature = check_temperature(temperature)
        if score_scale is None:
            score_scale = 1.0 / math.sqrt(r)
        self.embed_dim, self.rank, self.heads, self.width = d, r, H, c
        self.temperature = float(temperature)
        self.score_scale = check_real("score_scale", score_scale, minimum=0.0, strict_minimum=True)
        self.causal = bool(causal)
        self.has_bias = bool(bias)
        self.implementation = implementation  # validated by the property setter
        # Blocks per group of the "blockwise" path (a cache-size knob, >= 1). A block of one head (r = d) is processed
        # alone: its (B, N, 1, r) projections are already laid out as (B, 1, N, r), so the attention core reads them
        # without a copy (measured at d = 64, c = 64: 272 ms per step against 397 ms in groups of 4, two threads).
        self.block_chunk = 1 if d // r == 1 else 4
        n_proj = 3 if self.value == "standard" else 2
        # Rows [q of head 0..H-1 | k of head 0..H-1 | (v of head 0..H-1)], each head r consecutive rows; head
        # h = b (d / r) + j is head j of block b, so block b's rows are exactly nn.MultiheadAttention's in_proj rows.
        in_proj = torch.empty(n_proj * H * r, d, device=device, dtype=dtype)  # (n_proj H r, d)
        self.in_proj_weight = nn.Parameter(in_proj)
        self.in_proj_bias: nn.Parameter | None = None
        self.out_proj_weight: nn.Parameter | None = None
        self.out_proj_bias: nn.Parameter | None = None
        self.value_weight: nn.Parameter | None = None
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(n_proj * H * r, device=device, dtype=dtype))
        if self.value == "standard":
            # [O^0 | O^1 | ... | O^{H-1}]: columns h r .. h r + r - 1 are head h's output map (d, r).
            self.out_proj_weight = nn.Parameter(torch.empty(d, H * r, device=device, dtype=dtype))  # (d, H r)
            if bias:
                self.out_proj_bias = nn.Parameter(torch.empty(c, d, device=device, dtype=dtype))  # (c, d)
        else:
            self.value_weight = nn.Parameter(torch.empty(H, d, d, device=device, dtype=dtype))  # (H, d, d)
            if bias:
                self.out_proj_bias = nn.Parameter(torch.empty(1, d, device=device, dtype=dtype))  # (1, d)
        self.reset_parameters()

    @property
    def implementation(self) -> str:
        """How softmax attention is computed: one of `IMPLEMENTATIONS` (the map is the same)."""
        return self._implementation

    @implementation.setter
    def implementation(self, name: str) -> None:
        self._implementation = check_choice("implementation", name, IMPLEMENTATIONS)

    def stack_runs(self, modules: Sequence[RankedMultiheadAttention]) -> None:
        """Make this module (a copy of ``modules[0]`` whose parameters `run_axis.stack_models` is stacking) compute the
        K runs ``modules``, each with its own score scale (temperature x score_scale) and, for standard value maps,
        its own rank; ValueError when they differ in anything else that shapes the arithmetic."""
        for k, other in enumerate(modules):
            same = (other.embed_dim, other.width, other.value, other.attention, other.causal, other.has_bias)
            if same != (self.embed_dim, self.width, self.value, self.attention, self.causal, self.has_bias):
                raise ValueError(f"attention of run {k} differs from run 0's in more than its rank and temperature")
            if other.heads * other.rank != self.heads * self.rank or (self.value == "full" and other.rank != self.rank):
                raise ValueError(f"attention of run {k} has another rank than run 0's, which its shapes cannot take")
        if self.attention != "softmax":
            raise ValueError("only softmax attention can be packed")
        device = self.in_proj_weight.device
        scales = [m.temperature * m.score_scale for m in modules]  # each run's factor on <q, k>
        row_scale = torch.ones(len(modules), 3, dtype=torch.float32, device=device)  # (K, 3): q, k, v rows
        row_scale[:, 0] = torch.tensor(scales, dtype=torch.float32, device=device)
        self.run_row_scale = row_scale
        # Consecutive runs of equal rank: (first run, last run + 1, rank), one attention-core call each.
        segments: list[tuple[int, int, int]] = []
        for k, module in enumerate(modules):
            if segments and segments[-1][2] == module.rank:
                segments[-1] = (segments[-1][0], k + 1, module.rank)
            else:
                segments.append((k, k + 1, module.rank))
        self.run_segments = tuple(segments)

    def _row_scale(self, x: torch.Tensor) -> torch.Tensor:
        """Factors on the q, k, v rows of the in-projection: (3,) for a single run, (K, 3) for a pack (run k's score
        scale on its q rows, so the attention core receives pre-scaled queries)."""
        if self.runs is None:
            scale = self.temperature * self.score_scale
            return torch.tensor([scale, 1.0, 1.0], dtype=x.dtype, device=x.device)  # (3,)
        return self.run_row_scale.to(x.dtype)  # (K, 3)

    def _segments(self) -> tuple[tuple[int, int, int], ...]:
        """(first run, last run + 1, rank) of each group of consecutive runs of equal rank: one group for a single
        run."""
        return ((0, 1, self.rank),) if self.runs is None else self.run_segments

    def extra_repr(self) -> str:
        return (
            f"embed_dim={self.embed_dim}, rank={self.rank}, heads={self.heads}, width={self.width}, "
            f"value={self.value!r}, attention={self.attention!r}, temperature={self.temperature}, "
            f"score_scale={self.score_scale:.6g}, bias={self.has_bias}, causal={self.causal}, "
            f"implementation={self.implementation!r}"
        )

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Initialise as c independent nn.MultiheadAttention blocks would be (xavier-uniform in-projection over a
        block's (3d, d) matrix, output map U(-1/sqrt d, 1/sqrt d), zero biases); full value maps V_h are
        U(-a, a) with a = 1/sqrt(H d) so that the sum over heads has the scale of one d x d linear layer."""
        d = self.embed_dim
        with torch.no_grad():
            bound = math.sqrt(6.0 / (d + 3 * d))  # xavier_uniform on a (3d, d) block
            self.in_proj_weight.uniform_(-bound, bound, generator=generator)
            if self.out_proj_weight is not None:
                self.out_proj_weight.uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d), generator=generator)
            if self.value_weight is not None:
                a = 1.0 / math.sqrt(self.heads * d)
                self.value_weight.uniform_(-a, a, generator=generator)
            for b in (self.in_proj_bias, self.out_proj_bias):
                if b is not None:
                    b.zero_()

    # ------------------------------------------------------------------------------------------------ projections
    def _project(self, x_query: torch.Tensor, x_context: torch.Tensor | None) -> list[torch.Tensor]:
        """q, k (and v for standard) of all heads as (B, H, N, r) views (one matmul per distinct input); a pack's as
        (K B, H, N, r), run-major, each run's score scale folded into its query rows."""
        H, r, d = self.heads, self.rank, self.embed_dim
        n_proj = 3 if self.value == "standard" else 2
        weight: torch.Tensor = self.in_proj_weight  # (n_proj H r, d); a pack's (K, n_proj H r, d)
        bias: torch.Tensor | None = self.in_proj_bias  # (n_proj H r,); a pack's (K, n_proj H r)
        if self.runs is not None:
            K = self.runs
            rows = self._row_scale(x_query)[:, :n_proj]  # (K, n_proj)
            weight = (weight.view(K, n_proj, H * r, d) * rows[:, :, None, None]).view(K, n_proj * H * r, d)
            if bias is not None:
                bias = (bias.view(K, n_proj, H * r) * rows[:, :, None]).view(K, n_proj * H * r)
        if x_context is None:
            N = x_query.shape[-2]
            qkv = linear(x_query, weight, bias).view(-1, N, n_proj, H, r)  # (B, N, n_proj, H, r)
            return [t.transpose(1, 2) for t in qkv.unbind(2)]  # n_proj x (B, H, N, r)
        Nq, N = x_query.shape[-2], x_context.shape[-2]
        w_q, w_rest = weight[..., : H * r, :], weight[..., H * r :, :]
        b_q = b_rest = None
        if bias is not None:
            b_q, b_rest = bias[..., : H * r], bias[..., H * r :]
        q = linear(x_query, w_q, b_q).view(-1, Nq, H, r).transpose(1, 2)  # (B, H, Nq, r)
        rest = linear(x_context, w_rest, b_rest).view(-1, N, n_proj - 1, H, r)  # (B, N, n_proj - 1, H, r)
        return [q] + [t.transpose(1, 2) for t in rest.unbind(2)]  # n_proj x (B, H, N., r)

    def _check_inputs(
        self, x_query: torch.Tensor, x_context: torch.Tensor | None, score_bias: torch.Tensor | None
    ) -> tuple[tuple[int, ...], int, int, int]:
        """(the run axis: () or (K,), B, N_q, N) of valid inputs; ValueError naming the input otherwise."""
        lead: tuple[int, ...] = () if self.runs is None else (self.runs,)
        form = "".join(f"{k}, " for k in lead)
        if x_query.dim() != len(lead) + 3 or x_query.shape[: len(lead)] != lead or x_query.shape[-1] != self.embed_dim:
            raise ValueError(f"x_query must have shape ({form}B, N_q, {self.embed_dim}), got {tuple(x_query.shape)}")
        B, Nq, _ = x_query.shape[-3:]
        N = Nq
        if x_context is not None:
            matches = x_context.dim() == x_query.dim() and x_context.shape[:-2] == x_query.shape[:-2]
            if not matches or x_context.shape[-1] != self.embed_dim:
                shape = tuple(x_context.shape)
                raise ValueError(f"x_context must have shape ({form}{B}, N, {self.embed_dim}), got {shape}")
            N = x_context.shape[-2]
        if self.causal and N != Nq:
            raise ValueError(f"causal attention needs as many queries as keys, got N_q = {Nq} and N = {N}")
        if score_bias is not None and tuple(score_bias.shape) != (self.heads, N):
            raise ValueError(f"score_bias must have shape (H, N) = ({self.heads}, {N}), got {tuple(score_bias.shape)}")
        if self.runs is not None and (score_bias is not None or self.implementation == "plain"):
            raise ValueError("a pack computes attention by the 'blockwise' or 'fused' path, without score_bias")
        return lead, B, Nq, N

    # ---------------------------------------------------------------------------------------------------- weights
    def _scores(self, q: torch.Tensor, k: torch.Tensor, score_bias: torch.Tensor | None) -> torch.Tensor:
        """score_scale <q, k> + score_bias (without the temperature), causal entries set to -inf: (B, H, Nq, N)."""
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.score_scale  # (B, H, Nq, N)
        if score_bias is not None:
            scores = scores + score_bias[None, :, None, :]  # (B, H, Nq, N)
        if self.causal:
            Nq, N = scores.shape[-2:]
            future = torch.ones(Nq, N, dtype=torch.bool, device=scores.device).triu(1)  # (Nq, N): keys i > j
            scores = scores.masked_fill(future, -math.inf)
        return scores

    def _weights_from_scores(self, scores: torch.Tensor) -> torch.Tensor:
        if self.attention == "softmax":
            return torch.softmax(self.temperature * scores, dim=-1)
        surrogate = None
        if self.hardmax_gradient == "straight-through":
            surrogate = torch.softmax(self.temperature * scores, dim=-1)
        return hardmax(scores, surrogate=surrogate)

    def attention_weights(
        self, x_query: torch.Tensor, x_context: torch.Tensor | None = None, score_bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Attention weights of every head (a single run's module).

        Args:
            x_query: (B, N_q, d) queries.
            x_context: (B, N, d) context, or None for self-attention.
            score_bias: optional (H, N) additive score terms.

        Returns:
            (B, H, N_q, N) weights summing to 1 over the last axis.
        """
        if self.runs is not None:
            raise ValueError("attention_weights reads a single run's module, not a pack")
        self._check_inputs(x_query, x_context, score_bias)
        q, k = self._project(x_query, x_context)[:2]
        return self._weights_from_scores(self._scores(q, k, score_bias))

    # ---------------------------------------------------------------------------------------------------- forward
    def forward(
        self, x_query: torch.Tensor, x_context: torch.Tensor | None = None, score_bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Attention output.

        Args:
            x_query: (B, N_q, d) queries; a pack's (K, B, N_q, d).
            x_context: (B, N, d) context tokens (a pack's (K, B, N, d)), or None for self-attention over x_query.
            score_bias: optional (H, N) additive score terms (see the module docstring; not for a pack).

        Returns:
            (B, N_q, d) outputs; a pack's (K, B, N_q, d).
        """
        lead, B, Nq, N = self._check_inputs(x_query, x_context, score_bias)
        if (
            self.implementation == "blockwise"
            and self.value == "standard"
            and self.attention == "softmax"
            and x_context is None
            and score_bias is None
        ):
            return self._blockwise_self_attention(x_query)
        projected = self._project(x_query, x_context)
        q, k = projected[0], projected[1]  # (B, H, Nq, r), (B, H, N, r)
        context = x_query if x_context is None else x_context
        if self.runs is not None and self.value == "full" and self.attention == "softmax" and Nq == 1:
            mixed = self._pack_full_value_mix(q, k, context)  # (K B, H, 1, d): the theory model's one query
        else:
            if self.value == "standard":
                values = projected[2]  # (B, H, N, r)
            else:
                flat = context.reshape(-1, N, self.embed_dim)  # (B, N, d)
                values = flat.unsqueeze(1).expand(flat.shape[0], self.heads, N, self.embed_dim)  # (B, H, N, d)
            # A pack's score scales are already in its queries (`_project`).
            scale = self.temperature * self.score_scale if self.runs is None else 1.0
            mixed = self._mix(q, k, values, score_bias, scale)  # (B, H, Nq, e), e = r (standard) or d (full)
        e = mixed.shape[-1]
        mixed = mixed.transpose(1, 2).reshape(*lead, B, Nq, self.heads * e)  # (B, Nq, H e), heads concatenated
        if self.value == "standard":
            assert self.out_proj_weight is not None
            # sum over blocks of O_b (block b's concatenated heads) is one product with [O^0 | ... | O^{H-1}].
            out = linear(mixed, self.out_proj_weight) * (1.0 / self.width)  # (B, Nq, d)
        else:
            assert self.value_weight is not None
            d = self.embed_dim
            stacked = self.value_weight.transpose(-3, -2).reshape(*lead, d, self.heads * d)  # (d, H d)
            out = linear(mixed, stacked)  # (B, Nq, d): sum_h V_h mixed_h
        if self.out_proj_bias is not None:
            bias = self.out_proj_bias.mean(dim=-2)  # (d,): average of the blocks' output biases; a pack's (K, d)
            out = out + (bias if self.runs is None else per_run(bias, out))  # (B, Nq, d)
        return out

    def _blockwise_self_attention(self, x: torch.Tensor) -> torch.Tensor:
        """Standard softmax self-attention, a group of ``block_chunk`` whole blocks at a time: (B, N, d).

        Each group does three in-projection products (q, k, v), one attention-core call over all its heads
        (``grouped_attention``: explicit products on a CPU for r >= 2, else scaled_dot_product_attention) and one
        output product accumulated into the (B, N, d) output (addmm). The loop runs over a few large
        groups of blocks (never over heads) so that a group's projections, (B, N, 3 x group heads x r) floats, stay in
        cache between the product that writes them and the attention that reads them, instead of one (B, N, 3 H r)
        tensor of hundreds of MB making a round trip through memory.

        Backward-pass economy: the groups' weights are taken from the parameters by one ``split`` each (whose
        backward is one concatenation), not by per-group slicing (whose backward zero-fills a full-size gradient
        per group), and q, k, v come from three products rather than one product split by ``unbind`` (whose
        backward stacks the three gradients into a new (B, N, 3, h, r) tensor per group). A single group (c <=
        ``block_chunk``) has nothing to split: one wide in-projection of all heads, as the "fused" path. A pack
        (x (K, B, N, d)) is always one group, its attention core called once per run of equal rank (`_segments`).
        """
        lead = x.shape[:-3]  # (): a single run; (K,): a pack
        B, N, d = x.shape[-3:]
        H, r = self.heads, self.rank
        group = (d // r) * self.block_chunk  # heads per group
        sizes = [min(group, H - h0) * r for h0 in range(0, H, group)]  # rows of each group
        assert self.out_proj_weight is not None
        # The average over blocks, out = (1/c) sum_b O_b m_b + mean_b(bias_b), is folded into the output product:
        # the (d, H r) output weights are scaled by 1/c (a weight-sized product, not an activation-sized one) and the
        # mean bias is the product's own bias (addmm), so no extra pass over the (B, N, d) output remains.
        out_weight = self.out_proj_weight if self.width == 1 else self.out_proj_weight * (1.0 / self.width)  # (d, H r)
        out_bias = None if self.out_proj_bias is None else self.out_proj_bias.mean(dim=-2)  # (d,)
        # Likewise the score scale is folded into the query rows of the in-projection (and their biases), so the
        # attention core receives pre-scaled queries and makes no pass of its own to scale them.
        row_scale = self._row_scale(x)  # (3,): q, k, v rows; a pack's (K, 3)
        in_weight = self.in_proj_weight.view(*lead, 3, H * r, d) * row_scale[..., None, None]  # (3, H r, d)
        in_bias = None if self.in_proj_bias is None else self.in_proj_bias.view(*lead, 3, H * r) * row_scale[..., None]
        if self.runs is not None or len(sizes) == 1:  # one group: one wide in-projection, nothing to split
            flat_bias = None if in_bias is None else in_bias.view(*lead, 3 * H * r)  # (3 H r,)
            qkv = linear(x, in_weight.view(*lead, 3 * H * r, d), flat_bias)  # (B, N, 3 H r)
            mixed = []
            for first, last, rank in self._segments():  # a single run: one segment
                heads = H * r // rank
                runs = qkv.view(-1, N, 3, heads, rank)  # (B, N, 3, H, r); a pack's (K B, ...), run-major
                part = runs if self.runs is None else runs[first * B : last * B]  # this segment's runs
                q, k, v = (t.transpose(1, 2) for t in part.unbind(2))  # 3 x (B, H, N, r)
                core = grouped_attention(q, k, v, 1.0, self.causal)  # (B, H, N, r): queries already scaled
                segment = () if self.runs is None else (last - first,)
                mixed.append(core.transpose(1, 2).reshape(*segment, B, N, H * r))  # (B, N, H r)
            joined = mixed[0] if len(mixed) == 1 else torch.cat(mixed, dim=0)  # (B, N, H r); a pack's (K, ...)
            return linear(joined, out_weight, out_bias)  # (B, N, d)
        weights = [part.split(sizes) for part in in_weight.unbind(0)]  # q (scaled), k, v rows of each group
        biases = None if in_bias is None else [part.split(sizes) for part in in_bias.unbind(0)]
        outputs = out_weight.split(sizes, dim=1)  # each (d, h r), already scaled by 1/c
        flat = x.reshape(B * N, d)  # (B N, d)
        out: torch.Tensor | None = None
        for g, rows in enumerate(sizes):
            h = rows // r
            q, k, v = (
                F.linear(flat, weights[j][g], None if biases is None else biases[j][g]).view(B, N, h, r).transpose(1, 2)
                for j in range(3)
            )  # 3 x (B, h, N, r)
            mixed_group = grouped_attention(q, k, v, 1.0, self.causal)  # (B, h, N, r): queries already scaled
            mixed_group = mixed_group.transpose(1, 2).reshape(B * N, rows)  # (B N, h r)
            if out is None:
                out = F.linear(mixed_group, outputs[g], out_bias)  # (B N, d): the first group carries the mean bias
            else:
                out = torch.addmm(out, mixed_group, outputs[g].t())  # (B N, d): accumulated in place of an add
        assert out is not None
        return out.view(B, N, d)  # (B, N, d)

    def _mix(
        self, q: torch.Tensor, k: torch.Tensor, values: torch.Tensor, score_bias: torch.Tensor | None, scale: float
    ) -> torch.Tensor:
        """sum_i w[h, j, i] values[h, i] for every head, ``scale`` on <q, k> (the temperature times the score
        scale; 1.0 for queries already scaled): (B, H, Nq, e)."""
        if self.attention == "softmax" and self.implementation != "plain":
            mask = None
            if score_bias is not None:
                mask = (self.temperature * score_bias)[None, :, None, :]  # (1, H, 1, N), added after the scale
            return F.scaled_dot_product_attention(
                q, k, values, attn_mask=mask, is_causal=self.causal, scale=scale
            )  # (B, H, Nq, e)
        weights = self._weights_from_scores(self._scores(q, k, score_bias))  # (B, H, Nq, N)
        return torch.matmul(weights, values)  # (B, H, Nq, e)

    def _pack_full_value_mix(self, q: torch.Tensor, k: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """A pack's full-value softmax mix for one query token, sum_i w[h, i] x_i for every head: (K B, H, 1, d).

        Every full-value head mixes the same context tokens x_i (its value map V_h acts after the mix), so the
        weights of all H heads multiply the (N, d) context of their sample in one batched product; the scores
        <q_h, k_{h,i}> are an elementwise product summed over r, in the (K B, N, H) layout the projections already
        have, with the softmax over N. The general path (``_mix``: ``scaled_dot_product_attention`` on the context
        expanded to per-head values, then (1, r) x (r, N) products per head) took 1.35-1.5x the whole step of the
        pack of 8 theory models (d = 16, N = 2) in benchmarks/bench_pipeline.py (tiny products and a softmax over
        rows of 2 cost more than their arithmetic). A single run keeps ``_mix`` (its numbers are those of every run
        trained before); a pack's differ from its runs' alone within float32 rounding, as they always did.

        Args:
            q: (K B, H, 1, r) queries, each run's score scale already in them (`_project`).
            k: (K B, H, N, r) keys.
            context: (K, B, N, d) context tokens.
        """
        N, d = context.shape[-2:]
        KB, H = q.shape[:2]
        query = q.transpose(1, 2)  # (K B, 1, H, r)
        keys = k.transpose(1, 2)  # (K B, N, H, r): the projection's own layout, no copy
        weights = torch.softmax((query * keys).sum(dim=-1), dim=1)  # (K B, N, H): over the N context tokens
        flat = context.reshape(KB, N, d)  # (K B, N, d): a pack's runs and samples in one axis
        mixed = torch.bmm(weights.transpose(1, 2), flat)  # (K B, H, d): one product per sample
        return mixed.view(KB, H, 1, d)  # (K B, H, 1, d)

    # ------------------------------------------------------------------------------------------- evaluator form
    def evaluator_weights(self) -> dict[str, torch.Tensor | float]:
        """The heads in the form of theory.attention.multihead_attention (exact when ``bias`` is False).

        Returns:
            dict with Q (H, r, d), K (H, r, d), V (H, d, d) (standard: V_h = (1/c) O^h W_v^h) and temperature
            (= self.temperature * self.score_scale; math.inf for hardmax without a surrogate gradient).
        """
        H, r, d = self.heads, self.rank, self.embed_dim
        w = self.in_proj_weight.detach()
        Q = w[: H * r].reshape(H, r, d)  # (H, r, d)
        K = w[H * r : 2 * H * r].reshape(H, r, d)  # (H, r, d)
        if self.value == "standard":
            assert self.out_proj_weight is not None
            Wv = w[2 * H * r :].reshape(H, r, d)  # (H, r, d)
            O = self.out_proj_weight.detach().reshape(d, H, r).permute(1, 0, 2)  # (H, d, r)
            V = torch.matmul(O, Wv) / self.width  # (H, d, d)
        else:
            assert self.value_weight is not None
            V = self.value_weight.detach().clone()
        temperature = math.inf if self.attention == "hardmax" else self.temperature * self.score_scale
        return {"Q": Q.clone(), "K": K.clone(), "V": V, "temperature": temperature}

    @torch.no_grad()
    def load_heads(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> None:
        """Set the heads of a full-value module from the evaluator's form (biases, if any, are zeroed).

        Args:
            Q: (H, r, d) query maps.
            K: (H, r, d) key maps.
            V: (H, d, d) value/output maps.
        """
        if self.value != "full":
            raise ValueError("load_heads needs value='full' (rank-r value maps cannot hold a general V_h)")
        H, r, d = self.heads, self.rank, self.embed_dim
        for name, t, shape in (("Q", Q, (H, r, d)), ("K", K, (H, r, d)), ("V", V, (H, d, d))):
            if tuple(t.shape) != shape:
                raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
        assert self.value_weight is not None
        self.in_proj_weight.copy_(torch.cat([Q.reshape(H * r, d), K.reshape(H * r, d)]))  # (2 H r, d)
        self.value_weight.copy_(V)
        for b in (self.in_proj_bias, self.out_proj_bias):
            if b is not None:
                b.zero_()

    @torch.no_grad()
    def load_torch_blocks(self, blocks: Sequence[nn.MultiheadAttention]) -> None:
        """Copy the weights of c standard nn.MultiheadAttention blocks (d / r heads each) into this module.

        Args:
            blocks: c = self.width modules with embed_dim d, num_heads d / r, a packed in-projection, and biases
                exactly when this module has them.
        """
        if self.value != "standard":
            raise ValueError("load_torch_blocks needs value='standard'")
        if len(blocks) != self.width:
            raise ValueError(f"blocks must hold width = {self.width} modules, got {len(blocks)}")
        d, r, H = self.embed_dim, self.rank, self.heads
        per = d // r
        for b, block in enumerate(blocks):
            if block.embed_dim != d or block.num_heads != per or block.in_proj_weight is None:
                raise ValueError(
                    f"block {b} must be nn.MultiheadAttention(embed_dim={d}, num_heads={per}) with a packed "
                    f"in-projection, got embed_dim={block.embed_dim}, num_heads={block.num_heads}"
                )
            if (block.in_proj_bias is not None) != self.has_bias:
                raise ValueError(
                    f"block {b} has bias={block.in_proj_bias is not None} but this module bias={self.has_bias}"
                )
        w = self.in_proj_weight.view(3, H * r, d)  # (3, H r, d): q, k, v rows
        for b, block in enumerate(blocks):
            rows = slice(b * d, (b + 1) * d)  # block b's heads are heads b d/r .. (b+1) d/r - 1, rows b d .. b d + d
            w[:, rows] = block.in_proj_weight.view(3, d, d)
            assert self.out_proj_weight is not None
            self.out_proj_weight[:, rows] = block.out_proj.weight
            if self.in_proj_bias is not None and self.out_proj_bias is not None:
                self.in_proj_bias.view(3, H * r)[:, rows] = block.in_proj_bias.view(3, d)
                self.out_proj_bias[b] = block.out_proj.bias


def use_implementation(model: nn.Module, implementation: str) -> None:
    """Set ``implementation`` (one of `IMPLEMENTATIONS`) on every `RankedMultiheadAttention` inside ``model``."""
    check_choice("implementation", implementation, IMPLEMENTATIONS)
    for layer in model.modules():
        if isinstance(layer, RankedMultiheadAttention):
            layer.implementation = implementation
