"""The docs' answer on Figure 1's deep columns (``deep-columns:STORE``; `experiments.publish.doc_blocks` rewrites it at
the end of docs/scaling.md and docs/paper.md, issue 47).

Figure 1's cells are the minimum over a cell's data seeds of each run's lowest epoch-mean training loss on its fixed
set of 100 batches (docs/paper.md section 6), after the paper's 100,000 steps. The block reads a store that trains
the deciding cells in the paper's regime (fig1-d64-replay) and says, per cell, where it stands at the furthest fifth of
the schedule its runs have reached: that statistic beside the paper's value and their ratio, the worst data seed,
the population error on the recipe's 20,000 held-out samples with its standard error, and the gap between the two.
The rows come from the store's report section (`experiments.reporting.milestone_section`), so the block and the report
cannot disagree. A last line says whether every cell has reached the end of its schedule; until then the block is the
answer so far, and says so.

The claim's rule (`experiments.studies.fig1.fig1_d64_depth`) grades at the largest budget that every run of its cells
has reached, every data seed included. So when each cell has some data seed at the schedule's end but another data
seed still trains, the block gives the rule's grade (still at the shorter budget) and beside it the same rule on the
runs that have reached the end alone. That second grade is an upper bound on the final one: each comparison sets one
cell's best data seed against the other's worst, so a further data seed can only lower a ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from experiments.analysis.records import Record
from experiments.publish.store_blocks import claim_line
from experiments.reporting.doc_sources import RESULTS_NAME, DocBlockKind, DocSources
from experiments.reporting.milestone_section import (
    Lineage,
    MilestoneRow,
    cell_label,
    lineages,
    milestone_rows,
    paper_value,
)


def _fmt(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.3g}"


def _ratio(row: MilestoneRow, paper: str) -> str:
    """Our statistic over the paper's value, where the paper gives one number."""
    try:
        return f"{row.statistic / float(paper):#.3g}x"
    except ValueError:
        return "-"


def deep_columns(sources: DocSources, store: str) -> list[str]:
    """``deep-columns:STORE``: the module docstring's table and status line."""
    sweeps = sources.sweeps(store)
    if len(sweeps) != 1:
        raise ValueError(f"{RESULTS_NAME}/{store}: deep-columns reads a store of one sweep, found {len(sweeps)}")
    preset_name, scale, records = sweeps[0]
    preset = sources.presets[preset_name]
    rows = milestone_rows(records, sources.store(store).root)
    if not rows:
        raise ValueError(f"{RESULTS_NAME}/{store}: no training run with a curve to read")
    furthest: dict[tuple[int, int, int, int], MilestoneRow] = {}
    for row in rows:  # rows come in step order within a cell
        furthest[row.cell] = row
    schedule = max(int(r.get("schedule_steps") or r["steps"]) for r in records if r.get("kind") == "train")
    lines = [
        f"Generated from `{RESULTS_NAME}/{store}/` (its report's section \"The paper's statistic at each fifth of the "
        'schedule", which has every fifth) by `attnrank report --docs`. Per cell, at the furthest fifth S of the '
        f"{schedule:,}-step schedule that its runs have reached: the paper's statistic (the lowest epoch-mean training "
        "loss on the fixed set, minimum over the cell's data seeds), the paper's Figure 1 value and the ratio of the "
        "two, the worst data seed, the population error on 20,000 held-out samples (mean +- standard error, per data "
        "seed), and the gap (population error minus the last epoch's training loss at S).",
        "",
        "| cell | S | on the set (min over data seeds) | paper | ratio | worst data seed (data seeds at S) | "
        "population error | gap |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in furthest.values():
        paper = paper_value(preset, row.cell)
        population = ", ".join(
            f"{seed}: {_fmt(mean)} +- {stderr:.2g}" if math.isfinite(mean) else f"{seed}: not evaluated"
            for seed, (mean, stderr) in row.population.items()
        )
        gaps = ", ".join(f"{seed}: {_fmt(row.gap(seed))}" for seed in row.population if math.isfinite(row.gap(seed)))
        lines.append(
            f"| {row.label} | {row.step:,} | {_fmt(row.statistic)} | {paper} | {_ratio(row, paper)} | "
            f"{_fmt(max(row.best.values()))} ({len(row.best)}) | {population} | {gaps or '-'} |"
        )
    behind = sorted((row.step, row.label) for row in furthest.values() if row.step < schedule)
    training = _seeds_behind(records, sources.store(store).root, furthest, schedule)
    lines.append("")
    if behind:
        lines.append(
            "Not the answer yet: the furthest fifth reached is "
            + ", ".join(f"{step:,} for {label}" for step, label in behind)
            + f", of {schedule:,} steps (the runs go on from checkpoints; `{RESULTS_NAME}/{store}/README.md` says "
            "where they stand). The grade by the claim's rule waits for every cell at the full schedule."
        )
        return lines
    if not training:
        lines.append(f"Every cell has reached the full {schedule:,}-step schedule.")
        claim = claim_line(preset_name, scale, records)
        if claim:
            lines.append(claim)
        return lines
    named = "; ".join(f"data seed {g.data_seed} of {cell_label(g.cell)}, at step {g.curve[-1][0]:,}" for g in training)
    lines.append(
        f"Every cell has reached the full {schedule:,}-step schedule on at least one data seed; still training: "
        f"{named} (the runs go on from checkpoints; `{RESULTS_NAME}/{store}/README.md` says where they stand). The "
        "claim's rule grades at the largest budget that every run has reached:"
    )
    claim = claim_line(preset_name, scale, records)
    if claim:
        left_out = {str(r["hash"]) for g in training for r in g.records}
        finished = [r for r in records if str(r.get("hash")) not in left_out]
        lines += [
            claim,
            "",
            "The same rule on the runs that have reached the full schedule, the data seeds still training left out. "
            "A further data seed can only lower this grade (each comparison sets one cell's best data seed against "
            "the other's worst), so it bounds the final grade from above:",
            "",
            str(claim_line(preset_name, scale, finished)),
        ]
    return lines


def _seeds_behind(
    records: Sequence[Record],
    out: Path,
    furthest: dict[tuple[int, int, int, int], MilestoneRow],
    schedule: int,
) -> list[Lineage]:
    """The lineages (data seeds) whose curve stops short of ``schedule`` in cells that have another data seed there."""
    return [
        g
        for g in lineages(records, out)
        if g.cell in furthest and furthest[g.cell].step >= schedule and g.curve[-1][0] < schedule
    ]


DOC_BLOCKS = (DocBlockKind("deep-columns", deep_columns, 1, 1),)
"""The block kind of this module (module docstring)."""
