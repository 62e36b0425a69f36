"""The plumbing preset: six tiny runs of a few seconds each, to test the sweep machinery (no claim)."""

from __future__ import annotations

from experiments.figures.sweeps import FIG1
from experiments.sweeps.preset_kit import (
    FARTHEST,
    Preset,
    at_scales,
    grid,
)
from experiments.sweeps.run_specs import RunSpec


def _smoke(scale: str) -> list[RunSpec]:
    tiny = {
        **FARTHEST,
        "d": 4,
        "N": 3,
        "ffn_dim": 8,
        "steps": 30,
        "batch_size": 16,
        "log_every": 5,
        "checkpoint_every": 5,
        "device": "cpu",
    }
    return list(grid(tiny, rank=(4, 2, 1), seed=(0, 1)))


PRESET = Preset(
    name="smoke",
    description="Plumbing test: six tiny runs of a few seconds each",
    figure=FIG1,
    scales=at_scales(_smoke, ("quick",)),
    paper=(),
    claim="none (tests the sweep machinery)",
    expected={"quick": "6 runs, seconds"},
)


PRESETS = (PRESET,)
"""This module's presets, in the order `experiments.studies` lists them."""
