"""Benchmark: K small runs trained together (experiments.training.loop.train_batched, stacked parameters + vmap) vs one
at a time (experiments.training.loop.train, the sweep's per-run path), in this process, on the same configs.

Both paths are warmed up first (one short run each, so one-off imports and allocator warm-up are not timed). The
script prints, per K, wall times, runs per second and the speed-up ratio, and the largest relative difference of the
final losses (the two paths train the same models on the same batches; expected <= 1e-5 in float32).

Usage:
    PYTHONPATH=. python benchmarks/bench_batched_training.py                     # CPU, small fig1-like runs
    PYTHONPATH=. python benchmarks/bench_batched_training.py --device cuda --d 64 --N 16 --ffn-dim 2048 --K 5 35
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from experiments.config import TrainConfig
from experiments.training.loop import train, train_batched


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--K", type=int, nargs="+", default=[2, 5, 10], help="runs per batch")
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--N", type=int, default=8)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--ffn-dim", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = {
        "task": "farthest",
        "d": args.d,
        "N": args.N,
        "rank": args.rank,
        "ffn_dim": args.ffn_dim,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "log_every": 10,
        "checkpoint_every": args.steps,
        "device": args.device,
    }
    warm = {**base, "steps": 5, "checkpoint_every": 5}
    with tempfile.TemporaryDirectory() as tmp:
        train(TrainConfig(**warm), Path(tmp) / "warm", progress=False)
        train_batched([TrainConfig(**warm, seed=s) for s in range(2)])
        rows = []
        for K in args.K:
            configs = [TrainConfig(**base, seed=s) for s in range(K)]
            started = time.perf_counter()
            separate = [train(c, Path(tmp) / f"K{K}-{c.seed}", progress=False) for c in configs]
            t_separate = time.perf_counter() - started
            started = time.perf_counter()
            batched = train_batched(configs)
            t_batched = time.perf_counter() - started
            gap = max(
                abs(a.final_loss - b.final_loss) / abs(b.final_loss) for a, b in zip(batched, separate, strict=False)
            )
            rows.append(
                {
                    "K": K,
                    "separate_s": t_separate,
                    "batched_s": t_batched,
                    "speedup": t_separate / t_batched,
                    "runs_per_s_separate": K / t_separate,
                    "runs_per_s_batched": K / t_batched,
                    "max_rel_loss_diff": gap,
                }
            )
    if args.json:
        print(json.dumps({"config": base, "rows": rows}))
    else:
        print(
            f"farthest d={args.d} N={args.N} r={args.rank} ffn={args.ffn_dim} steps={args.steps} "
            f"batch={args.batch_size} device={args.device} threads={args.threads}"
        )
        print(f"{'K':>4} {'separate s':>11} {'batched s':>10} {'speed-up':>9} {'max rel diff':>13}")
        for r in rows:
            print(
                f"{r['K']:>4} {r['separate_s']:>11.2f} {r['batched_s']:>10.2f} {r['speedup']:>9.2f} "
                f"{r['max_rel_loss_diff']:>13.2e}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
