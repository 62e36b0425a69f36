"""`attnrank bound --d D --rank R --heads H [--json]`: Theorem 2's certified lower bound on the D_2 error.

The two numbers printed bracket the lower bound (its series is summed with a certified enclosure); they are not a
lower and an upper bound on the error."""

from __future__ import annotations

import argparse
import decimal
import math

from experiments.cli.output import emit
from theory.bounds import rank_lower_bound

MAX_HEADS_DIGITS = 4096
"""--heads is refused from 10^4096 on (min-heads' range; an int such as 10^(10^12) would not fit in memory)."""


def parse_heads(text: str) -> int:
    """An exact head count from '512', '1e300' or '2.5e10' (scientific notation parsed exactly, must be integral)."""
    try:
        value = decimal.Decimal(text.strip())
    except decimal.InvalidOperation as exc:
        raise ValueError(f"--heads must be an integer >= 1 (e.g. 512 or 1e300), got {text!r}") from exc
    if not value.is_finite() or value < 1:
        raise ValueError(f"--heads must be an integer >= 1 (e.g. 512 or 1e300), got {text!r}")
    if value.adjusted() >= MAX_HEADS_DIGITS:
        raise ValueError(f"--heads must be below 1e{MAX_HEADS_DIGITS} (beyond min-heads' range), got {text!r}")
    if value != value.to_integral_value():
        raise ValueError(f"--heads must be an integer >= 1 (e.g. 512 or 1e300), got {text!r}")
    return int(value)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bound",
        help="Theorem 2's lower bound on the error of H rank-r heads",
        description="Certified interval [lower_bound, upper_bound] containing Theorem 2's lower bound "
        "(1/2) sum_{k odd} e_k [1 - H C(k+r-1, r-1)/N(d,k)]_+ on the D_2 nearest-neighbour error of any "
        "H-head rank-r (generalized) attention layer.",
    )
    parser.add_argument("--d", type=int, required=True, help="dimension d >= 2")
    parser.add_argument("--rank", type=int, required=True, help="query/key rank r, 1 <= r <= d")
    parser.add_argument("--heads", type=str, required=True, help="number of heads H >= 1 (integer; 1e300 is fine)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    heads = parse_heads(args.heads)
    interval = rank_lower_bound(args.d, args.rank, heads)
    emit(
        {
            "d": args.d,
            "r": args.rank,
            "H": heads,
            "log10_H": math.log10(heads),
            "lower_bound": interval.lower,
            "upper_bound": interval.upper,
            "interval": [interval.lower, interval.upper],
        },
        as_json=args.json,
        title=f"Theorem 2 bound on E||f - f*||^2 (D_2) for {args.rank}-rank heads in d = {args.d}",
        note=f"[lower_bound, upper_bound] brackets Theorem 2's certified LOWER bound on the error (numerical "
        f"enclosure of the series), not the error itself: every such layer has error >= {interval.lower:.6g}.",
    )
    return 0
