"""`attnrank min-heads --d D --rank R --eps EPS [--json]`: heads that Theorem 2 proves necessary for error EPS."""

from __future__ import annotations

import argparse
import math

from experiments.cli.arguments import finite_float
from experiments.cli.output import emit
from theory.bounds import min_heads, rank_lower_bound


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "min-heads",
        help="smallest head count Theorem 2 allows for a target error",
        description="The smallest H whose certified lower bound is <= EPS: every rank-r (generalized) attention "
        "layer with fewer heads has D_2 nearest-neighbour error > EPS. The count is exact (it may have hundreds "
        "of digits); log10_heads gives its size.",
    )
    parser.add_argument("--d", type=int, required=True, help="dimension d >= 2")
    parser.add_argument("--rank", type=int, required=True, help="query/key rank r, 1 <= r <= d")
    parser.add_argument("--eps", type=finite_float, required=True, help="target error, 0 < eps <= 0.5")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    heads = min_heads(args.d, args.rank, args.eps)
    at = rank_lower_bound(args.d, args.rank, heads)
    result: dict[str, object] = {
        "d": args.d,
        "r": args.rank,
        "eps": args.eps,
        "heads": heads,
        "log10_heads": math.log10(heads),
        "lower_bound_at_heads": at.lower,
    }
    if heads > 1:
        result["lower_bound_below"] = rank_lower_bound(args.d, args.rank, heads - 1).lower
    emit(result, as_json=args.json, title=f"Heads needed for error <= {args.eps} (d = {args.d}, rank {args.rank})")
    return 0
