"""The ``cpu`` sampler: batches drawn on the CPU in float64 from a CPU generator, then moved to the run's device as
float32; the bitwise-reproducible stream of every run (and the default). Everything is `Sampler`'s own behaviour."""

from __future__ import annotations

from experiments.samplers.base import Sampler


class CpuSampler(Sampler):
    """The default sampler (module docstring)."""

    name = "cpu"
    summary = "draw batches on the CPU in float64 (the reproducible stream)"


SAMPLER = CpuSampler()
