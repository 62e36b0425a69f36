"""Memory estimates checked before a request starts: the memory available now, and what one training run holds.

Commands and library entry points estimate the bytes a request will allocate and refuse it up front when the estimate
exceeds the memory available now (docs/reliability.md, "Memory"), instead of failing hours in or being killed by the
kernel. Nothing here imports torch (a sweep's driver process uses it).
"""

from __future__ import annotations

import math
import os

from experiments.config import TrainConfig


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
    """A rough upper estimate of the bytes one training step holds (float32; parameters, AdamW state, activations).

    Per layer: H heads of rank r on width D (query/key maps H r D each, value maps H D D), a feed-forward block of
    width ffn_dim; activations of batch_size (N + 1) tokens (icl: 2 N + 1) kept for the backward pass: the token
    streams, the per-head queries/keys/values, the (N + 1) x (N + 1) score matrices and the feed-forward hidden layer,
    times 3 for the backward pass and autograd's temporaries. A fixed training set (train_batches = K) adds its K
    batches, held for the whole run: tokens, context and target, each at most batch_size (N + 1) x D floats.

    Args:
        config: the run's (validated) config.
    Returns:
        bytes, as a float (exact integers would be no more honest than the estimate).
    """
    return math.fsum(training_byte_terms(config).values())


def training_byte_terms(config: TrainConfig, batch_size: int | None = None) -> dict[str, float]:
    """`training_bytes` split by what sets each part, keyed by the flags that size it (as `attnrank train` spells
    them): the attention weights and their AdamW state, the attention activations, the feed-forward block (weights,
    state and hidden activations, all proportional to ffn_dim) and a fixed training set. ``batch_size`` replaces the
    config's (an evaluation's batches)."""
    D, heads, layers = config.model_width, config.heads, config.layers  # D: the residual width
    batch = config.batch_size if batch_size is None else batch_size
    tokens = batch * (2 * config.N + 1 if config.task == "icl" else config.N + 1)
    width = "--embed-dim" if config.embed_dim else "--d"
    attention_params = layers * (heads * (2 * config.rank * D + D * D) + 4 * D)
    attention_per_token = layers * (6 * D + heads * (2 * config.rank + D + config.N + 1))
    return {
        f"{width}/--width/--rank/--layers": 4.0 * 4 * attention_params,
        f"--batch-size/--N/{width}/--width/--layers": 4.0 * 3 * tokens * attention_per_token,
        "--ffn-dim": 4.0 * (4 * layers * 2 * D * config.ffn_dim + 3 * tokens * layers * 2 * config.ffn_dim),
        "--train-batches": 4.0 * config.train_batches * 3 * tokens * D,
    }


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
