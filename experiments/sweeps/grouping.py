"""How a sweep's runs are grouped into units of work: packs (the default), seed batches, or one run each.

- Packs (`RunPack`, `experiments.training.packed`): runs that may share a pack (`experiments.packing`: equal configs
  but for seed, temperature and encoder rank) are trained in one process and one step, each in its own run
  directory with its own checkpoints, so a killed pack resumes like single runs. Packs hold at most `MAX_PACK` runs;
  when there are fewer units of work than workers, the largest packs are halved until every worker has one (a pack
  is one process, so an idle worker would otherwise be lost). Within a pack, runs are ordered by rank and seed so
  that runs of equal rank are adjacent (one attention segment each).
- Seed batches (`RunBatch`, `experiments.training.loop.train_batched`): runs equal up to the seed, stacked by vmap,
  without checkpoints (the GPU option ``--batch-seeds``).

Units are returned longest first (estimated as steps x runs x layers), so that the longest pack starts first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from experiments.config import TrainConfig
from experiments.packing import pack_signature, packing_refusal
from experiments.sweeps.work import RunBatch, RunPack, RunTask, WorkItem
from theory.validation import check_int

MAX_PACK = 16
"""Most runs trained in one pack (beyond this the pack's tensors grow past the caches and gain little)."""


def group_by_seed(tasks: Sequence[RunTask]) -> list[WorkItem]:
    """Training tasks whose configs are equal up to the seed become one RunBatch (others stay single)."""
    groups: dict[str, list[RunTask]] = {}
    items: list[WorkItem] = []
    for task in tasks:
        if task.kind != "train" or task.spec.get("init") is not None:
            items.append(task)
            continue
        key = json.dumps({k: v for k, v in task.spec.items() if k != "seed"}, sort_keys=True)
        groups.setdefault(key, []).append(task)
    for members in groups.values():
        items.append(RunBatch(tuple(members)) if len(members) > 1 else members[0])
    return items


def _cost(item: WorkItem) -> float:
    """Rough work of a unit: steps x runs x layers of its training runs (0 for other kinds)."""
    members = item.tasks if isinstance(item, (RunBatch, RunPack)) else (item,)
    return float(sum(int(t.spec.get("steps", 0)) * int(t.spec.get("layers", 1)) for t in members if t.kind == "train"))


def _halve(pack: list[RunTask]) -> tuple[list[RunTask], list[RunTask]]:
    """Split a pack (ordered by rank, seed) into two halves of alternate members, so both keep every rank."""
    return pack[0::2], pack[1::2]


def group_into_packs(tasks: Sequence[RunTask], workers: int = 1, max_pack: int = MAX_PACK) -> list[WorkItem]:
    """The sweep's tasks as units of work: packs of runs that may share one, single runs otherwise (module docstring).

    Args:
        tasks: the runs to execute.
        workers: parallel workers that will execute the units (packs are halved until there are this many units).
        max_pack: most runs per pack (>= 1).

    Returns:
        RunPack and RunTask items covering every task once, longest first.
    """
    workers = check_int("workers", workers, minimum=1)
    max_pack = check_int("max_pack", max_pack, minimum=1)
    groups: dict[str, list[tuple[TrainConfig, RunTask]]] = {}
    singles: list[RunTask] = []
    for task in tasks:
        config = TrainConfig.from_dict(dict(task.spec)) if task.kind == "train" else None
        if config is None or packing_refusal(config) is not None:
            singles.append(task)
            continue
        groups.setdefault(pack_signature(config), []).append((config, task))
    packs: list[list[RunTask]] = []
    for members in groups.values():
        members.sort(key=lambda pair: (pair[0].rank, pair[0].seed, pair[1].key))
        ordered = [task for _, task in members]
        count = -(-len(ordered) // max_pack)  # ceil: packs of at most max_pack, as even as possible
        packs.extend(ordered[i::count] for i in range(count))
    while len(packs) + len(singles) < workers:
        largest = max(packs, key=len, default=None)
        if largest is None or len(largest) < 2:
            break
        packs.remove(largest)
        packs.extend(_halve(largest))
    items: list[WorkItem] = [RunPack(tuple(p)) if len(p) > 1 else p[0] for p in packs]
    items.extend(singles)
    return sorted(items, key=_cost, reverse=True)
