"""`attnrank import --from SOURCE FILE ...`: a model trained elsewhere as something every other command reads.

Two sources:

- ``--from torch-mha FILE --num-heads H --out F.safetensors``: the state dict of one stock
  ``torch.nn.MultiheadAttention(d, H)`` as a single-layer weight file (`constructions.import_torch`, the inverse of
  `attnrank export`), read by ``eval``, ``export`` and ``train --init``;
- ``--from reference-encoder CKPT --num-heads H --task TASK [--N N] --out DIR``: a checkpoint of the reference
  implementation's encoder as a run directory (`experiments.training.imported_run`), read by ``analyze``,
  ``report``, ``train --eval-only`` and `load_trained_model`.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from constructions.import_torch import import_torch_mha
from experiments.cli.arguments import check_memory, check_output_dir, check_output_file, path_argument
from experiments.cli.output import emit
from experiments.config import KEY_KINDS, TASKS, TrainConfig
from experiments.training.imported_run import (
    check_import_target,
    prepare_reference_import,
    skipped_summary,
    write_imported_run,
)
from experiments.training.run_directory import RunDirectory

IMPORT_SOURCES = ("torch-mha", "reference-encoder")
"""What `attnrank import --from` reads."""
_REFERENCE_ONLY = ("task", "N", "keys")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="import a model trained elsewhere (stock nn.MultiheadAttention, the reference implementation's encoder)",
        description="Read a model trained outside this toolkit without running anything the file names "
        "(.safetensors; .pt and Lightning .ckpt files with torch.load(weights_only=True), every global other than "
        "tensors and plain containers carried as an inert name; a file naming os.system, subprocess, eval and the "
        "like is refused), and write what the other commands read. --from torch-mha FILE: the state dict of one "
        "torch.nn.MultiheadAttention(d, H) (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias) as a "
        "single-layer weight file with Q_h^T K_h = W_q^h^T W_k^h / sqrt(d/H) and V_h = W_o^h W_v^h (an attnrank "
        "export's folded temperature is undone); the key bias is dropped (softmax cancels it), and a query bias that "
        "changes the scores or value/output biases that add a constant output are refused with the reason. "
        "--from reference-encoder CKPT: a state dict of the reference implementation's encoder "
        "(NoahAmsel/attention-formers; encoder.layers.{l}.widened_self_attn.{b}.*, linear1/2, norm1/2.scale, "
        "positional_encodings, additive_positional), bare or under a Lightning checkpoint's state_dict with any "
        "prefix, as a run directory (config.json, a step-0 checkpoint.pt, import.json) for analyze, report and "
        "train --eval-only; layers, blocks, widths, feed-forward size, biases and positional tables are inferred "
        "from the shapes, every inconsistency is refused naming the key; a Lightning checkpoint's hyper_parameters "
        "(dim, nheads, rank, num_layers, width_multiplier, dim_feedforward, positional_dim, maxN, bias) are checked "
        "against them and fill in --num-heads and --N when omitted; float64 weights import as float64. Nothing is "
        "written on refusal.",
    )
    parser.add_argument(
        "--from",
        dest="source",
        nargs=2,
        metavar=("SOURCE", "FILE"),
        required=True,
        help=f"SOURCE ({' | '.join(IMPORT_SOURCES)}) and the file to read (.safetensors, .pt, .ckpt)",
    )
    parser.add_argument(
        "--num-heads",
        type=int,
        default=None,
        help="torch-mha (required): the module's num_heads H; reference-encoder: heads per attention block (its "
        "nhead; rank r = D / num_heads), not recorded in the weights (default: from the checkpoint's "
        "hyper_parameters nheads, rank or total_heads)",
    )
    parser.add_argument(
        "--task", default=None, help=f"reference-encoder (required): the task it was trained on, {' | '.join(TASKS)}"
    )
    parser.add_argument(
        "--N",
        type=int,
        default=None,
        help="reference-encoder: context length (default: from the positional table, sequence length = maxN)",
    )
    parser.add_argument(
        "--keys", default=None, help=f"reference-encoder, task nearest: key law, {' | '.join(KEY_KINDS)} (default iid)"
    )
    parser.add_argument(
        "--out",
        type=path_argument,
        required=True,
        help="torch-mha: the .safetensors weight file to write; reference-encoder: the run directory to create",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def eval_only_command(config: TrainConfig, out: Path) -> str:
    """The `attnrank train --eval-only` command line whose config is ``config`` (the run directory's)."""
    argv = ["attnrank", "train", "--eval-only", "--task", config.task, "--d", str(config.d), "--N", str(config.N)]
    argv += ["--keys", config.keys, "--rank", str(config.rank), "--width", str(config.width)]
    argv += ["--layers", str(config.layers), "--positional", config.positional]
    argv += ["--positional-dim", str(config.positional_dim), "--ffn-dim", str(config.ffn_dim), "--out", str(out)]
    return shlex.join(argv)


def _check_input(path: Path) -> None:
    if not path.exists():
        raise ValueError(f"--from FILE not found: {path}")
    if not path.is_file():
        raise ValueError(f"--from FILE {str(path)!r} is not a file")
    # float64 copies of every tensor, next to the file's bytes: a few times the file.
    check_memory(4.0 * path.stat().st_size, "the state dict's tensors (read, then float64 copies)", "--from")


def run(args: argparse.Namespace) -> int:
    source, text = args.source
    if source not in IMPORT_SOURCES:
        raise ValueError(f"--from SOURCE must be one of {', '.join(IMPORT_SOURCES)}, got {source!r}")
    if text.strip() == "" or "\x00" in text:
        raise ValueError(f"--from FILE must name a file, got {text!r}")
    path = Path(text)
    if args.num_heads is not None and args.num_heads < 1:
        raise ValueError(f"--num-heads must be an integer >= 1, got {args.num_heads}")
    if source == "torch-mha":
        if args.num_heads is None:
            raise ValueError("--num-heads is required with --from torch-mha (the module's num_heads)")
        given = [name for name in _REFERENCE_ONLY if getattr(args, name) is not None]
        if given:
            raise ValueError(f"--{given[0]} applies to --from reference-encoder only")
        check_output_file(args.out)
        if args.out.exists() and path.exists() and args.out.resolve() == path.resolve():
            raise ValueError("--out names the input file --from FILE; write the weight file elsewhere")
        if args.out.exists():  # as the reference-encoder import refuses a directory that holds a run
            raise ValueError(
                f"--out {str(args.out)!r} exists; an import never overwrites (remove it or choose another)"
            )
        _check_input(path)
        imported, read = import_torch_mha(path, args.num_heads, args.out)
        meta = imported.metadata
        summary = {
            "path": str(args.out),
            "source": str(path),
            "container": read.container,
            "construction": meta["construction"],
            "d": meta["d"],
            "H": meta["H"],
            "r": meta["r"],
            "temperature": meta["temperature"],
            "q_scale": meta["q_scale"],
            "skipped": skipped_summary(read),
            "notes": imported.notes,
        }
        emit(summary, as_json=args.json, title=None if args.json else f"imported {path} as a weight file")
        return 0
    if args.task is None:
        raise ValueError("--task is required with --from reference-encoder (the task the model was trained on)")
    if args.N is not None and args.N < 1:
        raise ValueError(f"--N must be an integer >= 1, got {args.N}")
    keys = "iid" if args.keys is None else args.keys
    check_output_dir(args.out)
    check_import_target(args.out)
    _check_input(path)
    prepared = prepare_reference_import(path, num_heads=args.num_heads, task=args.task, N=args.N, keys=keys)
    config = prepared.config
    record = {
        **prepared.record,
        "eval_command": eval_only_command(config, args.out),
        "analyze_command": shlex.join(["attnrank", "analyze", str(args.out)]),
    }
    write_imported_run(config, prepared.model_state, args.out, record, prepared.dtype)
    summary = {
        "out": str(args.out),
        "source": str(path),
        "container": record["container"],
        "prefix": record["prefix"],
        "task": config.task,
        "d": config.d,
        "N": config.N,
        "layers": config.layers,
        "width": config.width,
        "heads": config.heads,
        "rank": config.rank,
        "positional": config.positional,
        "positional_dim": config.positional_dim,
        "ffn_dim": config.ffn_dim,
        "bias": record["inferred"]["bias"],
        "dtype": record["dtype"],
        "hyper_parameters": record["hyper_parameters"],
        "skipped": record["skipped"],
        "record": str(RunDirectory(args.out).import_record),
        "eval_command": record["eval_command"],
        "analyze_command": record["analyze_command"],
    }
    emit(summary, as_json=args.json, title=None if args.json else f"imported {path} as run directory {args.out}")
    return 0
