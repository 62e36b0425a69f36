"""Import the state dict of a stock ``torch.nn.MultiheadAttention(d, H)`` as a single-layer weight file.

The inverse of `constructions.export_torch`. The module is read as ``mha(y[:, None], X, X)`` (the query token y
attends to the context X); with head_dim k = d / H its head h computes

    s_hi = <W_q^h y + b_q^h, W_k^h x_i + b_k^h> / sqrt(k)            W_q^h, W_k^h, W_v^h: rows h k .. h k + k - 1
    out  = sum_h W_o^h sum_i softmax_i(s_hi) (W_v^h x_i + b_v^h) + b_o      W_o^h: columns h k .. h k + k - 1

Expanding the score,

    s_hi = [y^T W_q^h^T W_k^h x_i + (W_k^h^T b_q^h)^T x_i + y^T W_q^h^T b_k^h + <b_q^h, b_k^h>] / sqrt(k).

The last two terms do not depend on i, so the softmax cancels them: **b_k never changes the output** and is dropped.
The weights sum to 1, so the value bias adds the constant W_o^h b_v^h. Hence

    out = sum_h sum_i softmax_i(<W_q^h y, W_k^h x_i> / sqrt(k) + e_h^T x_i) V_h x_i + c,
    V_h = W_o^h W_v^h (d, d),   e_h = W_k^h^T b_q^h / sqrt(k) (d,),   c = sum_h W_o^h b_v^h + b_o (d,),

and the weight file's model f(X, y) = sum_h sum_i softmax_i(T <Q_h y, K_h x_i>) V_h x_i equals it exactly when
e_h = 0 for every head and c = 0, with

    Q_h = W_q^h / q_scale,   K_h = W_k^h,   T = q_scale / sqrt(k)    (so that T Q_h^T K_h = W_q^h^T W_k^h / sqrt(k)).

A key-dependent score term e_h^T x_i (it is linear, not bilinear, in the tokens) and a constant output offset c have
no place in a weight file: a state dict with either is refused with the reason. "Zero" means zero up to the rounding
of its own float64 computation (a bound proportional to eps times the norms involved), so biases that are exactly
zero, or that cancel exactly, are accepted.

q_scale: a file written by `attnrank export` records the temperature T and q_scale = T sqrt(k) it folded into W_q
(metadata ``format = torch-mha``); they are checked against each other and undone, so export -> import returns the
file's Q, K, V and T (to float rounding; Q_h and K_h themselves only when the export did not have to factor Q_h^T K_h,
i.e. r <= d/H). Any other state dict gets T = 1 and q_scale = sqrt(k). Query/key rows that are zero in every head
(the zero padding an export adds when r < d/H) contribute nothing to any score and are trimmed, so r is the smallest
rank the heads use in their own basis.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from constructions.export_torch import STATE_DICT_KEYS
from constructions.state_dict_files import StateDictFile, read_state_dict_file
from constructions.weights_io import save_weights
from theory.validation import check_instance, check_int, check_output_file

FloatArray = npt.NDArray[np.float64]

IMPORTED_CONSTRUCTION = "torch-mha-import"
"""The ``construction`` metadata of an imported weight file (its prediction is unknown: predicted_error = nan)."""
_WEIGHT_KEYS = ("in_proj_weight", "out_proj.weight")
_BIAS_KEYS = ("in_proj_bias", "out_proj.bias")
_REFUSED_KEYS = {
    "q_proj_weight": "separate q/k/v projections (kdim or vdim != embed_dim): the keys would not be tokens of width d",
    "k_proj_weight": "separate q/k/v projections (kdim or vdim != embed_dim): the keys would not be tokens of width d",
    "v_proj_weight": "separate q/k/v projections (kdim or vdim != embed_dim): the keys would not be tokens of width d",
    "bias_k": "add_bias_kv=True appends a learned key/value token, which a weight file's context cannot hold",
    "bias_v": "add_bias_kv=True appends a learned key/value token, which a weight file's context cannot hold",
}


@dataclass(frozen=True)
class MHAImport:
    """A stock attention module as a single-layer weight file.

    Attributes:
        tensors: Q (H, r, d), K (H, r, d), V (H, d, d), float64.
        metadata: the weight file's metadata (construction = IMPORTED_CONSTRUCTION, d, r, H, temperature, ...).
        notes: what the import dropped or undid, one sentence each (empty when nothing).
    """

    tensors: dict[str, FloatArray]
    metadata: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _strip_prefix(state: Mapping[str, torch.Tensor], source: str) -> dict[str, torch.Tensor]:
    """The module's own keys: a state dict saved from a larger model (``attn.in_proj_weight``) has its prefix cut."""
    candidates = sorted({key[: -len("in_proj_weight")] for key in state if key.endswith("in_proj_weight")})
    if not candidates:
        raise ValueError(f"{source}: no in_proj_weight key; not the state dict of an nn.MultiheadAttention")
    if len(candidates) > 1:
        shown = ", ".join(repr(c + "in_proj_weight") for c in candidates[:3])
        raise ValueError(f"{source}: several attention modules ({shown}); save the one to import on its own")
    prefix = candidates[0]
    outside = [key for key in state if not key.startswith(prefix)]
    if outside:
        raise ValueError(f"{source}: key {outside[0]!r} lies outside the module {prefix!r} (unexpected key)")
    return {key[len(prefix) :]: value for key, value in state.items()}


def _check_keys(state: Mapping[str, torch.Tensor], d: int, source: str) -> bool:
    """Names and shapes of an nn.MultiheadAttention(d, H) state dict; returns whether it has biases."""
    for key in state:
        if key in _REFUSED_KEYS:
            raise ValueError(f"{source}: key {key!r}: {_REFUSED_KEYS[key]}")
        if key not in STATE_DICT_KEYS:
            raise ValueError(
                f"{source}: unexpected key {key!r} (an nn.MultiheadAttention holds {', '.join(STATE_DICT_KEYS)})"
            )
    for key in _WEIGHT_KEYS:
        if key not in state:
            raise ValueError(f"{source}: missing key {key!r}")
    present = [key in state for key in _BIAS_KEYS]
    if any(present) and not all(present):
        missing = _BIAS_KEYS[present.index(False)]
        raise ValueError(f"{source}: missing key {missing!r} (a module with biases has both {', '.join(_BIAS_KEYS)})")
    expected = {
        "in_proj_weight": (3 * d, d),
        "out_proj.weight": (d, d),
        "in_proj_bias": (3 * d,),
        "out_proj.bias": (d,),
    }
    for key, value in state.items():
        if tuple(value.shape) != expected[key]:
            raise ValueError(
                f"{source}: tensor {key!r} has shape {tuple(value.shape)}, expected {expected[key]} (embed_dim d = {d} "
                "from in_proj_weight's columns)"
            )
    return all(present)


def _export_scale(metadata: Mapping[str, str], d: int, heads: int, source: str) -> tuple[float, float, str | None]:
    """(temperature T, q_scale) recorded by `attnrank export`, checked; (1, sqrt(d/H)) for any other state dict."""
    head_dim = d // heads
    if "format" not in metadata:
        return 1.0, math.sqrt(head_dim), None
    if metadata["format"] != "torch-mha":
        raise ValueError(f"{source}: metadata format is {metadata['format']!r}, expected 'torch-mha' (attnrank export)")
    values: dict[str, float] = {}
    for key in ("embed_dim", "num_heads", "temperature", "q_scale"):
        try:
            values[key] = float(metadata[key])
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{source}: metadata {key} of an attnrank export is missing or not a number") from exc
    if values["embed_dim"] != d:
        raise ValueError(f"{source}: metadata embed_dim = {metadata['embed_dim']} but in_proj_weight has d = {d}")
    if values["num_heads"] != heads:
        raise ValueError(f"num_heads must be {metadata['num_heads']} for {source} (its export metadata), got {heads}")
    temperature, q_scale = values["temperature"], values["q_scale"]
    if not (math.isfinite(temperature) and temperature > 0 and math.isfinite(q_scale) and q_scale > 0):
        raise ValueError(
            f"{source}: metadata temperature and q_scale must be finite and > 0, got {temperature}, {q_scale}"
        )
    expected = temperature * math.sqrt(head_dim)
    if abs(q_scale - expected) > 8 * np.finfo(np.float64).eps * expected:
        raise ValueError(
            f"{source}: metadata q_scale = {q_scale!r} is not temperature x sqrt(d/H) = {expected!r}; damaged export"
        )
    return temperature, q_scale, metadata.get("construction")


def _rounding_bound(size: int, *norms: float) -> float:
    """A bound on the float64 rounding of a sum of ``size`` products whose magnitudes sum to at most sum(norms)."""
    return 2.0 * (size + 1) * float(np.finfo(np.float64).eps) * float(sum(norms))


def torch_mha_import(
    state_dict: Mapping[str, Any], num_heads: int, metadata: Mapping[str, str] | None = None, source: str = "state_dict"
) -> MHAImport:
    """The weight file computing a stock nn.MultiheadAttention(d, num_heads) exactly (see the module docstring).

    Args:
        state_dict: the module's state dict (in_proj_weight (3d, d), out_proj.weight (d, d), and optionally
            in_proj_bias (3d,), out_proj.bias (d,)); a common prefix (``attn.``) is allowed.
        num_heads: H, the module's num_heads (it is not recorded in the weights); must divide d.
        metadata: the file's string metadata (an `attnrank export` file's records the folded temperature).
        source: how errors name the input (the file's path).

    Returns:
        MHAImport (tensors, metadata, notes).

    Raises:
        TypeError: state_dict is not a mapping of tensors.
        ValueError: one line naming the key or the reason the module cannot be represented.
    """
    if not isinstance(state_dict, Mapping) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise TypeError(f"state_dict must be a mapping of names to torch tensors, got {type(state_dict).__name__}")
    check_instance("source", source, str)
    if metadata is not None:
        check_instance("metadata", metadata, Mapping, "a mapping of str to str (a file's metadata), or None")
    state = _strip_prefix(state_dict, source)
    if "in_proj_weight" in state and state["in_proj_weight"].dim() == 2:
        d = int(state["in_proj_weight"].shape[1])
    else:
        shape = tuple(state["in_proj_weight"].shape) if "in_proj_weight" in state else None
        raise ValueError(f"{source}: tensor 'in_proj_weight' has shape {shape}, expected (3d, d)")
    has_bias = _check_keys(state, d, source)
    if d < 2:
        raise ValueError(f"{source}: embed_dim d = {d}; a weight file needs d >= 2")
    heads = check_int("num_heads", num_heads, minimum=1, maximum=d)
    if d % heads != 0:
        raise ValueError(f"num_heads must divide embed_dim d = {d} (heads split it evenly), got {heads}")
    temperature, q_scale, source_construction = _export_scale(metadata or {}, d, heads, source)
    k = d // heads
    arrays = {key: value.detach().to("cpu", torch.float64).numpy() for key, value in state.items()}
    W_q, W_k, W_v = arrays["in_proj_weight"].reshape(3, heads, k, d)  # each (H, k, d): head h's rows
    W_o = arrays["out_proj.weight"].reshape(d, heads, k).transpose(1, 0, 2)  # (H, d, k): head h's columns
    notes: list[str] = []
    if has_bias:
        b_q, b_k, b_v = arrays["in_proj_bias"].reshape(3, heads, k)  # each (H, k)
        b_o = arrays["out_proj.bias"]  # (d,)
        for h in range(heads):
            key_term = W_k[h].T @ b_q[h] / math.sqrt(k)  # (d,): e_h, the key-dependent score term
            bound = _rounding_bound(k, float(np.linalg.norm(W_k[h]) * np.linalg.norm(b_q[h])) / math.sqrt(k))
            if np.linalg.norm(key_term) > bound:
                raise ValueError(
                    f"{source}: in_proj_bias (query part, head {h}) adds the key-dependent score "
                    f"b_q^T W_k x / sqrt(d/H) (norm {np.linalg.norm(key_term):.3g}), which a weight file cannot "
                    "hold; train with bias=False or keep the query bias zero"
                )
        offset = np.einsum("hdk,hk->d", W_o, b_v) + b_o  # (d,): c = sum_h W_o^h b_v^h + b_o
        scale = sum(float(np.linalg.norm(W_o[h]) * np.linalg.norm(b_v[h])) for h in range(heads))
        if np.linalg.norm(offset) > _rounding_bound(d, scale, float(np.linalg.norm(b_o))):
            raise ValueError(
                f"{source}: in_proj_bias (value part) and out_proj.bias add the constant output "
                f"sum_h W_o^h b_v^h + b_o (norm {np.linalg.norm(offset):.3g}), which a weight file cannot hold; "
                "train with bias=False or keep the value and output biases zero"
            )
        if np.any(b_k != 0):
            notes.append("in_proj_bias (key part) dropped: it shifts every key's score equally, so softmax cancels it")
    Q, K = W_q / q_scale, W_k.copy()  # (H, k, d) each: T Q_h^T K_h = W_q^h^T W_k^h / sqrt(k)
    used = np.any((Q != 0) & (K != 0), axis=(0, 2))  # (k,): rows that reach some score
    rank = max(1, int(np.nonzero(used)[0].max()) + 1) if used.any() else 1
    if rank < k:
        notes.append(f"query/key rows {rank}..{k - 1} are zero in every head (export padding) and were trimmed")
    V = np.einsum("hdk,hke->hde", W_o, W_v)  # (H, d, d): V_h = W_o^h W_v^h
    if source_construction is not None:
        notes.append(f"undid the export's q_scale = {q_scale!r} (temperature {temperature!r})")
    file_metadata: dict[str, Any] = {
        "construction": IMPORTED_CONSTRUCTION,
        "layout": "single-layer",
        "d": d,
        "r": rank,
        "H": heads,
        "temperature": temperature,
        "predicted_error": math.nan,
        "source_format": "torch-mha",
        "q_scale": q_scale,
    }
    if source_construction is not None:
        file_metadata["source_construction"] = source_construction
    return MHAImport({"Q": Q[:, :rank].copy(), "K": K[:, :rank].copy(), "V": V}, file_metadata, notes)


def import_torch_mha(path: str | Path, num_heads: int, out: str | Path) -> tuple[MHAImport, StateDictFile]:
    """Read an nn.MultiheadAttention state dict file and write it as a single-layer weight file at ``out``.

    Args:
        path: a ``.pt`` (read with weights_only=True), Lightning ``.ckpt`` or ``.safetensors`` file.
        num_heads: the module's num_heads H.
        out: the weight file to write (nothing is written if the module cannot be represented).

    Returns:
        (the import, the file read): the import's metadata also names the source file and its sha256.

    Raises:
        TypeError, OSError, ValueError: see `read_state_dict_file` and `torch_mha_import`.
    """
    out = check_output_file("out", out)  # before anything is read
    read = read_state_dict_file(path)
    imported = torch_mha_import(read.tensors, num_heads, read.metadata, source=str(read.path))
    metadata = {**imported.metadata, "source": read.path.name, "source_sha256": read.sha256}
    save_weights(out, imported.tensors, metadata)
    return MHAImport(imported.tensors, metadata, imported.notes), read
