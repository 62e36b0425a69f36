"""The one evaluation of a trained model: its population error by one recipe, and Theorem 2's bound where it applies.

The theorems bound the population error (the expected error over the task's distribution); a run's training loss is
the epoch mean on its batches, which on a fixed set is not (docs/training.md, "Training data"). Every model this
toolkit scores after training is scored here, by the same recipe and under the same keys:

- **the recipe**: the config's ``eval_samples`` (default :data:`EVALUATION_SAMPLES`, 20 000) samples of the held-out
  stream, a CPU generator seeded :data:`POPULATION_SEED` = 2^64 - 12345, above every seed a training stream can have
  (a data seed <= 2^63 - 1 plus its sampler's ``seed_span``, at most 1 000 003: `experiments.samplers`), so no
  training set shares a sample with it; drawn by the task's own CPU sampler (float64, cast to the model's
  precision), the same distribution for every training sampler; the model in eval mode, without gradients, put back
  in its mode after;
- **the keys**: the evaluation of the one metric record (`experiments.training.run_record.Evaluation`):
  ``population_error``, ``population_stderr``, ``population_samples``; and for a one-layer model on Theorem 2's own
  task (nearest, N = 2, D_2 keys) the bound record ``theorem2``: the certified bound
  `theory.bounds.rank_lower_bound` (d, r, H) beside that estimate (:func:`evaluation_of`).

Who calls it: the training loop at the end of every run (:func:`evaluate_model`, into result.json) and along the curve
(:data:`CURVE_SAMPLES` samples, or all ``eval_samples`` where that is smaller: the first of the same stream; the
``population`` column of metrics.csv); a run directory without an evaluation in its result (an import, a run trained
before this recipe) through :func:`evaluate_trained`, which writes evaluation.json beside result.json; ``attnrank
analyze``; ``attnrank train --eval-only`` (:func:`evaluate_run`: the model a config starts from, or its checkpoint).
No training generator is touched, so a run's losses do not depend on when it was evaluated.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

# The recipe's two sample counts live with the config (eval_samples defaults to one); re-exported here.
from experiments.config import CURVE_SAMPLES as CURVE_SAMPLES
from experiments.config import EVALUATION_SAMPLES as EVALUATION_SAMPLES
from experiments.config import TrainConfig
from experiments.model_kinds import model_kind
from experiments.tasks import Task, estimate_task_error
from experiments.training.arguments import runs_on_cpu
from experiments.training.memory import check_memory, evaluation_bytes, training_memory_source
from experiments.training.run import build_run, resolve_device
from experiments.training.run_directory import RunDirectory
from experiments.training.run_model import load_checkpoint_state, load_trained_model, model_dtype
from experiments.training.run_record import Evaluation, PopulationError, TheoremTwoBound
from theory.monte_carlo import MonteCarloEstimate
from theory.validation import check_sample_count

POPULATION_SEED = 2**64 - 12_345
"""Seed of the held-out sample stream (module docstring: no training stream can start from it)."""
EVAL_BATCH = 1_024
"""Samples per forward pass (bounds the evaluation's activation memory, whatever the sample size)."""


def population_error(
    model: torch.nn.Module, task: Task, samples: int = EVALUATION_SAMPLES, device: torch.device | None = None
) -> MonteCarloEstimate:
    """Mean error of ``model`` on the first ``samples`` samples of the held-out stream, with its standard error.

    Args:
        model: maps a Batch to predictions shaped like its target (a run's model), in float32 or float64.
        task: the run's task (a curriculum task is evaluated on its full task: `Task.sample` draws it).
        samples: number of held-out samples (>= 2).
        device: where the model lives (default: where its parameters are).
    """
    samples = check_sample_count("samples", samples)
    where = next(model.parameters()).device if device is None else device
    generator = torch.Generator().manual_seed(POPULATION_SEED)
    was_training = model.training
    model.eval()
    try:
        return estimate_task_error(
            model, task, samples, generator, batch_size=EVAL_BATCH, device=where, dtype=model_dtype(model)
        )
    finally:
        model.train(was_training)


def theorem2_applicable(config: TrainConfig) -> bool:
    """Whether a run trained on Theorem 2's own task: nearest neighbour, N = 2, D_2 keys, one layer."""
    return config.task == "nearest" and config.N == 2 and config.keys == "orthonormal" and config.layers == 1


def evaluation_of(config: TrainConfig, estimate: MonteCarloEstimate) -> Evaluation:
    """The record's evaluation of a model of ``config`` whose population error is ``estimate``: the population
    fields, and where Theorem 2 applies (`theorem2_applicable`) its bound for (d, r, H) beside them, with
    ``bound_applies`` true for a generalized attention (the theory model; the encoder adds a residual and an FFN,
    outside that class)."""
    population = PopulationError.of(estimate)
    if not theorem2_applicable(config):
        return Evaluation(population)
    applies = model_kind(config.model).generalized_attention
    return Evaluation(
        population, TheoremTwoBound.certify(config.d, config.rank, config.heads, population, applies=applies)
    )


def evaluate_model(config: TrainConfig, task: Task, model: torch.nn.Module) -> dict[str, Any]:
    """The evaluation of a model by the recipe, as the record's keys (:func:`evaluation_of`)."""
    return evaluation_of(config, population_error(model, task, config.eval_samples)).fields()


def evaluate_trained(out_dir: str | Path, device: str = "cpu") -> dict[str, Any]:
    """The evaluation of a run directory's trained model: the one in its result.json when it has one (every run
    finished by this version), else computed now (in the run's recorded precision) and written to evaluation.json.

    Raises:
        ValueError naming the file when the directory holds no trained model or a damaged file.
    """
    files = RunDirectory(Path(out_dir))
    recorded = files.read_result_evaluation()
    if recorded is not None:
        return recorded.fields()
    saved = files.read_evaluation()
    if saved is not None:
        return saved.fields()
    config, task, model = load_trained_model(files.root, device)
    evaluation = evaluation_of(config, population_error(model, task, config.eval_samples))
    files.write_evaluation(evaluation)
    return evaluation.fields()


def check_evaluation_memory(config: TrainConfig, source: str) -> None:
    """Refuse (ValueError starting with ``source``, with the estimate) an evaluation of the run ``config`` whose model
    and one batch of EVAL_BATCH held-out samples would not fit in the memory available now
    (`training.memory.evaluation_bytes`): a run imported with N = 100,000,000 used to be evaluated until the
    machine ran out of memory."""
    check_memory(
        evaluation_bytes(config, EVAL_BATCH), f"the model and one batch of {EVAL_BATCH} held-out samples", source
    )


def evaluate_run(config: TrainConfig, out_dir: Path | None, *, samples: int | None = None) -> dict[str, Any]:
    """The evaluation of the model ``config`` starts from, or of ``out_dir``'s checkpoint if it has one (``attnrank
    train --eval-only``); nothing is written.

    Args:
        config: the run (its ``init`` file, or its seed's initialisation, defines the starting model); a config that
            extends the run in ``out_dir`` along its schedule (more ``steps``) names that run's checkpoint too.
        out_dir: the run directory; a checkpoint of ``config`` there (verified; its ``eval_samples`` may differ) is
            evaluated instead, in the run's precision (`training.run_model.run_dtype`). Read only.
        samples: held-out samples (>= 2; default the config's ``eval_samples``).

    Returns:
        the population keys, ``theorem2`` where it applies, step (0 for the starting model, else the checkpoint's)
        and source ("init" = the weight file, "seed" = random initialisation, "checkpoint").
    """
    samples = config.eval_samples if samples is None else check_sample_count("samples", samples)
    if runs_on_cpu(config):  # a GPU's memory is CUDA's to guard (training.arguments)
        check_evaluation_memory(config, training_memory_source(config))
    device = resolve_device(config.device)
    task, model = build_run(config, device)  # validates the init file against the config
    step, source = 0, "init" if config.init is not None else "seed"
    checkpoint = RunDirectory(Path(out_dir)).checkpoint if out_dir is not None else None
    if checkpoint is not None and os.path.lexists(checkpoint):  # a dangling link is a damaged checkpoint
        # the flags of the run's extension name its checkpoint too
        step = load_checkpoint_state(model, checkpoint, config, extension=True, any_eval_samples=True)
        source = "checkpoint"
    estimate = population_error(model, task, samples, device)
    return {**evaluation_of(config, estimate).fields(), "step": step, "source": source}
