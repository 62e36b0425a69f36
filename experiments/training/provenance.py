"""Provenance of a run: the git revision of the source tree (and whether it had local edits) and library versions."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import torch

SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The repository root (git commands run here)."""


def _git(*args: str) -> str:
    """stdout of ``git args`` in the source root (raises OSError / SubprocessError on failure)."""
    return subprocess.run(
        ["git", *args], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=10, check=True
    ).stdout


def provenance() -> dict[str, Any]:
    """Git revision, whether tracked files had local edits, and library versions of this process.

    Returns:
        {"git_revision": str ("unknown" outside a git checkout), "git_dirty": bool | None, "versions": {...}}.
    """
    revision, dirty = "unknown", None
    try:
        revision = _git("rev-parse", "HEAD").strip()
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.SubprocessError):
        pass
    versions = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__}
    try:
        versions["attnrank"] = importlib.metadata.version("attnrank")
    except importlib.metadata.PackageNotFoundError:  # not installed: run from the source tree
        versions["attnrank"] = "source"
    return {"git_revision": revision, "git_dirty": dirty, "versions": versions}
