"""The ``device`` sampler: batches drawn where the model lives, in float32, from a generator on the run's device
(`experiments.tasks.Task.sample` in float32: the same distributions as the CPU sampler, another stream), so nothing
crosses from the host at a step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from experiments.samplers.base import SAMPLER_SEED_OFFSET, Sampler

if TYPE_CHECKING:  # pragma: no cover
    import torch


class DeviceSampler(Sampler):
    """The on-device sampler (module docstring)."""

    name = "device"
    summary = (
        "on the run's device in float32 from a generator there (same distribution, another stream; nothing crosses "
        "from the host)"
    )
    on_device = True

    def check(self, config: Any) -> None:
        if config.task == "biased":
            raise ValueError(
                "sampler must be 'cpu' for the biased task (its target is computed by numpy), got 'device'"
            )

    def generator(self, seed: int, device: torch.device) -> torch.Generator:
        """A generator on ``device``, seeded as the CPU sampler's."""
        import torch

        return torch.Generator(device=device).manual_seed(seed + SAMPLER_SEED_OFFSET)

    def sample(self, task: Any, batch_size: int, generator: torch.Generator) -> Any:
        """One batch in float32 where the generator lives (the run's device)."""
        import torch

        return task.sample(batch_size, generator, torch.float32)

    def check_generator(self, generator: torch.Generator, device: torch.device) -> None:
        """ValueError unless the generator lives on the run's device type (nothing crosses from the host)."""
        if generator.device.type != device.type:
            raise ValueError(f"the device sampler's generator is on {generator.device}, the run on {device}")


SAMPLER = DeviceSampler()
