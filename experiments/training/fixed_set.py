"""A run's fixed training set (``TrainConfig.train_batches`` = K >= 1): K batches drawn once, step t trains on t mod K.

This is the reference implementation's regime (docs/paper.md section 6): its data module re-seeds every epoch, so each
of its runs replays one set of 100 batches for all its epochs. The set is a function of the config alone (sampler,
data seed, task, batch size, K), so a resumed or extended run rebuilds the same set and nothing of it is checkpointed:

- sampler "reference": `reference_data.reference_training_set` with the run's data seed (bitwise the reference's);
- sampler "cpu" or "device": the first K batches of the stream a fresh-batch run of the same data seed draws
  (`run.sampler_generator`), so step t < K of the two regimes trains on the same batch.
"""

from __future__ import annotations

import torch

from experiments.config import TrainConfig
from experiments.tasks import Batch, Task, draw_batch
from experiments.training.reference_data import reference_training_set
from experiments.training.run import sampler_generator


def fixed_training_set(config: TrainConfig, task: Task, device: torch.device) -> list[Batch]:
    """The run's K training batches on ``device`` in float32 (K = config.train_batches >= 1)."""
    K = config.train_batches
    if K < 1:
        raise ValueError(f"train_batches must be >= 1 for a fixed training set, got {K}")
    if config.sampler == "reference":
        X, target = reference_training_set(config.d, config.N, config.batch_size, K, config.data_seed_value)
        X, target = X.to(device), target.to(device)  # each (K, B, N, d)
        return [Batch(tokens=X[k], target=target[k], context=X[k]) for k in range(K)]
    generator = sampler_generator(config.data_seed_value, config.sampler, device)
    return [draw_batch(task, config.batch_size, generator, config.sampler, device) for _ in range(K)]
