"""Argument types and input checks shared by several `attnrank` subcommands.

Everything here runs before a command computes or writes anything (docs/reliability.md): number syntax
(``temperature_argument``, ``finite_float``), output paths (``check_output_file``, ``check_output_dir``) and memory
(``check_memory``: the estimated bytes of a request against the memory available now). Each refusal is a
``ValueError`` (or ``argparse.ArgumentTypeError`` inside argparse) whose message names the flag as typed.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

PARAMETER_ALIASES = {
    "r": "rank",
    "H": "heads",
    "n_samples": "samples",
    "epsilon": "eps",
    "betas[0]": "beta1",
    "betas[1]": "beta2",
    "out_dir": "out",
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

    Refused: an empty path, an existing directory, a parent that is a file, and a location where a file cannot be
    created (the nearest existing ancestor is probed with a temporary file, which is removed at once).
    """
    if str(path).strip() == "":
        raise ValueError(f"{flag} must name a file, got an empty path")
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {str(path)!r} is a directory; name a file inside it")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{flag} {str(path)!r} exists and is not writable")
    _check_creatable(path.parent, flag, str(path))
    return path


def check_output_dir(path: str | Path, flag: str = "--out") -> Path:
    """Validate a directory the command will create or write into, before anything is computed or created."""
    if str(path).strip() == "":
        raise ValueError(f"{flag} must name a directory, got an empty path")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {str(path)!r} exists and is not a directory")
    _check_creatable(path, flag, str(path))
    return path


def _check_creatable(directory: Path, flag: str, shown: str) -> None:
    """The nearest existing ancestor of ``directory`` must be a directory where a file can be created."""
    ancestor = directory if str(directory) else Path(".")
    while not ancestor.exists():
        if ancestor.is_symlink():  # a dangling link: the directory can never be created through it
            raise ValueError(f"{flag} {shown!r}: {str(ancestor)!r} is a broken symbolic link")
        parent = ancestor.parent
        if parent == ancestor:
            break
        ancestor = parent
    if not ancestor.is_dir():
        raise ValueError(f"{flag} {shown!r}: {str(ancestor)!r} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {shown!r}: cannot write in {str(ancestor)!r} ({exc.strerror or exc})") from exc


def available_memory() -> int:
    """Bytes of memory available now: Linux MemAvailable, else free pages (os.sysconf), else 4 GiB."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return 4 * 2**30


def format_bytes(n: float) -> str:
    """``1.5 GiB`` style."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def check_memory(bytes_needed: float, what: str, flag: str) -> None:
    """Refuse a request whose estimated memory exceeds what is available now, naming the estimate and the flag.

    Args:
        bytes_needed: an upper estimate of the bytes the request allocates (may be astronomically large).
        what: what the bytes hold, e.g. "the d x d weight matrices".
        flag: the flag(s) that set the size, as typed (e.g. "--d").
    """
    available = available_memory()
    if not math.isfinite(bytes_needed) or bytes_needed > available:
        needed = "more than can be counted" if not math.isfinite(bytes_needed) else format_bytes(bytes_needed)
        raise ValueError(
            f"{flag}: {what} need about {needed}, more than the {format_bytes(available)} of memory available; "
            "use smaller sizes"
        )
