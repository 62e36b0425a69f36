"""Writing and printing the row tables of `attnrank figure` (rows are flat dicts of numbers and strings)."""

from __future__ import annotations

import argparse
import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def int_list(text: str) -> list[int]:
    """Parse comma-separated integers for argparse ``type=`` (``4,6,8``); at least one is required."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one integer, got {text!r}")
    return values


def write_rows_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Write ``rows`` (same keys each) as a CSV file with a header row; returns ``path``."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def markdown_table(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> str:
    """``rows`` as a Markdown table over ``keys`` (floats to 4 significant digits)."""

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(row[key]) for key in keys) + " |" for row in rows]
    return "\n".join(lines)
