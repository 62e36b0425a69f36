"""Progress of unfinished runs as a markdown table, from copies of their metrics.csv (issue 28's d = 64 runs).

Each CSV is a run's metrics.csv (step, loss, lr, time) saved under a name that says which cell it is. The table gives
the epoch-mean training loss every EVERY steps, the lowest so far (the paper's metric, best_loss, once finished), the
learning rate and the seconds of training, so a document can cite unfinished runs without retyping their numbers.

Usage: python scripts/progress_table.py EVERY CSV [CSV ...] > table.md
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def rows(path: Path) -> list[tuple[int, float, float, float]]:
    """(step, loss, lr, seconds) of every epoch in ``path``."""
    with path.open(newline="", encoding="utf-8") as stream:
        return [(int(r["step"]), float(r["loss"]), float(r["lr"]), float(r["time"])) for r in csv.DictReader(stream)]


def table(every: int, paths: list[Path]) -> str:
    """One markdown table per run: loss every ``every`` steps and at the last epoch, with the running minimum."""
    out = []
    for path in paths:
        epochs = rows(path)
        if not epochs:
            out.append(f"`{path.name}`: no epoch closed yet.\n")
            continue
        out.append(f"`{path.name}` (last epoch: step {epochs[-1][0]})\n")
        out.append("| step | epoch loss | lowest so far | lr | seconds |\n|---|---|---|---|---|")
        lowest = float("inf")
        for index, (step, loss, lr, seconds) in enumerate(epochs):
            lowest = min(lowest, loss)
            if step % every == 0 or index == len(epochs) - 1:
                out.append(f"| {step} | {loss:.4f} | {lowest:.4f} | {lr:.5f} | {seconds:.0f} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdecimal() or int(argv[0]) < 1:
        print("usage: progress_table.py EVERY CSV [CSV ...] (EVERY an integer >= 1)", file=sys.stderr)
        return 2
    paths = [Path(p) for p in argv[1:]]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"progress_table.py: no such file: {missing[0]}", file=sys.stderr)
        return 2
    print(table(int(argv[0]), paths))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
