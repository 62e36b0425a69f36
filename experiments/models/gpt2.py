"""A GPT-2-style pre-norm transformer with rank-r heads, the backbone of the in-context regression experiment.

docs/paper.md section 6 (in-context regression, Garg et al. 2022) trains a GPT-2-style model. Unlike the paper's
post-norm encoder (`models.encoder`), whose L2 normalisation after every residual sum rescales each token to a
learned constant norm, this model keeps magnitudes in its residual stream, which regression on y_i = <w, x_i> needs:
in the encoder a y-token (y_i, 0, ..., 0) becomes (sign y_i, 0, ..., 0) times a constant after the first norm.

Structure (Garg et al.'s set-up, with our `RankedMultiheadAttention` so that rank and head count are independent):

    h_0 = W_in x_t + p_t                      (read-in R^d -> R^D, learned absolute positions p_t)
    h'  = h + attn(LN_1(h))                   (per layer; H = c D / r heads of rank r, causal for causal tasks)
    h'' = h' + W_2 gelu(W_1 LN_2(h') + b_1) + b_2
    out = W_out LN_f(h_L)                     (read-out R^D -> R^{d_out})
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from experiments.models.spec import AttentionSpec
from theory.validation import check_int


class PreNormBlock(nn.Module):
    """One GPT-2 block: x + attn(LN(x)), then + MLP(LN(.)) with a GELU hidden layer of width ``ffn_dim``.

    Args:
        embed_dim: residual width D.  attention: the attention layer's spec (H = width * D / rank heads).
        ffn_dim: MLP hidden width.
    """

    def __init__(self, embed_dim: int, attention: AttentionSpec, ffn_dim: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(embed_dim)
        self.attn = attention.build(embed_dim)
        self.ln_2 = nn.LayerNorm(embed_dim)
        self.mlp_in = nn.Linear(embed_dim, ffn_dim)
        self.mlp_out = nn.Linear(ffn_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Args: x (B, T, D). Returns: (B, T, D)."""
        h = x + self.attn(self.ln_1(x))  # (B, T, D)
        return h + self.mlp_out(F.gelu(self.mlp_in(self.ln_2(h))))  # (B, T, D)


class GPT2Backbone(nn.Module):
    """Read-in, learned positions, ``layers`` pre-norm blocks, final LayerNorm and read-out.

    Args:
        d_in: token width d of the task.  d_out: output width per token (1 for icl's scalar prediction).
        embed_dim: residual width D (Garg et al.: 256).  attention: every block's attention (rank must divide D;
        causal for causal tasks).  layers: number of blocks (Garg et al.: 12).
        ffn_dim: MLP hidden width (GPT-2: 4 D).  max_length: number of learned positions (>= sequence length).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        embed_dim: int,
        attention: AttentionSpec,
        layers: int,
        ffn_dim: int,
        max_length: int,
    ) -> None:
        super().__init__()
        self.d_in = check_int("d_in", d_in, minimum=1)
        self.d_out = check_int("d_out", d_out, minimum=1)
        self.embed_dim = check_int("embed_dim", embed_dim, minimum=1)
        check_int("layers", layers, minimum=1)
        self.max_length = check_int("max_length", max_length, minimum=1)
        self.read_in = nn.Linear(d_in, embed_dim)
        self.positions = nn.Embedding(max_length, embed_dim)
        nn.init.normal_(self.positions.weight, std=0.02)  # GPT-2's initialisation of the position table
        self.blocks = nn.ModuleList(PreNormBlock(embed_dim, attention, ffn_dim=ffn_dim) for _ in range(layers))
        self.ln_f = nn.LayerNorm(embed_dim)
        self.read_out = nn.Linear(embed_dim, d_out)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Args: tokens (B, T, d_in) with T <= max_length. Returns: (B, T, d_out)."""
        if tokens.ndim != 3 or tokens.shape[-1] != self.d_in:
            raise ValueError(f"tokens must have shape (B, T, {self.d_in}), got {tuple(tokens.shape)}")
        T = tokens.shape[1]
        if T > self.max_length:
            raise ValueError(f"sequence length must be <= max_length = {self.max_length}, got {T}")
        index = torch.arange(T, device=tokens.device)  # (T,)
        h = self.read_in(tokens) + self.positions(index)[None]  # (B, T, D): read-in plus positions broadcast over B
        for block in self.blocks:
            h = block(h)  # (B, T, D)
        return self.read_out(self.ln_f(h))  # (B, T, d_out)
