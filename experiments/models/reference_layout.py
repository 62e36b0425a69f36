"""The reference implementation's encoder state dict, read into our `PaperEncoder` and written from it.

The reference implementation (NoahAmsel/attention-formers, ``encoders.py``) trains the paper's encoder; its state dict,
as published, holds (one prefix P before every key: ``model.`` in its Lightning checkpoints, none in a bare dict)

    P encoder.layers.{l}.widened_self_attn.{b}.in_proj_weight   (3D, D)   b = 0 .. c-1: c nn.MultiheadAttention
    P encoder.layers.{l}.widened_self_attn.{b}.in_proj_bias     (3D,)     blocks of num_heads heads of dimension r
    P encoder.layers.{l}.widened_self_attn.{b}.out_proj.weight  (D, D)
    P encoder.layers.{l}.widened_self_attn.{b}.out_proj.bias    (D,)
    P encoder.layers.{l}.linear1.weight (F, D), linear1.bias (F,), linear2.weight (D, F), linear2.bias (D,)
    P encoder.layers.{l}.norm1.scale (1,), norm2.scale (1,)        a learned scalar s: x -> s x / ||x||
    P encoder.layers.{l}.self_attn.*                               a registered copy of a block the forward never uses
    P positional_encodings (p, maxN)                               concatenated below the tokens (p = 0: none)
    P additive_positional (d, maxN)                                optional: added to the tokens

(biases absent throughout when trained with bias=False), and computes on X (B, d, N), D = d + p:

    x   = [X + additive_positional[:, :N] ; positional_encodings[:, :N]]  as (B, N, D) tokens
    per layer l (post-norm):  a = (1/c) sum_b MHA_b(x, x, x);   x = s1 (x + a) / ||x + a||;
                              f = W2 relu(W1 x + b1) + b2;       x = s2 (x + f) / ||x + f||
    output: the first d coordinates of every token, (B, d, N).

Our `PaperEncoder` (experiments/models/encoder.py) computes the same map with these correspondences:

- attention: `RankedMultiheadAttention(value="standard", width=c)` with r = D / num_heads (the weights do not record
  num_heads, so it is given). Its ``in_proj_weight`` viewed as (3, c D, D) holds block b's q, k, v rows at
  b D .. (b+1) D - 1 of each part (head h = b num_heads + j is head j of block b), ``out_proj_weight`` (D, c D) block
  b's output map in columns b D .. (b+1) D - 1 and ``out_proj_bias`` (c, D) its bias in row b; the standard value
  averages the c blocks, as the reference does. The score scale 1 / sqrt(r) is nn.MultiheadAttention's.
- norms: `L2Norm.scale` (a 0-d scalar) = the reference's (1,) scale. Ours clamps ||x|| below at 1e-12, the reference's
  at 0: the maps agree unless a token's norm falls below 1e-12.
- positions: concatenated codes become ``positional="concat"`` with p = positional_dim, ``position_table`` (T, p) =
  positional_encodings[:, :T]^T for T = the task's sequence length, and the linear readout set to [I_d | 0] (exactly
  "the first d coordinates"); additive ones become ``positional="additive"`` with ``position_table`` (T, d). A state
  dict with both kinds is refused (our encoder has one kind), as is a table shorter than T.
- biases: a state dict without biases (bias=False) is loaded with zero biases, which computes the same map.

Reading checks the state dict rather than trusting it: every key must belong to the layout (one prefix for all),
layers and blocks are numbered 0, 1, ... without gaps, every layer has the same c, D and F, biases are present
everywhere or nowhere, and every shape matches; each refusal is one line naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from experiments.config import TrainConfig
from experiments.models.encoder import PaperEncoder, PaperEncoderLayer
from experiments.tasks import make_task
from theory.validation import check_int

ATTENTION_PARTS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")
"""The tensors of one nn.MultiheadAttention block (the two biases only with bias=True)."""
LAYER_PARTS = ("linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.scale", "norm2.scale")
"""The feed-forward and norm tensors of one layer."""
BIAS_PARTS = ("in_proj_bias", "out_proj.bias", "linear1.bias", "linear2.bias")
CONCAT_KEY, ADDITIVE_KEY = "positional_encodings", "additive_positional"
_LAYER_KEY = re.compile(r"encoder\.layers\.(\d+)\.(.+)")
_BLOCK_PART = re.compile(r"widened_self_attn\.(\d+)\.(.+)")
_PREFIX = re.compile(r"(.*?)encoder\.layers\.\d+\.")


@dataclass(frozen=True)
class ReferenceLayout:
    """A checked reference-encoder state dict.

    Attributes:
        state: the tensors, keys without the prefix (``encoder.layers.0.linear1.weight``, ``positional_encodings``).
        prefix: the prefix every key of the file carried ("" or e.g. "model.").
        layers: L.
        width: c, attention blocks per layer.
        embed_dim: D = d + p, the token width inside the layers.
        positional_dim: p, rows of the concatenated positional table (0: none).
        ffn_dim: F, the feed-forward width.
        bias: whether the file holds biases.
        additive: whether it holds an additive positional table.
        max_length: columns of its positional table (maxN), or None without positional encodings.
    """

    state: dict[str, torch.Tensor]
    prefix: str
    layers: int
    width: int
    embed_dim: int
    positional_dim: int
    ffn_dim: int
    bias: bool
    additive: bool
    max_length: int | None

    @property
    def d(self) -> int:
        """Token dimension d = D - p of the inputs and outputs."""
        return self.embed_dim - self.positional_dim


def _index(text: str, key: str, source: str) -> int:
    """A layer or block number as written in ``key`` (plain digits without a leading zero)."""
    if text != str(int(text)):
        raise ValueError(f"{source}: unexpected key {key!r} (index {text!r} is not a plain number)")
    return int(text)


def _prefix(keys: list[str], source: str) -> str:
    """The one prefix before ``encoder.layers.`` shared by every key."""
    prefixes = sorted({match.group(1) for key in keys if (match := _PREFIX.match(key))})
    if not prefixes:
        raise ValueError(f"{source}: no encoder.layers.0.* keys; not a reference encoder state dict")
    if len(prefixes) > 1:
        raise ValueError(f"{source}: keys carry several prefixes ({', '.join(repr(p) for p in prefixes[:3])})")
    prefix = prefixes[0]
    outside = [key for key in keys if not key.startswith(prefix)]
    if outside:
        raise ValueError(f"{source}: unexpected key {outside[0]!r} (outside the encoder's prefix {prefix!r})")
    return prefix


def _classify(state: Mapping[str, torch.Tensor], source: str) -> dict[int, dict[str, torch.Tensor]]:
    """Layer number -> that layer's tensors (keys relative to the layer); every key checked to belong."""
    layers: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        if key in (CONCAT_KEY, ADDITIVE_KEY):
            continue
        match = _LAYER_KEY.fullmatch(key)
        if match is None:
            raise ValueError(f"{source}: unexpected key {key!r} (not part of the reference encoder's layout)")
        layer, part = _index(match.group(1), key, source), match.group(2)
        block = _BLOCK_PART.fullmatch(part)
        known = (
            part in LAYER_PARTS
            or (block is not None and block.group(2) in ATTENTION_PARTS)
            or (part.startswith("self_attn.") and part[len("self_attn.") :] in ATTENTION_PARTS)
        )
        if part in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"):
            raise ValueError(
                f"{source}: key {key!r} is a LayerNorm weight; the published encoder normalises with a learned "
                "scalar (norm1.scale), so this file comes from another version of the reference code"
            )
        if not known:
            raise ValueError(f"{source}: unexpected key {key!r} (not part of the reference encoder's layout)")
        if block is not None:
            _index(block.group(1), key, source)
        layers.setdefault(layer, {})[part] = value
    return layers


def _expect(tensors: Mapping[str, torch.Tensor], part: str, shape: tuple[int, ...], where: str, source: str) -> None:
    if part not in tensors:
        raise ValueError(f"{source}: missing key {where + part!r}")
    if tuple(tensors[part].shape) != shape:
        raise ValueError(f"{source}: tensor {where + part!r} has shape {tuple(tensors[part].shape)}, expected {shape}")


def read_reference_layout(state_dict: Mapping[str, torch.Tensor], source: str = "state dict") -> ReferenceLayout:
    """Check a reference-encoder state dict and infer L, c, D, p, F, biases and positional tables from its shapes.

    Args:
        state_dict: name -> tensor (a bare state dict, or a Lightning checkpoint's ``state_dict`` entry).
        source: how errors name the input (the file's path).

    Returns:
        ReferenceLayout.

    Raises:
        TypeError: state_dict is not a mapping of tensors.
        ValueError: one line naming the key that does not fit the layout (see the module docstring).
    """
    if not isinstance(state_dict, Mapping) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise TypeError(f"state_dict must be a mapping of names to torch tensors, got {type(state_dict).__name__}")
    prefix = _prefix(list(state_dict), source)
    state = {key[len(prefix) :]: value for key, value in state_dict.items()}
    layers = _classify(state, source)
    if CONCAT_KEY not in state:
        raise ValueError(f"{source}: missing key {prefix + CONCAT_KEY!r} (the encoder registers it, (p, maxN))")
    table = state[CONCAT_KEY]
    if table.dim() != 2:
        raise ValueError(f"{source}: tensor {prefix + CONCAT_KEY!r} must be (p, maxN), got shape {tuple(table.shape)}")
    p, max_length = int(table.shape[0]), int(table.shape[1])
    count = max(layers) + 1
    first = f"{prefix}encoder.layers.0.widened_self_attn.0."
    zero = layers.get(0, {})
    if "widened_self_attn.0.in_proj_weight" not in zero or zero["widened_self_attn.0.in_proj_weight"].dim() != 2:
        raise ValueError(f"{source}: missing key {first + 'in_proj_weight'!r} (or not a (3D, D) matrix)")
    D = int(zero["widened_self_attn.0.in_proj_weight"].shape[-1])
    if "linear1.weight" not in zero or zero["linear1.weight"].dim() != 2:
        raise ValueError(f"{source}: missing key {prefix + 'encoder.layers.0.linear1.weight'!r} (or not a matrix)")
    F = int(zero["linear1.weight"].shape[0])
    bias = f"widened_self_attn.0.{BIAS_PARTS[0]}" in zero
    width = 1 + max(int(part.split(".")[1]) for part in zero if part.startswith("widened_self_attn."))
    for layer in range(count):
        where = f"{prefix}encoder.layers.{layer}."
        if layer not in layers:
            raise ValueError(
                f"{source}: missing key {where + 'widened_self_attn.0.in_proj_weight'!r} (layers skip {layer})"
            )
        tensors = layers[layer]
        blocks = {part.split(".")[1] for part in tensors if part.startswith("widened_self_attn.")}
        if blocks != {str(b) for b in range(width)}:
            extra = sorted(blocks - {str(b) for b in range(width)}, key=int)
            missing = sorted({str(b) for b in range(width)} - blocks, key=int)
            named = f"widened_self_attn.{(extra or missing)[0]}.in_proj_weight"
            raise ValueError(
                f"{source}: layer {layer} has attention blocks {sorted(blocks, key=int)}, expected 0..{width - 1} "
                f"({'unexpected' if extra else 'missing'} key {where + named!r})"
            )
        shapes: dict[str, tuple[int, ...]] = {
            "linear1.weight": (F, D),
            "linear2.weight": (D, F),
            "norm1.scale": (1,),
            "norm2.scale": (1,),
        }
        if bias:
            shapes.update({"linear1.bias": (F,), "linear2.bias": (D,)})
        attention: dict[str, tuple[int, ...]] = {"in_proj_weight": (3 * D, D), "out_proj.weight": (D, D)}
        if bias:
            attention.update({"in_proj_bias": (3 * D,), "out_proj.bias": (D,)})
        for b in range(width):
            shapes.update({f"widened_self_attn.{b}.{part}": shape for part, shape in attention.items()})
        if any(part.startswith("self_attn.") for part in tensors):
            shapes.update({f"self_attn.{part}": shape for part, shape in attention.items()})
        for part, shape in shapes.items():
            if part in ("norm1.scale", "norm2.scale") and part in tensors and tensors[part].numel() == 1:
                continue  # (1,) as published, or a 0-d scalar
            _expect(tensors, part, shape, where, source)
        unexpected = sorted(set(tensors) - set(shapes))
        if unexpected:
            reason = "a bias in a state dict without biases" if bias is False else "not part of the layout"
            raise ValueError(f"{source}: unexpected key {where + unexpected[0]!r} ({reason})")
    d = D - p
    if d < 2:
        raise ValueError(f"{source}: tensor {prefix + CONCAT_KEY!r} has p = {p} rows, leaving d = D - p = {d} < 2")
    additive = ADDITIVE_KEY in state
    if additive:
        added = state[ADDITIVE_KEY]
        if added.dim() != 2 or added.shape[0] != d:
            raise ValueError(
                f"{source}: tensor {prefix + ADDITIVE_KEY!r} must be (d, maxN) with d = {d}, got {tuple(added.shape)}"
            )
        if p > 0:
            raise ValueError(
                f"{source}: key {prefix + ADDITIVE_KEY!r} next to {p} concatenated positional rows; our encoder "
                "holds one kind of positional encoding, not both"
            )
        max_length = int(added.shape[1])
    return ReferenceLayout(
        state=state,
        prefix=prefix,
        layers=count,
        width=width,
        embed_dim=D,
        positional_dim=p,
        ffn_dim=F,
        bias=bias,
        additive=additive,
        max_length=max_length if (p > 0 or additive) else None,
    )


def reference_config(
    layout: ReferenceLayout,
    num_heads: int,
    task: str,
    N: int | None = None,
    keys: str = "iid",
    max_length: int | None = None,
) -> TrainConfig:
    """The TrainConfig of our encoder that computes the reference encoder ``layout`` on ``task``.

    Args:
        layout: a checked state dict (`read_reference_layout`).
        num_heads: heads per attention block (the reference's ``nhead``; not recorded in the weights); r = D / it.
        task: the task the model was trained on (one of experiments.config.TASKS except icl: the reference encoder
            has no read-out to R).
        N: context length; None infers it from the positional table (sequence length = maxN).
        keys: key law of the nearest task.
        max_length: the sequence length the model was built for (the checkpoint's maxN hyper-parameter), used to
            infer N when the state dict has no positional table to infer it from.

    Returns:
        the config (model "encoder"; training fields at their defaults, so a later `attnrank train` fine-tunes).
    """
    heads = check_int("num_heads", num_heads, minimum=1, maximum=layout.embed_dim)
    if layout.embed_dim % heads != 0:
        raise ValueError(
            f"num_heads must divide the token width D = {layout.embed_dim} (D / num_heads = r), got {heads}"
        )
    if task == "icl":
        raise ValueError("task must not be 'icl' for a reference encoder: it has no read-out to R")
    probe = make_task(task, layout.d, 2 if N is None else N, keys if task == "nearest" else "orthonormal")
    extra = 1 if probe.query_task else 0  # query tasks append the query token
    if N is None:
        length = layout.max_length if layout.max_length is not None else max_length
        if length is None:
            raise ValueError(
                "N must be given: the state dict has no positional table and no maxN hyper-parameter to infer it from"
            )
        if length - extra < 1:
            raise ValueError(f"N must be given: maxN = {length} leaves no context point for task {task}")
        N = length - extra
    N = check_int("N", N, minimum=1)
    if layout.max_length is not None and N + extra > layout.max_length:
        key = layout.prefix + (ADDITIVE_KEY if layout.additive else CONCAT_KEY)
        raise ValueError(
            f"N must be <= {layout.max_length - extra}: task {task} feeds {N + extra} tokens but {key!r} holds "
            f"{layout.max_length} positions"
        )
    positional = "concat" if layout.positional_dim > 0 else ("additive" if layout.additive else "none")
    return TrainConfig(
        task=task,
        d=layout.d,
        N=N,
        keys=keys,
        rank=layout.embed_dim // heads,
        width=layout.width,
        layers=layout.layers,
        positional=positional,
        positional_dim=layout.positional_dim,
        ffn_dim=layout.ffn_dim,
        model="encoder",
    )


def encoder_state_from_reference(layout: ReferenceLayout, sequence_length: int) -> dict[str, torch.Tensor]:
    """The `PaperEncoder` state dict (its own keys) holding the reference weights (see the module docstring).

    Args:
        layout: a checked state dict.
        sequence_length: T, the rows of the positional table to keep (the task's sequence length).

    Returns:
        name -> tensor for ``PaperEncoder.load_state_dict`` (dtype of the file's tensors).
    """
    T = check_int("sequence_length", sequence_length, minimum=1)
    state, D, c, d = layout.state, layout.embed_dim, layout.width, layout.d
    sample = state[f"encoder.layers.0.widened_self_attn.0.{ATTENTION_PARTS[0]}"]
    dtype = sample.dtype  # biases and the readout that the file does not hold are made in the file's dtype
    ours: dict[str, torch.Tensor] = {}
    for layer in range(layout.layers):
        src, dst = f"encoder.layers.{layer}.", f"layers.{layer}."
        blocks = [f"{src}widened_self_attn.{b}." for b in range(c)]
        in_proj = torch.cat([state[b + "in_proj_weight"].view(3, D, D) for b in blocks], dim=1)  # (3, c D, D)
        ours[dst + "self_attn.in_proj_weight"] = in_proj.reshape(3 * c * D, D)  # (3 c D, D): [q | k | v] rows
        ours[dst + "self_attn.out_proj_weight"] = torch.cat([state[b + "out_proj.weight"] for b in blocks], dim=1)
        if layout.bias:
            in_bias = torch.cat([state[b + "in_proj_bias"].view(3, D) for b in blocks], dim=1)  # (3, c D)
            ours[dst + "self_attn.in_proj_bias"] = in_bias.reshape(3 * c * D)  # (3 c D,)
            ours[dst + "self_attn.out_proj_bias"] = torch.stack([state[b + "out_proj.bias"] for b in blocks])  # (c, D)
        else:
            ours[dst + "self_attn.in_proj_bias"] = torch.zeros(3 * c * D, dtype=dtype)
            ours[dst + "self_attn.out_proj_bias"] = torch.zeros(c, D, dtype=dtype)
        for name in ("linear1", "linear2"):
            weight = state[f"{src}{name}.weight"]  # (F, D) or (D, F)
            ours[f"{dst}{name}.weight"] = weight
            bias_key = f"{src}{name}.bias"
            ours[f"{dst}{name}.bias"] = state[bias_key] if layout.bias else torch.zeros(weight.shape[0], dtype=dtype)
        for name in ("norm1", "norm2"):
            ours[f"{dst}{name}.scale"] = state[f"{src}{name}.scale"].reshape(())  # (1,) -> 0-d
    if layout.positional_dim > 0:
        ours["position_table"] = state[CONCAT_KEY][:, :T].T.contiguous()  # (T, p)
        readout = torch.zeros(d, D, dtype=dtype)  # (d, D) = [I_d | 0]: the first d coordinates
        readout[:, :d] = torch.eye(d, dtype=dtype)
        ours["readout.weight"] = readout
    elif layout.additive:
        ours["position_table"] = state[ADDITIVE_KEY][:, :T].T.contiguous()  # (T, d)
    return ours


def reference_state_from_encoder(encoder: PaperEncoder, prefix: str = "") -> dict[str, torch.Tensor]:
    """The reference layout of one of our encoders (the inverse of `encoder_state_from_reference`).

    Args:
        encoder: a PaperEncoder with standard value maps, softmax attention and biases; with concatenated positions
            its readout must be [I_d | 0] (the reference returns the first d coordinates).
        prefix: put before every key ("model." as in the reference's Lightning checkpoints).

    Returns:
        name -> tensor (float64 copies); the unused ``self_attn`` copy of every layer repeats block 0.
    """
    if not isinstance(encoder, PaperEncoder):
        raise TypeError(f"encoder must be a PaperEncoder, got {type(encoder).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    state: dict[str, torch.Tensor] = {}
    D, d = encoder.embed_dim, encoder.d
    for index, layer in enumerate(encoder.layers):
        assert isinstance(layer, PaperEncoderLayer)
        attention = layer.self_attn
        if attention.value != "standard" or attention.attention != "softmax" or not attention.has_bias:
            raise ValueError("encoder must have standard softmax attention with biases (the reference's blocks)")
        if (
            attention.causal
            or attention.temperature != 1.0
            or abs(attention.score_scale * attention.rank**0.5 - 1) > 1e-12
        ):
            raise ValueError("encoder attention must be non-causal with temperature 1 and score scale 1/sqrt(r)")
        c = attention.width
        assert attention.in_proj_bias is not None and attention.out_proj_weight is not None
        assert attention.out_proj_bias is not None
        in_proj = attention.in_proj_weight.detach().double().view(3, c, D, D)  # (3, c, D, D): part, block, row, col
        in_bias = attention.in_proj_bias.detach().double().view(3, c, D)  # (3, c, D)
        out_proj = attention.out_proj_weight.detach().double().view(D, c, D)  # (D, c, D): row, block, col
        where = f"{prefix}encoder.layers.{index}."
        for b in range(c):
            block = {
                "in_proj_weight": in_proj[:, b].reshape(3 * D, D).clone(),  # (3D, D)
                "in_proj_bias": in_bias[:, b].reshape(3 * D).clone(),  # (3D,)
                "out_proj.weight": out_proj[:, b].clone(),  # (D, D)
                "out_proj.bias": attention.out_proj_bias.detach().double()[b].clone(),  # (D,)
            }
            state.update({f"{where}widened_self_attn.{b}.{k}": v for k, v in block.items()})
            if b == 0:
                state.update({f"{where}self_attn.{k}": v.clone() for k, v in block.items()})
        for name in ("linear1", "linear2"):
            linear = getattr(layer, name)
            state[f"{where}{name}.weight"] = linear.weight.detach().double().clone()
            state[f"{where}{name}.bias"] = linear.bias.detach().double().clone()
        for name in ("norm1", "norm2"):
            state[f"{where}{name}.scale"] = getattr(layer, name).scale.detach().double().reshape(1).clone()
    table = encoder.position_table
    if encoder.positional == "concat":
        assert table is not None
        if encoder.readout is not None:
            first = torch.zeros(d, D, dtype=torch.float64)
            first[:, :d] = torch.eye(d, dtype=torch.float64)
            if not torch.equal(encoder.readout.weight.detach().double(), first):
                raise ValueError("encoder's readout is not [I_d | 0]; the reference returns the first d coordinates")
        state[f"{prefix}{CONCAT_KEY}"] = table.detach().double().T.contiguous()  # (p, T)
    else:
        length = 0 if table is None else table.shape[0]
        state[f"{prefix}{CONCAT_KEY}"] = torch.zeros(0, length, dtype=torch.float64)  # (0, maxN): no codes
        if encoder.positional == "additive":
            assert table is not None
            state[f"{prefix}{ADDITIVE_KEY}"] = table.detach().double().T.contiguous()  # (d, T)
    return state
