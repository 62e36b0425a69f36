"""Grouping a sweep's runs into packs (experiments.sweeps.grouping): which runs share a pack, how packs are split
between workers, and that every run is executed exactly once."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.config import TrainConfig
from experiments.packing import PACK_VARYING_FIELDS, SEED_FIELDS, check_one_unit, unit_key
from experiments.studies import get_preset
from experiments.sweeps import grouping
from experiments.sweeps.grouping import MAX_PACK, group_into_packs
from experiments.sweeps.work import RunPack, RunTask


def _tasks(configs: list[TrainConfig]) -> list[RunTask]:
    return [RunTask(c.config_hash(), "train", c.to_dict(), f"runs/{c.config_hash()}") for c in configs]


def _members(items: list) -> list[list[RunTask]]:
    return [list(item.tasks) if isinstance(item, RunPack) else [item] for item in items]


def test_fig1_cpu_grid_packs_by_depth() -> None:
    """fig1 cpu on one worker: the ten L = 1 runs (five ranks, two seeds) form one pack and the ten L = 3 runs
    another (they differ in layers and lr); the L = 3 pack comes first (more work); ranks are adjacent in each pack."""
    tasks = _tasks(get_preset("fig1").runs("cpu"))
    packs = _members(group_into_packs(tasks, workers=1))
    assert [len(p) for p in packs] == [10, 10]
    assert [{t.spec["layers"] for t in p} for p in packs] == [{3}, {1}]
    for pack in packs:
        ranks = [t.spec["rank"] for t in pack]
        assert ranks == sorted(ranks)
    assert sorted(t.key for p in packs for t in p) == sorted(t.key for t in tasks)


def test_packs_are_cut_to_balance_the_workers() -> None:
    """On two workers the cut never lengthens the estimated makespan, never mixes signatures, and covers every run
    once; more workers get more, smaller packs."""
    for preset in ("fig1", "posn", "conjecture6", "figN"):
        tasks = _tasks(get_preset(preset).runs("cpu"))
        uncut = _members(group_into_packs(tasks, workers=1))
        cut = _members(group_into_packs(tasks, workers=2))
        assert sorted(t.key for p in cut for t in p) == sorted(t.key for t in tasks)
        assert all(len({unit_key(TrainConfig.from_dict(t.spec)) for t in p}) == 1 for p in cut)
        assert grouping._makespan(cut, 2) <= grouping._makespan(uncut, 2)
    smoke = _tasks(get_preset("smoke").runs("quick"))  # six runs, one signature
    assert [len(p) for p in _members(group_into_packs(smoke, workers=1))] == [6]
    assert len(_members(group_into_packs(smoke, workers=8))) > len(_members(group_into_packs(smoke, workers=2))) > 1


def test_depth_grid_packs_seeds_of_each_cell() -> None:
    """depth cpu: the theory model's head count changes with the width, so only the three seeds of a cell pack
    (10 cells of the main grid, 4 scratch cells of the starting-point arms); runs started from a construction stay
    single: (3 majority-vote widths + 1 full-rank cell) x 2 construction temperatures x 3 seeds = 24."""
    tasks = _tasks(get_preset("depth").runs("cpu"))
    items = _members(group_into_packs(tasks, workers=2))
    packs = [p for p in items if len(p) > 1]
    singles = [p[0] for p in items if len(p) == 1]
    assert len(packs) == 14 and all(len(p) == 3 for p in packs)
    assert all(len({(t.spec["layers"], t.spec["width"], t.spec["positional_dim"]) for t in p}) == 1 for p in packs)
    assert all(t.spec["init"] is None for p in packs for t in p)
    assert len(singles) == 24 and all(str(t.spec["init"]).startswith("construction:") for t in singles)


def test_large_groups_are_cut_into_even_packs() -> None:
    base = TrainConfig(d=4, N=3, rank=2, ffn_dim=8, steps=5, batch_size=4, device="cpu")
    configs = [dataclasses.replace(base, seed=s) for s in range(MAX_PACK + 4)]
    sizes = sorted(len(p) for p in _members(group_into_packs(_tasks(configs), workers=1)))
    assert sizes == [(MAX_PACK + 4) // 2] * 2


@pytest.mark.parametrize(
    "fields",
    [
        {"attention": "hardmax"},
        {"model": "gpt2", "embed_dim": 8, "positional": "additive"},
        {"model": "theory", "value": "full", "task": "nearest", "keys": "iid", "init": "w.safetensors"},
    ],
)
def test_unpackable_runs_stay_single(fields: dict) -> None:
    """Negative control: runs the packed models do not cover are executed alone, never packed."""
    base = TrainConfig(d=4, N=3, rank=2, ffn_dim=8, steps=5, batch_size=4, device="cpu", **fields)
    configs = [dataclasses.replace(base, seed=s) for s in range(3)]
    items = group_into_packs(_tasks(configs), workers=1)
    assert all(isinstance(item, RunTask) for item in items) and len(items) == 3


def _sweeps() -> list[tuple[str, str]]:
    from experiments.studies import PRESETS

    return [(name, scale) for name, preset in PRESETS.items() if not preset.files_only for scale in preset.scales]


@pytest.mark.parametrize("varying", [PACK_VARYING_FIELDS, SEED_FIELDS], ids=["packs", "seed-packs"])
def test_the_grouping_and_the_run_time_check_agree_on_every_committed_preset(varying: tuple[str, ...]) -> None:
    """Issue 39: one packing rule. For every preset and scale, the units the sweep's grouping forms are exactly what
    the run-time check (`check_one_unit`, which `train_packed` and the packed network call) accepts: every pack it
    forms passes, any two of its packs refuse to merge, and every run it leaves single is refused a pack of its own
    kind (or is no training run)."""
    checked = 0
    for preset, scale in _sweeps():
        specs = get_preset(preset).runs(scale)
        configs = {c.config_hash(): c for c in specs if isinstance(c, TrainConfig)}
        tasks = _tasks(list(configs.values()))
        units = _members(group_into_packs(tasks, workers=1, max_pack=len(tasks) + 1, varying=varying))
        packs = [[configs[t.key] for t in unit] for unit in units]
        alone = [pack for pack in packs if unit_key(pack[0], varying) is None]
        packs = [pack for pack in packs if unit_key(pack[0], varying) is not None]
        for pack in packs:
            check_one_unit(pack, varying)  # accepted: the grouping never forms a pack the run refuses
        for single in alone:
            assert len(single) == 1  # a run the rule keeps alone is never grouped
            with pytest.raises(ValueError, match="cannot be packed"):
                check_one_unit(single, varying)
        leaders = [pack[0] for pack in packs]
        for i, first in enumerate(leaders):
            for other in leaders[i + 1 :]:
                with pytest.raises(ValueError):
                    check_one_unit([first, other], varying)  # two units the grouping kept apart cannot merge
                checked += 1
    assert checked > 1000  # the pairs of units compared over all presets (a vacuous pass would compare none)
