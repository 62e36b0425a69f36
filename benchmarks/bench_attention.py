"""Training-step throughput of RankedMultiheadAttention / the paper's encoder against stock PyTorch (run by hand).

The baseline is the paper's layer built the standard way: c separate torch.nn.MultiheadAttention blocks with d / r heads
each, averaged (and, without --attention-only, wrapped in the same post-norm L2-normalised encoder layer with a ReLU
FFN of width 2048). Ours is experiments.models.attention.RankedMultiheadAttention (one module, H = c d / r heads) /
experiments.models.encoder.PaperEncoderLayer, with the SAME weights. A step is forward + backward + AdamW step on a
fresh batch (B, N, d) with a mean-squared-error loss against a fixed random target.

Both run in this process, interleaved (baseline, ours, baseline, ours, ...), and the reported time is the median per
step over the repeats, so load from other processes hits both alike; the ratio baseline / ours (> 1: ours is faster)
is the number to read. Peak memory: CPU, the growth of the peak resident set over the first two steps (AdamW state
included), measured in a fresh subprocess per model (Linux /proc/self/status VmHWM, reset through
/proc/self/clear_refs); GPU, torch.cuda.max_memory_allocated. The FLOP fraction divides the step's matmul FLOPs
(counted analytically: backward = 2 x forward) by the step time and by the machine's peak, measured in this process
as the best rate of a large float32 matmul.

Example: ``python benchmarks/bench_attention.py --ranks 1,8,64 --widths 1,8,64 --attention-only``

Recorded run (both the whole encoder-layer step and the attention alone, per configuration, interleaved):
``python benchmarks/bench_attention.py --ranks 64,8,1 --widths 64,1 --modes whole,attention --threads 2 --no-memory
--steps 1 --repeats 3 --record benchmarks/results`` writes ``bench_attention_<date>.json`` and ``.md`` there (the
command, machine, load average before and after, torch version, threads, git revision, the matmul peak measured
before and after the rows, and every row).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments.models.attention import RankedMultiheadAttention  # noqa: E402
from experiments.models.encoder import L2Norm, PaperEncoderLayer  # noqa: E402
from experiments.models.spec import AttentionSpec  # noqa: E402


class StockAveragedAttention(nn.Module):
    """The baseline: (1/c) sum of c torch.nn.MultiheadAttention blocks (d / r heads each), self-attention."""

    def __init__(self, d: int, r: int, c: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.MultiheadAttention(d, d // r, batch_first=True) for _ in range(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.blocks[0](x, x, x, need_weights=False)[0]
        for block in self.blocks[1:]:
            out = out + block(x, x, x, need_weights=False)[0]
        return out / len(self.blocks)


class StockEncoderLayer(nn.Module):
    """The baseline encoder layer: post-norm, L2Norm, FFN with ReLU, around `StockAveragedAttention`."""

    def __init__(self, d: int, r: int, c: int, ffn_dim: int) -> None:
        super().__init__()
        self.attention = StockAveragedAttention(d, r, c)
        self.linear1, self.linear2 = nn.Linear(d, ffn_dim), nn.Linear(ffn_dim, d)
        self.norm1, self.norm2 = L2Norm(), L2Norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x + self.attention(x))
        return self.norm2(h + self.linear2(F.relu(self.linear1(h))))


def build_pair(d: int, r: int, c: int, ffn_dim: int, attention_only: bool, device: str) -> tuple[nn.Module, nn.Module]:
    """(baseline, ours) holding the same weights."""
    if attention_only:
        baseline: nn.Module = StockAveragedAttention(d, r, c)
        ours: nn.Module = RankedMultiheadAttention(d, r, width=c)
        ours.load_torch_blocks(list(baseline.blocks))  # type: ignore[operator, arg-type]
    else:
        baseline = StockEncoderLayer(d, r, c, ffn_dim)
        layer = PaperEncoderLayer(d, AttentionSpec(r, width=c), ffn_dim=ffn_dim)
        layer.self_attn.load_torch_blocks(list(baseline.attention.blocks))  # type: ignore[union-attr, arg-type]
        with torch.no_grad():
            for name in ("linear1", "linear2"):
                getattr(layer, name).load_state_dict(getattr(baseline, name).state_dict())
        ours = layer
    return baseline.to(device), ours.to(device)


def step_flops(B: int, N: int, d: int, r: int, c: int, ffn_dim: int, attention_only: bool) -> float:
    """Matmul FLOPs of one training step (forward x 3): projections 2 B N d (3 c d) + 2 B N (c d) d, scores and
    weighted sums 2 x 2 B H N^2 r with H r = c d, FFN 2 x 2 B N d ffn_dim."""
    forward = 2 * B * N * d * 3 * c * d + 2 * B * N * c * d * d + 4 * B * N * N * c * d
    if not attention_only:
        forward += 4 * B * N * d * ffn_dim
    return 3.0 * forward


def measure_peak_flops(device: str) -> float:
    """Best float32 matmul rate (FLOP/s) over a few large products in this process."""
    n = 2048 if device == "cpu" else 8192
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    best = math.inf
    for _ in range(4):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def make_step(model: nn.Module, batches: torch.Tensor, target: torch.Tensor) -> Callable[[int], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)

    def step(i: int) -> None:
        out = model(batches[i % len(batches)])
        loss = F.mse_loss(out, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def time_steps(step: Callable[[int], None], steps: int, device: str) -> float:
    """Seconds per step, averaged over ``steps`` consecutive steps."""
    sync(device)
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    sync(device)
    return (time.perf_counter() - start) / steps


def cpu_memory_probe(args: argparse.Namespace, r: int, c: int, which: str) -> float:
    """Peak RSS growth (MB) over two training steps of one model, in a fresh subprocess."""
    command = [sys.executable, __file__, "--memory-probe", which, "--ranks", str(r), "--widths", str(c)]
    command += ["--d", str(args.d), "--N", str(args.N), "--batch", str(args.batch), "--ffn-dim", str(args.ffn_dim)]
    command += ["--threads", str(args.threads)]
    if args.attention_only:
        command.append("--attention-only")
    result = subprocess.run(command, capture_output=True, text=True, check=True)  # noqa: S603
    return float(result.stdout.strip().splitlines()[-1])


def memory_probe(args: argparse.Namespace) -> None:
    """(Subprocess) print the peak RSS growth in MB over two steps of the baseline or ours."""
    r, c, d = int(args.ranks), int(args.widths), args.d
    if args.memory_probe == "baseline":
        model: nn.Module = (
            StockAveragedAttention(d, r, c) if args.attention_only else StockEncoderLayer(d, r, c, args.ffn_dim)
        )
    else:
        model = (
            RankedMultiheadAttention(d, r, width=c)
            if args.attention_only
            else PaperEncoderLayer(d, AttentionSpec(r, width=c))
        )
    batches = torch.randn(2, args.batch, args.N, d)
    step = make_step(model, batches, torch.randn(args.batch, args.N, d))
    # No warm-up: memory freed by an earlier step stays in the C heap and would hide a later step's peak.
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # Linux: reset the peak resident set (VmHWM) to the current one
    before = _status_kb("VmRSS")
    for i in range(2):
        step(i)
    print((_status_kb("VmHWM") - before) / 1024.0)


def _status_kb(field: str) -> float:
    """A memory field of /proc/self/status in KB (VmRSS: current resident set, VmHWM: its peak)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return float(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def run_config(args: argparse.Namespace, r: int, c: int, device: str, peak: float) -> dict[str, float | int | str]:
    d, N, B = args.d, args.N, args.batch
    torch.manual_seed(0)
    baseline, ours = build_pair(d, r, c, args.ffn_dim, args.attention_only, device)
    batches = torch.randn(4, B, N, d, device=device)
    target = torch.randn(B, N, d, device=device)
    steps = {"baseline": make_step(baseline, batches, target), "ours": make_step(ours, batches, target)}
    for step in steps.values():  # warm-up: allocator, thread pools, AdamW state
        step(0)
    times: dict[str, list[float]] = {"baseline": [], "ours": []}
    for _ in range(args.repeats):
        for name, step in steps.items():
            times[name].append(time_steps(step, args.steps, device))
    base_t, ours_t = statistics.median(times["baseline"]), statistics.median(times["ours"])
    flops = step_flops(B, N, d, r, c, args.ffn_dim, args.attention_only)
    if device == "cpu":
        mem_base = cpu_memory_probe(args, r, c, "baseline") if args.memory else math.nan
        mem_ours = cpu_memory_probe(args, r, c, "ours") if args.memory else math.nan
    else:
        mem = {}
        for name, step in steps.items():
            torch.cuda.reset_peak_memory_stats()
            step(1)
            mem[name] = torch.cuda.max_memory_allocated() / 2**20
        mem_base, mem_ours = mem["baseline"], mem["ours"]
    return {
        "device": device,
        "r": r,
        "c": c,
        "H": c * d // r,
        "baseline_ms": 1e3 * base_t,
        "ours_ms": 1e3 * ours_t,
        "speedup": base_t / ours_t,
        "baseline_min_ms": 1e3 * min(times["baseline"]),
        "ours_min_ms": 1e3 * min(times["ours"]),
        "speedup_of_minima": min(times["baseline"]) / min(times["ours"]),
        "baseline_peak_MB": mem_base,
        "ours_peak_MB": mem_ours,
        "GFLOP_per_step": flops / 1e9,
        "baseline_flop_fraction": flops / base_t / peak,
        "ours_flop_fraction": flops / ours_t / peak,
    }


def machine_record() -> dict[str, str | int | float]:
    """CPU model, logical cores, platform, load average, torch version and git revision of this checkout."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)  # noqa: S603,S607
        return done.stdout.strip()

    return {
        "cpu": model,
        "logical_cores": os.cpu_count() or 0,
        "platform": platform.platform(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "git_revision": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "load_average_1min": os.getloadavg()[0],
    }


def write_record(directory: Path, record: dict) -> tuple[Path, Path]:
    """Write ``record`` as bench_attention_<date>.json and a Markdown table beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"bench_attention_{datetime.date.today().isoformat()}"
    json_path, md_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    json_path.write_text(json.dumps(record, indent=2) + "\n")
    m = record["machine"]
    lines = [
        "# Training-step benchmark: RankedMultiheadAttention vs c stock nn.MultiheadAttention blocks averaged",
        "",
        f"- command: `{record['command']}`",
        f"- machine: {m['cpu']}, {m['logical_cores']} logical cores, shared with other jobs (1-min load average "
        f"{m['load_average_1min']:.2f} before, {record['load_average_after']:.2f} after); {m['platform']}",
        f"- torch {m['torch']}, {m['threads']} threads, float32; git {m['git_revision'][:12]}"
        f"{' (uncommitted changes)' if m['git_dirty'] else ''}",
        f"- matmul peak (best 2048^3 float32 product): {record['peak_GFLOPs_before']:.1f} GFLOP/s before, "
        f"{record['peak_GFLOPs_after']:.1f} after; % peak uses the largest"
        + ("" if record["complete"] else " (run incomplete: the rows measured so far)"),
        "- speedup = stock ms / ours ms (interleaved in one process, medians of the repeats); speedup of minima = the "
        "same for the fastest repeat of each (the least disturbed by other jobs); whole = encoder layer step "
        "(attention + L2Norms + FFN), attention = the attention module alone; % peak = matmul FLOPs of the step "
        "(backward = 2 x forward) / median time / matmul peak",
        "",
        "| mode | r | c | H | stock ms | ours ms | speedup | min stock ms | min ours ms | speedup of minima | "
        "GFLOP/step | stock % peak | ours % peak |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in record["rows"]:
        lines.append(
            f"| {row['mode']} | {row['r']} | {row['c']} | {row['H']} | {row['baseline_ms']:.0f} | "
            f"{row['ours_ms']:.0f} | {row['speedup']:.2f} | {row['baseline_min_ms']:.0f} | {row['ours_min_ms']:.0f} | "
            f"{row['speedup_of_minima']:.2f} | {row['GFLOP_per_step']:.2f} | "
            f"{100 * row['baseline_flop_fraction']:.1f}% | {100 * row['ours_flop_fraction']:.1f}% |"
        )
    md_path.write_text("\n".join(lines) + "\n")
    return json_path, md_path


def save_record(args: argparse.Namespace, machine: dict, rows: list[dict], peaks: list[float], *, final: bool) -> None:
    """Write the rows so far (% of peak against the best matmul peak measured so far) with the run's metadata."""
    best = max(peaks)
    for row in rows:
        flops = row["GFLOP_per_step"] * 1e9
        row["baseline_flop_fraction"] = flops / (row["baseline_ms"] / 1e3) / best
        row["ours_flop_fraction"] = flops / (row["ours_ms"] / 1e3) / best
    record = {
        "command": "python " + shlex.join(sys.argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "complete": final,
        "machine": machine,
        "load_average_after": os.getloadavg()[0],
        "peak_GFLOPs_before": peaks[0] / 1e9,
        "peak_GFLOPs_after": peaks[-1] / 1e9,
        "shape": {"d": args.d, "N": args.N, "B": args.batch, "ffn_dim": args.ffn_dim},
        "steps": args.steps,
        "repeats": args.repeats,
        "rows": rows,
    }
    paths = write_record(args.record, record)
    if final:
        for path in paths:
            print(f"# wrote {path}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (both when CUDA is available)")
    parser.add_argument("--ranks", default="1,8,64", help="comma-separated ranks r (each must divide d)")
    parser.add_argument("--widths", default="1,8,64", help="comma-separated widths c (H = c d / r)")
    parser.add_argument("--steps", type=int, default=2, help="consecutive steps per timed repeat")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (median reported)")
    parser.add_argument("--attention-only", action="store_true", help="time the attention alone (no norms, no FFN)")
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--N", type=int, default=16)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--ffn-dim", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--no-memory", dest="memory", action="store_false", help="skip the CPU memory subprocesses")
    parser.add_argument("--json", action="store_true", help="print one JSON object per configuration")
    parser.add_argument(
        "--modes", default=None, help="comma-separated: whole (encoder layer step), attention (attention alone)"
    )
    parser.add_argument("--record", type=Path, default=None, help="write the run as JSON + Markdown into this folder")
    parser.add_argument("--memory-probe", choices=["baseline", "ours"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.memory_probe:
        memory_probe(args)
        return
    ranks = [int(v) for v in args.ranks.split(",")]
    widths = [int(v) for v in args.widths.split(",")]
    if any(args.d % r for r in ranks):
        raise SystemExit(f"every rank must divide d = {args.d}, got {ranks}")
    modes = (args.modes or ("attention" if args.attention_only else "whole")).split(",")
    if any(mode not in ("whole", "attention") for mode in modes):
        raise SystemExit(f"--modes takes whole and/or attention, got {args.modes}")
    machine = machine_record()
    rows: list[dict] = []
    peaks: list[float] = []
    devices = ["cpu", "cuda"] if args.device == "auto" and torch.cuda.is_available() else [args.device]
    if devices == ["auto"]:
        devices = ["cpu"]
    header = (
        f"{'dev':4} {'r':>3} {'c':>3} {'H':>5} {'stock ms':>10} {'ours ms':>10} {'speedup':>8} "
        f"{'stock MB':>9} {'ours MB':>9} {'GFLOP':>7} {'stock %pk':>9} {'ours %pk':>9}"
    )
    for device in devices:
        peak = measure_peak_flops(device)
        peaks.append(peak)
        print(
            f"# {device}: peak float32 matmul {peak / 1e9:.1f} GFLOP/s, threads {torch.get_num_threads()}, "
            f"d={args.d} N={args.N} B={args.batch} modes={','.join(modes)}",
            flush=True,
        )
        if not args.json:
            print(f"{'mode':9} " + header, flush=True)
        for r, c, mode in ((r, c, mode) for r in ranks for c in widths for mode in modes):
            args.attention_only = mode == "attention"
            row = {"mode": mode, **run_config(args, r, c, device, peak)}
            rows.append(row)
            if args.record is not None:  # after every row, so that a run stopped midway keeps what it measured
                save_record(args, machine, rows, peaks, final=False)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(
                    f"{mode:9} {device:4} {r:>3} {c:>3} {row['H']:>5} "
                    f"{row['baseline_ms']:>10.1f} {row['ours_ms']:>10.1f} "
                    f"{row['speedup']:>8.2f} {row['baseline_peak_MB']:>9.0f} {row['ours_peak_MB']:>9.0f} "
                    f"{row['GFLOP_per_step']:>7.2f} {100 * row['baseline_flop_fraction']:>8.1f}% "
                    f"{100 * row['ours_flop_fraction']:>8.1f}%",
                    flush=True,
                )
    if args.record is not None:
        save_record(args, machine, rows, [*peaks, measure_peak_flops(devices[-1])], final=True)


if __name__ == "__main__":
    main()
