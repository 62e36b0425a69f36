"""`attnrank construct full-rank --d D [--temperature LAMBDA] --out FILE`: Fact 1's single full-rank head."""

from __future__ import annotations

import argparse
import math

from experiments.cli.arguments import temperature_argument
from experiments.cli.output import emit


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
    parser.add_argument("--out", required=True, help="output .safetensors file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `attnrank construct --help` does not load every construction's libraries.
    from constructions.full_rank import full_rank_metadata, save_full_rank

    path = save_full_rank(args.out, args.d, args.temperature)
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
