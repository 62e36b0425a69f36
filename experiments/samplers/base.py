"""`Sampler`: how a run's training batches are drawn, in one object: its generator, how it draws a batch, its fixed set.

A run draws fresh batches from its sampler's generator at every step (``train_batches`` = 0), or a fixed set of K
batches drawn once and replayed, step t on batch t mod K (docs/training.md, "Training data"). The fixed set is a
function of the config alone (sampler, data seed, task, batch size, K), so a resumed or extended run rebuilds the same
set and nothing of it is checkpointed; by default it is the first K batches of the stream a fresh-batch run of the same
data seed draws, so step t < K of the two regimes trains on the same batch. The generator's state is saved in every
checkpoint and restored on resume.

Torch-free at import, like the config that validates a run's sampler through it (:meth:`Sampler.check`): torch is
imported by the methods that draw. A task draws its own distribution (`experiments.tasks.Task.sample`, in a given
precision on its generator's device); the sampler decides where its generator lives, in which precision it draws, and
what its fixed set is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

SAMPLER_SEED_OFFSET = 1_000_003
"""The batch generator of data seed s starts from s + this offset (model initialisation uses the seed itself)."""


class Sampler:
    """One way of drawing a run's training batches (module docstring); a sampler's module defines one as ``SAMPLER``.

    Attributes:
        name: the ``sampler`` field's value.
        summary: what it draws, in a few words (``attnrank train --sampler``'s help).
        on_device: its batches are drawn where the model lives (a CUDA run then steps the fused AdamW:
            `training.schedule.optimizer_kind`).
        seed_span: the most any stream it draws from adds to a run's data seed (the held-out evaluation stream,
            `training.evaluation.POPULATION_SEED`, lies above every data seed plus every sampler's span).
    """

    name = ""
    summary = ""
    on_device = False
    seed_span = SAMPLER_SEED_OFFSET

    def check(self, config: Any) -> None:
        """ValueError naming the field unless this sampler can draw the data of ``config`` (a TrainConfig being
        built); every task and data regime by default."""

    def generator(self, seed: int, device: torch.device) -> torch.Generator:
        """The batch generator of data seed ``seed`` for a run on ``device``: on the CPU, seeded seed + offset."""
        import torch

        return torch.Generator().manual_seed(seed + SAMPLER_SEED_OFFSET)

    def check_generator(self, generator: torch.Generator, device: torch.device) -> None:
        """ValueError unless ``generator`` can draw batches for a run on ``device``; any generator by default (a CPU
        sampler's batches are moved to the run's device)."""

    def sample(self, task: Any, batch_size: int, generator: torch.Generator) -> Any:
        """One batch of ``task`` (a `experiments.tasks.Task`) as this sampler draws it, where its generator lives and
        in its precision: in float64 on the CPU (the reproducible stream of every run before the device sampler).
        What a sampler overrides to draw differently: :meth:`draw` and a pack's draw
        (`experiments.training.packed.TrainedRuns.draw`, which stacks its runs' samples and moves them at once) both
        go through it."""
        return task.sample(batch_size, generator)

    def draw(self, task: Any, batch_size: int, generator: torch.Generator, device: torch.device) -> Any:
        """One training batch of ``task`` on ``device`` in float32: :meth:`check_generator`, :meth:`sample`, then
        moved and cast."""
        self.check_generator(generator, device)
        return self.sample(task, batch_size, generator).to(device)

    def fixed_set(self, config: Any, task: Any, device: torch.device) -> list[Any]:
        """The run's K = ``config.train_batches`` (>= 1) training batches on ``device`` in float32: the first K
        batches of the stream of its data seed (module docstring)."""
        K = config.train_batches
        if K < 1:
            raise ValueError(f"train_batches must be >= 1 for a fixed training set, got {K}")
        generator = self.generator(config.data_seed_value, device)
        return [self.draw(task, config.batch_size, generator, device) for _ in range(K)]
