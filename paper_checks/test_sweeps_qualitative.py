"""Section 7's experiments at the quick scale (PAPER.md section 6): the qualitative findings of Figure 1 and of the
varying-N and positional-encoding appendices, reproduced by `attnrank sweep PRESET --scale quick`.

Claims, in our words:
- Figure 1: with one layer, a full-rank model beats every lower rank at the same attention parameter count (c = 1).
- Varying N: the rank-1 model's error grows with the context length N while full rank stays below it.
- Positional encodings: with three layers, concatenated positional encodings (scratch coordinates) lower the error of
  a low-rank model (the paper adds: with one layer they do not rescue it; that half is reported, not asserted, and at
  the quick scale it does not hold: see docs/sweeps.md).
- In-context regression: at H = D / r, fewer heads of higher rank reach a lower error (GPT-2-style model).

Assumptions: the quick scale (d = 16, N <= 16, FFN 64, 600 steps of 128 fresh samples, lr 0.01, 1-2 seeds; posn: N = 4,
one low rank r = 2, p = 16 concatenated dimensions, lr 0.003, 1000 steps; icl: d = 8, 10 pairs, D = 32, 2 layers,
1500 steps at lr 0.003) stands in for the paper's d = 64, 100k-200k steps, 5 seeds; only the
orderings are compared, never the absolute numbers (the report puts those beside the paper's). Seed noise: for
Figure 1 the full-rank model's WORST seed must beat every lower rank's BEST seed, so the ordering is not a seed
accident. Each check trains its sweep (minutes on 2 cores), hence slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.reporting.sweep_report import (
    concat_helps_deep_low_rank,
    error_grows_with_n,
    higher_rank_better,
    sweep_records,
    write_report,
)
from experiments.sweeps.runner import run_sweep, store_path
from experiments.sweeps.store import ResultsStore


def _sweep(preset: str, out: Path) -> list[dict]:
    summary = run_sweep(preset, "quick", out, progress=False)
    assert summary["failed"] == 0, f"{preset}: {summary['failed']} runs failed"
    with ResultsStore(store_path(out)) as store:
        return sweep_records(store, preset, "quick")


@pytest.mark.slow
@pytest.mark.claim("Figure 1: with one layer, full rank beats every lower rank at equal parameters")
def test_fig1_full_rank_wins(record_claim, report_dir: Path, full_mode: bool) -> None:  # type: ignore[no-untyped-def]
    out = report_dir / "sweep-fig1"
    records = _sweep("fig1", out)
    losses: dict[int, list[float]] = {}
    for r in records:
        if r["layers"] == 1 and r["status"] == "finished":
            losses.setdefault(r["rank"], []).append(float(r["best_loss"]))
    d = max(losses)
    full_worst = max(losses[d])
    lower_best = {rank: min(v) for rank, v in losses.items() if rank < d}
    record_claim(
        measured=f"d={d}: full rank seeds {sorted(losses[d])}; lower ranks best seed {lower_best}",
        reference="every lower rank's best seed must be above full rank's worst seed; paper (d=64): 0.015 vs >= 0.45",
    )
    if full_mode:
        write_report(out)
    assert lower_best and all(full_worst < v for v in lower_best.values()), (full_worst, lower_best)


@pytest.mark.slow
@pytest.mark.claim("Varying N: low-rank error grows with N while full rank stays below it")
def test_figN_low_rank_degrades_with_N(record_claim, report_dir: Path) -> None:  # type: ignore[no-untyped-def]
    records = _sweep("figN", report_dir / "sweep-figN")
    holds, text = error_grows_with_n(records)
    record_claim(
        measured=text, reference="paper (d=64, L=2, c=64): r=1 0.02 / 0.63 / 0.81 / 1.16 at N=4..256, full rank <= 0.04"
    )
    assert holds is True, text


@pytest.mark.slow
@pytest.mark.claim("Positional encodings: concatenated encodings help low rank with three layers")
def test_posn_concat_helps_deep_low_rank(record_claim, report_dir: Path) -> None:  # type: ignore[no-untyped-def]
    records = _sweep("posn", report_dir / "sweep-posn")
    holds, text = concat_helps_deep_low_rank(records)
    record_claim(measured=text, reference="paper (d=64, c=8, L=3): r=4 concat 5e-3 vs none 0.035-0.06")
    assert holds is True, text


@pytest.mark.slow
@pytest.mark.claim("In-context regression: fewer heads of higher rank beat many low-rank heads at H = D / r")
def test_icl_higher_rank_better(record_claim, report_dir: Path) -> None:  # type: ignore[no-untyped-def]
    records = _sweep("icl", report_dir / "sweep-icl")
    holds, text = higher_rank_better(records)
    record_claim(measured=text, reference="paper: clearly better with fewer heads of higher rank (no numbers)")
    assert holds is True, text
