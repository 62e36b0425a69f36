"""How commands print: results as one JSON object with ``--json`` (aligned ``key: value`` lines otherwise), warnings
as one line on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from experiments.json_files import jsonable


def emit(result: Mapping[str, Any], *, as_json: bool, title: str | None = None, note: str | None = None) -> None:
    """Print ``result`` as one JSON object (``as_json``) or as human-readable lines under an optional title.

    ``note`` (text output only) is printed after the lines: a sentence saying how to read them.
    """
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
    if note:
        print(note)
    sys.stdout.flush()


def warn(command: str, message: str) -> None:
    """Print one warning line on stderr: ``attnrank COMMAND: warning: MESSAGE``."""
    print(f"attnrank {command}: warning: {message}", file=sys.stderr)
