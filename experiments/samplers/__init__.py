"""The registry of samplers: how a run's training batches are drawn, one module per sampler, each holding its
`Sampler` as ``SAMPLER`` (its generator, how it draws a batch, its fixed set, the runs it can draw for).

A new sampler is one module here plus one line in :data:`SAMPLER_NAMES` (docs/training.md, "Training data"). An unknown
name is an error (:func:`get_sampler`), never a default. Torch-free at import, below `experiments.config` (which
validates a run's sampler through it).
"""

from __future__ import annotations

import importlib

from experiments.samplers.base import SAMPLER_SEED_OFFSET, Sampler
from theory.validation import check_choice

SAMPLER_NAMES = ("cpu", "device", "reference")
"""The registry: every sampler of this package by name (the ``sampler`` field's values, in this order). A new sampler
is its module plus one name here."""

SAMPLERS: dict[str, Sampler] = {name: importlib.import_module(f"{__name__}.{name}").SAMPLER for name in SAMPLER_NAMES}
"""Every sampler by name (`TrainConfig.sampler`)."""


def get_sampler(name: str) -> Sampler:
    """The sampler called ``name`` (ValueError naming ``sampler`` and the allowed values otherwise)."""
    return SAMPLERS[check_choice("sampler", name, SAMPLER_NAMES)]


__all__ = ["SAMPLERS", "SAMPLER_NAMES", "SAMPLER_SEED_OFFSET", "Sampler", "get_sampler"]
