"""Sweeps built from the reference implementation's own config files (issue 49): ``attnrank sweep --reference
CONFIG.yaml [SWEEP.yaml] --out DIR`` trains the grid the files describe, in the reference's regime
(`experiments.sweeps.reference_configs`), and records it in the store as preset ``reference``, scale ``files``.

The preset holds no runs of its own (the files give them: :func:`with_runs`); it says how such a sweep is reported:
Figure 1's drawing (loss against rank, one line per width, one panel per depth) and the paper's statistic beside the
population error for every cell of the grid (`experiments.reporting.paper_statistic_section`). It states no claim:
the files decide what is trained, so what a result means is the reader's to say (the fig1 preset's paper scale holds
the same runs as the reference's Figure 1 files, with the paper's numbers and its claim).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from experiments.figures.sweeps import FIG1
from experiments.reporting.paper_statistic_section import paper_statistic_at
from experiments.sweeps.preset_kit import Preset
from experiments.sweeps.run_specs import RunSpec

FILES = "files"
"""The one scale of a sweep built from files."""


def _runs_come_from_files() -> list[RunSpec]:
    raise ValueError(
        "preset reference trains the runs of the reference's own config files: "
        "attnrank sweep --reference CONFIG.yaml [SWEEP.yaml] --out DIR"
    )


PRESET = Preset(
    name="reference",
    description="the grid of the reference implementation's own config files, trained in its regime",
    figure=FIG1,
    scales={FILES: _runs_come_from_files},
    expected={FILES: "the runs of the files (attnrank sweep --reference CONFIG [SWEEP])"},
    report_sections=(paper_statistic_at(None),),
    files_only=True,
    paper_note="Runs built from the reference's config files carry no paper numbers of their own; the fig1 preset's "
    "paper scale holds the runs of the reference's Figure 1 files with the paper's values beside them.",
)


def with_runs(runs: Sequence[RunSpec]) -> Preset:
    """The reference preset whose scale ``files`` holds ``runs`` (the grid read from the files)."""
    held = list(runs)
    return replace(PRESET, scales={FILES: lambda: list(held)})


PRESETS = (PRESET,)
"""This module's presets, in the order `experiments.studies` lists them."""
