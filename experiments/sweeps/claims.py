"""Each preset's claim and scaling rules by name: the single place a sweep's claim is looked up and judged.

A claim (`experiments.sweeps.grading.Claim`: the statement, the grade rules in words, one predicate) and the long
scale's scaling rules live in their figure's module (`experiments.sweeps.studies`), stated there before any run; the
grading machinery they share is `experiments.sweeps.grading`. The sweep report, the paper checks and hence
`attnrank check` judge a preset's records through :func:`judge`, so a claim is never judged two ways.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.analysis.records import Record
from experiments.sweeps.grading import Claim, ScalingRule, Verdict
from experiments.sweeps.presets import PRESETS

CLAIMS: dict[str, Claim] = {name: p.rule for name, p in PRESETS.items() if p.rule is not None}
"""Preset name -> its claim (presets without a claim, such as ``smoke``, are absent)."""

SCALING_RULES: dict[str, tuple[ScalingRule, ...]] = {
    name: p.scaling_rules for name, p in PRESETS.items() if p.scaling_rules
}
"""Preset -> the scaling rules of its long scale (stated before the runs; docs/scaling.md)."""


def judge(preset: str, records: Sequence[Record]) -> Verdict | None:
    """The verdict of ``preset``'s claim on ``records`` (None when the preset states no claim)."""
    claim = CLAIMS.get(preset)
    return None if claim is None else claim.judge(records)
