"""Monte Carlo estimates with standard errors, the statistical yardstick of every check.

A check accepts a closed form x when it lies within z = 4 standard errors of an independent Monte Carlo mean; for a
normal sampling distribution that interval has coverage about 1 - 6.3e-5.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from theory.validation import check_array, check_generator, check_int, check_real

FloatArray = npt.NDArray[np.float64]

DEFAULT_Z = 4.0
"""Width of the acceptance interval, in standard errors, used by all statistical checks."""


@dataclass(frozen=True)
class MonteCarloEstimate:
    """A sample mean with its standard error.

    Attributes:
        mean: the sample mean.
        stderr: the estimated standard error of the mean, sqrt(sample variance / n_samples).
        n_samples: the number of independent samples.
    """

    mean: float
    stderr: float
    n_samples: int

    def interval(self, z: float = DEFAULT_Z) -> tuple[float, float]:
        """The interval mean +- z standard errors.

        Args:
            z: half-width in standard errors (>= 0).

        Returns:
            (lo, hi).
        """
        z = check_real("z", z, minimum=0.0)
        return (self.mean - z * self.stderr, self.mean + z * self.stderr)

    def contains(self, x: float, z: float = DEFAULT_Z) -> bool:
        """Whether x lies within z standard errors of the mean.

        Args:
            x: the value to test (finite real).
            z: half-width in standard errors (>= 0).

        Returns:
            True when |x - mean| <= z * stderr.
        """
        x = check_real("x", x)
        lo, hi = self.interval(z)
        return lo <= x <= hi


def estimate_mean(values: Any) -> MonteCarloEstimate:
    """Sample mean and standard error of i.i.d. values.

    Args:
        values: (n,) finite samples, n >= 2.

    Returns:
        MonteCarloEstimate with ddof = 1 sample variance.
    """
    samples = check_array("values", values, ndim=1)
    n = samples.shape[0]
    if n < 2:
        raise ValueError(f"values must hold at least 2 samples to estimate a standard error, got {n}")
    return MonteCarloEstimate(
        mean=float(np.mean(samples)), stderr=float(np.std(samples, ddof=1) / math.sqrt(n)), n_samples=n
    )


def estimate_error(
    model: Callable[[FloatArray, FloatArray], Any],
    target: Callable[[FloatArray, FloatArray], Any],
    sampler: Callable[[int, np.random.Generator], tuple[FloatArray, FloatArray]],
    n_samples: int,
    rng: np.random.Generator,
    batch_size: int = 10000,
) -> MonteCarloEstimate:
    """Estimate E ||model(X, y) - target(X, y)||^2 (summed over coordinates) in memory-bounded batches.

    Batch statistics are merged with Chan et al.'s pairwise update of (count, mean, sum of squared deviations), so the
    variance does not suffer the cancellation of the sum-of-squares formula.

    Args:
        model: maps X (m, N, d), y (m, d) to (m, d_out).
        target: same signature and output shape as model.
        sampler: maps (m, rng) to (X, y) with m samples.
        n_samples: total number of samples (>= 2).
        rng: the source of randomness, passed to sampler.
        batch_size: largest batch drawn at once (>= 1).

    Returns:
        MonteCarloEstimate of the mean squared error.
    """
    n_samples = check_int("n_samples", n_samples, minimum=2)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    rng = check_generator(rng)
    for name, function in (("model", model), ("target", target), ("sampler", sampler)):
        if not callable(function):
            raise ValueError(f"{name} must be callable, got {type(function).__name__}")
    count = 0
    mean = 0.0
    squared_deviations = 0.0
    while count < n_samples:
        m = min(batch_size, n_samples - count)
        X, y = sampler(m, rng)
        predicted = check_array("model output", model(X, y))
        expected = check_array("target output", target(X, y))
        if predicted.shape != expected.shape or predicted.ndim != 2 or predicted.shape[0] != m:
            raise ValueError(
                f"model and target must return arrays of the same shape (m, d_out) with m = {m}, "
                f"got {predicted.shape} and {expected.shape}"
            )
        errors = np.sum((predicted - expected) ** 2, axis=1)  # (m,)
        batch_mean = float(np.mean(errors))
        batch_m2 = float(np.sum((errors - batch_mean) ** 2))
        total = count + m
        delta = batch_mean - mean
        mean += delta * m / total
        squared_deviations += batch_m2 + delta * delta * count * m / total
        count = total
    variance = squared_deviations / (count - 1)
    return MonteCarloEstimate(mean=mean, stderr=math.sqrt(variance / count), n_samples=count)
