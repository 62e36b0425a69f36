"""`attnrank construct biased --d D --out FILE [--temperature T] [--m M] [--delta DELTA] [--keys K] [--json]`.

Theorem 3's full-rank upper bound (constructions/biased.py): one full-rank head per biased nearest-neighbour summand.
"""

from __future__ import annotations

import argparse
import math

from constructions.biased import build_biased_construction, save_biased_construction
from constructions.weights_io import load_weights
from experiments.cli.arguments import check_memory, check_output_file, finite_float, path_argument, temperature_argument
from experiments.cli.output import emit
from theory.biased_target import bias_grid
from theory.sphere import KEY_KINDS
from theory.validation import check_choice, check_dimension, check_int, check_temperature


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "biased",
        help="2 d^2 + 1 full-rank heads with score biases (Theorem 3's upper bound)",
        description="Write Theorem 3's full-rank construction: head j has Q = K = V = I and score_bias "
        "(-b_j/2, +b_j/2), so it picks x_1 iff <x_1 - x_2, y> > b_j; the heads sum to the biased target "
        "(biases b_j = j delta, j = -m..m, Gaussian query). predicted_error is the exact quadrature error at the "
        "given temperature (0 for hardmax).",
    )
    parser.add_argument("--d", type=int, required=True, help="dimension d >= 2")
    parser.add_argument(
        "--temperature", type=temperature_argument, default=math.inf, help="softmax inverse temperature (inf: hardmax)"
    )
    parser.add_argument("--m", type=int, default=None, help="half the number of biases (default d^2: 2 d^2 + 1 heads)")
    parser.add_argument("--delta", type=finite_float, default=None, help="bias spacing (default 4 sqrt(2) / m)")
    parser.add_argument("--keys", default="orthonormal", help="key law of predicted_error: orthonormal (D_2) or iid")
    parser.add_argument("--out", type=path_argument, required=True, help="output .safetensors file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    d = check_dimension(args.d)
    check_temperature(args.temperature)
    check_choice("keys", args.keys, KEY_KINDS)
    m = d * d if args.m is None else check_int("m", args.m, minimum=1)
    check_output_file(args.out)
    check_memory(8.0 * 9 * (2 * m + 1) * (d * d + 2), "the 2 m + 1 heads' (d, d) maps", "--m/--d")
    grid = bias_grid(d, m=args.m, delta=args.delta)
    construction = build_biased_construction(d, args.temperature, grid)
    path = save_biased_construction(args.out, construction, keys=args.keys)
    metadata = load_weights(path).metadata
    emit(
        {
            "construction": "biased",
            "path": str(path),
            "d": d,
            "r": d,
            "H": construction.heads,
            "N": 2,
            "temperature": construction.temperature,
            "bias_m": grid.m,
            "bias_delta": grid.delta,
            "budget": construction.budget,
            "predicted_error": metadata["predicted_error"],
        },
        as_json=args.json,
        title="Theorem 3: full-rank biased construction",
    )
    return 0
