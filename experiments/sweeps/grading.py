"""The shared grading machinery of the figure claims: grades, verdicts, seed spreads, claims and scaling rules.

Each figure module of `experiments.sweeps.studies` states its claim as a :class:`Claim` (the statement in words, the
grade rules in words, and one predicate ``records -> Verdict``) and, where it has a long scale, its
:class:`ScalingRule` tuple. A record is one run's spec fields merged with its metrics
(`experiments.reporting.sweep_report.sweep_records`, or dictionaries built the same way). The sweep report, the paper
checks and hence `attnrank check` call these predicates and nothing else, so a claim is never judged two ways.

Grades (:class:`Grade`), decided by one rule per figure whose tolerance is stated in advance in its docstring:

- ``magnitude``: the paper's ratio or gap is reached (to the stated threshold or tolerance);
- ``direction``: only the ordering holds;
- ``not reproduced``: not even the ordering;
- ``not evaluated``: the records cannot decide (a configuration is missing).

Seed spread. Training claims use the paper's metric, a run's ``best_loss`` (its lowest epoch-mean training loss), and
compare the *claim-pessimistic* ends of each configuration's spread over seeds (:func:`seed_spread`): "A is below B"
holds when A's worst seed is below B's best seed, and a ratio B / A is B's best seed over A's worst seed. An ordering
or a ratio can therefore never be a seed accident; with one seed the spread is a single value.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.analysis.records import Record


class Grade(enum.Enum):
    """How far a claim is reproduced by our runs."""

    MAGNITUDE = "magnitude"
    """The paper's ratio or gap is reached (within the stated tolerance)."""
    DIRECTION = "direction"
    """Only the ordering holds."""
    NOT_REPRODUCED = "not reproduced"
    NOT_EVALUATED = "not evaluated"
    """Not enough runs to decide."""

    def at_least(self, other: Grade) -> bool:
        """True when this grade is ``other`` or better (magnitude > direction > not reproduced > not evaluated)."""
        return _RANK[self] >= _RANK[other]


_RANK = {Grade.NOT_EVALUATED: 0, Grade.NOT_REPRODUCED: 1, Grade.DIRECTION: 2, Grade.MAGNITUDE: 3}


@dataclass(frozen=True)
class Verdict:
    """A claim's judgement on our runs.

    Attributes:
        grade: the :class:`Grade`.
        explanation: one line with the numbers compared.
        numbers: named quantities behind the grade (e.g. ``worst_ratio``), for callers that report them.
    """

    grade: Grade
    explanation: str
    numbers: Mapping[str, float] = field(default_factory=dict)

    @property
    def holds(self) -> bool | None:
        """True when reproduced (magnitude or direction), False when not, None when not evaluated."""
        if self.grade is Grade.NOT_EVALUATED:
            return None
        return self.grade is not Grade.NOT_REPRODUCED


def graded(direction: bool, magnitude: bool, explanation: str, **numbers: float) -> Verdict:
    """MAGNITUDE when both hold, DIRECTION when only the ordering does, else NOT_REPRODUCED."""
    if direction and magnitude:
        grade = Grade.MAGNITUDE
    elif direction:
        grade = Grade.DIRECTION
    else:
        grade = Grade.NOT_REPRODUCED
    return Verdict(grade, explanation, dict(numbers))


def not_evaluated(explanation: str) -> Verdict:
    return Verdict(Grade.NOT_EVALUATED, explanation)


def finite_loss(record: Record) -> float | None:
    loss = record.get("best_loss")
    if record.get("status") != "finished" or isinstance(loss, bool) or not isinstance(loss, (int, float)):
        return None
    return float(loss) if math.isfinite(loss) else None


def seed_spread(records: Sequence[Record], keys: Sequence[str]) -> dict[tuple[Any, ...], tuple[float, float]]:
    """(best seed, worst seed) of ``best_loss`` per distinct value of ``keys`` (finished runs, finite losses only)."""
    spread: dict[tuple[Any, ...], tuple[float, float]] = {}
    for record in records:
        loss = finite_loss(record)
        if loss is None:
            continue
        key = tuple(record.get(k) for k in keys)
        low, high = spread.get(key, (math.inf, -math.inf))
        spread[key] = (min(low, loss), max(high, loss))
    return spread


def loss_ratio(above: float, below: float) -> float:
    """above / below, infinite when below is 0."""
    return above / below if below > 0 else math.inf


def fmt(value: float) -> str:
    return f"{value:.3g}"


def spread_text(pair: tuple[float, float]) -> str:
    return fmt(pair[0]) if pair[0] == pair[1] else f"{fmt(pair[0])}-{fmt(pair[1])}"


def lowest_grade(grades: Iterable[Grade]) -> Grade:
    """The lowest of ``grades`` (not evaluated < not reproduced < direction < magnitude)."""
    return min(grades, key=lambda g: _RANK[g])


@dataclass(frozen=True)
class Claim:
    """A figure's claim: the statement in words, its predicate, and the grade rules in words (stated in advance)."""

    statement: str
    judge: Callable[[Sequence[Record]], Verdict]
    magnitude: str = ""
    direction: str = ""
    extra_judges: tuple[tuple[str, Callable[[Sequence[Record]], Verdict]], ...] = ()
    """Further rules of the same figure that the long scale's score-temperature control also applies, as
    (name, predicate) (fig1: its rule at L = 3)."""


def gap_with_n(records: Sequence[Record], ratio_needed: float) -> Verdict:
    """The rule shared by varying N and Conjecture 6 (`experiments.sweeps.studies.fig_n`,
    `experiments.sweeps.studies.conjecture6`): at the largest d the rank-1 / full-rank gap grows with N;
    ``ratio_needed`` is the magnitude threshold at the largest N."""
    spread = seed_spread(records, ("d", "rank", "N"))
    if not spread:
        return not_evaluated("no finished runs")
    d = max(k[0] for k in spread)
    low = {k[2]: v for k, v in spread.items() if k[0] == d and k[1] == 1}
    full = {k[2]: v for k, v in spread.items() if k[0] == d and k[1] == d}
    both = sorted(set(low) & set(full))
    if len(both) < 2:
        return not_evaluated("needs r = 1 and full rank at two N or more")
    gaps = [low[n][0] - full[n][1] for n in both]  # (low's best seed) - (full's worst seed), per N
    n0, n1 = both[0], both[-1]
    grows = low[n1][0] > low[n0][1]  # low rank's best seed at the largest N above its worst seed at the smallest
    direction = grows and gaps[-1] > 0 and gaps[-1] > gaps[0]
    monotone = all(b > a for a, b in zip(gaps, gaps[1:], strict=False))
    ratio = loss_ratio(low[n1][0], full[n1][1])
    text = (
        f"r=1: {', '.join(f'N={n}: {spread_text(low[n])}' for n in sorted(low))}; full rank: "
        f"{', '.join(f'N={n}: {spread_text(full[n])}' for n in sorted(full))}; gap "
        f"{' / '.join(fmt(g) for g in gaps)} at N={'/'.join(str(n) for n in both)}"
        f"{' (widens monotonically)' if monotone else ''}; ratio at N={n1}: {fmt(ratio)}x "
        f"(magnitude needs a monotone gap and >= {ratio_needed:g}x)"
    )
    return graded(direction, monotone and ratio >= ratio_needed, text, ratio_at_largest_n=ratio, final_gap=gaps[-1])


# --------------------------------------------------------------------------------------------------------------------
# Compute scaling (the long scale, issue 18): each multi-layer claim's deciding comparison along a ladder of budgets.
# `experiments.sweeps.scaling_verdicts` fits and projects.
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingRule:
    """A multi-layer claim's deciding comparison, graded at every budget of the long scale and projected beyond it.

    ``worse`` is the cell the paper puts above (the larger loss), ``better`` the one below; both are selectors on run
    fields. At one budget (runs with equal ``steps``), with the seed spreads of best_loss (claim-pessimistic, as
    everywhere in this module):

    - ``direction``: worse's best seed > better's worst seed (and the extra condition, where there is one);
    - ``magnitude``: direction, worse's best seed / better's worst seed >= ``ratio``, and, when ``ceiling`` is set,
      better's worst seed <= ``ceiling``.

    The scaling verdict (`experiments.sweeps.scaling_verdicts.scaling_verdict`), from the runs of every budget, is one
    of: ``reaches magnitude at budget B`` (the smallest measured budget where it holds); ``projected to reach it at
    B'`` (fitting best_loss = floor + a n^-b, n = samples seen, to each cell's runs, the rule holds on the fitted
    curves from n = B' on, with a 90% interval); or ``flattens`` (the fitted curves level off before the rule holds:
    more of the same compute does not close the gap, so something else differs from the paper's set-up).
    """

    name: str
    statement: str
    worse: Mapping[str, Any]
    better: Mapping[str, Any]
    ratio: float
    ceiling: float | None = None
    paper: str = ""


def matches(record: Record, selector: Mapping[str, Any]) -> bool:
    """Whether a run's record has every field of ``selector`` (``rank_class``: "full" r = D, "one" r = 1)."""
    for key, wanted in selector.items():
        if key == "rank_class":
            width = record.get("embed_dim") or record.get("d")
            found = "full" if record.get("rank") == width else "one" if record.get("rank") == 1 else "other"
            if found != wanted:
                return False
        elif record.get(key) != wanted:
            return False
    return True


def scaling_rule_at_budget(rule: ScalingRule, records: Sequence[Record]) -> Verdict:
    """The rule's grade on the runs of one budget (the caller passes runs of equal ``steps``)."""
    worse = seed_spread([r for r in records if matches(r, rule.worse)], ())
    better = seed_spread([r for r in records if matches(r, rule.better)], ())
    if () not in worse or () not in better:
        return not_evaluated(f"{rule.name}: needs finished runs of both cells")
    worse_best, better_worst = worse[()][0], better[()][1]
    ratio = loss_ratio(worse_best, better_worst)
    direction = worse_best > better_worst
    magnitude = ratio >= rule.ratio and (rule.ceiling is None or better_worst <= rule.ceiling)
    ceiling = "" if rule.ceiling is None else f", ceiling {fmt(rule.ceiling)}"
    text = (
        f"{rule.name}: worse {spread_text(worse[()])} vs better {spread_text(better[()])}, ratio {fmt(ratio)}x "
        f"(magnitude needs >= {rule.ratio:g}x{ceiling})"
    )
    return graded(direction, direction and magnitude, text, ratio=ratio, better_worst=better_worst)
