"""JSON files the experiments write: plain-JSON conversion of numpy values and non-finite floats, atomic writes.

Shared by run directories (config.json, result.json), the results store and the command line's ``--json`` output,
so that all three spell ``inf`` and ``nan`` the same way and a killed write never leaves a half-written file.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np


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
    """Write a file atomically: ``writer(handle)`` fills a temporary file in the same directory, then os.replace."""
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            writer(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException:
        if os.path.exists(temp_name):
            os.unlink(temp_name)
        raise


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically write a JSON object (non-finite floats as strings)."""
    text = json.dumps(jsonable(data), indent=2, allow_nan=False) + "\n"
    atomic_write_bytes(path, lambda stream: stream.write(text.encode("utf-8")))
