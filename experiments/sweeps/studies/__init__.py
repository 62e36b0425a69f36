"""The registry of figures and studies: one module per paper figure or study of ours, each holding, in order, what it
shows, the paper's numbers, its grids per scale, its claim, its scaling rules and its preset(s).

A new figure is one new module here (see docs/architecture.md, "Where does a new figure go") plus one line in
:data:`STUDY_MODULES`. A figure module imports only the shared machinery (`experiments.sweeps.preset_kit`,
`experiments.sweeps.grading`, `experiments.sweeps.run_specs`), never another figure module (an import-linter
contract in pyproject.toml).
"""

from __future__ import annotations

from types import ModuleType

from experiments.sweeps.preset_kit import Preset
from experiments.sweeps.studies import (
    bound_vs_trained,
    conjecture6,
    depth,
    fig1,
    fig_d,
    fig_n,
    finite_set,
    icl,
    posn,
    random_features,
    smoke,
    tightness,
)

STUDY_MODULES: tuple[ModuleType, ...] = (
    fig1,
    fig_n,
    fig_d,
    posn,
    random_features,
    icl,
    bound_vs_trained,
    finite_set,
    conjecture6,
    depth,
    tightness,
    smoke,
)
"""Every figure and study module, in the order the presets are listed (`attnrank sweep --help`, reports)."""


def registered_presets() -> tuple[Preset, ...]:
    """Every preset of every module of :data:`STUDY_MODULES`, in order."""
    presets: list[Preset] = []
    for module in STUDY_MODULES:
        presets += module.PRESETS
    return tuple(presets)


def module_of(preset_name: str) -> ModuleType:
    """The module that defines the preset called ``preset_name`` (ValueError when none does)."""
    for module in STUDY_MODULES:
        if any(p.name == preset_name for p in module.PRESETS):
            return module
    raise ValueError(f"no study module defines preset {preset_name!r}")
