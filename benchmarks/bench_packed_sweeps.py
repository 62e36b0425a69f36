"""Benchmark: whole cpu-scale sweeps (fig1 and depth by default) with an earlier revision's code against this tree's.

Each preset is run twice in the same sitting, interleaved (old fig1, new fig1, old depth, new depth), with the same
command: ``attnrank sweep PRESET --scale SCALE --workers W`` into a fresh directory. The old code is the given
revision (default b725318, before packed runs) checked out with ``git worktree`` into a temporary folder and run
from there (``PYTHONPATH`` puts its packages first; the script checks that the subprocess imported them); the new
code is this working tree. The ratio old wall / new wall is the speed-up of a whole sweep as a user sees it
(process start, imports, every run's training, checkpoints, evaluations and the store), not of one step.

Also recorded: the machine, the 1-minute load average before and after every sweep (time only a quiet machine:
the wall-time ratio is meaningless if other jobs ran meanwhile), the CPU seconds (user + system) of each sweep's
processes (a steadier measure when the machine is shared, though cache and memory contention still inflate it),
both revisions, and how far the two sweeps' best losses are apart per run (packed runs equal unpacked ones to float
rounding per step; over thousands of steps rounding can grow, so this is reported, not asserted).

Usage:
    python benchmarks/bench_packed_sweeps.py --record benchmarks/results           # fig1 and depth, cpu scale
    python benchmarks/bench_packed_sweeps.py --presets smoke --scale quick           # a rehearsal in seconds
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
BASELINE = "b725318"
ADDED_SINCE_BASELINE = {"depth": ("experiments.studies.depth", "depth_construction_arms")}
"""preset -> (module, function) whose runs were added after BASELINE (the depth preset's 36 starting-point arms,
issue 18): the new code's sweep runs without them, so both sweeps train the same runs (checked: equal run counts)."""


def _git(*args: str, cwd: Path = REPOSITORY) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _best_losses(out: Path) -> dict[str, float]:
    """hash -> best_loss of every finished run in a sweep's store."""
    with sqlite3.connect(out / "results.sqlite") as db:
        rows = db.execute("SELECT hash, metrics FROM runs WHERE metrics IS NOT NULL").fetchall()
    return {key: float(json.loads(metrics)["best_loss"]) for key, metrics in rows}


def _sweep(code: Path, preset: str, scale: str, workers: int, out: Path, extra: list[str]) -> dict[str, Any]:
    """Run one sweep with the code in ``code``; wall seconds, loads, and the package location it imported."""
    env = {**os.environ, "PYTHONPATH": str(code), "MPLBACKEND": "Agg"}
    probe = [sys.executable, "-c", "import experiments, sys; sys.stdout.write(experiments.__file__)"]
    imported = subprocess.run(probe, cwd=code, env=env, check=True, capture_output=True, text=True).stdout
    if not Path(imported).resolve().is_relative_to(code.resolve()):
        raise RuntimeError(f"{code}: the subprocess imported {imported}, not this tree's packages")
    launcher = ["-m", "experiments.cli.main"]
    dropped = ADDED_SINCE_BASELINE.get(preset) if code.resolve() == REPOSITORY else None
    if dropped is not None:
        # Same grid as the old code: the preset function that adds the new runs returns none (see ADDED_SINCE_BASELINE).
        launcher = [
            "-c",
            f"import {dropped[0]} as p; p.{dropped[1]} = lambda *a, **k: []; "
            "from experiments.cli.main import main; import sys; raise SystemExit(main(sys.argv[1:]))",
        ]
    command = [
        sys.executable,
        *launcher,
        "sweep",
        preset,
        "--scale",
        scale,
        "--workers",
        str(workers),
        "--out",
        str(out),
        "--no-progress",
        "--json",
        *extra,
    ]
    load_before = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_after = os.getloadavg()[0]
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if completed.returncode != 0:
        raise RuntimeError(f"sweep {preset} with {code} failed ({completed.returncode}): {completed.stderr[-2000:]}")
    summary = json.loads(completed.stdout)
    return {"wall_s": wall, "cpu_s": cpu, "load_before": load_before, "load_after": load_after, "summary": summary}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="revision of the old code (default %(default)s)")
    parser.add_argument("--presets", default="fig1,depth", help="comma-separated presets (default %(default)s)")
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to both sweeps")
    parser.add_argument("--record", type=Path, default=None, help="write bench_packed_sweeps_<date>.{json,md} here")
    args = parser.parse_args()
    extra = [item for pair in (("--set", s) for s in args.set) for item in pair]
    baseline = _git("rev-parse", "--short=12", args.baseline)
    current = _git("rev-parse", "--short=12", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-packed-") as tmp:
        old_tree = Path(tmp) / "old"
        _git("worktree", "add", "--detach", str(old_tree), baseline)
        try:
            for preset in args.presets.split(","):
                results = {}
                for label, code in (("old", old_tree), ("new", REPOSITORY)):
                    out = Path(tmp) / f"{preset}-{label}"
                    print(f"{preset} ({label} code) ...", file=sys.stderr, flush=True)
                    results[label] = _sweep(code, preset, args.scale, args.workers, out, extra)
                    results[label]["best"] = _best_losses(out)
                    print(f"  {results[label]['wall_s']:.1f} s", file=sys.stderr, flush=True)
                old, new = results["old"], results["new"]
                if old["summary"]["runs"] != new["summary"]["runs"]:
                    raise RuntimeError(
                        f"{preset}: the old sweep has {old['summary']['runs']} runs, the new {new['summary']['runs']}: "
                        "not the same grid (extend ADDED_SINCE_BASELINE)"
                    )
                shared = sorted(set(old["best"]) & set(new["best"]))
                gaps = [abs(new["best"][k] - old["best"][k]) / abs(old["best"][k]) for k in shared]
                rows.append(
                    {
                        "preset": preset,
                        "scale": args.scale,
                        "runs": old["summary"]["runs"],
                        "old_wall_s": old["wall_s"],
                        "new_wall_s": new["wall_s"],
                        "speedup": old["wall_s"] / new["wall_s"],
                        "old_cpu_s": old["cpu_s"],
                        "new_cpu_s": new["cpu_s"],
                        "cpu_ratio": old["cpu_s"] / new["cpu_s"],
                        "old_load": [old["load_before"], old["load_after"]],
                        "new_load": [new["load_before"], new["load_after"]],
                        "runs_compared": len(shared),
                        "median_rel_best_loss_gap": sorted(gaps)[len(gaps) // 2] if gaps else None,
                        "max_rel_best_loss_gap": max(gaps) if gaps else None,
                    }
                )
        finally:
            _git("worktree", "remove", "--force", str(old_tree))
    record = {
        "command": "python benchmarks/bench_packed_sweeps.py " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{_cpu_name()}, {os.cpu_count()} logical cores, {platform.platform()}",
        "python": platform.python_version(),
        "old_revision": baseline,
        "new_revision": current + (" (dirty)" if dirty else ""),
        "workers": args.workers,
        "rows": rows,
    }
    lines = [
        f"# Whole sweeps, {args.baseline} code vs this tree (packed runs), same sitting",
        "",
        f"- command: `{record['command']}`",
        f"- machine: {record['machine']}; Python {record['python']}",
        f"- old code {baseline}, new code {record['new_revision']}; {args.workers} workers, one torch thread each",
        "- load: the 1-minute load average before / after each sweep; CPU s: user + system seconds of the sweep's "
        "processes (less sensitive than wall time to other jobs sharing the cores)",
        "",
        "| preset | scale | runs | old wall s | new wall s | speed-up | old CPU s | new CPU s | CPU ratio | old load "
        "| new load | best-loss gap median / max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        gap = (
            "-"
            if row["max_rel_best_loss_gap"] is None
            else f"{row['median_rel_best_loss_gap']:.1e} / {row['max_rel_best_loss_gap']:.1e}"
        )
        lines.append(
            f"| {row['preset']} | {row['scale']} | {row['runs']} | {row['old_wall_s']:.1f} | {row['new_wall_s']:.1f} "
            f"| {row['speedup']:.2f} | {row['old_cpu_s']:.1f} | {row['new_cpu_s']:.1f} | {row['cpu_ratio']:.2f} "
            f"| {row['old_load'][0]:.2f} / {row['old_load'][1]:.2f} "
            f"| {row['new_load'][0]:.2f} / {row['new_load'][1]:.2f} | {gap} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record is not None:
        args.record.mkdir(parents=True, exist_ok=True)
        stem = args.record / f"bench_packed_sweeps_{record['date']}"
        stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        stem.with_suffix(".md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
