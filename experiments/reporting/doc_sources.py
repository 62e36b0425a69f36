"""What a generated block of the docs is, and what its generator reads (`experiments.publish.doc_blocks` rewrites them).

A block kind is declared by the module that owns its source: a study module lists its kinds in ``DOC_BLOCKS`` (the
tightness study's ``tightness``), the publish room declares the kinds over the committed stores and the recorded
benchmarks. A kind's generator is called with the :class:`DocSources` of the repository and the arguments its marker
names after the kind (``store-facts:fig1-cpu``: ``fig1-cpu``); every store, folder and dated file a block reads is
named there, by the doc, never in the generator's code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from experiments.analysis.records import Record
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.reporting.sweep_report import checked_sweeps
from experiments.sweeps.preset_kit import Preset
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_records import sweep_records

RESULTS_NAME = "results"
"""The repository's folder of committed stores, ``results/<store>/``."""


@dataclass(frozen=True)
class DocSources:
    """What the docs' generated blocks read: the repository root and the presets by name (`experiments.studies.
    PRESETS`: the registry sits above the rooms that declare blocks, so the caller passes it down)."""

    root: Path
    presets: Mapping[str, Preset]

    def store(self, name: str) -> SweepDirectory:
        """The committed store ``results/<name>/`` (ValueError naming its results store when it has none)."""
        sweep = SweepDirectory(self.root / RESULTS_NAME / name)
        if not sweep.store.is_file():
            raise ValueError(f"{RESULTS_NAME}/{name}/{sweep.store.name}: no such store")
        return sweep

    def sweeps(self, name: str) -> list[tuple[str, str, list[Record]]]:
        """(preset, scale, records) of every sweep of the committed store ``name``, read-only and checked
        (`experiments.reporting.sweep_report.checked_sweeps`)."""
        with ResultsStore(self.store(name).store, readonly=True) as opened:
            return [
                (preset, scale, list(sweep_records(opened, preset, scale)))
                for preset, scale in checked_sweeps(opened, self.presets)
            ]


@dataclass(frozen=True)
class DocBlockKind:
    """A kind of generated block: its name (the marker's first word), its generator (``lines(sources, *arguments)``
    -> the block's lines) and how many arguments its marker takes after the name."""

    name: str
    lines: Callable[..., list[str]]
    fewest: int = 0
    most: int = 0
