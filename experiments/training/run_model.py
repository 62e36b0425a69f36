"""A run directory's trained model, loaded in the precision its directory records: the one ``load_trained_model``.

Every run trained here computes in float32. A run directory written by ``attnrank import`` from a float64 checkpoint
holds float64 weights and says so in ``import.json`` (``"dtype": "float64"``): evaluating it in float32 would round
every weight to 8 digits and move the outputs by ~1e-7, where the float64 import reproduces the reference forward to
~1e-15. So the model comes back in the recorded precision (`RunDirectory.dtype_name`); ``attnrank analyze``,
``train --eval-only``, the sweep's evaluation and every figure that reads a trained model use this one loader.

Fine-tuning an import with ``attnrank train`` trains in float32 like every run (the step-0 float64 weights are
rounded when the loop restores them). ``import.json`` keeps describing the imported weights, so a fine-tuned import is
then evaluated in float64 from float32 weights: exact, only wider than it needs to be.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from experiments.config import TrainConfig
from experiments.tasks import Task
from experiments.training.checkpoints import check_same_config, load_checkpoint
from experiments.training.run import build_run, resolve_device
from experiments.training.run_directory import DTYPE_NAMES, RunDirectory
from theory.validation import check_existing_dir

RUN_DTYPES = {"float32": torch.float32, "float64": torch.float64}
"""The precisions a run directory may record, by the name written in import.json."""
assert tuple(RUN_DTYPES) == DTYPE_NAMES


def dtype_name(dtype: torch.dtype) -> str:
    """The name import.json records for ``dtype`` (one of `RUN_DTYPES`)."""
    for name, value in RUN_DTYPES.items():
        if value == dtype:
            return name
    raise ValueError(f"dtype must be one of {', '.join(RUN_DTYPES)}, got {dtype}")


def run_dtype(out_dir: str | Path) -> torch.dtype:
    """The precision of a run directory's model (`RunDirectory.dtype_name`): float64 for a float64 import."""
    return RUN_DTYPES[RunDirectory(Path(out_dir)).dtype_name()]


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype of a model's parameters: what its input batches are cast to."""
    return next(model.parameters()).dtype


def load_trained_model(out_dir: str | Path, device: str = "cpu") -> tuple[TrainConfig, Task, torch.nn.Module]:
    """Rebuild a run's task and model from its directory (config.json + checkpoint.pt), in eval mode, in the run's
    recorded precision (float64 for a float64 import, else float32; no weight passes through float32).

    The checkpoint is verified (digest, fields; `experiments.training.checkpoints.load_checkpoint`) before use.

    Args:
        out_dir: an existing run directory (FileNotFoundError / NotADirectoryError naming ``out_dir`` otherwise).
        device: "cpu", "cuda", "cuda:K" or "auto".
    Returns:
        (config, task, model).
    """
    out_dir = check_existing_dir("out_dir", out_dir)
    files = RunDirectory(out_dir)
    if not files.config.exists():
        raise ValueError(f"out_dir {str(out_dir)!r} has no {files.config.name}; not a training run directory")
    if not files.checkpoint.exists():
        raise ValueError(f"out_dir {str(out_dir)!r} has no {files.checkpoint.name}; the run has not saved a model yet")
    config = files.read_config()
    task, model = build_run(dataclasses.replace(config, init=None, device=device), resolve_device(device))
    load_checkpoint_state(model, files.checkpoint, config)
    model.eval()
    return config, task, model


def load_checkpoint_state(
    model: torch.nn.Module,
    checkpoint: Path,
    config: TrainConfig,
    *,
    extension: bool = False,
    any_eval_samples: bool = False,
) -> int:
    """Load the verified checkpoint of the run ``config`` into ``model``, in the precision its run directory records
    (`run_dtype`): the one checkpoint loading of `load_trained_model` and ``train --eval-only``
    (`training.evaluation.evaluate_run`).

    Args:
        model: the run's model, built from ``config``.
        checkpoint: the run directory's checkpoint.pt (digest and fields verified by `load_checkpoint`).
        config: the run; its config must be the checkpoint's, or with ``extension`` a config that extends the
            checkpoint's run along its schedule (`TrainConfig.extends`: more steps).
        any_eval_samples: let ``config``'s ``eval_samples`` differ from the checkpoint's (an evaluation of its
            weights on another number of held-out samples: the count scores the weights, it did not make them).

    Returns:
        the checkpoint's step.

    Raises:
        ValueError naming the checkpoint when it is damaged, belongs to another config, or does not fit the model.
    """
    state = load_checkpoint(checkpoint)  # digest and fields verified
    if any_eval_samples:
        config = dataclasses.replace(config, eval_samples=state["config"].eval_samples)
    if not (extension and config.extends(state["config"])):
        check_same_config(state["config"], config, checkpoint)
    model.to(run_dtype(checkpoint.parent))  # float64 for a float64 import (import.json), else float32
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, TypeError, AttributeError) as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
        raise ValueError(f"{checkpoint}: checkpoint does not match the model of its config ({detail})") from exc
    return int(state["step"])
