"""A sweep's runs read back from its results store as records: the one place the report, the results index and the
generated doc blocks turn store rows into the dictionaries every claim, figure and section reads.

A record is one run's spec fields merged with its metrics (`experiments.analysis.records.Record`), with its status,
hash, kind and seconds, and for a training run its ``rank_class`` (`preset_kit.rank_class`) and ``heads``. Rows are
checked when read (`ResultsStore.rows`), so a damaged store is refused with one line before any record is made.
"""

from __future__ import annotations

from typing import Any

from experiments.config import TrainConfig
from experiments.sweeps.preset_kit import rank_class
from experiments.sweeps.run_specs import spec_from_record
from experiments.sweeps.store import ResultsStore


def sweep_records(store: ResultsStore, preset: str, scale: str) -> list[dict[str, Any]]:
    """One dictionary per run of the sweep ``preset`` / ``scale``: spec fields, metrics, status, hash, seconds,
    rank_class and heads."""
    records = []
    for row in store.rows(preset, scale):
        record: dict[str, Any] = {**row.spec, "status": row.status, "hash": row.hash, "kind": row.kind}
        if row.kind == "train":
            config = spec_from_record("train", row.spec)
            assert isinstance(config, TrainConfig)
            record["rank_class"] = rank_class(config)
            record["heads"] = config.heads
        if row.metrics:
            record.update(row.metrics)
        record["seconds"] = row.seconds
        records.append(record)
    return records
