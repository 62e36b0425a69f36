"""`attnrank train`: train one transformer on one task (resumes when re-run on the same output directory)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from typing import Any

import torch
import yaml

from experiments.allocator import HELP as ALLOCATOR_HELP
from experiments.cli.arguments import (
    GivenFlag,
    GivenSwitch,
    check_memory,
    check_output_dir,
    finite_float,
    given_flags,
    path_argument,
    temperature_argument,
)
from experiments.cli.output import emit, warn
from experiments.config import CAPTURES, KEY_KINDS, LR_INTERVALS, MATMUL_PRECISIONS, TASKS, TrainConfig
from experiments.config_files import read_train_config
from experiments.model_kinds import ATTENTIONS, LAYER_INITS, MODELS, POSITIONALS, VALUE_MAPS
from experiments.samplers import SAMPLERS
from experiments.training.arguments import runs_on_cpu
from experiments.training.evaluation import CURVE_SAMPLES, evaluate_run
from experiments.training.loop import train
from experiments.training.memory import training_bytes, training_memory_source
from experiments.training.progress import DEFAULT_INTERVAL
from experiments.training.run import build_run
from experiments.training.schedule import INIT_STEP_WARNING, init_step_ratio
from theory.validation import check_existing_file

_DEFAULTS = TrainConfig()


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a transformer on a task (AdamW, warm-up + cosine, fresh samples)",
        description="Train one model on one task with the paper's optimiser (AdamW lr 0.01, betas (0.9, 0.95), "
        "no weight decay, "
        "5% linear warm-up then cosine decay, batch 256 of fresh samples; --warmup-steps and --schedule-steps give "
        "the paper's own schedule, e.g. 5000 of 100000, of which a run may train a prefix). Writes config.json, "
        "metrics.csv, checkpoint.pt and result.json to --out; re-running the same command resumes from the last "
        "checkpoint. Prints the final loss (mean training loss of the last epoch = last --log-every steps) and the "
        "best loss (lowest epoch-mean training loss, the paper's metric). Progress goes to stderr: a bar on a "
        "terminal, else a line (step, loss, steps/s, ETA) every --progress-interval seconds. --eval-only trains "
        "nothing: it prints the Monte Carlo error of the starting model (the --init file, or the seed's "
        "initialisation; the checkpoint's model if --out holds one) and writes nothing. The time per step (printed on "
        "stderr as the run goes) grows about linearly with batch x N and with the FFN and attention widths "
        "(docs/models.md).",
        epilog=ALLOCATOR_HELP,
    )
    d = _DEFAULTS

    def add(container: Any, *names: str, **options: Any) -> None:
        """add_argument recording that the flag was typed (so that it overrides --config while its default does not)."""
        options["action"] = GivenSwitch if options.get("action") == "store_true" else options.get("action", GivenFlag)
        container.add_argument(*names, **options)

    add(
        parser,
        "--config",
        type=path_argument,
        default=None,
        help="a run's configuration as a file, YAML or JSON: TrainConfig fields by name (any subset; the rest keep "
        "their defaults), or the config.json a run writes (its config entry); flags typed with it override it",
    )
    add(
        parser,
        "--print-config",
        action="store_true",
        help="print the resolved configuration (--config, then the flags) as YAML (JSON with --json), checked as a "
        "run is, and train nothing; --config accepts what it prints",
    )
    # Choices are validated by TrainConfig (not argparse), so a bad value is one line and exit status 2.
    add(parser, "--task", default=d.task, help=f"{' | '.join(TASKS)} (default %(default)s)")
    add(parser, "--d", type=int, default=d.d, help="token dimension (default %(default)s)")
    add(parser, "--N", type=int, default=d.N, help="context length; icl: number of pairs (default %(default)s)")
    add(parser, "--keys", default=d.keys, help=f"{' | '.join(KEY_KINDS)}: nearest's key law (default %(default)s)")
    add(parser, "--rank", type=int, default=d.rank, help="query/key rank r per head (default %(default)s)")
    add(parser, "--width", type=int, default=d.width, help="c: H = c d / r heads per layer (default %(default)s)")
    add(parser, "--layers", type=int, default=d.layers, help="number of layers (default %(default)s)")
    add(parser, "--value", default=d.value, help=f"{' | '.join(VALUE_MAPS)} value maps (default %(default)s)")
    add(parser, "--attention", default=d.attention, help=f"{' | '.join(ATTENTIONS)} (default %(default)s)")
    add(
        parser,
        "--temperature",
        type=temperature_argument,
        default=d.temperature,
        help="score multiplier (default %(default)s)",
    )
    add(parser, "--positional", default=d.positional, help=f"{' | '.join(POSITIONALS)} (default %(default)s)")
    add(parser, "--positional-dim", type=int, default=d.positional_dim, help="width of concatenated encodings")
    add(parser, "--ffn-dim", type=int, default=d.ffn_dim, help="encoder feed-forward width (default %(default)s)")
    add(parser, "--steps", type=int, default=d.steps, help="optimiser steps (default %(default)s)")
    add(parser, "--batch-size", type=int, default=d.batch_size, help="fresh samples per step (default %(default)s)")
    add(parser, "--lr", type=finite_float, default=d.lr, help="peak learning rate (default %(default)s)")
    add(parser, "--beta1", type=finite_float, default=d.betas[0], help="AdamW beta1 (default %(default)s)")
    add(parser, "--beta2", type=finite_float, default=d.betas[1], help="AdamW beta2 (default %(default)s)")
    add(parser, "--weight-decay", type=finite_float, default=d.weight_decay, help="default %(default)s")
    warmup = parser.add_mutually_exclusive_group()
    add(
        warmup,
        "--warmup-fraction",
        type=finite_float,
        default=d.warmup_fraction,
        help="linear warm-up over this fraction of the schedule (default %(default)s)",
    )
    add(
        warmup,
        "--warmup-steps",
        type=int,
        default=d.warmup_steps,
        help="linear warm-up over this many steps instead of a fraction (the paper's runs: 5000 of 100k); "
        "0 = use --warmup-fraction",
    )
    add(
        parser,
        "--schedule-steps",
        type=int,
        default=d.schedule_steps,
        help="length of the learning-rate schedule (the cosine reaches 0 there); the run stops at --steps <= it, "
        "and re-running with a larger --steps extends it along the same schedule, exactly as one uninterrupted "
        "run (default 0: the schedule ends at --steps)",
    )
    add(
        parser,
        "--lr-interval",
        default=d.lr_interval,
        help=f"{' | '.join(LR_INTERVALS)}: the learning rate follows its schedule every optimiser step, or changes "
        "once per epoch (--log-every steps) as the reference implementation's scheduler does: 0 in the first epoch, "
        "a staircase up to the peak at the warm-up's end, then the cosine (default %(default)s)",
    )
    add(parser, "--seed", type=int, default=d.seed, help="model initialisation and sampler seed (default %(default)s)")
    add(parser, "--device", default=d.device, help="auto (CUDA when present, else CPU), cpu, cuda, cuda:K")
    add(parser, "--bf16", action="store_true", help="bfloat16 autocast")
    add(parser, "--compile", action="store_true", help="torch.compile the model")
    add(
        parser,
        "--sampler",
        default=d.sampler,
        help="; ".join(f"{sampler.name}: {sampler.summary}" for sampler in SAMPLERS.values())
        + " (default %(default)s)",
    )
    add(
        parser,
        "--train-batches",
        type=int,
        default=d.train_batches,
        help="K >= 1: draw K batches once and train step t on batch t mod K, as the paper's runs did (100 batches "
        "replayed every epoch); an epoch is then one pass over the set (--log-every defaults to K), so best_loss is "
        "the training loss on the set; 0 = fresh batches every step (default %(default)s)",
    )
    add(
        parser,
        "--data-seed",
        type=int,
        default=None,
        help="seed of the training data, apart from the initialisation (--seed): one initialisation with several "
        "training sets, as the paper's five runs (default: --seed)",
    )
    add(
        parser,
        "--matmul-precision",
        default=d.matmul_precision,
        help=f"{' | '.join(MATMUL_PRECISIONS)}: float32 matmuls in full precision, or TF32 on GPUs that have it; "
        "recorded with the run (default %(default)s)",
    )
    add(
        parser,
        "--capture",
        default=d.capture,
        help=f"{' | '.join(CAPTURES)}: on CUDA, replay the whole training step as one CUDA graph (graph) or through "
        "torch.compile(mode='reduce-overhead') (compile); ignored elsewhere (default %(default)s)",
    )
    add(parser, "--checkpoint-every", type=int, default=d.checkpoint_every, help="default %(default)s")
    add(
        parser,
        "--log-every",
        type=int,
        default=None,
        help=f"steps per epoch/metrics row (default {d.log_every}, or --train-batches when that is set)",
    )
    add(
        parser,
        "--init",
        default=None,
        help="construction weight file to initialise the theory model from, or a recipe built from the run's own "
        "fields: construction:majority-vote or construction:full-rank, optionally @LAMBDA (the construction's "
        "inverse temperature; default the run's --temperature); warns (one line) when one AdamW step at "
        "the peak --lr moves the weights by more than 1%% of their norm: lr sqrt(P) / ||theta_init|| > 0.01 for P "
        "parameters, since each AdamW step moves every parameter by about lr",
    )
    add(parser, "--model", default=d.model, help=f"{' | '.join(MODELS)} (default %(default)s)")
    add(
        parser,
        "--layer-init",
        default=d.layer_init,
        help=f"{' | '.join(LAYER_INITS)}: encoder layers drawn apart, or all copies of one drawn layer as "
        "nn.TransformerEncoder (and the reference code) starts them (default %(default)s)",
    )
    add(parser, "--embed-dim", type=int, default=d.embed_dim, help="gpt2: residual width D (heads H = c D / r); else 0")
    add(parser, "--out", type=path_argument, help="run directory (required unless --print-config)")
    add(parser, "--no-progress", action="store_true", help="no progress bar or lines")
    add(
        parser,
        "--progress-interval",
        type=finite_float,
        default=DEFAULT_INTERVAL,
        help="seconds between progress lines when stderr is not a terminal (default %(default)s)",
    )
    add(
        parser,
        "--eval-only",
        action="store_true",
        help="train nothing: print the starting model's evaluation by the one recipe (held-out samples; JSON keys "
        "population_error, population_stderr, population_samples, theorem2 where it applies, step, source = init | "
        "seed | checkpoint, out); writes nothing to --out",
    )
    add(
        parser,
        "--eval-samples",
        type=int,
        default=d.eval_samples,
        help="held-out samples of the run's evaluation when it ends (and of --eval-only); the curve's points use the "
        f"first {CURVE_SAMPLES} of them, or all when fewer; recorded with the run (default %(default)s)",
    )
    add(parser, "--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig named by the command line: the defaults, then the --config file, then the flags typed
    (validated; a bad value from the file is refused naming the file and the field, one from a flag naming the flag)."""
    flags = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(TrainConfig)
        if f.name != "betas" and hasattr(args, f.name)
    }
    flags["betas"] = (args.beta1, args.beta2)
    typed = given_flags(args)
    if args.config is None:
        values = flags
        typed = set(flags)
    else:
        from_file = read_train_config(args.config)
        values = {**from_file, **{name: value for name, value in flags.items() if name in typed}}
        if typed & {"beta1", "beta2"}:
            file_betas = list(from_file.get("betas", _DEFAULTS.betas))
            values["betas"] = tuple(flags["betas"][i] if f"beta{i + 1}" in typed else file_betas[i] for i in (0, 1))
        if "warmup_fraction" in typed:
            values["warmup_steps"] = 0  # the typed fractional warm-up replaces the file's absolute one
    batches = values.get("train_batches", _DEFAULTS.train_batches)
    if values.get("log_every") is None or ("train_batches" in typed and "log_every" not in typed):
        # an epoch is one pass over a fixed set, else the default epoch
        values["log_every"] = batches if isinstance(batches, int) and batches > 0 else _DEFAULTS.log_every
    if values.get("warmup_steps") and "warmup_steps" in typed:
        values["warmup_fraction"] = 0.0  # --warmup-steps replaces the fractional warm-up (argparse made them exclusive)
    try:
        return TrainConfig(**values)
    except ValueError as exc:
        if args.config is None:
            raise
        named = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)", str(exc))  # the field the message starts with
        field = named.group(1) if named else ""
        typed_field = field in typed or (field == "betas" and bool(typed & {"beta1", "beta2"}))
        if field in from_file and not typed_field:
            raise ValueError(f"{args.config}: {exc}") from exc  # the file's value: name the file
        raise  # a typed flag's value: the command line names the flag


def print_config(config: TrainConfig, as_json: bool) -> None:
    """The resolved configuration, as YAML (the form --config reads back) or one JSON object."""
    if as_json:
        print(json.dumps(config.to_dict()))
    else:
        print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")


def warn_if_init_moves_far(config: TrainConfig) -> None:
    """One warning line when one AdamW step at the peak lr moves the --init weights by > 1% of their norm."""
    _, model = build_run(config, torch.device("cpu"))  # the loaded construction
    ratio = init_step_ratio(model.parameters(), config.lr)
    if ratio > INIT_STEP_WARNING:
        warn(
            "train",
            f"--lr {config.lr:g} moves the --init weights by about {ratio:.2g} of their norm per AdamW step "
            f"(lr sqrt(P) / ||theta||, warned above {INIT_STEP_WARNING:g}); a smaller --lr stays near them",
        )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.out is None and not args.print_config:
        raise ValueError("--out is required (the run directory), unless --print-config")
    if args.out is not None:
        check_output_dir(args.out, "--out")
    if runs_on_cpu(config):  # the library's rule (training.arguments): a GPU run's memory is the GPU's
        check_memory(training_bytes(config), "the model and one step's activations", training_memory_source(config))
    if config.init is not None and config.construction_init is None:
        check_existing_file("--init", config.init)  # a directory, a FIFO or a device named as such, before reading
    if not args.progress_interval > 0:
        raise ValueError(f"--progress-interval must be > 0 seconds, got {args.progress_interval!r}")
    if args.print_config:
        print_config(config, args.json)
        return 0
    if args.eval_only:
        evaluation = evaluate_run(config, args.out)
        emit({**evaluation, "out": str(args.out)}, as_json=args.json, title=None if args.json else "evaluated")
        return 0
    if config.init is not None:
        warn_if_init_moves_far(config)
    result = train(config, args.out, progress=not args.no_progress, progress_interval=args.progress_interval)
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
