"""How commands print results: one JSON object with ``--json``, aligned ``key: value`` lines otherwise."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

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


def emit(result: Mapping[str, Any], *, as_json: bool, title: str | None = None) -> None:
    """Print ``result`` as one JSON object (``as_json``) or as human-readable lines under an optional title."""
    if as_json:
        print(json.dumps(jsonable(result), allow_nan=False))
        return
    if title:
        print(title)
    width = max((len(str(k)) for k in result), default=0)
    for key, value in result.items():
        if isinstance(value, float):
            text = f"{value:.6g}"
        else:
            text = str(value)
        print(f"  {str(key):<{width}}  {text}")
    sys.stdout.flush()
