"""Profile: where one CPU training step's time goes, by torch.profiler, before and after issue 51.

Issue 51 asked for the step's waste to be measured with ``torch.profiler`` before and after its changes. This script
profiles whole optimiser steps (`Training.optimizer_step`: draw, forward, backward, AdamW, schedule) of fig1's
paper-size cell (d = 64, N = 16, L = 3, r = 32, c = 1, FFN 2048, batch 256), built by `bench_cpu_step.build_training`,
for two models in one process on one thread:

- ``today``: the feed-forward block written as before issue 51 (F.linear, F.relu, F.linear);
- ``ours``: the encoder as it is (the in-place feed-forward function, experiments/models/feed_forward.py).

Each operator's self CPU time is summed into groups: the matrix products (``mm``, ``addmm``, ``bmm``, ``baddbmm``),
the ReLU passes (``relu``, ``threshold_backward``), copies (``copy_``, ``clone``), fills (``fill_``, ``zero_``), the
optimiser (AdamW's foreach kernels) and everything else; per step, in milliseconds. The allocator is the other half of
issue 51 and is process-wide, so the "before" and "after" of the whole issue are two runs of this script:

    ATTNRANK_ALLOCATOR=system python benchmarks/profile_cpu_step.py --record benchmarks/results   # glibc's malloc
    python benchmarks/profile_cpu_step.py --record benchmarks/results                            # jemalloc (default)
    python benchmarks/profile_cpu_step.py --tiny --steps 2                                        # a rehearsal

Before issue 51 is ``today`` under glibc; after it, ``ours`` under jemalloc. The profiler adds its own overhead per
operator (a few microseconds; the step runs some 700 operators), so the groups' sum is a little above the
benchmark's step time (benchmarks/bench_cpu_step.py): read the groups as shares, and quote step times from the
benchmark. Profile on a quiet machine: self CPU times are wall-clock intervals, and a busy core stretches them.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

from experiments.allocator import reexec_with_allocator  # noqa: E402  (standard library only)

if __name__ == "__main__":
    reexec_with_allocator((Path(__file__).name,))  # before torch is loaded: the same process, jemalloc preloaded

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from bench_cpu_step import PAPER_CELL, TINY_CELL, _config, build_training  # noqa: E402
from machine import allocator_state, revision  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

GROUPS = {
    "products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "relu passes": ("aten::relu", "aten::relu_", "aten::threshold_backward", "aten::clamp_min", "aten::clamp_min_"),
    "copies": ("aten::copy_", "aten::clone"),
    "fills": ("aten::fill_", "aten::zero_"),
}
"""Operator groups by name; an operator in none of them goes to ``optimiser (Python)`` (the optimiser's own
``record_function`` span and foreach kernels, where torch uses them) or ``other`` (attention, norms, the loss, and the
optimiser's per-tensor arithmetic, which the profiler does not tell apart from the model's)."""
PATHS = ("today", "ours")
TOP = 12
"""Operators listed one by one per path, by self CPU time."""


def group_of(name: str) -> str:
    for group, names in GROUPS.items():
        if name in names:
            return group
    lowered = name.lower()
    return "optimiser (Python)" if "optimizer" in lowered or "_foreach" in lowered else "other"


def profile_path(path: str, layers: int, rank: int, tiny: bool, steps: int, warmup: int) -> dict[str, Any]:
    """Self CPU ms per step of each group and of the top operators, for ``steps`` profiled steps of ``path``."""
    training = build_training(_config(TINY_CELL if tiny else PAPER_CELL, layers, rank), path)
    for _ in range(warmup):
        training.optimizer_step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            training.optimizer_step()
    averages = prof.key_averages()
    per_op = {event.key: (event.self_cpu_time_total / 1e3 / steps, event.count // steps) for event in averages}
    groups: dict[str, float] = {}
    for name, (ms, _) in per_op.items():
        groups[group_of(name)] = groups.get(group_of(name), 0.0) + ms
    top = sorted(per_op.items(), key=lambda item: -item[1][0])[:TOP]
    return {
        "path": path,
        "groups_ms": dict(sorted(groups.items(), key=lambda item: -item[1])),
        "total_ms": sum(groups.values()),
        "top": [{"op": name, "ms": ms, "calls": calls} for name, (ms, calls) in top],
    }


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    alloc = "jemalloc" if meta["allocator"]["jemalloc_mapped"] else "glibc malloc"
    names = sorted({g for row in rows for g in row["groups_ms"]}, key=lambda g: -rows[0]["groups_ms"].get(g, 0.0))
    lines = [
        f"# Where a CPU step's time goes (torch.profiler), under {alloc}",
        "",
        f"- command: `{meta['command']}`",
        f"- {meta['date']}; torch {meta['torch']}, 1 thread; revision {meta['revision']}; cell {meta['cell']}, "
        f"L = {meta['layers']}, r = {meta['rank']}; {meta['steps']} profiled steps per path after {meta['warmup']}",
        f"- allocator: {meta['allocator']}",
        f"- `uptime` after the run: {meta['uptime_after']}",
        "- self CPU ms per step, by operator group (benchmarks/profile_cpu_step.py's docstring: the profiler's own "
        "overhead is included, so read shares; step times come from bench_cpu_step)",
        "",
        "| group | " + " | ".join(row["path"] for row in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{row['groups_ms'].get(name, 0.0):.1f}" for row in rows) + " |")
    lines.append("| **sum** | " + " | ".join(f"**{row['total_ms']:.1f}**" for row in rows) + " |")
    for row in rows:
        lines += ["", f"Top operators of `{row['path']}` (self CPU ms per step, calls per step):", ""]
        lines += ["| operator | ms | calls |", "|---|---|---|"]
        lines += [f"| `{t['op']}` | {t['ms']:.1f} | {t['calls']} |" for t in row["top"]]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="profiled steps per path (>= 1, default 4)")
    parser.add_argument("--warmup", type=int, default=3, help="unprofiled steps per path before (>= 0, default 3)")
    parser.add_argument("--layers", type=int, default=3, help="L (default 3)")
    parser.add_argument("--rank", type=int, default=32, help="r (default 32)")
    parser.add_argument("--tiny", action="store_true", help="a rehearsal: the d = 8 cell of bench_cpu_step --tiny")
    parser.add_argument("--record", type=Path, help="folder to write profile_cpu_step_DATE-ALLOCATOR.{json,md} into")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    torch.set_num_threads(1)
    if args.tiny and args.rank > TINY_CELL["d"]:
        args.rank = 4
    rows = [profile_path(path, args.layers, args.rank, args.tiny, args.steps, args.warmup) for path in PATHS]
    words = sys.argv[1:] if argv is None else argv
    meta = {
        "command": "python benchmarks/profile_cpu_step.py " + " ".join(words),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "revision": revision(),
        "allocator": allocator_state(),
        "cell": {k: v for k, v in (TINY_CELL if args.tiny else PAPER_CELL).items() if k in ("d", "N", "ffn_dim")},
        "layers": args.layers,
        "rank": args.rank,
        "steps": args.steps,
        "warmup": args.warmup,
        "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
    }
    text = markdown(meta, rows)
    print("\n".join(text))
    if args.record:
        args.record.mkdir(parents=True, exist_ok=True)
        alloc = "jemalloc" if meta["allocator"]["jemalloc_mapped"] else "system-malloc"
        suffix = f"{alloc}{'-tiny' if args.tiny else ''}"
        stem = args.record / f"profile_cpu_step_{datetime.date.today().isoformat()}-{suffix}"
        stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n", "utf-8")
        stem.with_suffix(".md").write_text("\n".join(text) + "\n", encoding="utf-8")
        print(f"recorded {stem}.json and {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
