"""The version `attnrank --version` prints: the installed distribution's, else the source tree's pyproject.toml."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
"""pyproject.toml of the source tree this module lives in (used when attnrank is not installed)."""

_PROJECT_VERSION = re.compile(r'^\[project\]\s*$(?:(?!^\[).)*?^version\s*=\s*"([^"]+)"', re.MULTILINE | re.DOTALL)
"""``version = "..."`` inside the ``[project]`` table (tomllib needs Python 3.11; we support 3.10)."""


def package_version(distribution: str = "attnrank", pyproject: Path = PYPROJECT) -> str:
    """The version of ``distribution`` from importlib.metadata, falling back to ``[project] version`` of ``pyproject``.

    Returns "unknown" if neither is available.
    """
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        match = _PROJECT_VERSION.search(pyproject.read_text(encoding="utf-8"))
    except OSError:
        return "unknown"
    return match.group(1) if match else "unknown"
