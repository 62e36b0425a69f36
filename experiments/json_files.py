"""JSON files the experiments write and read: plain-JSON conversion of numpy values and non-finite floats, atomic
writes, and the one reader of JSON text.

Shared by run directories (config.json, result.json, analysis.json, ...), the results store and the command line's
``--json`` output, so that all three spell ``inf`` and ``nan`` the same way and a killed write never leaves a
half-written file. A failed write names the file it was writing (a full disk says which file did not fit).

JSON we read is untrusted (`read_json_object`, `parse_json_text`): only a regular file is read (a FIFO or a device
would block or never end), at most `MAX_JSON_BYTES` of it, and text nested deeper than `MAX_JSON_DEPTH` levels is
refused before it is parsed (Python's parser recurses once per level: deep enough nesting raised RecursionError, a
traceback rather than a refusal). Every refusal is one ValueError naming the file.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from theory.validation import read_regular_file

MAX_JSON_BYTES = 64 * 2**20
"""The largest JSON file read (64 MiB): a run's files hold a few KiB, a sweep's analysis a few MiB at most."""
MAX_JSON_DEPTH = 32
"""The deepest nesting of arrays and objects accepted; every file the experiments write nests at most 6 levels."""
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats (written as the strings "inf", "-inf", "nan")."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def atomic_write_bytes(path: Path, writer: Callable[[IO[bytes]], Any]) -> None:
    """Write a file atomically: ``writer(handle)`` fills a temporary file in the same directory, then os.replace.

    An OSError of the write (a full disk, a file-size limit) is raised naming ``path``, the file that was being
    written (the temporary file's own error names no file); the temporary file is removed either way.
    """
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            writer(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException as exc:
        if os.path.exists(temp_name):
            os.unlink(temp_name)
        if isinstance(exc, OSError) and not exc.filename:
            raise named_write_error(exc, path) from exc
        raise


def write_text_atomically(path: Path, text: str) -> None:
    """Atomically write ``text`` as UTF-8 (`atomic_write_bytes`: a failed write names the file, leaves nothing)."""
    atomic_write_bytes(path, lambda stream: stream.write(text.encode("utf-8")))


def named_write_error(exc: OSError, path: Path) -> OSError:
    """``exc`` (an OSError of writing, which names no file when a full disk fails a write) naming ``path``."""
    if exc.filename:
        return exc
    code = exc.errno if exc.errno is not None else errno.EIO
    return type(exc)(code, f"cannot write {path.name} ({exc.strerror or exc})", str(path))


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically write a JSON object (non-finite floats as strings)."""
    text = json.dumps(jsonable(data), indent=2, allow_nan=False) + "\n"
    atomic_write_bytes(path, lambda stream: stream.write(text.encode("utf-8")))


def json_depth(text: str) -> int:
    """How deeply ``text``'s arrays and objects nest (0 for a scalar), counted without parsing: strings removed,
    then the running balance of the brackets left."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if not brackets:
        return 0
    codes = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)  # (n,) one byte per bracket
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)  # (n,) +1 opens, -1 closes
    return int(np.cumsum(steps).max())


class JsonTooDeep(ValueError):
    """JSON text nested deeper than the reader accepts (`MAX_JSON_DEPTH`), refused before it is parsed."""


def parse_json_text(text: str, source: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``text`` (read from ``source``, which every refusal names), refused (ValueError; JsonTooDeep
    for the nesting) when it is not JSON or nests deeper than ``max_depth`` levels."""
    depth = json_depth(text)
    if depth > max_depth:
        raise JsonTooDeep(f"{source}: not a readable JSON file (nested {depth} levels deep, more than {max_depth})")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; so is an integer of 5000 digits
        raise ValueError(f"{source}: not a readable JSON file ({' '.join(str(exc).split())})") from None


def read_json_object(path: Path | str, *, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """The JSON object of the file ``path``, read as untrusted input (module docstring); ValueError naming the file
    when it is missing, not a regular file, too large, not UTF-8, not JSON, too deep, or not an object."""
    path = Path(path)
    try:
        text = read_regular_file("file", path, max_bytes=max_bytes).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"{path}: not a readable JSON file ({' '.join(detail.split())})") from None
    value = parse_json_text(text, str(path))
    if not isinstance(value, dict):
        raise ValueError(f"{path}: must hold a JSON object, got {type(value).__name__}")
    return value
