"""Weight files: safetensors with validated tensor names, shapes, dtypes and metadata.

Two layouts, named by the metadata key ``layout``:

``single-layer`` (one layer of H rank-r heads on d-dimensional tokens; scores ``temperature * <Q_h y, K_h x_i>``):
    Q (H, r, d), K (H, r, d), V (H, d, d), all float64, and optionally ``score_bias`` (H, N): a per-head, per-position
    additive score term (scores ``temperature * (<Q_h y, K_h x_i> + score_bias[h, i])``), which needs metadata ``N``.
    Required metadata: construction, d, r, H, temperature, predicted_error, version, layout.

``multi-layer`` (the theory transformer of `theory.multilayer`: residual streams of dimension
D = d + p, ``embed_dim``):
    ``layers.{l}.Q`` (H_l, r, D), ``layers.{l}.K`` (H_l, r, D), ``layers.{l}.V`` (H_l, D, D) for l = 0 .. L-1,
    ``context_codes`` (N, p) (positional/scratch coordinates concatenated to the context tokens),
    ``query_code`` (p,) (the same for the query token) and ``readout`` (d, D) (query's final stream -> R^d).
    Required metadata: construction, d, p, N, L, H (per-layer head counts, comma separated), r, temperature,
    predicted_error, version, layout, update ("query": only the query's stream is updated; "all": every token's).

Metadata values are strings on disk; here they are parsed strictly: integers are plain decimal digits, floats plain
decimal or scientific numbers (``inf`` = hardmax, ``nan`` = unknown prediction), ``H`` one integer for a single-layer
file and one per layer (comma separated) for a multi-layer file. Extra metadata keys are kept and returned. Loading
checks the file rather than trusting it, and refuses anything that does not match, naming the file and the field
(docs/reliability.md): the layout, task and key law must be known; d, r, H, N, p, L positive and within
`MAX_METADATA_INT`, r <= d (r <= d + p for multi-layer files); temperature > 0 and at most float32's largest value
(or inf); predicted_error nan or a finite number >= 0; the tensor names, dtypes and shapes are compared with the
metadata from the file's header before any tensor is read (so metadata such as L = 10^9 allocates nothing); every
value must be finite and within float32's range (the torch models load the weights as float32).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save as serialize

from constructions.eval_tasks import EVAL_TASKS
from theory.sphere import KEY_KINDS
from theory.validation import check_existing_file, check_instance, check_output_file

FORMAT_VERSION = "1"
LAYOUTS = ("single-layer", "multi-layer")
UPDATE_MODES = ("query", "all")

_INT_KEYS = {"d", "r", "H", "N", "p", "L", "bias_m"}
_FLOAT_KEYS = {"temperature", "predicted_error", "bias_delta"}
_POSITIVE_KEYS = ("d", "r", "N", "L", "bias_m")
MAX_METADATA_INT = 2**31 - 1
"""Largest d, r, H, N, p, L a weight file may name (the tensors must match them in any case)."""
FLOAT32_MAX = float(np.finfo(np.float32).max)
_INT_TEXT = re.compile(r"-?[0-9]{1,12}")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?inf|nan")
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


_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64"}


class WeightFileError(ValueError):
    """A weight file that cannot be used: wrong names, shapes, dtypes or metadata."""


@dataclass
class WeightFile:
    """A validated weight file: its tensors (float64 numpy arrays) and parsed metadata.

    Built by hand, it is checked like a file on disk (the tensors converted to float64, metadata values parsed as
    `load_weights` parses them, ``version`` filled in); a mismatch raises `WeightFileError` naming the field, wrong
    types a TypeError.
    Functions that take a WeightFile check it again (`check_weight_file`): its dicts may have been changed since.
    """

    tensors: dict[str, npt.NDArray[np.float64]]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tensors, self.metadata = _checked_contents(self.tensors, self.metadata, "WeightFile(tensors, metadata)")

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


def _parse_value(key: str, text: str, path: Path | str) -> Any:
    """A metadata string as its value: strict integers, floats and (``H``) comma-separated integers."""
    if key == "H":
        parts = text.split(",")
        if not all(_INT_TEXT.fullmatch(part) for part in parts):
            raise WeightFileError(f"{path}: metadata {key}={text!r} is not a valid number (integers, comma separated)")
        values = [int(part) for part in parts]
        return values[0] if len(values) == 1 else values
    if key in _INT_KEYS:
        if not _INT_TEXT.fullmatch(text):
            raise WeightFileError(f"{path}: metadata {key}={text!r} is not a valid number (an integer)")
        return int(text)
    if key in _FLOAT_KEYS:
        if not _FLOAT_TEXT.fullmatch(text):
            raise WeightFileError(f"{path}: metadata {key}={text!r} is not a valid number")
        return float(text)
    return text


def _check_metadata(metadata: Mapping[str, Any], path: Path | str) -> str:
    """Check the parsed metadata on its own (before any tensor is looked at); return the layout."""
    layout = metadata.get("layout")
    if layout not in LAYOUTS:
        raise WeightFileError(f"{path}: metadata layout must be one of {LAYOUTS}, got {layout!r}")
    layout = str(layout)
    foreign = [k for k in ("p", "L", "update") if layout == "single-layer" and k in metadata]
    if foreign:
        raise WeightFileError(f"{path}: metadata {', '.join(foreign)} belong to the multi-layer layout, not {layout}")
    missing = [k for k in _REQUIRED_METADATA[layout] if k not in metadata]
    if missing:
        raise WeightFileError(f"{path}: metadata is missing {', '.join(missing)}")
    if str(metadata["version"]) != FORMAT_VERSION:
        raise WeightFileError(
            f"{path}: format version {metadata['version']!r} is not supported (expected {FORMAT_VERSION})"
        )
    if layout == "multi-layer" and metadata["update"] not in UPDATE_MODES:
        raise WeightFileError(f"{path}: metadata update must be one of {UPDATE_MODES}, got {metadata['update']!r}")
    for key in _POSITIVE_KEYS:
        if key in metadata and not 1 <= int(metadata[key]) <= MAX_METADATA_INT:
            raise WeightFileError(f"{path}: metadata {key} must be in [1, {MAX_METADATA_INT}], got {metadata[key]}")
    if "p" in metadata and not 0 <= int(metadata["p"]) <= MAX_METADATA_INT:
        raise WeightFileError(f"{path}: metadata p must be in [0, {MAX_METADATA_INT}], got {metadata['p']}")
    heads = metadata["H"]
    if layout == "single-layer" and not isinstance(heads, int):
        raise WeightFileError(f"{path}: metadata H must be one integer in a single-layer file, got {heads!r}")
    counts = heads if isinstance(heads, list) else [heads]
    if not all(1 <= h <= MAX_METADATA_INT for h in counts):
        raise WeightFileError(f"{path}: metadata H must hold head counts in [1, {MAX_METADATA_INT}], got {heads!r}")
    if layout == "multi-layer" and len(counts) != int(metadata["L"]):
        raise WeightFileError(f"{path}: metadata H lists {len(counts)} head counts but L = {metadata['L']}")
    d, r = int(metadata["d"]), int(metadata["r"])
    embed_dim = d + int(metadata["p"]) if layout == "multi-layer" else d
    if r > embed_dim:
        raise WeightFileError(
            f"{path}: metadata r must be <= {'d + p' if layout == 'multi-layer' else 'd'} = {embed_dim}, got {r}"
        )
    temperature = metadata["temperature"]
    if (
        not isinstance(temperature, float)
        or not (temperature > 0)
        or (math.isfinite(temperature) and temperature > FLOAT32_MAX)
        or temperature == -math.inf
    ):
        raise WeightFileError(
            f"{path}: metadata temperature must be > 0 and at most {FLOAT32_MAX:.4g} (or inf for hardmax), "
            f"got {temperature}"
        )
    predicted = metadata["predicted_error"]
    if not isinstance(predicted, float) or not (math.isnan(predicted) or (math.isfinite(predicted) and predicted >= 0)):
        raise WeightFileError(f"{path}: metadata predicted_error must be nan or a finite number >= 0, got {predicted}")
    if "bias_delta" in metadata and not (math.isfinite(metadata["bias_delta"]) and metadata["bias_delta"] > 0):
        raise WeightFileError(f"{path}: metadata bias_delta must be a finite number > 0, got {metadata['bias_delta']}")
    if "task" in metadata and metadata["task"] not in EVAL_TASKS:
        raise WeightFileError(f"{path}: metadata task must be one of {tuple(EVAL_TASKS)}, got {metadata['task']!r}")
    if "keys" in metadata and metadata["keys"] not in KEY_KINDS:
        raise WeightFileError(f"{path}: metadata keys must be one of {KEY_KINDS}, got {metadata['keys']!r}")
    if "bias_m" in metadata and layout == "single-layer" and heads != 2 * int(metadata["bias_m"]) + 1:
        raise WeightFileError(f"{path}: metadata bias_m = {metadata['bias_m']} needs H = 2 bias_m + 1, got H = {heads}")
    return layout


def _expected_shapes(metadata: Mapping[str, Any], names: set[str]) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape the (checked) metadata call for; the tensor count is compared before the dict is built."""
    layout = metadata["layout"]
    expected_count = 3 * int(metadata["L"]) + 3 if layout == "multi-layer" else len(names)
    if expected_count != len(names):
        raise WeightFileError(
            f"tensor names do not match the {layout} layout: L = {metadata['L']} layers need {expected_count} tensors, "
            f"the file holds {len(names)}"
        )
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
    embed_dim = d + p
    shapes = {"context_codes": (n, p), "query_code": (p,), "readout": (d, embed_dim)}
    for layer, h in enumerate(heads):
        shapes[f"layers.{layer}.Q"] = (h, r, embed_dim)
        shapes[f"layers.{layer}.K"] = (h, r, embed_dim)
        shapes[f"layers.{layer}.V"] = (h, embed_dim, embed_dim)
    return shapes


def _check_layout(
    metadata: Mapping[str, Any], dtypes: Mapping[str, str], shapes: Mapping[str, tuple[int, ...]], path: Path | str
) -> None:
    """Compare tensor names, dtypes (numpy names) and shapes with what the checked metadata call for."""
    layout = _check_metadata(metadata, path)
    try:
        expected = _expected_shapes(metadata, set(shapes))
    except WeightFileError as exc:
        raise WeightFileError(f"{path}: {exc}") from exc
    unexpected = sorted(set(shapes) - set(expected))
    absent = sorted(set(expected) - set(shapes))
    if unexpected or absent:
        raise WeightFileError(
            f"{path}: tensor names do not match the {layout} layout"
            + (f"; missing {', '.join(absent)}" if absent else "")
            + (f"; unexpected {', '.join(unexpected)}" if unexpected else "")
        )
    for name, shape in expected.items():
        if dtypes[name] != "float64":
            raise WeightFileError(f"{path}: tensor {name} must be float64, got {dtypes[name]}")
        if tuple(shapes[name]) != shape:
            raise WeightFileError(f"{path}: tensor {name} must have shape {shape}, got {tuple(shapes[name])}")


def _check_values(tensors: Mapping[str, np.ndarray], path: Path | str) -> None:
    """Every value finite and within float32's range (the torch models hold the weights as float32)."""
    for name, tensor in tensors.items():
        if not np.all(np.isfinite(tensor)):
            raise WeightFileError(f"{path}: tensor {name} contains non-finite values")
        largest = float(np.max(np.abs(tensor))) if tensor.size else 0.0
        if largest > FLOAT32_MAX:
            raise WeightFileError(
                f"{path}: tensor {name} holds values beyond float32's range (max |value| = {largest:.4g} > "
                f"{FLOAT32_MAX:.4g})"
            )


def _validate(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, Any], path: Path | str) -> None:
    dtypes = {name: str(np.asarray(t).dtype) for name, t in tensors.items()}
    _check_layout(metadata, dtypes, {name: tuple(np.shape(t)) for name, t in tensors.items()}, path)
    _check_values(tensors, path)


def _float64_tensors(name: str, tensors: Any) -> dict[str, npt.NDArray[np.float64]]:
    """``tensors`` (a mapping of str -> array-like of real numbers) as C-contiguous float64 arrays (else TypeError)."""
    check_instance(name, tensors, Mapping, "a mapping of tensor names to arrays")
    arrays: dict[str, npt.NDArray[np.float64]] = {}
    for key, value in tensors.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} must have str keys (tensor names), got {type(key).__name__} {key!r}")
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as exc:  # ragged nesting, objects numpy cannot read
            raise TypeError(f"{name}[{key!r}] must be an array of real numbers, got {type(value).__name__}") from exc
        if array.dtype.kind not in "biuf":  # bool, int, uint, float: exactly representable or rounded to float64
            raise TypeError(
                f"{name}[{key!r}] must be an array of real numbers, got {type(value).__name__} of {array.dtype}"
            )
        arrays[key] = np.ascontiguousarray(array, dtype=np.float64)
    return arrays


def _checked_contents(
    tensors: Any, metadata: Any, label: str
) -> tuple[dict[str, npt.NDArray[np.float64]], dict[str, Any]]:
    """(float64 tensors, parsed metadata) of a weight file given in memory, checked like a file on disk.

    Metadata values go through the text form they have on disk and back (``_format_value``, ``_parse_value``), so a
    value is accepted exactly when the same value read from a file would be; a missing ``version`` is this format's
    (as `save_weights` would write it). ``label`` starts every message about the contents.
    """
    arrays = _float64_tensors("tensors", tensors)
    check_instance("metadata", metadata, Mapping, "a mapping of metadata keys to values")
    strange = [key for key in metadata if not isinstance(key, str)]
    if strange:
        raise TypeError(f"metadata must have str keys, got {type(strange[0]).__name__} {strange[0]!r}")
    full = {"version": FORMAT_VERSION, **dict(metadata)}
    parsed = {key: _parse_value(key, _format_value(key, value), label) for key, value in full.items()}
    _validate(arrays, parsed, label)
    return arrays, parsed


def check_weight_file(name: str, value: Any) -> WeightFile:
    """A WeightFile argument whose tensors and metadata are (still) those of a valid file; messages start ``name``.

    Args:
        name: the parameter's name (e.g. "weights").  value: the argument.
    Returns:
        ``value`` unchanged.
    Raises:
        TypeError: not a WeightFile.  WeightFileError (a ValueError): its contents do not form a valid file.
    """
    weights = check_instance(name, value, WeightFile, "a WeightFile (from load_weights)")
    _checked_contents(weights.tensors, weights.metadata, name)
    return weights


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` through a temporary file in the same directory, renamed into place.

    A reader never sees a partial file and a failed write leaves nothing behind; missing parent directories are
    created here. An OSError is raised again naming the parameter ``path``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
    except OSError as exc:
        raise type(exc)(exc.errno, f"path cannot be written ({exc.strerror or exc})", str(path)) from exc


def save_weights(path: str | Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, Any]) -> Path:
    """Validate and write a weight file (atomically). ``version`` is filled in; every other required key must be given.

    Args:
        path: output file; missing parent directories are created.
        tensors: tensor name -> numpy array of real numbers (stored as float64), the names and shapes of the layout.
        metadata: metadata key (str) -> value (numbers, strings; ``H`` a list for multi-layer files).

    Returns:
        the path written.

    Raises:
        TypeError / WeightFileError (a ValueError) naming ``tensors`` or ``metadata``; an OSError naming ``path``
        (checked before anything is written: a directory, an unwritable location, a parent that is a file).
    """
    path = check_output_file("path", path)
    arrays, _ = _checked_contents(tensors, metadata, f"{path} (tensors, metadata)")
    full_metadata = {"version": FORMAT_VERSION, **dict(metadata)}
    data = serialize(arrays, metadata={k: _format_value(k, v) for k, v in full_metadata.items()})
    write_atomically(path, data)
    return path


def load_weights(path: str | Path) -> WeightFile:
    """Read and validate a weight file; raise `WeightFileError` (a ValueError) naming any mismatch.

    Args:
        path: an existing safetensors weight file (FileNotFoundError / IsADirectoryError naming ``path`` otherwise).
    Returns:
        WeightFile.
    """
    path = check_existing_file("path", path)
    try:
        with safe_open(str(path), framework="np") as handle:
            raw_metadata = handle.metadata() or {}
            metadata = {k: _parse_value(k, v, path) for k, v in raw_metadata.items()}
            names = list(handle.keys())
            slices = {name: handle.get_slice(name) for name in names}
            dtypes = {name: _SAFETENSORS_DTYPES.get(s.get_dtype(), s.get_dtype()) for name, s in slices.items()}
            _check_layout(metadata, dtypes, {name: tuple(s.get_shape()) for name, s in slices.items()}, path)
            tensors = {name: handle.get_tensor(name) for name in names}
    except (SafetensorError, OSError, ValueError, TypeError, OverflowError) as exc:
        if isinstance(exc, WeightFileError):
            raise
        raise WeightFileError(f"{path}: not a readable safetensors file ({exc})") from exc
    _check_values(tensors, path)
    return WeightFile(tensors=tensors, metadata=metadata)
