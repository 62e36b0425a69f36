"""The registry of figures and studies: one module per paper figure or study of ours, each holding, in order, what it
shows, the paper's numbers, its grids per scale, its claim, its scaling rules and its preset(s), the preset holding
its figure, report sections and cell rule as objects (`experiments.sweeps.preset_kit.Preset`).

A new figure is one new module here (see docs/architecture.md, "Where does a new figure go") plus one line in
:data:`STUDY_NAMES`. This room sits above reporting and figures (the layers of pyproject.toml): a study module
composes the shared machinery (`experiments.sweeps.preset_kit`, `experiments.sweeps.grading`,
`experiments.sweeps.run_specs`), drawing functions (`experiments.figures`) and report sections
(`experiments.reporting`), never another study module (the independence contract of pyproject.toml names them
``experiments.studies.*``; a test checks that every module file here is registered). The layers below never look a
preset up by name: the command line and the public API resolve names here (:func:`get_preset`) and pass the preset
objects down.

The registry: :data:`PRESETS` (name -> preset) and :func:`get_preset`; each preset's claim and scaling rules by name
(:data:`CLAIMS`, :data:`SCALING_RULES`, :func:`judge`: the single place a sweep's claim is judged, so a claim is never
judged two ways); the generated doc blocks a study declares (:data:`DOC_BLOCK_KINDS`, from each module's optional
``DOC_BLOCKS``).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from experiments.analysis.records import Record
from experiments.reporting.doc_sources import DocBlockKind
from experiments.sweeps import runner
from experiments.sweeps.grading import Claim, ScalingRule, Verdict
from experiments.sweeps.preflight import with_request_signature
from experiments.sweeps.preset_kit import Preset
from theory.validation import check_choice

STUDY_NAMES = (
    "fig1",
    "fig_n",
    "fig_d",
    "posn",
    "random_features",
    "icl",
    "bound_vs_trained",
    "finite_set",
    "conjecture6",
    "depth",
    "tightness",
    "reference",
    "smoke",
)
"""The registry: every figure and study module of this package by name, in the order the presets are listed
(`attnrank sweep --help`, reports). A new study is its module plus one name here."""

STUDY_MODULES: tuple[ModuleType, ...] = tuple(importlib.import_module(f"{__name__}.{name}") for name in STUDY_NAMES)
"""The modules of :data:`STUDY_NAMES`, imported, in order."""


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


DOC_BLOCK_KINDS: tuple[DocBlockKind, ...] = tuple(
    kind for module in STUDY_MODULES for kind in getattr(module, "DOC_BLOCKS", ())
)
"""The generated doc blocks the study modules declare (a module's optional ``DOC_BLOCKS``), in registry order."""

PRESETS: dict[str, Preset] = {p.name: p for p in registered_presets()}
"""Preset name -> preset, in the registry's order (:data:`STUDY_MODULES`)."""


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (ValueError lists the allowed names)."""
    return PRESETS[check_choice("preset", name, tuple(PRESETS))]


CLAIMS: dict[str, Claim] = {name: p.rule for name, p in PRESETS.items() if p.rule is not None}
"""Preset name -> its claim (presets without a claim, such as ``smoke``, are absent)."""

SCALING_RULES: dict[str, tuple[ScalingRule, ...]] = {
    name: p.scaling_rules for name, p in PRESETS.items() if p.scaling_rules
}
"""Preset -> the scaling rules of its long scale (stated before the runs; docs/scaling.md)."""


def judge(preset: str, records: Sequence[Record]) -> Verdict | None:
    """The verdict of ``preset``'s claim on ``records`` (None when the preset states no claim)."""
    claim = CLAIMS.get(preset)
    return None if claim is None else claim.judge(records)


@with_request_signature
def run_sweep(preset: str | Preset, scale: str, out: Path | str, **options: Any) -> dict[str, Any]:
    """`experiments.sweeps.runner.run_sweep` of the preset called ``preset`` (or of a Preset): the public API's entry
    (`attnrank.run_sweep`), the layers below never looking a preset up by name. ``options`` are the other fields of
    the sweep's request (`experiments.sweeps.preflight.SweepRequest`), by name; the summary is runner.run_sweep's."""
    return runner.run_sweep(get_preset(preset) if isinstance(preset, str) else preset, scale, out, **options)


def rebuild_store(preset: str | Preset, scale: str, out: Path | str, **options: Any) -> dict[str, Any]:
    """`experiments.sweeps.runner.rebuild_store` of the preset called ``preset`` (or of a Preset)."""
    return runner.rebuild_store(get_preset(preset) if isinstance(preset, str) else preset, scale, out, **options)
