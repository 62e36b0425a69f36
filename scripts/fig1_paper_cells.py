"""Figure 1's deciding cells at the paper scale, for scripts/gpu_fig1_paper.sh: train a group of them as one pack in
the run directories `attnrank sweep fig1 --scale paper` gives them, or list which of them have finished.

    python scripts/fig1_paper_cells.py train SWEEP_DIR LAYERS "SEEDS" --set KEY=VALUE ...
    python scripts/fig1_paper_cells.py finished SWEEP_DIR LAYERS "SEEDS" --set KEY=VALUE ...   # "rank seed" lines

The cells are the fig1 paper scale's runs with the given depth, width c = 1, rank in {64, 32, 8} and the given seeds,
with the --set overrides applied exactly as `attnrank sweep --set` applies them (so the config hashes, and hence the
run directories SWEEP_DIR/runs/<hash>, are the sweep's own: a sweep driver selecting one of them finds it finished).

With PRESET=fig1-d64-replay in the environment the cells are that preset's paper-scale runs instead (the paper's data
regime, issue 38) and SEEDS are data seeds; ``finished`` then prints "rank data_seed" with the data seed as the JSON
value `attnrank sweep --only data_seed=...` matches (null for data seed 0, which equals the run's seed).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from experiments.config import TrainConfig  # noqa: E402
from experiments.studies import get_preset  # noqa: E402
from experiments.sweeps.preflight import resolve_runs  # noqa: E402
from experiments.sweeps.runner import RUNS_DIR  # noqa: E402

DECIDING_RANKS = (64, 32, 8)
"""Figure 1's deciding ranks at d = 64: full, half and an eighth."""


REPLAY_PRESET = "fig1-d64-replay"


def cells(layers: int, seeds: set[int], sets: list[str], preset: str = "fig1") -> list[TrainConfig]:
    """The group's configs, in the preset's order, with the overrides of ``sets`` (``--set KEY=VALUE`` words)."""
    if len(sets) % 2 or any(flag != "--set" for flag in sets[0::2]):
        raise ValueError(f"expected --set KEY=VALUE pairs, got {sets}")
    overrides: dict[str, object] = {}
    for item in sets[1::2]:
        key, _, text = item.partition("=")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    if preset not in ("fig1", REPLAY_PRESET):
        raise ValueError(f"PRESET must be fig1 or {REPLAY_PRESET}, got {preset!r}")
    chosen = [
        c
        for c in resolve_runs(get_preset(preset), "paper", overrides)
        if isinstance(c, TrainConfig)
        and c.layers == layers
        and c.width == 1
        and c.rank in DECIDING_RANKS
        and (c.data_seed_value if preset == REPLAY_PRESET else c.seed) in seeds
    ]
    if not chosen:
        raise ValueError(
            f"no {preset} paper run has layers {layers}, width 1, rank in {DECIDING_RANKS}, seed in {seeds}"
        )
    return chosen


def main(argv: list[str]) -> int:
    action, sweep_dir, layers, seeds, *sets = argv
    preset = os.environ.get("PRESET", "fig1")
    configs = cells(int(layers), {int(s) for s in seeds.split()}, sets, preset)
    directories = [Path(sweep_dir) / RUNS_DIR / c.config_hash() for c in configs]
    if action == "finished":
        for config, directory in zip(configs, directories, strict=True):
            if (directory / "result.json").is_file():
                seed = json.dumps(config.data_seed) if preset == REPLAY_PRESET else config.seed
                print(config.rank, seed)
        return 0
    if action != "train":
        raise ValueError(f"action must be train or finished, got {action!r}")
    from experiments.training.packed import train_packed  # loads torch (the listing above does not need it)

    results = train_packed(configs, directories, progress=True)
    rows = [{"rank": c.rank, "seed": c.seed, **r.to_dict()} for c, r in zip(configs, results, strict=True)]
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
