"""Figure 1 (docs/paper.md section 6): the farthest-point task, where one full-rank attention head is exact for every
context length while H = d / r heads of rank r are not (Theorems 2 and 3), trained as the paper trains it: the loss
of standard encoders against the rank at equal attention parameters, for L = 1, 3, 5 layers and width factors c = 1,
8, 64. One layer: full rank far below every lower rank; three layers rescue rank d/2 (0.70 -> 0.05 at c = 1).

Three presets: ``fig1`` (every scale: quick and cpu at d = 16, the compute ladder ``long``, ``paper``: the paper's
grid in the paper's regime, 315 runs over data seeds 0-4 on one fixed set of 100 replayed batches and the 6
supplementary c = 64, L = 3 runs, graded with the paper's statistic beside the population error; ``fresh``: the same
grid on fresh batches with five initialisation seeds; and the fresh grid's deciding cells for one GPU call),
``fig1-d64`` (the deep columns at the paper's size with the paper's own
schedule, issue 28, and a depth ladder in d below it; fresh batches every step) and ``fig1-d64-replay`` (fig1-d64's
deciding cells in the paper's data regime: one fixed set of 100 batches drawn by the reference's sampler, replayed
every epoch, issue 38).

In this file, in order: the paper's numbers, the grids per scale, the claims, the long scale's scaling rules, the
presets.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from experiments.analysis.records import Record
from experiments.config import TrainConfig
from experiments.figures.sweeps import FIG1
from experiments.reporting.curve_sections import CURVE_PROJECTIONS, DEPTH_LADDER, TRAINING_VS_POPULATION
from experiments.reporting.milestone_section import MILESTONE_STATISTIC
from experiments.reporting.paper_statistic_section import paper_statistic_at
from experiments.samplers.reference_data import REFERENCE_BATCHES
from experiments.sweeps.grading import (
    Claim,
    ScalingRule,
    Verdict,
    fmt,
    graded,
    loss_ratio,
    lowest_grade,
    matches,
    not_evaluated,
    scaling_rule_at_budget,
    seed_spread,
    spread_text,
)
from experiments.sweeps.preset_kit import (
    CPU2,
    FARTHEST,
    GPU,
    LONG,
    PAPER,
    PAPER_100K,
    QUICK,
    QUICK_FARTHEST,
    SCALES,
    PaperNumber,
    Preset,
    at_scales,
    budget_ladder,
    divisors_pow2,
    grid,
    paper_deciding_cells,
    paper_recipe,
)
from experiments.sweeps.run_specs import RunSpec

# --------------------------------------------------------------------------------------------------------------------
# The paper's numbers (docs/paper.md section 6), Figure 1: L x {full, half, low} x c.
# --------------------------------------------------------------------------------------------------------------------


# Paper numbers (docs/paper.md section 6), Figure 1: L x {full, half, low} x c.
PAPER_NUMBERS = (
    PaperNumber("L=1 full rank, c=1", (1.5e-2, 1.5e-2), {"layers": 1, "rank_class": "full", "width": 1}),
    PaperNumber("L=1 full rank, c=8", (7e-3, 7e-3), {"layers": 1, "rank_class": "full", "width": 8}),
    PaperNumber("L=1 full rank, c=64", (2e-3, 2e-3), {"layers": 1, "rank_class": "full", "width": 64}),
    PaperNumber("L=1 r=d/2, c=1", (0.70, 0.70), {"layers": 1, "rank_class": "half", "width": 1}),
    PaperNumber("L=1 r=d/2, c=8", (0.43, 0.43), {"layers": 1, "rank_class": "half", "width": 8}),
    PaperNumber("L=1 r=d/2, c=64", (0.31, 0.31), {"layers": 1, "rank_class": "half", "width": 64}),
    PaperNumber("L=1 r<=d/4, any c", (0.45, 0.9), {"layers": 1, "rank_class": "low"}),
    PaperNumber("L=3 full rank, c=1", (3e-3, 3e-3), {"layers": 3, "rank_class": "full", "width": 1}),
    PaperNumber("L=3 full rank, c=8", (7e-3, 7e-3), {"layers": 3, "rank_class": "full", "width": 8}),
    PaperNumber("L=3 full rank, c=64", (7.6e-4, 7.6e-4), {"layers": 3, "rank_class": "full", "width": 64}),
    PaperNumber("L=3 r=d/2, c=1", (0.05, 0.05), {"layers": 3, "rank_class": "half", "width": 1}),
    PaperNumber("L=3 r=d/2, c=8", (0.035, 0.035), {"layers": 3, "rank_class": "half", "width": 8}),
    PaperNumber("L=3 r=d/2, c=64", (0.055, 0.055), {"layers": 3, "rank_class": "half", "width": 64}),
    PaperNumber("L=3 r<=d/4, any c", (0.04, 0.8), {"layers": 3, "rank_class": "low"}),
    PaperNumber("L=5 full rank, c=8", (6.5e-3, 6.5e-3), {"layers": 5, "rank_class": "full", "width": 8}),
    PaperNumber("L=5 full rank, c=64", (2e-3, 2e-3), {"layers": 5, "rank_class": "full", "width": 64}),
    PaperNumber("L=5 r=d/2, c=8", (0.019, 0.019), {"layers": 5, "rank_class": "half", "width": 8}),
    PaperNumber("L=5 r=d/2, c=64", (0.014, 0.014), {"layers": 5, "rank_class": "half", "width": 64}),
)


# --------------------------------------------------------------------------------------------------------------------
# Grids per scale.
# --------------------------------------------------------------------------------------------------------------------


GPU_STEPS = 4_000
"""Steps of the gpu scale: ~80 s of one H200 at the 17-19 ms per L = 3 step measured there (preset_kit's note)."""


def _fig1(scale: str) -> list[RunSpec]:
    if scale == "quick":
        # docs/tuning.md: full rank 0.039-0.041 vs r = 8 0.578-0.602 (>= 14.2x) on both seeds, 174 s with 2 workers.
        return list(
            grid(
                {**FARTHEST, **QUICK_FARTHEST, "d": 16, "N": 8, "width": 1, "layers": 1},
                rank=(16, 8, 4, 1),
                seed=(0, 1),
            )
        )
    if scale == LONG:
        return _fig1_long()
    if scale == GPU:  # depth rescues half rank: L = 1 and 3 at r = d and d/2, c = 1, two seeds (8 runs)
        return paper_deciding_cells(
            _fig1(FRESH),
            lambda c: c.width == 1 and c.layers in (1, 3) and c.rank in (32, 64) and c.seed < 2,
            GPU_STEPS,
        )
    if scale == "cpu":
        # The quick scale's d = 16, N = 8 with every rank (16 ... 1), two seeds, 3000 steps (vs 800), and depth:
        # L = 1 at lr 0.01 and L = 3 at lr 0.003 (at lr 0.01 three layers stay at the zero predictor, loss 1.0; at
        # lr 0.003 full rank reaches 0.585 in 800 steps, 0.040 in 3000, r = 4 0.630). c = 1 only (c = 8 would add
        # ~9 min). Estimated with 2 workers: 10 runs x 3000 steps x 0.035 s (L = 1) + 10 x 3000 x 0.10 s (L = 3)
        # = ~34 min; measured 16.4 min (load 9 falling to 2), MAGNITUDE at L = 1 (31x) (docs/tuning.md).
        base = {**FARTHEST, **CPU2, "d": 16, "N": 8, "width": 1, "steps": 3000, "temperature": 128.0}
        return [
            *grid({**base, "layers": 1}, rank=divisors_pow2(16), seed=(0, 1)),
            *grid({**base, "layers": 3, "lr": 0.003}, rank=divisors_pow2(16), seed=(0, 1)),
        ]
    if scale == FRESH:
        return list(
            grid(
                {**FARTHEST, **PAPER, **PAPER_100K, "d": 64, "N": 16},
                layers=(1, 3, 5),
                width=(1, 8, 64),
                rank=divisors_pow2(64),
                seed=(0, 1, 2, 3, 4),
            )
        )
    return _fig1_paper()


FRESH = "fresh"
"""fig1's scale of the paper's grid, sizes and schedule on fresh batches with five initialisation seeds (0-4): our
regime, not the paper's (the scale ``paper`` was this grid until issue 47)."""
FIG1_DATA_SEEDS = (0, 1, 2, 3, 4)
"""The reference's Figure 1 runs: ``data.seed`` 0 .. 4, one initialisation (docs/paper.md section 6)."""
FIG1_SUPPLEMENT_DATA_SEEDS = (6, 7, 8)
"""The reference's supplementary runs of the c = 64, L = 3 cells (its fig1_supp sweep): data seeds 6 .. 8."""
REFERENCE_REGIME = {
    "sampler": "reference",
    "train_batches": REFERENCE_BATCHES,
    "log_every": REFERENCE_BATCHES,
    "lr_interval": "epoch",
    "seed": 0,
}
"""The paper's data and schedule regime: one fixed set of 100 batches of the reference's sampler replayed every epoch,
the learning rate stepped once per epoch, one initialisation for every run."""


def _fig1_paper() -> list[RunSpec]:
    """The paper's Figure 1 grid in the paper's regime (issue 47), as the reference's fig1 and fig1_supp sweeps trained
    it (`experiments.sweeps.reference_configs` builds the same runs from the reference's own files; a test holds the
    two equal).

    - 315 runs: L in {1, 3, 5} x c in {1, 8, 64} x r in {64, ..., 1} (H = 64 c / r heads) x data seeds 0 .. 4, one
      initialisation (seed 0); d = 64, N = 16, FFN 2048, batch 256, AdamW lr 0.01, betas (0.9, 0.95), no weight
      decay; 1000 epochs of the fixed set of 100 batches (100k steps), warm-up 50 epochs, the rate stepped per epoch;
    - the 6 supplementary runs the paper's figure pools into the c = 64, L = 3 cells: r = 32 and 16 (nheads 2 and 4)
      x data seeds 6 .. 8, batch 64, 2000 epochs (200k steps, warm-up 100 epochs), at lr 0.01 (the supplementary
      sweep's other rates, 0.1, 0.03 and 0.003, are not in the figure).
    """
    base = {**FARTHEST, **PAPER, **PAPER_100K, **REFERENCE_REGIME, "d": 64, "N": 16, "lr": 0.01}
    main = grid(base, layers=(1, 3, 5), width=(1, 8, 64), rank=divisors_pow2(64), data_seed=FIG1_DATA_SEEDS)
    supplement = {**base, **paper_recipe(200_000, 10_000), "batch_size": 64, "checkpoint_every": 10_000}
    extra = grid({**supplement, "layers": 3, "width": 64}, rank=(32, 16), data_seed=FIG1_SUPPLEMENT_DATA_SEEDS)
    return [*main, *extra]


FIG1_LONG_D64_LR = 0.003
"""lr of the d = 64, N = 16 cells of fig1 long (docs/scaling.md: at lr 0.01 both r = 32 and r = 64 stayed at the zero
predictor for 3000 steps; a pilot at lr 0.003 and 0.001, one seed, 3000 steps, chose it). Every one of those runs had
a short warm-up (5% of its budget); issue 28 found that the warm-up, not the learning rate, kept three layers at the
zero predictor: with the paper's 5000 of 100k steps they train (the ``fig1-d64`` preset, results/fig1-d64-cpu/)."""
FIG1_LONG_D64_BUDGETS = (2_500, 5_000, 10_000, 25_000)
"""d = 64 steps cost ~46 ms at L = 3 (FFN 256, batch 128, one thread), so the ladder tops at 25k (issue 18: >= 20k)."""


def _fig1_long() -> list[RunSpec]:
    """fig1's deciding cells along the compute ladder (docs/scaling.md).

    - d = 16, N = 8 at the paper's score scale (temperature 1) and lr 0.01: L = 3 at r = d and r = d/2, L = 1 at
      r = d and r = d/2, each at 3k / 10k / 30k steps (two seeds) and 100k (one seed);
    - the temperature-128 control (the cpu preset's set-up: L = 1 at lr 0.01, L = 3 at lr 0.003) of the same four
      cells at 30k steps, two seeds, so the report can say whether a grade depends on the score temperature;
    - d = 64, N = 16 (the paper's size), temperature 1, lr `FIG1_LONG_D64_LR`: L = 3 at r = d/2 along
      2.5k / 5k / 10k (two seeds) and 25k (one seed), L = 1 at r = d/2 and L = 3 at r = d at every budget, one seed.
    """
    base = {**FARTHEST, **CPU2, "width": 1, "log_every": 100}
    small = {**base, "d": 16, "N": 8, "temperature": 1.0, "lr": 0.01}
    cells = [{"layers": L, "rank": r} for L in (3, 1) for r in (8, 16)]
    specs: list[RunSpec] = list(budget_ladder(small, cells))
    for cell in cells:
        lr = 0.003 if cell["layers"] == 3 else 0.01
        control = {**small, **cell, "temperature": 128.0, "lr": lr}
        specs += budget_ladder(control, [{}], budgets=(30_000,), seeds_top=(0, 1))
    paper_size = {**base, "d": 64, "N": 16, "temperature": 1.0, "lr": FIG1_LONG_D64_LR}
    specs += budget_ladder(paper_size, [{"layers": 3, "rank": 32}], budgets=FIG1_LONG_D64_BUDGETS)
    for cell in ({"layers": 1, "rank": 32}, {"layers": 3, "rank": 64}):
        specs += budget_ladder(paper_size, [cell], budgets=FIG1_LONG_D64_BUDGETS, seeds_below=(0,))
    return specs


FIG1_D64_STEPS = 20_000
"""Steps of the fig1-d64 cpu scale: the first fifth of the paper's 100k-step schedule (warm-up 5000), about 2.4 h a
run at d = 64, L = 3 on one quiet core under jemalloc (0.44 s a step: benchmarks/results/bench_cpu_step_2026-12-07.md;
a loaded machine takes longer); `TrainConfig.extends` lets a later sitting train them further."""


def _fig1_d64(scale: str) -> list[RunSpec]:
    """Figure 1's deep columns at the paper's size with the paper's schedule (docs/scaling.md, issue 28).

    d = 64, N = 16, c = 1, FFN 2048, batch 256, lr 0.01, temperature 1, warm-up 5000 of a 100k-step schedule, layers
    starting as copies: L = 3 at r = 32 (seeds 0, 1) and r = 64, L = 1 at r = 32 (the claim's cells); and the depth
    ladder below the paper's size, L = 1 and L = 3 at r = d/2 for d = 16 and 32 (one seed), with the same N, FFN and
    schedule. cpu: the first 20k steps of each; paper: the whole 100k (each run extends its cpu prefix); quick: a
    rehearsal of the same grid at d = 8 / 16 and 60 steps of a 200-step schedule (plumbing only).
    """
    base = {**FARTHEST, **PAPER, **PAPER_100K, "N": 16, "width": 1, "lr": 0.01, "temperature": 1.0}
    cells: list[dict[str, Any]] = [
        {"d": 64, "layers": 3, "rank": 32, "seed": 0},
        {"d": 64, "layers": 1, "rank": 32, "seed": 0},
        {"d": 64, "layers": 3, "rank": 64, "seed": 0},
        {"d": 64, "layers": 3, "rank": 32, "seed": 1},
    ]
    cells += [{"d": d, "layers": L, "rank": d // 2, "seed": 0} for d in (16, 32) for L in (1, 3)]
    if scale == "quick":
        rehearsal = {**base, **QUICK, **paper_recipe(200, 20), "steps": 60, "ffn_dim": 32, "batch_size": 32}
        return [
            TrainConfig(**{**rehearsal, **cell, "d": cell["d"] // 4, "rank": cell["rank"] // 4})  # d 64/32/16 -> 16/8/4
            for cell in cells
        ]
    if scale == "cpu":
        return [
            TrainConfig(**{**base, **cell, "steps": FIG1_D64_STEPS, "checkpoint_every": 500, "device": "cpu"})
            for cell in cells
        ]
    return [TrainConfig(**{**base, **cell}) for cell in cells]


FIG1_REPLAY_CELLS: tuple[dict[str, Any], ...] = (
    {"d": 64, "layers": 3, "rank": 32, "data_seed": 0},
    {"d": 64, "layers": 1, "rank": 32, "data_seed": 0},
    {"d": 64, "layers": 3, "rank": 64, "data_seed": 0},
    {"d": 64, "layers": 3, "rank": 32, "data_seed": 1},
)
"""fig1-d64's four d = 64 cells in the paper's design: one initialisation (seed 0) for every run, the runs differing
in their data (the reference's ``data.seed``; its five Figure 1 runs used data seeds 0 .. 4 and one
``seed_everything`` value). Data seeds 0 and 1 share 85 of their 100 batches (`reference_data.shared_batches`: the
worker streams are seeded data_seed + w), as the paper's did."""


def _fig1_d64_replay(scale: str) -> list[RunSpec]:
    """fig1-d64's deciding cells trained as the paper trained them (issue 38): K = 100 batches of 256 from the
    reference's sampler (`experiments.samplers.reference_data`), drawn once and replayed every epoch of 100 steps, so
    best_loss is the lowest epoch-mean training loss on that set (the paper's metric) and each run also records its
    population error. Everything else as fig1-d64: d = 64, N = 16, c = 1, FFN 2048, batch 256, lr 0.01, temperature
    1, warm-up 5000 of a 100k-step schedule, layers as copies. cpu: the first 20k steps; paper: the whole 100k
    (extending the cpu prefix); quick: the same grid at d = 16 for 60 steps of a 200-step schedule with a 20-batch
    set (plumbing only).
    """
    base = {**FARTHEST, **PAPER, **PAPER_100K, "N": 16, "width": 1, "lr": 0.01, "temperature": 1.0, "seed": 0}
    replay = {"sampler": "reference", "train_batches": REFERENCE_BATCHES, "log_every": REFERENCE_BATCHES}
    if scale == "quick":
        rehearsal = {**base, **QUICK, **paper_recipe(200, 20), "steps": 60, "ffn_dim": 32, "batch_size": 32}
        rehearsal.update(sampler="reference", train_batches=20, log_every=20)
        return [
            TrainConfig(**{**rehearsal, **cell, "d": cell["d"] // 4, "rank": cell["rank"] // 4})
            for cell in FIG1_REPLAY_CELLS
        ]
    if scale == "cpu":
        return [
            TrainConfig(**{**base, **replay, **cell, "steps": FIG1_D64_STEPS, "checkpoint_every": 500, "device": "cpu"})
            for cell in FIG1_REPLAY_CELLS
        ]
    return [TrainConfig(**{**base, **replay, **cell}) for cell in FIG1_REPLAY_CELLS]


# --------------------------------------------------------------------------------------------------------------------
# Claims: one layer (fig1), the deep columns at the paper's size (fig1-d64).
# --------------------------------------------------------------------------------------------------------------------


FIG1_MAGNITUDE_RATIO = 10.0
"""Figure 1's stated threshold: the paper's L = 1, c = 1 ratio is 0.70 / 0.015 ~ 47 (r = d/2 against full rank);
we call its order of magnitude reached at a factor 10."""


def fig1(records: Sequence[Record], *, layers: int = 1) -> Verdict:
    """Figure 1: with ``layers`` layers (default 1), full rank's loss is below every lower rank's at the same d, N, c.

    Rule (stated in advance), per (d, N, width) with a full-rank run (rank = d) and at least one lower rank, on the
    seed spreads of best_loss (:func:`seed_spread`):

    - ``magnitude``: full rank's worst seed is at least :data:`FIG1_MAGNITUDE_RATIO` (10x) below every lower rank's
      best seed, i.e. 10x below every lower rank on every seed (paper: 0.70 / 0.015 ~ 47x at d = 64);
    - ``direction``: full rank's worst seed is below every lower rank's best seed;
    - ``not reproduced`` otherwise; ``not evaluated`` without a full-rank run and a lower-rank partner at that depth.

    Returns:
        the Verdict; ``numbers["worst_ratio"]`` is the smallest (lower rank's best seed) / (full rank's worst seed).
    """
    spread = seed_spread([r for r in records if r.get("layers") == layers], ("d", "N", "width", "rank"))
    ratios: list[float] = []
    parts: list[str] = []
    for d, N, width, rank in sorted(k for k in spread if k[3] == k[0]):
        full = spread[(d, N, width, rank)]
        lower = {k[3]: v for k, v in spread.items() if k[:3] == (d, N, width) and k[3] < d}
        if not lower:
            continue
        group = [loss_ratio(low[0], full[1]) for low in lower.values()]
        ratios += group
        parts.append(
            f"d={d} N={N} c={width}: full {spread_text(full)} vs "
            + ", ".join(f"r={r} {spread_text(v)}" for r, v in sorted(lower.items(), reverse=True))
            + f" (worst ratio {fmt(min(group))}x)"
        )
    if not ratios:
        return not_evaluated(f"no full-rank run with a lower-rank partner at L={layers}")
    worst = min(ratios)
    return graded(
        worst > 1.0,
        worst >= FIG1_MAGNITUDE_RATIO,
        "; ".join(parts) + f"; magnitude needs >= {FIG1_MAGNITUDE_RATIO:g}x (paper ~47x)",
        worst_ratio=worst,
    )


CLAIM = Claim(
    "with one layer, full rank beats every lower rank at equal parameter count",
    fig1,
    "full rank >= 10x below every lower rank on every seed at L = 1 (paper ~47x)",
    "full rank below every lower rank on every seed",
    extra_judges=(("fig1 rule at L = 3", partial(fig1, layers=3)),),
)


FIG1_D64_RULES = (
    ScalingRule(
        "depth rescues half rank (d = 64)",
        "at L = 3, r = d/2 falls far below its L = 1 loss and near the paper's 0.05",
        {"d": 64, "N": 16, "width": 1, "layers": 1, "rank": 32},
        {"d": 64, "N": 16, "width": 1, "layers": 3, "rank": 32},
        ratio=5.0,
        ceiling=0.1,
        paper="L = 1 r = d/2 0.70 vs L = 3 0.05 (14x); ceiling 2x the paper's 0.05",
    ),
    ScalingRule(
        "full rank below half rank at L = 3 (d = 64)",
        "at L = 3, full rank stays well below r = d/2",
        {"d": 64, "N": 16, "width": 1, "layers": 3, "rank": 32},
        {"d": 64, "N": 16, "width": 1, "layers": 3, "rank": 64},
        ratio=5.0,
        paper="L = 3 r = d/2 0.05 vs full rank 0.003 (17x)",
    ),
)
"""The two comparisons that decide Figure 1's deep columns at the paper's size (the same thresholds as the long
scale's d = 64 rule, so the two stores are graded alike)."""


def fig1_d64_depth(records: Sequence[Record]) -> Verdict:
    """Figure 1's deep columns at d = 64, N = 16, c = 1 under the paper's schedule: three layers rescue half rank, and
    full rank stays below half rank at three layers.

    Rule (stated in advance, before any run of the fig1-d64 preset), on the runs of the largest ``steps`` among the
    d = 64 runs (so that a store holding a prefix and its extension grades the longest), each of
    :data:`FIG1_D64_RULES` graded by :func:`scaling_rule_at_budget` on seed spreads of best_loss. Refined in issue 38,
    before any extension ran, for a store in which only some cells were extended (fig1-d64-replay's r = 32 cell): the
    budget graded is the largest ``steps`` at which every run of both comparisons' cells (each cell, seed and data
    seed found at any budget) has finished (the largest ``steps`` of all when there is none), and the verdict names
    the longer budgets that wait for the other runs.
    Where every cell has the same budgets, as in every store before that refinement, the two readings are one.

    - "depth rescues half rank": ``direction`` when L = 3 r = 32's worst seed is below L = 1 r = 32's best seed;
      ``magnitude`` when moreover the ratio is >= 5x and L = 3 r = 32's worst seed is <= 0.1 (paper 0.70 vs 0.05);
    - "full rank below half rank at L = 3": ``direction`` when L = 3 r = 64's worst seed is below L = 3 r = 32's best
      seed; ``magnitude`` when the ratio is >= 5x (paper 0.05 vs 0.003, 17x);
    - the claim's grade is the lower of the two; ``not evaluated`` when either comparison lacks a finished run.
    """
    d64 = [r for r in records if r.get("d") == 64 and r.get("status") == "finished"]
    if not d64:
        return not_evaluated("no finished d = 64 run")
    budgets = sorted({int(r["steps"]) for r in d64}, reverse=True)
    cells = [cell for rule in FIG1_D64_RULES for cell in (rule.worse, rule.better)]
    deciding = [r for r in d64 if any(matches(r, cell) for cell in cells)]

    def run_key(record: Record) -> tuple[Any, ...]:
        """A deciding run apart from its budget: its cell, seed and data seed."""
        return tuple(record.get(k) for k in ("layers", "rank", "seed", "data_seed"))

    every_run = {run_key(r) for r in deciding}
    complete = [
        steps
        for steps in budgets
        if all(any(matches(r, cell) and int(r["steps"]) == steps for r in d64) for cell in cells)
        and every_run <= {run_key(r) for r in deciding if int(r["steps"]) == steps}
    ]
    top = complete[0] if complete else budgets[0]
    at_top = [r for r in d64 if int(r["steps"]) == top]
    verdicts = [scaling_rule_at_budget(rule, at_top) for rule in FIG1_D64_RULES]
    waiting = [steps for steps in budgets if steps > top]
    grade = lowest_grade(v.grade for v in verdicts)
    # Named per comparison, so the results index reads "depth ratio 1.77", not "ratio 0 1.77".
    names = (("depth ratio", "L = 3 half rank worst"), ("full-rank ratio", "L = 3 full rank worst"))
    numbers = {
        label: v.numbers[key]
        for v, labels in zip(verdicts, names, strict=True)
        for key, label in zip(("ratio", "better_worst"), labels, strict=True)
        if key in v.numbers
    }
    text = f"at {top} steps: " + "; ".join(f"{v.explanation} -> {v.grade.value}" for v in verdicts)
    if waiting:
        text += f" (runs of {', '.join(str(s) for s in waiting)} steps wait until every run has one)"
    return Verdict(grade, text, numbers)


D64_CLAIM = Claim(
    "at the paper's size and schedule, three layers rescue half rank and full rank stays below it",
    fig1_d64_depth,
    "L = 1 r = d/2 >= 5x L = 3 r = d/2 with L = 3 <= 0.1, and L = 3 r = d/2 >= 5x full rank (paper 14x, 17x)",
    "L = 3 r = d/2 below L = 1 r = d/2, and full rank below r = d/2 at L = 3, on every seed",
)


# --------------------------------------------------------------------------------------------------------------------
# The long scale's scaling rules (stated before any long run; docs/scaling.md).
# --------------------------------------------------------------------------------------------------------------------


SCALING_RULES: tuple[ScalingRule, ...] = (
    ScalingRule(
        "depth rescues half rank (d = 16, N = 8)",
        "at L = 3, r = d/2 falls far below its L = 1 loss and near the paper's 0.05",
        {"d": 16, "layers": 1, "rank": 8, "temperature": 1.0},
        {"d": 16, "layers": 3, "rank": 8, "temperature": 1.0},
        ratio=5.0,
        ceiling=0.1,
        paper="L = 1 r = d/2 0.70 vs L = 3 0.05 (14x) at d = 64, N = 16; ceiling 2x the paper's 0.05",
    ),
    ScalingRule(
        "full rank stays below half rank at L = 3 (d = 16, N = 8)",
        "at L = 3, full rank stays well below r = d/2",
        {"d": 16, "layers": 3, "rank": 8, "temperature": 1.0},
        {"d": 16, "layers": 3, "rank": 16, "temperature": 1.0},
        ratio=5.0,
        paper="L = 3 r = d/2 0.05 vs full 0.003 (17x) at d = 64, N = 16",
    ),
    ScalingRule(
        "depth rescues half rank (d = 64, N = 16, the paper's size)",
        "at L = 3, r = d/2 falls far below its L = 1 loss and near the paper's 0.05",
        {"d": 64, "layers": 1, "rank": 32},
        {"d": 64, "layers": 3, "rank": 32},
        ratio=5.0,
        ceiling=0.1,
        paper="L = 1 r = d/2 0.70 vs L = 3 0.05 (14x); ceiling 2x the paper's 0.05",
    ),
)


# --------------------------------------------------------------------------------------------------------------------
# Presets.
# --------------------------------------------------------------------------------------------------------------------


PRESET = Preset(
    name="fig1",
    description="Figure 1: farthest-point task, rank x width x depth x seeds",
    figure=FIG1,
    scales=at_scales(_fig1, (*SCALES, FRESH, LONG, GPU)),
    paper=PAPER_NUMBERS,
    expected={
        "quick": "8 runs, ~3 min on 2 cores (174 s at load 8-11)",
        "cpu": "20 runs (L = 1 and 3, every rank of d = 16), 16-34 min on 2 cores",
        "long": "51 runs (ladders to 100k steps at d = 16, 25k at d = 64), 7.2 h of training summed (measured)",
        "paper": "321 runs in the paper's regime (GPU): 315 x 100k steps (data seeds 0-4, one initialisation, 100 "
        "replayed batches) and the 6 supplementary c = 64, L = 3 runs x 200k steps of batch 64",
        FRESH: "315 runs x 100k steps on fresh batches, initialisation seeds 0-4 (GPU; our regime, not the paper's)",
        "gpu": "8 deciding runs at the paper's size x 4k steps, ~80 s on one H200 (measured step cost)",
    },
    rule=CLAIM,
    scaling_rules=SCALING_RULES,
    report_sections=(paper_statistic_at(("paper",)),),
)


D64_PRESET = Preset(
    name="fig1-d64",
    description=(
        "Figure 1's deep columns at the paper's size (d = 64, N = 16) with its schedule, and a depth ladder in d"
    ),
    figure=FIG1,
    scales=at_scales(_fig1_d64),
    paper=tuple(p for p in PAPER_NUMBERS if p.where.get("width") == 1 and p.where.get("rank_class") != "low"),
    expected={
        "quick": "8 runs of 60 steps, seconds (plumbing)",
        "cpu": "8 runs x the first 20k of 100k steps: d = 64 L = 3 ~2.4 h a run on a quiet core under jemalloc, "
        "~10 core-hours in all (estimated from the measured d = 64 step; several sittings, resumable)",
        "paper": "8 runs x 100k steps, each extending its cpu prefix",
    },
    rule=D64_CLAIM,
    report_sections=(CURVE_PROJECTIONS, DEPTH_LADDER),
)


REPLAY_PRESET = Preset(
    name="fig1-d64-replay",
    description=(
        "fig1-d64's deciding cells in the paper's data regime: one fixed set of 100 reference-sampler batches replayed "
        "every epoch, training loss and population error"
    ),
    figure=FIG1,
    scales=at_scales(_fig1_d64_replay),
    paper=tuple(p for p in PAPER_NUMBERS if p.where.get("width") == 1 and p.where.get("rank_class") != "low"),
    expected={
        "quick": "4 runs of 60 steps, seconds (plumbing)",
        "cpu": "4 runs x the first 20k of 100k steps: L = 3 ~2.1-2.4 h a run and L = 1 ~45 min on a quiet core under "
        "jemalloc, ~8 core-hours in all (measured steps; several sittings, resumable)",
        "paper": "4 runs x 100k steps, each extending its cpu prefix: ~38 core-hours on the CPU at the same steps",
    },
    rule=D64_CLAIM,
    report_sections=(CURVE_PROJECTIONS, TRAINING_VS_POPULATION, MILESTONE_STATISTIC),
)


PRESETS = (PRESET, D64_PRESET, REPLAY_PRESET)
"""This module's presets, in the order `experiments.studies` lists them."""
