"""Argument types and input checks shared by several `attnrank` subcommands.

Everything here runs before a command computes or writes anything (docs/reliability.md): number syntax
(``temperature_argument``, ``finite_float``), output paths (``check_output_file``, ``check_output_dir``) and memory
(``check_memory``: the estimated bytes of a request against the memory available now; defined with the training
estimate in `experiments.training.memory` and re-exported here). Each refusal is a ``ValueError`` (or
``argparse.ArgumentTypeError`` inside argparse) whose message names the flag as typed.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.training.memory import available_memory, check_memory, format_bytes
from theory.validation import check_output_dir as check_output_dir_argument
from theory.validation import check_output_file as check_output_file_argument

__all__ = [
    "GIVEN",
    "PARAMETER_ALIASES",
    "GivenFlag",
    "GivenSwitch",
    "available_memory",
    "check_memory",
    "check_output_dir",
    "check_output_file",
    "finite_float",
    "format_bytes",
    "given_flags",
    "path_argument",
    "temperature_argument",
]

PARAMETER_ALIASES = {
    "r": "rank",
    "H": "heads",
    "n_samples": "samples",
    "epsilon": "eps",
    "betas[0]": "beta1",
    "betas[1]": "beta2",
    "out_dir": "out",
    "overrides": "set",
    "path": "weights",
    "run_dir": "run_dir",
}
"""Library parameter name -> argparse dest, for naming the flag in an error (``r must ...`` -> ``--rank must ...``)."""

_INFINITY_WORDS = ("inf", "+inf", "infinity", "+infinity")


def temperature_argument(text: str) -> float:
    """Parse an inverse temperature (``inf`` = hardmax) for argparse ``type=``.

    Only the syntax is checked here: a number, or ``inf`` / ``infinity`` typed as such (a literal such as ``1e400``
    that overflows float64 is refused rather than silently becoming hardmax). The range (> 0) is checked by the
    library function the command calls, so the message is the same one-line ValueError as for any other bad value.
    """
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"must be a number > 0 or inf, got {text!r}") from exc
    if math.isinf(value) and text.strip().lower() not in _INFINITY_WORDS:
        raise argparse.ArgumentTypeError(f"{text!r} overflows a float64; type inf for hardmax")
    return value


def finite_float(text: str) -> float:
    """Parse a finite real number for argparse ``type=`` (``nan``, ``inf`` and overflowing literals are refused)."""
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}") from exc
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def path_argument(text: str) -> Path:
    """Parse a path for argparse ``type=``: an empty string is refused (``Path("")`` would silently mean ``.``)."""
    if text.strip() == "":
        raise argparse.ArgumentTypeError("must name a path, got an empty string")
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"must name a path, got {text!r} (contains a NUL byte)")
    return Path(text)


def check_output_file(path: str | Path, flag: str = "--out") -> Path:
    """Validate a file the command will write, before anything is computed; nothing is created here.

    `theory.validation.check_output_file` with its refusal as a ValueError naming ``flag``: an empty path, an existing
    directory, a parent that is a file, and a location where a file cannot be created (the nearest existing ancestor
    is probed with a temporary file, which is removed at once).
    """
    return _flag_refusal(check_output_file_argument, path, flag)


def check_output_dir(path: str | Path, flag: str = "--out") -> Path:
    """Validate a directory the command will create or write into, before anything is computed or created."""
    return _flag_refusal(check_output_dir_argument, path, flag)


def _flag_refusal(check: Callable[[str, Any], Path], path: str | Path, flag: str) -> Path:
    """``check(flag, path)``, an OSError raised as a ValueError with the same text (``FLAG ...: PATH``)."""
    try:
        return check(flag, path)
    except OSError as exc:
        raise ValueError(f"{exc.strerror}: {exc.filename}" if exc.filename else str(exc)) from exc


GIVEN = "given_flags"
"""The namespace attribute listing the destinations of the flags typed on the command line (`GivenFlag`)."""


def _record_given(namespace: argparse.Namespace, dest: str) -> None:
    given = set(getattr(namespace, GIVEN, ()))
    given.add(dest)
    setattr(namespace, GIVEN, given)


class GivenFlag(argparse._StoreAction):
    """argparse's store action that also records that the flag was typed (so a flag can override a config file
    while an untyped flag's default does not)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None):  # type: ignore[no-untyped-def]
        super().__call__(parser, namespace, values, option)
        _record_given(namespace, self.dest)


class GivenSwitch(argparse._StoreTrueAction):
    """argparse's ``store_true`` that also records that the switch was typed (:class:`GivenFlag`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None):  # type: ignore[no-untyped-def]
        super().__call__(parser, namespace, values, option)
        _record_given(namespace, self.dest)


def given_flags(args: argparse.Namespace) -> set[str]:
    """The destinations of the flags typed on the command line (those added with `GivenFlag` / `GivenSwitch`)."""
    return set(getattr(args, GIVEN, ()))
