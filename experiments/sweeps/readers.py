"""Read a sweep's store from its directory: the public readers of ``results/<name>/`` and of any ``sweep --out DIR``.

A store directory holds ``results.sqlite`` (one row per run: its spec, status and metrics), ``curves.csv`` (each run's
epoch-mean training loss per step) and, where a run measured it, ``population.csv`` (its population error per step,
`experiments.analysis.run_curves`). These readers give a notebook or a script those files as plain Python objects
without knowing the file names or the SQL: the store is opened read only (nothing in a committed store can change by
being read), and every file is checked as untrusted input by the readers the reports use (`ResultsStore`,
`experiments.sweeps.store_file`'s and `experiments.analysis.run_curves`'), which name the file and the field of anything
malformed. The files' names and places are `experiments.analysis.sweep_directory.SweepDirectory`'s.
"""

from __future__ import annotations

import errno
from pathlib import Path

from experiments.analysis.run_curves import CURVE_COLUMNS, Curve
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.sweeps.store import ResultsStore, RunRow
from theory.validation import check_choice, check_existing_dir


def read_store(directory: str | Path) -> list[RunRow]:
    """Every run of the store in ``directory`` (in the order they were registered, then by hash).

    Args:
        directory: a store directory (holding ``results.sqlite``), e.g. ``results/finite-set-cpu``.
    Returns:
        one RunRow per run: ``hash`` (the run's key in the curves), ``kind``, ``spec`` (its TrainConfig fields, as a
        dict), ``status`` ("finished", "diverged", "pending", ...), ``metrics`` (``final_loss``, ``best_loss``,
        ``population_error``, ``population_stderr``, ``theorem2``, ... or None before it finished), ``seconds``,
        ``git_revision`` and the other provenance fields.
    Raises:
        FileNotFoundError / NotADirectoryError naming ``directory`` when it is not a store directory; StoreError (a
        ValueError) naming the file when the store is damaged.
    """
    path = SweepDirectory(check_existing_dir("directory", directory)).store
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, f"directory holds no results store ({path.name})", str(path))
    with ResultsStore(path, readonly=True) as store:
        return store.rows()


def read_curves(directory: str | Path, column: str = "loss") -> dict[str, Curve]:
    """The curves a store carries beside its runs: run hash -> [(step, value), ...] in increasing step.

    Args:
        directory: a store directory, e.g. ``results/fig1-d64-replay-cpu``.
        column: "loss" (``curves.csv``: the epoch-mean training loss on the run's own batches) or "population"
            (``population.csv``: the population error on held-out samples, at the steps where it was measured).
    Returns:
        the curves of every run that has one (a run's ``hash`` in `read_store` is its key here).
    Raises:
        FileNotFoundError / NotADirectoryError naming ``directory`` when it is not a directory or holds no such file;
        ValueError naming ``column`` outside the two, or the file, line and field of a malformed file.
    """
    sweep = SweepDirectory(check_existing_dir("directory", directory))
    path = sweep.curve_file(check_choice("column", column, CURVE_COLUMNS))
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, f"directory holds no {path.name} (no {column} curves)", str(path))
    curves, _sources = sweep.read_curves(column)
    return curves
