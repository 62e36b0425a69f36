"""A run's model scored without training: the Monte Carlo error of its starting point or of its latest checkpoint.

``attnrank train --eval-only`` uses it to report, for instance, the error of a construction loaded with ``init`` in
the model the run would train, before any optimiser step. Nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from experiments.config import TrainConfig
from experiments.tasks import estimate_task_error
from experiments.training.checkpoints import check_same_config, load_checkpoint
from experiments.training.run import build_run, resolve_device
from experiments.training.run_precision import model_dtype, run_dtype

CHECKPOINT_NAME = "checkpoint.pt"


def evaluate_run(
    config: TrainConfig, out_dir: Path | None, *, samples: int = 20_000, seed: int = 12345
) -> dict[str, Any]:
    """The Monte Carlo task error of the model ``config`` starts from, or of ``out_dir``'s checkpoint if it has one.

    Args:
        config: the run (its ``init`` file, or its seed's initialisation, defines the starting model); a config that
            extends the run in ``out_dir`` along its schedule (more ``steps``) names that run's checkpoint too.
        out_dir: the run directory; a checkpoint of ``config`` there (verified) is evaluated instead, in the run's
            precision (`experiments.training.run_precision.run_dtype`). Read only.
        samples: fresh samples of the task (>= 2).
        seed: seed of the evaluation sampler (independent of the training stream).

    Returns:
        mse (mean per-sample error, the training loss's definition), stderr (its standard error), n_samples,
        step (0 for the starting model, else the checkpoint's step), source ("init" = the weight file, "seed" =
        random initialisation, "checkpoint").
    """
    device = resolve_device(config.device)
    task, model = build_run(config, device)  # validates the init file against the config
    step, source = 0, "init" if config.init is not None else "seed"
    checkpoint = Path(out_dir) / CHECKPOINT_NAME if out_dir is not None else None
    if checkpoint is not None and checkpoint.exists():
        state = load_checkpoint(checkpoint)
        if not config.extends(state["config"]):  # the flags of the run's extension name its checkpoint too
            check_same_config(state["config"], config, checkpoint)
        model.to(run_dtype(checkpoint.parent))  # float64 for a float64 import (import.json), else float32
        try:
            model.load_state_dict(state["model"])
        except (RuntimeError, TypeError, AttributeError) as exc:
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
            raise ValueError(f"{checkpoint}: checkpoint does not match the model of this config ({detail})") from exc
        step, source = state["step"], "checkpoint"
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    estimate = estimate_task_error(model, task, samples, generator, device=device, dtype=model_dtype(model))
    return {
        "mse": estimate.mean,
        "stderr": estimate.stderr,
        "n_samples": estimate.n_samples,
        "step": step,
        "source": source,
    }
