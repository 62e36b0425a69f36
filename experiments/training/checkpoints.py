"""Checkpoints that resume a run exactly, and are checked rather than trusted when read back.

A checkpoint holds model, optimiser, schedule, step, config, every RNG state and the open epoch's statistics. The
sampler's state is that of the run's batch generator, on the CPU or (``sampler = "device"``) on the run's device, so
either path resumes exactly. The optimiser and schedule are saved in the default AdamW's form (learning rates as
floats, step counts on the CPU; `training.schedule.portable_optimizer_state`), so a run resumes under another AdamW
implementation (fused, capturable) or on another device.

File format (version 2): the bytes of one ``torch.save`` dictionary (loadable with ``weights_only=True``) followed by
a fixed-length trailer line ``\\nattnrank-checkpoint-sha256 <64 hex digits>\\n`` holding the sha256 of every byte
before it. ``torch.load`` ignores the trailer (the zip archive is found from its end record), so the file stays an
ordinary torch file; `load_checkpoint` recomputes the digest and refuses the file when it differs, so a flipped byte
anywhere (payload or trailer) is refused before anything is unpickled. Payload and digest are one file written
atomically (temporary ``.checkpoint.pt.*.tmp`` in the same directory + ``os.replace``), so a run killed while saving
keeps its previous checkpoint whole; `remove_stale_temporaries` deletes the temporaries such a kill leaves behind.

After the digest, every field is validated and a bad one is refused with a one-line ValueError naming the file and
the field: the config (and its hash), ``step`` (an integer with 0 <= step <= config.steps, equal to the schedule's
step count; every parameter's AdamW step count an integer in 1 .. step), the statistics (`STATS_FIELDS`: every
key present, of its type, finite where a finite value is required, and the open epoch's step count consistent with
``step``).

Version 1 files (written before the digest existed) carry no digest: they are loaded with a warning, after the same
field validation, so that earlier finished runs stay readable and unfinished ones resume; the next checkpoint a
resumed run writes is version 2.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import warnings
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from experiments.config import EXECUTION_FIELDS, TrainConfig
from experiments.json_files import atomic_write_bytes
from experiments.training.run_directory import ATOMIC_NAMES
from experiments.training.schedule import load_optimizer_state, portable_optimizer_state, portable_scheduler_state
from theory.validation import read_regular_file

CHECKPOINT_VERSION = 2
"""Format written now: payload + sha256 trailer. Version 1 (no trailer) is read with a warning."""
UNVERIFIED_VERSIONS = (1,)
CHECKPOINT_KEYS = ("version", "config", "config_hash", "step", "model", "optimizer", "scheduler", "rng", "stats")
"""Entries every checkpoint holds."""
STATS_FIELDS = ("epoch_sum", "epoch_count", "best", "last_epoch", "elapsed")
"""The loop's epoch statistics every checkpoint holds (see `check_stats`)."""
TRAILER_TAG = b"\nattnrank-checkpoint-sha256 "
TRAILER_LENGTH = len(TRAILER_TAG) + 64 + 1
_TRAILER = re.compile(re.escape(TRAILER_TAG) + rb"([0-9a-f]{64})\n\Z")


def check_same_config(recorded: TrainConfig, config: TrainConfig, source: Path) -> None:
    """ValueError naming the differing fields unless ``recorded`` (read from ``source``) is the run ``config``."""
    if recorded.config_hash() != config.config_hash():
        a, b = recorded.to_dict(), config.to_dict()
        differing = [k for k in a if k not in EXECUTION_FIELDS and a[k] != b[k]]
        detail = ", ".join(f"{k}: {a[k]!r} there vs {b[k]!r} now" for k in differing)
        hint = ""
        if differing == ["steps"] and not (recorded.schedule_steps and config.schedule_steps):
            hint = " (a run extends a shorter one only when both name the same schedule_steps)"
        raise ValueError(f"{source} belongs to a different config ({detail}){hint}; use another output directory")


def check_resumable(recorded: TrainConfig, config: TrainConfig, source: Path) -> None:
    """ValueError unless ``config`` may go on from the state recorded in ``source`` (run ``recorded``).

    It may when it is the same run, or when it extends it (`TrainConfig.extends`: the same schedule, more steps) and
    the recorded run's last epoch was a whole one (its steps a multiple of log_every), so that the extended run's
    epochs, checkpoints and statistics are those of one run trained to the new ``steps`` without a stop.
    """
    if config.extends(recorded):
        if recorded.steps % recorded.log_every:
            raise ValueError(
                f"{source}: the run there stopped at steps = {recorded.steps}, not a multiple of log_every = "
                f"{recorded.log_every}, so its last epoch was cut short and it cannot be extended exactly; "
                "use another output directory"
            )
        return
    check_same_config(recorded, config, source)


def remove_stale_temporaries(directory: Path, names: tuple[str, ...] = ATOMIC_NAMES) -> list[Path]:
    """Delete the ``.<name>.*.tmp`` files an atomic write killed midway left in ``directory``; returns them.

    Call only while no other process writes to ``directory`` (a run directory belongs to one training process).
    """
    removed = []
    for name in names:
        for stale in sorted(Path(directory).glob(f".{name}.*.tmp")):
            if stale.is_file():
                stale.unlink(missing_ok=True)
                removed.append(stale)
    return removed


def numpy_rng_state() -> dict[str, Any]:
    """numpy's global RNG state as tensors and numbers (loadable with torch.load(weights_only=True)).

    Nothing here draws from it, but third-party code might; saving it makes resumption independent of that.
    """
    state = np.random.get_state(legacy=False)  # noqa: NPY002 - the legacy global state is what we must save
    assert isinstance(state, dict)
    return {
        "bit_generator": state["bit_generator"],
        "key": torch.as_tensor(np.asarray(state["state"]["key"], dtype=np.int64)),
        "pos": int(state["state"]["pos"]),
        "has_gauss": int(state["has_gauss"]),
        "gauss": float(state["gauss"]),
    }


def set_numpy_rng_state(state: dict[str, Any]) -> None:
    """Restore numpy's global RNG state saved by `numpy_rng_state`."""
    np.random.set_state(  # noqa: NPY002 - restores the saved global state
        {
            "bit_generator": state["bit_generator"],
            "state": {"key": state["key"].numpy().astype(np.uint32), "pos": state["pos"]},
            "has_gauss": state["has_gauss"],
            "gauss": state["gauss"],
        }
    )


def write_checkpoint_file(path: Path, state: dict[str, Any]) -> None:
    """Atomically write ``state`` as ``torch.save`` bytes followed by their sha256 trailer (no validation)."""

    def write(stream: IO[bytes]) -> None:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        payload = buffer.getvalue()
        stream.write(payload)
        stream.write(TRAILER_TAG + hashlib.sha256(payload).hexdigest().encode("ascii") + b"\n")

    atomic_write_bytes(Path(path), write)


def save_checkpoint(
    path: Path,
    *,
    config: TrainConfig,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    sampler: torch.Generator,
    stats: dict[str, Any],
) -> None:
    """Write the checkpoint of ``config`` after ``step`` steps atomically to ``path`` (RNG states captured now).

    Args:
        stats: the loop's epoch statistics (`STATS_FIELDS`, plain numbers), handed back unchanged by `load_checkpoint`.
    """
    state = {
        "version": CHECKPOINT_VERSION,
        "config": config.to_dict(),
        "config_hash": config.config_hash(),
        "step": step,
        "model": model.state_dict(),
        "optimizer": portable_optimizer_state(optimizer),  # resumable under any AdamW implementation
        "scheduler": portable_scheduler_state(scheduler),
        "rng": {"sampler": sampler.get_state(), "torch": torch.get_rng_state(), "numpy": numpy_rng_state()},
        "stats": stats,
    }
    check_stats(Path(path), stats, step, config)  # never write what load_checkpoint would refuse
    write_checkpoint_file(Path(path), state)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_stats(path: Path, stats: Any, step: int, config: TrainConfig) -> None:
    """ValueError naming ``path`` and the field unless ``stats`` are valid epoch statistics after ``step`` steps.

    epoch_sum: finite real; epoch_count: integer, 0 at the last step, else step mod log_every (the epochs close every
    log_every steps and at the end); last_epoch: finite real once an epoch has closed (step >= log_every), else nan;
    best: the lowest epoch mean on the full task (`graded_epoch_closed`), so +inf until such an epoch has closed,
    then a finite real no larger than last_epoch; elapsed: finite real >= 0.
    """
    if not isinstance(stats, dict):
        raise ValueError(f"{path}: field stats must be a dict, got {type(stats).__name__}")
    missing = [k for k in STATS_FIELDS if k not in stats]
    if missing:
        raise ValueError(f"{path}: field stats is missing {', '.join('stats.' + k for k in missing)}")
    for key in ("epoch_sum", "best", "last_epoch", "elapsed"):
        if not _is_real(stats[key]):
            raise ValueError(f"{path}: field stats.{key} must be a real number, got {stats[key]!r}")
    if not _is_int(stats["epoch_count"]):
        raise ValueError(f"{path}: field stats.epoch_count must be an integer, got {stats['epoch_count']!r}")
    expected_count = 0 if step == config.steps else step % config.log_every
    if stats["epoch_count"] != expected_count:
        raise ValueError(
            f"{path}: field stats.epoch_count is {stats['epoch_count']}, but after step {step} with log_every "
            f"{config.log_every} the open epoch has {expected_count} steps"
        )
    if not math.isfinite(stats["epoch_sum"]):
        raise ValueError(f"{path}: field stats.epoch_sum must be finite, got {stats['epoch_sum']!r}")
    if not math.isfinite(stats["elapsed"]) or stats["elapsed"] < 0:
        raise ValueError(f"{path}: field stats.elapsed must be finite and >= 0, got {stats['elapsed']!r}")
    closed = step >= config.log_every or step == config.steps
    graded = graded_epoch_closed(step, config)
    if closed and not math.isfinite(stats["last_epoch"]):
        raise ValueError(
            f"{path}: field stats.last_epoch must be finite once an epoch has closed, got {stats['last_epoch']!r}"
        )
    if graded and not math.isfinite(stats["best"]):
        raise ValueError(f"{path}: field stats.best must be finite once an epoch has closed, got {stats['best']!r}")
    if not closed and not math.isnan(stats["last_epoch"]):
        raise ValueError(
            f"{path}: field stats.last_epoch must be nan before the first epoch closes, got {stats['last_epoch']!r}"
        )
    if not graded and stats["best"] != math.inf:
        raise ValueError(
            f"{path}: field stats.best must be inf before the first epoch on the full task closes, "
            f"got {stats['best']!r}"
        )
    if graded and stats["best"] > stats["last_epoch"]:
        raise ValueError(f"{path}: field stats.best ({stats['best']!r}) exceeds stats.last_epoch")


def graded_epoch_closed(step: int, config: TrainConfig) -> bool:
    """Whether, after ``step`` steps, an epoch trained wholly on the full task has closed (best_loss is defined).

    Epochs close every log_every steps and at the last step; the last one closed started at
    log_every * floor((step - 1) / log_every) (also for a short final epoch). Without a curriculum every epoch counts.
    """
    if step < config.log_every and step != config.steps:
        return False
    full_from = 0 if config.curriculum is None else config.curriculum.end_step
    last_closed_start = (
        config.log_every * ((step - 1) // config.log_every)
        if step == config.steps
        else (config.log_every * (step // config.log_every - 1))
    )
    return last_closed_start >= full_from


def _check_step(path: Path, state: dict[str, Any], config: TrainConfig) -> int:
    """The validated step count: an integer in [0, config.steps] equal to the schedule's count, and no parameter's
    AdamW step count above it."""
    step = state["step"]
    if not _is_int(step):
        raise ValueError(f"{path}: field step must be an integer, got {step!r}")
    if not 0 <= step <= config.steps:
        raise ValueError(f"{path}: field step is {step}, outside [0, {config.steps}] (the config's steps)")
    scheduler = state["scheduler"]
    if not isinstance(scheduler, dict) or scheduler.get("last_epoch") != step:
        found = scheduler.get("last_epoch") if isinstance(scheduler, dict) else scheduler
        raise ValueError(f"{path}: field scheduler.last_epoch is {found!r}, expected step = {step}")
    optimizer = state["optimizer"]
    if not isinstance(optimizer, dict) or not isinstance(optimizer.get("state"), dict):
        raise ValueError(f"{path}: field optimizer is not an optimiser state")
    for key, entry in optimizer["state"].items():
        counted = entry.get("step") if isinstance(entry, dict) else None
        value = counted.item() if isinstance(counted, torch.Tensor) and counted.numel() == 1 else counted
        # A parameter without a gradient at some step is skipped by AdamW, so its count can only be lower.
        if not isinstance(value, (int, float)) or not 0 < value <= step or value != int(value):
            raise ValueError(f"{path}: field optimizer.state[{key}].step is {value!r}, expected 1 .. step = {step}")
    return step


def _read_verified(path: Path) -> tuple[bytes, bool]:
    """The payload bytes of ``path`` and whether it carried a digest (checked here; a mismatch is refused)."""
    try:
        data = read_regular_file("file", path)  # a FIFO or a device is refused before anything is read
    except OSError as exc:
        raise ValueError(f"{path}: unreadable checkpoint ({exc.strerror or exc})") from exc
    match = _TRAILER.search(data[-TRAILER_LENGTH:])
    if match is None:
        return data, False
    payload = data[:-TRAILER_LENGTH]
    if hashlib.sha256(payload).hexdigest().encode("ascii") != match.group(1):
        raise ValueError(f"{path}: checkpoint integrity check failed (sha256 differs from its trailer); file damaged")
    return payload, True


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load and validate a checkpoint file, refusing anything that is not an intact checkpoint of this format.

    Returns the checkpoint dictionary (CHECKPOINT_KEYS) with ``config`` as a `TrainConfig` and ``step`` validated.
    Every refusal is a ValueError naming ``path`` (and the field, for a field that is wrong).
    """
    path = Path(path)
    payload, verified = _read_verified(path)
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for damaged files
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
        raise ValueError(f"{path}: corrupt or unreadable checkpoint ({detail})") from exc
    if not isinstance(state, dict) or any(k not in state for k in CHECKPOINT_KEYS):
        missing = [k for k in CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
        raise ValueError(f"{path}: not a training checkpoint (missing {', '.join(missing)})")
    version = state["version"]
    if version != CHECKPOINT_VERSION and version not in UNVERIFIED_VERSIONS:
        raise ValueError(f"{path}: field version is {version!r}, expected {CHECKPOINT_VERSION}")
    if version == CHECKPOINT_VERSION and not verified:
        raise ValueError(f"{path}: checkpoint integrity check failed (sha256 trailer missing or damaged)")
    if version != CHECKPOINT_VERSION:
        warnings.warn(
            f"{path}: checkpoint format {version} has no integrity digest; loaded unverified "
            f"(the next checkpoint is written in format {CHECKPOINT_VERSION})",
            stacklevel=2,
        )
    if not isinstance(state["config"], dict):
        raise ValueError(f"{path}: field config must be a dict, got {type(state['config']).__name__}")
    try:
        config = TrainConfig.from_dict(state["config"])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: field config is invalid ({exc})") from exc
    if state["config_hash"] != config.config_hash():
        raise ValueError(f"{path}: field config_hash does not match the recorded config")
    state["config"] = config
    state["step"] = _check_step(path, state, config)
    check_stats(path, state["stats"], state["step"], config)
    return state


def restore_checkpoint(
    path: Path,
    config: TrainConfig,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    sampler: torch.Generator,
) -> tuple[int, dict[str, Any]]:
    """Load ``path`` (a checkpoint of ``config``, or of a shorter run ``config`` extends) into the run's objects and
    the global torch and numpy RNGs.

    Returns:
        (steps done, the saved epoch statistics, validated by `check_stats`).
    """
    state = load_checkpoint(path)
    check_resumable(state["config"], config, path)
    check_stats(path, state["stats"], state["step"], config)  # an extension's statistics must fit the new run too
    try:
        model.load_state_dict(state["model"])
        load_optimizer_state(optimizer, state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        sampler.set_state(state["rng"]["sampler"])
        torch.set_rng_state(state["rng"]["torch"])
        set_numpy_rng_state(state["rng"]["numpy"])
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
        raise ValueError(f"{path}: checkpoint does not match the model of this config ({detail})") from exc
    return state["step"], state["stats"]
