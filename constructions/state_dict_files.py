"""Read a state dict (names -> float tensors) from a file without unpickling arbitrary objects.

Models trained elsewhere arrive as one of three containers, recognised by their bytes, not by their file name:

- a safetensors file (header length, JSON header, raw tensors): read with ``safetensors``, which never executes code;
  its string metadata is returned alongside the tensors;
- a torch file (``torch.save``: a zip archive, or the legacy pickle stream) holding a bare state dict;
- a PyTorch Lightning checkpoint: a torch file whose top-level dictionary keeps the weights under ``state_dict``
  (next to ``epoch``, ``optimizer_states``, ``hyper_parameters``, ...).

Torch files are read with ``torch.load(weights_only=True)``: only tensors, containers and plain values are rebuilt.
A file that needs anything else (a class of the training code in ``hyper_parameters``, say) is refused with one line
naming what could not be read safely, never loaded with ``weights_only=False``. The fix is to save the state dict
alone where the training code is trusted: ``torch.save(torch.load(CKPT)["state_dict"], "weights.pt")``.

Every refusal is a `StateDictFileError` (a ValueError) naming the file and, where one is at fault, the key: a
top-level entry that is not a tensor, a tensor that is not floating point, sparse, empty of keys, or holds a
non-finite value. Tensors are returned as float64 on the CPU.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from theory.validation import check_existing_file

ZIP_MAGIC = b"PK\x03\x04"
"""The first bytes of a torch file written by ``torch.save`` since torch 1.6 (a zip archive)."""
PICKLE_PROTOCOL_OPCODE = 0x80
"""The first byte of a pickle stream (protocol >= 2): torch's legacy (non-zip) format starts with one."""
LIGHTNING_STATE_KEY = "state_dict"
"""Where a PyTorch Lightning checkpoint keeps the module's weights."""
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
    """

    path: Path
    tensors: dict[str, torch.Tensor]
    container: str
    sha256: str
    metadata: dict[str, str] = field(default_factory=dict)


def _one_line(exc: BaseException) -> str:
    """The first informative line of an exception's message (torch's refusals span several paragraphs)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "Unsupported global" in line or "Unsupported operand" in line:
            line = line.replace("WeightsUnpickler error: ", "")
            return line.split(" was not an allowed global")[0]  # torch's advice to allow it follows: not ours to give
    return lines[0] if lines else type(exc).__name__


def _float_tensors(entries: Mapping[Any, Any], path: Path, where: str) -> dict[str, torch.Tensor]:
    """Every entry of ``entries`` checked to be a finite floating-point tensor, as float64 (the key named if not)."""
    if not entries:
        raise StateDictFileError(f"{path}: {where} holds no tensors")
    tensors: dict[str, torch.Tensor] = {}
    for key, value in entries.items():
        if not isinstance(key, str):
            raise StateDictFileError(f"{path}: {where} has a key that is not a string ({key!r})")
        if not isinstance(value, torch.Tensor):
            raise StateDictFileError(
                f"{path}: {where} entry {key!r} holds a {type(value).__name__}, not a tensor; not a state dict"
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


def _read_torch(path: Path, data: bytes, digest: str) -> StateDictFile:
    """A torch file: ``torch.load(weights_only=True)``; a Lightning checkpoint's ``state_dict`` entry is unwrapped."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols; the refusal below says what matters
            loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Unsupported" not in str(exc):  # a damaged stream rather than an object the safe loader will not build
            raise StateDictFileError(f"{path}: not a readable torch file ({_one_line(exc)})") from exc
        raise StateDictFileError(
            f"{path}: cannot be read safely with torch.load(weights_only=True): {_one_line(exc)} is not built by the "
            "safe loader (an object other than tensors, or a damaged file); save the state dict alone where the code "
            "that wrote it is trusted: torch.save(ckpt['state_dict'], 'weights.pt')"
        ) from exc
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError, zipfile.BadZipFile) as exc:
        raise StateDictFileError(f"{path}: not a readable torch file ({_one_line(exc)})") from exc
    if not isinstance(loaded, Mapping):
        raise StateDictFileError(f"{path}: holds a {type(loaded).__name__}, expected a state dict (a dict of tensors)")
    if LIGHTNING_STATE_KEY in loaded:
        inner = loaded[LIGHTNING_STATE_KEY]
        if not isinstance(inner, Mapping):
            raise StateDictFileError(
                f"{path}: entry {LIGHTNING_STATE_KEY!r} holds a {type(inner).__name__}, expected a dict of tensors"
            )
        tensors = _float_tensors(inner, path, f"entry {LIGHTNING_STATE_KEY!r}")
        return StateDictFile(path, tensors, "Lightning checkpoint", digest)
    return StateDictFile(path, _float_tensors(loaded, path, "the state dict"), "torch state dict", digest)


def _read_safetensors(path: Path, digest: str) -> StateDictFile:
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
            entries = {name: handle.get_tensor(name) for name in handle.keys()}
    except (SafetensorError, OSError, ValueError, TypeError, OverflowError, RuntimeError) as exc:
        raise StateDictFileError(
            f"{path}: neither a torch file nor a readable safetensors file ({_one_line(exc)})"
        ) from exc
    return StateDictFile(path, _float_tensors(entries, path, "the file"), "safetensors", digest, metadata)


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
