"""Recover the training curves of a committed store whose run directories are gone, by training its runs again.

    python scripts/recover_curves.py results/depth-cpu [--scratch DIR] [--limit N]

For every finished training run of ``STORE_DIR/results.sqlite`` that has no curve (no ``runs/<hash>/metrics.csv`` and
no entry in ``STORE_DIR/curves.csv``), the run's stored config is trained again, alone and on one thread, in
``--scratch`` (default ``/tmp/recover-curves/<store name>``), and its curve is added to ``curves.csv`` with the
source ``re-run <revision>: best_loss <x> vs stored <y> (relative difference <z>)``. The stored results are never
changed: a re-run is not the original run (another process, an unpacked step, another revision), so its curve is
labelled as recovered and the report says so. A re-run whose best loss differs from the stored one by more than
``--tolerance`` (default 1e-4, relative) is not written: its curve would describe another run.

Resumable: the file is rewritten after every run, and a killed re-run resumes from its checkpoint in the scratch
directory. Prints one line per run and a summary with the largest relative difference.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import torch

from experiments.analysis.run_curves import read_metrics_curve, write_curves_file
from experiments.analysis.sweep_directory import SweepDirectory
from experiments.config import TrainConfig
from experiments.training.loop import train
from experiments.training.run_directory import RunDirectory


def _revision() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "unknown"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store_dir", type=Path)
    parser.add_argument("--scratch", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None, help="re-run at most this many runs (default all)")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args(argv)
    store = SweepDirectory(args.store_dir)
    database = store.store
    if not database.is_file():
        print(f"store_dir: {args.store_dir} holds no {database.name}", file=sys.stderr)
        return 2
    scratch = args.scratch or Path("/tmp/recover-curves") / args.store_dir.resolve().name
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    rows = connection.execute(
        "SELECT hash, spec, metrics FROM runs WHERE kind = 'train' AND status = 'finished' ORDER BY seconds"
    ).fetchall()
    connection.close()
    path = store.curves
    curves, sources = store.read_curves()
    missing = [row for row in rows if row[0] not in curves and read_metrics_curve(store.run(row[0]).metrics)[0] is None]
    todo = missing[: args.limit]
    print(f"{len(rows)} finished train runs, {len(missing)} without a curve, re-running {len(todo)}", flush=True)
    torch.set_num_threads(1)
    revision, largest = _revision(), 0.0
    for index, (key, spec, metrics) in enumerate(todo, start=1):
        config = TrainConfig.from_dict(json.loads(spec))
        if config.config_hash() != key:
            print(f"{key[:10]}: the stored spec does not hash to its key; skipped", flush=True)
            continue
        started = time.perf_counter()
        result = train(config, scratch / key, progress=False)
        stored = float(json.loads(metrics)["best_loss"])
        relative = abs(result.best_loss - stored) / abs(stored) if stored else math.inf
        curve, why = read_metrics_curve(RunDirectory(scratch / key).metrics)
        verdict = "kept"
        if curve is None or not relative <= args.tolerance:
            verdict = f"not kept ({why or 'best loss beyond the tolerance'})"
        else:
            largest = max(largest, relative)
            curves[key] = curve
            sources[key] = (
                f"re-run {revision}: best_loss {result.best_loss!r} vs stored {stored!r} "
                f"(relative difference {relative:.1e})"
            )
            write_curves_file(path, curves, sources)
        print(
            f"[{index}/{len(todo)}] {key[:10]} {time.perf_counter() - started:.1f} s, relative difference "
            f"{relative:.1e}: {verdict}",
            flush=True,
        )
    print(f"done; largest relative difference of a kept curve {largest:.1e}; {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
