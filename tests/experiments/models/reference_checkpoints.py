"""Reference-encoder state dicts built from stock torch modules, and the reference forward written from its description.

Nothing here imports our models: the state dict is assembled from ``nn.MultiheadAttention`` and ``nn.Linear`` modules
with random weights under the key layout the issue states for the reference implementation
(NoahAmsel/attention-formers, encoders.py), and `reference_forward` computes that encoder's map from the same
description in a few lines with stock ``nn.MultiheadAttention`` modules. Tests compare our imported models with it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def random_reference_state(
    *,
    d: int,
    num_heads: int,
    width: int = 1,
    layers: int = 1,
    ffn_dim: int = 8,
    positional_dim: int = 0,
    max_length: int = 0,
    additive: bool = False,
    bias: bool = True,
    self_attn_copy: bool = True,
    prefix: str = "",
    seed: int = 0,
) -> dict[str, torch.Tensor]:
    """A reference-layout state dict with random float64 weights (biases, norm scales and tables non-trivial).

    Args:
        d: token dimension; the layers work in width D = d + positional_dim.
        num_heads: heads per attention block (must divide D).
        width: c, attention blocks per layer.
        layers: L.
        ffn_dim: F.
        positional_dim: p, rows of the concatenated table (p, max_length).
        max_length: maxN, columns of the positional tables.
        additive: also hold an additive table (d, max_length).
        bias: biases everywhere or nowhere.
        self_attn_copy: include the registered but unused self_attn.* copy of each layer.
        prefix: put before every key.
        seed: seed of the torch.Generator drawing every weight.
    """
    generator = torch.Generator().manual_seed(seed)
    D = d + positional_dim

    def draw(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return scale * torch.randn(*shape, generator=generator, dtype=torch.float64)

    state: dict[str, torch.Tensor] = {}
    for layer in range(layers):
        where = f"{prefix}encoder.layers.{layer}."
        blocks = [
            nn.MultiheadAttention(D, num_heads, bias=bias, batch_first=True, dtype=torch.float64)
            for _ in range(width + 1)
        ]
        for b, block in enumerate(blocks):
            with torch.no_grad():
                for parameter in block.parameters():
                    parameter.copy_(draw(*parameter.shape, scale=D**-0.5 * 1.5))
            name = f"widened_self_attn.{b}." if b < width else "self_attn."
            if b < width or self_attn_copy:
                state.update({where + name + key: value.detach().clone() for key, value in block.state_dict().items()})
        for name, shape in (("linear1", (ffn_dim, D)), ("linear2", (D, ffn_dim))):
            linear = nn.Linear(shape[1], shape[0], bias=bias, dtype=torch.float64)
            with torch.no_grad():
                for parameter in linear.parameters():
                    parameter.copy_(draw(*parameter.shape, scale=shape[1] ** -0.5))
            state.update({f"{where}{name}.{key}": value.detach().clone() for key, value in linear.state_dict().items()})
        for name in ("norm1", "norm2"):
            state[f"{where}{name}.scale"] = 0.5 + torch.rand(1, generator=generator, dtype=torch.float64)  # (1,)
    state[f"{prefix}positional_encodings"] = draw(positional_dim, max_length)  # (p, maxN)
    if additive:
        state[f"{prefix}additive_positional"] = draw(d, max_length, scale=0.3)
    return state


def reference_forward(
    state: dict[str, torch.Tensor], X: torch.Tensor, num_heads: int, prefix: str = ""
) -> torch.Tensor:
    """The reference encoder on X (B, d, N) -> (B, d, N), from the layout's description, with stock modules."""
    s = {key[len(prefix) :]: value for key, value in state.items()}
    B, d, N = X.shape
    if "additive_positional" in s:
        X = X + s["additive_positional"][:, :N]  # (B, d, N)
    if s["positional_encodings"].shape[0] > 0:  # p > 0: codes concatenated below the tokens
        X = torch.cat([X, s["positional_encodings"][:, :N].expand(B, -1, -1)], dim=1)  # (B, D, N)
    x = X.permute(0, 2, 1)  # (B, N, D)
    D = x.shape[-1]
    layer = 0
    while f"encoder.layers.{layer}.linear1.weight" in s:
        w = f"encoder.layers.{layer}."
        blocks = sorted({int(k.split(".")[4]) for k in s if k.startswith(w + "widened_self_attn.")})
        attended = torch.zeros_like(x)
        for b in blocks:
            parts = {
                k[len(f"{w}widened_self_attn.{b}.") :]: v
                for k, v in s.items()
                if k.startswith(f"{w}widened_self_attn.{b}.")
            }
            mha = nn.MultiheadAttention(D, num_heads, bias="in_proj_bias" in parts, batch_first=True, dtype=x.dtype)
            mha.load_state_dict(parts)
            attended = attended + mha(x, x, x, need_weights=False)[0] / len(blocks)  # (B, N, D)
        h = x + attended
        x = s[w + "norm1.scale"] * h / h.norm(dim=-1, keepdim=True)  # (B, N, D)
        hidden = F.relu(F.linear(x, s[w + "linear1.weight"], s.get(w + "linear1.bias")))  # (B, N, F)
        h = x + F.linear(hidden, s[w + "linear2.weight"], s.get(w + "linear2.bias"))
        x = s[w + "norm2.scale"] * h / h.norm(dim=-1, keepdim=True)  # (B, N, D)
        layer += 1
    return x.permute(0, 2, 1)[:, :d, :]  # (B, d, N): the first d coordinates
