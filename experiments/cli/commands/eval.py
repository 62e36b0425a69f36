"""`attnrank eval --weights FILE --task TASK --N N --samples S --seed K [--force] [--json]`: Monte Carlo error.

The evaluation itself is `constructions.evaluate.evaluate_weight_file`; this module parses the flags and prints.
"""

from __future__ import annotations

import argparse

from constructions.eval_tasks import EVAL_TASKS
from constructions.evaluate import evaluate_weight_file
from constructions.weights_io import load_weights
from experiments.cli.arguments import check_memory, path_argument, temperature_argument
from experiments.cli.output import emit, warn
from theory.validation import check_int, check_sample_count


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    tasks = "; ".join(f"{name}: {task.description}" for name, task in EVAL_TASKS.items())
    parser = subparsers.add_parser(
        "eval",
        help="Monte Carlo error of any weight file on a task",
        description="Estimate E||f(X, y) - f*(X, y)||^2 of a weight file (single-layer files through the reference "
        "attention evaluator, multi-layer files through the multi-layer theory transformer) on fresh samples, with "
        f"its standard error, next to the file's predicted_error. Tasks: {tasks}.",
    )
    parser.add_argument(
        "--weights", type=path_argument, required=True, help="a .safetensors weight file (attnrank construct)"
    )
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
    parser.add_argument(
        "--force",
        action="store_true",
        help="evaluate even if the file's task / N metadata disagree with --task / --N (a warning on stderr)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def evaluation_bytes(weights_bytes: int, d: int, width: int, N: int, batch_size: int) -> float:
    """A rough estimate of the bytes an evaluation holds (float64).

    The file's tensors (loaded twice at most), one batch of contexts (batch_size, N, d) with its targets, outputs and
    streams of width D (multi-layer files), and the reference evaluators' per-head chunks (each evaluator splits a
    batch so that one chunk holds at most 4e6 scores).
    """
    return 2.0 * weights_bytes + 8.0 * (batch_size * (N + 1) * (6 * d + 6 * width) + 16 * 4_000_000)


def run(args: argparse.Namespace) -> int:
    samples = check_sample_count("--samples", args.samples)
    batch_size = check_int("batch_size", args.batch_size, minimum=1)
    check_int("seed", args.seed, minimum=0)
    if args.N is not None:
        check_int("N", args.N, minimum=1)
    weights = load_weights(args.weights)
    metadata = weights.metadata
    d = int(metadata["d"])
    width = d + int(metadata.get("p", 0)) if weights.layout == "multi-layer" else d
    N = args.N if args.N is not None else int(metadata.get("N", 2))
    size = sum(t.nbytes for t in weights.tensors.values())
    del weights
    estimate = evaluation_bytes(size, d, width, N, min(batch_size, samples))
    check_memory(estimate, "one batch of samples with the file's tensors", "--batch-size/--N")
    result = evaluate_weight_file(
        args.weights,
        task=args.task,
        N=args.N,
        samples=samples,
        seed=args.seed,
        keys=args.keys,
        temperature=args.temperature,
        batch_size=batch_size,
        force=args.force,
    )
    if "metadata_mismatch" in result:
        warn("eval", f"{result['metadata_mismatch']}; the prediction does not apply")
    emit(result, as_json=args.json, title=f"Monte Carlo error of {args.weights} on task {args.task}")
    return 0
