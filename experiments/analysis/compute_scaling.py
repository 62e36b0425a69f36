"""Compute scaling of the multi-layer claims: how a deciding cell's loss moves with the training budget, the fitted
law, and its projection (the verdicts of the rules are `experiments.sweeps.scaling_verdicts`).

Data: the long scale's runs (`experiments.sweeps.preset_kit.budget_ladder`): every deciding cell trained at several
budgets, each budget a run with its own warm-up + cosine schedule. A run contributes one point (n, L): n = steps x
batch size (samples seen), L = its best_loss (the paper's metric, the lowest epoch-mean training loss).

The law, fitted per cell to all of its runs (every seed of every budget):

    L(n) = floor + a n^(-b),   floor >= 0, a >= 0, 0 < b <= 2,

by least squares on log L (losses span decades; a multiplicative error model), with scipy's bounded trust-region
solver. Its covariance is s^2 (J^T J)^-1 at the optimum (s^2 the residual variance on m - 3 degrees of freedom, J the
Jacobian of the log residuals); a cell with fewer than 4 runs is not fitted. Projections and crossing budgets carry a
`SCALING_INTERVAL` interval from a parametric bootstrap: parameter vectors drawn from the normal law of the estimate
(clipped to the bounds), the projected quantity computed for each. With 4 to 7 points and 3 parameters these
intervals are wide, and they say so.

The rules' verdicts, which use these fits, are `experiments.sweeps.scaling_verdicts`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from experiments.analysis.records import Record

PAPER_SAMPLES = 100_000 * 256
"""The paper's training budget in samples seen: 100k steps of batch 256 (docs/paper.md section 6)."""
SCALING_INTERVAL = 0.90
"""Two-sided probability of the projection intervals (parametric bootstrap from the fit's covariance)."""
PROJECTION_LIMIT = 1000.0
"""Crossings are searched up to this many times the paper's budget (beyond it a projection means nothing)."""
BOOTSTRAP_DRAWS = 2000
MIN_RUNS_TO_FIT = 4
NEGLIGIBLE_FLOOR = 1e-6
"""A fitted floor at most this times the lowest loss fitted is at its bound 0 (`PowerLawFit.floor_at_bound`): it
changes no printed digit of any fitted loss."""

EXPONENT_BOUNDS = (0.05, 2.0)
"""The exponent b is kept in [0.05, 2]: below 0.05 a power law over a 33x ladder is a floor in disguise."""


def samples_seen(record: Record) -> int:
    """Samples a run trained on: steps x batch size."""
    return int(record["steps"]) * int(record["batch_size"])


def finished_points(records: Sequence[Record]) -> tuple[np.ndarray, np.ndarray]:
    """(n, L) of every finished run with a positive best_loss: samples seen and best loss, as arrays."""
    points = [
        (samples_seen(r), float(r["best_loss"]))
        for r in records
        if r.get("status") == "finished" and isinstance(r.get("best_loss"), (int, float)) and r["best_loss"] > 0
    ]
    n = np.array([p[0] for p in points], dtype=float)
    loss = np.array([p[1] for p in points], dtype=float)
    return n, loss


@dataclass(frozen=True)
class PowerLawFit:
    """L(n) = floor + amplitude n^(-exponent), fitted to a cell's runs (module docstring).

    Attributes:
        floor, amplitude, exponent: the estimate. covariance: (3, 3) of (floor, amplitude, exponent).
        runs: points fitted. rms_log_residual: root-mean-square residual of log L.
        smallest_loss: the lowest loss fitted (the scale against which a floor at its bound is judged).
    """

    floor: float
    amplitude: float
    exponent: float
    covariance: np.ndarray
    runs: int
    rms_log_residual: float
    smallest_loss: float = math.nan

    @property
    def floor_at_bound(self) -> bool:
        """Whether the floor sits at its bound 0: at most `NEGLIGIBLE_FLOOR` times the lowest loss fitted. Such a
        floor is where the solver stopped, not a measurement (its digits differ between machines: 7.38e-12 here,
        7.76e-12 there, issue 41), so reports print it as "0 (at its bound)" (:func:`floor_text`)."""
        return self.floor <= NEGLIGIBLE_FLOOR * self.smallest_loss

    def __call__(self, n: np.ndarray | float) -> np.ndarray:
        """The fitted loss at n samples."""
        return self.floor + self.amplitude * np.asarray(n, dtype=float) ** (-self.exponent)

    def draws(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """(count, 3) parameter vectors from the estimate's normal law, clipped to the bounds of the fit."""
        mean = np.array([self.floor, self.amplitude, self.exponent])
        covariance = self.covariance if np.all(np.isfinite(self.covariance)) else np.zeros((3, 3))
        # Symmetrised, with rounding-level negative eigenvalues set to 0, so that the normal law is defined.
        values, vectors = np.linalg.eigh((covariance + covariance.T) / 2)
        root = vectors * np.sqrt(np.clip(values, 0.0, None))  # (3, 3): covariance = root root^T
        sample = mean + rng.standard_normal((count, 3)) @ root.T  # (count, 3)
        sample[:, 0] = np.clip(sample[:, 0], 0.0, None)
        sample[:, 1] = np.clip(sample[:, 1], 0.0, None)
        sample[:, 2] = np.clip(sample[:, 2], *EXPONENT_BOUNDS)
        return sample


def fit_power_law(n: np.ndarray, loss: np.ndarray) -> PowerLawFit | None:
    """The law's least-squares fit on log L (module docstring), or None with fewer than `MIN_RUNS_TO_FIT` points."""
    if len(n) < MIN_RUNS_TO_FIT:
        return None
    # Parameters scaled for the solver: n in units of its largest value, so the amplitude is a loss.
    scale = float(n.max())
    x = n / scale

    def residuals(theta: np.ndarray) -> np.ndarray:
        floor, amplitude, exponent = theta
        return np.log(floor + amplitude * x ** (-exponent) + 1e-300) - np.log(loss)

    start = np.array([0.5 * loss.min(), max(loss.max() - 0.5 * loss.min(), 1e-6), 0.5])
    solution = least_squares(
        residuals,
        start,
        bounds=([0.0, 0.0, EXPONENT_BOUNDS[0]], [np.inf, np.inf, EXPONENT_BOUNDS[1]]),
        method="trf",
        x_scale="jac",
    )
    floor, amplitude_scaled, exponent = solution.x
    dof = max(len(n) - 3, 1)
    variance = float(np.sum(solution.fun**2)) / dof
    jacobian = solution.jac  # (m, 3)
    try:
        covariance_scaled = variance * np.linalg.pinv(jacobian.T @ jacobian)
    except np.linalg.LinAlgError:
        covariance_scaled = np.full((3, 3), np.nan)
    # Back to n in samples: a_scaled x^-b = a_scaled scale^b n^-b, so a = a_scaled scale^b.
    amplitude = amplitude_scaled * scale**exponent
    # Delta method for the change of variables (floor, a_scaled, b) -> (floor, a, b).
    transform = np.eye(3)
    transform[1, 1] = scale**exponent
    transform[1, 2] = amplitude * math.log(scale)
    covariance = transform @ covariance_scaled @ transform.T
    rms = float(np.sqrt(np.mean(solution.fun**2)))
    return PowerLawFit(float(floor), float(amplitude), float(exponent), covariance, len(n), rms, float(loss.min()))


def floor_text(fit: PowerLawFit) -> str:
    """The fitted floor for a report: "0 (at its bound)" when it sits there (`PowerLawFit.floor_at_bound`), else 3
    significant digits."""
    return "0 (at its bound)" if fit.floor_at_bound else f"{fit.floor:.3g}"


def bootstrap_interval(values: np.ndarray) -> tuple[float, float]:
    """The central `SCALING_INTERVAL` interval of bootstrap values, as order statistics (so infinite values, draws
    that never cross, give an infinite end instead of a nan)."""
    ordered = np.sort(np.asarray(values, dtype=float))  # inf sorts last
    tail = (1.0 - SCALING_INTERVAL) / 2.0
    last = len(ordered) - 1
    return float(ordered[int(math.floor(tail * last))]), float(ordered[int(math.ceil((1.0 - tail) * last))])
