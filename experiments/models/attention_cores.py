"""Which softmax attention core computes sum_j softmax_j(scale <q_i, k_j>) v_j for a group of heads, and the
explicit one used on CPUs.

``scaled_dot_product_attention`` is the right core on a GPU. On a CPU, with the paper's short contexts (N = 16) and
head dimensions r >= 2, its blocked kernel spends most of its time on bookkeeping: forward + backward over the
training step's groups of heads (256 sequences, 4 blocks of d / r heads, d = 64, two threads), explicit batched
products and a softmax took 0.44x (r = 64), 0.70x (r = 8), 0.59x (r = 4) and 0.91x (r = 2) of its time. At r = 1
the explicit core was 3x slower (every score is a product of two scalars, so the (B H, N, N) passes dominate and
the blocked kernel's fusion wins), and so was a hand-derived rank-1 core that recomputes the exponentials in
backward instead of storing them (measured 2.7x slower): rank 1 keeps ``scaled_dot_product_attention``.

The explicit core stores each group's (B, h, N, N) weights for backward: with N = 16, B = 256 and d = 64, 1 MB per
group at r = 64 and 8 MB at r = 8, so 16 MB and 134 MB for a whole c = 64 layer between forward and backward.
Both cores are checked against each other and against stock attention in float64, outputs and gradients
(tests/experiments/models/test_attention_layer.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """softmax(scale q k^T) v with explicit products: q (..., Nq, r), k (..., N, r), v (..., N, e) -> (..., Nq, e)."""
    scores = torch.matmul(q if scale == 1.0 else q * scale, k.transpose(-1, -2))  # (..., Nq, N)
    if causal:
        Nq, N = scores.shape[-2:]
        future = torch.ones(Nq, N, dtype=torch.bool, device=scores.device).triu_(1)  # (Nq, N): key j > query i
        scores = scores.masked_fill(future, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)  # (..., Nq, e)


def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """Softmax attention of a group of heads, q, k, v (B, h, N, r) -> (B, h, N, r), by the faster core for the
    device and head dimension (module docstring): explicit on a CPU when r >= 2, else
    ``scaled_dot_product_attention``."""
    if q.device.type == "cpu" and q.shape[-1] >= 2:
        return explicit_attention(q, k, v, scale, causal)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
