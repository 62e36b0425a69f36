"""A run directory for a model trained elsewhere: its weights as the step-0 checkpoint of a run of ours.

`attnrank import --from reference-encoder` writes one. The directory holds what a run of `attnrank train` holds before
its first step, so every command that reads run directories reads it:

- ``config.json``: the config (model, task and sizes inferred or given; training fields at their defaults), its hash
  and provenance, as `experiments.training.loop.train` writes it;
- ``checkpoint.pt``: a verified checkpoint (`experiments.training.checkpoints`) at step 0: the imported weights, a
  fresh AdamW state, the schedule at step 0, the RNG states of a run of this seed, no closed epoch;
- ``import.json``: where the weights came from: the source file and its sha256, the container and key prefix found,
  the sizes inferred from the shapes and those given or read from the checkpoint's hyper-parameters, the precision
  (``dtype``: float64 when the file held float64 weights, else float32; `experiments.training.run_model`), what
  the import skipped (a Lightning checkpoint's other entries and the globals carried as names, by name only) and the
  notes of the translation (`attnrank train` rewrites config.json when it resumes; this file stays).

There is no ``result.json``: nothing was trained here. `attnrank train` with the same flags fine-tunes the imported
model from step 0 with a fresh optimiser; ``train --eval-only`` scores it (step 0, source "checkpoint");
``attnrank analyze``, ``attnrank report`` and `load_trained_model` read it like any run.

The directory is assembled in a temporary sibling and renamed into place (``os.replace`` onto a missing or empty
directory), so a killed import leaves no half-written run behind.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from constructions.state_dict_files import StateDictFile, read_state_dict_file
from experiments.config import TrainConfig
from experiments.models.reference_hparams import check_hyper_parameters
from experiments.models.reference_layout import (
    ReferenceLayout,
    encoder_state_from_reference,
    read_reference_layout,
    reference_config,
)
from experiments.samplers import get_sampler
from experiments.tasks import make_task
from experiments.training.checkpoints import save_checkpoint
from experiments.training.provenance import provenance
from experiments.training.run import build_run
from experiments.training.run_directory import RunDirectory
from experiments.training.run_model import dtype_name
from experiments.training.schedule import make_optimizer, optimizer_kind
from experiments.training.step_capture import describe_step_path
from theory.validation import check_int, check_output_dir

REFERENCE_SOURCE = "NoahAmsel/attention-formers, encoders.py (the encoder state dict as published)"


@dataclass(frozen=True)
class ImportedRun:
    """An imported run directory.

    Attributes:
        out_dir: the run directory written.
        config: its TrainConfig.
        record: the content of its import.json.
    """

    out_dir: Path
    config: TrainConfig
    record: dict[str, Any]


def check_import_target(out_dir: str | Path) -> Path:
    """The run directory an import may write: missing, or an empty directory (a run is never overwritten)."""
    out = check_output_dir("out_dir", out_dir)  # a path, not a file, somewhere a directory can be made
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"out_dir must be a new or empty directory (an import never overwrites), got {str(out)!r}")
    return out


def write_imported_run(
    config: TrainConfig,
    model_state: Mapping[str, torch.Tensor],
    out_dir: str | Path,
    record: Mapping[str, Any],
    dtype: torch.dtype = torch.float32,
) -> Path:
    """Write a run directory whose step-0 checkpoint holds ``model_state`` (see the module docstring).

    Args:
        config: the run's config; its model (`build_run`) must accept ``model_state`` exactly (strict keys, shapes).
        model_state: the model's state dict (any float dtype; stored in ``dtype``).
        out_dir: a missing or empty directory.
        record: the import's provenance, written to import.json (its ``dtype`` entry should name ``dtype``).
        dtype: the precision of the stored model, float32 or float64 (`run_model.RUN_DTYPES`).

    Returns:
        the run directory.
    """
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    out = check_import_target(out_dir)
    dtype_name(dtype)  # float32 or float64, else ValueError naming dtype
    cpu = dataclasses.replace(config, device="cpu")
    _, model = build_run(cpu, torch.device("cpu"))
    model.to(dtype)
    try:
        model.load_state_dict(dict(model_state), strict=True)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())  # one line
        raise ValueError(f"model_state does not fit the model of the config ({detail})") from exc
    optimizer, scheduler = make_optimizer(model.parameters(), cpu)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".import.tmp", dir=out.parent))
    files = RunDirectory(staging)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)  # the global torch RNG state a fresh run of this seed would save
            save_checkpoint(
                files.checkpoint,
                config=config,
                step=0,
                model=model,
                optimizer=optimizer,
                scheduler=scheduler,
                sampler=get_sampler(config.sampler).generator(config.seed, torch.device("cpu")),
                stats={"epoch_sum": 0.0, "epoch_count": 0, "best": math.inf, "last_epoch": math.nan, "elapsed": 0.0},
            )
        cpu_device = torch.device("cpu")
        files.write_config(
            config, provenance(), "cpu", describe_step_path(cpu, cpu_device, optimizer_kind(cpu, cpu_device))
        )
        files.write_import_record(record)
        os.replace(staging, out)  # onto a missing or empty directory: the run appears whole or not at all
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _notes(layout: ReferenceLayout, config: TrainConfig, sequence_length: int) -> list[str]:
    """The translation's notes for import.json (what was filled in, cut or ignored)."""
    notes = [
        f"{layout.width} attention block(s) per layer, averaged, each of {layout.embed_dim // config.rank} heads of "
        f"rank r = {config.rank}",
        "L2 norms: ours clamp ||x|| at 1e-12, the reference's at 0 (equal unless a token's norm is below 1e-12)",
    ]
    if any(".self_attn." in key for key in layout.state):
        notes.append("the registered but unused self_attn.* copies were checked for shape and not loaded")
    if not layout.bias:
        notes.append("the file has no biases (bias=False): loaded as zero biases, which compute the same map")
    if layout.max_length is not None and layout.max_length > sequence_length:
        notes.append(f"positional table cut from {layout.max_length} to the {sequence_length} positions the task uses")
    if layout.positional_dim > 0:
        notes.append("readout set to [I_d | 0]: the first d coordinates, as the reference returns")
    return notes


@dataclass(frozen=True)
class PreparedImport:
    """A checked reference checkpoint, translated, before anything is written.

    Attributes:
        config: the run's TrainConfig.
        model_state: the TaskModel's state dict (``network.*`` keys).
        record: the import's provenance (import.json).
    """

    config: TrainConfig
    model_state: dict[str, torch.Tensor]
    record: dict[str, Any]
    dtype: torch.dtype = torch.float32


def skipped_summary(read: StateDictFile) -> dict[str, list[str]]:
    """What an import read around, by name: a Lightning checkpoint's other entries, the globals carried as names."""
    return {"entries": list(read.skipped_entries), "globals": list(read.carried_globals)}


def prepare_reference_import(
    path: str | Path, *, num_heads: int | None = None, task: str, N: int | None = None, keys: str = "iid"
) -> PreparedImport:
    """Read and check a reference-encoder checkpoint and translate it (`experiments.models.reference_layout`).

    Args:
        path: a Lightning ``.ckpt``, a torch state dict file or a ``.safetensors`` file (read without unpickling
            arbitrary objects: `constructions.state_dict_files`).
        num_heads: heads per attention block (the reference's nhead; not in the weights). None: from the checkpoint's
            hyper-parameters (`experiments.models.reference_hparams`), which must then say.
        task: the task the model was trained on.
        N: context length (None: from the positional table, else from the hyper-parameter maxN).
        keys: key law of the nearest task.

    Returns:
        PreparedImport (config, model state in the file's precision, import record); nothing is written.

    Raises:
        TypeError, OSError, ValueError: a bad argument, an unreadable file, or one line naming the key that does not
            fit the layout.
    """
    if num_heads is not None:
        check_int("num_heads", num_heads, minimum=1)  # ValueError naming num_heads
    read: StateDictFile = read_state_dict_file(path)
    layout = read_reference_layout(read.tensors, source=str(read.path))
    hyper = check_hyper_parameters(layout, read.hyper_parameters, str(read.path), num_heads)
    heads = num_heads if num_heads is not None else hyper.num_heads
    if heads is None:
        raise ValueError(
            "num_heads must be given: the weights do not record the heads per block, and the file has no "
            "hyper-parameter nheads, rank or total_heads"
        )
    inferred_N = N is None
    config = reference_config(layout, heads, task, N, keys, max_length=hyper.max_length)
    task_length = make_task(config.task, config.d, config.N, config.keys).sequence_length
    state = encoder_state_from_reference(layout, task_length)
    notes = _notes(layout, config, task_length) + list(read.notes)
    if read.dtype == torch.float64:
        notes.append("float64 weights: stored and evaluated in float64")
    if read.carried_globals:
        notes.append(f"{len(read.carried_globals)} global(s) of the file carried as names, never imported or called")
    record: dict[str, Any] = {
        "format": "reference-encoder",
        "reference": REFERENCE_SOURCE,
        "source": str(read.path),
        "source_sha256": read.sha256,
        "container": read.container,
        "prefix": layout.prefix,
        "dtype": dtype_name(read.dtype),
        "inferred": {
            "layers": layout.layers,
            "width": layout.width,
            "d_model": layout.embed_dim,
            "d": layout.d,
            "positional_dim": layout.positional_dim,
            "ffn_dim": layout.ffn_dim,
            "bias": layout.bias,
            "additive_positional": layout.additive,
            "max_length": layout.max_length,
            "N": config.N if inferred_N else None,
            "num_heads": heads if num_heads is None else None,
        },
        "given": {"num_heads": num_heads, "task": task, "N": None if inferred_N else N, "keys": keys},
        "hyper_parameters": hyper.used,
        "skipped": skipped_summary(read),
        "notes": notes,
    }
    return PreparedImport(config, {f"network.{k}": v for k, v in state.items()}, record, read.dtype)


def import_reference_encoder(
    path: str | Path,
    out_dir: str | Path,
    *,
    num_heads: int | None = None,
    task: str,
    N: int | None = None,
    keys: str = "iid",
) -> ImportedRun:
    """Import a reference-encoder checkpoint as a run directory (`prepare_reference_import`, `write_imported_run`).

    Args:
        path: the checkpoint (see `prepare_reference_import`).
        out_dir: the run directory to create (missing or empty).
        num_heads, task, N, keys: see `prepare_reference_import`.

    Returns:
        ImportedRun (directory, config, import record); nothing is written on refusal.
    """
    out = check_import_target(out_dir)
    prepared = prepare_reference_import(path, num_heads=num_heads, task=task, N=N, keys=keys)
    write_imported_run(prepared.config, prepared.model_state, out, prepared.record, prepared.dtype)
    return ImportedRun(out, prepared.config, prepared.record)
