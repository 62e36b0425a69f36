"""How tight is Theorem 2 (a study of ours; docs/bounds.md, "How tight is the bound"): on D_2, the certified bound
against the best one-layer rank-r attention found, trained from three seeds or built from random heads with
least-squares output weights, at several d, r and H. Every model found must lie above the bound; how far above is
measured, not graded. Its report adds the band tables and one figure per d (report section "tightness-bands").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from experiments.analysis.records import Record, evaluation
from experiments.config import TrainConfig
from experiments.figures.tightness import TIGHTNESS
from experiments.reporting.doc_sources import DocBlockKind, DocSources
from experiments.reporting.tightness_report import TIGHTNESS_BANDS, tightness_block_lines
from experiments.sweeps.grading import (
    Claim,
    Verdict,
    fmt,
    graded,
    not_evaluated,
)
from experiments.sweeps.least_squares_spec import LeastSquaresHeadsSpec
from experiments.sweeps.preset_kit import (
    Preset,
    at_scales,
)
from experiments.sweeps.run_specs import RunSpec
from experiments.training.head_count_runs import head_count_run
from theory.monte_carlo import DEFAULT_Z

# --------------------------------------------------------------------------------------------------------------------
# Grids per scale (no published numbers).
# --------------------------------------------------------------------------------------------------------------------


def tightness_heads(d: int, r: int, top: int, count: int) -> tuple[int, ...]:
    """``count`` head counts, powers of two log-spaced from max(4, d / r) to ``top`` (the theory model's H = c d / r
    needs H >= d / r and a multiple of it)."""
    low, high = math.log2(max(4, d // r)), math.log2(top)
    return tuple(sorted({2 ** round(low + (high - low) * i / (count - 1)) for i in range(count)}))


def _tightness(scale: str) -> list[RunSpec]:
    """How tight is Theorem 2 (docs/bounds.md, "How tight is the bound"): on D_2 (nearest neighbour, N = 2,
    orthonormal keys), one-layer rank-r theory models (full value maps, softmax) trained from three seeds, and random
    rank-r heads with least-squares output weights (`LeastSquaresHeadsSpec`), at d in {8, 16, 32}, r in {1, 2, d/4}
    and H log-spaced from max(4, d/r) to 1024 (quick: d in {8, 16}, H <= 128). Plus one run per d (r = max(2, d/4),
    the middle H of the grid: 64 at the cpu scale) with four times the steps: the plateau control, how much longer
    training still gains.
    """
    samples: dict[str, int]
    dims: tuple[int, ...]
    if scale == "quick":
        # ~5 ms per step at H <= 128: 15 cells x 3 seeds x 400 steps plus 15 solves of a few seconds; measured 34 s
        # with 2 workers on an idle machine (2026-12-04).
        dims, top, count, steps, long_steps = (8, 16), 128, 3, 400, 1600
        samples = {"validation_samples": 8192, "score_samples": 10_000}
    elif scale == "cpu":
        # ms per step (batch 128, one thread) at H = 1024: 42 (d = 8) ... 156 (d = 32, r = 8), ~2.9 s per step for the
        # whole grid of 40 cells x 3 seeds, so 1500 steps ~ 72 worker-minutes, plus ~5 worker-minutes of solves and the
        # plateau controls: ~40 min with 2 workers on an idle machine.
        dims, top, count, steps, long_steps = (8, 16, 32), 1024, 5, 1500, 6000
        samples = {"validation_samples": 16_384, "score_samples": 20_000}
    else:
        dims, top, count, steps, long_steps = (8, 16, 32, 64), 4096, 7, 20_000, 80_000
        samples = {"validation_samples": 65_536, "score_samples": 100_000}
    specs: list[RunSpec] = []
    for d in dims:
        # d = 32 leaves its first plateau slowly (r = 1, H = 256, 1500 steps of 128: the loss still fell 12% over
        # the last 400 steps), so it gets twice the steps on half the batch: the same samples, about the same cost.
        batch, main_steps = (64, 2 * steps) if d >= 32 else (128, steps)
        for r in sorted({1, 2, d // 4}):
            for H in tightness_heads(d, r, top, count):
                specs += [tightness_run(d, r, H, s, main_steps, batch) for s in (0, 1, 2)]
                specs.append(
                    LeastSquaresHeadsSpec(
                        d, r, H, temperatures=TIGHTNESS_TEMPERATURES, fit_samples=max(32 * H, 16_384), **samples
                    )
                )
        r_long = max(2, d // 4)
        H_long = tightness_heads(d, r_long, top, count)[count // 2]  # the middle of the grid: 64 at the cpu scale
        specs.append(tightness_run(d, r_long, H_long, 0, main_steps * long_steps // steps, batch))
    return specs


def tightness_run(d: int, r: int, H: int, seed: int, steps: int, batch_size: int) -> TrainConfig:
    """One trained tightness cell: a one-layer rank-r theory model with H heads and full value maps on D_2, softmax at
    score temperature 4 (docs/paper.md section 7: a fixed factor that speeds up training), AdamW at
    lr = min(0.01, 0.25 / sqrt(H d)) (`experiments.training.head_count_runs.head_count_lr` says why)."""
    return head_count_run(
        task="nearest",
        d=d,
        r=r,
        H=H,
        temperature=4.0,
        seed=seed,
        steps=steps,
        batch_size=batch_size,
        log_every=max(50, steps // 60),
        checkpoint_every=max(100, steps // 5),
    )


TIGHTNESS_TEMPERATURES = (0.0625, 0.25, 1.0, 4.0, math.inf)
"""Inverse temperatures tried by the tightness preset's constructions (`constructions.random_rank_heads`)."""


# --------------------------------------------------------------------------------------------------------------------
# Claim.
# --------------------------------------------------------------------------------------------------------------------


def found_error(record: Record) -> tuple[int, int, int, float, float, float] | None:
    """(d, r, H, population error, its standard error, certified bound) of a finished tightness run, or None: a
    trained one-layer run and a least-squares construction carry the same record (`experiments.training.run_record`:
    the population fields and the bound record ``theorem2``)."""
    found = evaluation(record)
    if found is None or found.theorem2 is None:
        return None
    bound = found.theorem2
    return (bound.d, bound.r, bound.H, found.population.error, found.population.stderr, bound.lower)


def tightness_band(records: Sequence[Record]) -> Verdict:
    """tightness: every one-layer rank-r model found (trained from three seeds, or random heads with least-squares
    output weights) has a fresh error at or above Theorem 2's certified bound for its (d, r, H).

    Rule (stated in advance), as :func:`no_model_beats_bound`: ``magnitude`` when every found error's upper end,
    mean + 4 standard errors of its fresh Monte Carlo estimate, is at or above the certified lower end of
    ``rank_lower_bound(d, r, H)``; ``not reproduced`` when one is below (that would contradict the theorem); no
    ``direction``; ``not evaluated`` without a finished run. The ratio best found / bound, the question of the
    preset, is reported per d (``numbers``: ``largest_ratio``, ``smallest_ratio`` over the cells where the bound is
    positive; ``smallest_margin`` = min of error - bound), never graded.
    """
    found = [f for f in (found_error(r) for r in records) if f is not None]
    if not found:
        return not_evaluated("no finished runs")
    checks = [e + DEFAULT_Z * s >= b for _, _, _, e, s, b in found]
    best: dict[tuple[int, int, int], tuple[float, float]] = {}
    for d, r, H, e, _, b in found:
        if (d, r, H) not in best or e < best[(d, r, H)][0]:
            best[(d, r, H)] = (e, b)
    ratios = {key: e / b for key, (e, b) in best.items() if b > 0}
    parts = []
    for d in sorted({key[0] for key in best}):
        cells = sorted(key for key in best if key[0] == d)
        top = max(key[2] for key in cells)
        at_top = [
            f"r={r}: {fmt(best[(d, r, H)][0])} vs >= {fmt(best[(d, r, H)][1])}"
            + (f" (x{fmt(ratios[(d, r, H)])})" if (d, r, H) in ratios else "")
            for d_, r, H in cells
            if H == top
        ]
        parts.append(f"d={d}, H={top}: " + ", ".join(at_top))
    below = sum(not c for c in checks)
    text = (
        f"{len(found) - below}/{len(found)} found errors + 4 s.e. at or above their bounds; best found vs bound at the "
        "largest H: " + "; ".join(parts)
    )
    numbers = {"smallest_margin": min(e - b for _, _, _, e, _, b in found)}
    if ratios:
        numbers |= {"largest_ratio": max(ratios.values()), "smallest_ratio": min(ratios.values())}
    return graded(all(checks), all(checks), text, **numbers)


CLAIM = Claim(
    "every one-layer rank-r model found, trained or constructed, lies above Theorem 2's certified bound; how far "
    "above is measured, not graded",
    tightness_band,
    "every found error + 4 s.e. at or above its certified bound (the theorem holds as a number); the ratio is reported",
    "not used: one model below its bound contradicts the theorem",
)


# --------------------------------------------------------------------------------------------------------------------
# Preset: its report adds the band tables (`experiments.reporting.tightness_report`).
# --------------------------------------------------------------------------------------------------------------------


PRESET = Preset(
    name="tightness",
    description="How tight is Theorem 2: the certified bound vs the best one-layer rank-r attention found",
    figure=TIGHTNESS,
    scales=at_scales(_tightness),
    paper=(),
    expected={
        "quick": "62 runs (d = 8, 16; H <= 128), 34 s + 6 s report (measured, idle machine, 2 workers)",
        "cpu": "163 runs (d = 8, 16, 32; H <= 1024), ~40 min",
        "paper": "GPU",
    },
    rule=CLAIM,
    report_sections=(TIGHTNESS_BANDS,),
)


PRESETS = (PRESET,)
"""This module's presets, in the order `experiments.studies` lists them."""


# --------------------------------------------------------------------------------------------------------------------
# Its block in the docs: docs/bounds.md's band of the committed store its marker names (``tightness:tightness-cpu``).
# --------------------------------------------------------------------------------------------------------------------


def tightness_block(sources: DocSources, store: str) -> list[str]:
    """``tightness:STORE``: the band of this preset's sweeps in the committed store STORE
    (`experiments.reporting.tightness_report.tightness_block_lines`)."""
    records = [r for preset, _, rs in sources.sweeps(store) if preset == PRESET.name for r in rs]
    return tightness_block_lines(store, records)


DOC_BLOCKS = (DocBlockKind("tightness", tightness_block, 1, 1),)
"""The doc block kinds this study declares (`experiments.publish.doc_blocks` collects every study's)."""
