"""Evaluate weight files through the reference evaluators: the numpy model of a file and its Monte Carlo error.

`weight_file_model` turns a loaded file into a model (X, y) -> (n, d); `evaluate_weight_file` scores a file on a task
of `constructions.eval_tasks` next to its predicted_error (what `attnrank eval` prints). Single-layer files
(full-rank, random-features, biased, ...) run through `theory.attention.multihead_attention` (with their
``score_bias`` if present); multi-layer files through `theory.multilayer.multilayer_forward` with the file's
``update`` mode. The model checks that X has the context length the file was built for when the file fixes one
(multi-layer files and files with a score bias).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from constructions.eval_tasks import EVAL_TASKS, get_task, task_options
from constructions.multilayer_layout import multilayer_from_tensors
from constructions.weights_io import WeightFile, check_weight_file, load_weights
from theory.attention import multihead_attention
from theory.monte_carlo import DEFAULT_Z, estimate_error
from theory.multilayer import multilayer_forward
from theory.validation import check_array, check_bool, check_int, check_sample_count, check_temperature

FloatArray = npt.NDArray[np.float64]
Model = Callable[[FloatArray, FloatArray], FloatArray]

_BATCH_ELEMENTS = 4_000_000

_FLOAT_SLACK = 256 * np.finfo(np.float64).eps
"""Absolute tolerance (relative to max(1, predicted)) added to the 4-s.e. test: float64 rounding, not statistics."""


def monte_carlo_resolution(stderr: float, n_samples: int, worst_error: float) -> float:
    """The smallest mean error an n-sample Monte Carlo estimate can tell apart from 0.

    Two limits: the statistical one, DEFAULT_Z standard errors; and the rare-event one, B / n with
    B = max(1, largest per-sample error seen): a mean error below B / n can come from errors of size B on a fraction
    of the inputs smaller than 1 / n, which the sample most likely does not contain at all (a softmax head at
    temperature 1e6 errs only within 1e-6 of the decision boundary). The standard error of such a sample says
    nothing about that error, so below the resolution `evaluate_weight_file` gives no z-score verdict.
    """
    return max(DEFAULT_Z * stderr, max(1.0, worst_error) / n_samples)


def fixed_context_length(weights: WeightFile) -> int | None:
    """The context length a file's tensors are built for (multi-layer codes, score biases), or None if any N works."""
    if weights.layout == "multi-layer" or "score_bias" in weights.tensors:
        return int(weights.metadata["N"])
    return None


def weight_file_model(weights: WeightFile, temperature: float | None = None) -> Model:
    """A model evaluating the weight file with the reference evaluator of its layout.

    Args:
        weights: a validated weight file (constructions.weights_io.load_weights).
        temperature: inverse temperature to run at; None uses the file's metadata temperature.

    Returns:
        model(X (n, N, d), y (n, d)) -> (n, d).
    """
    weights = check_weight_file("weights", weights)
    temperature = weights.temperature if temperature is None else check_temperature(temperature)
    fixed_N = fixed_context_length(weights)
    d = int(weights.metadata["d"])

    def check_inputs(X: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
        X = check_array("X", X, ndim=3)
        if X.shape[2] != d:
            raise ValueError(f"X must have token dimension d = {d} (the weight file's), got shape {X.shape}")
        if fixed_N is not None and X.shape[1] != fixed_N:
            raise ValueError(f"the weight file is built for N = {fixed_N} context tokens, got N = {X.shape[1]}")
        return X, check_array("y", y, shape=(X.shape[0], d))

    if weights.layout == "multi-layer":
        network = multilayer_from_tensors(weights.tensors)
        update = str(weights.metadata["update"])

        def multi_layer_model(X: FloatArray, y: FloatArray) -> FloatArray:
            X, y = check_inputs(X, y)
            return multilayer_forward(network, X, y, temperature=temperature, update=update)

        return multi_layer_model

    Q, K, V = weights.tensors["Q"], weights.tensors["K"], weights.tensors["V"]
    bias = weights.tensors.get("score_bias")
    heads, rank = Q.shape[0], Q.shape[1]

    def single_layer_model(X: FloatArray, y: FloatArray) -> FloatArray:
        X, y = check_inputs(X, y)
        n, N = X.shape[0], X.shape[1]
        batch = check_int("batch", max(1, _BATCH_ELEMENTS // max(1, heads * N * rank)), minimum=1)
        parts = [
            multihead_attention(Q, K, V, X[s : s + batch], y[s : s + batch], temperature=temperature, score_bias=bias)
            for s in range(0, n, batch)
        ]
        return np.concatenate(parts, axis=0) if parts else np.zeros((0, V.shape[1]))

    return single_layer_model


def metadata_mismatch(weights: WeightFile, task: str, N: int | None) -> str | None:
    """One line naming how the file's ``task`` / ``N`` metadata disagree with the requested task and N, or None.

    A file without those keys, or N = None (use the file's), never disagrees.
    """
    problems = []
    file_task = weights.metadata.get("task")
    if file_task is not None and str(file_task) != task:
        problems.append(f"task {file_task!r} (--task is {task!r})")
    file_N = weights.metadata.get("N")
    if file_N is not None and N is not None and int(file_N) != N:
        problems.append(f"N = {int(file_N)} (--N is {N})")
    if not problems:
        return None
    return f"the weight file is built for {' and '.join(problems)}"


def evaluate_weight_file(
    path: str | Path,
    task: str = "nearest",
    N: int | None = None,
    samples: int = 100_000,
    seed: int = 0,
    keys: str = "orthonormal",
    temperature: float | None = None,
    batch_size: int = 10_000,
    force: bool = False,
) -> dict[str, Any]:
    """Monte Carlo error of a weight file on a task, with the file's prediction and whether it applies.

    Args:
        path: weight file.
        task: a name in constructions.eval_tasks.EVAL_TASKS.
        N: context length (None: the file's N, else 2).
        samples: number of samples (>= 2).
        seed: sample seed (>= 0).
        keys: "orthonormal" or "iid".
        temperature: None (the file's) or an inverse temperature override.
        batch_size: samples per batch (>= 1).
        force: evaluate even if the file's task / N metadata disagree with ``task`` / ``N`` (otherwise a ValueError);
            the result then names the disagreement under ``metadata_mismatch``.

    Returns:
        dict with mse, stderr, predicted_error, n_samples and the evaluation's settings (docs/depth.md lists keys).
    """
    weights = load_weights(path)
    get_task(task)
    force = check_bool("force", force)
    samples = check_sample_count("samples", samples)
    seed = check_int("seed", seed, minimum=0)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if temperature is not None:
        temperature = check_temperature(temperature)
    metadata = weights.metadata
    file_N = metadata.get("N")
    fixed_N = fixed_context_length(weights)
    if N is not None:
        N = check_int("N", N, minimum=1)
    if fixed_N is not None and N is not None and N != fixed_N:
        raise ValueError(f"{path}: the weight file is built for N = {fixed_N} context tokens, but --N is {N}")
    mismatch = metadata_mismatch(weights, task, N)
    if mismatch is not None and not force:
        raise ValueError(f"{path}: {mismatch}; --force evaluates it anyway")
    if N is None:
        N = int(file_N) if file_N is not None else 2
    file_task = metadata.get("task")
    if file_task is not None and file_task not in EVAL_TASKS:
        raise ValueError(f"{path}: the weight file names task {file_task!r}, which eval does not know")
    options = task_options(task, int(metadata["d"]), N, keys, metadata)
    spec = get_task(task)
    file_model = weight_file_model(weights, temperature)
    worst = [0.0]  # the largest per-sample squared error seen (for the resolution below)

    def model(X: FloatArray, y: FloatArray) -> FloatArray:
        output = file_model(X, y)
        errors = np.sum((output - spec.target(X, y, options)) ** 2, axis=1)  # (m,)
        if errors.size and np.all(np.isfinite(errors)):
            worst[0] = max(worst[0], float(np.max(errors)))
        return output

    estimate = estimate_error(
        model,
        lambda X, y: spec.target(X, y, options),
        lambda n, rng: spec.sampler(n, rng, options),
        samples,
        np.random.default_rng(seed),
        batch_size=batch_size,
    )
    used_temperature = weights.temperature if temperature is None else temperature
    applies = (
        (file_task is None or file_task == task)
        and (file_N is None or int(file_N) == N)
        and str(metadata.get("keys", keys)) == keys
        and used_temperature == weights.temperature
    )
    predicted = weights.predicted_error
    comparable = applies and math.isfinite(predicted)
    # Floating-point floor: an exact construction's per-sample error is rounding noise ~ (d eps)^2, far below this.
    floor = _FLOAT_SLACK * max(1.0, abs(predicted)) if comparable else math.nan
    resolution = monte_carlo_resolution(estimate.stderr, estimate.n_samples, worst[0])
    resolved = comparable and max(abs(predicted), estimate.mean) > resolution
    z: float | None = (estimate.mean - predicted) / max(estimate.stderr, floor) if comparable else math.nan
    within: bool | None = bool(comparable and abs(estimate.mean - predicted) <= DEFAULT_Z * estimate.stderr + floor)
    if comparable and not resolved:
        z, within = None, None  # no verdict: prediction and measurement both lie below what the sample resolves
    result: dict[str, Any] = {
        "mse": estimate.mean,
        "stderr": estimate.stderr,
        "predicted_error": predicted,
        "prediction_applies": applies,
        "n_samples": estimate.n_samples,
        "resolution": resolution,
        "resolved": resolved,
        "z": z,
        "within_4_stderr": within,
        "task": task,
        "N": N,
        "d": int(metadata["d"]),
        "keys": keys,
        "seed": seed,
        "temperature": used_temperature,
        "construction": metadata["construction"],
        "layout": weights.layout,
        "H": metadata["H"],
        "r": int(metadata["r"]),
    }
    if "prediction_scope" in metadata:
        result["prediction_scope"] = metadata["prediction_scope"]
    if weights.layout == "multi-layer":
        result["L"] = int(metadata["L"])
        result["p"] = int(metadata["p"])
        result["update"] = metadata["update"]
    if mismatch is not None:
        result["metadata_mismatch"] = mismatch
    return result
