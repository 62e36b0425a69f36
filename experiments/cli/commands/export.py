"""`attnrank export --weights FILE --format torch-mha --out FILE [--json]`: a weight file as stock torch weights."""

from __future__ import annotations

import argparse
import os

from constructions.export_torch import EXPORT_FORMATS, STATE_DICT_KEYS, export_weights
from constructions.weights_io import load_weights
from experiments.cli.arguments import check_output_file, path_argument
from experiments.cli.output import emit


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a single-layer weight file as a stock torch.nn.MultiheadAttention state dict",
        description="Write the safetensors state dict (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias) "
        "of torch.nn.MultiheadAttention(embed_dim=d, num_heads=H, batch_first=True) that computes the weight file's "
        "model exactly when called as mha(y[:, None], X, X): the temperature and stock attention's 1/sqrt(d/H) are "
        "folded into W_q. Files stock attention cannot represent (hardmax, score biases, multi-layer files, H not "
        "dividing d, score or value maps of rank > d/H) are refused with the reason; nothing is written.",
    )
    parser.add_argument(
        "--weights", type=path_argument, required=True, help="a .safetensors weight file (attnrank construct)"
    )
    parser.add_argument("--format", default="torch-mha", help=f"export format, one of {', '.join(EXPORT_FORMATS)}")
    parser.add_argument("--out", type=path_argument, required=True, help="output .safetensors file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.format not in EXPORT_FORMATS:
        raise ValueError(f"--format must be one of {', '.join(EXPORT_FORMATS)}, got {args.format!r}")
    check_output_file(args.out)
    if args.out.exists() and args.weights.exists() and args.out.resolve() == args.weights.resolve():
        raise ValueError("--out names the input file --weights; write the export elsewhere")
    weights = load_weights(args.weights)
    try:
        export = export_weights(weights, args.format, args.out)
    except ValueError as exc:
        raise ValueError(f"{args.weights}: {exc}") from exc
    except OSError as exc:  # a full disk: the library names its parameter path; here it is --out
        detail = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OSError(exc.errno, f"--out cannot be written ({detail}); nothing was written", str(args.out)) from exc
    meta = export.metadata
    emit(
        {
            "path": str(args.out),
            "format": args.format,
            "module": meta["module"],
            "construction": meta["construction"],
            "embed_dim": int(meta["embed_dim"]),
            "num_heads": int(meta["num_heads"]),
            "head_dim": int(meta["head_dim"]),
            "temperature": float(meta["temperature"]),
            "q_scale": float(meta["q_scale"]),
            "keys": list(STATE_DICT_KEYS),
        },
        as_json=args.json,
        title=None if args.json else f"exported {args.weights} as {meta['module']}",
    )
    return 0
