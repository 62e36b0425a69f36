"""The sweep report's table of construction-initialised arms (the depth preset): start, steps to a target, final.

Reads the records and run directories of a sweep (`experiments.analysis.construction_arms`) and prints one row per arm:
the cell, the starting point, the construction's predicted error, the fresh error at step 0, the steps to the
preset's target error (the depth study's ``DEPTH_ARM_TARGET``) and the fresh error after training, each as its spread
over seeds. The depth preset holds it as a report section built for its target (:func:`construction_arms_section`),
after its claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from experiments.analysis.records import Record
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.sweeps.preset_kit import Preset, ReportSection
from theory.monte_carlo import DEFAULT_Z


def has_construction_arms(records: Sequence[Record]) -> bool:
    """Whether any finished training run of the records starts from a construction recipe."""
    return any(str(r.get("init") or "").startswith("construction:") and r.get("status") == "finished" for r in records)


def construction_arms_section(target: float) -> ReportSection:
    """The arms table as a report section (after the claim) for the steps to ``target``."""

    def render(preset: Preset, records: Sequence[Record], out: Path, scale: str) -> tuple[list[str], list[Path]]:
        return construction_arms_lines(records, SweepDirectory(out), target), []

    return ReportSection("construction-arms", render, place="after-claim")


def construction_arms_lines(records: Sequence[Record], sweep: SweepDirectory, target: float) -> list[str]:
    """Markdown lines of the arms table (empty when no run starts from a construction).

    Args:
        records: the sweep's records (spec fields merged with metrics).
        sweep: the sweep directory (each run's metrics.csv gives its steps to the target; absent directories are said).
        target: the fixed error whose steps are counted.

    Returns:
        A heading, the table and its notes.
    """
    if not has_construction_arms(records):
        return []
    # Loads torch (the step-0 errors are evaluated): imported here so `attnrank report` on other sweeps stays
    # torch-free, as `attnrank sweep`'s driver does (docs/architecture.md, "Imports at the top of the module").
    from experiments.analysis.construction_arms import construction_arms

    arms = construction_arms(records, sweep, target)
    lines = [
        "### Constructions as starting points",
        "",
        "Each arm trains the same model from scratch or from a construction (`init = construction:NAME[@T]`, T the "
        "construction's inverse temperature; 'run' = the run's own). Start: fresh error of the starting model (step "
        "0, 20 000 samples, +- one s.e.); predicted: the construction's exact error at its T (Theorem 5's is the mean "
        f"over random directions, one draw differs by ~5%); steps to {target:g}: 0 when the start + "
        f"{DEFAULT_Z:g} s.e. is at or below it, else the first epoch (training-loss mean) at or below it, 'never' if "
        "none; first / highest epoch: mean training loss of the first 'log_every' steps and the highest epoch mean "
        "(how far the first optimiser steps move the start); final: fresh error after training. Ranges are over "
        "seeds.",
        "",
        f"| L | r | p | H | start from | predicted | start (step 0) | first epoch | highest epoch | steps to "
        f"{target:g} | final | steps | seeds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes: set[str] = set()
    for arm in arms:
        starts = [run.start for run in arm.runs]
        worst_se = max(run.start_stderr for run in arm.runs)
        finals = [run.final for run in arm.runs if math.isfinite(run.final)]
        reached = [_steps_text(run.steps_to_target) for run in arm.runs]
        firsts = [run.first_epoch for run in arm.runs if math.isfinite(run.first_epoch)]
        worsts = [run.worst_epoch for run in arm.runs if math.isfinite(run.worst_epoch)]
        notes.update(run.note for run in arm.runs if run.note)
        predicted = "-" if math.isnan(arm.predicted) else _fmt(arm.predicted)
        lines.append(
            f"| {arm.layers} | {arm.rank} | {arm.p} | {arm.heads} | {arm.label} | {predicted} | "
            f"{_spread(starts)} (+- {_fmt(worst_se)}) | {_spread(firsts)} | {_spread(worsts)} | {' / '.join(reached)} "
            f"| {_spread(finals)} | {arm.steps} | "
            f"{len(arm.runs)} |"
        )
    lines.append("")
    recovered = sorted(n for n in notes if n.startswith("curves recovered"))
    unknown = sorted(n for n in notes if not n.startswith("curves recovered"))
    if unknown:
        lines += ["Training curves unknown ('?', '-'): " + "; ".join(unknown) + ".", ""]
    if recovered:
        lines += ["Training curves: " + "; ".join(recovered) + ".", ""]
    return lines


def _steps_text(steps: int | None) -> str:
    if steps is None:
        return "never"
    return "?" if steps < 0 else str(steps)


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return _fmt(low) if low == high else f"{_fmt(low)} - {_fmt(high)}"


def _fmt(value: float) -> str:
    return f"{value:.3g}"
