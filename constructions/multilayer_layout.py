"""The ``multi-layer`` weight-file layout of `theory.multilayer.MultiLayerWeights`: tensor names and metadata.

The layout itself (names, shapes, required metadata) is validated by `constructions.weights_io`; this module maps the
theory transformer's weights to and from it:

    layers.{l}.Q (H_l, r, D), layers.{l}.K (H_l, r, D), layers.{l}.V (H_l, D, D)   for l = 0 .. L-1
    context_codes (N, p), query_code (p,), readout (d, D)                          with D = d + p
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from theory.multilayer import AttentionLayer, MultiLayerWeights

FloatArray = npt.NDArray[np.float64]

_FIXED_NAMES = ("context_codes", "query_code", "readout")


def multilayer_metadata(
    weights: MultiLayerWeights, construction: str, temperature: float, predicted_error: float, update: str = "query"
) -> dict[str, object]:
    """The ``multi-layer`` metadata that ``weights`` determine (d, p, N, L, H, r), plus the given keys."""
    return {
        "construction": construction,
        "d": weights.d,
        "p": weights.p,
        "N": weights.N,
        "L": len(weights.layers),
        "H": weights.layer_heads,
        "r": weights.rank,
        "temperature": temperature,
        "predicted_error": predicted_error,
        "layout": "multi-layer",
        "update": update,
    }


def multilayer_tensors(weights: MultiLayerWeights) -> dict[str, FloatArray]:
    """The tensors of ``weights`` under the ``multi-layer`` layout's names (for weights_io.save_weights)."""
    tensors = {
        "context_codes": weights.context_codes,
        "query_code": weights.query_code,
        "readout": weights.readout,
    }
    for index, layer in enumerate(weights.layers):
        tensors[f"layers.{index}.Q"] = layer.Q
        tensors[f"layers.{index}.K"] = layer.K
        tensors[f"layers.{index}.V"] = layer.V
    return tensors


def multilayer_from_tensors(tensors: Mapping[str, Any]) -> MultiLayerWeights:
    """Validated `MultiLayerWeights` from tensors named as in the ``multi-layer`` layout (ValueError naming any gap)."""
    missing = [name for name in _FIXED_NAMES if name not in tensors]
    if missing:
        raise ValueError(f"tensors is missing {', '.join(missing)}")
    layers = []
    index = 0
    while f"layers.{index}.Q" in tensors:
        names = [f"layers.{index}.{m}" for m in ("Q", "K", "V")]
        absent = [name for name in names if name not in tensors]
        if absent:
            raise ValueError(f"tensors is missing {', '.join(absent)}")
        layers.append(AttentionLayer(*(np.asarray(tensors[name], dtype=np.float64) for name in names)))
        index += 1
    known = set(_FIXED_NAMES) | {f"layers.{i}.{m}" for i in range(index) for m in ("Q", "K", "V")}
    unexpected = sorted(set(tensors) - known)
    if unexpected:
        raise ValueError(f"tensors has unexpected names {', '.join(unexpected)} (layers must be numbered 0 .. L-1)")
    return MultiLayerWeights(
        layers=tuple(layers),
        context_codes=np.asarray(tensors["context_codes"], dtype=np.float64),
        query_code=np.asarray(tensors["query_code"], dtype=np.float64),
        readout=np.asarray(tensors["readout"], dtype=np.float64),
    )
