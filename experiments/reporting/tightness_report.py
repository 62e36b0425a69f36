"""The tightness preset's part of `attnrank report`: per d, the band table, the ratio's trend, head counts for target
errors, the plateau evidence and one figure (`experiments.analysis.tightness`, `experiments.figures.tightness`).

Training curves are read from ``DIR/runs/<hash>/metrics.csv`` when the run directories are there, else from the
committed ``DIR/curves.csv`` (`experiments.analysis.run_curves`); without either the curve panel and the last-quarter
column stay empty and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from experiments.analysis.records import Record
from experiments.analysis.sweep_directory import CURVES_NAME, STORE_NAME, SweepDirectory
from experiments.analysis.tightness import (
    Curve,
    TightnessCell,
    heads_for_target,
    last_quarter_gain,
    ratio_slope,
    tightness_cells,
)
from experiments.figures.tightness import plot_tightness_dimension
from experiments.reporting.doc_sources import RESULTS_NAME
from experiments.sweeps.preset_kit import Preset, ReportSection
from theory.monte_carlo import DEFAULT_Z

TARGET_ERRORS = (0.25, 0.2, 0.17, 0.15)
"""Target errors of the head-count table (the models found sit between about 0.16 and 0.5 at these sizes)."""


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.{digits}g}"


def _curves(records: Sequence[Record], out: Path) -> tuple[dict[str, Curve], set[str]]:
    """hash -> curve of every train run whose curve is at hand (run directory, else curves.csv), and the sources of
    the curves that were recovered by re-running (`experiments.analysis.run_curves`)."""
    curves, recovered = {}, set()
    for record in records:
        key = record.get("hash")
        if record.get("kind") == "train" and isinstance(key, str):
            curve, _, source = SweepDirectory(out).run_curve(key)
            if curve:
                curves[key] = curve
                if source.startswith("re-run"):
                    recovered.add(source.split(":")[0])
    return curves, recovered


def band_table(cells: Sequence[TightnessCell], curves: dict[str, Curve]) -> list[str]:
    """Markdown rows of one d's cells: bound, trained, construction, vote, best / bound, last-quarter gain."""
    lines = [
        "| r | H | certified bound | best trained seed (+- s.e.; seed range) | random heads, least squares | "
        "two-layer vote (r=1) | best found / bound | best seed's last-quarter gain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        trained = "-"
        if c.trained is not None:
            spread = f"{_fmt(min(s.error for s in c.seeds))}-{_fmt(max(s.error for s in c.seeds))}"
            trained = f"{_fmt(c.trained.error)} +- {_fmt(c.trained.stderr, 2)} ({len(c.seeds)} seeds: {spread})"
        construction = "-" if c.construction is None else f"{_fmt(c.construction[0])} +- {_fmt(c.construction[1], 2)}"
        gain = "-"
        if c.trained is not None and c.trained.hash in curves:
            gain = f"{100 * last_quarter_gain(curves[c.trained.hash]):.1f}%"
        lines.append(
            f"| {c.r} | {c.H} | {_fmt(c.bound)} | {trained} | {construction} | {_fmt(c.majority_vote)} | "
            f"{_fmt(c.ratio, 3)} | {gain} |"
        )
    return lines


def target_table(cells: Sequence[TightnessCell]) -> list[str]:
    """Markdown rows: per rank and target error, min_heads (certified) against the smallest H found reaching it."""
    lines = [
        "| r | target error | fewest heads the bound allows (min_heads) | smallest H found reaching it "
        "(error + 4 s.e.) |",
        "|---|---|---|---|",
    ]
    for r in sorted({c.r for c in cells}):
        group = [c for c in cells if c.r == r]
        for eps in TARGET_ERRORS:
            t = heads_for_target(group, eps)
            found = str(t.found) if t.found is not None else f"none up to {t.largest_tried}"
            lines.append(f"| {r} | {eps:g} | {t.certified if t.certified is not None else '-'} | {found} |")
    return lines


def control_lines(cells: Sequence[TightnessCell]) -> list[str]:
    """One line per plateau control: the main schedule's best seed against the longer run at the same cell."""
    lines = []
    for c in cells:
        for control in c.controls:
            same_seed = next((s for s in c.seeds if s.seed == control.seed), None)
            if same_seed is None:
                continue
            change = control.error - same_seed.error
            combined = math.hypot(control.stderr, same_seed.stderr)
            lines.append(
                f"- Plateau control r={c.r}, H={c.H}, seed {control.seed}: {same_seed.steps} steps "
                f"{_fmt(same_seed.error)} +- {_fmt(same_seed.stderr, 2)}, {control.steps} steps {_fmt(control.error)} "
                f"+- {_fmt(control.stderr, 2)} (change {change:+.4f}, {abs(change) / combined:.1f} combined s.e.; "
                f"{'within' if abs(change) <= DEFAULT_Z * combined else 'beyond'} 4 s.e.)."
            )
    return lines


def tightness_section(records: Sequence[Record], out: Path, scale: str) -> tuple[list[str], list[Path]]:
    """The report lines and figures of the tightness sweep at ``scale`` in ``out``."""
    cells = tightness_cells(records)
    if not cells:
        return ["No finished tightness run yet.", ""], []
    curves, recovered = _curves(records, out)
    figures: list[Path] = []
    lines = [
        "Per d: the certified lower bound of Theorem 2 (`rank_lower_bound`), the best of the trained one-layer rank-r "
        "theory models (full value maps; fresh Monte Carlo error, 20 000 samples at the cpu scale), random rank-r "
        "heads with least-squares output weights (scored on fresh samples), and, for r = 1, Theorem 5's two-layer "
        "construction with the same H (exact). 'Best found' is the lower of trained and constructed; its ratio to the "
        "bound is reported, not graded. The last-quarter gain is how much the best seed's epoch-mean training loss "
        "fell over its last quarter of steps.",
        "",
    ]
    if not curves:
        lines += [f"(No run directories or {CURVES_NAME} here: curves and last-quarter gains are not shown.)", ""]
    for source in sorted(recovered):
        lines += [f"(Curves recovered by re-running the runs, {CURVES_NAME}: {source}.)", ""]
    for d in sorted({c.d for c in cells}):
        mine = [c for c in cells if c.d == d]
        name = f"tightness-{scale}-d{d}.png"
        figures.append(plot_tightness_dimension(cells, curves, d, out / name, f"tightness ({scale}), d = {d}"))
        lines += [f"### d = {d}", "", f"![d = {d}]({name})", "", *band_table(mine, curves), ""]
        slopes = []
        for r in sorted({c.r for c in mine}):
            group = [c for c in mine if c.r == r]
            positive = [c for c in group if c.bound > 0 and math.isfinite(c.ratio)]
            if positive:
                slopes.append(
                    f"r={r}: {_fmt(positive[0].ratio, 3)} at H={positive[0].H} to {_fmt(positive[-1].ratio, 3)} at "
                    f"H={positive[-1].H} (log-log slope {_fmt(ratio_slope(group), 2)})"
                )
        if slopes:
            lines += ["Ratio best found / bound: " + "; ".join(slopes) + ".", ""]
        lines += [*target_table(mine), ""]
        controls = control_lines(mine)
        if controls:
            lines += [*controls, ""]
    return lines, figures


def band_lines(records: Sequence[Record], scale: str) -> list[str]:
    """One line per d for the terminal: per rank, the band [bound, best found] and the ratio at the largest H."""
    cells = tightness_cells(records)
    lines = []
    for d in sorted({c.d for c in cells}):
        parts = []
        for r in sorted({c.r for c in cells if c.d == d}):
            group = [c for c in cells if (c.d, c.r) == (d, r) and c.best_found is not None]
            if not group:
                continue
            top = group[-1]
            best = top.best_found
            assert best is not None
            parts.append(f"r={r} H={top.H}: [{_fmt(top.bound, 3)}, {_fmt(best[0], 3)}] x{_fmt(top.ratio, 3)}")
        lines.append(f"tightness ({scale}) d={d}: " + "; ".join(parts))
    return lines


def _render_bands(preset: Preset, records: Sequence[Record], out: Path, scale: str) -> tuple[list[str], list[Path]]:
    return tightness_section(records, out, scale)


TIGHTNESS_BANDS = ReportSection("tightness-bands", _render_bands)
"""The tightness sweep's bands, one table and figure per d (the preset's own figure is the overview of every d,
`experiments.figures.tightness.TIGHTNESS`)."""


def tightness_block_lines(store: str, records: Sequence[Record]) -> list[str]:
    """The lines of docs/bounds.md's ``tightness:STORE`` block (the tightness study declares it) from the records of
    the committed store's tightness sweeps: per (d, r), the best model found beside the certified bound at the smallest
    H, the tightest H and the largest H (errors to 3 decimals; ratio = best found / bound to 3 significant digits)."""
    cells = [c for c in tightness_cells(records) if c.best_found is not None]
    lines = [
        f"Generated from `{RESULTS_NAME}/{store}/{STORE_NAME}` by `attnrank report --docs`; each entry is H: best "
        "found vs certified bound.",
        "",
        "| d | r | smallest H | tightest H | largest H | best found / bound, smallest -> largest H | tightest |",
        "|---|---|---|---|---|---|---|",
    ]

    def entry(cell: TightnessCell) -> str:
        assert cell.best_found is not None
        return f"{cell.H}: {cell.best_found[0]:.3f} vs {cell.bound:.3f}"

    for d, r in sorted({(c.d, c.r) for c in cells}):
        group = [c for c in cells if (c.d, c.r) == (d, r)]
        shown = [_fmt(c.ratio, 3) for c in group]
        tightest = min(group, key=lambda c: float(_fmt(c.ratio, 3)))
        ties = [str(c.H) for c, text in zip(group, shown, strict=True) if text == _fmt(tightest.ratio, 3)]
        lines.append(
            f"| {d} | {r} | {entry(group[0])} | {entry(tightest)} | {entry(group[-1])} | {shown[0]} -> {shown[-1]} | "
            f"{_fmt(tightest.ratio, 3)} (H = {', '.join(ties)}) |"
        )
    return lines
