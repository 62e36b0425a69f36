"""`attnrank construct full-rank --d D [--temperature LAMBDA] --out FILE`: Fact 1's single full-rank head."""

from __future__ import annotations

import argparse
import math

from constructions.full_rank import full_rank_metadata, save_full_rank
from experiments.cli.arguments import check_memory, check_output_file, path_argument, temperature_argument
from experiments.cli.output import emit
from theory.validation import check_dimension, check_temperature


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "full-rank",
        help="one full-rank head Q = lambda I, K = V = I (Fact 1)",
        description="Write the full-rank head of Fact 1 (H = 1, r = d) as a single-layer weight file. Its "
        "predicted_error is the exact D_2 (N = 2) error 2 E[sigmoid(-sqrt2 lambda |t|)^2]; hardmax (inf) is exact.",
    )
    parser.add_argument("--d", type=int, required=True, help="dimension d >= 2")
    parser.add_argument(
        "--temperature",
        type=temperature_argument,
        default=math.inf,
        help="softmax inverse temperature lambda (inf: hardmax)",
    )
    parser.add_argument("--out", type=path_argument, required=True, help="output .safetensors file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    d = check_dimension(args.d)
    check_temperature(args.temperature)
    check_output_file(args.out)
    check_memory(8.0 * 8 * d * d, "the d x d weight matrices Q, K, V (float64, with copies)", "--d")
    path = save_full_rank(args.out, d, args.temperature)
    metadata = full_rank_metadata(args.d, args.temperature)
    emit(
        {
            "construction": "full-rank",
            "path": str(path),
            "d": args.d,
            "r": args.d,
            "H": 1,
            "temperature": metadata["temperature"],
            "predicted_error": metadata["predicted_error"],
            "N": 2,
        },
        as_json=args.json,
        title="Fact 1: one full-rank head",
    )
    return 0
