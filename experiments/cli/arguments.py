"""Argument types shared by several `attnrank` subcommands."""

from __future__ import annotations

import argparse


def temperature_argument(text: str) -> float:
    """Parse an inverse temperature (``inf`` = hardmax) for argparse ``type=``.

    Only the syntax is checked here; the range (> 0) is checked by the library function the command calls, so the
    message is the same one-line ValueError as for any other bad value.
    """
    try:
        return float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"must be a number > 0 or inf, got {text!r}") from exc
