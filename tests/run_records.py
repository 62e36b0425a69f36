"""Metric records for tests, built by the record's own types (`experiments.training.run_record`), never by hand."""

from __future__ import annotations

from typing import Any

from experiments.training.run_record import Evaluation, PopulationError, TheoremTwoBound


def evaluated(
    error: float, stderr: float = 0.001, samples: int = 20_000, *, bound: tuple[int, int, int, float] | None = None
) -> dict[str, Any]:
    """The evaluation keys of a record whose population error is ``error`` +- ``stderr``; with ``bound`` = (d, r, H,
    lower) also its bound record, the certified interval set to [lower, lower] and ``consistent`` computed."""
    population = PopulationError(error, stderr, samples)
    theorem2 = None
    if bound is not None:
        d, r, H, lower = bound
        theorem2 = TheoremTwoBound(d, r, H, lower, lower, True, population.upper >= lower)
    return Evaluation(population, theorem2).fields()
