"""Weight files: safetensors with validated tensor names, shapes, dtypes and metadata.

Two layouts, named by the metadata key ``layout``:

``single-layer`` (one layer of H rank-r heads on d-dimensional tokens; scores ``temperature * <Q_h y, K_h x_i>``):
    Q (H, r, d), K (H, r, d), V (H, d, d), all float64, and optionally ``score_bias`` (H, N): a per-head, per-position
    additive score term (scores ``temperature * (<Q_h y, K_h x_i> + score_bias[h, i])``), which needs metadata ``N``.
    Required metadata: construction, d, r, H, temperature, predicted_error, version, layout.

``multi-layer`` (the theory transformer of `theory.multilayer`: residual streams of width D = d + p):
    ``layers.{l}.Q`` (H_l, r, D), ``layers.{l}.K`` (H_l, r, D), ``layers.{l}.V`` (H_l, D, D) for l = 0 .. L-1,
    ``context_codes`` (N, p) (positional/scratch coordinates concatenated to the context tokens),
    ``query_code`` (p,) (the same for the query token) and ``readout`` (d, D) (query's final stream -> R^d).
    Required metadata: construction, d, p, N, L, H (per-layer head counts, comma separated), r, temperature,
    predicted_error, version, layout, update ("query": only the query's stream is updated; "all": every token's).

Metadata values are strings on disk; here they are parsed: integers, floats (``inf`` = hardmax, ``nan`` = unknown
prediction) and strings. Extra metadata keys are kept and returned. Loading refuses anything that does not match,
naming the problem.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

FORMAT_VERSION = "1"
LAYOUTS = ("single-layer", "multi-layer")
UPDATE_MODES = ("query", "all")

_INT_KEYS = {"d", "r", "H", "N", "p", "L"}
_FLOAT_KEYS = {"temperature", "predicted_error"}
_REQUIRED_METADATA = {
    "single-layer": ("construction", "d", "r", "H", "temperature", "predicted_error", "version", "layout"),
    "multi-layer": (
        "construction",
        "d",
        "p",
        "N",
        "L",
        "H",
        "r",
        "temperature",
        "predicted_error",
        "version",
        "layout",
        "update",
    ),
}


class WeightFileError(ValueError):
    """A weight file that cannot be used: wrong names, shapes, dtypes or metadata."""


@dataclass
class WeightFile:
    """A validated weight file: its tensors (float64 numpy arrays) and parsed metadata."""

    tensors: dict[str, npt.NDArray[np.float64]]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def layout(self) -> str:
        return str(self.metadata["layout"])

    @property
    def temperature(self) -> float:
        return float(self.metadata["temperature"])

    @property
    def predicted_error(self) -> float:
        return float(self.metadata["predicted_error"])

    @property
    def layer_heads(self) -> list[int]:
        """Per-layer head counts (one entry for a single-layer file)."""
        heads = self.metadata["H"]
        return list(heads) if isinstance(heads, (list, tuple)) else [int(heads)]


def _format_value(key: str, value: Any) -> str:
    if key == "H" and isinstance(value, (list, tuple)):
        return ",".join(str(int(v)) for v in value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def _parse_value(key: str, text: str, path: Path) -> Any:
    try:
        if key == "H":
            parts = [int(p) for p in text.split(",")]
            return parts[0] if len(parts) == 1 else parts
        if key in _INT_KEYS:
            return int(text)
        if key in _FLOAT_KEYS:
            return float(text)
    except ValueError as exc:
        raise WeightFileError(f"{path}: metadata {key}={text!r} is not a valid number") from exc
    return text


def _expected_shapes(metadata: Mapping[str, Any], names: set[str]) -> dict[str, tuple[int, ...]]:
    layout = metadata["layout"]
    d, r = int(metadata["d"]), int(metadata["r"])
    if layout == "single-layer":
        h = int(metadata["H"])
        shapes: dict[str, tuple[int, ...]] = {"Q": (h, r, d), "K": (h, r, d), "V": (h, d, d)}
        if "score_bias" in names:
            if "N" not in metadata:
                raise WeightFileError("score_bias needs the metadata key N (the context length)")
            shapes["score_bias"] = (h, int(metadata["N"]))
        return shapes
    p, n, layers = int(metadata["p"]), int(metadata["N"]), int(metadata["L"])
    raw_heads = metadata["H"]
    heads = [int(h) for h in raw_heads] if isinstance(raw_heads, list) else [int(raw_heads)] * layers
    if len(heads) != layers:
        raise WeightFileError(f"metadata H lists {len(heads)} head counts but L = {layers}")
    width = d + p
    shapes = {"context_codes": (n, p), "query_code": (p,), "readout": (d, width)}
    for layer, h in enumerate(heads):
        shapes[f"layers.{layer}.Q"] = (h, r, width)
        shapes[f"layers.{layer}.K"] = (h, r, width)
        shapes[f"layers.{layer}.V"] = (h, width, width)
    return shapes


def _validate(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, Any], path: Path) -> None:
    layout = metadata.get("layout")
    if layout not in LAYOUTS:
        raise WeightFileError(f"{path}: metadata layout must be one of {LAYOUTS}, got {layout!r}")
    missing = [k for k in _REQUIRED_METADATA[str(layout)] if k not in metadata]
    if missing:
        raise WeightFileError(f"{path}: metadata is missing {', '.join(missing)}")
    if str(metadata["version"]) != FORMAT_VERSION:
        raise WeightFileError(
            f"{path}: format version {metadata['version']!r} is not supported (expected {FORMAT_VERSION})"
        )
    if layout == "multi-layer" and metadata["update"] not in UPDATE_MODES:
        raise WeightFileError(f"{path}: metadata update must be one of {UPDATE_MODES}, got {metadata['update']!r}")
    temperature = float(metadata["temperature"])
    if not temperature > 0:
        raise WeightFileError(f"{path}: metadata temperature must be > 0 (or inf for hardmax), got {temperature}")
    for key in ("d", "r", "L", "N"):
        if key in metadata and int(metadata[key]) < 1:
            raise WeightFileError(f"{path}: metadata {key} must be >= 1, got {metadata[key]}")
    try:
        expected = _expected_shapes(metadata, set(tensors))
    except WeightFileError as exc:
        raise WeightFileError(f"{path}: {exc}") from exc
    unexpected = sorted(set(tensors) - set(expected))
    absent = sorted(set(expected) - set(tensors))
    if unexpected or absent:
        raise WeightFileError(
            f"{path}: tensor names do not match the {layout} layout"
            + (f"; missing {', '.join(absent)}" if absent else "")
            + (f"; unexpected {', '.join(unexpected)}" if unexpected else "")
        )
    for name, shape in expected.items():
        tensor = tensors[name]
        if tensor.dtype != np.float64:
            raise WeightFileError(f"{path}: tensor {name} must be float64, got {tensor.dtype}")
        if tuple(tensor.shape) != shape:
            raise WeightFileError(f"{path}: tensor {name} must have shape {shape}, got {tuple(tensor.shape)}")
        if not np.all(np.isfinite(tensor)):
            raise WeightFileError(f"{path}: tensor {name} contains non-finite values")


def save_weights(path: str | Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, Any]) -> Path:
    """Validate and write a weight file. ``version`` is filled in; every other required key must be given."""
    path = Path(path)
    arrays = {name: np.ascontiguousarray(np.asarray(t, dtype=np.float64)) for name, t in tensors.items()}
    full_metadata = {"version": FORMAT_VERSION, **dict(metadata)}
    parsed = {k: _parse_value(k, _format_value(k, v), path) for k, v in full_metadata.items()}
    _validate(arrays, parsed, path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    save_file(arrays, str(path), metadata={k: _format_value(k, v) for k, v in full_metadata.items()})
    return path


def load_weights(path: str | Path) -> WeightFile:
    """Read and validate a weight file; raise `WeightFileError` (a ValueError) naming any mismatch."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(2, "weight file not found", str(path))
    try:
        with safe_open(str(path), framework="np") as handle:
            raw_metadata = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except (SafetensorError, OSError, ValueError) as exc:
        raise WeightFileError(f"{path}: not a readable safetensors file ({exc})") from exc
    metadata = {k: _parse_value(k, v, path) for k, v in raw_metadata.items()}
    _validate(tensors, metadata, path)
    return WeightFile(tensors=tensors, metadata=metadata)
