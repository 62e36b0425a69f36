"""Benchmark: a packed fig1 training step against the arithmetic it does (issue 29), old path beside new.

For Figure 1's deciding cells at the paper's size (d = 64, N = 16, c = 1, FFN 2048, batch 256; L = 1 and L = 3; the
pack's runs cycle through ranks 64, 32, 8 and seeds) and packs of K = 1, 4, 16 runs, it times one whole optimiser
step of the training loop (`Training.optimizer_step`: draw every run's batch, forward, backward, AdamW, schedule) by
two paths, in one process:

- ``old``: sampler "cpu" (float64 draw on the CPU, moved to the device), eager step, the default AdamW;
- ``new``: sampler "device" (float32 draw on the run's device), on CUDA the step captured (``--capture``, default
  "graph") with the capturable / fused AdamW; on a CPU the capture is inactive, so ``new`` differs from ``old`` only
  by the draw.

Beside each it times a matmul of the same FLOPs in the same dtype (square n x n by n x n, n = (FLOPs / 2)^(1/3)) and
reports ``step / matmul``: how far the step is above the arithmetic it does (issue 29's target: <= 2 at K = 9 on a
GPU). The FLOPs come from `step_flops` (the model below), so the achieved TFLOP/s are comparable across devices.

FLOP model of one packed step (K runs, T = B N tokens, D = d, E = c D projected coordinates, F = FFN width), per
layer forward: in-projection 2 T D 3E, scores and weighted values 2 x 2 B N^2 E, out-projection 2 T E D, feed-forward
2 x 2 T D F; a step is 3 x forward (backward is two products per forward product); elementwise work is not counted.
At the paper's size L = 3 this is 20.8 GFLOP per run (issue 29's 6 x 0.84M parameters x 4096 tokens, plus the scores).
`projection` turns it into projected GPU step and call times at a given rate and step / matmul ratio.

On a CPU the ratios say what the host costs (draw, dispatch, optimiser) beyond the products; record the load, since
a loaded machine's timings are slower by its load.

Usage:
    python benchmarks/bench_device_step.py --record benchmarks/results              # the full table (CPU: minutes)
    python benchmarks/bench_device_step.py --ks 1 --layers 1 --repeats 2 --tiny      # a rehearsal in seconds
    python benchmarks/bench_device_step.py --device cuda --precision high --ks 1 4 9 16 --record results/fig1-gpu
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
from experiments.training.packed import TrainedRuns  # noqa: E402
from experiments.training.run import resolve_device  # noqa: E402
from experiments.training.run_loop import Training  # noqa: E402
from experiments.training.run_start import fresh_run  # noqa: E402
from experiments.training.step_capture import matmul_precision  # noqa: E402

PAPER_CELL = {
    "task": "farthest",
    "d": 64,
    "N": 16,
    "width": 1,
    "ffn_dim": 2048,
    "batch_size": 256,
    "lr": 0.01,
    "temperature": 1.0,
    "steps": 100_000,
    "schedule_steps": 100_000,
    "warmup_steps": 5000,
    "warmup_fraction": 0.0,
    "layer_init": "copies",
    "log_every": 100,
}
"""fig1's paper-scale cell (experiments/sweeps: fig1 paper, the reference recipe)."""
CPU_CELL = {"task": "farthest", "d": 16, "N": 8, "width": 1, "ffn_dim": 256, "batch_size": 128, "temperature": 128.0}
"""fig1's cpu-scale cell (d = 16, N = 8, FFN 256, batch 128): the path the cpu presets take."""
TINY_CELL = {"task": "farthest", "d": 8, "N": 4, "width": 1, "ffn_dim": 16, "batch_size": 8}
"""A rehearsal cell (--tiny): seconds for the whole table."""
RANKS = {64: (64, 32, 8), 16: (16, 8, 4), 8: (8, 4, 2)}
"""Ranks a pack cycles through, per d (fig1's deciding ranks r = d, d/2, d/8)."""
WARMUP_STEPS = 4
"""Steps before timing (allocations, AdamW state, and on CUDA the graph's three eager steps and its capture)."""
RATES_TFLOPS = {"tf32": 400.0, "fp32": 50.0}
"""The matmul rates issue 29 assumes for an H200 (TF32 dense, plain fp32), for the projections."""


def step_flops(config: TrainConfig, runs: int) -> float:
    """FLOPs of one packed optimiser step of ``runs`` runs of ``config`` (module docstring's model)."""
    B, N, D, F = config.batch_size, config.N, config.embed_dim_value, config.ffn_dim
    E, T = config.width * D, config.batch_size * config.N
    per_layer = 2 * T * D * 3 * E + 2 * 2 * B * N * N * E + 2 * T * E * D + 2 * 2 * T * D * F
    return 3.0 * per_layer * config.layers * runs


def projection(flops_per_step: float, rate_tflops: float, ratio: float, steps: int) -> dict[str, float]:
    """Projected step time (ms) and time of ``steps`` steps (s) at ``ratio`` x the matmul time at ``rate_tflops``."""
    step_s = ratio * flops_per_step / (rate_tflops * 1e12)
    return {"step_ms": 1e3 * step_s, "run_s": step_s * steps}


def pack_configs(cell: dict[str, Any], layers: int, runs: int, path: str, capture: str, precision: str, device: str):
    """``runs`` configs of one pack: ranks cycling through the cell's deciding ranks, seeds 0, 1, ..."""
    ranks = RANKS[cell["d"]]
    sampler = "cpu" if path == "old" else "device"
    step_capture = "none" if path == "old" else capture
    return [
        TrainConfig(
            **{
                **cell,
                "layers": layers,
                "rank": ranks[k % len(ranks)],
                "seed": k // len(ranks),
                "device": device,
                "sampler": sampler,
                "capture": step_capture,
                "matmul_precision": precision,
            }
        )
        for k in range(runs)
    ]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(action: Callable[[], object], repeats: int, device: torch.device, inner: int = 1) -> float:
    """Median over ``repeats`` of the mean time of ``inner`` calls, synchronised at both ends (ms)."""
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        for _ in range(inner):
            action()
        _synchronize(device)
        times.append((time.perf_counter() - start) / inner)
    return 1e3 * statistics.median(times)


def build_training(configs: list[TrainConfig]) -> Training:
    """The loop's state for a pack of ``configs`` (as `training.loop.train_packed` builds it), ready to step."""
    runs = [fresh_run(c) for c in configs]
    for run in runs:
        run.model.train()
    return Training.of(TrainedRuns(runs))


def time_pack(configs: list[TrainConfig], repeats: int, inner: int) -> float:
    """Median ms of one optimiser step of the pack (after `WARMUP_STEPS`)."""
    training = build_training(configs)
    for _ in range(WARMUP_STEPS):
        training.optimizer_step()
    return _median_ms(lambda: training.stats.add(training.optimizer_step()[0]), repeats, training.device, inner)


def time_matmul(flops: float, device: torch.device, repeats: int, inner: int) -> float:
    """Median ms of a float32 square matmul of ``flops`` FLOPs (2 n^3) on ``device``."""
    n = max(1, round((flops / 2) ** (1 / 3)))
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn((n, n), generator=generator, device=device)
    b = torch.randn((n, n), generator=generator, device=device)
    a @ b  # warm-up
    return _median_ms(lambda: a @ b, repeats, device, inner) * flops / (2.0 * n**3)  # exact FLOPs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:K (default %(default)s)")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 4, 16], help="pack sizes (default 1 4 16)")
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 3], help="depths (default 1 3)")
    parser.add_argument("--paths", nargs="+", default=["old", "new"], choices=("old", "new"))
    parser.add_argument("--capture", default="graph", choices=("none", "graph", "compile"), help="new path's capture")
    parser.add_argument("--precision", default="highest", choices=("highest", "high"), help="matmul precision")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per measurement (median; >= 1)")
    parser.add_argument("--inner", type=int, default=0, help="steps per repeat (default: 1 on a CPU, 20 on CUDA)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on a CPU (default 1: a sweep worker's)")
    parser.add_argument("--no-cpu-cell", action="store_true", help="skip the cpu-scale cell (d = 16) rows")
    parser.add_argument("--tiny", action="store_true", help="a rehearsal: d = 8 cells instead of the paper's")
    parser.add_argument("--record", type=Path, help="folder to write bench_device_step_DATE[-DEVICE].{json,md} into")
    args = parser.parse_args(argv)
    if args.repeats < 1 or any(k < 1 for k in args.ks):
        parser.error("--repeats and every --ks value must be >= 1")
    device = resolve_device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    inner = args.inner or (20 if device.type == "cuda" else 1)
    cells = [("fig1 paper", TINY_CELL if args.tiny else PAPER_CELL, args.layers, args.ks)]
    if not args.no_cpu_cell and not args.tiny:
        cells.append(("fig1 cpu", CPU_CELL, [1, 3], [4]))
    rows = []
    with matmul_precision(args.precision):
        for label, cell, depths, ks in cells:
            for layers in depths:
                for runs in ks:
                    row = _row(label, cell, layers, runs, args, device, inner)
                    rows.append(row)
                    _print(row)
    if args.record:
        _record(args.record, rows, args, device, inner, argv)
    return 0


def _row(label: str, cell: dict, layers: int, runs: int, args: argparse.Namespace, device: torch.device, inner: int):
    before = os.getloadavg()[0]
    flops = step_flops(pack_configs(cell, layers, 1, "old", "none", args.precision, args.device)[0], runs)
    row: dict[str, Any] = {"cell": label, "d": cell["d"], "layers": layers, "K": runs, "gflop": flops / 1e9}
    row["matmul_ms"] = time_matmul(flops, device, args.repeats, inner)
    for path in args.paths:
        configs = pack_configs(cell, layers, runs, path, args.capture, args.precision, args.device)
        step = time_pack(configs, args.repeats, inner)
        row[f"{path}_ms"] = step
        row[f"{path}_tflops"] = flops / (step * 1e-3) / 1e12
        row[f"{path}_over_matmul"] = step / row["matmul_ms"]
    if "old_ms" in row and "new_ms" in row:
        row["new_over_old"] = row["new_ms"] / row["old_ms"]
    row["load_before"], row["load_after"] = before, os.getloadavg()[0]
    return row


def _print(row: dict[str, Any]) -> None:
    parts = [f"{row['cell']:10s} L={row['layers']} K={row['K']:2d} {row['gflop']:8.2f} GFLOP"]
    parts.append(f"matmul {row['matmul_ms']:9.2f} ms")
    for path in ("old", "new"):
        if f"{path}_ms" in row:
            parts.append(f"{path} {row[f'{path}_ms']:9.2f} ms ({row[f'{path}_over_matmul']:5.2f}x matmul)")
    parts.append(f"load {row['load_before']:.2f}/{row['load_after']:.2f}")
    print("  ".join(parts), flush=True)


def _git(*command: str) -> str:
    return subprocess.run(["git", *command], cwd=REPOSITORY, capture_output=True, text=True).stdout.strip()


def _record(folder: Path, rows: list[dict[str, Any]], args: argparse.Namespace, device: torch.device, inner, argv):
    revision = _git("rev-parse", "--short=12", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--", "experiments", "benchmarks"))
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    if device.type == "cuda":
        machine = f"{torch.cuda.get_device_name(device)}; host {os.cpu_count()} logical cores"
    else:
        machine = f"{platform.machine()}, {os.cpu_count()} logical cores, {platform.platform()}"
    words = sys.argv[1:] if argv is None else argv
    meta = {
        "command": "python benchmarks/bench_device_step.py " + " ".join(words),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "device": str(device),
        "uptime_after": uptime,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "revision": revision + (" (experiments/ or benchmarks/ modified)" if dirty else ""),
        "repeats": args.repeats,
        "inner": inner,
        "precision": args.precision,
        "capture": args.capture,
    }
    folder.mkdir(parents=True, exist_ok=True)
    suffix = "" if device.type == "cpu" else f"-{device.type}"
    stem = folder / f"bench_device_step_{datetime.date.today().isoformat()}{suffix}"
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# A packed fig1 step against a matmul of the same FLOPs (old path beside new)",
        "",
        f"- command: `{meta['command']}`",
        f"- {meta['date']}; {meta['machine']}; Python {meta['python']}, torch {meta['torch']}, {meta['threads']} "
        f"torch thread(s); revision {meta['revision']}; medians of {args.repeats} repeats of {inner} step(s); "
        f"matmul precision {args.precision}; new path's capture {args.capture} (CUDA only)",
        f"- `uptime` after the run: {uptime}",
        "- old: CPU float64 draw, eager step, default AdamW; new: device float32 draw (+ on CUDA the captured step "
        "and the capturable/fused AdamW); matmul: one float32 square matmul of the same FLOPs on the same device; "
        "x matmul = step time / matmul time; load: 1-minute load average before / after the row",
        "",
        "| cell | L | K | GFLOP/step | matmul ms | old ms | old x matmul | new ms | new x matmul | new / old | "
        "new TFLOP/s | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(row: dict[str, Any], key: str, form: str) -> str:
        return format(row[key], form) if key in row else "-"

    for r in rows:
        lines.append(
            f"| {r['cell']} (d {r['d']}) | {r['layers']} | {r['K']} | {r['gflop']:.2f} | {r['matmul_ms']:.2f} | "
            f"{cell(r, 'old_ms', '.1f')} | {cell(r, 'old_over_matmul', '.2f')} | {cell(r, 'new_ms', '.1f')} | "
            f"{cell(r, 'new_over_matmul', '.2f')} | {cell(r, 'new_over_old', '.3f')} | "
            f"{cell(r, 'new_tflops', '.4f')} | {r['load_before']:.2f} / {r['load_after']:.2f} |"
        )
    lines += ["", *projection_lines()]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"recorded {stem}.json and {stem}.md")


def projection_lines() -> list[str]:
    """The projected GPU step and call times of the paper's deciding cells (K = 9: r in {64, 32, 8} x 3 seeds)."""
    lines = [
        "## Projected GPU times from the FLOP model (not measured)",
        "",
        "K = 9 runs (r in {64, 32, 8} x 3 seeds) or 3 runs (the fp32 control: one seed), 100k steps, at issue 29's "
        "assumed H200 rates (TF32 400 TFLOP/s, fp32 50 TFLOP/s) and at 1x (the matmul itself) and 2x (the target) "
        "the matmul time. A call has 9 minutes (540 s) including start-up.",
        "",
        "| L | runs | precision | GFLOP/step | step ms at 1x | step ms at 2x | 100k steps at 1x (s) | at 2x (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layers in (1, 3):
        config = TrainConfig(**{**PAPER_CELL, "layers": layers, "rank": 64})
        for runs, rate in ((9, "tf32"), (3, "fp32"), (9, "fp32")):
            flops = step_flops(config, runs)
            one = projection(flops, RATES_TFLOPS[rate], 1.0, 100_000)
            two = projection(flops, RATES_TFLOPS[rate], 2.0, 100_000)
            lines.append(
                f"| {layers} | {runs} | {rate} | {flops / 1e9:.1f} | {one['step_ms']:.2f} | {two['step_ms']:.2f} | "
                f"{one['run_s']:.0f} | {two['run_s']:.0f} |"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main())
