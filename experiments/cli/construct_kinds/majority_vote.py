"""`attnrank construct majority-vote --d D --heads H [--temperature T] [--seed S] --out FILE`: Theorem 5's network."""

from __future__ import annotations

import argparse
import math

import numpy as np

from constructions.majority_vote import CONSTRUCTION_NAME, build_majority_vote, save_majority_vote
from experiments.cli.arguments import check_memory, check_output_file, path_argument, temperature_argument
from experiments.cli.output import emit
from theory.majority_vote_error import majority_vote_asymptote
from theory.validation import check_dimension, check_heads, check_seed, check_temperature


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "majority-vote",
        help="two layers of rank-1 heads: majority vote over H random heads (Theorem 5, N = 2)",
        description="Write Theorem 5's two-layer rank-1 majority vote (N = 2) as a multi-layer weight file: layer 1 "
        "has H rank-1 heads voting into a scratch tally, layer 2 one rank-1 head copying the winner. "
        "predicted_error is the exact expected error over random heads and D_2 data (quadrature); for a finite "
        "temperature it takes seconds to minutes for large H (use --no-predict to skip).",
    )
    parser.add_argument("--d", type=int, required=True, help="token dimension d >= 2")
    parser.add_argument("--heads", type=int, required=True, help="number of layer-1 heads H >= 1 (odd avoids ties)")
    parser.add_argument(
        "--temperature", type=temperature_argument, default=math.inf, help="softmax inverse temperature (inf: hardmax)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random head directions")
    parser.add_argument("--no-predict", action="store_true", help="store predicted_error = nan (skip quadrature)")
    parser.add_argument("--out", type=path_argument, required=True, help="output .safetensors file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    d = check_dimension(args.d)
    heads = check_heads(args.heads, name="heads")
    check_temperature(args.temperature)
    seed = check_seed("seed", args.seed)
    check_output_file(args.out)
    width = 2 * d + 1  # stream width D = d + p, p = 1 + d
    check_memory(8.0 * 5 * (heads + 1) * width * width, "the layer-1 value maps (H, D, D), D = 2 d + 1", "--heads/--d")
    built = build_majority_vote(d, heads, np.random.default_rng(seed), args.temperature, predict=not args.no_predict)
    path = save_majority_vote(args.out, built, seed)
    emit(
        {
            "construction": CONSTRUCTION_NAME,
            "path": str(path),
            "d": built.weights.d,
            "p": built.weights.p,
            "N": built.weights.N,
            "L": len(built.weights.layers),
            "H": built.weights.layer_heads,
            "r": built.weights.rank,
            "temperature": built.temperature,
            "update": "query",
            "predicted_error": built.predicted_error,
            "asymptote_sqrt_d_over_H": majority_vote_asymptote(d, heads),
            "seed": seed,
        },
        as_json=args.json,
        title="Theorem 5: two-layer rank-1 majority vote",
    )
    return 0
