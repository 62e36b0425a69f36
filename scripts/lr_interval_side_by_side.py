"""What stepping the learning rate once per epoch (the reference's scheduler) changes against our per-step warm-up, on
one short side-by-side at a tiny size (issue 49), written as a table the docs link to.

    python scripts/lr_interval_side_by_side.py OUT_DIR     # e.g. results/lr-interval-side-by-side

Runs: the reference's regime in small (farthest point, d = 16, N = 8, rank 8 = d/2, c = 1, FFN 64, batch 64, one
fixed set of K = 4 reference-sampler batches replayed for 100 epochs = 400 steps, warm-up 100 // 20 = 5 epochs = 20
steps, lr 0.01, layers as copies), at L = 1 and L = 3, data seeds 0 and 1 (one initialisation), each trained twice:
``lr_interval`` "step" (the rate rises (s + 1) / 20 per step, then the cosine per step) and "epoch" (0 for the first
epoch, then 1/4, 2/4, 3/4 of the peak, the peak for epochs 4 and 5, then the cosine per epoch). The difference
between the two is set against the difference between the two data seeds, which is the noise it must stand out from.
Writes OUT_DIR/README.md (the table) and OUT_DIR/side_by_side.json (every number in it). On one CPU thread it takes
about a minute; nothing is timed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from experiments.config import TrainConfig  # noqa: E402
from experiments.training.provenance import provenance  # noqa: E402

EPOCHS, K = 100, 4
BASE = {
    "task": "farthest",
    "d": 16,
    "N": 8,
    "rank": 8,
    "ffn_dim": 64,
    "batch_size": 64,
    "steps": EPOCHS * K,
    "schedule_steps": EPOCHS * K,
    "warmup_steps": EPOCHS // 20 * K,
    "warmup_fraction": 0.0,
    "layer_init": "copies",
    "sampler": "reference",
    "train_batches": K,
    "log_every": K,
    "checkpoint_every": EPOCHS * K // 2,
    "seed": 0,
    "device": "cpu",
}


def _train(config: TrainConfig, directory: Path) -> dict[str, object]:
    """Train one run; its losses, final population error and the learning rate of its first epochs."""
    import torch

    from experiments.training.loop import train

    torch.set_num_threads(1)
    result = train(config, directory, progress=False)
    rows = (directory / "metrics.csv").read_text().splitlines()[1:]  # step, loss, lr, time, population
    return {
        "best_loss": result.best_loss,
        "final_loss": result.final_loss,
        "population_error": result.extra.get("population_error"),
        "population_stderr": result.extra.get("population_stderr"),
        "lr_first_epochs": [float(row.split(",")[2]) for row in rows[:7]],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/lr_interval_side_by_side.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for layers in (1, 3):
            for data_seed in (0, 1):
                for interval in ("step", "epoch"):
                    config = TrainConfig(**{**BASE, "layers": layers, "data_seed": data_seed, "lr_interval": interval})
                    numbers = _train(config, Path(scratch) / config.config_hash())
                    runs.append({"layers": layers, "data_seed": data_seed, "lr_interval": interval, **numbers})
                    print(json.dumps(runs[-1]), flush=True)
    record = {"base": BASE, "runs": runs, **provenance()}
    (out / "side_by_side.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    (out / "README.md").write_text(_readme(runs, record), encoding="utf-8")
    return 0


def _number(value: object) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{float(value):.4g}"


def _readme(runs: list[dict], record: dict) -> str:
    lines = [
        "# The learning rate per epoch against per step: one short side-by-side (issue 49)",
        "",
        "Written by `python scripts/lr_interval_side_by_side.py results/lr-interval-side-by-side` (the script's "
        "docstring gives the runs); every number below is in [side_by_side.json](side_by_side.json), with the "
        f"revision that produced it ({record['git_revision']}"
        + (", the tree having uncommitted edits: git_dirty in the JSON" if record.get("git_dirty") else "")
        + ").",
        "",
        f"Farthest point, d = 16, N = 8, r = 8, c = 1, FFN 64, batch 64; one fixed set of K = {K} reference-sampler "
        f"batches replayed for {EPOCHS} epochs ({EPOCHS * K} steps), warm-up {EPOCHS // 20} epochs "
        f"({EPOCHS // 20 * K} steps), lr 0.01, one initialisation. 'step': the warm-up rises every step; 'epoch': "
        "the reference's staircase (0 for the first epoch). Training losses are the epoch means on the set; the "
        "population error is on 20,000 held-out samples.",
        "",
        "| L | data seed | lr per | lr of epochs 0-6 | best epoch loss | last epoch loss | population error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rates = ", ".join(f"{rate:.4g}" for rate in r["lr_first_epochs"])
        population = f"{_number(r['population_error'])} +- {_number(r['population_stderr'])}"
        lines.append(
            f"| {r['layers']} | {r['data_seed']} | {r['lr_interval']} | {rates} | {_number(r['best_loss'])} | "
            f"{_number(r['final_loss'])} | {population} |"
        )
    lines += [
        "",
        "Differences (epoch minus step) against the spread over the two data seeds (same schedule):",
        "",
        "| L | data seed | best loss: epoch - step | population: epoch - step | best loss: seed 1 - seed 0 (step) |",
        "|---|---|---|---|---|",
    ]
    by = {(r["layers"], r["data_seed"], r["lr_interval"]): r for r in runs}
    for layers in (1, 3):
        for seed in (0, 1):
            step, epoch = by[(layers, seed, "step")], by[(layers, seed, "epoch")]
            seeds = by[(layers, 1, "step")]["best_loss"] - by[(layers, 0, "step")]["best_loss"]
            population = (
                "-"
                if epoch["population_error"] is None or step["population_error"] is None
                else f"{epoch['population_error'] - step['population_error']:+.3g}"
            )
            lines.append(
                f"| {layers} | {seed} | {epoch['best_loss'] - step['best_loss']:+.3g} | {population} | {seeds:+.3g} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
