"""Theorem 2's certified bound against trained one-layer models (a study of ours; docs/paper.md section 3): one-layer
rank-r theory models trained on D_2 (nearest neighbour, N = 2, orthonormal keys), each run's fresh Monte Carlo error
beside `theory.bounds.rank_lower_bound` for its (d, r, H). No trained model may beat the bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.analysis.records import Record, evaluation
from experiments.figures.sweeps import BOUND_VS_TRAINED
from experiments.sweeps.grading import (
    Claim,
    Verdict,
    graded,
    not_evaluated,
)
from experiments.sweeps.preset_kit import (
    CPU,
    PAPER,
    QUICK,
    Preset,
    at_scales,
    divisors_pow2,
    grid,
)
from experiments.sweeps.run_specs import RunSpec

# --------------------------------------------------------------------------------------------------------------------
# Grids per scale.
# --------------------------------------------------------------------------------------------------------------------


def _bound_vs_trained(scale: str) -> list[RunSpec]:
    theorem = {"task": "nearest", "N": 2, "keys": "orthonormal", "model": "theory", "layers": 1}
    if scale == "quick":
        return list(grid({**theorem, **QUICK, "d": 16, "seed": 0}, width=(1, 4), rank=(16, 4, 1)))
    if scale == "cpu":
        return list(grid({**theorem, **CPU, "d": 32}, width=(1, 8), rank=divisors_pow2(32), seed=(0, 1)))
    return list(grid({**theorem, **PAPER, "d": 64}, width=(1, 8, 64), rank=divisors_pow2(64), seed=(0, 1, 2)))


# --------------------------------------------------------------------------------------------------------------------
# Claim.
# --------------------------------------------------------------------------------------------------------------------


def no_model_beats_bound(records: Sequence[Record]) -> Verdict:
    """bound-vs-trained: no trained one-layer model beats Theorem 2's certified lower bound.

    Rule (stated in advance). The claim is itself quantitative, so ``magnitude`` means "the theorem's inequality holds
    as a number": every trained error's upper end, mean + 4 standard errors of its population error (its bound
    record's ``consistent``), is at or above the certified lower end of ``rank_lower_bound`` for its (d, r, H).
    There is no weaker ordering to fall back to (a single model below its bound contradicts the theorem), so this
    predicate never grades ``direction``: any run below its bound at 4 s.e. is ``not reproduced``; no evaluated run
    is ``not evaluated``.
    """
    checks, parts, margins = [], [], []
    for r in records:
        found = evaluation(r)
        if found is not None and found.theorem2 is not None:
            bound, population = found.theorem2, found.population
            checks.append(bound.consistent)
            margins.append(population.error - bound.lower)
            parts.append(
                f"r={bound.r} H={bound.H}: {population.error:.3g} +- {population.stderr:.2g} "
                f"vs bound >= {bound.lower:.3g}"
            )
    if not checks:
        return not_evaluated("no evaluated runs")
    text = "; ".join(parts)
    return graded(all(checks), all(checks), text, smallest_margin=min(margins))


CLAIM = Claim(
    "no trained model beats the certified lower bound",
    no_model_beats_bound,
    "every trained error + 4 s.e. at or above its certified bound (the theorem holds as a number)",
    "not used: one model below its bound contradicts the theorem",
)


# --------------------------------------------------------------------------------------------------------------------
# Preset.
# --------------------------------------------------------------------------------------------------------------------


PRESET = Preset(
    name="bound-vs-trained",
    description="One-layer models on Theorem 2's task next to rank_lower_bound",
    figure=BOUND_VS_TRAINED,
    scales=at_scales(_bound_vs_trained),
    paper=(),
    expected={"quick": "6 runs, ~1-2 min", "cpu": "24 runs, 23 min (measured)", "paper": "63 runs (GPU)"},
    rule=CLAIM,
)


PRESETS = (PRESET,)
"""This module's presets, in the order `experiments.studies` lists them."""
