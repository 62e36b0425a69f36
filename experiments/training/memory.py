"""Memory estimates checked before a request starts: the memory available now, and what one training run holds.

Commands and library entry points estimate the bytes a request will allocate and refuse it up front when the estimate
exceeds the memory available now (docs/reliability.md, "Memory"), instead of failing hours in or being killed by the
kernel. Nothing here imports torch (a sweep's driver process uses it).
"""

from __future__ import annotations

import math
import os

from experiments.config import TrainConfig
from experiments.model_kinds import model_kind


def available_memory() -> int:
    """Bytes of memory available now: Linux MemAvailable, else free pages (os.sysconf), else 4 GiB."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return 4 * 2**30


def format_bytes(n: float) -> str:
    """``1.5 GiB`` style."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def check_memory(bytes_needed: float, what: str, source: str) -> None:
    """Refuse (ValueError) a request whose estimated memory exceeds what is available now, naming the estimate.

    Args:
        bytes_needed: an upper estimate of the bytes the request allocates (may be astronomically large or inf).
        what: what the bytes hold, e.g. "the d x d weight matrices".
        source: the flag(s) or argument(s) that set the size, as typed (e.g. "--d", "workers"); starts the message.
    """
    available = available_memory()
    if not math.isfinite(bytes_needed) or bytes_needed > available:
        needed = "more than can be counted" if not math.isfinite(bytes_needed) else format_bytes(bytes_needed)
        raise ValueError(
            f"{source}: {what} need about {needed}, more than the {format_bytes(available)} of memory available; "
            "use smaller sizes"
        )


def training_bytes(config: TrainConfig) -> float:
    """A rough upper estimate of the bytes one training step of ``config`` holds (float32; parameters, AdamW state,
    activations): its model kind's estimate (`experiments.model_kinds.ModelKind.training_bytes`), summed.

    Returns:
        bytes, as a float (exact integers would be no more honest than the estimate).
    """
    return math.fsum(training_byte_terms(config).values())


def training_byte_terms(config: TrainConfig, batch_size: int | None = None) -> dict[str, float]:
    """`training_bytes` split by what sets each part, keyed by the flags that size it (as `attnrank train` spells
    them; `ModelKind.training_bytes`). ``batch_size`` replaces the config's (an evaluation's batches)."""
    return model_kind(config.model).training_bytes(config, batch_size)


def training_memory_source(config: TrainConfig) -> str:
    """The flags of the largest part of `training_bytes` (`training_byte_terms`): what a refusal blames."""
    terms = training_byte_terms(config)
    return max(terms, key=lambda flags: terms[flags])


def evaluation_bytes(config: TrainConfig, batch_size: int) -> float:
    """An upper estimate of the bytes an evaluation of the run ``config`` holds: its model and one batch of
    ``batch_size`` held-out samples, counted as `training_bytes` counts a training step of that batch (the forward
    pass alone holds less: no gradients, no AdamW state, no fixed set)."""
    terms = training_byte_terms(config, batch_size)
    return math.fsum(value for flags, value in terms.items() if flags != "--train-batches")
