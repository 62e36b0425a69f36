"""The format of the training curves that travel with a committed store (``curves.csv`` beside its results store).

A run's curve is the (step, epoch-mean training loss) rows of its ``runs/<hash>/metrics.csv``. Run directories hold
checkpoints and are never committed, so a report that reads curves (steps to a target error, a last-quarter gain, a
fitted law per curve) would not regenerate from a fresh clone. The sweep therefore copies every finished run's curve
into one small file, ``curves.csv`` (columns ``hash, step, loss, source``; sorted by hash and step, losses written as
Python's shortest round-trip repr, so the file is deterministic and exact), and readers fall back to it when the run
directory is absent (`experiments.analysis.sweep_directory.SweepDirectory`, which owns the files' names and
places, reads and collects them with the functions here).

``source`` says where a curve came from: ``run`` (the run's own metrics.csv) or ``re-run <revision>: ...`` for curves
recovered by training a run again after its directory was lost (`scripts/recover_curves.py`; the text records how far
the re-run's best loss lies from the stored one). Reports say when they read re-run curves.

The population curve of a run (the ``population`` column of its metrics.csv: the error on held-out samples at the
epochs where it was measured, issue 38) travels the same way in ``population.csv`` (columns ``hash, step,
population, source``); every function here takes ``column="population"`` for it.

The file is read as untrusted input: a malformed line raises ValueError naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from pathlib import Path

from experiments.json_files import write_text_atomically
from experiments.training.run_directory import METRICS_HEADER, read_metrics_file

CURVE_COLUMNS = ("loss", "population")
"""The metrics.csv columns whose curves travel with a store, each in a file of its own (module docstring)."""
RUN_SOURCE = "run"

Curve = list[tuple[int, float]]


def check_column(column: str) -> str:
    """``column`` when it is one of `CURVE_COLUMNS` (ValueError naming it otherwise)."""
    if column not in CURVE_COLUMNS:
        raise ValueError(f"column must be one of {', '.join(CURVE_COLUMNS)}, got {column!r}")
    return column


def _fields(column: str) -> tuple[str, ...]:
    return ("hash", "step", check_column(column), "source")


def read_metrics_curve(metrics_csv: Path, column: str = "loss") -> tuple[Curve | None, str]:
    """The (step, value) rows of a run's metrics.csv for ``column`` ("loss": the epoch-mean training loss;
    "population": the population error, at the rows where it was measured), read by the format's one reader
    (`experiments.training.run_directory.read_metrics_file`) and checked: every value finite and >= 0.

    Returns:
        (rows, "") or (None, why) when the file is absent or damaged (a non-finite or negative value included: a
        damaged run's curve never replaces a good one), or (for "population") has no measured row (why names the
        file and the fields).
    """
    _fields(column)
    index = METRICS_HEADER.index(column)
    if not metrics_csv.is_file():
        return None, f"no {metrics_csv.name} (run directory absent)"
    try:
        rows = read_metrics_file(metrics_csv)
    except ValueError as exc:
        return None, str(exc)
    curve = [(int(row[0]), float(row[index])) for row in rows if row[index]]
    if len(curve) != len(rows) and column == "loss":
        return None, f"{metrics_csv}: column {column} is empty on some rows"
    bad = next(((step, value) for step, value in curve if not (math.isfinite(value) and value >= 0)), None)
    if bad is not None:
        return None, f"{metrics_csv}: column {column} is {bad[1]!r} at step {bad[0]}; a damaged curve is not used"
    if column != "loss" and not curve:
        return None, f"{metrics_csv}: no {column} measured"
    if not _increasing(curve):
        return None, f"{metrics_csv}: field step must be increasing and >= 1"
    return curve, ""


def _increasing(curve: Curve) -> bool:
    steps = [s for s, _ in curve]
    return bool(curve) and all(s >= 1 for s in steps) and steps == sorted(set(steps))


def load_curves_file(path: Path, column: str = "loss") -> tuple[dict[str, Curve], dict[str, str]]:
    """The curves of a ``curves.csv`` (or, for ``column="population"``, a ``population.csv``) and each curve's
    source; ({}, {}) when the file does not exist.

    Raises:
        ValueError: naming the file, the line and the field, for a wrong header, a malformed value, a curve whose
            steps are not increasing, or a run with two sources.
    """
    fields = _fields(column)
    if not path.is_file():
        return {}, {}
    curves: dict[str, Curve] = {}
    sources: dict[str, str] = {}
    try:
        with path.open(newline="", encoding="utf-8") as stream:
            reader = csv.reader(stream)
            header = next(reader, None)
            if header is None or tuple(header) != fields:
                raise ValueError(f"{path}: line 1: header must be {','.join(fields)}, got {header!r}")
            for number, row in enumerate(reader, start=2):
                if len(row) != len(fields):
                    raise ValueError(f"{path}: line {number}: {len(fields)} fields expected, got {len(row)}")
                key, step_text, loss_text, source = row
                if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
                    raise ValueError(f"{path}: line {number}: field hash must be 64 lowercase hex digits")
                try:
                    step, loss = int(step_text), float(loss_text)
                except ValueError:
                    raise ValueError(
                        f"{path}: line {number}: fields step (int) and {column} (float) expected"
                    ) from None
                if sources.setdefault(key, source) != source:
                    raise ValueError(f"{path}: line {number}: run {key[:10]} has two sources")
                curves.setdefault(key, []).append((step, loss))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path}: unreadable ({type(exc).__name__})") from None
    for key, curve in curves.items():
        if not _increasing(curve):
            raise ValueError(f"{path}: run {key[:10]}: field step must be increasing and >= 1")
    return curves, sources


def write_curves_file(
    path: Path, curves: Mapping[str, Curve], sources: Mapping[str, str], column: str = "loss"
) -> Path:
    """Write ``curves`` (hash -> rows of ``column``) with their sources to ``path``, sorted by hash and step
    (atomically)."""
    fields = _fields(column)
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(fields)
    for key in sorted(curves):
        for step, loss in curves[key]:
            writer.writerow([key, step, repr(float(loss)) if math.isfinite(loss) else str(loss), sources[key]])
    write_text_atomically(path, text.getvalue())  # a temporary of its own per writer, renamed into place
    return path
