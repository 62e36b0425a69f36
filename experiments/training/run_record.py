"""The one metric record of a run, whatever its kind: what result.json, evaluation.json and a store row's ``metrics``
hold, with its one checked reader.

Every kind of run ends in the same record (:class:`RunRecord`), so every reader reads one set of keys:

- **the run's own outcome**: ``final_loss``, ``best_loss`` (its losses: a trained run's epoch-mean training loss; a
  solved construction's fresh error), ``diverged``, ``seconds``, and ``steps`` for a trained run;
- **the population error** (:class:`PopulationError`): ``population_error``, ``population_stderr`` and
  ``population_samples``, the mean error on samples no training or fitting saw, its standard error and the sample
  count. A trained run (a theory model, the encoder, an icl run) is scored by the one recipe of
  `experiments.training.evaluation`; a least-squares construction on the fresh sample of its own scoring
  (`experiments.sweeps.solve_least_squares`). Absent for a diverged run, a random-feature draw (its errors are exact,
  ``errors``) and runs stored before any evaluation existed;
- **one bound record** (:class:`TheoremTwoBound`, key ``theorem2``) where Theorem 2 speaks (a one-layer model on its
  own task, a least-squares construction): d, r, H, the certified interval [``bound_lower``, ``bound_upper``] of
  `theory.bounds.rank_lower_bound` (d, r, H), ``bound_applies`` (whether the model is in the class the bound holds
  for) and ``consistent`` (population error + 4 s.e. >= ``bound_lower``). It holds no error of its own: the error
  beside the bound is the record's population error;
- **the kind's own details** (:data:`DETAIL_FIELDS`): ``packed`` (a trained run of a pack), ``head_counts`` and
  ``errors`` (a random-feature draw), ``chosen_temperature``, ``in_sample``, ``validation`` and ``weight_norm`` (a
  least-squares construction).

:meth:`RunRecord.read` is the reader of every file and row that holds a record (result.json, a store row): each field
by type and range, the bound's ``consistent`` against the record's own numbers, and no field outside the record: a
record written before this schema (``error`` / ``error_stderr`` beside or inside ``theorem2``, a least-squares
run's bound at the top level) is refused naming the field and the migration (`experiments.sweeps.record_migration`,
``python scripts/migrate_records.py DIR``). :meth:`Evaluation.read` reads the evaluation alone (evaluation.json,
analysis.json, a merged sweep record). Errors are one line: ``field NAME must be ...``; the caller prefixes the file
or the row.

Torch-free, like the run directory that holds it (reports read records without loading torch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from experiments.config import TrainResult
from theory.monte_carlo import DEFAULT_Z, MonteCarloEstimate

POPULATION_KEYS = ("population_error", "population_stderr", "population_samples")
"""The keys of the population error in every record, store row and report."""
BOUND_KEY = "theorem2"
"""The key of the bound record."""
BOUND_FIELDS = ("d", "r", "H", "bound_lower", "bound_upper", "bound_applies", "consistent")
"""The fields of the bound record, in the order they are written."""
CORE_FIELDS = ("final_loss", "best_loss", "steps", "diverged", "seconds")
"""The run's own outcome (`experiments.config.TrainResult`); ``steps`` only for a trained run."""
LEGACY_FIELDS = ("error", "error_stderr", "n_samples", "error_upper_4se", "bound_lower", "bound_upper", "consistent")
"""Top-level fields of the records written before this schema (the depth runs' fresh error, a least-squares run's
bound), and the error fields ``theorem2`` held then: named by the refusal with the migration that upgrades them."""
MIGRATION_HINT = "a record from before the one metric record: upgrade it with `python scripts/migrate_records.py DIR`"
"""What a refusal of a legacy field tells the reader to do."""

_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
"""The strings `experiments.json_files.jsonable` writes for non-finite floats."""


def _number(name: str, value: Any, *, finite: bool = True, minimum: float | None = 0.0) -> float:
    """A record field that is a number (or "nan" / "inf" / "-inf" as written for non-finite floats)."""
    if isinstance(value, str) and value in _WORDS:
        number = _WORDS[value]
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"field {name} must be a number, got {value!r:.40}")
    else:
        number = float(value)
    if finite and not math.isfinite(number):
        raise ValueError(f"field {name} must be a finite number, got {number!r}")
    if minimum is not None and number < minimum:
        raise ValueError(f"field {name} must be >= {minimum:g}, got {number!r}")
    return number


def _integer(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"field {name} must be an integer >= {minimum}, got {value!r:.40}")
    return value


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"field {name} must be true or false, got {value!r:.40}")
    return value


def _object(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"field {name} must be a JSON object, got {type(value).__name__}")
    return value


def _unknown(name: str, allowed: tuple[str, ...]) -> ValueError:
    """The refusal of a field outside the record: a legacy one names the migration."""
    if name.split(".")[-1] in LEGACY_FIELDS:
        return ValueError(f"field {name} is not in the run record ({MIGRATION_HINT})")
    return ValueError(f"field {name} is not in the run record (fields: {', '.join(allowed)})")


@dataclass(frozen=True)
class PopulationError:
    """A Monte Carlo estimate of the population error: mean, standard error, sample count."""

    error: float
    stderr: float
    samples: int

    @classmethod
    def of(cls, estimate: MonteCarloEstimate) -> PopulationError:
        return cls(float(estimate.mean), float(estimate.stderr), int(estimate.n_samples))

    @property
    def upper(self) -> float:
        """The estimate's upper end, mean + 4 standard errors (`theory.monte_carlo.DEFAULT_Z`)."""
        return self.error + DEFAULT_Z * self.stderr

    def fields(self) -> dict[str, float | int]:
        return {"population_error": self.error, "population_stderr": self.stderr, "population_samples": self.samples}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> PopulationError | None:
        """The population fields of ``data`` (all three, or none: None); ValueError naming a field."""
        present = [key for key in POPULATION_KEYS if key in data]
        if not present:
            return None
        if len(present) < len(POPULATION_KEYS):
            missing = next(key for key in POPULATION_KEYS if key not in data)
            raise ValueError(f"field {missing} is missing (the population fields come together: {present[0]} is set)")
        return cls(
            _number("population_error", data["population_error"]),
            _number("population_stderr", data["population_stderr"]),
            _integer("population_samples", data["population_samples"], 2),
        )


@dataclass(frozen=True)
class TheoremTwoBound:
    """Theorem 2's certified lower bound for a model's (d, r, H), beside the record's population error.

    Attributes:
        d, r, H: dimension, rank, heads of the one-layer model.
        lower, upper: the certified interval of `theory.bounds.rank_lower_bound` (d, r, H) (``bound_lower``,
            ``bound_upper``).
        applies: whether the bound holds for the model (a generalized attention: the theory model, a least-squares
            construction); the encoder's residual and FFN put it outside that class (``bound_applies``).
        consistent: population error + 4 s.e. >= lower.
    """

    d: int
    r: int
    H: int
    lower: float
    upper: float
    applies: bool
    consistent: bool

    @classmethod
    def certify(cls, d: int, r: int, H: int, population: PopulationError, *, applies: bool) -> TheoremTwoBound:
        """The bound for (d, r, H) beside ``population``: the one place a record's bound is computed."""
        from theory.bounds import rank_lower_bound  # sympy and scipy (~1.7 s): loaded by writers only, not readers

        bound = rank_lower_bound(d, r, H)
        return cls(d, r, H, bound.lower, bound.upper, applies, bool(population.upper >= bound.lower))

    def fields(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "r": self.r,
            "H": self.H,
            "bound_lower": self.lower,
            "bound_upper": self.upper,
            "bound_applies": self.applies,
            "consistent": self.consistent,
        }

    @classmethod
    def read(cls, data: Any, population: PopulationError | None) -> TheoremTwoBound:
        """The bound record ``data`` (the value of ``theorem2``) beside the record's ``population``."""
        bound = _object(BOUND_KEY, data)
        for name in bound:
            if name not in BOUND_FIELDS:
                raise _unknown(f"{BOUND_KEY}.{name}", BOUND_FIELDS)
        missing = [name for name in BOUND_FIELDS if name not in bound]
        if missing:
            raise ValueError(f"field {BOUND_KEY}.{missing[0]} is missing")
        if population is None:
            raise ValueError(f"field {BOUND_KEY} needs the population error beside it (population_error is missing)")
        d, r, H = (_integer(f"{BOUND_KEY}.{name}", bound[name], 1) for name in ("d", "r", "H"))
        lower = _number(f"{BOUND_KEY}.bound_lower", bound["bound_lower"])
        upper = _number(f"{BOUND_KEY}.bound_upper", bound["bound_upper"])
        if upper < lower:
            raise ValueError(f"field {BOUND_KEY}.bound_upper must be >= bound_lower = {lower!r}, got {upper!r}")
        applies = _boolean(f"{BOUND_KEY}.bound_applies", bound["bound_applies"])
        consistent = _boolean(f"{BOUND_KEY}.consistent", bound["consistent"])
        if consistent != (population.upper >= lower):
            raise ValueError(
                f"field {BOUND_KEY}.consistent must be {not consistent} for population_error + 4 s.e. = "
                f"{population.upper!r} against bound_lower = {lower!r}, got {consistent}"
            )
        return cls(d, r, H, lower, upper, applies, consistent)


@dataclass(frozen=True)
class Evaluation:
    """A model's population error, and Theorem 2's bound beside it where it applies."""

    population: PopulationError
    theorem2: TheoremTwoBound | None = None

    def fields(self) -> dict[str, Any]:
        """The record's evaluation keys: the population fields, and ``theorem2`` where there is a bound."""
        data: dict[str, Any] = self.population.fields()
        if self.theorem2 is not None:
            data[BOUND_KEY] = self.theorem2.fields()
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Evaluation | None:
        """The evaluation keys of ``data`` (a record, evaluation.json, analysis.json, or a sweep record: its other
        keys are not looked at), or None when it holds no population error; ValueError naming the field."""
        population = PopulationError.read(data)
        bound = data.get(BOUND_KEY)
        if population is None and bound is None:
            return None
        theorem2 = None if bound is None else TheoremTwoBound.read(bound, population)
        assert population is not None  # a bound without one was refused
        return cls(population, theorem2)


def _check_pack_size(name: str, value: Any) -> None:
    _integer(name, value, 1)


def _check_counts(name: str, value: Any) -> None:
    if not isinstance(value, list):
        raise ValueError(f"field {name} must be a list, got {type(value).__name__}")
    for index, count in enumerate(value):
        _integer(f"{name}[{index}]", count, 1)


def _check_errors(name: str, value: Any) -> None:
    if not isinstance(value, list):
        raise ValueError(f"field {name} must be a list, got {type(value).__name__}")
    for index, error in enumerate(value):
        _number(f"{name}[{index}]", error)


def _check_error(name: str, value: Any) -> None:
    _number(name, value)


def _check_temperature(name: str, value: Any) -> None:
    """An inverse temperature: a number > 0, or "inf" (hardmax)."""
    if value != "inf" and _number(name, value) <= 0:
        raise ValueError(f'field {name} must be > 0 or "inf", got {value!r:.40}')


def _check_validation(name: str, value: Any) -> None:
    """Temperature (as text: "0.25", "inf") -> validation error."""
    for key, error in _object(name, value).items():
        try:
            temperature = float(key)
        except ValueError:
            temperature = math.nan
        if not (temperature > 0):  # nan (not a number) included
            raise ValueError(f'field {name} must map temperatures > 0 (or "inf") to errors, got key {key!r:.40}')
        _number(f"{name}.{key}", error)


DETAIL_FIELDS: dict[str, Callable[[str, Any], None]] = {
    "packed": _check_pack_size,
    "head_counts": _check_counts,
    "errors": _check_errors,
    "chosen_temperature": _check_temperature,
    "in_sample": _check_error,
    "validation": _check_validation,
    "weight_norm": _check_error,
}
"""The fields a kind of run adds to the record, each with its check: ``packed`` (pack size >= 1, a trained run of a
pack), ``head_counts`` / ``errors`` (a random-feature draw: head counts >= 1, exact errors >= 0), and a least-squares
construction's ``chosen_temperature`` (> 0 or "inf"), ``in_sample`` (its fitting error), ``validation`` (temperature
-> error) and ``weight_norm``."""
RECORD_FIELDS = (*CORE_FIELDS, *POPULATION_KEYS, BOUND_KEY, *DETAIL_FIELDS)
"""Every field a record may hold."""


@dataclass(frozen=True)
class RunRecord:
    """One run's metric record (module docstring): its outcome, its evaluation, its kind's details."""

    final_loss: float
    best_loss: float
    diverged: bool
    seconds: float
    steps: int | None = None
    evaluation: Evaluation | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The record as written (non-finite losses are written as "nan" / "inf" by `experiments.json_files`)."""
        data: dict[str, Any] = {"final_loss": self.final_loss, "best_loss": self.best_loss}
        if self.steps is not None:
            data["steps"] = self.steps
        data.update(diverged=self.diverged, seconds=self.seconds)
        if self.evaluation is not None:
            data.update(self.evaluation.fields())
        data.update(self.details)
        return data

    @classmethod
    def read(cls, data: Any) -> RunRecord:
        """The record ``data``, checked: the losses, steps and divergence by `TrainResult.from_dict`'s rules (steps
        and diverged may be absent for a solved construction), the evaluation (:meth:`Evaluation.read`), the details
        by their checks (:data:`DETAIL_FIELDS`), and no other field; ValueError ``field NAME ...`` (one line)."""
        record = _object("record", data)
        for name in record:
            if name not in RECORD_FIELDS:
                raise _unknown(name, RECORD_FIELDS)
        missing = [name for name in ("final_loss", "best_loss", "seconds") if name not in record]
        if missing:
            raise ValueError(f"field {missing[0]} is missing")
        try:  # a solved construction records no steps (and may record no divergence)
            outcome = TrainResult.from_dict({"steps": 0, "diverged": False, **record})
        except ValueError as exc:
            raise ValueError(f"field {exc}") from None
        for name, check in DETAIL_FIELDS.items():
            if name in record:
                check(name, record[name])
        return cls(
            final_loss=outcome.final_loss,
            best_loss=outcome.best_loss,
            diverged=outcome.diverged,
            seconds=outcome.seconds,
            steps=outcome.steps if "steps" in record else None,
            evaluation=Evaluation.read(record),
            details={name: record[name] for name in DETAIL_FIELDS if name in record},
        )

    @classmethod
    def of(cls, result: TrainResult) -> RunRecord:
        """The record of a trained run's result (its ``extra``: the evaluation and, in a pack, ``packed``)."""
        return cls.read(result.to_dict())
