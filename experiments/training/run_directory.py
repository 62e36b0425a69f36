"""The one owner of a run directory's layout: every file's name, and reading and writing each of them.

A run directory (``attnrank train --out DIR``, a sweep's ``runs/<hash>/``, ``attnrank import``'s output) holds:

- ``config.json``: the run's record, one shape for every writer (:func:`config_record`): ``config`` (the TrainConfig's
  fields), ``config_hash``, the provenance (``git_revision``, ``git_dirty``, ``versions``), ``device`` and
  ``step_path`` (how a training step runs there, `training.step_capture.describe_step_path`);
- ``metrics.csv``: one row per epoch (`METRICS_HEADER`; written by the training loop through :meth:`metrics_rows` and
  :meth:`write_metrics`);
- ``checkpoint.pt``: the latest checkpoint (`training.checkpoints`, which verifies it when read);
- ``result.json``: the finished run's `TrainResult` (or a solved random-feature / least-squares spec's metrics);
- ``evaluation.json``: the trained model's evaluation by the one recipe (`training.evaluation.evaluate_trained`:
  population error, and Theorem 2's bound where it applies), so a store rebuilt from run directories recovers it;
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


def _number_field(name: str, value: Any, *, minimum: float | None = 0.0, finite: bool = True) -> float:
    """A result field that is a number (or "nan" / "inf" / "-inf" as `experiments.json_files` writes them)."""
    words = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
    if isinstance(value, str) and value in words:
        number = words[value]
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"field {name} must be a number, got {value!r:.40}")
    else:
        number = float(value)
    if finite and not math.isfinite(number):
        raise ValueError(f"field {name} must be a finite number, got {number!r}")
    if minimum is not None and number < minimum:
        raise ValueError(f"field {name} must be >= {minimum:g}, got {number!r}")
    return number


def _integer_field(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"field {name} must be an integer >= {minimum}, got {value!r:.40}")
    return value


RESULT_ERROR_FIELDS = ("population_error", "population_stderr", "error", "error_stderr")
"""Fields of a result (or an evaluation) that are a measured mean error or its standard error: finite, >= 0."""
RESULT_COUNT_FIELDS = ("population_samples", "n_samples")
"""Fields of a result that count held-out samples: integers >= 2."""


def check_result_fields(data: Mapping[str, Any], *, core: bool = True) -> None:
    """ValueError naming the field unless ``data`` (result.json of any run kind, or with ``core`` False an
    evaluation.json) holds values a report may publish.

    With ``core``: the fields `TrainResult.from_dict` checks (final_loss and best_loss are losses: numbers or
    "nan" / "inf", never negative, finite and best <= final for a run that did not diverge; diverged true or false;
    seconds finite >= 0; steps an integer >= 0), steps and diverged being optional for a solved spec.
    Always: the measured errors (`RESULT_ERROR_FIELDS`) finite and >= 0, the sample counts (`RESULT_COUNT_FIELDS`)
    integers >= 2, ``theorem2`` (when present) an object whose d, r, H are integers >= 1 and whose error fields are
    finite and >= 0, ``errors`` and ``head_counts`` (a random-feature run) lists of finite errors >= 0 and of head
    counts >= 1.
    """
    if core:  # TrainResult's own check; a solved (not trained) spec records neither steps nor, maybe, diverged
        try:
            TrainResult.from_dict({"steps": 0, "diverged": False, **data})
        except ValueError as exc:
            raise ValueError(f"field {exc}") from None
    for name in RESULT_ERROR_FIELDS:
        if name in data:
            _number_field(name, data[name])
    for name in RESULT_COUNT_FIELDS:
        if name in data:
            _integer_field(name, data[name], 2)
    theorem2 = data.get("theorem2")
    if theorem2 is not None:
        if not isinstance(theorem2, Mapping):
            raise ValueError(f"field theorem2 must be an object, got {type(theorem2).__name__}")
        for name in ("d", "r", "H"):
            _integer_field(f"theorem2.{name}", theorem2.get(name), 1)
        for name in ("error", "error_stderr", "error_upper_4se", "bound_lower", "bound_upper"):
            if name in theorem2:
                _number_field(f"theorem2.{name}", theorem2[name])
    for name, minimum in (("errors", 0), ("head_counts", 1)):
        values = data.get(name)
        if values is None:
            continue
        if not isinstance(values, list):
            raise ValueError(f"field {name} must be a list, got {type(values).__name__}")
        for index, value in enumerate(values):
            if name == "head_counts":
                _integer_field(f"{name}[{index}]", value, minimum)
            else:
                _number_field(f"{name}[{index}]", value)


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
        """result.json's JSON object (any run kind), checked field by field (`check_result_fields`); ValueError
        naming the file and the field."""
        data = _read_json_object(self.result)
        try:
            check_result_fields(data)
        except ValueError as exc:
            raise ValueError(f"{self.result}: corrupt result file ({exc}); delete it to run it again") from exc
        return data

    def read_result_metrics(self) -> dict[str, Any] | None:
        """result.json's JSON object as written (any run kind), or None when it is absent or damaged."""
        try:
            return self.read_result_record() if os.path.lexists(self.result) else None
        except ValueError:
            return None

    def write_result(self, metrics: Mapping[str, Any]) -> None:
        """Write result.json (a TrainResult's ``to_dict()``, or a solved spec's metrics), atomically."""
        write_json(self.result, dict(metrics))

    # ----------------------------------------------------------------------------------------- evaluation.json
    def read_evaluation(self) -> dict[str, Any] | None:
        """evaluation.json, or None when the run has not been evaluated (ValueError naming a damaged file, or a
        field out of range: `check_result_fields`)."""
        if not os.path.lexists(self.evaluation):
            return None
        data = _read_json_object(self.evaluation)
        try:
            check_result_fields(data, core=False)
        except ValueError as exc:
            raise ValueError(f"{self.evaluation}: {exc}") from exc
        return data

    def write_evaluation(self, evaluation: Mapping[str, Any]) -> None:
        """Write evaluation.json, atomically."""
        write_json(self.evaluation, dict(evaluation))

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
