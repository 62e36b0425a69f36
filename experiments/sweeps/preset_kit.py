"""The shared machinery of the sweep presets: the :class:`Preset` and :class:`PaperNumber` types, the scales, the
schedules every figure draws from, and the grid and budget-ladder helpers.

A preset names an experiment and holds, as objects: its run specs at each scale, its figure (:class:`Figure`: the
drawing function), its report sections of its own (:class:`ReportSection`), the paper's numbers to put beside ours and
how they are graded (`grading.CellRule`), and its claim. Each lives in one module of `experiments.studies` (one per
paper figure or study of ours), which also lists them; the report (`experiments.reporting.sweep_report`) only renders
what a preset holds.
Scales:

- ``quick``: minutes on 2 CPU cores; small d, short schedules; meant to show the qualitative finding only;
- ``cpu``: hours on a laptop; intermediate sizes;
- ``paper``: the paper's full schedule (d = 64, 100k steps, 5 seeds; a GPU is needed);
- ``long`` and ``gpu`` (some presets): budget ladders on the CPU, and the deciding cells at the paper's size for one
  GPU call.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from experiments.analysis.records import Record
from experiments.config import TrainConfig
from experiments.sweeps.grading import LOSS_CELLS, CellRule, Claim, PaperNumber, ScalingRule
from experiments.sweeps.run_specs import RunSpec
from theory.validation import check_choice

SCALES = ("quick", "cpu", "paper")
"""Scales every paper preset offers (the plumbing preset ``smoke`` has only ``quick``)."""
GPU = "gpu"
"""The multi-layer presets' deciding cells at the paper's sizes with fewer steps, sized for one ~10-minute call on one
H200 for all four presets together (`scripts/gpu_paper.sh`, `paper_deciding_cells`)."""
LONG = "long"
"""The compute-scaling scale of the multi-layer presets (fig1, posn, icl, conjecture6): each claim's deciding cells
trained at a ladder of budgets (`budget_ladder`), <= 150 min with 2 workers on 2 CPU cores (docs/scaling.md)."""


@dataclass(frozen=True)
class Figure:
    """A preset's figure: the drawing function and whether it also draws the paper's numbers.

    Attributes:
        name: the figure in a word (its kind; the preset-equivalence record names it).
        draw: ``(records, path, title) -> path``, or ``(records, path, title, paper=cells) -> path`` when
            ``takes_paper`` (a function of `experiments.figures`).
        takes_paper: whether ``draw`` takes the preset's published cells.
    """

    name: str
    draw: Callable[..., Path]
    takes_paper: bool = False

    def __post_init__(self) -> None:
        if not callable(self.draw):
            raise TypeError(f"figure {self.name!r}: draw must be a drawing function, got {type(self.draw).__name__}")


SECTION_PLACES = ("before-claim", "after-claim")
"""Where a preset's own section goes in its report: after the figure, or after the claim's grade."""


@dataclass(frozen=True)
class ReportSection:
    """A report section of a preset's own, beyond the ones every sweep gets.

    Attributes:
        name: the section in a word (the preset-equivalence record names it).
        render: ``(preset, records, out, scale) -> (markdown lines, figures written)`` (a function of
            `experiments.reporting`).
        place: where it goes (`SECTION_PLACES`): "before-claim" (after the figure) or "after-claim".
    """

    name: str
    render: Callable[[Preset, Sequence[Record], Path, str], tuple[list[str], list[Path]]]
    place: str = "before-claim"

    def __post_init__(self) -> None:
        if not callable(self.render):
            raise TypeError(f"section {self.name!r}: render must be a function, got {type(self.render).__name__}")
        check_choice("place", self.place, SECTION_PLACES)


@dataclass(frozen=True)
class Preset:
    """A sweep: run specs per scale, the figure it draws, its report sections, the paper's numbers and how they are
    graded, and the qualitative claim; each held as an object, checked when the preset is built.

    Attributes:
        name, description.  figure: its :class:`Figure` (None: no figure).  scales: scale -> spec builder.
        paper: the published numbers (may be empty: figd has none).  cell_rule: how they are graded against our runs
            (`grading.CellRule`: tolerance and ordering partner).  claim: the qualitative finding, in words (the
            statement of ``rule`` when there is one).
        expected: scale -> expected runtime and outcome in words (docs/sweeps.md).
        rule: the claim's grading rule (`experiments.sweeps.grading.Claim`), stated before any run; None for a
            preset that states no finding (smoke).
        scaling_rules: the long scale's deciding comparisons (`experiments.sweeps.grading.ScalingRule`).
        report_sections: the report sections of its own (:class:`ReportSection`; tightness: its bands).
        files_only: its runs are built from files when a sweep starts (``attnrank sweep --reference``): the preset
            names that sweep in a store and says how it is reported, and its one scale holds no runs of its own.
        paper_note: what the report says where the preset has no published numbers to compare.
    """

    name: str
    description: str
    figure: Figure | None
    scales: Mapping[str, Callable[[], list[RunSpec]]]
    paper: tuple[PaperNumber, ...] = ()
    cell_rule: CellRule = LOSS_CELLS
    claim: str = ""
    expected: Mapping[str, str] = field(default_factory=dict)
    rule: Claim | None = None
    scaling_rules: tuple[ScalingRule, ...] = ()
    report_sections: tuple[ReportSection, ...] = ()
    files_only: bool = False
    paper_note: str = "The paper publishes no numbers for this experiment; ours are the reference."

    def __post_init__(self) -> None:
        if self.rule is not None and not self.claim:
            object.__setattr__(self, "claim", self.rule.statement)
        if self.figure is not None and not isinstance(self.figure, Figure):
            raise TypeError(f"preset {self.name}: figure must be a Figure (a drawing function), got {self.figure!r}")
        for section in self.report_sections:
            if not isinstance(section, ReportSection):
                raise TypeError(f"preset {self.name}: report_sections must hold ReportSection objects, got {section!r}")
        if not isinstance(self.cell_rule, CellRule):
            raise TypeError(f"preset {self.name}: cell_rule must be a CellRule, got {self.cell_rule!r}")

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


# The gpu scale (`GPU`): each multi-layer preset's deciding cells at the paper's sizes with a preset's own step count
# (its module's GPU_STEPS): what about 80 s of one H200 trains for the preset's slowest deciding cell, at the step
# costs measured on one on 2026-12-04 (the per-step table of results/gpu-2026-12-04/README.md; eight processes sharing
# the GPU; icl's step is the slowest, fig1's the fastest). These costs are mostly overhead, not arithmetic (icl's step
# is ~0.3 TFLOP: ~6 ms at the H200's fp32 rate; fig1's far less), so the counts make a plumbing and throughput check
# more than a test of the claims. The paper trains 100k (fig1), 200k
# (posn), 100k (conjecture6) and 500k (icl) steps; the long scale (docs/scaling.md) measures what budgets do on the CPU.


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


def at_scales(
    builder: Callable[[str], list[RunSpec]], scales: Sequence[str] = SCALES
) -> dict[str, Callable[[], list[RunSpec]]]:
    """``scale -> builder(scale)`` for each of ``scales`` (a preset's ``scales`` field)."""
    return {s: functools.partial(builder, s) for s in scales}


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
