"""The units of work of a sweep: one run (RunTask), a pack (RunPack), and what a worker sends back (RunOutcome).

Shared by the driver (`experiments.sweeps.runner`), the process pools (`experiments.sweeps.backends`) and the code that
executes a run in a worker (`experiments.sweeps.execute`); plain data, so it imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunTask:
    """One run to execute: its key (spec hash), kind, spec dictionary and run directory."""

    key: str
    kind: str
    spec: dict[str, Any]
    run_dir: str


@dataclass(frozen=True)
class RunPack:
    """Training tasks whose configs may share a pack (`experiments.packing.unit_key`), trained in one process and one
    step (`training.loop.train_packed`), each in its own run directory with its own checkpoints."""

    tasks: tuple[RunTask, ...]


WorkItem = RunTask | RunPack


@dataclass
class RunOutcome:
    """What a worker sends back: metrics and provenance, or the error text."""

    key: str
    ok: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
