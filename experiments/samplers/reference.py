"""The ``reference`` sampler: the reference implementation's data, drawn bitwise as its data module draws it
(`experiments.samplers.reference_data`: float32, 7 worker streams seeded data_seed + w, batches round-robin), on
Figure 1's farthest-point task, as the fixed set it replays every epoch (docs/paper.md section 6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from experiments.samplers.base import Sampler

if TYPE_CHECKING:  # pragma: no cover
    import torch

TASKS = ("farthest",)
"""Tasks the reference sampler draws (Figure 1's; the reference's nearest-neighbour data is not reproduced here)."""


class ReferenceSampler(Sampler):
    """The reference's fixed set (module docstring). Its generator is the CPU sampler's (saved in checkpoints like
    every run's) and draws nothing: a reference run replays its fixed set."""

    name = "reference"
    summary = (
        "exactly as the reference implementation's data module draws them (farthest task, with --train-batches: its "
        "fixed set bitwise, attnrank.reference_training_set)"
    )

    def check(self, config: Any) -> None:
        if config.task not in TASKS:
            raise ValueError(
                f"sampler must be 'cpu' or 'device' for task {config.task!r} (the reference sampler draws the "
                f"reference implementation's {', '.join(TASKS)} data only), got 'reference'"
            )
        if config.train_batches == 0:
            raise ValueError(
                "train_batches must be >= 1 with sampler 'reference' (the reference replays a fixed set every "
                "epoch: 100 batches in the paper's runs), got 0"
            )

    def fixed_set(self, config: Any, task: Any, device: torch.device) -> list[Any]:
        """The reference's fixed set for the run's data seed (`reference_data.reference_training_set`), bitwise."""
        from experiments.samplers.reference_data import reference_training_set  # torch, loaded only to draw

        K = config.train_batches
        X, target = reference_training_set(config.d, config.N, config.batch_size, K, config.data_seed_value)
        X, target = X.to(device), target.to(device)  # each (K, B, N, d)
        return [task.batch_of(X[k], target[k]) for k in range(K)]


SAMPLER = ReferenceSampler()
