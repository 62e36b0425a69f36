"""Fact 1 as weights: one full-rank head Q = lambda I, K = V = I solves nearest neighbour (docs/paper.md section 2).

The score of key x_i is lambda <y, x_i>, so the softmax concentrates on the nearest key as lambda grows and the output
sum_i w_i x_i tends to f*(X, y) = x_{argmax_i <x_i, y>} for every context length N wherever the maximiser is unique.
Hardmax (temperature = inf) picks exactly the nearest key: its error is 0 for every N. The predicted error stored in
the file is Fact 1's exact D_2 error (N = 2), ``theory.bounds.full_rank_error``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from constructions.weights_io import save_weights
from theory.bounds import full_rank_error
from theory.validation import check_dimension, check_output_file, check_temperature

FloatArray = npt.NDArray[np.float64]


def full_rank_head(d: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The single full-rank head: Q = K = V = I (the temperature lambda multiplies the scores at evaluation).

    Scores temperature * <Q y, K x_i> = lambda <y, x_i>: this is Q = lambda I with the scale carried by the
    temperature, so the same weights serve every lambda and hardmax.

    Args:
        d: dimension >= 2.
    Returns:
        (Q, K, V), each of shape (1, d, d) (H = 1 head of rank r = d).
    """
    d = check_dimension(d)
    eye = np.eye(d)[None, :, :]  # (1, d, d)
    return eye.copy(), eye.copy(), eye.copy()


def full_rank_metadata(d: int, temperature: float) -> dict[str, Any]:
    """Metadata of the full-rank weight file: single-layer layout fields plus task and N of the prediction.

    Args:
        d: dimension >= 2.  temperature: lambda > 0 or math.inf (hardmax).
    Returns:
        dict with construction, d, r, H, temperature, predicted_error (D_2, N = 2), task, N, keys.
    """
    d = check_dimension(d)
    temperature = check_temperature(temperature)
    return {
        "construction": "full-rank",
        "layout": "single-layer",
        "d": d,
        "r": d,
        "H": 1,
        "temperature": temperature,
        "predicted_error": full_rank_error(d, temperature),
        "task": "nearest",
        "N": 2,
        "keys": "orthonormal",
    }


def save_full_rank(path: str | Path, d: int, temperature: float = math.inf) -> Path:
    """Write the full-rank head as a single-layer weight file (constructions.weights_io).

    Args:
        path: output file.  d: dimension >= 2.  temperature: lambda > 0 or math.inf (hardmax, exact for every N).
    Returns:
        the path written.
    """
    path = check_output_file("path", path)  # before anything is computed
    metadata = full_rank_metadata(d, temperature)
    Q, K, V = full_rank_head(d)
    return save_weights(path, {"Q": Q, "K": K, "V": V}, metadata)
