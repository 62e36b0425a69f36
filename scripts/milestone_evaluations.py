"""Evaluate a live sweep's runs at milestone steps (20k, 40k, ...) on the recipe's 20,000 held-out samples.

    python scripts/milestone_evaluations.py SWEEP_DIR DEST_DIR [--every 20000] [--poll 20]

A run keeps one checkpoint, overwritten every ``checkpoint_every`` steps, and records its population error on 20,000
held-out samples only when it ends (``result.json``); along the way its curve has the error on the first 4,096 of
them. Issue 47 asks for the 20,000-sample figure at 20k, 40k, 60k and 80k of the 100k-step replay runs too. This
watcher polls ``SWEEP_DIR/runs/*/``: when a run's checkpoint stands at a multiple of ``--every`` (short of the run's
last step, which ``result.json`` covers), it copies the checkpoint, verifies it (`load_checkpoint`), evaluates it by
the recipe (`experiments.training.evaluation.evaluate_run`, the code `attnrank train --eval-only` uses) and writes
``DEST_DIR/<hash>/step-<S>.json`` with the population fields, the step, and the training loss on the set by then
(the lowest and the last epoch mean of ``metrics.csv`` up to S). A milestone whose checkpoint was overwritten before
the watcher saw it is reported as missed on stderr (the run's checkpoints are 500 steps, some 3.5 minutes, apart).

Run it with the same code as the runs (``PYTHONPATH`` = their worktree), so the evaluation is the one their results
use; it stops when every run under ``SWEEP_DIR`` has a result and no milestone is pending. Only reads ``SWEEP_DIR``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from experiments.json_files import write_json
from experiments.training.checkpoints import load_checkpoint
from experiments.training.evaluation import evaluate_run
from experiments.training.run_directory import RunDirectory


def _revision() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _set_losses(files: RunDirectory, step: int) -> dict[str, float]:
    """The lowest and the last epoch-mean training loss of the rows up to ``step``."""
    losses = [float(row[1]) for row in files.metrics_rows(step)]
    return {"best_loss": min(losses), "last_epoch_loss": losses[-1]}


def evaluate_milestone(files: RunDirectory, step: int, scratch: Path) -> dict[str, Any] | None:
    """The milestone record of ``files``' run at ``step``, or None when its checkpoint is elsewhere now."""
    copy = scratch / "checkpoint.pt"
    shutil.copyfile(files.checkpoint, copy)
    state = load_checkpoint(copy)
    if state["step"] != step:
        return None
    config = files.read_config()
    evaluation = evaluate_run(config, scratch)
    return {
        "hash": files.root.name,
        "step": step,
        **{key: evaluation[key] for key in ("population_error", "population_stderr", "population_samples")},
        **_set_losses(files, step),
        "evaluated_by": _revision(),
    }


def pending(files: RunDirectory, dest: Path, every: int) -> list[int]:
    """Milestones of ``files``' run not yet written to ``dest``."""
    steps = files.read_config().steps
    return [m for m in range(every, steps, every) if not (dest / files.root.name / f"step-{m}.json").exists()]


def watch(sweep_dir: Path, dest: Path, every: int, poll: float) -> None:
    torch.set_num_threads(1)
    missed: set[tuple[str, int]] = set()
    while True:
        runs = [RunDirectory(p) for p in sorted((sweep_dir / "runs").glob("*")) if (p / "config.json").is_file()]
        waiting = False
        for files in runs:
            todo = [m for m in pending(files, dest, every) if (files.root.name, m) not in missed]
            if not todo or not files.checkpoint.is_file():
                waiting = waiting or bool(todo)
                continue
            waiting = True
            rows = files.metrics_rows(10**12)
            last = int(rows[-1][0]) if rows else 0
            for milestone in todo:
                if last < milestone:
                    continue
                with tempfile.TemporaryDirectory() as scratch:
                    record = evaluate_milestone(files, milestone, Path(scratch))
                if record is None:
                    if last >= milestone + files.read_config().checkpoint_every:
                        missed.add((files.root.name, milestone))
                        print(f"{files.root.name[:12]}: missed step {milestone}", file=sys.stderr, flush=True)
                    continue
                (dest / files.root.name).mkdir(parents=True, exist_ok=True)
                write_json(dest / files.root.name / f"step-{milestone}.json", record)
                print(json.dumps(record), flush=True)
        unfinished = any(not files.result.is_file() for files in runs)
        if not runs or not (waiting or unfinished):
            return
        time.sleep(poll)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--every", type=int, default=20_000)
    parser.add_argument("--poll", type=float, default=20.0)
    args = parser.parse_args(argv)
    if args.every < 1 or args.poll <= 0:
        print("--every must be >= 1 and --poll > 0", file=sys.stderr)
        return 2
    if not (args.sweep_dir / "runs").is_dir():
        print(f"SWEEP_DIR: {args.sweep_dir} holds no runs/ folder", file=sys.stderr)
        return 2
    watch(args.sweep_dir, args.dest, args.every, args.poll)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
