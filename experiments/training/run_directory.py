"""The one owner of a run directory's layout: every file's name, and reading and writing each of them.

A run directory (``attnrank train --out DIR``, a sweep's ``runs/<hash>/``, ``attnrank import``'s output) holds:

- ``config.json``: the run's record, one shape for every writer (:func:`config_record`): ``config`` (the TrainConfig's
  fields), ``config_hash``, the provenance (``git_revision``, ``git_dirty``, ``versions``), ``device`` and
  ``step_path`` (how a training step runs there, `training.step_capture.describe_step_path`);
- ``metrics.csv``: one row per epoch (`METRICS_HEADER`; written by the training loop through :meth:`metrics_rows` and
  :meth:`write_metrics`);
- ``checkpoint.pt``: the latest checkpoint (`training.checkpoints`, which verifies it when read);
- ``result.json``: the finished run's metric record, one for every kind of run (`training.run_record.RunRecord`: a
  trained run's `TrainResult` with its evaluation, or a solved random-feature / least-squares spec's metrics);
- ``evaluation.json``: the trained model's evaluation by the one recipe (`training.evaluation.evaluate_trained`: the
  record's evaluation fields, population error and Theorem 2's bound where it applies), so a store rebuilt from run
  directories recovers it;
- ``import.json``: the provenance of an imported run (`training.imported_run`), with the precision of its weights;
- ``analysis.json``: ``attnrank analyze``'s report;
- ``.lock``: the lock every writer holds while it writes the directory (`training.run_lock`: one writer per run
  directory).

Torch-free (a sweep's driver and the reports read run directories without loading torch); loading the trained model
is `training.run_model.load_trained_model`. Files are read as untrusted input: a damaged one is refused with one
line naming the file (and the field).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.config import TrainConfig, TrainResult
from experiments.json_files import atomic_write_bytes, read_json_object, write_json
from experiments.training.run_record import BOUND_KEY, MIGRATION_HINT, POPULATION_KEYS, Evaluation, RunRecord
from theory.validation import read_regular_file

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.csv"
CHECKPOINT_NAME = "checkpoint.pt"
RESULT_NAME = "result.json"
EVALUATION_NAME = "evaluation.json"
IMPORT_NAME = "import.json"
ANALYSIS_NAME = "analysis.json"
LOCK_NAME = ".lock"
ATOMIC_NAMES = (CHECKPOINT_NAME, CONFIG_NAME, METRICS_NAME, RESULT_NAME, EVALUATION_NAME)
"""Files written atomically (a temporary ``.<name>.*.tmp`` in the directory, then a rename): what a killed write can
leave behind (`training.checkpoints.remove_stale_temporaries`)."""
METRICS_HEADER = ("step", "loss", "lr", "time", "population")
"""metrics.csv's columns: the epoch's closing step, its mean training loss, the learning rate of its last step,
seconds of training so far, and the population error where measured (empty elsewhere)."""
EVALUATION_FIELDS = (*POPULATION_KEYS, BOUND_KEY)
"""The fields of evaluation.json: the evaluation of the one metric record (`training.run_record.Evaluation`)."""
DTYPE_NAMES = ("float32", "float64")
"""The precisions import.json may record for a run's weights (every trained run is float32)."""


def config_record(
    config: TrainConfig, provenance: Mapping[str, Any], device: str, step_path: Mapping[str, Any]
) -> dict[str, Any]:
    """config.json's one shape: the config, its hash, the provenance, the device and the step path."""
    return {
        "config": config.to_dict(),
        "config_hash": config.config_hash(),
        **provenance,
        "device": device,
        "step_path": dict(step_path),
    }


def _metrics_values(path: Path, number: int, header: tuple[str, ...], row: list[str]) -> list[float]:
    """One metrics.csv row's values by column (step as an integer; an empty population as nan), checked by type;
    ValueError naming the file, the line and the column."""
    if len(row) != len(header):
        raise ValueError(f"{path}: line {number} has {len(row)} fields, the header {len(header)}")
    values: list[float] = []
    for column, text in zip(header, row, strict=True):
        try:
            if column == "step":
                values.append(int(text))
            elif column == "population" and text == "":
                values.append(math.nan)
            else:
                values.append(float(text))
        except ValueError:
            kind = "an integer" if column == "step" else "a number" + (" or empty" if column == "population" else "")
            raise ValueError(f"{path}: line {number}: column {column} must be {kind}, got {text!r:.40}") from None
    return values


def read_metrics_file(path: Path) -> list[list[str]]:
    """Every row of a metrics.csv (none when the file is absent), each padded to the current columns (rows of a file
    written before a column existed get an empty value there): the one reader of the format.

    Every row is checked by type, column by column: the header must be `METRICS_HEADER` or (a file written before
    the later columns existed) a prefix of it of at least step and loss; every row has the header's columns; step
    is an integer, loss, lr and time are numbers, population is empty or a number. A last line without its line end
    (a process killed while writing it, after its last checkpoint) is left out. Whether the values agree with the run
    is `experiments.training.loop.check_epoch_rows`'s check. A file that is not a regular file (a FIFO, a device) is
    refused before it is read. ValueError naming the file, the line and the column.
    """
    if not os.path.lexists(path):
        return []
    try:
        text = read_regular_file("file", path).decode("utf-8")
        text = text[: text.rfind("\n") + 1]  # a last line without its line end is a write cut short by a kill
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (OSError, ValueError, csv.Error) as exc:  # UnicodeDecodeError is a ValueError
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"{path}: unreadable metrics file ({' '.join(detail.split())})") from None
    header = tuple(rows[0]) if rows else ()
    if len(header) < 2 or header != METRICS_HEADER[: len(header)]:
        raise ValueError(f"{path}: line 1: header must be {','.join(METRICS_HEADER)}, got {header!r:.80}")
    kept = []
    for number, row in enumerate(rows[1:], start=2):
        if row:
            _metrics_values(path, number, header, row)
            kept.append(row + [""] * (len(METRICS_HEADER) - len(row)))
    return kept


def _read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object of ``path`` by the one reader (`experiments.json_files.read_json_object`: a regular file, size
    and depth bounded); ValueError naming the file."""
    return read_json_object(path)


@dataclass(frozen=True)
class RunDirectory:
    """The files of one run directory (module docstring)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def config(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def metrics(self) -> Path:
        return self.root / METRICS_NAME

    @property
    def checkpoint(self) -> Path:
        return self.root / CHECKPOINT_NAME

    @property
    def result(self) -> Path:
        return self.root / RESULT_NAME

    @property
    def evaluation(self) -> Path:
        return self.root / EVALUATION_NAME

    @property
    def import_record(self) -> Path:
        return self.root / IMPORT_NAME

    @property
    def analysis(self) -> Path:
        return self.root / ANALYSIS_NAME

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    # ---------------------------------------------------------------------------------------------- config.json
    def read_record(self) -> dict[str, Any]:
        """config.json as written (ValueError naming the file when it is no run record)."""
        data = _read_json_object(self.config)
        if "config" not in data:
            raise ValueError(f"{self.config}: no 'config' entry; not a training run directory")
        return data

    def read_config(self) -> TrainConfig:
        """The TrainConfig recorded in config.json (ValueError naming the file and the field)."""
        try:
            return TrainConfig.from_dict(self.read_record()["config"])
        except (TypeError, ValueError) as exc:
            if str(exc).startswith(str(self.config)):
                raise
            raise ValueError(f"{self.config}: field config is not a valid run config ({exc})") from exc

    def write_config(
        self, config: TrainConfig, provenance: Mapping[str, Any], device: str, step_path: Mapping[str, Any]
    ) -> None:
        """Write config.json (:func:`config_record`), atomically."""
        write_json(self.config, config_record(config, provenance, device, step_path))

    # ---------------------------------------------------------------------------------------------- result.json
    def read_result(self) -> TrainResult:
        """The TrainResult of result.json (ValueError naming the file and the field when it is damaged)."""
        try:
            return TrainResult.from_dict(self.read_result_record())
        except (TypeError, ValueError) as exc:
            if str(exc).startswith(str(self.result)):
                raise
            raise ValueError(f"{self.result}: corrupt result file ({exc}); delete it to retrain") from exc

    def read_result_record(self) -> dict[str, Any]:
        """result.json's JSON object (any run kind): the one metric record, checked field by field
        (`training.run_record.RunRecord.read`); ValueError naming the file and the field."""
        data = _read_json_object(self.result)
        try:
            RunRecord.read(data)
        except ValueError as exc:
            if MIGRATION_HINT in str(exc):
                raise ValueError(f"{self.result}: {exc}") from None
            raise ValueError(f"{self.result}: corrupt result file ({exc}); delete it to run it again") from None
        return data

    def read_result_metrics(self) -> dict[str, Any] | None:
        """result.json's JSON object as written (any run kind), or None when it is absent or damaged."""
        try:
            return self.read_result_record() if os.path.lexists(self.result) else None
        except ValueError:
            return None

    def read_result_evaluation(self) -> Evaluation | None:
        """The evaluation in result.json, or None when the file is absent or damaged or the run was not evaluated."""
        metrics = self.read_result_metrics()
        return None if metrics is None else Evaluation.read(metrics)

    def write_result(self, metrics: Mapping[str, Any]) -> None:
        """Write result.json (the one metric record: a TrainResult's ``to_dict()``, or a solved spec's metrics),
        atomically; ValueError naming the field when ``metrics`` is not that record (nothing is written)."""
        RunRecord.read(metrics)
        write_json(self.result, dict(metrics))

    # ----------------------------------------------------------------------------------------- evaluation.json
    def read_evaluation(self) -> Evaluation | None:
        """evaluation.json's evaluation, or None when the run has not been evaluated (ValueError naming a damaged
        file, or the field out of range: `training.run_record.Evaluation.read`)."""
        if not os.path.lexists(self.evaluation):
            return None
        data = _read_json_object(self.evaluation)
        try:
            unknown = [name for name in data if name not in EVALUATION_FIELDS]
            if unknown:
                raise ValueError(f"field {unknown[0]} is not an evaluation field ({', '.join(EVALUATION_FIELDS)})")
            evaluation = Evaluation.read(data)
            if evaluation is None:
                raise ValueError(f"field {EVALUATION_FIELDS[0]} is missing")
        except ValueError as exc:
            raise ValueError(f"{self.evaluation}: {exc}") from None
        return evaluation

    def write_evaluation(self, evaluation: Evaluation) -> None:
        """Write evaluation.json (the record's evaluation keys), atomically."""
        write_json(self.evaluation, evaluation.fields())

    # ------------------------------------------------------------------------------------------- analysis.json
    def read_analysis(self) -> dict[str, Any] | None:
        """analysis.json as a JSON object, or None when the run has not been analysed (ValueError naming a damaged
        file); its fields are checked by whoever reads them."""
        return _read_json_object(self.analysis) if self.analysis.is_file() else None

    # --------------------------------------------------------------------------------------------- import.json
    def read_import_record(self) -> dict[str, Any] | None:
        """import.json of an imported run, or None for a run trained here."""
        return _read_json_object(self.import_record) if self.import_record.is_file() else None

    def write_import_record(self, record: Mapping[str, Any]) -> None:
        write_json(self.import_record, dict(record))

    def dtype_name(self) -> str:
        """The precision of the run's weights: import.json's ``dtype`` for an import, else "float32".

        An import.json without the field (from before it was recorded) means float32; any other value is refused
        naming the file and the field.
        """
        record = self.read_import_record()
        if record is None:
            return "float32"
        name = record.get("dtype", "float32")
        if name not in DTYPE_NAMES:
            raise ValueError(f"{self.import_record}: field dtype must be one of {', '.join(DTYPE_NAMES)}, got {name!r}")
        return str(name)

    # --------------------------------------------------------------------------------------------- metrics.csv
    def metrics_rows(self, up_to_step: int) -> list[list[str]]:
        """The metrics rows up to ``up_to_step`` (rows written after the last checkpoint are dropped), read and
        checked by `read_metrics_file`."""
        return [row for row in read_metrics_file(self.metrics) if int(row[0]) <= up_to_step]

    def write_metrics(self, rows: list[list[str]]) -> None:
        """Rewrite metrics.csv atomically with the header and ``rows``."""
        text = io.StringIO(newline="")
        writer = csv.writer(text)
        writer.writerow(METRICS_HEADER)
        writer.writerows(rows)
        atomic_write_bytes(self.metrics, lambda stream: stream.write(text.getvalue().encode("utf-8")))
