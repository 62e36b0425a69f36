"""Benchmark: ``attnrank train`` as it runs by default against jemalloc preloaded by hand and against glibc's malloc.

Issue 51's check of the allocator: the same short training run (fig1's paper-scale cell, task farthest, d = 64,
N = 16, L = 3, r = 32, c = 1, FFN 2048, batch 256; 30 steps by default) started three ways:

- ``default``: ``python -m experiments.cli.main train ...`` with neither ``LD_PRELOAD`` nor ``ATTNRANK_ALLOCATOR``
  set, as a user types it: the command re-executes itself once with jemalloc preloaded (experiments/allocator.py);
- ``by_hand``: the same command with ``LD_PRELOAD`` naming jemalloc and ``MALLOC_CONF`` set by the caller (the command
  sees an allocator in ``LD_PRELOAD`` and does not re-execute);
- ``system``: ``ATTNRANK_ALLOCATOR=system`` (glibc's malloc).

Each run's whole wall time (interpreter start, the re-execution, training, writing its files) is measured here, and
so is the training loop's own time at its last step (metrics.csv's ``time`` column); the three ways alternate round by
round so that they share the machine's state. Every run's loss column must equal every other's string for string:
the allocator never touches the arithmetic. Before timing, a probe program named ``attnrank`` is started in each way's
environment and reports whether jemalloc is mapped into it, so the record says which allocator each way really got.
Goal (issue 51): ``default`` within 5% of ``by_hand``. Quote only timings from a quiet machine; the 1-minute load
average before and after is recorded.

Usage:
    python benchmarks/bench_train_allocator.py --record benchmarks/results            # 3 rounds x 3 ways x 30 steps
    python benchmarks/bench_train_allocator.py --tiny --steps 5 --repeats 1            # a rehearsal in seconds
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from experiments.allocator import JEMALLOC_CONF, SWITCH, jemalloc_library  # noqa: E402  (standard library only)

PAPER_FLAGS = ["--task", "farthest", "--d", "64", "--N", "16", "--rank", "32", "--width", "1", "--layers", "3"]
PAPER_FLAGS += ["--ffn-dim", "2048", "--batch-size", "256", "--layer-init", "copies"]
"""fig1's paper-scale cell at L = 3, r = 32 (the cell of issue 51's 30-step measurement)."""
TINY_FLAGS = ["--task", "farthest", "--d", "8", "--N", "4", "--rank", "4", "--layers", "3", "--ffn-dim", "16"]
TINY_FLAGS += ["--batch-size", "8"]
"""A rehearsal (--tiny): the same command at d = 8, seconds a run."""
WAYS = ("default", "by_hand", "system")
GOAL = 1.05
"""Issue 51's goal for default / by_hand."""
PROBE = """import os, sys
sys.path.insert(0, {root!r})
from experiments.allocator import reexec_with_allocator
reexec_with_allocator(("attnrank",))
with open("/proc/self/maps") as maps:
    print("jemalloc" in maps.read())
"""
"""A program named ``attnrank`` that goes through the command's own re-execution, then says whether jemalloc is in."""


def environments(library: str, threads: int) -> dict[str, dict[str, str]]:
    """The environment of each way: the caller's without any allocator setting, then each way's own."""
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF", SWITCH)}
    base["PYTHONPATH"] = str(REPOSITORY)  # the subprocess runs this tree's code
    if threads > 0:
        base["OMP_NUM_THREADS"] = str(threads)
    return {
        "default": dict(base),
        "by_hand": {**base, "LD_PRELOAD": library, "MALLOC_CONF": JEMALLOC_CONF},
        "system": {**base, SWITCH: "system"},
    }


def probe(env: dict[str, str], folder: Path) -> bool:
    """Whether a program started as ``attnrank`` in ``env`` ends up with jemalloc mapped."""
    script = folder / "attnrank"
    script.write_text(PROBE.format(root=str(REPOSITORY)), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip() == "True"


def losses_and_loop_time(run: Path) -> tuple[list[str], float]:
    """The loss column of a run's metrics.csv as written (strings: compared bitwise) and the loop's last time."""
    with (run / "metrics.csv").open(newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    return [row["loss"] for row in rows], float(rows[-1]["time"])


def train_once(flags: list[str], env: dict[str, str], out: Path) -> tuple[float, list[str], float]:
    """Wall seconds of one ``train`` process, its losses and its loop's own seconds."""
    command = [sys.executable, "-m", "experiments.cli.main", "train", *flags, "--out", str(out), "--no-progress"]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPOSITORY, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    losses, loop = losses_and_loop_time(out)
    return wall, losses, loop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="training steps per run (>= 1, default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the three ways (median; >= 1, default 3)")
    parser.add_argument(
        "--threads", type=int, default=1, help="OMP_NUM_THREADS of the runs (default 1; 0 leaves it as it is)"
    )
    parser.add_argument("--tiny", action="store_true", help="a rehearsal: the same command at d = 8")
    parser.add_argument("--record", type=Path, help="folder to write bench_train_allocator_DATE[-tiny].{json,md} into")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1 or args.threads < 0:
        parser.error("--steps and --repeats must be >= 1 and --threads >= 0")
    library = jemalloc_library() if sys.platform.startswith("linux") else None
    if library is None:
        print("error: no jemalloc library on this machine (libjemalloc2 on Debian/Ubuntu)", file=sys.stderr)
        return 2
    flags = (TINY_FLAGS if args.tiny else PAPER_FLAGS) + ["--steps", str(args.steps), "--log-every", "1"]
    envs = environments(library, args.threads)
    load_before = os.getloadavg()
    walls: dict[str, list[float]] = {way: [] for way in WAYS}
    loops: dict[str, list[float]] = {way: [] for way in WAYS}
    curves: dict[str, list[list[str]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="bench_train_allocator_") as scratch:
        folder = Path(scratch)
        mapped = {way: probe(envs[way], folder) for way in WAYS}
        print(f"jemalloc mapped: {mapped}", flush=True)
        for round_ in range(args.repeats):
            order = WAYS[round_ % 3 :] + WAYS[: round_ % 3]  # no way always goes first
            for way in order:
                wall, losses, loop = train_once(flags, envs[way], folder / f"{way}-{round_}")
                walls[way].append(wall)
                loops[way].append(loop)
                curves[way].append(losses)
                print(f"round {round_} {way:8s} {wall:7.2f} s (loop {loop:7.2f} s)", flush=True)
    first = curves["default"][0]
    bitwise = all(curve == first for way in WAYS for curve in curves[way])
    result: dict[str, Any] = {
        "jemalloc_mapped": mapped,
        "wall_s": {way: statistics.median(walls[way]) for way in WAYS},
        "loop_s": {way: statistics.median(loops[way]) for way in WAYS},
        "all_wall_s": walls,
        "bitwise": bitwise,
        "steps": args.steps,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }
    result["default_over_by_hand"] = result["wall_s"]["default"] / result["wall_s"]["by_hand"]
    result["system_over_by_hand"] = result["wall_s"]["system"] / result["wall_s"]["by_hand"]
    print(
        f"median wall: {', '.join(f'{w} {s:.2f} s' for w, s in result['wall_s'].items())}; default / by hand "
        f"{result['default_over_by_hand']:.3f} (goal <= {GOAL}); system / by hand {result['system_over_by_hand']:.3f}; "
        f"losses bitwise equal: {bitwise}"
    )
    if args.record:
        record(args.record, result, flags, args, argv)
    return 0 if bitwise else 1


def record(folder: Path, result: dict[str, Any], flags: list[str], args: argparse.Namespace, argv) -> None:
    """Write bench_train_allocator_DATE[-tiny].{json,md} into ``folder``."""

    def git(*command: str) -> str:
        return subprocess.run(["git", *command], cwd=REPOSITORY, capture_output=True, text=True).stdout.strip()

    dirty = bool(git("status", "--porcelain", "--", "experiments", "benchmarks"))
    words = sys.argv[1:] if argv is None else argv
    meta = {
        "command": "python benchmarks/bench_train_allocator.py " + " ".join(words),
        "train_flags": " ".join(flags),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} logical cores, {platform.platform()}",
        "python": platform.python_version(),
        "revision": git("rev-parse", "--short=12", "HEAD") + (" (modified)" if dirty else ""),
        "threads": args.threads or "unset",
        "repeats": args.repeats,
        "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
    }
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"bench_train_allocator_{datetime.date.today().isoformat()}{'-tiny' if args.tiny else ''}"
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "result": result}, indent=2) + "\n", "utf-8")
    lines = [
        "# `attnrank train` by default, with jemalloc preloaded by hand, and with glibc's malloc",
        "",
        f"- command: `{meta['command']}`; each run: `python -m experiments.cli.main train {meta['train_flags']}`",
        f"- {meta['date']}; {meta['machine']}; Python {meta['python']}; revision {meta['revision']}; "
        f"OMP_NUM_THREADS {meta['threads']}; medians of {args.repeats} rounds, the three ways alternating",
        f"- `uptime` after the run: {meta['uptime_after']}; 1-minute load before: {result['load_before'][0]:.2f}",
        "- wall: the whole process (start, re-execution, training, files); loop: metrics.csv's time at the last step",
        f"- goal (issue 51): default / by hand <= {GOAL}; losses of every run bitwise equal: {result['bitwise']}",
        "",
        "| way | jemalloc mapped | wall s | loop s | / by hand (wall) |",
        "|---|---|---|---|---|",
    ]
    for way in WAYS:
        lines.append(
            f"| {way} | {result['jemalloc_mapped'][way]} | {result['wall_s'][way]:.2f} | {result['loop_s'][way]:.2f} "
            f"| {result['wall_s'][way] / result['wall_s']['by_hand']:.3f} |"
        )
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"recorded {stem}.json and {stem}.md")


if __name__ == "__main__":
    sys.exit(main())
