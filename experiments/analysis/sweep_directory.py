"""The one owner of a sweep directory's layout: every file's name, its runs folder, and the readers of its files.

A sweep directory (``attnrank sweep --out DIR``, a committed store ``results/<name>/``) holds:

- ``results.sqlite``: the results store, one row per run (`experiments.sweeps.store.ResultsStore` opens it at
  :attr:`SweepDirectory.store`);
- ``runs/<hash>/``: one run directory per run (`experiments.training.run_directory.RunDirectory`: config.json,
  metrics.csv, checkpoint.pt, result.json, ...); never committed (checkpoints are large);
- ``curves.csv`` and ``population.csv``: every run's training-loss curve and, where measured, its population-error
  curve, copied from the run directories so that a report regenerates without them
  (`experiments.analysis.run_curves` reads and writes the format; :meth:`SweepDirectory.collect_curves` copies);
- ``milestones.csv``: runs evaluated at steps short of their end (`experiments.analysis.milestones`);
- ``report.md`` (``attnrank report DIR``, with its figures) and ``runs.csv`` (``attnrank report DIR --csv``).

The layout on disk is fixed: sweep directories written by earlier revisions (long runs going on at a frozen revision)
are read and extended by this code. Torch-free, like `RunDirectory`: a sweep's driver and the reports use it without
loading torch. Files are read as untrusted input by the format readers, which name the file, the line and the field.
This module sits in the analysis room (below the sweeps, the reports and the docs' blocks that read it) because the
analyses of curves (`experiments.analysis.construction_arms`) read a sweep's runs too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from experiments.analysis.milestones import Milestone, read_milestones
from experiments.analysis.run_curves import (
    CURVE_COLUMNS,
    RUN_SOURCE,
    Curve,
    check_column,
    load_curves_file,
    read_metrics_curve,
    write_curves_file,
)
from experiments.training.run_directory import RunDirectory

STORE_NAME = "results.sqlite"
RUNS_NAME = "runs"
CURVES_NAME = "curves.csv"
POPULATION_NAME = "population.csv"
MILESTONES_NAME = "milestones.csv"
REPORT_NAME = "report.md"
RUNS_CSV_NAME = "runs.csv"
CURVE_FILES = {"loss": CURVES_NAME, "population": POPULATION_NAME}
"""metrics.csv column (`experiments.analysis.run_curves.CURVE_COLUMNS`) -> the file beside the store that carries it."""


@dataclass(frozen=True)
class SweepDirectory:
    """The files of one sweep directory (module docstring)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def store(self) -> Path:
        return self.root / STORE_NAME

    @property
    def runs(self) -> Path:
        """The runs folder: one run directory per run, named by its hash."""
        return self.root / RUNS_NAME

    @property
    def curves(self) -> Path:
        return self.root / CURVES_NAME

    @property
    def population(self) -> Path:
        return self.root / POPULATION_NAME

    @property
    def milestones(self) -> Path:
        return self.root / MILESTONES_NAME

    @property
    def report(self) -> Path:
        return self.root / REPORT_NAME

    @property
    def runs_csv(self) -> Path:
        return self.root / RUNS_CSV_NAME

    def curve_file(self, column: str) -> Path:
        """The file carrying the curves of ``column`` ("loss": curves.csv, "population": population.csv)."""
        return self.root / CURVE_FILES[check_column(column)]

    # ------------------------------------------------------------------------------------------------ the runs
    def run(self, key: str) -> RunDirectory:
        """The run directory of the run whose hash is ``key`` (it may not exist)."""
        return RunDirectory(self.runs / key)

    def run_directories(self) -> list[RunDirectory]:
        """Every directory of the runs folder, by name (none when the folder is absent)."""
        if not self.runs.is_dir():
            return []
        return [RunDirectory(path) for path in sorted(self.runs.glob("*")) if path.is_dir()]

    # ---------------------------------------------------------------------------------------------- the curves
    def read_curves(self, column: str = "loss") -> tuple[dict[str, Curve], dict[str, str]]:
        """The curves of ``column`` carried beside the store (run hash -> rows) and each one's source; ({}, {}) when
        the file is absent (ValueError naming the file, the line and the field of a malformed one)."""
        return load_curves_file(self.curve_file(column), column)

    def run_curve(self, key: str, column: str = "loss") -> tuple[Curve | None, str, str]:
        """A run's curve of ``column``: from its run directory's metrics.csv when present, else from the file beside
        the store. Returns (curve or None, why not, source); source is ``run`` or the curves file's recorded one."""
        curve, why = read_metrics_curve(self.run(key).metrics, column)
        if curve is not None:
            return curve, "", RUN_SOURCE
        curves, sources = self.read_curves(column)
        if key in curves:
            return curves[key], "", sources[key]
        return None, f"{why}; no curve in {CURVE_FILES[column]}", ""

    def collect_curves(self, keys: Iterable[str], source: SweepDirectory | None = None) -> Path | None:
        """Copy the curve of every run of ``keys`` whose run directory (in ``source``'s runs folder; this directory's
        by default) has one into curves.csv here, and its population curve, where measured, into population.csv
        (keeping the entries already there for runs whose directory is gone); the path of curves.csv, or None when
        there is no curve at all."""
        keys = list(keys)
        runs = self if source is None else source
        written: dict[str, Path | None] = {}
        for column in CURVE_COLUMNS:
            curves, sources = self.read_curves(column)
            for key in keys:
                curve, _ = read_metrics_curve(runs.run(key).metrics, column)
                if curve is not None:
                    curves[key], sources[key] = curve, RUN_SOURCE
            path = self.curve_file(column)
            written[column] = write_curves_file(path, curves, sources, column) if curves else None
        return written["loss"]

    # ------------------------------------------------------------------------------------------ milestones.csv
    def read_milestones(self) -> dict[tuple[str, int], Milestone]:
        """(hash, step) -> milestone of milestones.csv; {} when the file is absent."""
        return read_milestones(self.milestones)
