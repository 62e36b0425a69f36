"""The depth preset's claim predicate (`experiments.studies.depth.depth_trained`) on synthetic records."""

from __future__ import annotations

from typing import Any

from experiments.analysis.records import theory_heads
from experiments.studies import CLAIMS
from experiments.studies.depth import depth_trained
from experiments.sweeps.grading import Grade
from tests.run_records import evaluated
from theory.bounds import rank_lower_bound

D, P = 8, 8


def _run(layers: int, width: int, error: float, seed: int = 0, stderr: float = 0.001) -> dict[str, Any]:
    base: dict[str, Any] = {"model": "theory", "task": "nearest", "N": 2, "rank": 1, "d": D, "seed": seed}
    base.update(status="finished", layers=layers, width=width, positional_dim=P if layers == 2 else 0)
    if layers == 1:  # a one-layer run carries Theorem 2's bound beside its population error
        heads = width * D
        return {**base, **evaluated(error, stderr, bound=(D, 1, heads, rank_lower_bound(D, 1, heads).lower))}
    return {**base, **evaluated(error, stderr)}


def test_heads_per_layer() -> None:
    assert theory_heads(_run(2, 1, 0.1)) == 16 and theory_heads(_run(1, 2, 0.1)) == 16


def test_grades_follow_the_stated_rule() -> None:
    bound = rank_lower_bound(D, 1, 16).lower  # ~0.152
    one = _run(1, 2, 0.17)
    below = depth_trained([_run(2, 1, 0.03), one])
    assert below.grade is Grade.MAGNITUDE and below.numbers["best_bound_ratio"] < 1
    # Above the bound (4 s.e. included) but clearly below one layer: direction only.
    assert depth_trained([_run(2, 1, bound + 0.002), one]).grade is Grade.DIRECTION
    # Within 4 combined standard errors of one layer: not reproduced.
    assert depth_trained([_run(2, 1, 0.168), one]).grade is Grade.NOT_REPRODUCED
    # The 4 s.e. margin counts: a mean just below the bound with a wide standard error is not magnitude.
    assert depth_trained([_run(2, 1, bound - 0.001, stderr=0.01), _run(1, 2, 0.3)]).grade is Grade.DIRECTION


def test_direction_needs_most_head_counts() -> None:
    bound64 = rank_lower_bound(D, 1, 64).lower
    records = [_run(2, 1, 0.17), _run(1, 2, 0.17), _run(2, 4, bound64 + 0.01), _run(1, 8, 0.2)]
    assert depth_trained(records).grade is Grade.NOT_REPRODUCED  # 1 of 2 H is not more than half
    records.append(_run(2, 2, 0.15))
    records.append(_run(1, 4, 0.2))
    assert depth_trained(records).grade is Grade.DIRECTION  # 2 of 3


def test_not_evaluated_without_pairs_and_rules_stated() -> None:
    assert depth_trained([]).grade is Grade.NOT_EVALUATED
    assert depth_trained([_run(2, 1, 0.03)]).grade is Grade.NOT_EVALUATED
    assert depth_trained([{**_run(2, 1, 0.03), "status": "failed"}, _run(1, 2, 0.2)]).grade is Grade.NOT_EVALUATED
    claim = CLAIMS["depth"]
    assert claim.judge is depth_trained and claim.magnitude and claim.direction
    assert depth_trained.__doc__ is not None and "stated in advance" in depth_trained.__doc__
