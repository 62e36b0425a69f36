"""What a sweep's records are (one run's spec fields merged with its metrics, `Record`), and what every claim and figure
reads off a theory-model record the same way: its fresh error and its heads per layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Record = Mapping[str, Any]
"""One run of a sweep: its spec fields merged with its metrics (`experiments.sweeps.store_records.sweep_records`)."""


def fresh_error(record: Record) -> tuple[float, float] | None:
    """(mean, standard error) of a finished run's fresh Monte Carlo error, or None: ``theorem2`` for one layer, else
    the population error of the one recipe (`experiments.training.evaluation`), else the ``error`` /
    ``error_stderr`` metrics deeper theory runs recorded before that recipe (the committed depth stores)."""
    if record.get("status") != "finished":
        return None
    t = record.get("theorem2")
    if isinstance(t, Mapping):
        return float(t["error"]), float(t["error_stderr"])
    for mean, stderr in (("population_error", "population_stderr"), ("error", "error_stderr")):
        if isinstance(record.get(mean), (int, float)) and isinstance(record.get(stderr), (int, float)):
            return float(record[mean]), float(record[stderr])
    return None


def theory_heads(record: Record) -> int:
    """Heads per layer H = width * (d + positional_dim) / rank of a theory-model record."""
    return int(record["width"]) * (int(record["d"]) + int(record.get("positional_dim") or 0)) // int(record["rank"])
