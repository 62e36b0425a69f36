"""Sweep presets by name: every experiment of docs/paper.md section 6 (and each study of ours) as run specs per scale.

Each preset is defined in its figure's module (`experiments.sweeps.studies`); this module only lists them by name.
The types and helpers they share are in `experiments.sweeps.preset_kit` (presets, scales, schedules, grids) and
`experiments.sweeps.run_specs` (what one run is).
"""

from __future__ import annotations

from experiments.sweeps.preset_kit import GPU, LONG, SCALES, Preset
from experiments.sweeps.studies import registered_presets
from theory.validation import check_choice

__all__ = ["GPU", "LONG", "PRESETS", "SCALES", "Preset", "get_preset"]

PRESETS: dict[str, Preset] = {p.name: p for p in registered_presets()}
"""Preset name -> preset, in the registry's order (`experiments.sweeps.studies.STUDY_MODULES`)."""


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (ValueError lists the allowed names)."""
    return PRESETS[check_choice("preset", name, tuple(PRESETS))]
