"""What a sweep worker does for a run of kind "least-squares-heads": draw the heads, fit, score, write result.json.

Loaded only by `experiments.sweeps.execute` (in pool workers); the metrics are the one metric record
(`experiments.training.run_record`) and go back to the driver like a training run's: the fresh error is the population
error, with Theorem 2's bound record for the same (d, r, H) beside it.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from constructions.random_rank_heads import fit_least_squares_heads, sample_rank_heads
from experiments.sweeps.least_squares_spec import LeastSquaresHeadsSpec
from experiments.training.run_directory import RunDirectory
from experiments.training.run_record import Evaluation, PopulationError, RunRecord, TheoremTwoBound


def _temperature_text(value: float) -> float | str:
    return "inf" if math.isinf(value) else value


def solve_least_squares_heads(spec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Solve one construction and write ``run_dir/result.json``.

    Returns:
        the run's record: best_loss and final_loss (both the fresh error), diverged (False), seconds; the population
        fields (the error on the fresh scoring sample, its standard error and size) and the bound record
        ``theorem2`` (`TheoremTwoBound.certify`: the construction is an H-head rank-r attention layer, so the bound
        applies); its details chosen_temperature, in_sample, validation (temperature -> error) and weight_norm.
    """
    construction = LeastSquaresHeadsSpec.from_dict(spec)
    started = time.perf_counter()
    rng = np.random.default_rng([construction.seed, construction.d, construction.r, construction.H, construction.draw])
    Q, K = sample_rank_heads(construction.d, construction.r, construction.H, rng)
    fitted = fit_least_squares_heads(
        Q,
        K,
        rng,
        temperatures=construction.temperatures,
        fit_samples=construction.fit_samples,
        validation_samples=construction.validation_samples,
        score_samples=construction.score_samples,
    )
    assert fitted.fresh is not None
    population = PopulationError.of(fitted.fresh)
    bound = TheoremTwoBound.certify(construction.d, construction.r, construction.H, population, applies=True)
    record = RunRecord(
        final_loss=population.error,
        best_loss=population.error,
        diverged=False,
        seconds=time.perf_counter() - started,
        evaluation=Evaluation(population, bound),
        details={
            "chosen_temperature": _temperature_text(fitted.temperature),
            "in_sample": fitted.in_sample,
            "validation": {str(_temperature_text(t)): e for t, e in fitted.validation.items()},
            "weight_norm": float(np.linalg.norm(fitted.weights)),
        },
    )
    metrics = record.to_dict()
    RunDirectory(run_dir).write_result(metrics)
    return metrics
