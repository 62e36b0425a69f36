"""The floating-point precision a run directory's model is evaluated in, and loading the model in it.

Every run trained here computes in float32 (its config has no dtype field). A run directory written by
``attnrank import`` from a float64 checkpoint holds float64 weights and says so in ``import.json`` (``"dtype":
"float64"``): evaluating it in float32 would round every weight to 8 digits and move the outputs by ~1e-7, where the
float64 import reproduces the reference forward to ~1e-15. `run_dtype` reads the record; `load_run_model` is
`experiments.training.run.load_trained_model` in that precision. ``attnrank analyze`` and ``train --eval-only`` use
both.

Fine-tuning an import with ``attnrank train`` trains in float32 like every run (the step-0 float64 weights are
rounded when the loop restores them). ``import.json`` keeps describing the imported weights, so a fine-tuned import is
then evaluated in float64 from float32 weights: exact, only wider than it needs to be.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from experiments.config import TrainConfig
from experiments.tasks import Task
from experiments.training.checkpoints import load_checkpoint
from experiments.training.run import load_trained_model
from theory.validation import check_existing_dir

IMPORT_RECORD = "import.json"
"""The provenance file of an imported run directory (`experiments.training.imported_run`)."""
RUN_DTYPES = {"float32": torch.float32, "float64": torch.float64}
"""The precisions a run directory may record, by the name written in import.json."""


def dtype_name(dtype: torch.dtype) -> str:
    """The name import.json records for ``dtype`` (one of `RUN_DTYPES`)."""
    for name, value in RUN_DTYPES.items():
        if value == dtype:
            return name
    raise ValueError(f"dtype must be one of {', '.join(RUN_DTYPES)}, got {dtype}")


def run_dtype(out_dir: str | Path) -> torch.dtype:
    """The precision of a run directory's model: import.json's ``dtype`` for an import, else float32.

    Raises:
        ValueError: naming import.json and the field, when the record is not JSON or its dtype is not one of
            `RUN_DTYPES` (an import.json without the field, from before it was recorded, means float32).
    """
    record = Path(out_dir) / IMPORT_RECORD
    if not record.is_file():
        return torch.float32
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{record}: not a readable JSON file ({' '.join(str(exc).split())})") from exc
    name = data.get("dtype", "float32") if isinstance(data, dict) else None
    if name not in RUN_DTYPES:
        raise ValueError(f"{record}: field dtype must be one of {', '.join(RUN_DTYPES)}, got {name!r}")
    return RUN_DTYPES[name]


def load_run_model(out_dir: str | Path, device: str = "cpu") -> tuple[TrainConfig, Task, torch.nn.Module]:
    """`load_trained_model` in the run's recorded precision (`run_dtype`).

    A float32 run is returned as `load_trained_model` gives it. A float64 one is converted to float64 and its
    verified checkpoint loaded again, so no weight passes through float32.
    """
    out_dir = check_existing_dir("out_dir", out_dir)  # a path that is no run directory is named, whatever its type
    dtype = run_dtype(out_dir)
    config, task, model = load_trained_model(out_dir, device)
    if dtype != torch.float32:
        state = load_checkpoint(Path(out_dir) / "checkpoint.pt")  # digest and fields verified, as the first load
        model.to(dtype).load_state_dict(state["model"])
        model.eval()
    return config, task, model


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype of a model's parameters: what its input batches are cast to."""
    return next(model.parameters()).dtype
