"""Benchmark: the share of a training step spent drawing the batch on the CPU, per deciding cell.

Every task draws its batches on the CPU in float64 (`experiments.tasks`: targets are decided in float64) and moves
them to the model's device as float32. On a GPU that draw is not hidden behind the model's arithmetic, which is the
lead for the step costs measured on an H200 (results/gpu-2026-12-04/README.md: 17-190 ms per step where the
arithmetic alone needs a few ms). This benchmark measures, in one process on the CPU:

- ``draw``: the training loop's own draw (`experiments.training.packed.TrainedRuns.draw`: ``task.sample`` in
  float64, then ``.to(cpu, float32)``), median over repeats;
- ``step``: one whole optimiser step of the training loop (`Training.optimizer_step`: the same draw, forward,
  backward, AdamW), median over repeats, after warm-up steps; the baseline: ``draw / step`` is the draw's share of a
  CPU step;
- ``randn32``: ``torch.randn`` in float32 of as many numbers as the batch's inputs hold, the floor any sampler needs;
  ``draw / randn32`` says how far the draw is above drawing its raw numbers.

Cells: each multi-layer preset's slowest gpu-scale cell (the paper's sizes, `GPU_STEPS`) and its long-scale deciding
cells on this machine's scale (d = 16). Time it on a quiet machine with one torch thread (the sweep workers' setting);
the 1-minute load average before and after is recorded.

Usage:
    python benchmarks/bench_batch_draw.py --record benchmarks/results
    python benchmarks/bench_batch_draw.py --repeats 3 --cells smoke     # a rehearsal in seconds
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from experiments.config import TrainConfig  # noqa: E402
from experiments.studies import get_preset  # noqa: E402
from experiments.training.packed import TrainedRuns  # noqa: E402
from experiments.training.run_loop import Training  # noqa: E402
from experiments.training.run_start import fresh_run  # noqa: E402

WARMUP_STEPS = 3
"""Optimiser steps taken before timing (first-call allocations, AdamW state creation)."""


def _slowest_gpu_cell(preset: str) -> TrainConfig:
    """The gpu scale's cell with the most work per step (largest N, then rank 1: the most heads)."""
    configs = [c for c in get_preset(preset).runs("gpu") if isinstance(c, TrainConfig)]
    return max(configs, key=lambda c: (c.N, c.layers, -c.rank))


def _long_cells(preset: str) -> list[TrainConfig]:
    """The long scale's distinct cells (d, N, L, r, positions), one config each: seed, budget and temperature do not
    change the work of a step."""
    configs = [c for c in get_preset(preset).runs("long") if isinstance(c, TrainConfig)]
    seen: dict[tuple[Any, ...], TrainConfig] = {}
    for c in configs:
        seen.setdefault((c.d, c.N, c.layers, c.rank, c.positional), c)
    return list(seen.values())


def cells(which: str) -> list[tuple[str, TrainConfig]]:
    """(label, config) of the cells to time: ``all`` or ``smoke`` (one small cell)."""
    if which == "smoke":
        return [("fig1 long", next(c for c in _long_cells("fig1") if c.d == 16))]
    chosen: list[tuple[str, TrainConfig]] = []
    for preset in ("fig1", "posn", "conjecture6", "icl"):
        chosen.append((f"{preset} gpu", _slowest_gpu_cell(preset)))
    for preset in ("fig1", "conjecture6"):
        chosen += [(f"{preset} long", c) for c in _long_cells(preset) if c.d == 16]
    return chosen


def _median_seconds(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_cell(config: TrainConfig, repeats: int) -> dict[str, Any]:
    """Medians (ms) of the draw, the whole CPU step and the float32 randn floor for one config."""
    config = TrainConfig(**{**config.to_dict(), "device": "cpu", "compile": False, "bf16": False})
    training = Training.of(TrainedRuns([fresh_run(config)]))  # the run as `attnrank train` starts it
    for _ in range(WARMUP_STEPS):
        training.optimizer_step()
    step = _median_seconds(training.optimizer_step, repeats)
    task, runs = training.task, training.runs
    generator = torch.Generator().manual_seed(12345)
    draw = _median_seconds(lambda: runs.draw(task.at_step(0), [generator]), repeats)
    batch = runs.draw(task.at_step(0), [generator])
    numbers = batch.tokens.numel()
    randn32 = _median_seconds(lambda: torch.randn(numbers, generator=generator, dtype=torch.float32), repeats)
    return {
        "task": config.task,
        "d": config.d,
        "N": config.N,
        "layers": config.layers,
        "rank": config.rank,
        "width": config.width,
        "batch": config.batch_size,
        "ffn": config.ffn_dim,
        "draw_ms": 1e3 * draw,
        "step_ms": 1e3 * step,
        "randn32_ms": 1e3 * randn32,
        "draw_share_of_step": draw / step,
        "draw_over_randn32": draw / randn32,
    }


def _load() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="timed repeats per measurement (median; >= 3)")
    parser.add_argument("--cells", choices=("all", "smoke"), default="all")
    parser.add_argument("--record", type=Path, help="folder to write bench_batch_draw_DATE.{json,md} into")
    args = parser.parse_args(argv)
    if args.repeats < 3:
        parser.error(f"--repeats must be >= 3, got {args.repeats}")
    torch.set_num_threads(1)
    rows = []
    for label, config in cells(args.cells):
        before = _load()
        row = {"cell": label, **time_cell(config, args.repeats), "load_before": before, "load_after": _load()}
        rows.append(row)
        print(
            f"{label:18s} d={row['d']:3d} N={row['N']:3d} L={row['layers']} r={row['rank']:3d} "
            f"draw {row['draw_ms']:8.2f} ms  step {row['step_ms']:9.2f} ms  share {row['draw_share_of_step']:.3f}  "
            f"draw/randn32 {row['draw_over_randn32']:6.1f}  load {before:.2f}/{row['load_after']:.2f}",
            flush=True,
        )
    if args.record:
        _record(args.record, rows, args.repeats)
    return 0


def _record(folder: Path, rows: list[dict[str, Any]], repeats: int) -> None:
    revision = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPOSITORY, capture_output=True, text=True).stdout
    meta = {
        "command": "python benchmarks/bench_batch_draw.py --record benchmarks/results",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} logical cores, {platform.platform()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "revision": revision + (" (dirty)" if dirty.strip() else ""),
        "repeats": repeats,
    }
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"bench_batch_draw_{datetime.date.today().isoformat()}"
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Batch draw vs whole CPU training step, per deciding cell",
        "",
        f"- command: `{meta['command']}`",
        f"- {meta['date']}; {meta['machine']}; Python {meta['python']}, torch {meta['torch']}, "
        f"{meta['threads']} torch thread; revision {meta['revision']}; medians of {repeats} repeats",
        "- draw: the loop's float64 draw + float32 copy; step: a whole optimiser step (draw included); randn32: "
        "float32 randn of the batch's input size; load: 1-minute load average before / after the cell",
        "",
        "| cell | d | N | L | r | batch | FFN | draw ms | step ms | draw / step | draw / randn32 | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cell']} | {r['d']} | {r['N']} | {r['layers']} | {r['rank']} | {r['batch']} | {r['ffn']} | "
            f"{r['draw_ms']:.2f} | {r['step_ms']:.1f} | {r['draw_share_of_step']:.3f} | {r['draw_over_randn32']:.1f} | "
            f"{r['load_before']:.2f} / {r['load_after']:.2f} |"
        )
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"recorded {stem}.json and {stem}.md")


if __name__ == "__main__":
    sys.exit(main())
