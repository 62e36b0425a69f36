"""How commands print: results as one JSON object with ``--json`` (aligned ``key: value`` lines otherwise), warnings
as one line on stderr; text from files never reaches the terminal raw (`experiments.cli.terminal_text`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from experiments.cli.terminal_text import printable
from experiments.json_files import jsonable


def emit(result: Mapping[str, Any], *, as_json: bool, title: str | None = None, note: str | None = None) -> None:
    """Print ``result`` as one JSON object (``as_json``) or as human-readable lines under an optional title.

    ``note`` (text output only) is printed after the lines: a sentence saying how to read them.
    """
    if as_json:
        print(json.dumps(jsonable(result), allow_nan=False))
        return
    if title:
        print(printable(title))
    width = max((len(printable(k)) for k in result), default=0)
    for key, value in result.items():
        if isinstance(value, float):
            text = f"{value:.6g}"
        else:
            text = printable(value)  # values may come from files (a weight file's metadata): never raw
        print(f"  {printable(key):<{width}}  {text}")
    if note:
        print(printable(note))
    sys.stdout.flush()


def warn(command: str, message: str) -> None:
    """Print one warning line on stderr: ``attnrank COMMAND: warning: MESSAGE`` (control characters escaped)."""
    print(f"attnrank {command}: warning: {printable(message)}", file=sys.stderr)
