"""How a sweep's runs are grouped into units of work: packs (the default), or one run each.

Packs (`RunPack`, `experiments.training.packed`): runs whose `experiments.packing.unit_key` is equal (configs equal
but for seed, data seed, temperature and encoder rank; or, for ``--batch-seeds``, but for the seeds alone) are
trained in one process and one step, each in its own run directory with its own checkpoints, so a killed pack resumes
like single runs. Packs hold at most `MAX_PACK` runs, and are cut into smaller packs where that shortens the sweep: a
pack is one process, so one large pack could keep one worker busy while the others idle (`_balanced` compares cuts by
their estimated makespan). Within a pack, runs are ordered by rank and seeds so that runs of equal rank are adjacent
(one attention segment each).

Units are returned longest first (work estimated as steps x layers per run, plus a pack's fixed share), so that the
longest unit starts first.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.config import TrainConfig
from experiments.model_kinds import model_kind
from experiments.packing import PACK_VARYING_FIELDS, unit_key
from experiments.sweeps.work import RunPack, RunTask, WorkItem
from theory.validation import check_int

MAX_PACK = 16
"""Most runs trained in one pack (beyond this the pack's tensors grow past the caches and gain little)."""


PACK_OVERHEAD_RUNS = 0.7
"""The fixed cost of one step, in runs' arithmetic: one run alone costs about (1 + 0.7) units of work per step and a
pack of n runs (n + 0.7) (measured at d = 16, N = 8, L = 1, one thread: 8 ms for one run alone, 26.5 ms for five
packed, 49.8 ms for ten)."""


def _run_work(task: RunTask) -> float:
    """Rough arithmetic of one training run alone (its model kind's `step_work`; 0 for other run kinds)."""
    if task.kind != "train":
        return 0.0
    return model_kind(str(task.spec.get("model", "encoder"))).step_work(task.spec)


def _unit_work(members: Sequence[RunTask]) -> float:
    """Estimated work of a unit: n runs packed cost (n + 0.7) / 1.7 runs alone (`PACK_OVERHEAD_RUNS`)."""
    runs = [_run_work(t) for t in members]
    if len(runs) < 2:
        return sum(runs)
    return sum(runs) * (len(runs) + PACK_OVERHEAD_RUNS) / (len(runs) * (1 + PACK_OVERHEAD_RUNS))


def _split(pack: list[RunTask], parts: int) -> list[list[RunTask]]:
    """``pack`` (ordered by rank, seed) cut into ``parts`` contiguous pieces of near-equal work (equal ranks stay
    together as far as the balance allows)."""
    works = [_run_work(t) for t in pack]
    total = sum(works)
    pieces: list[list[RunTask]] = []
    current: list[RunTask] = []
    done = 0.0
    for index, (task, work) in enumerate(zip(pack, works, strict=True)):
        left_runs, left_pieces = len(pack) - index, parts - len(pieces)
        # Close the current piece when this run would carry it past its share (keeping a run for every later piece).
        boundary = total * (len(pieces) + 1) / parts
        if current and (left_runs < left_pieces or done + work / 2 > boundary) and left_pieces > 1:
            pieces.append(current)
            current = []
        current.append(task)
        done += work
    pieces.append(current)
    return pieces


def _makespan(units: list[list[RunTask]], workers: int) -> float:
    """Longest worker's work when units are started longest first on ``workers`` workers (the pool's order)."""
    loads = [0.0] * workers
    for work in sorted((_unit_work(u) for u in units), reverse=True):
        loads[loads.index(min(loads))] += work
    return max(loads)


def _balanced(packs: list[list[RunTask]], singles: list[RunTask], workers: int) -> list[list[RunTask]]:
    """The packs cut so that the longest worker's estimated work is least (greedily, fewest cuts among equals).

    A pack is one process, so one large pack can keep a worker busy while the others idle; cutting it balances the
    workers, but each piece pays its own fixed cost (`PACK_OVERHEAD_RUNS`). Starting from the uncut packs, the cut
    that shortens the estimated makespan most (one more piece of one pack) is made until none shortens it.
    """
    units = [[t] for t in singles]
    parts = [1] * len(packs)

    def layout(counts: list[int]) -> list[list[RunTask]]:
        return [piece for pack, n in zip(packs, counts, strict=True) for piece in _split(pack, n)]

    span = _makespan(layout(parts) + units, workers)
    while True:
        trials = []
        for index, pack in enumerate(packs):
            if parts[index] < len(pack):
                counts = parts[:index] + [parts[index] + 1] + parts[index + 1 :]
                trials.append((_makespan(layout(counts) + units, workers), index, counts))
        if not trials:
            break
        best_span, _, best_counts = min(trials)
        if best_span >= span * (1 - 1e-9):
            break
        span, parts = best_span, best_counts
    return layout(parts)


def group_into_packs(
    tasks: Sequence[RunTask],
    workers: int = 1,
    max_pack: int = MAX_PACK,
    varying: Sequence[str] = PACK_VARYING_FIELDS,
) -> list[WorkItem]:
    """The sweep's tasks as units of work: packs of runs that may share one, single runs otherwise (module docstring).

    Args:
        tasks: the runs to execute.
        workers: parallel workers that will execute the units (packs are cut to balance them).
        max_pack: most runs per pack (>= 1).
        varying: the fields the runs of a pack may differ in (`experiments.packing.unit_key`; SEED_FIELDS for
            ``--batch-seeds``).

    Returns:
        RunPack and RunTask items covering every task once, longest first.
    """
    max_pack = check_int("max_pack", max_pack, minimum=1)
    groups: dict[str, list[tuple[TrainConfig, RunTask]]] = {}
    singles: list[RunTask] = []
    for task in tasks:
        config = TrainConfig.from_dict(dict(task.spec)) if task.kind == "train" else None
        key = None if config is None else unit_key(config, varying)
        if config is None or key is None:
            singles.append(task)
            continue
        groups.setdefault(key, []).append((config, task))
    packs: list[list[RunTask]] = []
    for members in groups.values():
        members.sort(key=lambda pair: (pair[0].rank, pair[0].seed, pair[0].data_seed_value, pair[1].key))
        ordered = [task for _, task in members]
        packs.extend(_split(ordered, -(-len(ordered) // max_pack)))  # at most max_pack runs each
    packs = _balanced(packs, singles, workers)
    items: list[WorkItem] = [RunPack(tuple(p)) if len(p) > 1 else p[0] for p in packs]
    items.extend(singles)
    return sorted(items, key=lambda item: _unit_work(_members(item)), reverse=True)


def _members(item: WorkItem) -> tuple[RunTask, ...]:
    return item.tasks if isinstance(item, RunPack) else (item,)
