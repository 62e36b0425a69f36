"""Upgrade metric records written before the one record (`experiments.training.run_record`) to it, once.

Three shapes were written before, and each maps onto the one record without computing anything:

1. a one-layer theory run's ``theorem2`` holding its own estimate (``error``, ``error_stderr``, ``n_samples``,
   ``error_upper_4se``) beside the bound: the estimate becomes the population fields, the bound record keeps d, r,
   H, the interval and ``bound_applies``. Where the record has population fields already they stay: the runs of
   revision 8cecfd9 (the committed finite-set store) drew two independent estimates of the same population error,
   the recipe's into ``population_*`` and one from a stream seeded 12345 into ``theorem2``, equal within their
   standard errors; the record keeps the recipe's;
2. a deeper theory run's ``error`` / ``error_stderr`` at the top level (the committed depth store's L = 2 runs): the
   population fields, with ``population_samples`` = :data:`LEGACY_DEPTH_SAMPLES` (those runs were scored on 20 000
   samples, `experiments/sweeps/execute.py` from 2477aa4 until b76d345, which recorded no count);
3. a least-squares construction's estimate (``error``, ``error_stderr``, ``n_samples``) and bound (``d``, ``r``,
   ``H``, ``bound_lower``, ``bound_upper``, ``consistent``) at the top level: the population fields and a bound
   record with ``bound_applies`` true (the construction is an H-head rank-r attention layer, the class the bound
   holds for; d, r, H stay in the run's spec).

Where shapes 1 and 2 supply the population fields, their estimate was drawn from a held-out stream seeded 12345
(20 000 samples), not the recipe's ``POPULATION_SEED`` stream (`experiments.training.evaluation`): the same
distribution and size, another draw. The bound record's ``consistent`` is set against the population error it now
stands beside (population error + 4 s.e. >= ``bound_lower``; the value written before wherever that estimate is the
one it was computed from). A record already in the one schema is returned unchanged, so a migration run twice changes
nothing the second time.

:func:`migrate_store` upgrades a results store in place (one transaction; a row rewritten only if its record
changes), :func:`migrate_run_directory` a run directory's result.json, evaluation.json and analysis.json.
``scripts/migrate_records.py`` runs both over directories; ``scripts/snapshot_store.py`` upgrades the copy it makes
of a live sweep's store. Every upgraded record is read back by the one reader before it is written.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.json_files import jsonable, parse_json_text, read_json_object, write_json
from experiments.sweeps.store import check_header
from experiments.training.run_directory import RunDirectory
from experiments.training.run_record import BOUND_FIELDS, BOUND_KEY, POPULATION_KEYS, Evaluation, RunRecord
from theory.monte_carlo import DEFAULT_Z

LEGACY_DEPTH_SAMPLES = 20_000
"""Samples of the fresh error the depth runs recorded as ``error`` / ``error_stderr`` (no count was written)."""
_ESTIMATE = ("error", "error_stderr", "n_samples")
_LEGACY_BOUND = ("d", "r", "H", "bound_lower", "bound_upper", "consistent")


def _estimate_fields(error: Any, stderr: Any, samples: Any) -> dict[str, Any]:
    return {"population_error": error, "population_stderr": stderr, "population_samples": samples}


def _merge_population(data: dict[str, Any], estimate: dict[str, Any], where: str) -> None:
    """Put ``estimate`` in the population fields of ``data``, unless the record has them already (they are then the
    recipe's estimate, which the record keeps)."""
    present = [key for key in POPULATION_KEYS if key in data]
    if present and len(present) < len(POPULATION_KEYS):
        raise ValueError(f"field {where}: the record has {', '.join(present)} but not all of {POPULATION_KEYS}")
    if not present:
        data.update(estimate)


def _recheck_bound(data: dict[str, Any]) -> None:
    """Set the bound record's ``consistent`` against the record's population error (the error the bound now stands
    beside; unchanged wherever that error is the one ``consistent`` was computed from)."""
    bound = data.get(BOUND_KEY)
    if isinstance(bound, dict) and "bound_lower" in bound and all(key in data for key in POPULATION_KEYS[:2]):
        upper = data["population_error"] + DEFAULT_Z * data["population_stderr"]
        bound["consistent"] = bool(upper >= bound["bound_lower"])


def upgrade_evaluation(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with a shape-1 ``theorem2`` (its own estimate inside) upgraded; any other key is left as it is."""
    upgraded = dict(data)
    bound = data.get(BOUND_KEY)
    if isinstance(bound, Mapping) and any(name in bound for name in (*_ESTIMATE, "error_upper_4se")):
        missing = [name for name in _ESTIMATE if name not in bound]
        if missing:
            raise ValueError(f"field {BOUND_KEY}.{missing[0]} is missing (a legacy bound record holds its estimate)")
        _merge_population(upgraded, _estimate_fields(*(bound[name] for name in _ESTIMATE)), f"{BOUND_KEY}.error")
        upgraded[BOUND_KEY] = {name: bound[name] for name in BOUND_FIELDS if name in bound}
        _recheck_bound(upgraded)
    return upgraded


def upgrade_record(metrics: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The one record of ``metrics`` (a store row's or a result.json's) of a run of ``kind`` ("train",
    "least-squares-heads", "random-features"); unchanged when it is one already.

    Raises:
        ValueError ``field NAME ...`` (one line) when the record is neither the one record nor a shape this module
        knows, or when the upgrade is not the one record (read back by `RunRecord.read`).
    """
    upgraded = upgrade_evaluation(metrics)
    if "bound_lower" in upgraded:  # shape 3: a least-squares construction's estimate and bound at the top level
        if kind != "least-squares-heads":
            raise ValueError(f"field bound_lower is at the top level of a {kind} record (only least-squares wrote it)")
        missing = [name for name in (*_ESTIMATE, *_LEGACY_BOUND) if name not in upgraded]
        if missing:
            raise ValueError(f"field {missing[0]} is missing (a legacy least-squares record holds it)")
        estimate = _estimate_fields(*(upgraded.pop(name) for name in _ESTIMATE))
        _merge_population(upgraded, estimate, "error")
        bound = {name: upgraded.pop(name) for name in _LEGACY_BOUND}
        upgraded[BOUND_KEY] = {name: bound.get(name, True) for name in BOUND_FIELDS}  # bound_applies: true
        _recheck_bound(upgraded)
    elif "error" in upgraded or "error_stderr" in upgraded:  # shape 2: a deeper theory run's fresh error
        if kind != "train":
            raise ValueError(f"field error is at the top level of a {kind} record (only trained runs wrote it)")
        if "error" not in upgraded or "error_stderr" not in upgraded:
            raise ValueError("field error or error_stderr is missing (the legacy fresh error records both)")
        samples = upgraded.pop("n_samples", LEGACY_DEPTH_SAMPLES)
        estimate = _estimate_fields(upgraded.pop("error"), upgraded.pop("error_stderr"), samples)
        _merge_population(upgraded, estimate, "error")
    RunRecord.read(upgraded)  # what is written is the one record
    return upgraded


@dataclass(frozen=True)
class StoreMigration:
    """What :func:`migrate_store` did: rows with metrics, and how many of them it rewrote."""

    path: Path
    records: int
    upgraded: int


def _store_text(metrics: Mapping[str, Any]) -> str:
    """A record as the store writes it (`experiments.sweeps.store.ResultsStore.record_result`)."""
    return json.dumps(jsonable(dict(metrics)), sort_keys=True, allow_nan=False)


def migrate_store(path: Path) -> StoreMigration:
    """Upgrade every row's metrics of the results store at ``path`` in place, in one transaction (all or nothing);
    a row already in the one schema is not written, so the file is unchanged when every row is.

    The file keeps its journal mode (a committed store's rollback journal, a live store's WAL). Never run on a store
    a sweep is writing (`scripts/snapshot_store.py` migrates its copy instead).

    Raises:
        ValueError naming the file (and the row and field) when it is not a results store or a row cannot be upgraded;
        nothing is written then.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no results store")
    check_header(path)
    connection = sqlite3.connect(path, timeout=60, isolation_level=None)
    try:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "runs" not in tables:
            raise ValueError(f"{path}: not a results store (no runs table)")
        connection.execute("BEGIN IMMEDIATE")
        try:
            rows = connection.execute("SELECT hash, kind, metrics FROM runs WHERE metrics IS NOT NULL").fetchall()
            upgraded = 0
            for key, kind, text in rows:
                where = f"{path}: run {str(key)[:10]}: metrics"
                try:
                    metrics = parse_json_text(text, where) if isinstance(text, str) else None
                    if not isinstance(metrics, dict):
                        raise ValueError("must be a JSON object")
                    record = upgrade_record(metrics, str(kind))
                except ValueError as exc:
                    message = str(exc)
                    raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None
                if record != metrics:
                    connection.execute("UPDATE runs SET metrics = ? WHERE hash = ?", (_store_text(record), key))
                    upgraded += 1
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise ValueError(f"{path}: SQLite: {' '.join(str(exc).split())}") from None
    finally:
        connection.close()
    return StoreMigration(path, len(rows), upgraded)


def _upgrade_file(path: Path, upgrade: Any) -> bool:
    """Rewrite the JSON object at ``path`` (atomically) with ``upgrade(data)`` when that differs; whether it did."""
    if not os.path.lexists(path):
        return False
    data = read_json_object(path)
    try:
        upgraded = upgrade(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if upgraded == data:
        return False
    write_json(path, upgraded)
    return True


def _upgrade_evaluation_file(data: dict[str, Any]) -> dict[str, Any]:
    upgraded = upgrade_evaluation(data)
    Evaluation.read(upgraded)
    return upgraded


def _kind_of(files: RunDirectory, result: Mapping[str, Any]) -> str:
    """The kind of run a run directory holds: a trained run has config.json, a least-squares construction records its
    weight norm, a random-feature draw neither."""
    if os.path.lexists(files.config):
        return "train"
    return "least-squares-heads" if "weight_norm" in result else "random-features"


def migrate_run_directory(root: Path) -> list[Path]:
    """Upgrade the records of the run directory ``root``: result.json (`upgrade_record`), evaluation.json and
    analysis.json (their ``theorem2``); the files rewritten (atomically), none when every record is current.

    Raises:
        ValueError naming the file and the field of a record that cannot be upgraded (that file is not written).
    """
    files = RunDirectory(Path(root))
    changed = []
    if _upgrade_file(files.result, lambda data: upgrade_record(data, _kind_of(files, data))):
        changed.append(files.result)
    for path in (files.evaluation, files.analysis):
        if _upgrade_file(path, _upgrade_evaluation_file):
            changed.append(path)
    return changed
