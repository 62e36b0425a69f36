"""What a sweep worker does for a run of kind "least-squares-heads": draw the heads, fit, score, write result.json.

Loaded only by `experiments.sweeps.execute` (in pool workers); the metrics go back to the driver like a training
run's, with Theorem 2's certified bound for the same (d, r, H) beside the fresh error.
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
from theory.bounds import rank_lower_bound
from theory.monte_carlo import DEFAULT_Z


def _temperature_text(value: float) -> float | str:
    return "inf" if math.isinf(value) else value


def solve_least_squares_heads(spec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Solve one construction and write ``run_dir/result.json``.

    Returns:
        metrics: d, r, H, error and error_stderr (fresh Monte Carlo), n_samples, chosen_temperature, in_sample,
        validation (temperature -> error), bound_lower / bound_upper (`rank_lower_bound`), consistent (error + 4 s.e.
        >= bound lower end), weight_norm, and the sweep's common best_loss / final_loss (the fresh error), diverged
        (False) and seconds.
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
    bound = rank_lower_bound(construction.d, construction.r, construction.H)
    error, stderr = fitted.fresh.mean, fitted.fresh.stderr
    metrics: dict[str, Any] = {
        "d": construction.d,
        "r": construction.r,
        "H": construction.H,
        "error": error,
        "error_stderr": stderr,
        "n_samples": fitted.fresh.n_samples,
        "chosen_temperature": _temperature_text(fitted.temperature),
        "in_sample": fitted.in_sample,
        "validation": {str(_temperature_text(t)): e for t, e in fitted.validation.items()},
        "bound_lower": bound.lower,
        "bound_upper": bound.upper,
        "consistent": bool(error + DEFAULT_Z * stderr >= bound.lower),
        "weight_norm": float(np.linalg.norm(fitted.weights)),
        "best_loss": error,
        "final_loss": error,
        "diverged": False,
        "seconds": time.perf_counter() - started,
    }
    RunDirectory(run_dir).write_result(metrics)
    return metrics
