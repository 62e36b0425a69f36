"""Theorem 3's full-rank upper bound: one full-rank head per biased nearest-neighbour summand (M = 2 d^2 + 1 heads).

docs/paper.md section 4; the target and our assumptions (Gaussian query, D_2 keys, b_j = j delta, unnormalised sum)
are in theory/biased_target.py.

Head j (single-layer layout of constructions/weights_io.py, with score_bias):
    Q_j = K_j = I_d (rank d), V_j = I_d, score_bias[j] = (-b_j / 2, +b_j / 2).
Scores: T (<y, x_1> - b_j / 2) and T (<y, x_2> + b_j / 2); their difference is T (<x_1 - x_2, y> - b_j) = T (s - b_j),
so the softmax weight on x_1 is sigmoid(T (s - b_j)) and head j outputs x_2 + sigmoid(T (s - b_j)) z, z = x_1 - x_2.
Hardmax (T = inf) reproduces f_{b_j} exactly (ties s = b_j have probability 0), so the M heads sum to F exactly.

Error at temperature T: F_T - F = z D(s), D(s) = sum_j [sigmoid(T (s - b_j)) - 1{s > b_j}], hence
E ||F_T - F||^2 = E[||z||^2 D(s)^2] with s | z ~ N(0, ||z||^2): a one-dimensional Gaussian integral under D_2
(||z||^2 = 2), computed by graded Gauss-Legendre quadrature (`predicted_error`). When 1/T << delta the boundary layers
do not overlap and E ||F_T - F||^2 ~ E||z||^2 sum_j p_s(b_j) int (sigmoid(T u) - 1{u > 0})^2 du
= 2 (2 ln 2 - 1) / T sum_j p_s(b_j) ~ 2 (2 ln 2 - 1) / (T delta) (Riemann sum; `asymptotic_error`).

Weight-norm budget (the quantity of Theorem 3): d H max_j ||V_j||^2 = d M = d (2 d^2 + 1), polynomial in d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit, roots_jacobi

from constructions.weights_io import save_weights
from theory.biased_target import BiasGrid, bias_grid, gaussian_expectation
from theory.sphere import KEY_KINDS
from theory.validation import (
    check_array,
    check_choice,
    check_dimension,
    check_instance,
    check_output_file,
    check_temperature,
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class BiasedConstruction:
    """The M-head full-rank construction.

    Attributes:
        Q: (M, d, d) identity query maps.
        K: (M, d, d) identity key maps.
        V: (M, d, d) identity value maps.
        score_bias: (M, 2) rows (-b_j / 2, +b_j / 2).
        temperature: inverse temperature (inf = hardmax).
        grid: the bias grid.
    """

    Q: FloatArray
    K: FloatArray
    V: FloatArray
    score_bias: FloatArray
    temperature: float
    grid: BiasGrid

    def __post_init__(self) -> None:
        for name in ("Q", "K", "V"):
            object.__setattr__(self, name, check_array(name, getattr(self, name), ndim=3))
        object.__setattr__(self, "score_bias", check_array("score_bias", self.score_bias, ndim=2))
        object.__setattr__(self, "temperature", check_temperature(self.temperature))
        check_instance("grid", self.grid, BiasGrid)

    @property
    def d(self) -> int:
        return int(self.Q.shape[2])

    @property
    def heads(self) -> int:
        return int(self.Q.shape[0])

    @property
    def budget(self) -> float:
        """d H max_h ||V_h||^2 (spectral norm), Theorem 3's weight-norm quantity."""
        norms = np.linalg.norm(self.V, ord=2, axis=(1, 2))  # (H,)
        return float(self.d * self.heads * np.max(norms) ** 2)


def build_biased_construction(
    d: int, temperature: float = math.inf, grid: BiasGrid | None = None
) -> BiasedConstruction:
    """Weights of the full-rank construction (one head per bias).

    Args:
        d: ambient dimension (>= 2).
        temperature: inverse temperature (> 0; inf = hardmax).
        grid: the bias grid (default `bias_grid(d)`, 2 d^2 + 1 biases).

    Returns:
        BiasedConstruction.
    """
    d = check_dimension(d)
    temperature = check_temperature(temperature)
    grid = bias_grid(d) if grid is None else grid
    if not isinstance(grid, BiasGrid):
        raise ValueError(f"grid must be a BiasGrid or None, got {type(grid).__name__}")
    M = grid.count
    eye = np.broadcast_to(np.eye(d), (M, d, d)).copy()  # (M, d, d)
    biases = grid.biases  # (M,)
    score_bias = np.stack([-0.5 * biases, 0.5 * biases], axis=1)  # (M, 2): score difference x_1 - x_2 is s - b_j
    return BiasedConstruction(
        Q=eye, K=eye.copy(), V=eye.copy(), score_bias=score_bias, temperature=temperature, grid=grid
    )


def _error_given_zeta(zeta: float, temperature: float, grid: BiasGrid) -> float:
    biases = grid.biases  # (M,)

    def squared_defect(s: FloatArray) -> FloatArray:
        shifted = s[:, None] - biases[None, :]  # (P, M)
        defect = np.sum(expit(temperature * shifted) - (shifted > 0), axis=1)  # (P,)
        return zeta * defect * defect

    return gaussian_expectation(squared_defect, math.sqrt(zeta), grid, refine=1.0 / temperature)


def predicted_error(d: int, temperature: float, grid: BiasGrid | None = None, keys: str = "orthonormal") -> float:
    """E ||F_T - F||^2 of the construction at inverse temperature T, by quadrature (0 for hardmax).

    Args:
        d: ambient dimension (>= 2).
        temperature: inverse temperature (> 0; inf = hardmax).
        grid: the bias grid (default `bias_grid(d)`).
        keys: "orthonormal" (D_2, ||z||^2 = 2) or "iid" (||z||^2 = 2 (1 - t), Gauss-Jacobi over t).

    Returns:
        The error.
    """
    d = check_dimension(d)
    temperature = check_temperature(temperature)
    keys = check_choice("keys", keys, KEY_KINDS)
    grid = bias_grid(d) if grid is None else grid
    if math.isinf(temperature):
        return 0.0
    if keys == "orthonormal":
        return _error_given_zeta(2.0, temperature, grid)
    exponent = 0.5 * (d - 3)
    nodes, weights = roots_jacobi(32, exponent, exponent)  # (32,) over t = <x_1, x_2>
    weights = weights / np.sum(weights)
    errors = [_error_given_zeta(2.0 * (1.0 - t), temperature, grid) for t in nodes]  # (32,) given t
    return float(np.dot(weights, errors))


def asymptotic_error(d: int, temperature: float, grid: BiasGrid | None = None) -> float:
    """Large-T (1/T << delta) prediction 2 (2 ln 2 - 1) / T sum_j p_s(b_j), s ~ N(0, 2) (D_2).

    Args:
        d: ambient dimension (>= 2).
        temperature: finite inverse temperature (> 0).
        grid: the bias grid (default `bias_grid(d)`).

    Returns:
        The asymptotic error.
    """
    d = check_dimension(d)
    temperature = check_temperature(temperature)
    if math.isinf(temperature):
        return 0.0
    grid = bias_grid(d) if grid is None else grid
    density = np.exp(-0.25 * grid.biases**2) / math.sqrt(4.0 * math.pi)  # (M,) N(0, 2) density at the biases
    return 2.0 * (2.0 * math.log(2.0) - 1.0) / temperature * float(np.sum(density))


def save_biased_construction(path: str | Path, construction: BiasedConstruction, keys: str = "orthonormal") -> Path:
    """Write the construction as a single-layer weight file with score_bias (construction="biased", task="biased").

    Args:
        path: output file.
        construction: the weights.
        keys: the key law the predicted error refers to ("orthonormal" or "iid").

    Returns:
        The path written.
    """
    path = check_output_file("path", path)
    construction = check_instance(
        "construction", construction, BiasedConstruction, "a BiasedConstruction (from build_biased_construction)"
    )
    keys = check_choice("keys", keys, KEY_KINDS)
    c = construction
    error = predicted_error(c.d, c.temperature, c.grid, keys)
    metadata: dict[str, Any] = {
        "construction": "biased",
        "task": "biased",
        "d": c.d,
        "r": c.d,
        "H": c.heads,
        "N": 2,
        "temperature": c.temperature,
        "predicted_error": error,
        "bias_m": c.grid.m,
        "bias_delta": c.grid.delta,
        "keys": keys,
        "query": "gaussian",
        "normalisation": "sum",
        "layout": "single-layer",
    }
    tensors = {"Q": c.Q, "K": c.K, "V": c.V, "score_bias": c.score_bias}
    return save_weights(path, tensors, metadata)
