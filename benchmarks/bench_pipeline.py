"""Benchmark: a training step of the one pipeline (issue 48) against the two it replaced, one process, one thread.

Issue 48 made a single run a pack of one: the models compute a pack on stacked parameters
(`experiments.models.run_axis`) and one loop trains any K runs (`experiments.training.packed.TrainedRuns`), where
before a run was stepped by ``SingleModel`` and a pack by ``PackedModels`` over the separate ``PackedEncoder`` /
``PackedTheoryModel``. This times one whole optimiser step of the training loop (`Training.optimizer_step`: draw
the batches, forward, backward, AdamW, schedule) of each cell by both, round by round in one process
(torch.set_num_threads(1)), so both see the same allocator, the same load and the same processor state:

- ``single``: one run at fig1's paper size (farthest, d = 64, N = 16, L = 3, r = 32, c = 1, FFN 2048, batch 256,
  layers copied at initialisation): ``new`` (a pack of one) against ``old`` (``SingleModel``);
- ``pack``: the fig1 preset's quick unit, its 8 runs as one pack, read from the preset (d = 16, N = 8, L = 1, FFN
  64, batch 128, ranks 16, 8, 4, 1, seeds 0 and 1, temperature 128): ``new`` against ``old`` (``PackedModels`` over
  ``PackedEncoder``);
- ``theory pack`` (beside the issue's two): 8 theory models (nearest, d = 16, N = 2, D_2 keys, one layer, rank 4,
  c = 4, full value maps, batch 128, seeds 0 .. 7, temperatures 1 .. 8), whose attention is now the single run's
  (``scaled_dot_product_attention``) where ``PackedTheoryModel`` wrote its own.

The old code is that of a revision before issue 48 (``--baseline``, default `BASELINE`), read with ``git archive``
into a temporary folder (nothing in the repository changes) and imported from there in this same process: its
modules are imported first, kept, and taken out of ``sys.modules`` again before this tree's are imported, so each
keeps its own (the old code imports nothing at step time). No copy of the old code lives here.

Both start from the same initialisation and draw the same batches, so their losses are compared step for step
(``bitwise``): a single run and an encoder pack must agree bitwise; a theory pack to float32 rounding (its
``max_rel`` at most `THEORY_RTOL`). Otherwise the script says so on stderr and exits with status 1. The goal:
``new / old`` within 5% (<= 1.05) for ``single`` and ``pack``.

The allocator: like ``attnrank train``, the benchmark re-executes itself once with jemalloc preloaded when the library
is installed (`experiments.allocator`); ``ATTNRANK_ALLOCATOR=system`` keeps glibc's malloc. Wall times are printed with
the thread's CPU time beside them (which excludes time spent waiting for a core) and the 1-minute load average before
and after each cell: quote only wall times from a quiet machine.

Usage:
    python benchmarks/bench_pipeline.py --record benchmarks/results      # the three cells (minutes, quiet machine)
    python benchmarks/bench_pipeline.py --tiny --repeats 2               # a rehearsal in seconds
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from experiments.allocator import SWITCH, reexec_with_allocator  # noqa: E402  (standard library only)

if __name__ == "__main__":
    reexec_with_allocator((Path(__file__).name,))  # before torch is loaded: the same process, jemalloc preloaded

import argparse  # noqa: E402
import datetime  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from machine import allocator_state, processor, revision  # noqa: E402

BASELINE = "66a125c"
"""The last revision before issue 48's pipeline: ``SingleModel`` and ``PackedModels`` (experiments/training/loop.py and
packed.py), ``PackedEncoder`` and ``PackedTheoryModel`` (experiments/models/packed.py)."""
PACKAGES = ("experiments", "theory", "constructions")
"""The repository's packages: the old revision's are imported apart from this tree's."""
OLD_MODULES = (
    "experiments.config",
    "experiments.models.packed",
    "experiments.training.loop",
    "experiments.training.packed",
    "experiments.training.run",
    "experiments.training.schedule",
)
GOAL = 1.05
"""new / old at most this for the single run and the pack (issue 48: within 5%)."""

SINGLE = {
    "task": "farthest",
    "d": 64,
    "N": 16,
    "layers": 3,
    "rank": 32,
    "width": 1,
    "ffn_dim": 2048,
    "batch_size": 256,
    "layer_init": "copies",
    "steps": 100_000,
    "warmup_steps": 5000,
    "warmup_fraction": 0.0,
    "schedule_steps": 100_000,
    "device": "cpu",
}
"""fig1's paper-scale cell, L = 3, r = d / 2 (as benchmarks/bench_cpu_step.py times it)."""
PACK_PRESET, PACK_SCALE = "fig1", "quick"
"""The pack cell: this preset's unit at this scale (`experiments.studies.fig1`, quick: d = 16, N = 8, L = 1, FFN 64,
batch 128, ranks 16, 8, 4, 1, seeds 0 and 1, temperature 128), its 8 runs as one pack, read from the preset itself."""
THEORY = {
    "task": "nearest",
    "keys": "orthonormal",
    "d": 16,
    "N": 2,
    "model": "theory",
    "value": "full",
    "rank": 4,
    "width": 4,
    "steps": 800,
    "batch_size": 128,
    "device": "cpu",
}
THEORY_RUNS = [{"seed": s, "temperature": float(s + 1)} for s in range(8)]
THEORY_RTOL = 1e-5
"""Largest relative gap allowed between the theory pack's old and new losses: the tolerance of
tests/experiments/training/test_packed_training.py (about 100 float32 epsilons of reordered sums over the steps)."""
TINY = {"d": 8, "N": 4, "ffn_dim": 16, "batch_size": 16}
"""--tiny: every cell at these sizes (ranks above d dropped), so a rehearsal runs in seconds."""


# --------------------------------------------------------------------------------------------------- the old code
def _ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def load_old(revision: str, folder: Path) -> dict[str, ModuleType]:
    """The old revision's modules (`OLD_MODULES`), imported from a ``git archive`` of it unpacked into ``folder``
    (kept while they are used); this tree's modules are out of ``sys.modules`` meanwhile and back after, so later
    imports get this tree's."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision, *PACKAGES], cwd=REPOSITORY, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    current = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in current:
        del sys.modules[name]
    sys.path.insert(0, str(folder))
    try:
        modules = {name: importlib.import_module(name) for name in OLD_MODULES}
        for name, module in modules.items():
            if not Path(module.__file__ or "").resolve().is_relative_to(folder.resolve()):
                raise RuntimeError(f"{name} was imported from {module.__file__}, not from {revision}'s archive")
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(current)
    return modules


def old_training(old: dict[str, ModuleType], fields: list[dict[str, Any]]) -> Any:
    """The old loop's state for the runs ``fields`` (one: ``SingleModel``; more: ``PackedModels``), ready to step."""
    config_type = old["experiments.config"].TrainConfig
    run, loop, schedule = (
        old["experiments.training.run"],
        old["experiments.training.loop"],
        old["experiments.training.schedule"],
    )
    configs = [config_type.from_dict(f) for f in fields]
    device = run.resolve_device(configs[0].device)
    built = [run.build_run(c, device) for c in configs]
    task = built[0][0]
    generators = [run.sampler_generator(c.data_seed_value, c.sampler, device) for c in configs]
    kind = schedule.optimizer_kind(configs[0], device)
    stats = loop.EpochStatistics.fresh(len(configs), device)
    if len(configs) == 1:
        model = built[0][1].train()
        optimizer, scheduler = schedule.make_optimizer(model.parameters(), configs[0], kind)
        models: Any = loop.SingleModel(model, task, configs[0], device)
    else:
        network = old["experiments.models.packed"].pack_models([m.train() for _, m in built], configs, task)
        optimizer, scheduler = schedule.make_optimizer(network.parameters, configs[0], kind)
        models = old["experiments.training.packed"].PackedModels(network)
    return loop.Training(configs[0], task, models, generators, optimizer, scheduler, stats, device)


# --------------------------------------------------------------------------------------------------- the new code
def new_training(fields: list[dict[str, Any]]) -> Any:
    """This tree's loop state for the runs ``fields``: a pack of one or more (`TrainedRuns`), ready to step."""
    from experiments.config import TrainConfig
    from experiments.training.packed import TrainedRuns
    from experiments.training.run_loop import Training
    from experiments.training.run_start import fresh_run

    runs = [fresh_run(TrainConfig.from_dict(f)) for f in fields]
    for run in runs:
        run.model.train()
    return Training.of(TrainedRuns(runs))


# ---------------------------------------------------------------------------------------------------- the timing
def _timed(action: Callable[[], object], inner: int) -> tuple[float, float]:
    """Wall and thread-CPU milliseconds per call of ``inner`` calls of ``action``."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(inner):
        action()
    return 1e3 * (time.perf_counter() - wall) / inner, 1e3 * (time.thread_time() - cpu) / inner


def time_cell(
    name: str, fields: list[dict[str, Any]], old: dict[str, ModuleType], repeats: int, inner: int, warmup: int
) -> dict[str, Any]:
    """Medians over ``repeats`` rounds of each path's ms per step, their ratio, and the losses compared."""
    row: dict[str, Any] = {"cell": name, "runs": len(fields), "load_before": os.getloadavg()}
    trainings = {"old": old_training(old, fields), "new": new_training(fields)}
    losses: dict[str, list[list[float]]] = {"old": [], "new": []}

    def step(path: str) -> None:
        losses[path].append(trainings[path].optimizer_step()[0].tolist())

    for path in trainings:
        for _ in range(warmup):
            step(path)
    samples: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    for round_ in range(repeats):
        for path in ("old", "new") if round_ % 2 == 0 else ("new", "old"):  # neither always goes first
            samples[path].append(_timed(lambda p=path: step(p), inner))  # type: ignore[misc]
    for path, values in samples.items():
        row[f"{path}_ms"] = statistics.median(v[0] for v in values)
        row[f"{path}_cpu_ms"] = statistics.median(v[1] for v in values)
    row["new_over_old"] = row["new_ms"] / row["old_ms"]
    row["new_over_old_cpu"] = row["new_cpu_ms"] / row["old_cpu_ms"]
    old_losses, new_losses = torch.tensor(losses["old"]), torch.tensor(losses["new"])  # (steps, K) each
    row["bitwise"] = bool(torch.equal(old_losses, new_losses))
    row["max_rel"] = float(((new_losses - old_losses).abs() / old_losses.abs()).max())
    row["steps_compared"] = len(losses["old"])
    row["load_after"] = os.getloadavg()
    return row


def preset_unit(preset: str, scale: str) -> list[dict[str, Any]]:
    """The config fields of every run of ``preset`` at ``scale`` (this tree's registry; the old code reads the same
    dicts, whose keys issue 48 left unchanged)."""
    from experiments.studies import get_preset

    return [config.to_dict() for config in get_preset(preset).scales[scale]()]


def cells(tiny: bool) -> list[tuple[str, list[dict[str, Any]]]]:
    """(name, the runs' config fields) of every cell."""
    single: dict[str, Any] = dict(SINGLE)
    packed = preset_unit(PACK_PRESET, PACK_SCALE)
    theory: dict[str, Any] = dict(THEORY)
    if tiny:
        single.update(TINY)
        single["rank"] = 4
        packed = [{**fields, **TINY} for fields in packed if fields["rank"] <= TINY["d"]]
        theory.update({k: v for k, v in TINY.items() if k not in ("N", "ffn_dim")})
    return [
        ("single", [single]),
        ("pack", packed),
        ("theory pack", [{**theory, **run} for run in THEORY_RUNS]),
    ]


# ----------------------------------------------------------------------------------------------------- the record
def _print(row: dict[str, Any]) -> None:
    print(
        f"{row['cell']:12s} K={row['runs']}  old {row['old_ms']:8.1f} ms (cpu {row['old_cpu_ms']:8.1f})  "
        f"new {row['new_ms']:8.1f} ms (cpu {row['new_cpu_ms']:8.1f})  new/old {row['new_over_old']:.3f} "
        f"(cpu {row['new_over_old_cpu']:.3f})  bitwise {row['bitwise']} (max rel {row['max_rel']:.1e}, "
        f"{row['steps_compared']} steps)  load {row['load_before'][0]:.2f}/{row['load_after'][0]:.2f}",
        flush=True,
    )


def record(folder: Path, rows: list[dict[str, Any]], meta: dict[str, Any], tiny: bool) -> Path:
    """Write bench_pipeline_DATE[-system-malloc][-tiny].{json,md} into ``folder``; returns the stem."""
    folder.mkdir(parents=True, exist_ok=True)
    malloc = "" if meta["allocator"]["jemalloc_mapped"] else "-system-malloc"
    stem = folder / f"bench_pipeline_{datetime.date.today().isoformat()}{malloc}{'-tiny' if tiny else ''}"
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    alloc = meta["allocator"]
    lines = [
        "# A training step of the one pipeline (issue 48) against SingleModel and PackedModels",
        "",
        f"- command: `{meta['command']}`",
        f"- {meta['date']}; {meta['processor']}, {meta['cores']} logical cores; Python {meta['python']}, torch "
        f"{meta['torch']}, {meta['threads']} torch thread; revision {meta['revision']}, old code {meta['baseline']}",
        f"- allocator: jemalloc mapped = {alloc['jemalloc_mapped']} (LD_PRELOAD `{alloc['LD_PRELOAD']}`, MALLOC_CONF "
        f"`{alloc['MALLOC_CONF']}`, {SWITCH} `{alloc[SWITCH]}`); the same for both paths",
        f"- medians of {meta['repeats']} rounds of {meta['inner']} step(s) per path, after {meta['warmup']} warm-up "
        "steps; the paths alternate which goes first, round by round",
        f"- `uptime` after the run: {meta['uptime_after']}",
        "- old: SingleModel (one run) or PackedModels (a pack) of the old revision; new: this revision's TrainedRuns "
        "(a pack of one, or of K); bitwise: the two paths' losses equal at every step (warm-up and timed); max rel: "
        "their largest relative difference. Wall ms, with the thread's CPU ms in brackets.",
        f"- goal (issue 48): new / old <= {GOAL} for the single run and the pack",
        "",
        "| cell | K | old ms | new ms | new / old | bitwise | max rel | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cell']} | {r['runs']} | {r['old_ms']:.1f} ({r['old_cpu_ms']:.1f}) | {r['new_ms']:.1f} "
            f"({r['new_cpu_ms']:.1f}) | {r['new_over_old']:.3f} ({r['new_over_old_cpu']:.3f}) | {r['bitwise']} "
            f"({r['steps_compared']} steps) | {r['max_rel']:.1e} | {r['load_before'][0]:.2f} / "
            f"{r['load_after'][0]:.2f} |"
        )
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds per cell (median; >= 1, default 9)")
    parser.add_argument("--inner", type=int, default=2, help="steps per path per round (>= 1, default 2)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per path before timing (default 3)")
    parser.add_argument("--baseline", default=BASELINE, help=f"the old code's revision (default {BASELINE})")
    parser.add_argument("--tiny", action="store_true", help="a rehearsal: d = 8 cells that run in seconds")
    parser.add_argument("--record", type=Path, help="folder to write bench_pipeline_DATE[-tiny].{json,md} into")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.inner < 1 or args.warmup < 0:
        parser.error("--repeats and --inner must be >= 1 and --warmup >= 0")
    torch.set_num_threads(1)
    allocator = allocator_state()
    print(f"allocator: {allocator}; old code: {args.baseline}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_pipeline_old_") as folder:  # the old code, removed at the end
        old = load_old(args.baseline, Path(folder))
        for name, fields in cells(args.tiny):
            row = time_cell(name, fields, old, args.repeats, args.inner, args.warmup)
            _print(row)
            rows.append(row)
    exact = all(row["bitwise"] for row in rows if row["cell"] != "theory pack")
    close = all(row["max_rel"] <= THEORY_RTOL for row in rows if row["cell"] == "theory pack")
    if not exact:
        print("error: the new losses differ from the old ones where they must be bitwise", file=sys.stderr)
    if not close:
        print(f"error: the theory pack's losses differ from the old ones by more than {THEORY_RTOL}", file=sys.stderr)
    if args.record:
        words = sys.argv[1:] if argv is None else argv
        meta = {
            "command": "python benchmarks/bench_pipeline.py " + " ".join(words),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "processor": processor(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "revision": revision(),
            "baseline": args.baseline,
            "allocator": allocator,
            "repeats": args.repeats,
            "inner": args.inner,
            "warmup": args.warmup,
            "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        }
        stem = record(args.record, rows, meta, args.tiny)
        print(f"recorded {stem}.json and {stem}.md")
    return 0 if exact and close else 1


if __name__ == "__main__":
    sys.exit(main())
