"""Benchmark: one CPU training step of our encoder against the reference encoder's, one process, one thread (issue 51).

For fig1's paper-scale cells (task farthest, d = 64, N = 16, c = 1, FFN 2048, batch 256, AdamW, layers copied at
initialisation) at L = 3 r = 32, L = 3 r = 64 and L = 1 r = 32, it times one whole optimiser step of the training
loop (`Training.optimizer_step`: draw the batch, forward, backward, AdamW, schedule) for three models trained by the
same loop on the same batches, round by round in one process (torch.set_num_threads(1)), so the three see the same
allocator, the same load and the same processor state:

- ``ours``: the encoder as it is (experiments/models/encoder.py, the feed-forward block of
  experiments/models/feed_forward.py);
- ``today``: the same model with each layer's feed-forward block written as before issue 51, F.linear, F.relu,
  F.linear (`PlainFeedForwardLayer`, below). Its losses must be bitwise ours, step for step: the benchmark checks it
  and records the answer (``bitwise``);
- ``reference``: the authors' encoder, written here from its description (`ReferenceEncoder`): stock
  ``nn.TransformerEncoderLayer`` (post-norm, ReLU FFN, dropout 0, batch_first) in a stock ``nn.TransformerEncoder``,
  its two LayerNorms replaced by x -> s x / ||x|| with a learned scalar s, and c stock ``nn.MultiheadAttention``
  blocks (embed D, D / r heads) averaged (experiments/models/reference_layout.py documents the layout).

Beside them, ``products``: the step's feed-forward matrix products alone (per layer the two forward products and the
four of backward, with the shapes and operand layouts autograd gives them, fresh outputs as in a step). Every
implementation that trains this model in eager float32 runs these products, ours and the reference's alike, so
``reference / products`` bounds the speed-up over the reference any such implementation can reach (issue 51's goal
is reference / ours >= 1.3 at d = 64, L = 3).

The allocator: like ``attnrank train``, the benchmark re-executes itself once with jemalloc preloaded when the library
is installed (`experiments.allocator`); ``ATTNRANK_ALLOCATOR=system`` keeps glibc's malloc. Which one ran (jemalloc
mapped into the process or not), ``MALLOC_CONF``, and the 1-minute load average before and after every cell are
recorded: timings on a loaded machine are slower by its load, and ``cpu ms`` (the thread's CPU time, which excludes
time waiting for a core) is printed beside the wall time for that reason. Quote only wall times from a quiet machine.

Usage:
    python benchmarks/bench_cpu_step.py --record benchmarks/results           # the three cells (minutes, quiet machine)
    ATTNRANK_ALLOCATOR=system python benchmarks/bench_cpu_step.py --record benchmarks/results   # under glibc malloc
    python benchmarks/bench_cpu_step.py --tiny --repeats 2                     # a rehearsal in seconds
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from experiments.allocator import SWITCH, reexec_with_allocator  # noqa: E402  (standard library only)

if __name__ == "__main__":
    reexec_with_allocator((Path(__file__).name,))  # before torch is loaded: the same process, jemalloc preloaded

import argparse  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from machine import allocator_state, processor, revision  # noqa: E402
from torch import nn  # noqa: E402

from experiments.config import TrainConfig  # noqa: E402
from experiments.models.encoder import PaperEncoderLayer  # noqa: E402
from experiments.models.factory import TaskModel  # noqa: E402
from experiments.training.packed import TrainedRuns  # noqa: E402
from experiments.training.run_loop import Training  # noqa: E402
from experiments.training.run_start import fresh_run  # noqa: E402
from experiments.training.schedule import make_optimizer, optimizer_kind  # noqa: E402

PAPER_CELL = {
    "task": "farthest",
    "d": 64,
    "N": 16,
    "width": 1,
    "ffn_dim": 2048,
    "batch_size": 256,
    "layer_init": "copies",
    "steps": 100_000,
    "warmup_steps": 5000,
    "warmup_fraction": 0.0,
    "schedule_steps": 100_000,
}
"""fig1's paper-scale cell (the reference recipe's widths, batch and schedule)."""
PAPER_SHAPES = [(3, 32), (3, 64), (1, 32)]
"""(L, r) of the timed cells: issue 51's three."""
TINY_CELL = {"task": "farthest", "d": 8, "N": 4, "width": 1, "ffn_dim": 16, "batch_size": 8, "layer_init": "copies"}
TINY_SHAPES = [(3, 4), (3, 8), (1, 4)]
"""A rehearsal (--tiny): the same three cells shrunk so that the whole benchmark takes seconds."""
PATHS = ("ours", "today", "reference")
GOAL = 1.3
"""Issue 51's goal for reference / ours at d = 64, L = 3."""


# ------------------------------------------------------------------------------------------------ the two baselines
class PlainFeedForwardLayer(PaperEncoderLayer):
    """Our encoder layer with its feed-forward block as it was written before issue 51:
    norm2(h + linear2(relu(linear1(h)))) with F.linear and an out-of-place F.relu (three (B N, F) tensors a step)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x + self.self_attn(x))  # (B, N, D)
        return self.norm2(h + self.linear2(F.relu(self.linear1(h))))  # (B, N, D)


def with_plain_feed_forward(model: nn.Module) -> nn.Module:
    """``model`` with every `PaperEncoderLayer` turned into a `PlainFeedForwardLayer` (same parameters, same map)."""
    for layer in model.modules():
        if type(layer) is PaperEncoderLayer:
            layer.__class__ = PlainFeedForwardLayer
    return model


class ScalarL2Norm(nn.Module):
    """x -> s x / ||x|| over the last axis, with one learned scalar s stored as (1,): the reference's LayerNorm.

    The norm is not clamped (the reference's is not); ``eps = 0.0`` says so to nn.TransformerEncoder, which reads the
    attribute of a layer's norms when it is built."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.eps = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x / x.norm(dim=-1, keepdim=True)


class ReferenceLayer(nn.TransformerEncoderLayer):
    """Stock post-norm layer (ReLU FFN, dropout 0, batch_first) with the norms replaced by `ScalarL2Norm` and its
    self-attention replaced by the average of ``width`` stock nn.MultiheadAttention blocks (``widened_self_attn``;
    the stock ``self_attn`` stays registered and unused, as in the reference's state dicts)."""

    def __init__(self, embed_dim: int, rank: int, width: int, ffn_dim: int) -> None:
        heads = embed_dim // rank
        super().__init__(embed_dim, heads, ffn_dim, dropout=0.0, activation="relu", batch_first=True, norm_first=False)
        self.norm1 = ScalarL2Norm()  # type: ignore[assignment]
        self.norm2 = ScalarL2Norm()  # type: ignore[assignment]
        self.widened_self_attn = nn.ModuleList(
            nn.MultiheadAttention(embed_dim, heads, dropout=0.0, batch_first=True) for _ in range(width)
        )

    def _sa_block(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None, key_padding_mask: torch.Tensor | None, is_causal=False
    ) -> torch.Tensor:
        blocks = [block(x, x, x, need_weights=False)[0] for block in self.widened_self_attn]  # each (B, N, D)
        return self.dropout1(sum(blocks) / len(blocks))  # type: ignore[arg-type]


class ReferenceEncoder(nn.Module):
    """L `ReferenceLayer`s in a stock nn.TransformerEncoder (its L layers deep copies of one): tokens (B, N, D) in,
    (B, N, D) out, as our `TaskModel` feeds an encoder."""

    def __init__(self, d: int, rank: int, width: int, ffn_dim: int, layers: int) -> None:
        super().__init__()
        layer = ReferenceLayer(d, rank, width, ffn_dim)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.encoder(tokens)  # (B, N, D)


# ----------------------------------------------------------------------------------------------------- the timings
def build_training(config: TrainConfig, path: str) -> Training:
    """The loop's state for one model of ``config`` (path: ours, today or reference), ready to step."""
    run = fresh_run(config)  # the run as `attnrank train` starts it: task, model, AdamW, schedule, generator
    if path == "today":
        run.model = with_plain_feed_forward(run.model)
    elif path == "reference":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            network = ReferenceEncoder(config.d, config.rank, config.width, config.ffn_dim, config.layers)
        run.model = TaskModel(run.task, network, "sequence").to(run.device)
    if path != "ours":
        kind = optimizer_kind(config, run.device)
        run.optimizer, run.scheduler = make_optimizer(run.model.parameters(), config, kind)
    run.model.train()
    return Training.of(TrainedRuns([run]))


def _timed(action: Callable[[], object], inner: int) -> tuple[float, float]:
    """Wall and thread-CPU milliseconds per call of ``inner`` calls of ``action``."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(inner):
        action()
    return 1e3 * (time.perf_counter() - wall) / inner, 1e3 * (time.thread_time() - cpu) / inner


def feed_forward_products(config: TrainConfig) -> Callable[[], None]:
    """One step's feed-forward products for ``config`` (L layers x 2 forward + 4 backward), as autograd runs them."""
    M, D, F_ = config.batch_size * config.N, config.embed_dim_value, config.ffn_dim
    gen = torch.Generator().manual_seed(0)
    h, grad = torch.randn(M, D, generator=gen), torch.randn(M, D, generator=gen)  # (M, D)
    hidden, grad_hidden = torch.randn(M, F_, generator=gen).relu_(), torch.randn(M, F_, generator=gen)  # (M, F)
    w1, b1 = torch.randn(F_, D, generator=gen), torch.randn(F_, generator=gen)
    w2, b2 = torch.randn(D, F_, generator=gen), torch.randn(D, generator=gen)

    def run() -> None:
        for _ in range(config.layers):
            torch.addmm(b1, h, w1.t())  # forward (M, F)
            torch.addmm(b2, hidden, w2.t())  # forward (M, D)
            grad.mm(w2)  # the hidden activations' gradient (M, F)
            grad.t().mm(hidden)  # W2's gradient (D, F)
            grad_hidden.t().mm(h)  # W1's gradient (F, D)
            grad_hidden.mm(w1)  # the input's gradient (M, D)

    return run


def time_cell(config: TrainConfig, repeats: int, inner: int, warmup: int) -> dict[str, Any]:
    """Medians over ``repeats`` rounds of each path's ms per step (and of the products alone), plus the checks."""
    row: dict[str, Any] = {"layers": config.layers, "rank": config.rank, "d": config.d, "load_before": os.getloadavg()}
    trainings = {path: build_training(config, path) for path in PATHS}
    losses: dict[str, list[float]] = {path: [] for path in PATHS}

    def step(path: str) -> None:
        losses[path].extend(trainings[path].optimizer_step()[0].tolist())

    for path in PATHS:
        for _ in range(warmup):
            step(path)
    products = feed_forward_products(config)
    products()  # warm-up
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in (*PATHS, "products")}
    actions: dict[str, Callable[[], object]] = {path: functools.partial(step, path) for path in PATHS}
    actions["products"] = products
    order = list(samples)
    for round_ in range(repeats):
        rotated = order[round_ % len(order) :] + order[: round_ % len(order)]  # no name always goes first
        for name in rotated:
            samples[name].append(_timed(actions[name], inner))
    for name, values in samples.items():
        row[f"{name}_ms"] = statistics.median(v[0] for v in values)
        row[f"{name}_cpu_ms"] = statistics.median(v[1] for v in values)
    row["reference_over_ours"] = row["reference_ms"] / row["ours_ms"]
    row["today_over_ours"] = row["today_ms"] / row["ours_ms"]
    row["reference_over_products"] = row["reference_ms"] / row["products_ms"]
    row["bitwise"] = losses["ours"] == losses["today"]  # same init, same batches: the same losses, step for step
    row["steps_compared"] = len(losses["ours"])
    row["load_after"] = os.getloadavg()
    return row


def _config(cell: dict[str, Any], layers: int, rank: int) -> TrainConfig:
    return TrainConfig(**{**cell, "layers": layers, "rank": rank, "device": "cpu"})


# ----------------------------------------------------------------------------------------------------- the record
def _print(row: dict[str, Any]) -> None:
    parts = [f"L={row['layers']} r={row['rank']:2d}"]
    for name in (*PATHS, "products"):
        parts.append(f"{name} {row[f'{name}_ms']:8.1f} ms (cpu {row[f'{name}_cpu_ms']:8.1f})")
    parts.append(f"ref/ours {row['reference_over_ours']:.3f}  today/ours {row['today_over_ours']:.3f}")
    parts.append(f"bitwise {row['bitwise']}  load {row['load_before'][0]:.2f}/{row['load_after'][0]:.2f}")
    print("  ".join(parts), flush=True)


def record(folder: Path, rows: list[dict[str, Any]], meta: dict[str, Any], tiny: bool) -> Path:
    """Write bench_cpu_step_DATE[-system-malloc][-tiny].{json,md} into ``folder`` (the suffix when jemalloc was not
    mapped, so that the two allocators' records of one day sit side by side); returns the stem."""
    folder.mkdir(parents=True, exist_ok=True)
    malloc = "" if meta["allocator"]["jemalloc_mapped"] else "-system-malloc"
    stem = folder / f"bench_cpu_step_{datetime.date.today().isoformat()}{malloc}{'-tiny' if tiny else ''}"
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    alloc = meta["allocator"]
    lines = [
        "# One CPU training step: ours, today's (before issue 51) and the reference encoder's",
        "",
        f"- command: `{meta['command']}`",
        f"- {meta['date']}; {meta['processor']}, {meta['cores']} logical cores; Python {meta['python']}, torch "
        f"{meta['torch']}, {meta['threads']} torch thread; revision {meta['revision']}",
        f"- allocator: jemalloc mapped = {alloc['jemalloc_mapped']} (LD_PRELOAD `{alloc['LD_PRELOAD']}`, MALLOC_CONF "
        f"`{alloc['MALLOC_CONF']}`, {SWITCH} `{alloc[SWITCH]}`); the same for every column",
        f"- cell: {meta['cell']}; medians of {meta['repeats']} rounds of {meta['inner']} step(s) per path, after "
        f"{meta['warmup']} warm-up steps; the paths interleaved round by round",
        f"- `uptime` after the run: {meta['uptime_after']}",
        "- ours: the encoder of this revision; today: its feed-forward block written as before issue 51 (F.linear, "
        "F.relu, F.linear); reference: stock nn.TransformerEncoderLayer with the scalar L2 norms and c averaged "
        "nn.MultiheadAttention blocks; products: the step's feed-forward matrix products alone (a floor for every "
        "eager float32 implementation); bitwise: today's losses equal ours at every timed and warm-up step; "
        "load: 1-minute load average before / after the cell. Wall ms, with the thread's CPU ms in brackets.",
        f"- goal (issue 51): reference / ours >= {GOAL} at d = 64, L = 3",
        "",
        "| L | r | ours ms | today ms | reference ms | products ms | reference / ours | today / ours | "
        "reference / products | bitwise | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        timings = " | ".join(f"{r[f'{n}_ms']:.1f} ({r[f'{n}_cpu_ms']:.1f})" for n in (*PATHS, "products"))
        lines.append(
            f"| {r['layers']} | {r['rank']} | {timings} | {r['reference_over_ours']:.3f} | {r['today_over_ours']:.3f} "
            f"| {r['reference_over_products']:.3f} | {r['bitwise']} ({r['steps_compared']} steps) | "
            f"{r['load_before'][0]:.2f} / {r['load_after'][0]:.2f} |"
        )
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per cell (median; >= 1, default 7)")
    parser.add_argument("--inner", type=int, default=2, help="steps per path per round (>= 1, default 2)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per path before timing (default 3)")
    parser.add_argument("--tiny", action="store_true", help="a rehearsal: d = 8 cells that run in seconds")
    parser.add_argument(
        "--record", type=Path, help="folder to write bench_cpu_step_DATE[-system-malloc][-tiny].{json,md} into"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.inner < 1 or args.warmup < 0:
        parser.error("--repeats and --inner must be >= 1 and --warmup >= 0")
    torch.set_num_threads(1)
    cell, shapes = (TINY_CELL, TINY_SHAPES) if args.tiny else (PAPER_CELL, PAPER_SHAPES)
    allocator = allocator_state()
    print(f"allocator: {allocator}", flush=True)
    rows = []
    for layers, rank in shapes:
        row = time_cell(_config(cell, layers, rank), args.repeats, args.inner, args.warmup)
        _print(row)
        rows.append(row)
    if not all(row["bitwise"] for row in rows):
        print("error: today's losses differ from ours (the feed-forward change is not bitwise)", file=sys.stderr)
    if args.record:
        words = sys.argv[1:] if argv is None else argv
        meta = {
            "command": "python benchmarks/bench_cpu_step.py " + " ".join(words),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "processor": processor(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "revision": revision(),
            "allocator": allocator,
            "cell": {
                k: v for k, v in cell.items() if k not in ("steps", "warmup_steps", "warmup_fraction", "schedule_steps")
            },
            "repeats": args.repeats,
            "inner": args.inner,
            "warmup": args.warmup,
            "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        }
        stem = record(args.record, rows, meta, args.tiny)
        print(f"recorded {stem}.json and {stem}.md")
    return 0 if all(row["bitwise"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
