"""Read a state dict (names -> float tensors) from a file without running anything the file names.

Models trained elsewhere arrive as one of three containers, recognised by their bytes, not by their file name:

- a safetensors file (header length, JSON header, raw tensors): read with ``safetensors``, which never executes code;
  its string metadata is returned alongside the tensors;
- a torch file (``torch.save``: a zip archive, or the legacy pickle stream) holding a bare state dict;
- a PyTorch Lightning checkpoint: a torch file whose top-level dictionary keeps the weights under ``state_dict``
  (next to ``epoch``, ``global_step``, ``optimizer_states``, ``lr_schedulers``, ``loops``, ``callbacks``,
  ``hyper_parameters``, ``datamodule_hyper_parameters``, ...).

Torch files are read in three steps, none of which imports or calls anything the file names:

1. `constructions.pickle_scan` finds the file's pickles (checking a zip archive's entries first: stored, inside the
   file; a zip bomb is refused unread) and every global they name, with the standard library's disassembler;
2. a name that runs code (`constructions.inert_globals.refusal`: ``os.system``, ``subprocess.*``, ``builtins.eval``,
   ...), unless torch's safe loader builds it itself, refuses the file in one line naming it: no trainer writes one
   into a checkpoint;
3. ``torch.load(weights_only=True)`` builds tensors and plain containers exactly as it always does, with every other
   global (a class of the training code in ``datamodule_hyper_parameters``, a callback, ``functools.partial``, ...)
   carried as an inert stand-in that holds its name (`constructions.inert_globals.carried_as_names`).

What the import does not use is reported by name, never by value: the top-level entries of a Lightning checkpoint
other than ``state_dict``, and the globals carried as names. The ``hyper_parameters`` and
``datamodule_hyper_parameters`` dictionaries are returned (their values may be stand-ins) for the caller to check.

Every refusal is a `StateDictFileError` (a ValueError) naming the file and, where one is at fault, the key: a
top-level entry that is not a tensor, a tensor that is not floating point, sparse, empty of keys, or holds a
non-finite value. Tensors are returned as float64 on the CPU; `StateDictFile.dtype` says the precision they were
stored in (float64 when any of them was float64, float32 otherwise).
"""

from __future__ import annotations

import hashlib
import io
import pickle
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from constructions.inert_globals import carried_as_names, global_name_of, refusal
from constructions.pickle_scan import (
    PICKLE_PROTOCOL_OPCODE,
    ZIP_MAGIC,
    PickleScanError,
    named_globals,
    torch_pickles,
)
from theory.validation import check_existing_file

LIGHTNING_STATE_KEY = "state_dict"
"""Where a PyTorch Lightning checkpoint keeps the module's weights."""
HYPER_PARAMETER_KEYS = ("hyper_parameters", "datamodule_hyper_parameters")
"""The Lightning checkpoint entries returned to the caller (the module's and the data module's saved arguments)."""
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class StateDictFileError(ValueError):
    """A file that cannot be read as a state dict, safely and completely."""


@dataclass(frozen=True)
class StateDictFile:
    """A state dict read from a file.

    Attributes:
        path: the file.
        tensors: name -> float64 CPU tensor.
        container: "safetensors", "torch state dict" or "Lightning checkpoint" (the ``state_dict`` entry).
        sha256: hex digest of the file's bytes.
        metadata: the safetensors header's string metadata ({} for torch files).
        dtype: the precision the tensors were stored in: torch.float64 when any was float64, else torch.float32
            (float16 and bfloat16 are held exactly by float32).
        skipped_entries: a Lightning checkpoint's top-level keys other than ``state_dict`` and the hyper-parameter
            dictionaries returned (names only).
        carried_globals: the globals the file names that were carried as inert names (sorted), not built.
        hyper_parameters: ``HYPER_PARAMETER_KEYS`` entry -> its dictionary (string keys; values as loaded, stand-ins
            included), for those a Lightning checkpoint holds as dictionaries.
        notes: what was read around (an entry that is not a dictionary, ...), one line each.
    """

    path: Path
    tensors: dict[str, torch.Tensor]
    container: str
    sha256: str
    metadata: dict[str, str] = field(default_factory=dict)
    dtype: torch.dtype = torch.float32
    skipped_entries: tuple[str, ...] = ()
    carried_globals: tuple[str, ...] = ()
    hyper_parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _one_line(exc: BaseException) -> str:
    """The first informative line of an exception's message (torch's refusals span several paragraphs)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "Unsupported global" in line or "Unsupported operand" in line or "WeightsUnpickler error" in line:
            line = line.replace("WeightsUnpickler error: ", "")
            return line.split(" was not an allowed global")[0]  # torch's advice to allow it follows: not ours to give
    return lines[0] if lines else type(exc).__name__


def _describe(value: object) -> str:
    """A value's kind for a message: its type, or the global a stand-in carries."""
    name = global_name_of(value)
    return f"{name} (carried as a name, not loaded)" if name is not None else type(value).__name__


def _stored_dtype(entries: Mapping[Any, Any]) -> torch.dtype:
    """float64 when any tensor of ``entries`` is float64, else float32."""
    wide = any(isinstance(v, torch.Tensor) and v.dtype == torch.float64 for v in entries.values())
    return torch.float64 if wide else torch.float32


def _float_tensors(entries: Mapping[Any, Any], path: Path, where: str) -> dict[str, torch.Tensor]:
    """Every entry of ``entries`` checked to be a finite floating-point tensor, as float64 (the key named if not)."""
    if not entries:
        raise StateDictFileError(f"{path}: {where} holds no tensors")
    tensors: dict[str, torch.Tensor] = {}
    for key, value in entries.items():
        if not isinstance(key, str):
            raise StateDictFileError(f"{path}: {where} has a key that is not a string ({_describe(key)})")
        if not isinstance(value, torch.Tensor):
            raise StateDictFileError(
                f"{path}: {where} entry {key!r} holds a {_describe(value)}, not a tensor; not a state dict"
            )
        if value.layout != torch.strided:
            raise StateDictFileError(f"{path}: tensor {key!r} is {value.layout}, expected a dense tensor")
        if value.dtype not in _FLOAT_DTYPES:
            raise StateDictFileError(f"{path}: tensor {key!r} has dtype {value.dtype}, expected floating point")
        as_float64 = value.detach().to("cpu", torch.float64)
        if not bool(torch.isfinite(as_float64).all()):
            raise StateDictFileError(f"{path}: tensor {key!r} contains non-finite values")
        tensors[key] = as_float64
    return tensors


def _torch_builds(name: str) -> bool:
    """Whether torch's safe loader builds the global ``name`` itself (tensors, storages, dtypes, OrderedDict, ...).

    Read from the table ``torch.serialization.get_unsafe_globals_in_checkpoint`` consults (private in torch 2.13);
    without it every name counts as carried, which changes the report only: torch's own table is looked up first.
    """
    table = getattr(torch._weights_only_unpickler, "_get_allowed_globals", None)
    return table is not None and name in table()


def _load_untrusted(path: Path, data: bytes) -> tuple[Any, tuple[str, ...]]:
    """The object a torch file holds, loaded by torch's safe loader with unknown globals carried as names.

    Returns:
        (the object, the globals carried as names).
    """
    try:
        named = [found for stream in torch_pickles(data) for found in named_globals(stream)]
    except PickleScanError as exc:
        raise StateDictFileError(f"{path}: not a readable torch file ({exc})") from exc
    for found in named:
        reason = None if _torch_builds(found.name) else refusal(found.name)
        if reason is not None:
            raise StateDictFileError(
                f"{path}: refused without loading: it names the global {found.name} ({reason}), which no "
                "trainer writes into a checkpoint"
            )
    for found in named:
        if found.opcode != "GLOBAL":
            raise StateDictFileError(
                f"{path}: the pickle names {found.name} with opcode {found.opcode}, which torch's safe loader does "
                "not read (torch.save writes pickle protocol 2)"
            )
    carried = tuple(sorted({found.name for found in named if not _torch_builds(found.name)}))
    try:
        with carried_as_names(carried), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols; a refusal below says what matters
            loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise StateDictFileError(
            f"{path}: cannot be read with torch's safe loader, even with its globals carried as names: {_one_line(exc)}"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - torch raises many types for damaged files; each is one refusal
        raise StateDictFileError(f"{path}: not a readable torch file ({_one_line(exc)})") from exc
    return loaded, carried


def _read_torch(path: Path, data: bytes, digest: str) -> StateDictFile:
    """A torch file (see the module docstring); a Lightning checkpoint's ``state_dict`` entry is unwrapped."""
    loaded, carried = _load_untrusted(path, data)
    if not isinstance(loaded, Mapping):
        raise StateDictFileError(f"{path}: holds a {_describe(loaded)}, expected a state dict (a dict of tensors)")
    if LIGHTNING_STATE_KEY not in loaded:
        tensors = _float_tensors(loaded, path, "the state dict")
        return StateDictFile(
            path, tensors, "torch state dict", digest, dtype=_stored_dtype(loaded), carried_globals=carried
        )
    inner = loaded[LIGHTNING_STATE_KEY]
    if not isinstance(inner, Mapping):
        raise StateDictFileError(
            f"{path}: entry {LIGHTNING_STATE_KEY!r} holds a {_describe(inner)}, expected a dict of tensors"
        )
    tensors = _float_tensors(inner, path, f"entry {LIGHTNING_STATE_KEY!r}")
    hyper: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for key in HYPER_PARAMETER_KEYS:
        if key not in loaded:
            continue
        value = loaded[key]
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            hyper[key] = dict(value)
        else:
            notes.append(f"{key} holds a {_describe(value)}, not a dictionary of named values: not read")
    others = [key for key in loaded if key != LIGHTNING_STATE_KEY and key not in hyper]
    skipped = tuple(sorted(key if isinstance(key, str) else _describe(key) for key in others))
    return StateDictFile(
        path,
        tensors,
        "Lightning checkpoint",
        digest,
        dtype=_stored_dtype(inner),
        skipped_entries=skipped,
        carried_globals=carried,
        hyper_parameters=hyper,
        notes=tuple(notes),
    )


def _read_safetensors(path: Path, digest: str) -> StateDictFile:
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
            entries = {name: handle.get_tensor(name) for name in handle.keys()}
    except (SafetensorError, OSError, ValueError, TypeError, OverflowError, RuntimeError) as exc:
        raise StateDictFileError(
            f"{path}: neither a torch file nor a readable safetensors file ({_one_line(exc)})"
        ) from exc
    tensors = _float_tensors(entries, path, "the file")
    return StateDictFile(path, tensors, "safetensors", digest, metadata, dtype=_stored_dtype(entries))


def read_state_dict_file(path: str | Path) -> StateDictFile:
    """Read a state dict from a safetensors file, a torch file or a Lightning checkpoint (see the module docstring).

    Args:
        path: the file.

    Returns:
        StateDictFile (float64 tensors, the container found, the file's sha256 and safetensors metadata).

    Raises:
        TypeError: ``path`` is not a path.
        OSError: the file does not exist or cannot be read.
        StateDictFileError: one line naming the file and what is wrong (unsafe, damaged, not a state dict).
    """
    path = check_existing_file("path", path)  # TypeError, FileNotFoundError, IsADirectoryError naming ``path``
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if data[:4] == ZIP_MAGIC or (data[:1] and data[0] == PICKLE_PROTOCOL_OPCODE):
        return _read_torch(path, data, digest)
    return _read_safetensors(path, digest)
