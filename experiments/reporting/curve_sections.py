"""Report sections of a sweep that trains prefixes of a long schedule (fig1-d64): each run's curve fitted and
projected to the schedule's end, the depth ladder in d, and each run's training loss beside its population error. A
preset holds them as objects (`Preset.report_sections`: CURVE_PROJECTIONS, DEPTH_LADDER, TRAINING_VS_POPULATION);
all read the curves from the run directories or the committed curves.csv and population.csv
(`experiments.analysis.run_curves`), so the report regenerates from a fresh clone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.analysis.compute_scaling import SCALING_INTERVAL, floor_text
from experiments.analysis.curve_projection import project_curve
from experiments.analysis.records import Record
from experiments.analysis.run_curves import Curve
from experiments.analysis.sweep_directory import CURVES_NAME, SweepDirectory
from experiments.config import TrainConfig
from experiments.figures.run_curves import (
    DrawnCurve,
    TrainingAndPopulation,
    plot_depth_ladder,
    plot_prefix_curves,
    plot_training_vs_population,
)
from experiments.sweeps.preset_kit import Preset, ReportSection

_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def _config(record: Record) -> TrainConfig:
    return TrainConfig.from_dict({k: v for k, v in record.items() if k in _FIELDS})


def _fmt(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.3g}"


def _label(record: Record) -> str:
    # The step budget is part of the name: a store that extends a run (20k, then 40k, then 100k of one schedule) holds
    # several runs of one cell, and their lines must be told apart.
    data = "" if record.get("data_seed") is None else f" data_seed={record['data_seed']}"
    cell = f"d={record['d']} L={record['layers']} r={record['rank']} seed={record['seed']}"
    return f"{cell}{data} steps={record['steps']}"


def _train_runs(records: Sequence[Record]) -> list[Record]:
    runs = [r for r in records if r.get("kind") == "train"]
    return sorted(
        runs,
        key=lambda r: (
            -int(r["d"]),
            int(r["layers"]),
            -int(r["rank"]),
            int(r["seed"]),
            int(r.get("data_seed") or 0),
            int(r["steps"]),
        ),
    )


def _curves(records: Sequence[Record], out: Path) -> tuple[dict[str, Curve], set[str]]:
    curves, recovered = {}, set()
    for r in records:
        curve, _, source = SweepDirectory(out).run_curve(str(r["hash"]))
        if curve:
            curves[str(r["hash"])] = curve
            if source.startswith("re-run"):
                recovered.add(source.split(":")[0])
    return curves, recovered


def _paper_value(preset: Preset, where: dict[str, Any]) -> float | None:
    for number in preset.paper:
        if dict(number.where) == where and number.value[0] == number.value[1]:
            return number.value[0]
    return None


def deep_column_markers(preset: Preset, drawn: Sequence[Record]) -> list[tuple[str, float]]:
    """The paper's width-1 numbers at L = 1 and 3, half and full rank, as (label, value) markers for a curve figure:
    those of the cells that ``drawn`` (the figure's runs) has, so that no level stands without its curve."""
    present = {(int(r["layers"]), _rank_class(r)) for r in drawn if int(r.get("width", 1)) == 1}
    markers = []
    for layers in (1, 3):
        for cls, name in (("half", "r=d/2"), ("full", "full rank")):
            value = _paper_value(preset, {"layers": layers, "rank_class": cls, "width": 1})
            if value is not None and (layers, cls) in present:
                markers.append((f"L={layers} {name} {value:g}", value))
    return markers


def _rank_class(record: Record) -> str:
    """The paper's name for the run's rank: "full" (r = d), "half" (r = d/2) or "other"."""
    d, rank = int(record["d"]), int(record["rank"])
    return "full" if rank == d else "half" if 2 * rank == d else "other"


def projection_section(
    preset: Preset, records: Sequence[Record], out: Path, scale: str
) -> tuple[list[str], list[Path]]:
    """Each run's curve: steps trained of its schedule, best and last epoch loss, the law fitted after the warm-up
    and its value at the schedule's end; one figure of the largest d's curves with the paper's values."""
    runs = _train_runs(records)
    curves, recovered = _curves(runs, out)
    level = f"{int(SCALING_INTERVAL * 100)}%"
    lines = [
        "### Curves and where they are heading",
        "",
        "Each run trains a prefix of the paper's schedule. After the warm-up, floor + a n^-b (n = samples seen) is "
        "fitted to the run's epoch-mean losses (`experiments.analysis.curve_projection`) and evaluated at the "
        f"schedule's end, with a {level} interval from a seeded parametric bootstrap. The trend extends the prefix at "
        "its own learning rate: the cosine decay still to come usually lowers the loss, and a later sudden drop is "
        "invisible here, so it is a trend, not a prediction.",
        "",
        "| run | steps (of schedule) | best epoch loss | last epoch loss | fit after warm-up: floor, b (rms log "
        f"residual, epochs) | trend at the schedule's end ({level} interval) |",
        "|---|---|---|---|---|---|",
    ]
    drawn: list[DrawnCurve] = []
    drawn_runs: list[Record] = []
    top_d = max((int(r["d"]) for r in runs), default=0)
    warmup = end = 0
    for r in runs:
        config = _config(r)
        curve = curves.get(str(r["hash"]))
        if curve is None:
            lines.append(f"| {_label(r)} | - | - | - | no curve yet | - |")
            continue
        warmup, end = config.warmup_length, config.schedule_length
        projection = project_curve(curve, config.batch_size, warmup, end)
        fit, at_end = projection.fit, projection.at_end
        fit_text = (
            f"not fitted ({projection.epochs} epochs after the warm-up)"
            if fit is None
            else f"{floor_text(fit)}, {_fmt(fit.exponent)} ({fit.rms_log_residual:.3f}, {fit.runs})"
        )
        trend = "-" if at_end is None else f"{_fmt(at_end[0])} ({_fmt(at_end[1])} to {_fmt(at_end[2])})"
        lines.append(
            f"| {_label(r)} | {projection.last_step:,} ({end:,}) | {_fmt(min(v for _, v in curve))} | "
            f"{_fmt(curve[-1][1])} | {fit_text} | {trend} |"
        )
        if int(r["d"]) == top_d:
            drawn.append(DrawnCurve(_label(r), curve, fit, config.batch_size))
            drawn_runs.append(r)
    lines.append("")
    for source in sorted(recovered):
        lines += [f"(Curves recovered by re-running the runs, {CURVES_NAME}: {source}.)", ""]
    if not drawn:
        return lines, []
    paper = deep_column_markers(preset, drawn_runs)
    name = f"{preset.name}-{scale}-curves.png"
    path = plot_prefix_curves(drawn, paper, warmup, end, out / name, f"{preset.name} ({scale}): d = {top_d} curves")
    return [*lines, f"![{preset.name} {scale} curves]({name})", "", f"Figure: [{name}]({name}).", ""], [path]


def _shared(records: Sequence[Record], field: str, symbol: str) -> str:
    """``symbol = value`` of a field the records share ("N = 16"), or its values joined ("N = 8/16")."""
    values = sorted({r[field] for r in records if field in r})
    return f"{symbol} = {'/'.join(str(v) for v in values) or '-'}"


def depth_ladder_section(
    preset: Preset, records: Sequence[Record], out: Path, scale: str
) -> tuple[list[str], list[Path]]:
    """Per d: L = 1 and L = 3 at rank d/2 (seed 0), each's best epoch loss up to the largest step both reached, and
    the ratio L = 1 / L = 3; one figure of the ratio against d."""
    runs = [r for r in _train_runs(records) if 2 * int(r["rank"]) == int(r["d"]) and int(r["seed"]) == 0]
    curves, _ = _curves(runs, out)
    by_cell = {(int(r["d"]), int(r["layers"])): curves.get(str(r["hash"])) for r in runs}
    lines = [
        "### Where depth starts to rescue half rank (the d ladder)",
        "",
        f"L = 1 against L = 3 at r = d/2, {_shared(runs, 'N', 'N')}, {_shared(runs, 'width', 'c')}, one seed, the "
        "same schedule; each cell's best epoch loss up to the largest step both runs of its d have reached. The paper "
        "has only d = 64; this is ours. One seed and a prefix of the schedule: a ratio here says where the curves "
        "stand at that step, not where 100k steps end.",
        "",
        "| d | step compared | L = 1 | L = 3 | L = 1 / L = 3 |",
        "|---|---|---|---|---|",
    ]
    rows: list[tuple[int, float, float, int]] = []
    for d in sorted({d for d, _ in by_cell}):
        one, three = by_cell.get((d, 1)), by_cell.get((d, 3))
        if not one or not three:
            state = ["no curve yet" if c is None else f"{c[-1][0]:,} steps" for c in (one, three)]
            lines.append(f"| {d} | - | {state[0]} | {state[1]} | - |")
            continue
        step = min(one[-1][0], three[-1][0])
        a = min(v for s, v in one if s <= step)
        b = min(v for s, v in three if s <= step)
        rows.append((d, a, b, step))
        lines.append(f"| {d} | {step:,} | {_fmt(a)} | {_fmt(b)} | {_fmt(a / b)} |")
    lines.append("")
    if len(rows) < 1:
        return [*lines, "No d has both depths' curves yet.", ""], []
    half_one = _paper_value(preset, {"layers": 1, "rank_class": "half", "width": 1})
    half_three = _paper_value(preset, {"layers": 3, "rank_class": "half", "width": 1})
    paper_ratio = None if half_one is None or half_three is None else half_one / half_three
    name = f"{preset.name}-{scale}-ladder.png"
    path = plot_depth_ladder(rows, paper_ratio, out / name, f"{preset.name} ({scale}): L = 1 / L = 3 at r = d/2")
    return [*lines, f"![{preset.name} {scale} ladder]({name})", "", f"Figure: [{name}]({name}).", ""], [path]


def population_section(
    preset: Preset, records: Sequence[Record], out: Path, scale: str
) -> tuple[list[str], list[Path]]:
    """Training loss beside population error (issue 38): each run's best and last epoch loss (on its fixed set when it
    replays one), its final population error on held-out samples, and the gap between them; one figure of both curves
    of every run with the paper's values (which are training losses)."""
    runs = _train_runs(records)
    lines = [
        "### Training loss and population error",
        "",
        "The training loss is the epoch mean on the batches the run trained on (its fixed set, when it replays one: "
        "the paper's metric); the population error is the mean error on held-out samples no training set uses "
        "(`experiments.training.evaluation`), the quantity the theorems bound. The gap is population error minus the "
        "last epoch's training loss: near 0 on fresh batches, positive where a run has fitted its set (slightly "
        "negative early in training, where the epoch mean averages models worse than the epoch's last).",
        "",
        "| run | training data | best epoch loss | last epoch loss | population error (final) | gap | population "
        "along the curve (first, lowest, last measured) |",
        "|---|---|---|---|---|---|---|",
    ]
    drawn: list[TrainingAndPopulation] = []
    drawn_runs: list[Record] = []
    sweep = SweepDirectory(out)
    for r in runs:
        curve, _, _ = sweep.run_curve(str(r["hash"]))
        population, _, _ = sweep.run_curve(str(r["hash"]), "population")
        K = int(r.get("train_batches") or 0)
        data = f"{K} batches replayed" if K else "fresh batches"
        if curve is None:
            lines.append(f"| {_label(r)} | {data} | - | - | - | - | no curve yet |")
            continue
        final = r.get("population_error")
        final_text, gap = "-", "-"
        if isinstance(final, (int, float)) and not isinstance(final, bool):
            final_text = f"{_fmt(float(final))} +- {float(r.get('population_stderr', math.nan)):.2g}"
            gap = _fmt(float(final) - curve[-1][1])
        along = "-"
        if population:
            values = [v for _, v in population]
            along = f"{_fmt(values[0])}, {_fmt(min(values))}, {_fmt(values[-1])} (step {population[-1][0]:,})"
        lines.append(
            f"| {_label(r)} | {data} | {_fmt(min(v for _, v in curve))} | {_fmt(curve[-1][1])} | {final_text} | "
            f"{gap} | {along} |"
        )
        drawn.append(TrainingAndPopulation(_label(r), curve, population or []))
        drawn_runs.append(r)
    lines.append("")
    if not drawn:
        return lines, []
    paper = deep_column_markers(preset, drawn_runs)
    name = f"{preset.name}-{scale}-population.png"
    title = f"{preset.name} ({scale}): training loss and population error"
    path = plot_training_vs_population(drawn, paper, out / name, title)
    return [*lines, f"![{preset.name} {scale} population]({name})", "", f"Figure: [{name}]({name}).", ""], [path]


CURVE_PROJECTIONS = ReportSection("curve-projections", projection_section)
"""Each run's curve fitted after the warm-up and projected to the schedule's end (fig1-d64, fig1-d64-replay)."""
DEPTH_LADDER = ReportSection("depth-ladder", depth_ladder_section)
"""L = 1 against L = 3 at rank d/2 along d (fig1-d64)."""
TRAINING_VS_POPULATION = ReportSection("training-vs-population", population_section)
"""Each run's training loss beside its population error, and the gap (fig1-d64-replay)."""
