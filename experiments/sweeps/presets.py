"""Sweep presets: every experiment of docs/paper.md section 6 as a list of resolved run specs per scale.

A preset names an experiment, its run specs at each scale, how its figure is drawn (`experiments.figures.sweeps`)
and the paper's numbers to put beside ours (`experiments.reporting.sweep_report`). Scales:

- ``quick``: minutes on 2 CPU cores; small d, short schedules; meant to show the qualitative finding only;
- ``cpu``: hours on a laptop; intermediate sizes;
- ``paper``: the paper's full schedule (d = 64, 100k steps, 5 seeds; a GPU is needed).

Run specs are either a :class:`experiments.config.TrainConfig` (kind "train", key = ``config_hash()``) or a
:class:`RandomFeaturesSpec` (kind "random-features": no training, `constructions.random_features`). Both have
``to_dict()`` and ``config_hash()``; :func:`spec_from_record` turns a stored (kind, dict) back into a spec.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from experiments.config import TrainConfig
from experiments.sweeps.claims import CLAIMS
from experiments.sweeps.least_squares_spec import LeastSquaresHeadsSpec
from theory.validation import check_choice, check_dimension, check_int

SCALES = ("quick", "cpu", "paper")
"""Scales every paper preset offers (the plumbing preset ``smoke`` has only ``quick``)."""
GPU = "gpu"
"""The multi-layer presets' deciding cells at the paper's sizes with fewer steps, sized for one ~10-minute call on one
H200 for all four presets together (`scripts/gpu_paper.sh`, `paper_deciding_cells`)."""
LONG = "long"
"""The compute-scaling scale of the multi-layer presets (fig1, posn, icl, conjecture6): each claim's deciding cells
trained at a ladder of budgets (`budget_ladder`), <= 150 min with 2 workers on 2 CPU cores (docs/scaling.md)."""


@dataclass(frozen=True)
class RandomFeaturesSpec:
    """One draw of random rank-1 hardmax heads with optimal output weights (docs/paper.md section 6, random features).

    Attributes:
        d: dimension. head_counts: increasing head counts at which the nested prefix error is computed.
        trial: index of the draw (the numpy seed is derived from (seed, d, trial)). seed: base seed.
        distribution: head distribution of `constructions.random_features.sample_heads`.
    """

    d: int
    head_counts: tuple[int, ...]
    trial: int = 0
    seed: int = 0
    distribution: str = "uniform-cosine"

    def __post_init__(self) -> None:
        check_dimension(self.d, name="d")
        counts = tuple(check_int("head_counts", h, minimum=1) for h in self.head_counts)
        if not counts or any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
            raise ValueError(f"head_counts must be a non-empty strictly increasing sequence, got {self.head_counts!r}")
        object.__setattr__(self, "head_counts", counts)
        check_int("trial", self.trial, minimum=0)
        check_int("seed", self.seed, minimum=0)

    kind = "random-features"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["head_counts"] = list(self.head_counts)
        return data

    def config_hash(self) -> str:
        text = json.dumps({"kind": self.kind, **self.to_dict()}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


RunSpec = TrainConfig | RandomFeaturesSpec | LeastSquaresHeadsSpec
SPEC_KINDS = ("train", "random-features", "least-squares-heads")


def spec_kind(spec: RunSpec) -> str:
    """ "train", "random-features" or "least-squares-heads"."""
    if isinstance(spec, TrainConfig):
        return "train"
    if isinstance(spec, RandomFeaturesSpec):
        return "random-features"
    if isinstance(spec, LeastSquaresHeadsSpec):
        return LeastSquaresHeadsSpec.kind
    raise ValueError(
        f"spec must be a TrainConfig, RandomFeaturesSpec or LeastSquaresHeadsSpec, got {type(spec).__name__}"
    )


def spec_from_record(kind: str, data: Mapping[str, Any]) -> RunSpec:
    """Rebuild a run spec from its kind and ``to_dict()`` (validating)."""
    check_choice("kind", kind, SPEC_KINDS)
    if kind == "train":
        return TrainConfig.from_dict(dict(data))
    if kind == LeastSquaresHeadsSpec.kind:
        return LeastSquaresHeadsSpec.from_dict(data)
    values = dict(data)
    known = {"d", "head_counts", "trial", "seed", "distribution"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown random-features key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(known))})")
    values["head_counts"] = tuple(values.get("head_counts", ()))
    return RandomFeaturesSpec(**values)


@dataclass(frozen=True)
class PaperNumber:
    """One published number (docs/paper.md section 6) and the runs of ours it should be compared with.

    Attributes:
        label: the cell, in words.  value: the paper's value (low, high) (equal ends for a single number).
        where: selector on run fields; the pseudo-field ``rank_class`` is "full" (r = d), "half" (r = d/2) or
            "low" (r <= d/4).
    """

    label: str
    value: tuple[float, float]
    where: Mapping[str, Any]


@dataclass(frozen=True)
class Preset:
    """A sweep: run specs per scale, the figure it draws, the paper's numbers and the qualitative claim.

    Attributes:
        name, description, figure: figure kind of `experiments.figures.sweeps`.  scales: scale -> spec builder.
        paper: the published numbers (may be empty: figd has none).  claim: the qualitative finding, in words
            (`experiments.sweeps.claims.CLAIMS`, whose predicate judges it).
        expected: scale -> expected runtime and outcome in words (docs/sweeps.md).
    """

    name: str
    description: str
    figure: str
    scales: Mapping[str, Callable[[], list[RunSpec]]]
    paper: tuple[PaperNumber, ...] = ()
    claim: str = ""
    expected: Mapping[str, str] = field(default_factory=dict)

    def runs(self, scale: str) -> list[RunSpec]:
        """The resolved run specs of ``scale`` (ValueError lists the allowed scales)."""
        check_choice("scale", scale, tuple(self.scales))
        specs = self.scales[scale]()
        hashes = [s.config_hash() for s in specs]
        if len(set(hashes)) != len(hashes):
            raise ValueError(f"preset {self.name} scale {scale} has duplicate runs")
        return specs


# --------------------------------------------------------------------------------------------------------------------
# Schedules per scale. quick: small models, 600 steps of 128 samples (~10-30 s per run on one CPU core);
# cpu: d = 32 and 5000 steps; paper: the paper's 100k steps of 256 samples with FFN 2048.
# --------------------------------------------------------------------------------------------------------------------

QUICK = {"ffn_dim": 64, "steps": 600, "batch_size": 128, "log_every": 50, "checkpoint_every": 100, "device": "cpu"}
CPU = {"ffn_dim": 256, "steps": 5000, "batch_size": 256, "log_every": 100, "checkpoint_every": 500}
CPU2 = {"ffn_dim": 256, "batch_size": 128, "log_every": 50, "checkpoint_every": 500, "device": "cpu"}
"""The 2-core cpu scale of the encoder presets (issue 11: each sweep <= 45 min with --workers 2): batch 128, FFN 256;
steps and grid per preset, each with its time estimate (docs/tuning.md)."""
PAPER = {"ffn_dim": 2048, "steps": 100_000, "batch_size": 256, "log_every": 100, "checkpoint_every": 5000}


def paper_recipe(steps: int, warmup: int) -> dict[str, Any]:
    """The reference code's schedule and initialisation (docs/paper.md section 6): a ``steps``-step schedule with an
    absolute ``warmup``-step linear warm-up (the reference: max_epochs // 20 epochs of 100 steps), named as the
    schedule's length so that a run of fewer steps trains a prefix of it, and encoder layers that start as copies of
    one layer (``nn.TransformerEncoder`` deep-copies the layer it is given)."""
    return {
        "steps": steps,
        "schedule_steps": steps,
        "warmup_steps": warmup,
        "warmup_fraction": 0.0,
        "layer_init": "copies",
    }


PAPER_100K = paper_recipe(100_000, 5_000)
"""fig1, figN, figd: warm-up 5000 of 100k steps."""
PAPER_200K = paper_recipe(200_000, 10_000)
"""posn: warm-up 10000 of 200k steps."""


def grid(base: Mapping[str, Any], **axes: Sequence[Any]) -> list[TrainConfig]:
    """TrainConfigs of the Cartesian product of ``axes`` over ``base`` (later axes vary fastest).

    An axis named ``rank_fraction`` gives the rank as d // value (so grids over d keep relative ranks).
    """
    names = list(axes)
    configs = []
    for values in itertools.product(*(axes[n] for n in names)):
        data = dict(base)
        data.update(zip(names, values, strict=False))
        if "rank_fraction" in data:
            data["rank"] = max(1, int(data["d"]) // int(data.pop("rank_fraction")))
        configs.append(TrainConfig(**data))
    return configs


LONG_BUDGETS = (3_000, 10_000, 30_000, 100_000)
"""Steps of the long scale's ladder at d = 16: four budgets spanning 33x, the top one the paper's 100k steps."""
LONG_SEEDS_BELOW_TOP, LONG_SEEDS_TOP = (0, 1), (0,)
"""Two seeds at every budget but the top one, which has one (issue 18: affordable on 2 cores)."""


def budget_ladder(
    base: Mapping[str, Any],
    cells: Sequence[Mapping[str, Any]],
    budgets: Sequence[int] = LONG_BUDGETS,
    seeds_below: Sequence[int] = LONG_SEEDS_BELOW_TOP,
    seeds_top: Sequence[int] = LONG_SEEDS_TOP,
) -> list[TrainConfig]:
    """Every cell of ``cells`` (fields over ``base``) trained at every budget, each budget its own schedule.

    A budget is the run's ``steps``, so the warm-up (5% of the steps) and the cosine decay to 0 are the run's own:
    a 3k-step run is not the first 3k steps of a 100k-step run. The largest budget gets ``seeds_top``, the others
    ``seeds_below``. Checkpoints every 2% of a run (at most every 5000 steps).
    """
    configs = []
    for cell in cells:
        for steps in budgets:
            seeds = seeds_top if steps == max(budgets) else seeds_below
            every = max(100, min(5000, steps // 50))
            for seed in seeds:
                configs.append(TrainConfig(**{**base, **cell, "steps": steps, "checkpoint_every": every, "seed": seed}))
    return configs


def paper_deciding_cells(
    paper_runs: Sequence[RunSpec], keep: Callable[[TrainConfig], bool], steps: int
) -> list[RunSpec]:
    """The paper scale's runs that decide a claim (``keep``), each with ``steps`` steps and checkpoints every tenth of
    them (a run killed at a call's time limit resumes in the next call).

    Everything else (d, N, FFN, batch, lr, temperature, seeds kept) is the paper scale's own, the schedule included:
    where the paper scale names its schedule (``schedule_steps``: fig1, figN, figd, posn) the runs train its first
    ``steps`` steps and can be extended along it; elsewhere each run has its own warm-up and cosine over ``steps``.
    """
    return [
        replace(c, steps=steps, checkpoint_every=max(1, steps // 10), log_every=min(c.log_every, max(1, steps // 100)))
        for c in paper_runs
        if isinstance(c, TrainConfig) and keep(c)
    ]


TEMPERATURE_CONTROL = (1.0, 128.0)
"""Score temperatures of the long scale's control presets (figN, figd): the paper's 1 and the cpu presets' 128."""
TEMPERATURE_CONTROL_STEPS = 10_000
"""Steps of every run of those controls: 3-4x the cpu scale's budget, one seed (~15-30 min each with 2 workers)."""


GPU_STEPS = {"fig1": 4_000, "posn": 2_000, "conjecture6": 1_500, "icl": 400}
"""Steps of the gpu scale per preset: what about 80 s of one H200 trains for the preset's slowest deciding cell, at the
step costs measured on one on 2026-12-04 (results/gpu-2026-12-04/README.md; eight processes sharing the GPU):
fig1 L = 3 17-19 ms per step, posn 41 ms, conjecture6 (L = 5, r = 1, N = 32) 53 ms, icl (12 layers, r = 1) 190 ms. These
costs are mostly overhead, not arithmetic (icl's step is ~0.3 TFLOP: ~6 ms at the H200's fp32 rate; fig1's far less),
so the counts make a plumbing and throughput check more than a test of the claims. The paper trains 100k (fig1), 200k
(posn), 100k (conjecture6) and 500k (icl) steps; the long scale (docs/scaling.md) measures what budgets do on the
CPU."""


def divisors_pow2(d: int) -> tuple[int, ...]:
    """Ranks d, d/2, ..., 1 (d a power of two), full rank first."""
    ranks = []
    r = d
    while r >= 1:
        ranks.append(r)
        r //= 2
    return tuple(ranks)


FARTHEST = {"task": "farthest", "model": "encoder"}

QUICK_FARTHEST = {**QUICK, "steps": 800, "temperature": 128.0}
"""Quick schedule of the farthest-point presets (docs/tuning.md): scores multiplied by temperature 128 (on top of
1 / sqrt(r)), 800 steps. A full-rank head needs a score scale of a few tens to resolve the farthest point; the paper's
100k steps reach it from temperature 1, 800 steps do not (d = 16, N = 8, L = 1: full rank 0.177 at temperature 1,
0.055 at 32, 0.039 at 128), while low rank does not gain from it (r = 8: 0.59 / 0.576 / 0.578). The factor is the same
for every rank and is a fixed, not learned, scale in front of the learned Q^T K."""


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
            _fig1("paper"),
            lambda c: c.width == 1 and c.layers in (1, 3) and c.rank in (32, 64) and c.seed < 2,
            GPU_STEPS["fig1"],
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
    return list(
        grid(
            {**FARTHEST, **PAPER, **PAPER_100K, "d": 64, "N": 16},
            layers=(1, 3, 5),
            width=(1, 8, 64),
            rank=divisors_pow2(64),
            seed=(0, 1, 2, 3, 4),
        )
    )


FIG1_LONG_D64_LR = 0.003
"""lr of the d = 64, N = 16 cells of fig1 long (docs/scaling.md: at lr 0.01 both r = 32 and r = 64 stayed at the zero
predictor for 3000 steps; a pilot at lr 0.003 and 0.001, one seed, 3000 steps, chose it)."""
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
"""Steps of the fig1-d64 cpu scale: the first fifth of the paper's 100k-step schedule (warm-up 5000), 0.47 s a step
at d = 64, L = 3 on one core (~2.6 h a run); `TrainConfig.extends` lets a later sitting train them further."""


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


def _figN(scale: str) -> list[RunSpec]:
    if scale == "quick":
        # docs/tuning.md: full rank 0.03-0.07 at every N while r = 1 rises 0.14 -> 0.75 (20x at N = 16), ~3 min.
        return list(
            grid(
                {**FARTHEST, **QUICK_FARTHEST, "d": 16, "layers": 1, "width": 1, "seed": 0},
                N=(2, 4, 8, 16),
                rank=(16, 1),
            )
        )
    if scale == LONG:
        # The score-temperature control (issue 18 item 5): the cpu grid's N and the ranks the claim reads (full and 1),
        # one seed, at temperature 1 (the paper's score scale) and 128 (the cpu preset's), both at 10k steps (4x the
        # cpu scale's 2500), so the report judges the claim at each temperature on the same budget.
        base = {**FARTHEST, **CPU2, "d": 16, "layers": 1, "width": 1, "log_every": 100}
        cells = [
            {"N": n, "rank": r, "temperature": t} for t in TEMPERATURE_CONTROL for n in (4, 16, 64) for r in (16, 1)
        ]
        return list(budget_ladder(base, cells, budgets=(TEMPERATURE_CONTROL_STEPS,), seeds_top=(0,)))
    if scale == "cpu":
        # One layer as the quick scale (its schedule is tuned; deeper models at temperature 128 are not), N up to 64,
        # three ranks, two seeds, 2500 steps: ~0.015 / 0.03 / 0.13 s per step at N = 4 / 16 / 64, estimated 22 min
        # with 2 workers (docs/tuning.md).
        return list(
            grid(
                {**FARTHEST, **CPU2, "d": 16, "layers": 1, "width": 1, "steps": 2500, "temperature": 128.0},
                N=(4, 16, 64),
                rank=(16, 8, 1),
                seed=(0, 1),
            )
        )
    return list(
        grid(
            {**FARTHEST, **PAPER, **PAPER_100K, "d": 64, "layers": 2, "width": 64},
            N=(4, 16, 64, 256),
            rank=(64, 32, 1),
            seed=(0, 1, 2, 3, 4),
        )
    )


def _figd(scale: str) -> list[RunSpec]:
    if scale == "quick":
        # lr 0.003 for 1000 steps: at lr 0.01 the d = 32 models fall to the zero predictor (loss 1.0) and stay there.
        quick = {**QUICK, "lr": 0.003, "steps": 1000}
        return list(
            grid({**FARTHEST, **quick, "N": 8, "layers": 1, "width": 1, "seed": 0}, d=(8, 16, 32), rank_fraction=(1, 4))
        )
    if scale == LONG:
        # The score-temperature control (issue 18 item 5): the cpu grid's d with full rank and its lowest rank (d / 4),
        # one seed, at temperature 1 and 128, both at 10k steps (the cpu scale's 3000 x 3.3; its lr 0.01).
        base = {**FARTHEST, **CPU2, "N": 8, "layers": 1, "width": 1, "log_every": 100}
        cells = [
            {"d": d, "rank": r, "temperature": t}
            for t in TEMPERATURE_CONTROL
            for d in (8, 16, 32, 64)
            for r in (d, d // 4)
        ]
        return list(budget_ladder(base, cells, budgets=(TEMPERATURE_CONTROL_STEPS,), seeds_top=(0,)))
    if scale == "cpu":
        # The quick scale's one-layer set-up at temperature 128 (docs/tuning.md: 9-23x at 800 steps), d up to 64,
        # ranks d, d/2, d/4, two seeds, 3000 steps: estimated 24 min with 2 workers.
        return list(
            grid(
                {**FARTHEST, **CPU2, "N": 8, "layers": 1, "width": 1, "steps": 3000, "temperature": 128.0},
                d=(8, 16, 32, 64),
                rank_fraction=(1, 2, 4),
                seed=(0, 1),
            )
        )
    return list(
        grid(
            {**FARTHEST, **PAPER, **PAPER_100K, "N": 16, "layers": 2, "width": 8},
            d=(16, 64, 128, 256),
            rank_fraction=(1, 2, 8, 16),
            seed=(0, 1, 2, 3, 4),
        )
    )


def _positional(
    base: Mapping[str, Any], d: int, p: int, layers: Sequence[int], ranks: Sequence[int], seeds: Sequence[int]
) -> list[RunSpec]:
    specs: list[RunSpec] = []
    for L, r, seed in itertools.product(layers, ranks, seeds):
        for positional, dim in (("none", 0), ("additive", 0), ("concat", p)):
            specs.append(
                TrainConfig(
                    **{
                        **base,
                        "d": d,
                        "layers": L,
                        "rank": r,
                        "seed": seed,
                        "positional": positional,
                        "positional_dim": dim,
                    }
                )
            )
    return specs


def _posn(scale: str) -> list[RunSpec]:
    if scale == "quick":
        # N = 4 and lr 0.003 for 1000 steps: with N = 8 (or lr 0.01) the 3-layer models stay at the zero predictor
        # (loss 1.0) for 600 steps; with N = 4 concat reaches 0.59 / 0.58 vs none 0.75 / 0.77 (seeds 0 / 1).
        base: dict[str, Any] = {**FARTHEST, **QUICK, "N": 4, "width": 1, "lr": 0.003, "steps": 1000}
        specs = _positional(base, 16, 16, (1, 3), (2,), (0,))
        specs.append(TrainConfig(**{**base, "d": 16, "layers": 1, "rank": 16, "seed": 0}))  # full-rank reference
        return specs
    if scale == LONG:
        # posn's deciding cells along the ladder: L = 3, concatenated vs no encodings, at the two low ranks of the cpu
        # scale (the paper's numbers are for r = 4), in the cpu scale's set-up (N = 4, lr 0.003, temperature 1).
        base = {**FARTHEST, **CPU2, "N": 4, "width": 1, "lr": 0.003, "d": 16, "layers": 3, "log_every": 100}
        cells = [
            {"rank": r, "positional": kind, "positional_dim": dim}
            for r in (2, 4)
            for kind, dim in (("none", 0), ("concat", 16))
        ]
        return list(budget_ladder(base, cells))
    if scale == GPU:  # concatenated encodings rescue r = 4 at L = 3: none vs concat, two seeds (4 runs)
        return paper_deciding_cells(
            _posn("paper"),
            lambda c: c.layers == 3 and c.rank == 4 and c.positional != "additive" and c.seed < 2,
            GPU_STEPS["posn"],
        )
    if scale == "cpu":
        # The quick scale's set-up (N = 4, lr 0.003: 3-layer models do not train at lr 0.01) with ranks 2 and 4, two
        # seeds and 2500 steps, plus a full-rank reference per seed: 26 runs, estimated 26 min with 2 workers.
        base = {**FARTHEST, **CPU2, "N": 4, "width": 1, "lr": 0.003, "steps": 2500}
        specs = _positional(base, 16, 16, (1, 3), (2, 4), (0, 1))
        specs += [TrainConfig(**{**base, "d": 16, "layers": 1, "rank": 16, "seed": s}) for s in (0, 1)]
        return specs
    return _positional(
        {**FARTHEST, **PAPER, **PAPER_200K, "N": 16, "width": 8, "lr": 0.005},
        64,
        64,
        (1, 3),
        (4, 32, 64),
        (0, 1, 2, 3, 4),
    )


def _random_features(scale: str) -> list[RunSpec]:
    dims: tuple[int, ...]
    if scale == "quick":
        dims, top, trials = (8, 16), 10, 2
    elif scale == "cpu":
        dims, top, trials = (8, 16, 32, 64), 13, 3
    else:
        dims, top, trials = (8, 16, 32, 64), 14, 5
    counts = tuple(2**k for k in range(top + 1))  # 1 .. 2^top heads
    return [RandomFeaturesSpec(d=d, head_counts=counts, trial=t) for d in dims for t in range(trials)]


ICL_LONG_BUDGETS = (1_500, 3_000, 6_000, 15_000)
"""icl's long-scale budgets: 10x in steps around the cpu scale's 3000 (the paper's 500k steps are out of reach of a
CPU at any model size that learns the task; docs/scaling.md)."""


def _icl(scale: str) -> list[RunSpec]:
    # GPT-2-style backbone (models/gpt2.py) of width D = embed_dim with H = D / r heads of rank r: the paper's
    # encoder cannot do regression (its L2 norms erase the y-tokens' magnitudes; it stays at loss ~0.98 at every rank).
    icl = {"task": "icl", "model": "gpt2", "positional": "additive"}
    if scale == "quick":
        # 1500 steps at lr 0.003: r = 32 / 4 / 1 reach 0.73 / 0.76 / 0.84 (seed 0); 600 steps learn nothing yet.
        quick = {**QUICK, "steps": 1500, "lr": 0.003, "ffn_dim": 128}
        return list(grid({**icl, **quick, "d": 8, "N": 10, "embed_dim": 32, "layers": 2, "seed": 0}, rank=(32, 4, 1)))
    if scale == "cpu":
        # The quick scale's model (D = 32) with four layers, four ranks, two seeds and 3000 steps. At L = 2 one head
        # of rank 32 per layer stays on a one-example plateau (loss ~0.88) for half the initialisations (seeds 1, 4, 5
        # of 0-5), whatever the warm-up, lr, budget or curriculum; at L = 4 seeds 1 and 4 leave it (docs/tuning.md).
        # 8 runs, estimated ~40 min with 2 workers (a D = 64, 20k-step grid would take ~1 day here).
        cpu = {**CPU2, "ffn_dim": 128, "steps": 3000, "lr": 0.003}
        return list(
            grid({**icl, **cpu, "d": 8, "N": 10, "embed_dim": 32, "layers": 4}, rank=(32, 8, 2, 1), seed=(0, 1))
        )
    if scale == LONG:
        # The deciding cells of the cpu scale (its model, L = 4, D = 32), full rank (one head, r = 32) vs rank 1 (32
        # heads), along ICL_LONG_BUDGETS (10x), two seeds below the top and one at it. Seconds per step measured in
        # the committed cpu store at load 6-8: r = 32 0.10, r = 1 0.48 (gpt2 runs are never packed); on an idle
        # machine about a third of that, so ~36k steps of r = 1 take ~1.5 worker-hours: ~60-75 min with 2 workers.
        cpu_model = {**icl, **CPU2, "ffn_dim": 128, "lr": 0.003, "d": 8, "N": 10, "embed_dim": 32, "layers": 4}
        return list(budget_ladder(cpu_model, [{"rank": 32}, {"rank": 1}], budgets=ICL_LONG_BUDGETS))
    if scale == GPU:  # full rank (r = D) vs rank 1, two seeds (4 runs)
        return paper_deciding_cells(_icl("paper"), lambda c: c.rank in (256, 1) and c.seed < 2, GPU_STEPS["icl"])
    # Garg et al.'s standard set-up: d = 20, 41 pairs, D = 256, 12 layers (8 heads of rank 32 is GPT-2's own choice).
    return list(
        grid(
            {
                **icl,
                **PAPER,
                "d": 20,
                "N": 41,
                "embed_dim": 256,
                "layers": 12,
                "batch_size": 64,
                "lr": 1e-4,
                "steps": 500_000,
                "ffn_dim": 1024,
            },
            rank=(256, 32, 8, 1),
            seed=(0, 1, 2),
        )
    )


def _bound_vs_trained(scale: str) -> list[RunSpec]:
    theorem = {"task": "nearest", "N": 2, "keys": "orthonormal", "model": "theory", "layers": 1}
    if scale == "quick":
        return list(grid({**theorem, **QUICK, "d": 16, "seed": 0}, width=(1, 4), rank=(16, 4, 1)))
    if scale == "cpu":
        return list(grid({**theorem, **CPU, "d": 32}, width=(1, 8), rank=divisors_pow2(32), seed=(0, 1)))
    return list(grid({**theorem, **PAPER, "d": 64}, width=(1, 8, 64), rank=divisors_pow2(64), seed=(0, 1, 2)))


def _conjecture6(scale: str) -> list[RunSpec]:
    nearest = {"task": "nearest", "keys": "iid", "model": "encoder"}
    # Learned additive positions at the quick and cpu scales: without them the encoder's query token cannot tell itself
    # from the keys (its own score <y, y> = 1 is the largest), and even full rank stays near 0.5-0.7 (docs/tuning.md).
    located = {**nearest, "positional": "additive", "temperature": 128.0}
    if scale == "quick":
        # docs/tuning.md: N = 2: full 0.33 vs r = 1 0.49; N = 16: 0.21 vs 0.76 (the gap widens 0.16 -> 0.55).
        return list(
            grid(
                {**located, **QUICK_FARTHEST, "d": 16, "layers": 2, "width": 1, "seed": 0},
                N=(2, 4, 8, 16),
                rank=(16, 1),
            )
        )
    if scale == LONG:
        # The deciding cells (two layers, rank 1 and full rank at the two largest N of the cpu scale) along a ladder
        # of 2k / 6k / 20k / 100k steps: N = 32 rank-1 steps cost ~59 ms (one thread), so the 3k / 10k / 30k ladder
        # would not fit 150 min with 2 workers; two seeds below the top budget, one at 100k (28 runs). Then the
        # score-temperature control (issue 18 item 5; the ladder's N = 32 rule reaches magnitude at temperature 128):
        # the same four cells at the paper's temperature 1, at the ladder's 20k budget with its two seeds (8 runs), so
        # the report judges the claim at both temperatures on equal budgets.
        base = {**located, **CPU2, "d": 16, "layers": 2, "width": 1, "log_every": 100}
        cells = [{"N": n, "rank": r} for n in (8, 32) for r in (16, 1)]
        ladder: list[RunSpec] = list(budget_ladder(base, cells, budgets=(2_000, 6_000, 20_000, 100_000)))
        control = [{**cell, "temperature": 1.0} for cell in cells]
        return ladder + list(budget_ladder(base, control, budgets=(20_000,), seeds_top=(0, 1)))
    if scale == GPU:  # rank 1 vs full rank at N = 8 and 32 (the long scale's N; N = 128 and 512 need far more memory)
        return paper_deciding_cells(
            _conjecture6("paper"),
            lambda c: c.N in (8, 32) and c.rank in (64, 1) and c.seed < 2,
            GPU_STEPS["conjecture6"],
        )
    if scale == "cpu":
        # N up to 32, two seeds, 2500 steps: ~0.03 / 0.065 / 0.24 s per step at N = 2 / 8 / 32 (rank 1 is the
        # slower), estimated 28 min with 2 workers.
        return list(
            grid(
                {**located, **CPU2, "d": 16, "layers": 2, "width": 1, "steps": 2500},
                N=(2, 8, 32),
                rank=(16, 1),
                seed=(0, 1),
            )
        )
    return list(
        grid(
            {**nearest, **PAPER, "d": 64, "layers": 5, "width": 8},
            N=(2, 8, 32, 128, 512),
            rank=(64, 8, 1),
            seed=(0, 1, 2),
        )
    )


DEPTH_D, DEPTH_P = 8, 8
"""depth preset: token dimension and positional scratch width (streams of width D = 16, so H = 16 c heads)."""


def _depth(scale: str) -> list[RunSpec]:
    """Theorem 5 in training: two-layer rank-1 theory models with p concatenated scratch coordinates, next to
    one-layer rank-1 theory models (Theorem 2's class, no positions) with the same H heads, on nearest neighbour,
    N = 2, orthonormal keys (D_2), full value maps.

    H counts the heads of one layer: the two-layer model has H heads in each layer (D = d + p, H = c D), the
    one-layer model H = c' d heads (c' = c D / d); Theorem 5's construction has H voting heads plus one.
    """
    theorem = {"task": "nearest", "N": 2, "keys": "orthonormal", "model": "theory", "rank": 1, "value": "full"}
    D = DEPTH_D + DEPTH_P
    if scale == "quick":
        # H = 16, 32, 64; docs/tuning.md: seconds per 1000-step run at load ~7: two layers 42 / ~55 / 72, one layer
        # 21 / ~27 / 34, so ~250 s with 2 workers.
        schedule: dict[str, Any] = {**QUICK, "steps": 1000}
        widths: tuple[int, ...] = (1, 2, 4)
        seeds: tuple[int, ...] = (0, 1)
    elif scale == "cpu":
        # H = 16 ... 256, 2000 steps of 128, 3 seeds: per 1000 steps two layers take 42 / ~55 / 72 / ~110 / 165 s
        # and one layer 29 / ~31 / 34 / ~50 / 73 s (load ~7), so ~4000 worker-seconds, ~33 min with 2 workers.
        schedule = {**QUICK, "steps": 2000, "checkpoint_every": 500}
        widths, seeds = (1, 2, 4, 8, 16), (0, 1, 2)
    else:
        schedule = {**PAPER, "steps": 20_000}
        widths, seeds = (1, 2, 4, 8, 16, 32, 64), (0, 1, 2, 3, 4)
    specs: list[RunSpec] = []
    for c, seed in itertools.product(widths, seeds):
        base = {**theorem, **schedule, "d": DEPTH_D, "seed": seed}
        specs.append(TrainConfig(**base, layers=2, positional="concat", positional_dim=DEPTH_P, width=c))
        specs.append(TrainConfig(**base, layers=1, width=c * D // DEPTH_D))
    if scale != "quick":
        init_widths = (1, 4, 16) if scale == "cpu" else (1, 4, 16, 64)
        specs += depth_construction_arms(schedule, init_widths, seeds)
    return specs


DEPTH_INIT_P = DEPTH_D + 1
"""Scratch width of the depth preset's construction arms: Theorem 5's majority vote needs p = d + 1 (a tally
coordinate and a d-wide output block), so these arms have streams of width D = 17 and H = 17 c heads per layer."""
DEPTH_INIT_TEMPERATURES = (None, 100.0)
"""The constructions' inverse temperatures in the depth arms: the run's own (1; the majority vote's exact error is
then below its hardmax error: 0.267 vs 0.486 at d = 8, H = 17) and 100 (near hardmax: 0.454 at H = 17; Fact 1 0.0056,
docs/paper.md's reference lambda)."""


def depth_construction_arms(
    schedule: Mapping[str, Any], widths: Sequence[int], seeds: Sequence[int]
) -> list[TrainConfig]:
    """The depth preset's starting-point arms (issue 18): each construction beside the same model from scratch.

    - two layers, rank 1, p = `DEPTH_INIT_P`, H = 17 c heads per layer: from scratch, and from Theorem 5's majority
      vote (``init = "construction:majority-vote[@100]"``, H voting heads, directions drawn from the run's seed);
    - one layer, full rank (r = d, one head): from scratch, and from Fact 1's head (``"construction:full-rank[@100]"``).

    Same task, schedule and seeds as the preset's other runs. Runs started from a construction are trained alone
    (never packed or seed-batched).
    """
    theorem: dict[str, Any] = {"task": "nearest", "N": 2, "keys": "orthonormal", "model": "theory", "value": "full"}
    inits = [None] + [f"construction:{{}}{'' if t is None else f'@{t:g}'}" for t in DEPTH_INIT_TEMPERATURES]
    specs = []
    for seed, init in itertools.product(seeds, inits):
        base = {**theorem, **schedule, "d": DEPTH_D, "seed": seed}
        for c in widths:
            two: dict[str, Any] = {
                "layers": 2,
                "rank": 1,
                "positional": "concat",
                "positional_dim": DEPTH_INIT_P,
                "width": c,
            }
            specs.append(TrainConfig(**base, **two, init=None if init is None else init.format("majority-vote")))
        one: dict[str, Any] = {"layers": 1, "rank": DEPTH_D, "width": 1}
        specs.append(TrainConfig(**base, **one, init=None if init is None else init.format("full-rank")))
    return specs


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
    lr = min(0.01, 0.25 / sqrt(H d)).

    The learning rate falls with H because Adam moves every entry of every V_h by about lr per step, coherently across
    heads at the start, so the sum of the H value maps moves by about H lr: at lr 0.01, d = 32, r = 1, H = 1024 the
    loss jumped to 17 at step 100 and was still 0.69 at step 700. A quarter of an entry's initial scale 1 / sqrt(H d)
    keeps it stable (d = 32, r = 8, H = 1024, 400 steps: 0.38 with temperature 4 against 0.50 at temperature 1).
    """
    return TrainConfig(
        task="nearest",
        N=2,
        keys="orthonormal",
        model="theory",
        layers=1,
        value="full",
        d=d,
        rank=r,
        width=H * r // d,
        temperature=4.0,
        lr=min(0.01, 0.25 / math.sqrt(H * d)),
        steps=steps,
        batch_size=batch_size,
        log_every=max(50, steps // 60),
        checkpoint_every=max(100, steps // 5),
        device="cpu",
        seed=seed,
    )


TIGHTNESS_TEMPERATURES = (0.0625, 0.25, 1.0, 4.0, math.inf)
"""Inverse temperatures tried by the tightness preset's constructions (`constructions.random_rank_heads`)."""


def _smoke(scale: str) -> list[RunSpec]:
    tiny = {
        **FARTHEST,
        "d": 4,
        "N": 3,
        "ffn_dim": 8,
        "steps": 30,
        "batch_size": 16,
        "log_every": 5,
        "checkpoint_every": 5,
        "device": "cpu",
    }
    return list(grid(tiny, rank=(4, 2, 1), seed=(0, 1)))


def _scales(
    builder: Callable[[str], list[RunSpec]], scales: Sequence[str] = SCALES
) -> dict[str, Callable[[], list[RunSpec]]]:
    return {s: functools.partial(builder, s) for s in scales}


# Paper numbers (docs/paper.md section 6), Figure 1: L x {full, half, low} x c.
_FIG1_PAPER = (
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
_FIGN_PAPER = tuple(
    [PaperNumber(f"full rank, N={n}", (0.0, 0.04), {"rank_class": "full", "N": n}) for n in (4, 16, 64, 256)]
    + [
        PaperNumber(f"r=d/2, N={n}", (v, v), {"rank_class": "half", "N": n})
        for n, v in ((4, 0.005), (16, 0.23), (64, 0.43), (256, 0.54))
    ]
    + [
        PaperNumber(f"r=1, N={n}", (v, v), {"rank": 1, "N": n})
        for n, v in ((4, 0.02), (16, 0.63), (64, 0.81), (256, 1.16))
    ]
)
_POSN_PAPER = (
    PaperNumber("L=3 r=4 concat", (5e-3, 5e-3), {"layers": 3, "rank": 4, "positional": "concat"}),
    PaperNumber("L=3 r=32 concat", (1.2e-4, 1.2e-4), {"layers": 3, "rank": 32, "positional": "concat"}),
    PaperNumber("L=3 low rank, no encodings", (0.035, 0.06), {"layers": 3, "rank_class": "low", "positional": "none"}),
)
_RF_PAPER = (
    PaperNumber("plateau, d=8, largest H", (0.13, 0.13), {"d": 8, "H": "max"}),
    PaperNumber("plateau, d=16, largest H", (0.18, 0.18), {"d": 16, "H": "max"}),
    PaperNumber("plateau, d=32, largest H", (0.18, 0.18), {"d": 32, "H": "max"}),
    PaperNumber("plateau, d=64, largest H", (0.18, 0.18), {"d": 64, "H": "max"}),
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "fig1",
            "Figure 1: farthest-point task, rank x width x depth x seeds",
            "fig1",
            _scales(_fig1, (*SCALES, LONG, GPU)),
            _FIG1_PAPER,
            CLAIMS["fig1"].statement,
            {
                "quick": "8 runs, ~3 min on 2 cores (174 s at load 8-11)",
                "cpu": "20 runs (L = 1 and 3, every rank of d = 16), 16-34 min on 2 cores",
                "long": "51 runs (ladders to 100k steps at d = 16, 25k at d = 64), 7.2 h of training summed (measured)",
                "paper": "315 runs x 100k steps (GPU)",
                "gpu": "8 deciding runs at the paper's size x 4k steps, ~80 s on one H200 (measured step cost)",
            },
        ),
        Preset(
            "fig1-d64",
            "Figure 1's deep columns at the paper's size (d = 64, N = 16) with its schedule, and a depth ladder in d",
            "fig1",
            _scales(_fig1_d64),
            tuple(p for p in _FIG1_PAPER if p.where.get("width") == 1 and p.where.get("rank_class") != "low"),
            CLAIMS["fig1-d64"].statement,
            {
                "quick": "8 runs of 60 steps, seconds (plumbing)",
                "cpu": "8 runs x the first 20k of 100k steps: d = 64 L = 3 ~2.6 h a run on one core, ~14 core-hours "
                "in all (target; several sittings, resumable)",
                "paper": "8 runs x 100k steps, each extending its cpu prefix",
            },
        ),
        Preset(
            "figN",
            "Appendix: varying the context length N",
            "figN",
            _scales(_figN, (*SCALES, LONG)),
            _FIGN_PAPER,
            CLAIMS["figN"].statement,
            {
                "quick": "8 runs, ~3 min (187 s at load 11-13)",
                "cpu": "18 runs, ~22 min",
                "long": "12 runs (temperature 1 vs 128 at 10k steps), 25 min on 2 cores (measured)",
                "paper": "60 runs (GPU)",
            },
        ),
        Preset(
            "figd",
            "Appendix: varying the dimension d (configured by the authors, no published numbers)",
            "figd",
            _scales(_figd, (*SCALES, LONG)),
            (),
            CLAIMS["figd"].statement,
            {
                "quick": "6 runs, ~2 min",
                "cpu": "24 runs, ~24 min",
                "long": "16 runs (temperature 1 vs 128 at 10k steps), 11 min on 2 cores (measured)",
                "paper": "80 runs (GPU)",
            },
        ),
        Preset(
            "posn",
            "Appendix: positional encodings (none / additive / concatenated)",
            "posn",
            _scales(_posn, (*SCALES, LONG, GPU)),
            _POSN_PAPER,
            CLAIMS["posn"].statement,
            {
                "quick": "7 runs, ~4-6 min",
                "cpu": "26 runs, ~26 min",
                "long": "28 runs (L = 3, r = 2 and 4, none vs concat, 3k ... 100k steps), 73 min on 2 cores (measured)",
                "paper": "90 runs x 200k steps (GPU)",
                "gpu": "4 deciding runs at the paper's size x 2k steps, ~80 s on one H200 (measured step cost)",
            },
        ),
        Preset(
            "random-features",
            "Appendix: random rank-1 heads with optimal output weights (no training)",
            "random-features",
            _scales(_random_features),
            _RF_PAPER,
            CLAIMS["random-features"].statement,
            {"quick": "4 solves, seconds", "cpu": "12 solves, minutes", "paper": "20 solves at H = 2^14"},
        ),
        Preset(
            "icl",
            "In-context linear regression (Garg et al.) at fixed H = D / r (GPT-2-style model of width D)",
            "icl",
            _scales(_icl, (*SCALES, LONG, GPU)),
            (),
            CLAIMS["icl"].statement,
            {
                "quick": "3 runs, ~6 min",
                "cpu": "8 runs, ~40 min",
                "long": "14 runs (r = 32 and r = 1 at 1.5k ... 15k steps), 40 min on 2 cores (measured)",
                "paper": "12 runs x 500k steps (GPU)",
                "gpu": "4 deciding runs at the paper's size x 400 steps, ~80 s on one H200 (measured step cost)",
            },
        ),
        Preset(
            "bound-vs-trained",
            "One-layer models on Theorem 2's task next to rank_lower_bound",
            "bound-vs-trained",
            _scales(_bound_vs_trained),
            (),
            CLAIMS["bound-vs-trained"].statement,
            {"quick": "6 runs, ~1-2 min", "cpu": "24 runs, 23 min (measured)", "paper": "63 runs (GPU)"},
        ),
        Preset(
            "conjecture6",
            "Conjecture 6: deep low-rank models as N grows (nearest neighbour)",
            "conjecture6",
            _scales(_conjecture6, (*SCALES, LONG, GPU)),
            (),
            CLAIMS["conjecture6"].statement,
            {
                "quick": "8 runs, ~4 min",
                "cpu": "12 runs, ~28 min",
                "long": "36 runs (N = 8 and 32, r = 1 and 16, 2k ... 100k steps at T = 128; 20k at T = 1), "
                "3.4 h on 2 cores (measured: ladder 2.8 h, control 40 min)",
                "paper": "45 runs (GPU)",
                "gpu": "8 deciding runs at the paper's size x 1.5k steps, ~80 s on one H200 (measured step cost)",
            },
        ),
        Preset(
            "depth",
            "Theorem 5 in training: two-layer rank-1 models with positional scratch vs one layer and the bounds",
            "depth",
            _scales(_depth),
            (),
            CLAIMS["depth"].statement,
            {
                "quick": "12 runs, ~3 min (176 s, load 6)",
                "cpu": "66 runs (30 + 36 starting-point arms), ~33 + ~25 min",
                "paper": "145 runs x 20k steps",
            },
        ),
        Preset(
            "tightness",
            "How tight is Theorem 2: the certified bound vs the best one-layer rank-r attention found",
            "tightness",
            _scales(_tightness),
            (),
            CLAIMS["tightness"].statement,
            {
                "quick": "62 runs (d = 8, 16; H <= 128), 34 s + 6 s report (measured, idle machine, 2 workers)",
                "cpu": "163 runs (d = 8, 16, 32; H <= 1024), ~40 min",
                "paper": "GPU",
            },
        ),
        Preset(
            "smoke",
            "Plumbing test: six tiny runs of a few seconds each",
            "fig1",
            _scales(_smoke, ("quick",)),
            (),
            "none (tests the sweep machinery)",
            {"quick": "6 runs, seconds"},
        ),
    )
}


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (ValueError lists the allowed names)."""
    return PRESETS[check_choice("preset", name, tuple(PRESETS))]


def rank_class(config: TrainConfig) -> str:
    """'full' (r = d), 'half' (r = d/2) or 'low' (r <= d/4) (other ranks: 'other')."""
    if config.rank == config.d:
        return "full"
    if 2 * config.rank == config.d:
        return "half"
    return "low" if 4 * config.rank <= config.d else "other"


def with_overrides(specs: Sequence[RunSpec], overrides: Mapping[str, Any]) -> list[RunSpec]:
    """The specs with fields replaced (TrainConfig fields only; e.g. steps for a reduced GPU schedule)."""
    out: list[RunSpec] = []
    for spec in specs:
        if isinstance(spec, TrainConfig):
            unknown = sorted(set(overrides) - set(spec.to_dict()))
            if unknown:
                raise ValueError(f"unknown override key(s): {', '.join(unknown)}")
            out.append(TrainConfig.from_dict({**spec.to_dict(), **overrides}))
        else:
            out.append(replace(spec))
    return out
