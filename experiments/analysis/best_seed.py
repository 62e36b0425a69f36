"""The paper's per-configuration metric of a sweep: the best seed's lowest epoch-mean training loss."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

Record = Mapping[str, Any]
"""One run of a sweep: its spec fields merged with its metrics (`experiments.reporting.sweep_report.sweep_records`)."""


def best_over_seeds(records: Sequence[Record], keys: Sequence[str]) -> dict[tuple[Any, ...], float]:
    """min over seeds of best_loss, per distinct value of ``keys`` (finished runs with a finite loss only)."""
    best: dict[tuple[Any, ...], float] = {}
    for record in records:
        loss = record.get("best_loss")
        if record.get("status") != "finished" or not isinstance(loss, (int, float)) or not np.isfinite(loss):
            continue
        key = tuple(record[k] for k in keys)
        best[key] = min(best.get(key, np.inf), float(loss))
    return best
