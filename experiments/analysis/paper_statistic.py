"""The paper's statistic per cell of a grid, beside the population error of the run it picks.

The reference's Figure 1 plots, for each cell (depth, width, rank), the minimum over every run of that cell of the
run's lowest epoch-mean training loss (seaborn's estimator "min" over the runs' data seeds, the supplementary runs of
the c = 64, L = 3 cells pooled in; docs/paper.md section 6). On a replayed set that loss is a training loss; the
theorems bound the population error. :func:`paper_statistic` computes the paper's number for every cell of a sweep's
records and puts beside it the population error of the run that attains it (held-out samples,
`experiments.training.evaluation`), the range of population errors over the cell's runs, and the gap between that
population error and the picked run's last epoch loss.

A cell is every field of the runs that names the experiment; the fields the paper's figure pools over
(:data:`POOLED_FIELDS`: the seeds, the batch and the schedule's length, which the supplementary runs change) are not
part of it. The learning rate is part of it: the paper's figure keeps lr 0.01 and pools nothing across rates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.analysis.records import Record
from experiments.config import EXECUTION_FIELDS, TrainConfig

POOLED_FIELDS = ("seed", "data_seed", "batch_size", "steps", "schedule_steps", "warmup_steps", "log_every")
"""Fields the paper's statistic takes its minimum over: the runs' seeds and data seeds, and the batch size and
schedule of the supplementary runs (batch 64, 2000 epochs) pooled into the c = 64, L = 3 cells (log_every is the
epoch, K batches for every run of a replayed set)."""
_CELL_FIELDS = tuple(
    f.name for f in dataclasses.fields(TrainConfig) if f.name not in POOLED_FIELDS and f.name not in EXECUTION_FIELDS
)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return None
    return float(value)


@dataclass(frozen=True)
class CellStatistic:
    """One cell's paper statistic and our population error beside it.

    Attributes:
        cell: (field, value) pairs naming the cell: the cell fields that vary over the records, in TrainConfig order.
        runs: finished runs of the cell with a finite best_loss.
        best: the paper's statistic: the lowest best_loss (lowest epoch-mean training loss) over the cell's runs.
        best_run: the record of the run that attains it.
        worst: the highest best_loss over the cell's runs (how much the pick matters).
        population: the population error of ``best_run`` and its standard error (None: not measured).
        population_range: (lowest, highest) population error over the cell's runs that measured one (None: none did).
    """

    cell: tuple[tuple[str, Any], ...]
    runs: int
    best: float
    best_run: Record
    worst: float
    population: tuple[float, float] | None
    population_range: tuple[float, float] | None

    @property
    def gap(self) -> float | None:
        """Population error of the picked run minus its last epoch's training loss (None: either is missing), as every
        report defines the gap (the replay store's training-vs-population and milestone tables)."""
        final = _number(self.best_run.get("final_loss"))
        return None if self.population is None or final is None else self.population[0] - final

    def field(self, name: str) -> Any:
        """The cell's value of a field (also of one that does not vary, read from the picked run)."""
        return dict(self.cell).get(name, self.best_run.get(name))


def _order(cell: tuple[tuple[str, Any], ...]) -> tuple[tuple[int, Any], ...]:
    """Sort key of a cell: numbers by value, before anything else by its text (None, strings)."""
    return tuple((0, v) if _number(v) is not None else (1, repr(v)) for _, v in cell)


def paper_statistic(records: Sequence[Record]) -> list[CellStatistic]:
    """Every cell's paper statistic (module docstring), cells in order of their varying fields' values.

    Args:
        records: a sweep's records (`experiments.sweeps.store_records.sweep_records`); finished training runs with a
            finite best_loss count, others are left out.
    """
    runs = [
        r
        for r in records
        if r.get("kind", "train") == "train"
        and r.get("status") == "finished"
        and _number(r.get("best_loss")) is not None
    ]
    varying = [name for name in _CELL_FIELDS if len({repr(r.get(name)) for r in runs}) > 1]
    cells: dict[tuple[tuple[str, Any], ...], list[Record]] = {}
    for r in runs:
        cells.setdefault(tuple((name, r.get(name)) for name in varying), []).append(r)
    statistics = []
    for cell in sorted(cells, key=_order):
        members = cells[cell]
        picked = min(members, key=lambda r: float(r["best_loss"]))
        error, stderr = _number(picked.get("population_error")), _number(picked.get("population_stderr"))
        errors = [e for e in (_number(r.get("population_error")) for r in members) if e is not None]
        statistics.append(
            CellStatistic(
                cell=cell,
                runs=len(members),
                best=float(picked["best_loss"]),
                best_run=picked,
                worst=max(float(r["best_loss"]) for r in members),
                population=None if error is None else (error, math.nan if stderr is None else stderr),
                population_range=(min(errors), max(errors)) if errors else None,
            )
        )
    return statistics
