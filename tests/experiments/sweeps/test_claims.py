"""The claim predicates: each grade (magnitude / direction / not reproduced / not evaluated) is reached by hand-made
records that just meet or just miss its stated threshold, so every rule can flip."""

from __future__ import annotations

import pytest

from experiments.studies import CLAIMS, PRESETS, judge
from experiments.studies.bound_vs_trained import no_model_beats_bound
from experiments.studies.conjecture6 import conjecture6_grows_with_n
from experiments.studies.fig1 import FIG1_MAGNITUDE_RATIO, fig1
from experiments.studies.fig_d import full_beats_low_every_d
from experiments.studies.fig_n import error_grows_with_n
from experiments.studies.icl import higher_rank_better
from experiments.studies.posn import concat_helps_deep_low_rank
from experiments.studies.random_features import random_features_plateau
from experiments.sweeps.grading import Grade, seed_spread
from tests.run_records import evaluated


def rec(**k: object) -> dict:
    return {"status": "finished", "d": 16, "N": 8, "width": 1, "layers": 1, **k}


def test_grade_order() -> None:
    assert Grade.MAGNITUDE.at_least(Grade.DIRECTION) and Grade.DIRECTION.at_least(Grade.DIRECTION)
    assert not Grade.NOT_REPRODUCED.at_least(Grade.DIRECTION)
    assert not Grade.NOT_EVALUATED.at_least(Grade.NOT_REPRODUCED)


def test_seed_spread_skips_unfinished_and_non_finite() -> None:
    records = [
        rec(rank=16, best_loss=0.2),
        rec(rank=16, best_loss=0.4),
        rec(rank=16, best_loss=float("nan")),
        rec(rank=16, best_loss=0.01, status="diverged"),
    ]
    assert seed_spread(records, ("rank",)) == {(16,): (0.2, 0.4)}


def test_fig1_grades() -> None:
    def two_seeds(full: tuple[float, float], low: tuple[float, float]) -> list[dict]:
        return [
            rec(rank=16, seed=0, best_loss=full[0]),
            rec(rank=16, seed=1, best_loss=full[1]),
            rec(rank=4, seed=0, best_loss=low[0]),
            rec(rank=4, seed=1, best_loss=low[1]),
        ]

    magnitude = fig1(two_seeds((0.01, 0.05), (0.5, 0.9)))  # worst ratio 0.5 / 0.05 = 10
    assert magnitude.grade is Grade.MAGNITUDE and magnitude.numbers["worst_ratio"] == pytest.approx(10.0)
    assert fig1(two_seeds((0.01, 0.051), (0.5, 0.9))).grade is Grade.DIRECTION  # 9.8x: only the ordering
    assert fig1(two_seeds((0.1, 0.55), (0.5, 0.9))).grade is Grade.NOT_REPRODUCED  # worst full seed above best low
    assert fig1([rec(rank=4, best_loss=0.5)]).grade is Grade.NOT_EVALUATED
    assert fig1(two_seeds((0.01, 0.05), (0.5, 0.9)), layers=3).grade is Grade.NOT_EVALUATED
    assert FIG1_MAGNITUDE_RATIO == 10.0


def test_fig1_every_lower_rank_counts() -> None:
    records = [rec(rank=16, best_loss=0.01), rec(rank=8, best_loss=0.5), rec(rank=1, best_loss=0.05)]
    verdict = fig1(records)
    assert verdict.grade is Grade.DIRECTION and verdict.numbers["worst_ratio"] == pytest.approx(5.0)


def _grows(low: list[float], full: list[float], ns: tuple[int, ...] = (2, 4, 8, 16)) -> list[dict]:
    return [rec(rank=1, N=n, best_loss=v) for n, v in zip(ns, low, strict=True)] + [
        rec(rank=16, N=n, best_loss=v) for n, v in zip(ns, full, strict=True)
    ]


@pytest.mark.parametrize("predicate", [error_grows_with_n, conjecture6_grows_with_n])
def test_gap_with_n_grades(predicate) -> None:  # type: ignore[no-untyped-def]
    assert predicate(_grows([0.1, 0.3, 0.5, 0.7], [0.05, 0.06, 0.08, 0.1])).grade is Grade.MAGNITUDE
    # the quick-scale shape: the gap widens overall but not at every step, and the ratio is 1.5x
    quick = _grows([0.107, 0.656, 0.752, 0.76], [0.068, 0.277, 0.37, 0.511])
    assert predicate(quick).grade is Grade.DIRECTION
    assert predicate(_grows([0.1, 0.3, 0.5, 0.7], [0.05, 0.06, 0.08, 0.15])).grade is Grade.DIRECTION  # 4.7x
    assert predicate(_grows([0.7, 0.6, 0.6, 0.6], [0.1, 0.1, 0.1, 0.1])).grade is Grade.NOT_REPRODUCED  # no growth
    # both grow but the gap shrinks: full rank does not "stay low"
    assert predicate(_grows([0.1, 0.7], [0.01, 0.65], (2, 16))).grade is Grade.NOT_REPRODUCED
    assert predicate([]).grade is Grade.NOT_EVALUATED
    assert predicate(_grows([0.1], [0.05], (2,))).grade is Grade.NOT_EVALUATED


def test_full_beats_low_every_d() -> None:
    learned = [rec(d=8, rank=8, best_loss=0.05), rec(d=8, rank=2, best_loss=0.6)]
    assert full_beats_low_every_d(learned).grade is Grade.MAGNITUDE  # 12x
    assert full_beats_low_every_d([learned[0] | {"best_loss": 0.2}, learned[1]]).grade is Grade.DIRECTION
    untrained = [*learned, rec(d=32, rank=32, best_loss=0.999), rec(d=32, rank=8, best_loss=1.0)]
    assert full_beats_low_every_d(untrained).grade is Grade.NOT_REPRODUCED  # neither learned at d = 32
    assert full_beats_low_every_d([learned[1]]).grade is Grade.NOT_EVALUATED


def test_concat_helps_deep_low_rank() -> None:
    def pos(L: int, p: str, loss: float) -> dict:
        return rec(rank=2, layers=L, positional=p, rank_class="low", best_loss=loss)

    assert concat_helps_deep_low_rank([pos(3, "concat", 0.005), pos(3, "none", 0.035)]).grade is Grade.MAGNITUDE
    assert concat_helps_deep_low_rank([pos(3, "concat", 0.5), pos(3, "none", 0.7)]).grade is Grade.DIRECTION
    assert concat_helps_deep_low_rank([pos(3, "concat", 0.8), pos(3, "none", 0.7)]).grade is Grade.NOT_REPRODUCED
    shallow = concat_helps_deep_low_rank(
        [pos(3, "concat", 0.5), pos(3, "none", 0.7), pos(1, "concat", 0.5), pos(1, "none", 0.7)]
    )
    assert shallow.holds is True and "unlike the paper" in shallow.explanation
    assert concat_helps_deep_low_rank([pos(3, "concat", 0.5)]).grade is Grade.NOT_EVALUATED


def test_higher_rank_better() -> None:
    def icl(*losses: tuple[int, float]) -> list[dict]:
        return [rec(d=8, rank=r, best_loss=v) for r, v in losses]

    assert higher_rank_better(icl((32, 0.3), (4, 0.5), (1, 0.8))).grade is Grade.MAGNITUDE
    assert higher_rank_better(icl((32, 0.732), (4, 0.765), (1, 0.837))).grade is Grade.DIRECTION  # quick: 1.14x
    assert higher_rank_better(icl((32, 0.3), (4, 0.9), (1, 0.8))).grade is Grade.DIRECTION  # not monotone
    assert higher_rank_better(icl((32, 0.9), (1, 0.8))).grade is Grade.NOT_REPRODUCED
    assert higher_rank_better(icl((32, 0.9))).grade is Grade.NOT_EVALUATED


def test_bound_never_direction() -> None:
    above = evaluated(0.3, 0.01, bound=(16, 1, 16, 0.2))  # 0.3 + 4 s.e. >= 0.2: consistent
    below = evaluated(0.15, 0.01, bound=(16, 1, 16, 0.2))  # 0.15 + 4 s.e. = 0.19 < 0.2: below its bound
    assert no_model_beats_bound([rec(**above)]).grade is Grade.MAGNITUDE
    assert no_model_beats_bound([rec(**below)]).grade is Grade.NOT_REPRODUCED
    assert no_model_beats_bound([rec()]).grade is Grade.NOT_EVALUATED


def test_random_features_plateau() -> None:
    def draw(d: int, trial: int, *errors: float) -> dict:
        return rec(d=d, trial=trial, head_counts=[1, 2, 4][: len(errors)], errors=list(errors))

    assert random_features_plateau([draw(16, 0, 0.7, 0.3, 0.2), draw(8, 0, 0.7, 0.3, 0.15)]).grade is Grade.MAGNITUDE
    off = random_features_plateau([draw(16, 0, 0.7, 0.3, 0.22), draw(16, 1, 0.7, 0.3, 0.22)])  # 0.04 off, no spread
    assert off.grade is Grade.DIRECTION and off.numbers["largest_offset"] == pytest.approx(0.04)
    spread = random_features_plateau([draw(16, 0, 0.7, 0.3, 0.20), draw(16, 1, 0.7, 0.3, 0.24)])  # 0.04 <= 0.03 + 0.04
    assert spread.grade is Grade.MAGNITUDE
    assert random_features_plateau([draw(16, 0, 0.5, 0.3, 0.05)]).grade is Grade.NOT_REPRODUCED  # below the floor
    assert random_features_plateau([]).grade is Grade.NOT_EVALUATED


def test_every_preset_claim_text_comes_from_its_predicate() -> None:
    for name, preset in PRESETS.items():
        if name in CLAIMS:
            assert preset.claim == CLAIMS[name].statement
        else:
            assert judge(name, []) is None


PAPER_FIGURES = ("fig1", "figN", "figd", "posn", "random-features", "icl", "bound-vs-trained", "conjecture6")


@pytest.mark.parametrize("name", PAPER_FIGURES)
def test_grade_rules_are_stated_in_advance(name: str) -> None:
    claim = CLAIMS[name]
    assert claim.magnitude and claim.direction
    assert claim.judge.__doc__ and "stated in advance" in claim.judge.__doc__
    assert claim.judge([]).grade is Grade.NOT_EVALUATED
