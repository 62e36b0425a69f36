"""The long scale's generated block (``long-scale``, docs/scaling.md; `experiments.publish.doc_blocks` rewrites it):
every committed long store's scaling rules, their grade at each budget and their verdict with the fitted floors, then
the score-temperature controls (the claim's own rule at temperature 1 and at 128 on the same cells, where both ran).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from experiments.analysis.compute_scaling import PowerLawFit, floor_text
from experiments.analysis.records import Record
from experiments.analysis.sweep_directory import REPORT_NAME
from experiments.publish.results_index import committed_stores
from experiments.publish.store_blocks import numbers_text, significant
from experiments.reporting.doc_sources import RESULTS_NAME, DocBlockKind, DocSources
from experiments.reporting.scaling_report import PAPER_TEMPERATURE
from experiments.studies import CLAIMS, SCALING_RULES, judge
from experiments.sweeps.grading import Verdict, matches, scaling_rule_at_budget
from experiments.sweeps.preset_kit import LONG
from experiments.sweeps.scaling_verdicts import scaling_verdict


def _fit_floor(fit: PowerLawFit | None) -> str:
    if fit is None:
        return "not fitted"
    variance = float(fit.covariance.diagonal()[0])
    se = f" +- {math.sqrt(variance):.2g}" if variance >= 0 else ""
    return f"{floor_text(fit)}{se}"


def long_stores(sources: DocSources) -> list[tuple[str, str, list[Record]]]:
    """(store, preset, records) of every committed long sweep, by store name."""
    out = []
    for path in committed_stores(sources.root / RESULTS_NAME):
        for preset, scale, records in sources.sweeps(path.parent.name):
            if scale == LONG:
                out.append((path.parent.name, preset, records))
    return out


def long_scale(sources: DocSources) -> list[str]:
    """``long-scale``: every long store's scaling rules along the ladder, then its score-temperature controls."""
    lines = [
        "Generated from the committed long stores by `attnrank report --docs`. Ratio: the worse cell's best seed over "
        "the better cell's worst seed at each budget (steps); floors: the fitted law's floor of each cell, worse vs "
        "better, +- one standard error.",
        "",
        "| store | rule | grade at each budget (ratio) | verdict | fitted floors |",
        "|---|---|---|---|---|",
    ]
    controls: list[str] = []
    for store, preset, records in long_stores(sources):
        for rule in SCALING_RULES.get(preset, ()):
            found = scaling_verdict(rule, records)
            graded = []
            for steps, grade, _ in found.budgets:
                at_budget = [
                    r
                    for r in records
                    if int(r["steps"]) == steps and (matches(r, rule.worse) or matches(r, rule.better))
                ]
                ratio = scaling_rule_at_budget(rule, at_budget).numbers.get("ratio")
                graded.append(f"{_steps(steps)}: {grade.value} ({significant(ratio) if ratio is not None else '-'}x)")
            verdict = found.text.split(" (")[0].split(":")[0]
            floors = f"{_fit_floor(found.fits.get('worse'))} vs {_fit_floor(found.fits.get('better'))}"
            lines.append(f"| {_report_link(store)} | {rule.name} | {'; '.join(graded)} | {verdict} | {floors} |")
        controls += _temperature_rows(store, preset, records)
    if controls:
        lines += [
            "",
            "Score-temperature controls: the claim's own rule (and fig1's rule at L = 3) on the same cells at "
            "temperature 1 (the paper's score scale) and at 128, where both ran:",
            "",
            "| store | d, steps | judged | temperature 1 | temperature 128 |",
            "|---|---|---|---|---|",
            *controls,
        ]
    return lines


def _report_link(store: str) -> str:
    """A link from docs/ to the committed store's report."""
    return f"[{store}](../{RESULTS_NAME}/{store}/{REPORT_NAME})"


def _steps(steps: int) -> str:
    return f"{steps // 1000}k" if steps % 1000 == 0 else f"{steps / 1000:g}k"


def _temperature_rows(store: str, preset: str, records: Sequence[Record]) -> list[str]:
    by_budget: dict[tuple[int, int], set[float]] = {}
    for r in records:
        by_budget.setdefault((int(r["d"]), int(r["steps"])), set()).add(float(r["temperature"]))
    rows = []
    for d, steps in sorted(
        key for key, temperatures in by_budget.items() if {PAPER_TEMPERATURE, 128.0} <= temperatures
    ):
        subsets = {
            t: [r for r in records if int(r["d"]) == d and int(r["steps"]) == steps and float(r["temperature"]) == t]
            for t in (PAPER_TEMPERATURE, 128.0)
        }
        claim = CLAIMS.get(preset)
        judges: list[tuple[str, Callable[[Sequence[Record]], Verdict | None]]] = [
            ("claim", lambda rs: judge(preset, rs))
        ]
        judges += [] if claim is None else list(claim.extra_judges)
        for name, rule in judges:
            verdicts = [rule(subsets[t]) for t in (PAPER_TEMPERATURE, 128.0)]
            if any(v is None for v in verdicts):
                continue
            texts = [f"**{v.grade.value}** ({numbers_text(v.numbers)})" for v in verdicts if v is not None]
            rows.append(f"| {_report_link(store)} | {d}, {_steps(steps)} | {name} | {texts[0]} | {texts[1]} |")
    return rows


DOC_BLOCKS = (DocBlockKind("long-scale", long_scale),)
"""The block kind of this module (module docstring)."""
