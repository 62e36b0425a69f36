"""`attnrank construct random-features --d D --heads H --seed S --out FILE`: random rank-1 heads, V_h = a_h I."""

from __future__ import annotations

import argparse

import numpy as np

from constructions.random_features import (
    DISTRIBUTIONS,
    OutputWeights,
    RandomFeatureConstruction,
    attention_weights_of,
    construct_random_features,
    random_features_metadata,
    sample_heads,
)
from constructions.random_features_in_sample import in_sample_errors
from constructions.weights_io import save_weights
from experiments.cli.arguments import check_memory, check_output_file, path_argument
from experiments.cli.output import emit
from theory.validation import check_dimension, check_heads, check_sample_count, check_seed


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "random-features",
        help="H random rank-1 hardmax heads with optimal output weights (paper, section 7)",
        description="Draw H rank-1 hardmax heads (unit q_h, k_h; by default cos angle(q_h, k_h) uniform on [-1, 1]) "
        "and solve C a = b for the output weights V_h = a_h I that minimise the D_2 (N = 2) nearest-neighbour error. "
        "predicted_error is the exact error a^T C a - 2 a^T b + 1 of the weights written (= 1 - b^T C^{-1} b).",
    )
    parser.add_argument("--d", type=int, required=True, help="dimension d >= 2")
    parser.add_argument("--heads", type=int, required=True, help="number of heads H >= 1 (memory ~ 8 H^2 bytes)")
    parser.add_argument("--seed", type=int, default=0, help="seed of numpy.random.default_rng (>= 0)")
    parser.add_argument(
        "--distribution", choices=DISTRIBUTIONS, default="uniform-cosine", help="how (q_h, k_h) are drawn"
    )
    parser.add_argument(
        "--fit-samples",
        type=int,
        default=None,
        metavar="N",
        help="fit the output weights on N Monte Carlo samples instead of the exact kernels (the paper's procedure as "
        "we read it, docs/random_features.md): reports in_sample_error (the fit scored on its own N samples) beside "
        "predicted_error (the exact population error of the weights written); N >= 1",
    )
    parser.add_argument("--out", type=path_argument, required=True, help="output .safetensors file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    d = check_dimension(args.d)
    heads = check_heads(args.heads, name="heads")
    seed = check_seed("seed", args.seed)
    fit_samples = None if args.fit_samples is None else check_sample_count("--fit-samples", args.fit_samples, minimum=1)
    check_output_file(args.out)
    check_memory(
        8.0 * (6 * heads * heads + 4 * heads * d * d),
        "the H x H kernel matrices and the (H, d, d) value maps",
        "--heads",
    )
    rng = np.random.default_rng(seed)
    extra: dict[str, object] = {}
    if fit_samples is None:
        construction = construct_random_features(d, heads, rng, args.distribution)
    else:  # the same heads as without the option (same seed), weights fitted on fit_samples samples
        q, k = sample_heads(heads, d, rng, args.distribution)
        fit = in_sample_errors(q, k, [heads], fit_samples, rng)
        weights = OutputWeights(fit.weights, float(fit.population[0]), "monte-carlo-fit", 0, 0.0)
        construction = RandomFeatureConstruction(q=q, k=k, weights=weights, distribution=args.distribution)
        extra = {"fit_samples": fit_samples, "in_sample_error": float(fit.in_sample[0])}
    metadata = random_features_metadata(construction, seed) | {key: str(value) for key, value in extra.items()}
    tensors = attention_weights_of(construction.q, construction.k, construction.weights.a)
    path = save_weights(args.out, tensors, metadata)
    emit(
        {
            "construction": "random-features",
            "path": str(path),
            "d": d,
            "r": 1,
            "H": heads,
            "N": 2,
            "temperature": metadata["temperature"],
            "distribution": args.distribution,
            "seed": seed,
            "predicted_error": construction.predicted_error,
            "solver": construction.weights.method,
            "weight_norm": float(np.linalg.norm(construction.weights.a)),
            **extra,
        },
        as_json=args.json,
        title="Random rank-1 heads with optimal output weights",
    )
    return 0
