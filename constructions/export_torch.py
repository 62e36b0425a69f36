"""Export a single-layer weight file as the state dict of stock ``torch.nn.MultiheadAttention``.

Target: ``nn.MultiheadAttention(embed_dim=d, num_heads=H, batch_first=True)`` called as ``mha(y[:, None], X, X)``
(query = the query token, keys = values = the context). With head_dim = d / H it computes, for head h,

    q_h = W_q^h y,  k_hi = W_k^h x_i,  v_hi = W_v^h x_i           W_q^h, W_k^h, W_v^h: (d/H, d) row blocks of in_proj
    o_h = sum_i softmax_i(<q_h, k_hi> / sqrt(d/H)) v_hi           (d/H,)
    out = sum_h W_o^h o_h                                          W_o^h: (d, d/H) column block h of out_proj

while the weight file's model (constructions.evaluate.weight_file_model) is

    f(X, y) = sum_h sum_i softmax_i(T <Q_h y, K_h x_i>) V_h x_i    Q_h, K_h: (r, d), V_h: (d, d), score scale 1.

They agree exactly when W_q^h^T W_k^h = T sqrt(d/H) Q_h^T K_h and W_o^h W_v^h = V_h, i.e. when, for every head,
rank(Q_h^T K_h) <= d/H and rank(V_h) <= d/H (both factorisations then exist: zero-padding when r <= d/H, else the SVD).
The temperature T (times the file's score scale 1) and the sqrt(d/H) that stock attention divides by are folded into
W_q; all biases are zero. What stock attention cannot represent is refused with a one-line reason:

- hardmax (temperature = inf): stock attention is softmax only;
- score_bias: a per-position additive score is not a weight of the module (only an attn_mask given at call time);
- multi-layer files: several layers with residual streams, codes and a readout are not one attention layer;
- H not dividing d: the module's heads split embed_dim evenly;
- a head whose score form Q_h^T K_h or value map V_h has rank > d/H (e.g. V_h = a_h I with H >= 2).

So of the paper's constructions only full-rank with a finite temperature (H = 1, head_dim = d) exports; random-features
(hardmax; also V_h = a_h I of rank d once H >= 2), biased (score biases, hardmax by default, 2 d^2 + 1 heads), and
majority-vote and tournament (multi-layer) are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from safetensors.torch import save

from constructions.weights_io import WeightFile, check_weight_file, write_atomically
from theory.validation import check_choice, check_instance

FloatArray = npt.NDArray[np.float64]

EXPORT_FORMATS = ("torch-mha",)
"""Formats `attnrank export --format` writes."""

STATE_DICT_KEYS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")
"""The state dict of nn.MultiheadAttention(embed_dim=d, num_heads=H, batch_first=True) (kdim = vdim = d, bias)."""


@dataclass(frozen=True)
class TorchMHAExport:
    """A weight file as nn.MultiheadAttention weights.

    Attributes:
        state_dict: float64 tensors under STATE_DICT_KEYS (in_proj_weight (3d, d), in_proj_bias (3d,),
            out_proj.weight (d, d), out_proj.bias (d,)).
        metadata: string metadata stored with the export (module arguments, source construction, folded scale).
    """

    state_dict: dict[str, torch.Tensor]
    metadata: dict[str, str]


def _numerical_rank(matrix: FloatArray) -> tuple[int, FloatArray, FloatArray, FloatArray]:
    """(rank, U, S, Vt) of ``matrix`` with the usual tolerance max(shape) * eps * s_max (numpy.linalg.matrix_rank)."""
    U, S, Vt = np.linalg.svd(matrix)  # (m, m), (k,), (n, n)
    tolerance = max(matrix.shape) * np.finfo(np.float64).eps * (S[0] if S.size else 0.0)
    return int(np.sum(S > tolerance)), U, S, Vt


def _factor(matrix: FloatArray, k: int) -> tuple[FloatArray, FloatArray]:
    """(A (m, k), B (k, n)) with A B = matrix, from the SVD; the caller has checked rank(matrix) <= k."""
    _, U, S, Vt = _numerical_rank(matrix)
    A = np.zeros((matrix.shape[0], k))
    B = np.zeros((k, matrix.shape[1]))
    used = min(k, S.size)
    A[:, :used] = U[:, :used] * S[:used]  # (m, used): singular vectors scaled by their values
    B[:used] = Vt[:used]  # (used, n)
    return A, B


def unrepresentable_reasons(weights: WeightFile) -> list[str]:
    """Why stock nn.MultiheadAttention(embed_dim=d, num_heads=H) cannot compute the file exactly ([] if it can)."""
    if weights.layout != "single-layer":
        return [
            f"a {weights.layout} file ({weights.metadata.get('L', '?')} layers with residual streams, positional "
            "codes and a readout) is not one nn.MultiheadAttention layer"
        ]
    reasons = []
    if math.isinf(weights.temperature):
        reasons.append("hardmax (temperature = inf): nn.MultiheadAttention computes softmax only")
    if "score_bias" in weights.tensors:
        reasons.append("score_bias: per-position score biases are not weights of nn.MultiheadAttention")
    Q, K, V = weights.tensors["Q"], weights.tensors["K"], weights.tensors["V"]
    heads, _, d = Q.shape
    if d % heads != 0:
        reasons.append(f"num_heads must divide embed_dim, but H = {heads} does not divide d = {d}")
        return reasons
    head_dim = d // heads
    for h in range(heads):
        score_rank = _numerical_rank(Q[h].T @ K[h])[0]  # rank of the (d, d) score form Q_h^T K_h
        if score_rank > head_dim:
            reasons.append(f"head {h}'s score form Q^T K has rank {score_rank} > head_dim = d/H = {head_dim}")
            break
    for h in range(heads):
        value_rank = _numerical_rank(V[h])[0]
        if value_rank > head_dim:
            reasons.append(
                f"head {h}'s value map V (d x d) has rank {value_rank} > head_dim = d/H = {head_dim} "
                "(stock heads write d/H values through one shared out_proj)"
            )
            break
    return reasons


def torch_mha_export(weights: WeightFile) -> TorchMHAExport:
    """The nn.MultiheadAttention(embed_dim=d, num_heads=H, batch_first=True) state dict computing the file exactly.

    Args:
        weights: a validated single-layer weight file (constructions.weights_io.load_weights).

    Returns:
        TorchMHAExport (state dict, metadata).

    Raises:
        TypeError: ``weights`` is not a WeightFile.  ValueError: its contents are not a valid file, or one line naming
        why stock attention cannot represent the file (see the module docstring).
    """
    weights = check_weight_file("weights", weights)
    reasons = unrepresentable_reasons(weights)
    if reasons:
        raise ValueError(f"cannot export as torch-mha: {'; '.join(reasons)}")
    Q, K, V = weights.tensors["Q"], weights.tensors["K"], weights.tensors["V"]
    heads, rank, d = Q.shape
    head_dim = d // heads
    # Stock scores are <W_q^h y, W_k^h x> / sqrt(head_dim); the file's are T <Q_h y, K_h x> (score scale 1).
    scale = weights.temperature * 1.0 * math.sqrt(head_dim)
    W_q, W_k, W_v, W_o = np.zeros((d, d)), np.zeros((d, d)), np.zeros((d, d)), np.zeros((d, d))
    for h in range(heads):
        block = slice(h * head_dim, (h + 1) * head_dim)  # head h's rows of W_q/W_k/W_v, columns of W_o
        if rank <= head_dim:
            W_q[block][:rank], W_k[block][:rank] = Q[h], K[h]  # zero-padded to head_dim rows
        else:  # rank(Q_h^T K_h) <= head_dim was checked: factor the (d, d) score form
            A, B = _factor(Q[h].T @ K[h], head_dim)  # (d, hd), (hd, d): A B = Q_h^T K_h
            W_q[block], W_k[block] = A.T, B
        W_q[block] *= scale
        if head_dim == d:
            W_v[block], W_o[:, block] = V[h], np.eye(d)
        else:  # rank(V_h) <= head_dim was checked: V_h = W_o^h W_v^h
            W_o[:, block], W_v[block] = _factor(V[h], head_dim)  # (d, hd), (hd, d)
    state_dict = {
        "in_proj_weight": torch.from_numpy(np.concatenate([W_q, W_k, W_v], axis=0)),  # (3d, d)
        "in_proj_bias": torch.zeros(3 * d, dtype=torch.float64),
        "out_proj.weight": torch.from_numpy(W_o),  # (d, d)
        "out_proj.bias": torch.zeros(d, dtype=torch.float64),
    }
    metadata = {
        "format": "torch-mha",
        "module": f"torch.nn.MultiheadAttention(embed_dim={d}, num_heads={heads}, batch_first=True)",
        "embed_dim": str(d),
        "num_heads": str(heads),
        "head_dim": str(head_dim),
        "call": "mha(query=y[:, None, :], key=X, value=X)",
        "construction": str(weights.metadata["construction"]),
        "temperature": repr(weights.temperature),
        "score_scale": "1.0",
        "q_scale": repr(scale),
    }
    return TorchMHAExport(state_dict=state_dict, metadata=metadata)


def export_weights(weights: WeightFile, fmt: str, path: str | Path) -> TorchMHAExport:
    """Convert ``weights`` to format ``fmt`` (one of EXPORT_FORMATS) and write it as safetensors at ``path``.

    Nothing is written if the file cannot be represented (ValueError). The file is written atomically
    (`constructions.weights_io.write_atomically`): a failed write (a full disk) leaves nothing and raises an OSError
    naming ``path``.
    """
    check_choice("format", fmt, EXPORT_FORMATS)
    export = torch_mha_export(weights)
    data = save({k: v.contiguous() for k, v in export.state_dict.items()}, metadata=export.metadata)
    write_atomically(Path(path), data)
    return export


def _export_sizes(export: TorchMHAExport) -> tuple[int, int]:
    """(d, H) of an export, after checking that its metadata and state dict describe one stock module.

    Raises ValueError naming ``export``: metadata embed_dim / num_heads not positive decimal integers, H not dividing
    d, state-dict keys other than STATE_DICT_KEYS, a value that is not a real floating-point tensor of its shape.
    """
    if not isinstance(export.metadata, dict) or not isinstance(export.state_dict, dict):
        raise ValueError("export must hold a metadata dict and a state_dict dict (from torch_mha_export)")
    sizes = []
    for key in ("embed_dim", "num_heads"):
        text = export.metadata.get(key)
        if not (isinstance(text, str) and text.isdecimal() and 1 <= int(text) <= 2**31 - 1):
            raise ValueError(f"export metadata {key} must be a positive integer written in digits, got {text!r}")
        sizes.append(int(text))
    d, heads = sizes
    if d % heads != 0:
        raise ValueError(f"export metadata num_heads = {heads} must divide embed_dim = {d}")
    if set(export.state_dict) != set(STATE_DICT_KEYS):
        raise ValueError(f"export state_dict must hold exactly {', '.join(STATE_DICT_KEYS)}")
    shapes = {"in_proj_weight": (3 * d, d), "in_proj_bias": (3 * d,), "out_proj.weight": (d, d), "out_proj.bias": (d,)}
    for key, shape in shapes.items():
        tensor = export.state_dict[key]
        if not (isinstance(tensor, torch.Tensor) and tensor.dtype.is_floating_point and tuple(tensor.shape) == shape):
            got = f"{tensor.dtype} {tuple(tensor.shape)}" if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise ValueError(
                f"export state_dict[{key!r}] must be a real floating-point tensor of shape {shape}, got {got}"
            )
    return d, heads


def stock_attention(export: TorchMHAExport, dtype: torch.dtype = torch.float64) -> torch.nn.MultiheadAttention:
    """A stock ``nn.MultiheadAttention(embed_dim=d, num_heads=H, batch_first=True)`` holding ``export``'s weights.

    Call it as ``mha(y[:, None, :], X, X)`` with y (B, d) and X (B, N, d); ``[0][:, 0]`` is the file's f(X, y), (B, d).

    Args:
        export: a TorchMHAExport (from torch_mha_export).
        dtype: a real floating-point torch dtype for the module's parameters.
    Returns:
        the module, in eval mode.
    """
    export = check_instance("export", export, TorchMHAExport, "a TorchMHAExport (from torch_mha_export)")
    dtype = check_instance("dtype", dtype, torch.dtype, "a torch.dtype")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a real floating-point torch.dtype (e.g. torch.float64), got {dtype}")
    d, heads = _export_sizes(export)
    module = torch.nn.MultiheadAttention(embed_dim=d, num_heads=heads, batch_first=True, dtype=dtype)
    module.load_state_dict({k: v.to(dtype) for k, v in export.state_dict.items()})
    return module.eval()
