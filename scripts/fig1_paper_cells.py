"""Figure 1's deciding cells at the paper's size, for scripts/gpu_fig1_paper.sh: train a group of them as one pack in
the run directories `attnrank sweep fig1 --scale SCALE` gives them, or list which of them have finished.

    python scripts/fig1_paper_cells.py train SWEEP_DIR LAYERS "SEEDS" --set KEY=VALUE ...
    python scripts/fig1_paper_cells.py finished SWEEP_DIR LAYERS "SEEDS" --set KEY=VALUE ...   # "rank seed" lines

The cells are the runs of fig1's scale SCALE (environment, default paper) with the given depth, width c = 1, rank in
{64, 32, 8} and the given seeds, with the --set overrides applied exactly as `attnrank sweep --set` applies them (so
the config hashes, and hence the run directories SWEEP_DIR/runs/<hash>, are the sweep's own: a sweep driver selecting
one of them finds it finished).

At scale paper (the paper's grid in its regime: one initialisation, data seeds 0-4 on one fixed set of 100 batches)
and with PRESET=fig1-d64-replay (that preset's paper-scale runs, issue 38) SEEDS are data seeds, and ``finished``
prints "rank data_seed" with the data seed as the JSON value `attnrank sweep --only data_seed=...` matches (null for
data seed 0, which equals the runs' seed 0). At scale fresh (the same grid on fresh batches) SEEDS are the runs'
initialisation seeds.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from experiments.analysis.sweep_directory import SweepDirectory  # noqa: E402
from experiments.config import TrainConfig  # noqa: E402
from experiments.studies import get_preset  # noqa: E402
from experiments.sweeps.preflight import resolve_runs  # noqa: E402

DECIDING_RANKS = (64, 32, 8)
"""Figure 1's deciding ranks at d = 64: full, half and an eighth."""


REPLAY_PRESET = "fig1-d64-replay"


SCALES = ("paper", "fresh")
"""fig1's scales whose deciding cells the script trains."""


def by_data_seed(preset: str, scale: str) -> bool:
    """Whether the runs of a group differ in their data seeds (one initialisation) rather than their seeds."""
    return preset == REPLAY_PRESET or scale == "paper"


def cells(
    layers: int, seeds: set[int], sets: list[str], preset: str = "fig1", scale: str = "paper"
) -> list[TrainConfig]:
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
    if scale not in SCALES or (preset == REPLAY_PRESET and scale != "paper"):
        raise ValueError(f"SCALE must be one of {', '.join(SCALES)} (paper for {REPLAY_PRESET}), got {scale!r}")
    data_seeds = by_data_seed(preset, scale)
    chosen = [
        c
        for c in resolve_runs(get_preset(preset), scale, overrides)
        if isinstance(c, TrainConfig)
        and c.layers == layers
        and c.width == 1
        and c.rank in DECIDING_RANKS
        and (c.data_seed_value if data_seeds else c.seed) in seeds
    ]
    if not chosen:
        raise ValueError(
            f"no {preset} {scale} run has layers {layers}, width 1, rank in {DECIDING_RANKS}, "
            f"{'data seed' if data_seeds else 'seed'} in {seeds}"
        )
    return chosen


def main(argv: list[str]) -> int:
    action, sweep_dir, layers, seeds, *sets = argv
    preset = os.environ.get("PRESET", "fig1")
    scale = os.environ.get("SCALE", "paper")
    configs = cells(int(layers), {int(s) for s in seeds.split()}, sets, preset, scale)
    directories = [SweepDirectory(sweep_dir).run(c.config_hash()).root for c in configs]
    if action == "finished":
        for config, directory in zip(configs, directories, strict=True):
            if (directory / "result.json").is_file():
                seed = json.dumps(config.data_seed) if by_data_seed(preset, scale) else config.seed
                print(config.rank, seed)
        return 0
    if action != "train":
        raise ValueError(f"action must be train or finished, got {action!r}")
    from experiments.training.loop import train_packed  # loads torch (the listing above does not need it)

    results = train_packed(configs, directories, progress=True)
    rows = [
        {"rank": c.rank, "seed": c.seed, "data_seed": c.data_seed_value, **r.to_dict()}
        for c, r in zip(configs, results, strict=True)
    ]
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
