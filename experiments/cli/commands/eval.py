"""`attnrank eval --weights FILE --task TASK --N N --samples S --seed K [--keys ...] [--json]`: Monte Carlo error."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from constructions.eval_tasks import EVAL_TASKS, get_task, task_options
from constructions.evaluate import fixed_context_length, weight_file_model
from constructions.weights_io import load_weights
from experiments.cli.arguments import temperature_argument
from experiments.cli.output import emit
from theory.monte_carlo import DEFAULT_Z, estimate_error
from theory.validation import check_int, check_temperature

_FLOAT_SLACK = 256 * np.finfo(np.float64).eps
"""Absolute tolerance (relative to max(1, predicted)) added to the 4-s.e. test: float64 rounding, not statistics."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    tasks = "; ".join(f"{name}: {task.description}" for name, task in EVAL_TASKS.items())
    parser = subparsers.add_parser(
        "eval",
        help="Monte Carlo error of any weight file on a task",
        description="Estimate E||f(X, y) - f*(X, y)||^2 of a weight file (single-layer files through the reference "
        "attention evaluator, multi-layer files through the multi-layer theory transformer) on fresh samples, with "
        f"its standard error, next to the file's predicted_error. Tasks: {tasks}.",
    )
    parser.add_argument("--weights", type=Path, required=True, help="a .safetensors weight file (attnrank construct)")
    parser.add_argument("--task", default="nearest", help=f"task name, one of {', '.join(EVAL_TASKS)}")
    parser.add_argument(
        "--N", type=int, default=None, help="context length (default: the file's N if it has one, else 2)"
    )
    parser.add_argument("--samples", type=int, default=100_000, help="Monte Carlo samples (>= 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of numpy.random.default_rng for the samples")
    parser.add_argument("--keys", default="orthonormal", help="key distribution: orthonormal (D_N) or iid")
    parser.add_argument(
        "--temperature",
        type=temperature_argument,
        default=None,
        help="override the file's inverse temperature (inf: hardmax)",
    )
    parser.add_argument("--batch-size", type=int, default=10_000, help="samples drawn per batch")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def evaluate_weight_file(
    path: str | Path,
    task: str = "nearest",
    N: int | None = None,
    samples: int = 100_000,
    seed: int = 0,
    keys: str = "orthonormal",
    temperature: float | None = None,
    batch_size: int = 10_000,
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

    Returns:
        dict with mse, stderr, predicted_error, n_samples and the evaluation's settings (docs/depth.md lists keys).
    """
    weights = load_weights(path)
    get_task(task)
    samples = check_int("samples", samples, minimum=2)
    seed = check_int("seed", seed, minimum=0)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if temperature is not None:
        temperature = check_temperature(temperature)
    metadata = weights.metadata
    file_N = metadata.get("N")
    fixed_N = fixed_context_length(weights)
    if N is None:
        N = int(file_N) if file_N is not None else 2
    N = check_int("N", N, minimum=1)
    if fixed_N is not None and N != fixed_N:
        raise ValueError(f"{path}: the weight file is built for N = {fixed_N} context tokens, but --N is {N}")
    file_task = metadata.get("task")
    if file_task is not None and file_task not in EVAL_TASKS:
        raise ValueError(f"{path}: the weight file names task {file_task!r}, which eval does not know")
    options = task_options(task, int(metadata["d"]), N, keys, metadata)
    spec = get_task(task)
    model = weight_file_model(weights, temperature)
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
    result: dict[str, Any] = {
        "mse": estimate.mean,
        "stderr": estimate.stderr,
        "predicted_error": predicted,
        "prediction_applies": applies,
        "n_samples": estimate.n_samples,
        "z": (estimate.mean - predicted) / max(estimate.stderr, floor) if comparable else math.nan,
        "within_4_stderr": bool(comparable and abs(estimate.mean - predicted) <= DEFAULT_Z * estimate.stderr + floor),
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
    return result


def run(args: argparse.Namespace) -> int:
    result = evaluate_weight_file(
        args.weights,
        task=args.task,
        N=args.N,
        samples=args.samples,
        seed=args.seed,
        keys=args.keys,
        temperature=args.temperature,
        batch_size=args.batch_size,
    )
    emit(result, as_json=args.json, title=f"Monte Carlo error of {args.weights} on task {args.task}")
    return 0
