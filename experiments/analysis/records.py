"""What a sweep's records are (one run's spec fields merged with its metric record, `Record`), and what every claim and
figure reads off a record the same way: its evaluation (population error, bound) and a theory model's heads per
layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.training.run_record import Evaluation

Record = Mapping[str, Any]
"""One run of a sweep: its spec fields merged with its metric record (`experiments.training.run_record.RunRecord`;
`experiments.sweeps.store_records.sweep_records`)."""


def evaluation(record: Record) -> Evaluation | None:
    """The evaluation of a finished run (its population error, and Theorem 2's bound where it applies), read by the
    record's own reader (`Evaluation.read`), or None: not finished, or never evaluated (runs stored before the
    evaluation recipe; a random-feature draw)."""
    if record.get("status") != "finished":
        return None
    return Evaluation.read(record)


def fresh_error(record: Record) -> tuple[float, float] | None:
    """(mean, standard error) of a finished run's population error (:func:`evaluation`), or None."""
    found = evaluation(record)
    return None if found is None else (found.population.error, found.population.stderr)


def theory_heads(record: Record) -> int:
    """Heads per layer H = width * (d + positional_dim) / rank of a theory-model record."""
    return int(record["width"]) * (int(record["d"]) + int(record.get("positional_dim") or 0)) // int(record["rank"])
