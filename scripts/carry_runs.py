"""Carry a live sweep's unfinished runs from one machine to the next through the repository.

    python scripts/carry_runs.py save SWEEP_DIR DEST_DIR
    python scripts/carry_runs.py restore DEST_DIR SWEEP_DIR

A long CPU sweep (fig1-d64-replay's 100k-step runs: some 12 core-hours a three-layer run) outlives the machine that
started it: each working session starts on a fresh machine, and a sweep directory outside the repository is gone with
the old one. ``save`` copies what a run needs to go on, for every run of ``SWEEP_DIR/runs/`` that has a checkpoint and
no ``result.json`` yet (its ``config.json``, ``metrics.csv`` and ``checkpoint.pt``), into ``DEST_DIR/<hash>/``, and
removes the entries of ``DEST_DIR`` whose run has since finished (its result is in the store then); ``restore`` copies
them back into ``SWEEP_DIR/runs/<hash>/``, where re-running the sweep's command resumes each run from its checkpoint
(bitwise the run that was never stopped: `experiments.training.checkpoints`).

Both check what they copy: a checkpoint is loaded and verified (`load_checkpoint`: its sha256 trailer and every
field), must belong to the run directory's config and must agree with its metrics (the resume's own check,
`experiments.training.loop`); anything else is refused in one line naming the file, exit 2. ``restore`` never
overwrites a run directory that already holds a started run. Run it from the repository root.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from experiments.analysis.sweep_directory import SweepDirectory
from experiments.training.checkpoints import STATS_FIELDS, load_checkpoint
from experiments.training.run_directory import RunDirectory
from experiments.training.run_start import check_epoch_rows


def _verified_copy(source: RunDirectory, target: RunDirectory) -> int:
    """Copy ``source``'s carried files into ``target`` and return the checkpoint's step, refusing (ValueError naming
    the file) a checkpoint that is damaged, belongs to another config than ``source``'s config.json, or disagrees with
    its metrics. The checkpoint is copied first and checked in its copy (a live run may replace its own meanwhile);
    metrics.csv is written with the rows up to the checkpoint's step (those a resume keeps); config.json comes last,
    since it marks a started run."""
    config = source.read_config()
    target.root.mkdir(parents=True, exist_ok=True)
    partial = target.checkpoint.with_name(f".{target.checkpoint.name}.carry.tmp")
    shutil.copyfile(source.checkpoint, partial)
    try:
        state = load_checkpoint(partial)
        if state["config"].config_hash() != config.config_hash():
            raise ValueError(f"{source.checkpoint}: belongs to another config than {source.config}")
        step = int(state["step"])
        rows = source.metrics_rows(step)
        stats = {name: state["stats"][name] for name in STATS_FIELDS}
        check_epoch_rows(source.metrics, rows, state["config"], step, stats)
    except ValueError as exc:
        partial.unlink()
        raise ValueError(str(exc).replace(str(partial), str(source.checkpoint))) from exc
    partial.replace(target.checkpoint)
    target.write_metrics(rows)
    config_partial = target.config.with_name(f".{target.config.name}.carry.tmp")
    shutil.copyfile(source.config, config_partial)
    config_partial.replace(target.config)
    return step


def unfinished_runs(sweep: SweepDirectory) -> list[RunDirectory]:
    """The run directories of ``sweep`` that have a checkpoint and no result."""
    return [files for files in sweep.run_directories() if files.checkpoint.is_file() and not files.result.exists()]


def save(sweep_dir: Path, dest: Path) -> list[str]:
    """Carry every unfinished run of ``sweep_dir`` into ``dest``; one line per run saved or dropped."""
    sweep = SweepDirectory(sweep_dir)
    if not sweep.runs.is_dir():
        raise ValueError(f"SWEEP_DIR: {sweep_dir} holds no {sweep.runs.name}/ folder")
    runs = unfinished_runs(sweep)
    steps = {files.root.name: _verified_copy(files, RunDirectory(dest / files.root.name)) for files in runs}
    lines = [f"saved {name[:12]} at step {step}" for name, step in steps.items()]
    for old in sorted(p for p in dest.glob("*") if p.is_dir()) if dest.is_dir() else []:
        if old.name not in steps and sweep.run(old.name).result.is_file():
            shutil.rmtree(old)
            lines.append(f"dropped {old.name[:12]} (finished)")
    return lines


def restore(dest: Path, sweep_dir: Path) -> list[str]:
    """Copy every carried run of ``dest`` into ``sweep_dir``'s runs folder; one line per run."""
    carried = [RunDirectory(p) for p in sorted(dest.glob("*")) if p.is_dir()] if dest.is_dir() else []
    if not carried:
        raise ValueError(f"DEST_DIR: {dest} holds no carried run")
    targets = {files.root.name: SweepDirectory(sweep_dir).run(files.root.name) for files in carried}
    busy = [str(t.root) for t in targets.values() if t.checkpoint.exists() or t.config.exists()]
    if busy:
        raise ValueError(f"SWEEP_DIR: {busy[0]} already holds a started run; restore into a fresh sweep directory")
    steps = {files.root.name: _verified_copy(files, targets[files.root.name]) for files in carried}
    return [f"restored {name[:12]} at step {step}" for name, step in steps.items()]


def main(argv: list[str]) -> int:
    usage = "usage: python scripts/carry_runs.py save SWEEP_DIR DEST_DIR | restore DEST_DIR SWEEP_DIR"
    if len(argv) != 3 or argv[0] not in ("save", "restore"):
        print(usage, file=sys.stderr)
        return 2
    action, first, second = argv[0], Path(argv[1]), Path(argv[2])
    try:
        lines = save(first, second) if action == "save" else restore(first, second)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
