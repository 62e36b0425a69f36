"""A store's milestone evaluations: runs evaluated on the recipe's held-out samples at steps short of their end.

A run records its population error on 20,000 held-out samples once, when it ends (``result.json``); the 100k-step
replay runs (issue 47) are also evaluated at 20k, 40k, 60k and 80k from their checkpoints as they pass those steps
(`scripts/milestone_evaluations.py`, one JSON record per run and step). The store keeps them as ``milestones.csv``
beside ``curves.csv`` (`experiments.analysis.sweep_directory.SweepDirectory.milestones`), one row per (run, step):

    hash, step, population_error, population_stderr, population_samples, best_loss, last_epoch_loss, evaluated_by

``best_loss`` and ``last_epoch_loss`` are the run's lowest and last epoch-mean training loss up to ``step`` (from its
curve); ``evaluated_by`` the git revision whose evaluation code ran. Torch-free. The file is read as untrusted input:
every field is checked and a bad one refused with one line naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.json_files import atomic_write_bytes

FIELDS = (
    "hash",
    "step",
    "population_error",
    "population_stderr",
    "population_samples",
    "best_loss",
    "last_epoch_loss",
    "evaluated_by",
)


@dataclass(frozen=True)
class Milestone:
    """One run evaluated at one step (module docstring)."""

    hash: str
    step: int
    population_error: float
    population_stderr: float
    population_samples: int
    best_loss: float
    last_epoch_loss: float
    evaluated_by: str


def _hash(text: str, where: str) -> str:
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"{where}: hash must be 64 lowercase hex digits, got {text[:80]!r}")
    return text


def _integer(text: object, where: str, minimum: int) -> int:
    try:
        value = int(str(text))
    except ValueError:
        raise ValueError(f"{where} must be an integer >= {minimum}, got {str(text)[:80]!r}") from None
    if value < minimum:
        raise ValueError(f"{where} must be an integer >= {minimum}, got {value}")
    return value


def _real(text: object, where: str) -> float:
    try:
        value = float(str(text))
    except ValueError:
        raise ValueError(f"{where} must be a finite number >= 0, got {str(text)[:80]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be a finite number >= 0, got {value!r}")
    return value


def milestone_from(fields: Mapping[str, Any], where: str) -> Milestone:
    """A checked `Milestone` from a CSV row or a watcher's JSON record; ValueError naming ``where`` and the field."""
    missing = [name for name in FIELDS if name not in fields]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    revision = str(fields["evaluated_by"])
    if len(revision) > 64 or not all(c in "0123456789abcdef" for c in revision):
        raise ValueError(f"{where}: evaluated_by must be a git revision (hex digits), got {revision[:80]!r}")
    return Milestone(
        hash=_hash(str(fields["hash"]), where),
        step=_integer(fields["step"], f"{where}: step", 1),
        population_error=_real(fields["population_error"], f"{where}: population_error"),
        population_stderr=_real(fields["population_stderr"], f"{where}: population_stderr"),
        population_samples=_integer(fields["population_samples"], f"{where}: population_samples", 2),
        best_loss=_real(fields["best_loss"], f"{where}: best_loss"),
        last_epoch_loss=_real(fields["last_epoch_loss"], f"{where}: last_epoch_loss"),
        evaluated_by=revision,
    )


def read_milestones(path: Path) -> dict[tuple[str, int], Milestone]:
    """(hash, step) -> milestone of a ``milestones.csv``; {} when the file does not exist."""
    if not path.is_file():
        return {}
    found: dict[tuple[str, int], Milestone] = {}
    with path.open(newline="", encoding="utf-8") as stream:
        reader = csv.DictReader(stream)
        if tuple(reader.fieldnames or ()) != FIELDS:
            raise ValueError(f"{path}: line 1: header must be {','.join(FIELDS)}, got {reader.fieldnames!r}")
        for number, row in enumerate(reader, start=2):
            milestone = milestone_from(row, f"{path}: line {number}")
            key = (milestone.hash, milestone.step)
            if key in found:
                raise ValueError(f"{path}: line {number}: a second row for run {key[0][:12]} at step {key[1]}")
            found[key] = milestone
    return found


def read_watcher_records(directory: Path) -> list[Milestone]:
    """Every ``<hash>/step-<S>.json`` record of a milestone watcher's output directory, checked."""
    records = []
    for path in sorted(directory.glob("*/step-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{path}: not a readable JSON file ({' '.join(str(exc).split())})") from exc
        if not isinstance(data, dict):
            raise ValueError(f"{path}: must hold a JSON object")
        milestone = milestone_from(data, str(path))
        if milestone.hash != path.parent.name or f"step-{milestone.step}.json" != path.name:
            raise ValueError(f"{path}: its hash or step disagrees with its path")
        records.append(milestone)
    return records


def write_milestones(path: Path, milestones: Iterable[Milestone]) -> None:
    """Write ``milestones.csv`` atomically, rows sorted by run and step (floats written with repr, exact)."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(FIELDS)
    for milestone in sorted(milestones, key=lambda m: (m.hash, m.step)):
        row = asdict(milestone)
        writer.writerow([repr(row[name]) if isinstance(row[name], float) else row[name] for name in FIELDS])
    atomic_write_bytes(path, lambda stream: stream.write(text.getvalue().encode("utf-8")))
