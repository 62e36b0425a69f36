"""The paper's transformer encoder (docs/paper.md section 6).

``torch.nn.TransformerEncoder`` with post-norm layers, each LayerNorm replaced by L2 normalisation times a learned
scalar (`L2Norm`), a ReLU feed-forward block of width ``ffn_dim`` (2048 in the paper), dropout 0, biases, and the
attention of `experiments.models.attention.RankedMultiheadAttention` (c averaged blocks of d / r heads of rank r).
One layer maps x (B, N, D) to

    h   = norm1(x + attn(x)),
    out = norm2(h + W_2 relu(W_1 h + b_1) + b_2).

Positional encodings (learned, one row per position, ``max_length`` rows):
- "none": the tokens go in unchanged (the paper's main experiments);
- "additive": row i of a (max_length, d) table is added to token i;
- "concat": row i of a (max_length, p) table is appended to token i, so the layers work in width D = d + p
  (the paper's appendix uses p = 64, D = 128). The output is read back into R^d by ``readout``:
  "linear" (default) applies a learned map R^D -> R^d initialised to [I_d | 0], i.e. it starts as "the first d
  coordinates" and can learn to use or discard the scratch coordinates; "first" returns the first d coordinates.
  The learned map is the default because the last L2Norm makes the whole D-vector have norm |scale|, so the first d
  coordinates alone have a norm that depends on how much of it sits in the positional coordinates; the map (like the
  ``readout`` of the theory transformer's weight files) removes that coupling.

A pack of K encoders (`experiments.models.run_axis.stack_models`) is the same modules with a leading run axis on
every parameter and input: x (K, B, N, d).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from experiments.model_kinds import LAYER_INITS, POSITIONALS
from experiments.models.feed_forward import relu_feed_forward
from experiments.models.run_axis import linear, per_run
from experiments.models.spec import AttentionSpec
from theory.validation import check_choice, check_int, check_real

READOUT_KINDS = ("linear", "first")


class L2Norm(nn.Module):
    """x -> scale * x / ||x|| over the last axis, with one learned scalar ``scale`` (replaces LayerNorm).

    Args:
        init_scale: initial value of the scalar (1.0: outputs on the unit sphere, like the data).
        eps: the norm is clamped below at eps (as torch.nn.functional.normalize).
    """

    runs: int | None = None
    """K for a pack's norm (``scale`` (K,), one per run), None for a single run's."""

    def __init__(
        self,
        init_scale: float = 1.0,
        eps: float = 1e-12,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.init_scale = check_real("init_scale", init_scale)
        self.eps = check_real("eps", eps, minimum=0.0, strict_minimum=True)
        self.scale = nn.Parameter(torch.full((), self.init_scale, device=device, dtype=dtype))

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.scale.fill_(self.init_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x (..., D); a pack's (K, ..., D). Returns: x's shape, each row of norm |scale| (run k's own)."""
        scale = self.scale if self.runs is None else per_run(self.scale, x)  # (), or (K, 1, ..., 1)
        return scale * F.normalize(x, dim=-1, eps=self.eps)


class PaperEncoderLayer(nn.Module):
    """One post-norm encoder layer: L2Norm(x + attention(x)), then L2Norm(h + FFN(h)).

    Args:
        embed_dim: token width D.
        attention: the attention layer's spec (its ``bias`` also sets the feed-forward block's biases).
        ffn_dim: hidden width of the ReLU feed-forward block (>= 1).
        device, dtype: factory arguments for the parameters.
    """

    def __init__(
        self,
        embed_dim: int,
        attention: AttentionSpec,
        ffn_dim: int = 2048,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        ffn_dim = check_int("ffn_dim", ffn_dim, minimum=1)
        bias = attention.bias
        self.self_attn = attention.build(embed_dim, device=device, dtype=dtype)
        # Names as in nn.TransformerEncoderLayer, so its weights map one to one.
        self.linear1 = nn.Linear(embed_dim, ffn_dim, bias=bias, device=device, dtype=dtype)
        self.linear2 = nn.Linear(ffn_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.norm1 = L2Norm(device=device, dtype=dtype)
        self.norm2 = L2Norm(device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x (B, N, D); a pack's (K, B, N, D). Returns: x's shape."""
        h = self.norm1(x + self.self_attn(x))  # (B, N, D)
        tokens = h.reshape(*h.shape[:-3], -1, h.shape[-1])  # (B N, D); a pack's (K, B N, D)
        return self.norm2(h + self.feed_forward(tokens).view(h.shape))  # (B, N, D)

    def feed_forward(self, h: torch.Tensor) -> torch.Tensor:
        """linear2(relu(linear1(h))) on tokens h (M, D), a pack's (K, M, D): h's shape, bitwise as written with
        F.linear and F.relu but with fewer passes over the (M, ffn_dim) hidden activations
        (`feed_forward.relu_feed_forward`)."""
        linear1, linear2 = self.linear1, self.linear2
        return relu_feed_forward(h, linear1.weight, linear1.bias, linear2.weight, linear2.bias)  # (M, D)

    @torch.no_grad()
    def load_torch_layer(self, layer: nn.TransformerEncoderLayer) -> None:
        """Copy the attention and feed-forward weights of an nn.TransformerEncoderLayer with H r = d (c = 1).

        Args:
            layer: the torch layer (its norms are copied too when they are `L2Norm` modules).
        """
        self.self_attn.load_torch_blocks([layer.self_attn])
        for name in ("linear1", "linear2"):
            mine, theirs = getattr(self, name), getattr(layer, name)
            if mine.weight.shape != theirs.weight.shape:
                raise ValueError(f"{name} shapes differ: {tuple(mine.weight.shape)} vs {tuple(theirs.weight.shape)}")
            mine.weight.copy_(theirs.weight)
            if mine.bias is not None:
                mine.bias.copy_(theirs.bias)
        for name in ("norm1", "norm2"):
            theirs = getattr(layer, name)
            if isinstance(theirs, L2Norm):
                getattr(self, name).scale.copy_(theirs.scale)


class PaperEncoder(nn.Module):
    """The paper's encoder: optional learned positional encodings, L `PaperEncoderLayer`s, readout to R^d.

    Args:
        d: token dimension of inputs and outputs.
        attention: every layer's attention (`AttentionSpec`; H = c D / r heads of rank r per layer).
        layers: number of layers L (>= 1).
        ffn_dim: hidden width of every layer's feed-forward block.
        positional: "none", "additive" or "concat" (see the module docstring).
        positional_dim: p, width of concatenated encodings (>= 1 for "concat", 0 otherwise).
        max_length: number of learned positions (needed unless positional == "none"); inputs may have N <= it.
        readout: "linear" or "first" (only for "concat").
        layer_init: "independent" (each layer drawn from the RNG in turn) or "copies" (one layer drawn, the others
            deep copies of it, so all L layers start equal: what ``nn.TransformerEncoder(layer, L)`` does, and so the
            reference implementation's initialisation; the copies share no storage and train apart).
    """

    def __init__(
        self,
        d: int,
        attention: AttentionSpec,
        layers: int = 1,
        ffn_dim: int = 2048,
        positional: str = "none",
        positional_dim: int = 0,
        max_length: int | None = None,
        readout: str = "linear",
        layer_init: str = "independent",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        self.layer_init = check_choice("layer_init", layer_init, LAYER_INITS)
        self.num_layers = check_int("layers", layers, minimum=1)
        self.positional = check_choice("positional", positional, POSITIONALS)
        self.readout_kind = check_choice("readout", readout, READOUT_KINDS)
        if self.positional == "concat":
            self.positional_dim = check_int("positional_dim", positional_dim, minimum=1)
        else:
            self.positional_dim = check_int("positional_dim", positional_dim, minimum=0, maximum=0)
        if self.positional == "none":
            self.max_length = None if max_length is None else check_int("max_length", max_length, minimum=1)
        else:
            if max_length is None:
                raise ValueError(f"max_length must be an integer >= 1 for positional={self.positional!r}, got None")
            self.max_length = check_int("max_length", max_length, minimum=1)
        self.embed_dim = self.d + self.positional_dim
        self.position_table: nn.Parameter | None = None
        if self.positional != "none":
            assert self.max_length is not None
            cols = self.d if self.positional == "additive" else self.positional_dim
            self.position_table = nn.Parameter(
                torch.empty(self.max_length, cols, device=device, dtype=dtype)
            )  # (max_length, .)

        def new_layer() -> PaperEncoderLayer:
            return PaperEncoderLayer(self.embed_dim, attention, ffn_dim=ffn_dim, device=device, dtype=dtype)

        if self.layer_init == "copies":
            first = new_layer()
            self.layers = nn.ModuleList([first] + [copy.deepcopy(first) for _ in range(self.num_layers - 1)])
        else:
            self.layers = nn.ModuleList(new_layer() for _ in range(self.num_layers))
        self.readout: nn.Linear | None = None
        if self.positional == "concat" and self.readout_kind == "linear":
            self.readout = nn.Linear(self.embed_dim, self.d, bias=False, device=device, dtype=dtype)
        self.reset_positional(None)

    @torch.no_grad()
    def reset_positional(self, generator: torch.Generator | None = None) -> None:
        """Positional table ~ N(0, 0.02^2) (GPT-2's choice); linear readout = [I_d | 0]."""
        if self.position_table is not None:
            self.position_table.normal_(0.0, 0.02, generator=generator)
        if self.readout is not None:
            self.readout.weight.zero_()
            self.readout.weight[:, : self.d].copy_(torch.eye(self.d))

    runs: int | None = None
    """K for a pack of K encoders (inputs (K, B, N, d)), None for a single run's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x (B, N, d); a pack's (K, B, N, d). Returns: x's shape."""
        lead = () if self.runs is None else (self.runs,)
        if x.dim() != len(lead) + 3 or x.shape[: len(lead)] != lead or x.shape[-1] != self.d:
            form = "".join(f"{k}, " for k in lead)
            raise ValueError(f"x must have shape ({form}B, N, {self.d}), got {tuple(x.shape)}")
        N = x.shape[-2]
        if self.max_length is not None and N > self.max_length:
            raise ValueError(f"the sequence length N must be <= max_length = {self.max_length}, got {N}")
        if self.positional != "none":
            assert self.position_table is not None
            table = self.position_table[..., :N, :].unsqueeze(-3)  # (1, N, .); a pack's (K, 1, N, .)
            if self.positional == "additive":
                x = x + table  # (B, N, d)
            else:
                codes = table.expand(*x.shape[:-1], self.positional_dim)  # (B, N, p)
                x = torch.cat([x, codes], dim=-1)  # (B, N, d + p)
        for layer in self.layers:
            x = layer(x)  # (B, N, D)
        if self.positional != "concat":
            return x
        if self.readout is not None:
            return linear(x, self.readout.weight)  # (B, N, d)
        return x[..., : self.d]  # (B, N, d)
