"""Report section: the paper's own statistic at each fifth of the schedule, beside the population error (issue 47).

Figure 1 plots, per cell, the minimum over every run of that cell of the lowest epoch-mean training loss on its fixed
set (seaborn's estimator "min" over the data seeds; docs/paper.md section 6). For a store that trains prefixes and
extensions of one schedule (fig1-d64-replay: 20k, 40k, 100k of 100k steps), this section reads, for every cell and at
every fifth of the schedule S (20k, 40k, ..., 100k) that some run has reached:

- the training loss on the set at S: each run's lowest epoch mean up to S, from its curve; the paper's statistic is
  the minimum over the cell's data seeds, and the worst the maximum;
- the population error on the recipe's 20,000 held-out samples at S, with its standard error: the result of the run
  that ended at S, or the store's milestone evaluation of a longer run at S (`experiments.analysis.milestones`);
- the gap: that population error minus the last epoch's training loss at S.

A "lineage" is one run and every extension of it (the same config but for ``steps``, along one schedule): their
curves are one curve, bitwise (`experiments.sweeps.extensions`), so a lineage's longest curve is read. Everything
comes from the store's committed files, so the section regenerates from a fresh clone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

from experiments.analysis.milestones import Milestone
from experiments.analysis.records import Record
from experiments.analysis.run_curves import Curve
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.config import TrainConfig
from experiments.sweeps.grading import range_text
from experiments.sweeps.preset_kit import Preset, ReportSection

FIFTHS = 5
"""Milestones at every fifth of the schedule (20k, 40k, 60k, 80k, 100k of 100k: issue 47's steps)."""
_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


@dataclasses.dataclass(frozen=True)
class Lineage:
    """One run and its extensions: the records, and the longest curve among them."""

    cell: tuple[int, int, int, int]  # (d, layers, rank, width)
    data_seed: int
    records: tuple[Record, ...]
    curve: Curve
    schedule: int


def _lineage_key(record: Record) -> str:
    config = TrainConfig.from_dict({k: v for k, v in record.items() if k in _FIELDS})
    return dataclasses.replace(config, steps=config.schedule_steps or config.steps).config_hash()


def lineages(records: Sequence[Record], out: Path) -> list[Lineage]:
    """The finished or running training runs of ``records`` grouped into lineages, each with its longest curve."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if r.get("kind") == "train":
            groups.setdefault(_lineage_key(r), []).append(r)
    found = []
    for members in groups.values():
        curves = [c for c in (SweepDirectory(out).run_curve(str(r["hash"]))[0] for r in members) if c]
        if not curves:
            continue
        first = members[0]
        seed = first.get("data_seed")
        found.append(
            Lineage(
                cell=(int(first["d"]), int(first["layers"]), int(first["rank"]), int(first["width"])),
                data_seed=int(first["seed"] if seed is None else seed),
                records=tuple(members),
                curve=max(curves, key=len),
                schedule=int(first.get("schedule_steps") or first["steps"]),
            )
        )
    return sorted(found, key=lambda g: (-g.cell[0], g.cell[1], -g.cell[2], g.cell[3], g.data_seed))


def population_at(lineage: Lineage, step: int, milestones: dict[tuple[str, int], Milestone]) -> tuple[float, float]:
    """(mean, standard error) of the lineage's population error at ``step`` on the recipe's held-out samples, from
    the run that ended there or a milestone evaluation; (nan, nan) when neither exists."""
    for r in lineage.records:
        error, stderr = r.get("population_error"), r.get("population_stderr")
        if r.get("steps") == step and r.get("status") == "finished" and isinstance(error, (int, float)):
            return float(error), float(stderr) if isinstance(stderr, (int, float)) else math.nan
    for r in lineage.records:
        milestone = milestones.get((str(r["hash"]), step))
        if milestone is not None:
            return milestone.population_error, milestone.population_stderr
    return math.nan, math.nan


def paper_value(preset: Preset, cell: tuple[int, int, int, int]) -> str:
    """The paper's Figure 1 value for ``cell`` as the preset records it (a range where it gives one), or ``-``."""
    d, layers, rank, width = cell
    rank_class = "full" if rank == d else "half" if 2 * rank == d else "low" if 4 * rank <= d else "other"
    for number in preset.paper:
        where = number.where
        if where.get("layers") == layers and where.get("rank_class") == rank_class and where.get("width") == width:
            return range_text(number.value)
    return "-"


def _fmt(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.3g}"


def cell_label(cell: tuple[int, int, int, int]) -> str:
    """``d=64 L=3 r=32`` for the cell (d, layers, rank, width), with `` c=W`` where the width is not 1."""
    d, layers, rank, width = cell
    return f"d={d} L={layers} r={rank}" + (f" c={width}" if width != 1 else "")


@dataclasses.dataclass(frozen=True)
class MilestoneRow:
    """One cell at one fifth S of its schedule: per data seed that reached S, the lowest epoch mean up to S, the last
    epoch mean at S, and the population error (mean, standard error; nan where not evaluated)."""

    cell: tuple[int, int, int, int]  # (d, layers, rank, width)
    step: int
    best: dict[int, float]
    last: dict[int, float]
    population: dict[int, tuple[float, float]]

    @property
    def label(self) -> str:
        return cell_label(self.cell)

    @property
    def statistic(self) -> float:
        """The paper's statistic: the minimum over the data seeds of the lowest epoch mean."""
        return min(self.best.values())

    def gap(self, seed: int) -> float:
        """Population error minus the last epoch's training loss at S, for ``seed`` (nan where not evaluated)."""
        return self.population[seed][0] - self.last[seed]


def milestone_rows(records: Sequence[Record], out: Path) -> list[MilestoneRow]:
    """Every cell's rows at every fifth of its schedule that one of its runs has reached (module docstring)."""
    found = lineages(records, out)
    milestones = SweepDirectory(out).read_milestones() if found else {}
    rows = []
    for cell in sorted({g.cell for g in found}, key=lambda c: (-c[0], c[1], -c[2], c[3])):
        members = [g for g in found if g.cell == cell]
        schedule = max(g.schedule for g in members)
        for step in range(schedule // FIFTHS, schedule + 1, schedule // FIFTHS):
            reached = [g for g in members if g.curve[-1][0] >= step]
            if reached:
                rows.append(
                    MilestoneRow(
                        cell=cell,
                        step=step,
                        best={g.data_seed: min(v for s, v in g.curve if s <= step) for g in reached},
                        last={g.data_seed: next(v for s, v in reversed(g.curve) if s <= step) for g in reached},
                        population={g.data_seed: population_at(g, step, milestones) for g in reached},
                    )
                )
    return rows


def milestone_section(preset: Preset, records: Sequence[Record], out: Path, scale: str) -> tuple[list[str], list[Path]]:
    """The table described in the module docstring (no figure: the report's curves figures show the same runs)."""
    rows = milestone_rows(records, out)
    if not rows:
        return [], []
    lines = [
        "### The paper's statistic at each fifth of the schedule",
        "",
        "Per cell and step S: the training loss on the set at S (each run's lowest epoch mean up to S; the paper's "
        "statistic is the minimum over the cell's data seeds, the worst the maximum), the population error on the "
        "recipe's 20,000 held-out samples at S with its standard error (the run that ended at S, or a milestone "
        "evaluation of a longer run: `milestones.csv`), and the gap (population error minus the last epoch's training "
        "loss at S), per data seed. Runs and their extensions are one curve, so each data seed's longest curve is "
        "read. The paper's value is its Figure 1 cell at 100,000 steps.",
        "",
        "| cell | S | paper's statistic (min over data seeds) | worst over data seeds | population error "
        "(data seed: mean +- se) | gap (data seed) | paper |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        pop_text = ", ".join(
            f"{seed}: {_fmt(mean)} +- {stderr:.2g}" if math.isfinite(mean) else f"{seed}: not evaluated"
            for seed, (mean, stderr) in row.population.items()
        )
        gap_text = ", ".join(
            f"{seed}: {_fmt(row.gap(seed))}" for seed, (mean, _) in row.population.items() if math.isfinite(mean)
        )
        seeds = len(row.best)
        lines.append(
            f"| {row.label} | {row.step:,} | {_fmt(row.statistic)} | {_fmt(max(row.best.values()))} "
            f"({seeds} data seed{'s' if seeds > 1 else ''}) | {pop_text} | {gap_text or '-'} | "
            f"{paper_value(preset, row.cell)} |"
        )
    lines.append("")
    return lines, []


MILESTONE_STATISTIC = ReportSection("paper-statistic-milestones", milestone_section, place="after-claim")
"""The paper's statistic and the population error at every fifth of the schedule (fig1-d64-replay)."""
