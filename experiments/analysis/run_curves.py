"""Training curves that travel with a committed store: ``<out>/curves.csv`` beside ``<out>/results.sqlite``.

A run's curve is the (step, epoch-mean training loss) rows of its ``runs/<hash>/metrics.csv``. Run directories hold
checkpoints and are never committed, so a report that reads curves (steps to a target error, a last-quarter gain, a
fitted law per curve) would not regenerate from a fresh clone. The sweep therefore copies every finished run's curve
into one small file, ``curves.csv`` (columns ``hash, step, loss, source``; sorted by hash and step, losses written as
Python's shortest round-trip repr, so the file is deterministic and exact), and readers fall back to it when the run
directory is absent (:func:`run_curve`).

``source`` says where a curve came from: ``run`` (the run's own metrics.csv) or ``re-run <revision>: ...`` for curves
recovered by training a run again after its directory was lost (`scripts/recover_curves.py`; the text records how far
the re-run's best loss lies from the stored one). Reports say when they read re-run curves.

The file is read as untrusted input: a malformed line raises ValueError naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

CURVES_NAME = "curves.csv"
FIELDS = ("hash", "step", "loss", "source")
RUN_SOURCE = "run"

Curve = list[tuple[int, float]]


def read_metrics_curve(metrics_csv: Path) -> tuple[Curve | None, str]:
    """The (step, epoch-mean training loss) rows of a run's metrics.csv, checked.

    Returns:
        (rows, "") or (None, why) when the file is absent or malformed (why names the file and the fields).
    """
    if not metrics_csv.is_file():
        return None, f"no {metrics_csv.name} (run directory absent)"
    try:
        with metrics_csv.open(newline="", encoding="utf-8") as stream:
            rows = list(csv.DictReader(stream))
        curve = [(int(row["step"]), float(row["loss"])) for row in rows]
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, TypeError, ValueError) as exc:
        return None, f"{metrics_csv}: unreadable ({type(exc).__name__}: fields step, loss expected)"
    if not _increasing(curve):
        return None, f"{metrics_csv}: field step must be increasing and >= 1"
    return curve, ""


def _increasing(curve: Curve) -> bool:
    steps = [s for s, _ in curve]
    return bool(curve) and all(s >= 1 for s in steps) and steps == sorted(set(steps))


def load_curves_file(path: Path) -> tuple[dict[str, Curve], dict[str, str]]:
    """The curves of a ``curves.csv`` and each curve's source; ({}, {}) when the file does not exist.

    Raises:
        ValueError: naming the file, the line and the field, for a wrong header, a malformed value, a curve whose
            steps are not increasing, or a run with two sources.
    """
    if not path.is_file():
        return {}, {}
    curves: dict[str, Curve] = {}
    sources: dict[str, str] = {}
    try:
        with path.open(newline="", encoding="utf-8") as stream:
            reader = csv.reader(stream)
            header = next(reader, None)
            if header is None or tuple(header) != FIELDS:
                raise ValueError(f"{path}: line 1: header must be {','.join(FIELDS)}, got {header!r}")
            for number, row in enumerate(reader, start=2):
                if len(row) != len(FIELDS):
                    raise ValueError(f"{path}: line {number}: {len(FIELDS)} fields expected, got {len(row)}")
                key, step_text, loss_text, source = row
                if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
                    raise ValueError(f"{path}: line {number}: field hash must be 64 lowercase hex digits")
                try:
                    step, loss = int(step_text), float(loss_text)
                except ValueError:
                    raise ValueError(f"{path}: line {number}: fields step (int) and loss (float) expected") from None
                if sources.setdefault(key, source) != source:
                    raise ValueError(f"{path}: line {number}: run {key[:10]} has two sources")
                curves.setdefault(key, []).append((step, loss))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path}: unreadable ({type(exc).__name__})") from None
    for key, curve in curves.items():
        if not _increasing(curve):
            raise ValueError(f"{path}: run {key[:10]}: field step must be increasing and >= 1")
    return curves, sources


def write_curves_file(path: Path, curves: Mapping[str, Curve], sources: Mapping[str, str]) -> Path:
    """Write ``curves`` (hash -> rows) with their sources to ``path``, sorted by hash and step (atomically)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # drivers sharing a store each write their own
    with tmp.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(FIELDS)
        for key in sorted(curves):
            for step, loss in curves[key]:
                writer.writerow([key, step, repr(float(loss)) if math.isfinite(loss) else str(loss), sources[key]])
    tmp.replace(path)
    return path


def collect_curves(out: Path, runs_dir: Path, keys: Iterable[str]) -> Path | None:
    """Copy the curve of every run of ``keys`` whose run directory has one into ``out/curves.csv`` (keeping the
    entries already there for runs whose directory is gone); its path, or None when there is no curve at all."""
    path = out / CURVES_NAME
    curves, sources = load_curves_file(path)
    for key in keys:
        curve, _ = read_metrics_curve(runs_dir / key / "metrics.csv")
        if curve is not None:
            curves[key], sources[key] = curve, RUN_SOURCE
    if not curves:
        return None
    return write_curves_file(path, curves, sources)


def run_curve(runs_dir: Path, key: str) -> tuple[Curve | None, str, str]:
    """A run's curve: from ``runs_dir/<key>/metrics.csv`` when present, else from ``runs_dir``'s sibling
    ``curves.csv``. Returns (curve or None, why not, source); source is ``run`` or the curves file's recorded one."""
    curve, why = read_metrics_curve(runs_dir / key / "metrics.csv")
    if curve is not None:
        return curve, "", RUN_SOURCE
    curves, sources = load_curves_file(runs_dir.parent / CURVES_NAME)
    if key in curves:
        return curves[key], "", sources[key]
    return None, f"{why}; no curve in {CURVES_NAME}", ""
