"""The reference checkpoint's saved hyper-parameters, checked against its state dict and used to fill in flags.

A Lightning checkpoint of the reference implementation keeps the arguments its module and data module were built with
(``hyper_parameters``, ``datamodule_hyper_parameters``). The weights alone do not record the head count; the
hyper-parameters often do, and they restate sizes the shapes also show. Our reading of the names, from the reference
encoder's constructor (``Encoder(dim, total_heads, dim_feedforward, num_layers, rank, bias, positional_dim, maxN)``
and its layer's ``nhead = d_model // rank``, ``width_multiplier = total_heads // nhead``), D = dim + positional_dim:

| key | meaning | checked against |
|---|---|---|
| ``dim`` (either dictionary) | d, the token dimension | D - p of the state dict |
| ``positional_dim`` | p, rows of the concatenated table | the table's rows |
| ``num_layers`` | L | the layers of the state dict |
| ``width_multiplier`` | c, attention blocks per layer | the blocks of layer 0 |
| ``dim_feedforward`` | F | ``linear1.weight`` rows |
| ``maxN`` | columns of the positional tables | ``positional_encodings`` columns (also (0, maxN) when p = 0) |
| ``bias`` | biases present | the state dict's biases |
| ``nheads`` | heads per block (``--num-heads``) | ``--num-heads`` when given; divides D |
| ``rank`` | r = D / nheads | D and ``nheads`` |
| ``total_heads`` | c x nheads | c and ``nheads`` |

Absent keys are not required (a bare state dict has none); a key present with a value of the wrong kind (a string,
a class carried as a name) is refused rather than ignored, as is any disagreement, in one line naming both sides.
From the keys present, `check_hyper_parameters` derives the head count (``nheads``, else D / ``rank``, else
``total_heads`` / c) and ``maxN``: the import uses them when ``--num-heads`` or ``--N`` was not given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from experiments.models.reference_layout import CONCAT_KEY, ReferenceLayout

SIZE_KEYS = ("dim", "positional_dim", "num_layers", "width_multiplier", "dim_feedforward", "maxN")
"""Sizes the shapes also show (see the module docstring)."""
HEAD_KEYS = ("nheads", "rank", "total_heads")
"""Head counts and ranks: not in the weights."""
MODULE_KEYS = "hyper_parameters"
DATAMODULE_KEYS = "datamodule_hyper_parameters"


@dataclass(frozen=True)
class HyperParameterReading:
    """What a checkpoint's hyper-parameters say about the encoder, once checked against its state dict.

    Attributes:
        num_heads: heads per block the hyper-parameters imply (None: they do not say).
        max_length: their maxN (None: absent).
        used: "dictionary.key" -> value, for every key of the table above that was found and checked.
    """

    num_heads: int | None
    max_length: int | None
    used: dict[str, Any] = field(default_factory=dict)


def _integer(value: object, where: str, source: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        shown = repr(value) if isinstance(value, (int, float, str, bool, type(None))) else type(value).__name__
        raise ValueError(f"{source}: {where} is {shown}, expected an integer >= {minimum}")
    return value


def check_hyper_parameters(
    layout: ReferenceLayout,
    hyper: Mapping[str, Mapping[str, Any]],
    source: str,
    num_heads: int | None = None,
) -> HyperParameterReading:
    """Check the hyper-parameters a checkpoint saved against its state dict (and ``num_heads`` if given).

    Args:
        layout: the checked state dict.
        hyper: dictionary name ("hyper_parameters", "datamodule_hyper_parameters") -> its entries.
        source: how errors name the file.
        num_heads: the --num-heads given (None: not given).

    Returns:
        HyperParameterReading.

    Raises:
        ValueError: one line naming the hyper-parameter and the shape or flag it contradicts.
    """
    module = hyper.get(MODULE_KEYS, {})
    data = hyper.get(DATAMODULE_KEYS, {})
    used: dict[str, Any] = {}
    prefix = layout.prefix
    table_columns = int(layout.state[CONCAT_KEY].shape[1])
    shown = {
        "dim": (layout.d, f"the state dict's token dimension d = D - p = {layout.embed_dim} - {layout.positional_dim}"),
        "positional_dim": (layout.positional_dim, f"{prefix + CONCAT_KEY!r} has {layout.positional_dim} rows"),
        "num_layers": (layout.layers, f"the state dict has {layout.layers} layers (encoder.layers.0..)"),
        "width_multiplier": (layout.width, f"layer 0 has {layout.width} attention blocks (widened_self_attn.*)"),
        "dim_feedforward": (layout.ffn_dim, f"linear1.weight has {layout.ffn_dim} rows"),
        "maxN": (table_columns, f"{prefix + CONCAT_KEY!r} has {table_columns} columns"),
    }
    for name, entries in ((MODULE_KEYS, module), (DATAMODULE_KEYS, data)):
        for key in SIZE_KEYS if name == MODULE_KEYS else ("dim",):
            if key not in entries:
                continue
            value = _integer(entries[key], f"{name} {key}", source, 0 if key in ("positional_dim", "maxN") else 1)
            expected, where = shown[key]
            if value != expected:
                raise ValueError(f"{source}: {name} {key} = {value}, but {where}")
            used[f"{name}.{key}"] = value
    if "bias" in module:
        if not isinstance(module["bias"], bool):
            raise ValueError(f"{source}: {MODULE_KEYS} bias is a {type(module['bias']).__name__}, expected True/False")
        if module["bias"] != layout.bias:
            held = "holds biases" if layout.bias else "holds no biases"
            raise ValueError(f"{source}: {MODULE_KEYS} bias = {module['bias']}, but the state dict {held}")
        used[f"{MODULE_KEYS}.bias"] = module["bias"]
    D, c = layout.embed_dim, layout.width
    implied: dict[str, tuple[int, str]] = {}  # key -> (the heads per block it implies, how to say so)
    if "nheads" in module:
        heads = _integer(module["nheads"], f"{MODULE_KEYS} nheads", source, 1)
        implied["nheads"] = (heads, f"nheads = {heads}")
    if "rank" in module:
        rank = _integer(module["rank"], f"{MODULE_KEYS} rank", source, 1)
        if D % rank != 0:
            raise ValueError(f"{source}: {MODULE_KEYS} rank = {rank} does not divide the token width D = {D}")
        implied["rank"] = (D // rank, f"rank = {rank} (D / rank = {D // rank} heads per block)")
    if "total_heads" in module:
        total = _integer(module["total_heads"], f"{MODULE_KEYS} total_heads", source, 1)
        if total % c != 0:
            raise ValueError(f"{source}: {MODULE_KEYS} total_heads = {total} is not a multiple of the {c} blocks")
        implied["total_heads"] = (total // c, f"total_heads = {total} ({total // c} per block of {c})")
    if num_heads is not None:
        for heads, said in implied.values():
            if heads != num_heads:
                raise ValueError(f"{source}: num_heads (--num-heads) = {num_heads}, but {MODULE_KEYS} {said}")
    readings = list(implied.values())
    for heads, said in readings[1:]:
        if heads != readings[0][0]:
            raise ValueError(f"{source}: {MODULE_KEYS} {readings[0][1]} disagrees with {MODULE_KEYS} {said}")
    if readings and D % readings[0][0] != 0:
        raise ValueError(f"{source}: {MODULE_KEYS} {readings[0][1]} does not divide the token width D = {D}")
    used.update({f"{MODULE_KEYS}.{key}": module[key] for key in implied})
    max_length = used.get(f"{MODULE_KEYS}.maxN")
    return HyperParameterReading(readings[0][0] if readings else None, max_length, used)
