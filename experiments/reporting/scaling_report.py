"""The long scale's part of a sweep report: the claim at the top budget, each scaling rule along the ladder with its
fitted law, projection and verdict, and the score-temperature control.

`experiments.reporting.sweep_report` calls :func:`claim_records` (which runs the preset's ordinary claim judges:
the top budget of each d, so budgets are never mixed) and :func:`scaling_section` (everything else) for a sweep at
scale ``long`` (`experiments.sweeps.preset_kit.LONG`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.analysis.compute_scaling import PAPER_SAMPLES, PROJECTION_LIMIT, SCALING_INTERVAL, floor_text
from experiments.analysis.records import Record
from experiments.figures.scaling import plot_scaling
from experiments.sweeps.preset_kit import Preset
from experiments.sweeps.scaling_verdicts import ScalingVerdict, scaling_verdict

PAPER_TEMPERATURE = 1.0
"""The paper's score scale: where several temperatures ran at a d's largest budget, the claim reads this one."""


def claim_records(records: Sequence[Record]) -> list[Record]:
    """The runs the preset's own claim is judged on at the long scale: for each d, those at its largest budget, and
    of those only the paper's score temperature (1) when several temperatures ran there (the temperature-control
    presets, figN and figd long); the others are judged in the score-temperature control section."""
    top: dict[int, int] = {}
    for r in records:
        if r.get("kind") == "train":
            top[r["d"]] = max(top.get(r["d"], 0), int(r["steps"]))
    at_top = [r for r in records if r.get("kind") == "train" and int(r["steps"]) == top[r["d"]]]
    temperatures: dict[int, set[float]] = {}
    for r in at_top:
        temperatures.setdefault(r["d"], set()).add(float(r["temperature"]))
    return [r for r in at_top if len(temperatures[r["d"]]) == 1 or float(r["temperature"]) == PAPER_TEMPERATURE]


NEGLIGIBLE_AMPLITUDE = 1e-6
"""A fitted amplitude a at most this times the floor makes a n^-b < 1e-6 of the loss at every n >= 1: the law found
no power-law term, and the report says so instead of printing the solver's stopping point."""


def _fit_text(verdict: ScalingVerdict, cell: str) -> str:
    fit = verdict.fits.get(cell)
    if fit is None:
        return "not fitted (fewer than 4 runs)"
    se = [float(v) ** 0.5 if v >= 0 else float("nan") for v in fit.covariance.diagonal()]
    paper = verdict.at_paper.get(cell)
    projected = "" if paper is None else f"; at the paper's budget {paper[0]:.3g} ({paper[1]:.3g} to {paper[2]:.3g})"
    # An amplitude at its bound (0) is where the solver stopped, not a measurement: its digits differ between
    # machines (1.06e-11 vs 1.07e-11), so it is printed as what it is.
    amplitude = (
        f"a < {NEGLIGIBLE_AMPLITUDE:g} x floor (no n^-b term)"
        if fit.amplitude <= NEGLIGIBLE_AMPLITUDE * fit.floor
        else f"a {fit.amplitude:.3g}"
    )
    return (
        f"floor {floor_text(fit)} +- {se[0]:.2g}, {amplitude}, b {fit.exponent:.3g} +- {se[2]:.2g} "
        f"({fit.runs} runs, rms log residual {fit.rms_log_residual:.3f}){projected}"
    )


def _temperature_lines(preset: Preset, records: Sequence[Record]) -> list[str]:
    """The claim judged separately at each score temperature, on the budgets where several temperatures ran."""
    temperatures_by_budget: dict[tuple[int, int], set[float]] = {}
    for r in records:
        if r.get("kind") == "train":
            temperatures_by_budget.setdefault((r["d"], int(r["steps"])), set()).add(float(r["temperature"]))
    shared = sorted(key for key, temps in temperatures_by_budget.items() if len(temps) > 1)
    if not shared:
        return []
    lines = [
        "### Score temperature control",
        "",
        "The same cells at the paper's score scale (temperature 1) and at the cpu presets' fixed temperature 128, at "
        "the budgets where both ran; the claim's own rule on each set of runs.",
        "",
        "| d | steps | judged | temperature 1 | temperature 128 | grade depends on the temperature |",
        "|---|---|---|---|---|---|",
    ]
    for d, steps in shared:
        subsets = {
            t: [r for r in records if r.get("d") == d and int(r["steps"]) == steps and float(r["temperature"]) == t]
            for t in sorted(temperatures_by_budget[(d, steps)])
        }
        claim = preset.rule
        judges: list[tuple[str, Any]] = [] if claim is None else [("claim", claim.judge)]
        judges += [] if claim is None else list(claim.extra_judges)  # the figure's own further rules (fig1: at L = 3)
        for name, rule in judges:
            verdicts = {t: rule(rs) for t, rs in subsets.items()}
            if any(v is None for v in verdicts.values()) or {1.0, 128.0} - set(verdicts):
                continue
            one, hot = verdicts[1.0], verdicts[128.0]
            assert one is not None and hot is not None
            depends = "yes" if one.grade is not hot.grade else "no"
            lines.append(
                f"| {d} | {steps:,} | {name} | **{one.grade.value}**: {one.explanation} | **{hot.grade.value}**: "
                f"{hot.explanation} | {depends} |"
            )
    return lines + [""]


def scaling_section(preset: Preset, records: Sequence[Record], out: Path, scale: str) -> tuple[list[str], list[Path]]:
    """Markdown lines and the figure of a long sweep's scaling analysis (the preset's own scaling rules)."""
    rules = preset.scaling_rules
    lines = ["### Compute scaling", ""]
    figures: list[Path] = []
    if not rules:  # the temperature-control presets (figN, figd long): one budget, two score temperatures
        return lines + ["No scaling rules for this preset.", "", *_temperature_lines(preset, records)], figures
    verdicts = [scaling_verdict(rule, records) for rule in rules]
    lines += [
        "Each rule compares two deciding cells (worse: the paper's larger loss; better: its smaller) along the "
        "ladder of budgets, every budget a run with its own warm-up + cosine schedule. Rules stated in advance in "
        "its study module (`experiments/studies/`, SCALING_RULES); docs/scaling.md explains the fit and the "
        "verdicts. Law per cell: best_loss = floor + a n^-b (n = samples seen), least squares on log losses; intervals "
        f"{int(SCALING_INTERVAL * 100)}% from a parametric bootstrap of the fit; the paper's budget is "
        f"{PAPER_SAMPLES:,} samples; projections stop at {PROJECTION_LIMIT:g}x that.",
        "",
    ]
    for verdict in verdicts:
        rule = verdict.rule
        lines += [
            f"#### {rule.name}",
            "",
            f"Rule: {rule.statement} (magnitude: worse / better >= {rule.ratio:g}x"
            + ("" if rule.ceiling is None else f" and better <= {rule.ceiling:g}")
            + f"; paper: {rule.paper}).",
            "",
            f"**Verdict: {verdict.text}.**",
            "",
            "| steps | grade at this budget | numbers |",
            "|---|---|---|",
        ]
        lines += [f"| {steps:,} | {grade.value} | {text} |" for steps, grade, text in verdict.budgets]
        lines += [
            "",
            f"- worse cell fit: {_fit_text(verdict, 'worse')}",
            f"- better cell fit: {_fit_text(verdict, 'better')}",
            "",
        ]
    name = f"{preset.name}-{scale}-scaling.png"
    title = f"{preset.name} ({scale}): best loss against samples seen"
    figures.append(plot_scaling(verdicts, records, out / name, title))
    lines += [f"![{preset.name} {scale} scaling]({name})", "", f"Figure: [{name}]({name}).", ""]
    lines += _temperature_lines(preset, records)
    return lines, figures
