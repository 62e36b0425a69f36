"""A trained model's population error: its mean task error on fresh samples from a held-out stream.

The theorems bound the population error (the expected error over the task's distribution); the paper's Figure 1
plots the training loss of a run that replays one fixed set (docs/paper.md section 6). Every run records both: its
epoch-mean training loss (``loss`` in metrics.csv, ``best_loss``), and the population error measured here, along the
curve (the ``population`` column of metrics.csv, :data:`CURVE_SAMPLES` samples, at every epoch that ends on a
checkpoint step and at the last step) and at the end (``population_error``, ``population_stderr`` and
``population_samples`` in result.json, :data:`FINAL_SAMPLES` samples).

The held-out stream is a CPU generator seeded :data:`POPULATION_SEED` = 2^64 - 12345, above every seed a training
stream can have (the cpu and device samplers seed data_seed + 1 000 003 <= 2^63 + 1 000 002; the reference sampler
data_seed + w <= 2^63 + 63), so no training set shares a sample with it; the curve's samples are the first
:data:`CURVE_SAMPLES` of the final ones. Samples are drawn by the task's own CPU sampler (float64, cast to float32
for the model), the same distribution for every training sampler. The model is evaluated in eval mode without
gradients and put back in train mode; neither the model's training nor any training generator is touched, so a run's
losses do not depend on when (or whether) it was evaluated.
"""

from __future__ import annotations

import torch

from experiments.tasks import Task, estimate_task_error
from theory.monte_carlo import MonteCarloEstimate

POPULATION_SEED = 2**64 - 12_345
"""Seed of the held-out sample stream (module docstring: no training stream can start from it)."""
CURVE_SAMPLES = 4_096
"""Samples of each point of the population curve (standard error ~0.005 at the errors of Figure 1's runs)."""
FINAL_SAMPLES = 20_000
"""Samples of a run's final population error."""
EVAL_BATCH = 1_024
"""Samples per forward pass (bounds the evaluation's activation memory: 1 024 sequences, whatever the sample size)."""


def population_error(model: torch.nn.Module, task: Task, samples: int, device: torch.device) -> MonteCarloEstimate:
    """Mean error of ``model`` on the first ``samples`` samples of the held-out stream, with its standard error.

    Args:
        model: maps a float32 Batch on ``device`` to predictions shaped like its target (a training run's model).
        task: the run's task (a curriculum task is evaluated on its full task: `Task.sample` draws it).
        samples: number of held-out samples (>= 2).
        device: where the model lives.
    """
    generator = torch.Generator().manual_seed(POPULATION_SEED)
    was_training = model.training
    model.eval()
    try:
        return estimate_task_error(model, task, samples, generator, batch_size=EVAL_BATCH, device=device)
    finally:
        model.train(was_training)


def population_fields(estimate: MonteCarloEstimate) -> dict[str, float | int]:
    """result.json's population keys of an estimate: ``population_error``, ``population_stderr``,
    ``population_samples``."""
    return {
        "population_error": float(estimate.mean),
        "population_stderr": float(estimate.stderr),
        "population_samples": int(estimate.n_samples),
    }
