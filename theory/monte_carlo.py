"""Monte Carlo estimates with standard errors, the statistical yardstick of every check.

A check accepts a closed form x when it lies within z = 4 standard errors of an independent Monte Carlo mean; for a
normal sampling distribution that interval has coverage about 1 - 6.3e-5. Samples that arrive in batches go through
:class:`MeanAccumulator` (exact pairwise merging, never the cancelling sum-of-squares formula); samples held in memory
at once through :func:`estimate_mean`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from theory.validation import check_array, check_generator, check_int, check_real, check_sample_count

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


class MeanAccumulator:
    """Streaming sample mean and standard error, merged batch by batch (Chan, Golub and LeVeque's pairwise update).

    Holds (count, mean, sum of squared deviations M2) per component. A batch's own mean and M2 are computed in two
    passes; merging two sets of statistics (n_a, mean_a, M2_a) and (n_b, mean_b, M2_b) uses
    delta = mean_b - mean_a, mean = mean_a + delta n_b / n, M2 = M2_a + M2_b + delta^2 n_a n_b / n, which never
    subtracts two large sums: the sum-of-squares formula E[x^2] - E[x]^2 loses every digit of the variance once
    |mean| / spread exceeds 1 / sqrt(eps(float64)) ~ 7e7, this stays exact to a few ulps.

    Args:
        shape: shape of one sample (``()`` for scalars; ``(k,)`` for k quantities accumulated side by side).
    """

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        self.shape = tuple(check_int("shape entry", n, minimum=1) for n in shape)
        self.count = 0
        self._mean = np.zeros(self.shape, dtype=np.float64)
        self._squared_deviations = np.zeros(self.shape, dtype=np.float64)

    def add(self, values: Any) -> None:
        """Merge a batch of samples.

        Args:
            values: (m, *shape) finite samples (m >= 1).
        """
        batch = check_array("values", values, ndim=1 + len(self.shape))
        if batch.shape[1:] != self.shape or batch.shape[0] < 1:
            raise ValueError(f"values must have shape (m >= 1, {', '.join(map(str, self.shape))}), got {batch.shape}")
        m = batch.shape[0]
        batch_mean = np.mean(batch, axis=0)  # shape
        batch_m2 = np.sum((batch - batch_mean) ** 2, axis=0)  # shape
        total = self.count + m
        delta = batch_mean - self._mean
        self._mean = self._mean + delta * m / total
        self._squared_deviations = self._squared_deviations + (batch_m2 + delta * delta * self.count * m / total)
        self.count = total

    def _check_count(self) -> None:
        if self.count < 2:
            raise ValueError(f"at least 2 samples are needed to estimate a standard error, got {self.count}")

    def estimate(self) -> MonteCarloEstimate:
        """Mean and standard error (ddof = 1 sample variance) of a scalar stream."""
        if self.shape != ():
            raise ValueError(f"estimate() is for scalar samples; these have shape {self.shape}: use estimates()")
        self._check_count()
        variance = float(self._squared_deviations) / (self.count - 1)
        return MonteCarloEstimate(mean=float(self._mean), stderr=math.sqrt(variance / self.count), n_samples=self.count)

    def estimates(self) -> list[MonteCarloEstimate]:
        """One MonteCarloEstimate per component of a (k,)-shaped stream."""
        if len(self.shape) != 1:
            raise ValueError(f"estimates() is for samples of shape (k,), got {self.shape}")
        self._check_count()
        variance = self._squared_deviations / (self.count - 1)  # (k,)
        stderr = np.sqrt(variance / self.count)  # (k,)
        return [
            MonteCarloEstimate(mean=float(mu), stderr=float(se), n_samples=self.count)
            for mu, se in zip(self._mean, stderr, strict=True)
        ]


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

    Batch statistics are merged by :class:`MeanAccumulator`, so the variance does not suffer the cancellation of the
    sum-of-squares formula.

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
    n_samples = check_sample_count("n_samples", n_samples)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    rng = check_generator(rng)
    for name, function in (("model", model), ("target", target), ("sampler", sampler)):
        if not callable(function):
            raise ValueError(f"{name} must be callable, got {type(function).__name__}")
    accumulator = MeanAccumulator()
    while accumulator.count < n_samples:
        m = min(batch_size, n_samples - accumulator.count)
        X, y = sampler(m, rng)
        predicted = check_array("model output", model(X, y))
        expected = check_array("target output", target(X, y))
        if predicted.shape != expected.shape or predicted.ndim != 2 or predicted.shape[0] != m:
            raise ValueError(
                f"model and target must return arrays of the same shape (m, d_out) with m = {m}, "
                f"got {predicted.shape} and {expected.shape}"
            )
        accumulator.add(np.sum((predicted - expected) ** 2, axis=1))  # (m,) squared errors
    return accumulator.estimate()
