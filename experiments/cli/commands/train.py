"""`attnrank train`: train one transformer on one task (resumes when re-run on the same output directory)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from experiments.cli.arguments import temperature_argument
from experiments.cli.output import emit
from experiments.tasks import TASKS
from experiments.training.loop import ATTENTIONS, KEY_KINDS, MODELS, POSITIONALS, VALUES, TrainConfig, train

_DEFAULTS = TrainConfig()


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a transformer on a task (AdamW, warm-up + cosine, fresh samples)",
        description="Train one model on one task with the paper's optimiser (AdamW lr 0.01, betas (0.9, 0.95), no "
        "weight decay, 5% linear warm-up then cosine decay, batch 256 of fresh samples). Writes config.json, "
        "metrics.csv, checkpoint.pt and result.json to --out; re-running the same command resumes from the last "
        "checkpoint. Prints the final loss (mean training loss of the last epoch = last --log-every steps) and the "
        "best loss (lowest epoch-mean training loss, the paper's metric).",
    )
    d = _DEFAULTS
    # Choices are validated by TrainConfig (not argparse), so a bad value is one line and exit status 2.
    parser.add_argument("--task", default=d.task, help=f"{' | '.join(TASKS)} (default %(default)s)")
    parser.add_argument("--d", type=int, default=d.d, help="token dimension (default %(default)s)")
    parser.add_argument("--N", type=int, default=d.N, help="context length; icl: number of pairs (default %(default)s)")
    parser.add_argument(
        "--keys", default=d.keys, help=f"{' | '.join(KEY_KINDS)}: nearest's key law (default %(default)s)"
    )
    parser.add_argument("--rank", type=int, default=d.rank, help="query/key rank r per head (default %(default)s)")
    parser.add_argument(
        "--width", type=int, default=d.width, help="c: H = c d / r heads per layer (default %(default)s)"
    )
    parser.add_argument("--layers", type=int, default=d.layers, help="number of layers (default %(default)s)")
    parser.add_argument("--value", default=d.value, help=f"{' | '.join(VALUES)} value maps (default %(default)s)")
    parser.add_argument("--attention", default=d.attention, help=f"{' | '.join(ATTENTIONS)} (default %(default)s)")
    parser.add_argument(
        "--temperature", type=temperature_argument, default=d.temperature, help="score multiplier (default %(default)s)"
    )
    parser.add_argument("--positional", default=d.positional, help=f"{' | '.join(POSITIONALS)} (default %(default)s)")
    parser.add_argument("--positional-dim", type=int, default=d.positional_dim, help="width of concatenated encodings")
    parser.add_argument(
        "--ffn-dim", type=int, default=d.ffn_dim, help="encoder feed-forward width (default %(default)s)"
    )
    parser.add_argument("--steps", type=int, default=d.steps, help="optimiser steps (default %(default)s)")
    parser.add_argument(
        "--batch-size", type=int, default=d.batch_size, help="fresh samples per step (default %(default)s)"
    )
    parser.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default %(default)s)")
    parser.add_argument("--beta1", type=float, default=d.betas[0], help="AdamW beta1 (default %(default)s)")
    parser.add_argument("--beta2", type=float, default=d.betas[1], help="AdamW beta2 (default %(default)s)")
    parser.add_argument("--weight-decay", type=float, default=d.weight_decay, help="default %(default)s")
    parser.add_argument("--warmup-fraction", type=float, default=d.warmup_fraction, help="default %(default)s")
    parser.add_argument(
        "--seed", type=int, default=d.seed, help="model initialisation and sampler seed (default %(default)s)"
    )
    parser.add_argument("--device", default=d.device, help="auto (CUDA when present, else CPU), cpu, cuda, cuda:K")
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every, help="default %(default)s")
    parser.add_argument(
        "--log-every", type=int, default=d.log_every, help="steps per epoch/metrics row (default %(default)s)"
    )
    parser.add_argument("--init", default=None, help="construction weight file to initialise the theory model from")
    parser.add_argument("--model", default=d.model, help=f"{' | '.join(MODELS)} (default %(default)s)")
    parser.add_argument(
        "--embed-dim", type=int, default=d.embed_dim, help="gpt2: residual width D (heads H = c D / r); else 0"
    )
    parser.add_argument("--out", required=True, type=Path, help="run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig named by the command-line flags (validated)."""
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(TrainConfig)
        if f.name != "betas" and hasattr(args, f.name)
    }
    values["betas"] = (args.beta1, args.beta2)
    return TrainConfig(**values)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config.init is not None and not Path(config.init).is_file():
        raise ValueError(f"init weight file not found: {config.init}")
    result = train(config, args.out, progress=not args.no_progress)
    emit(
        {
            "final_loss": result.final_loss,
            "best_loss": result.best_loss,
            "steps": result.steps,
            "diverged": result.diverged,
            "seconds": round(result.seconds, 3),
            "out": str(args.out),
        },
        as_json=args.json,
        title=None
        if args.json
        else f"trained {config.task} d={config.d} N={config.N} r={config.rank} H={config.heads}",
    )
    return 0
