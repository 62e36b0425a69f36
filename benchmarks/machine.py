"""What a benchmark record says about the machine and the tree it ran on: the allocator, the processor, the revision.

Imports nothing but the standard library and `experiments.allocator` (itself standard library only), so that a
benchmark can import it before torch is loaded; the benchmark has put the repository on ``sys.path`` first.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from experiments.allocator import SWITCH

REPOSITORY = Path(__file__).resolve().parents[1]


def allocator_state() -> dict[str, Any]:
    """Whether jemalloc is mapped into this process, and the environment that decided it."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            mapped: bool | None = "jemalloc" in maps.read()
    except OSError:
        mapped = None  # not Linux
    return {
        "jemalloc_mapped": mapped,
        "LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
        "MALLOC_CONF": os.environ.get("MALLOC_CONF", ""),
        SWITCH: os.environ.get(SWITCH, ""),
    }


def git(*command: str) -> str:
    """The output of ``git COMMAND`` in this repository (empty where git is missing or fails)."""
    try:
        return subprocess.run(["git", *command], cwd=REPOSITORY, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def revision() -> str:
    """HEAD's short hash, marked ``(modified)`` when experiments/ or benchmarks/ differ from it."""
    dirty = bool(git("status", "--porcelain", "--", "experiments", "benchmarks"))
    return git("rev-parse", "--short=12", "HEAD") + (" (modified)" if dirty else "")


def processor() -> str:
    """The processor's model name (from /proc/cpuinfo on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
        return names[0] if names else platform.processor()
    except OSError:
        return platform.processor()
