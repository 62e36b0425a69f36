"""Train a short run of each model kind and sampler, and a pack of each packing kind, and write their metrics as JSON.

tests/experiments/training/test_kind_metrics.py runs it twice on one machine, with the code of the revision before
issue 48's pipeline and with this tree's, each on its own ``PYTHONPATH``, and compares the two files (issue 48:
numbers must not move). By hand::

    git archive 66a125c attnrank experiments theory constructions | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before python scripts/record_kind_metrics.py --revision 66a125c /tmp/before.json
    PYTHONPATH=$PWD python scripts/record_kind_metrics.py --revision HEAD /tmp/now.json

It uses only the public API both revisions share (``attnrank.TrainConfig``, ``attnrank.train``,
``attnrank.train_packed``). metrics.csv's columns are kept as written and result.json's numbers as ``repr`` of their
floats, so a comparison can be bitwise; a run's wall time is not recorded. The file also names the folder the code
was imported from, so a caller can check which code trained.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

import attnrank

SMALL = {"d": 8, "N": 4, "ffn_dim": 16, "steps": 20, "batch_size": 32, "log_every": 5, "checkpoint_every": 10}
"""Every case's size: 20 steps of 32 samples, four epochs, population errors at steps 10 and 20."""
THEORY = {**SMALL, "task": "nearest", "keys": "orthonormal", "N": 2, "model": "theory", "value": "full", "rank": 1}

CASES: dict[str, list[dict[str, Any]]] = {
    "encoder, farthest, two layers": [{**SMALL, "task": "farthest", "rank": 4, "layers": 2, "seed": 3}],
    "encoder, nearest, additive positions, copied layers": [
        {
            **SMALL,
            "task": "nearest",
            "keys": "iid",
            "rank": 2,
            "layers": 2,
            "positional": "additive",
            "layer_init": "copies",
            "seed": 4,
        }
    ],
    "encoder, hardmax": [{**SMALL, "task": "farthest", "rank": 4, "attention": "hardmax", "temperature": 4.0}],
    "encoder, icl (causal, read-out head)": [{**SMALL, "task": "icl", "d": 4, "N": 6, "rank": 2, "seed": 5}],
    "encoder, fixed set of 5 batches, data seed 7": [
        {**SMALL, "task": "farthest", "rank": 4, "train_batches": 5, "data_seed": 7}
    ],
    "encoder, device sampler (on the CPU)": [{**SMALL, "task": "farthest", "rank": 2, "sampler": "device"}],
    "encoder, reference sampler": [
        {
            **SMALL,
            "task": "farthest",
            "rank": 8,
            "sampler": "reference",
            "train_batches": 5,
            "lr_interval": "epoch",
            "warmup_steps": 5,
            "warmup_fraction": 0.0,
        }
    ],
    "theory, one layer": [{**THEORY, "width": 2, "seed": 1}],
    "theory, two layers, scratch coordinates": [
        {**THEORY, "layers": 2, "positional": "concat", "positional_dim": 8, "seed": 2}
    ],
    "theory, farthest": [{**THEORY, "task": "farthest", "N": 3, "seed": 6}],
    "gpt2, icl": [
        {
            **SMALL,
            "task": "icl",
            "d": 4,
            "N": 6,
            "model": "gpt2",
            "embed_dim": 8,
            "rank": 4,
            "positional": "additive",
            "seed": 8,
        }
    ],
    "encoder pack (ranks 8, 2, 1; two seeds and temperatures)": [
        {**SMALL, "task": "farthest", "rank": r, "seed": 10 * r + s, "temperature": t}
        for r in (8, 2, 1)
        for s, t in ((0, 1.0), (1, 4.0))
    ],
    "theory pack (three seeds and temperatures)": [
        {**THEORY, "layers": 2, "seed": s, "temperature": t} for s, t in ((0, 1.0), (1, 4.0), (2, 2.0))
    ],
}
"""Case name -> the config fields of its runs (one: a run trained alone by ``train``; more: one pack)."""
COLUMNS = ("step", "loss", "lr", "population")
"""The metrics.csv columns recorded (``time`` is the machine's, not the run's)."""


def run_metrics(directory: Path) -> dict[str, Any]:
    """A finished run's metrics.csv (the recorded columns, as written) and result.json's losses and population error
    (as ``repr`` of the floats)."""
    with (directory / "metrics.csv").open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    result = json.loads((directory / "result.json").read_text(encoding="utf-8"))
    return {
        "metrics": [[row[c] for c in COLUMNS] for row in rows],
        "best_loss": repr(float(result["best_loss"])),
        "final_loss": repr(float(result["final_loss"])),
        "population_error": repr(float(result["population_error"])),
    }


def train_case(runs: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """Train one case's runs in ``folder`` (alone, or as one pack) and return each run's metrics."""
    torch.set_num_threads(1)
    configs = [attnrank.TrainConfig(**{"device": "cpu", **fields}) for fields in runs]
    directories = [folder / f"run{k}" for k in range(len(configs))]
    if len(configs) == 1:
        attnrank.train(configs[0], directories[0], progress=False)
    else:
        results = attnrank.train_packed(configs, directories)
        if any(r.extra.get("packed") != len(configs) for r in results):
            raise RuntimeError("the pack was not trained as one pack")
    return [run_metrics(d) for d in directories]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, help="the JSON file to write")
    parser.add_argument("--revision", required=True, help="the revision whose code is on the path (recorded)")
    args = parser.parse_args(argv)
    code = Path(attnrank.__file__).resolve().parent.parent  # where the code that trained came from
    recorded: dict[str, Any] = {"revision": args.revision, "code": str(code)}
    with tempfile.TemporaryDirectory() as scratch:
        recorded["cases"] = {
            name: train_case(runs, Path(scratch) / f"case{i}") for i, (name, runs) in enumerate(CASES.items())
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    print(f"code from {code}; wrote {len(CASES)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
