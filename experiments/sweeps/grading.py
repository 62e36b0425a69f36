"""The shared grading machinery of the figure claims: grades, verdicts, seed spreads, claims and scaling rules.

Each figure module of `experiments.studies` states its claim as a :class:`Claim` (the statement in words, the
grade rules in words, and one predicate ``records -> Verdict``) and, where it has a long scale, its
:class:`ScalingRule` tuple. A record is one run's spec fields merged with its metrics
(`experiments.reporting.sweep_report.sweep_records`, or dictionaries built the same way). The sweep report, the paper
checks and hence `attnrank check` call these predicates and nothing else, so a claim is never judged two ways.

Grades (:class:`Grade`), decided by one rule per figure whose tolerance is stated in advance in its docstring:

- ``magnitude``: the paper's ratio or gap is reached (to the stated threshold or tolerance);
- ``direction``: only the ordering holds;
- ``not reproduced``: not even the ordering;
- ``not evaluated``: the records cannot decide (a configuration is missing).

The paper's cells (:class:`PaperNumber`) are graded against our runs by their preset's :class:`CellRule` in
:func:`compare`, the one grading of the report's paper-vs-ours table.

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
    """The rule shared by varying N and Conjecture 6 (`experiments.studies.fig_n`,
    `experiments.studies.conjecture6`): at the largest d the rank-1 / full-rank gap grows with N;
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


# --------------------------------------------------------------------------------------------------------------------
# The paper's published cells, graded against our runs (the report's paper-vs-ours table).
# --------------------------------------------------------------------------------------------------------------------


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


CELL_FACTOR = 1.25
"""Stated tolerance of a training-loss cell: the paper's values are read off log-scale figures, so a value within a
factor 1.25 of our seed spread counts as reached (``magnitude``)."""
CELL_ABSOLUTE = 0.03
"""Stated tolerance of an error cell (an error level, not a loss ratio: the random-feature plateaus): +-0.03 around
our spread over draws."""

Partner = Callable[[PaperNumber, Sequence[PaperNumber]], "tuple[str, dict[str, Any], tuple[float, float]] | None"]


def ordering_partner(
    number: PaperNumber, cells: Sequence[PaperNumber]
) -> tuple[str, dict[str, Any], tuple[float, float]] | None:
    """The cell the paper orders ``number`` against: (label, selector of our runs, the paper's range), or None.

    Concat is ordered against no encodings at the same depth (and back); full rank against rank d/2 (else low rank)
    with the same other fields; a lower rank against full rank at the same depth, width or N (any width when the cell
    names none).
    """
    where = dict(number.where)
    paper: list[PaperNumber] = []
    ours: dict[str, Any] = {}
    if where.get("positional") in ("concat", "none"):
        other = "none" if where["positional"] == "concat" else "concat"
        ours = {**where, "positional": other}
        paper = [
            c for c in cells if c.where.get("positional") == other and c.where.get("layers") == where.get("layers")
        ]
    elif where.get("rank_class") == "full":
        base = {k: v for k, v in where.items() if k != "rank_class"}
        for cls in ("half", "low"):
            ours = {**base, "rank_class": cls}
            paper = [c for c in cells if dict(c.where) == ours]
            if paper:
                break
    elif where.get("rank_class") in ("half", "low") or "rank" in where:
        base = {k: v for k, v in where.items() if k not in ("rank_class", "rank")}
        ours = {**base, "rank_class": "full"}
        paper = [
            c
            for c in cells
            if c.where.get("rank_class") == "full" and all(c.where.get(k) == v for k, v in base.items() if k in c.where)
        ]
    paper = [c for c in paper if c is not number]
    if not paper:
        return None
    label = " / ".join(c.label for c in paper)
    return label, ours, (min(c.value[0] for c in paper), max(c.value[1] for c in paper))


def no_partner(number: PaperNumber, cells: Sequence[PaperNumber]) -> None:
    """No cell to order against (random-feature cells: their ordering, the fall with H, is the claim's)."""
    return None


def _matches(record: Record, where: Mapping[str, Any]) -> bool:
    return all(record.get(k) == v for k, v in where.items() if v != "max")


@dataclass(frozen=True)
class CellRule:
    """How a preset's paper cells are graded against its runs, stated in advance (:func:`compare`).

    Attributes:
        reads: "best_loss" (training-loss cells: every matching run's best_loss, over seeds and configs) or
            "errors" (error cells: each matching draw's error at its largest H).
        factor: tolerance of a training-loss cell (a factor around our spread), or None.
        absolute: tolerance of an error cell (+- around our spread), or None.
        partner: the cell the paper orders a cell against, for ``direction`` (:func:`ordering_partner` or
            :func:`no_partner`).
        spread: how the report names our spread ("our seed spread", "our spread over draws").
    """

    reads: str = "best_loss"
    factor: float | None = CELL_FACTOR
    absolute: float | None = None
    partner: Partner = ordering_partner
    spread: str = "our seed spread"

    def values(self, number: PaperNumber, records: Sequence[Record]) -> list[float]:
        """Every matching finished run's value: its best_loss, or its error at the largest H."""
        matching = [r for r in records if r.get("status") == "finished" and _matches(r, number.where)]
        if self.reads == "errors":
            return [float(r["errors"][-1]) for r in matching if r.get("errors")]
        values = []
        for r in matching:
            loss = r.get("best_loss")
            if isinstance(loss, (int, float)) and not isinstance(loss, bool) and math.isfinite(loss):
                values.append(float(loss))
        return values

    def widened(self, ours: tuple[float, float]) -> tuple[tuple[float, float], str]:
        """Our spread widened by the stated tolerance, and the tolerance in words."""
        if self.absolute is not None:
            return (ours[0] - self.absolute, ours[1] + self.absolute), f"+-{self.absolute:g}"
        factor = self.factor if self.factor is not None else 1.0
        return (ours[0] / factor, ours[1] * factor), f"x{factor:g}"


LOSS_CELLS = CellRule()
"""The cell rule of the training presets: best_loss spreads, x1.25, ordered against the partner cell."""
ERROR_CELLS = CellRule(reads="errors", factor=None, absolute=CELL_ABSOLUTE, partner=no_partner,
                       spread="our spread over draws")  # fmt: skip
"""The cell rule of error levels (random features): the error at the largest H, +-0.03, no ordering partner."""


def value_text(value: float) -> str:
    """A number as the report prints it: 3 significant digits, "nan" for a non-finite one."""
    return "nan" if not math.isfinite(value) else f"{value:.3g}"


def range_text(pair: tuple[float, float] | None) -> str:
    """A (low, high) spread as the report prints it: "low - high", one number when equal, "-" for None."""
    if pair is None:
        return "-"
    return value_text(pair[0]) if pair[0] == pair[1] else f"{value_text(pair[0])} - {value_text(pair[1])}"


@dataclass(frozen=True)
class Comparison:
    """A row of the report's paper-vs-ours table.

    Attributes:
        label: the paper's cell. paper: its value (low, high). ours: our spread (min, max) over matching runs (seeds,
        draws, configurations), or None. runs: matching finished runs. grade: the cell's Grade (None: not run).
        verdict: the grade's reason in words.
    """

    label: str
    paper: tuple[float, float]
    ours: tuple[float, float] | None
    runs: int
    grade: Grade | None
    verdict: str


def compare(
    number: PaperNumber, records: Sequence[Record], cells: Sequence[PaperNumber] = (), rule: CellRule = LOSS_CELLS
) -> Comparison:
    """Grade one paper cell against our runs by its preset's cell rule (stated in advance).

    - ``magnitude``: the paper's value (or range) lies within our spread (min to max over the matching runs' seeds,
      draws and configurations), or within the rule's stated tolerance of it (x1.25 for training losses, +-0.03 for
      random-feature errors);
    - ``direction``: outside that, but the paper's ordering against the cell's partner (`CellRule.partner`: full
      rank vs rank d/2, lower rank vs full rank, concat vs none) holds between our spreads (no overlap, same side);
    - ``not reproduced``: outside, and the ordering is reversed, overlapping, or there is no partner to order against.
    """
    values = rule.values(number, records)
    low, high = number.value
    if not values:
        return Comparison(number.label, number.value, None, 0, None, "not run at this scale")
    ours = (min(values), max(values))
    where = rule.spread
    if ours[0] <= high and low <= ours[1]:
        return Comparison(number.label, number.value, ours, len(values), Grade.MAGNITUDE, f"paper within {where}")
    widened, tolerance = rule.widened(ours)
    if widened[0] <= high and low <= widened[1]:
        text = f"paper within the stated tolerance ({tolerance}) of {where}"
        return Comparison(number.label, number.value, ours, len(values), Grade.MAGNITUDE, text)
    offset = f"ours x{ours[0] / high:.2g} higher" if ours[0] > high else f"ours x{low / max(ours[1], 1e-300):.2g} lower"
    partner = rule.partner(number, cells)
    if partner is None:
        text = f"{offset}; no ordering partner for this cell"
        return Comparison(number.label, number.value, ours, len(values), Grade.NOT_REPRODUCED, text)
    label, selector, paper_partner = partner
    partner_values = rule.values(PaperNumber(label, paper_partner, selector), records)
    if not partner_values:
        text = f"{offset}; partner '{label}' not run at this scale"
        return Comparison(number.label, number.value, ours, len(values), Grade.NOT_REPRODUCED, text)
    if low <= paper_partner[1] and paper_partner[0] <= high:
        text = f"{offset}; the paper's values do not order this cell against '{label}'"
        return Comparison(number.label, number.value, ours, len(values), Grade.NOT_REPRODUCED, text)
    above = low > paper_partner[1]
    holds = ours[0] > max(partner_values) if above else ours[1] < min(partner_values)
    relation = "above" if above else "below"
    partner_range = range_text((min(partner_values), max(partner_values)))
    text = f"{offset}; the paper's ordering ({relation} '{label}', ours {partner_range}) " + (
        "holds" if holds else "does not hold"
    )
    grade = Grade.DIRECTION if holds else Grade.NOT_REPRODUCED
    return Comparison(number.label, number.value, ours, len(values), grade, text)
