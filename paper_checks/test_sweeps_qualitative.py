"""Section 7's experiments at the quick scale (docs/paper.md section 6): the qualitative findings of Figure 1 and of the
varying-N and positional-encoding appendices, reproduced by `attnrank sweep PRESET --scale quick`.

Claims, in our words:
- Figure 1: with one layer, a full-rank model beats every lower rank at the same attention parameter count (c = 1).
- Varying N: the rank-1 model's error grows with the context length N while full rank stays below it.
- Positional encodings: with three layers, concatenated positional encodings (scratch coordinates) lower the error of
  a low-rank model (the paper adds: with one layer they do not rescue it; that half is reported, not asserted, and at
  the quick scale it does not hold: see docs/sweeps.md).
- In-context regression: at H = D / r, fewer heads of higher rank reach a lower error (GPT-2-style model).

Assumptions: the quick scale of each preset (`experiments/studies/__init__.py`, tuned in docs/tuning.md: d = 16 or
smaller, a few hundred to 1500 steps, 1-2 seeds) stands in for the paper's d = 64, 100k-200k steps, 5 seeds.

Grades. Every verdict comes from the claim's one predicate in `experiments.studies` (the same that grades the
sweep report), whose rules and tolerances are stated there in advance; the grade is recorded in the check report.
Orderings are taken on the claim-pessimistic ends of the seed spread (e.g. Figure 1: full rank's WORST seed against
every lower rank's BEST seed). What each check asserts is what its quick preset reaches:
- Figure 1: ``magnitude`` (full rank >= 10x below every lower rank on every seed; the tuned quick preset, 800 steps
  at score temperature 128, measured 14.2x);
- varying N: at least ``direction``. The re-tuned quick preset measured ``magnitude`` (18.7x at N = 16, gap
  0.142 / 0.623 / 0.701 / 0.713), but its last widening step (+0.012) is too thin to assert on every machine;
- positional encodings, in-context regression: at least ``direction`` (the paper's ordering); their ratios at this
  scale (1.26x and 1.14x measured) are far from the 5x / 2x that ``magnitude`` needs, which is left to the cpu and
  paper scales (docs/sweeps.md).
Each check trains its sweep (minutes on 2 cores), hence slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.reporting.sweep_report import write_report
from experiments.studies import PRESETS, run_sweep
from experiments.studies.fig1 import fig1
from experiments.studies.fig_n import error_grows_with_n
from experiments.studies.icl import higher_rank_better
from experiments.studies.posn import concat_helps_deep_low_rank
from experiments.sweeps.grading import Grade, Verdict
from experiments.sweeps.store import ResultsStore
from experiments.sweeps.store_records import sweep_records


def _sweep(preset: str, out: Path) -> list[dict]:
    summary = run_sweep(preset, "quick", out, progress=False)
    assert summary["failed"] == 0, f"{preset}: {summary['failed']} runs failed"
    with ResultsStore(SweepDirectory(out).store) as store:
        return sweep_records(store, preset, "quick")


def _assert_at_least(verdict: Verdict, grade: Grade) -> None:
    """The grade this scale reaches (see the module docstring)."""
    assert verdict.grade.at_least(grade), f"needs {grade.value}, got {verdict.grade.value}: {verdict.explanation}"


def _assert_direction(verdict: Verdict) -> None:
    _assert_at_least(verdict, Grade.DIRECTION)


@pytest.mark.slow
@pytest.mark.claim("Figure 1 (quick sweep): one layer, full rank >= 10x below every lower rank (asserts magnitude)")
def test_fig1_full_rank_wins(record_claim, report_dir: Path, full_mode: bool) -> None:  # type: ignore[no-untyped-def]
    out = report_dir / "sweep-fig1"
    records = _sweep("fig1", out)
    verdict = fig1(records)  # full rank's worst seed against every lower rank's best seed; magnitude at 10x
    record_claim(
        measured=verdict.explanation,
        reference="paper (d=64, L=1, c=1): 0.015 vs 0.70 at r=d/2 (~47x); magnitude needs 10x on every seed",
        grade=verdict.grade.value,
    )
    if full_mode:
        write_report(out, PRESETS)
    _assert_at_least(verdict, Grade.MAGNITUDE)


@pytest.mark.slow
@pytest.mark.claim("Varying N (quick sweep): low-rank error grows with N, full rank stays below (asserts >= direction)")
def test_figN_low_rank_degrades_with_N(record_claim, report_dir: Path) -> None:  # type: ignore[no-untyped-def]
    records = _sweep("figN", report_dir / "sweep-figN")
    verdict = error_grows_with_n(records)
    record_claim(
        measured=verdict.explanation,
        reference="paper (d=64, L=2, c=64): r=1 0.02 / 0.63 / 0.81 / 1.16 at N=4..256, full rank <= 0.04; "
        "magnitude needs a monotone gap and 5x at the largest N",
        grade=verdict.grade.value,
    )
    _assert_direction(verdict)


@pytest.mark.slow
@pytest.mark.claim("Positional encodings (quick sweep): concat helps low rank with three layers (asserts >= direction)")
def test_posn_concat_helps_deep_low_rank(record_claim, report_dir: Path) -> None:  # type: ignore[no-untyped-def]
    records = _sweep("posn", report_dir / "sweep-posn")
    verdict = concat_helps_deep_low_rank(records)
    record_claim(
        measured=verdict.explanation,
        reference="paper (d=64, c=8, L=3): r=4 concat 5e-3 vs none 0.035-0.06; magnitude needs 5x",
        grade=verdict.grade.value,
    )
    _assert_direction(verdict)


@pytest.mark.slow
@pytest.mark.claim(
    "In-context regression (quick sweep): fewer heads of higher rank win at H = D / r (asserts >= direction)"
)
def test_icl_higher_rank_better(record_claim, report_dir: Path) -> None:  # type: ignore[no-untyped-def]
    records = _sweep("icl", report_dir / "sweep-icl")
    verdict = higher_rank_better(records)
    record_claim(
        measured=verdict.explanation,
        reference="paper: clearly better with fewer heads of higher rank (no numbers); magnitude needs monotone and 2x",
        grade=verdict.grade.value,
    )
    _assert_direction(verdict)
