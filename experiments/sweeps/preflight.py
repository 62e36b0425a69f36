"""What a sweep checks before its first run: every field of its request, and the memory its runs will hold at once.

A sweep's arguments are one type, `SweepRequest`. `check_sweep_request` is the one check of a sweep (issue 39):
`experiments.sweeps.runner.run_sweep` and ``attnrank sweep`` call it first thing and pass the `CheckedSweep` it returns
down (its workers checked once, the preset's runs built once, a Ray address probed once), so a bad argument or a
sweep that cannot fit is refused before the store or any run directory is created, as ``attnrank construct``,
``train`` and ``eval`` refuse theirs (docs/reliability.md).
`resolve_runs` and `select_runs` build and select a sweep's runs for it.

The memory estimate (`sweep_bytes`) is an upper bound on what the runs executing at the same moment hold. A local
sweep runs ``workers`` processes; each executes one unit at a time: a single run, a pack of at most
`experiments.sweeps.grouping.MAX_PACK` runs that may share one (``pack=True``, or ``batch_seeds=True`` for seed
packs; `experiments.packing.unit_key` decides). So at most ``workers x units' size`` runs are in flight, and the
bound adds the largest that many per-run estimates, plus each worker process's own footprint (`WORKER_BYTES`). A run's
estimate:

- training on the CPU: `experiments.training.memory.training_bytes` (parameters, AdamW state, one step's
  activations; packed runs stack their tensors, so a pack holds the sum of its runs'). A run on a GPU (device
  ``cuda``/``cuda:K``, or ``auto`` where CUDA is available) holds its tensors in the GPU's memory, which is not
  checked here (CUDA refuses what does not fit with its own out-of-memory error): it counts as 0 bytes;
- random features (`RandomFeaturesSpec`): 8 (6 H^2 + 2 H d) bytes for the largest head count H: the H x H kernel
  matrix with the copies its nested solves make (the factor 6 of ``attnrank construct random-features``) and the
  (H, d) head directions;
- other kinds: not estimated (counted as 0 bytes); a kind added to the presets should add its estimate to
  `RUN_ESTIMATES`.

A Ray sweep runs on the cluster's machines, not this one: its memory is not checked here.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from experiments.config import TrainConfig
from experiments.packing import PACK_VARYING_FIELDS, SEED_FIELDS, unit_key
from experiments.sweeps.backends import BACKENDS, check_ray_address
from experiments.sweeps.grouping import MAX_PACK
from experiments.sweeps.preset_kit import Preset, with_overrides
from experiments.sweeps.run_specs import RandomFeaturesSpec, RunSpec, spec_kind
from experiments.training.memory import check_memory, training_bytes
from theory.validation import check_bool, check_choice, check_instance, check_int, check_output_dir

WORKER_BYTES = 256 * 2**20
"""A worker process's own memory before its first run: 224 MiB private (Private_Clean + Private_Dirty of
/proc/self/smaps_rollup) measured after importing experiments.sweeps.execute with torch 2.13 on Linux, rounded up.
Workers are spawned, so this is paid once per worker."""


def _random_features_bytes(spec: RunSpec) -> float:
    """8 (6 H^2 + 2 H d) bytes: the H x H kernel matrix and its solves' copies, the (H, d) directions (H = largest)."""
    assert isinstance(spec, RandomFeaturesSpec)
    heads = max(spec.head_counts)
    return 8.0 * (6 * heads * heads + 2 * heads * spec.d)


@functools.cache
def _cuda_available() -> bool:
    """Whether ``device="auto"`` means a GPU here. torch is imported only now, when a run leaves the device to
    ``auto``: the driver of a sweep whose runs name their device never loads it (experiments.sweeps.backends)."""
    import torch

    return bool(torch.cuda.is_available())


def _training_bytes(spec: RunSpec) -> float:
    """training_bytes of a run on the CPU; 0 for a run on a GPU (its memory is the GPU's, module docstring)."""
    assert isinstance(spec, TrainConfig)
    on_gpu = spec.device.startswith("cuda") or (spec.device == "auto" and _cuda_available())
    return 0.0 if on_gpu else training_bytes(spec)


RUN_ESTIMATES: dict[str, Callable[[RunSpec], float]] = {
    "train": _training_bytes,
    "random-features": _random_features_bytes,
}
"""Run kind (`experiments.sweeps.run_specs.spec_kind`) -> bytes one run of it holds while it executes."""


def run_bytes(spec: RunSpec) -> float:
    """The bytes one run holds while it executes (0 for a kind without an estimate in `RUN_ESTIMATES`)."""
    estimate = RUN_ESTIMATES.get(spec_kind(spec))
    return 0.0 if estimate is None else estimate(spec)


def runs_in_flight(specs: Sequence[RunSpec], workers: int, *, pack: bool, batch_seeds: bool) -> int:
    """The most runs executing at the same moment: ``workers`` units at a time, each of at most the unit size.

    Units: one run (``pack`` and ``batch_seeds`` False), else a pack of the runs with one `experiments.packing.
    unit_key` (seed packs with ``batch_seeds``), at most MAX_PACK of them, as `run_sweep` groups them.
    """
    if not (pack or batch_seeds):
        return min(len(specs), workers)
    varying = SEED_FIELDS if batch_seeds else PACK_VARYING_FIELDS
    units: dict[str, int] = {}
    for spec in specs:
        key = unit_key(spec, varying) if isinstance(spec, TrainConfig) else None
        if key is not None:
            units[key] = units.get(key, 0) + 1
    unit = min(MAX_PACK, max(units.values(), default=1))
    return min(len(specs), workers * unit)


def sweep_bytes(specs: Sequence[RunSpec], workers: int, *, pack: bool, batch_seeds: bool) -> float:
    """Upper estimate of the memory a local sweep holds at once (module docstring): the largest
    ``runs_in_flight`` per-run estimates plus WORKER_BYTES per worker that has a unit to run.

    Args:
        specs: the sweep's runs (all of them: finished runs count too, so a resumed sweep is judged like a fresh one).
        workers: local worker processes (>= 1).
        pack, batch_seeds: how runs are grouped into units (`run_sweep`'s arguments).
    Returns:
        bytes.
    """
    in_flight = runs_in_flight(specs, workers, pack=pack, batch_seeds=batch_seeds)
    largest = sorted((run_bytes(spec) for spec in specs), reverse=True)[:in_flight]
    return float(sum(largest)) + WORKER_BYTES * min(workers, len(specs))


def resolve_runs(preset: Preset, scale: str, overrides: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """The sweep's run specs with ``overrides`` applied, every one validated before any run starts.

    Every TrainConfig is built (a bad value names its field); overrides on a preset without training runs are
    refused (they would change nothing); a weight file named by ``init`` must exist, be readable and match its run.
    """
    specs = preset.runs(scale)
    if overrides:
        if not any(isinstance(s, TrainConfig) for s in specs):
            raise ValueError(f"--set overrides TrainConfig fields, but preset {preset.name} has no training runs")
        try:
            specs = with_overrides(specs, overrides)
        except (TypeError, ValueError) as exc:  # a field's message, e.g. "steps must be an integer >= 1"
            raise type(exc)(f"overrides: {exc}") from exc
    checked: set[str] = set()
    for spec in specs:
        if isinstance(spec, TrainConfig) and spec.init is not None:  # its kind loads init (TrainConfig checks)
            key = json.dumps({k: v for k, v in spec.to_dict().items() if k != "seed"}, sort_keys=True)
            if key not in checked:
                # torch (via the model factory) is imported only when a run loads a weight file: a sweep's driver
                # otherwise never loads it (see experiments.sweeps.backends).
                from experiments.models.factory import theory_network_from_file

                theory_network_from_file(spec)
                checked.add(key)
    return specs


def check_devices(specs: Sequence[RunSpec], overrides: Mapping[str, Any] | None) -> None:
    """ValueError unless every training run's device exists on this machine (`training.run.resolve_device`: a
    ``cuda`` or ``cuda:K`` device needs CUDA, and K below the device count), so that a sweep naming a missing device
    is refused before it writes anything (it used to record every run as failed, exit 1, and keep the device in the
    store). The message starts ``overrides:`` when ``overrides`` named the device, else ``scale:`` (the preset's
    own runs name it). torch is imported only when some run names a CUDA device."""
    names = sorted({s.device for s in specs if isinstance(s, TrainConfig) and s.device.startswith("cuda")})
    if not names:
        return
    from experiments.training.run import resolve_device  # loads torch: only for runs that name a CUDA device

    for name in names:
        try:
            resolve_device(name)
        except (RuntimeError, ValueError) as exc:
            source = "overrides" if overrides and "device" in overrides else "scale"  # who named the device
            raise ValueError(f"{source}: {exc}; nothing was run (run the sweep where that device is)") from None


def select_runs(specs: list[RunSpec], only: Mapping[str, Any] | None) -> list[RunSpec]:
    """The specs whose fields equal every ``KEY: VALUE`` of ``only`` (all of them when ``only`` is empty).

    ValueError naming ``only`` when a key is no field of any spec, or when no spec matches (a typo would otherwise
    run nothing and report success).
    """
    if not only:
        return specs
    fields = sorted({key for spec in specs for key in spec.to_dict()})
    unknown = sorted(set(only) - set(fields))
    if unknown:
        known = ", ".join(fields)
        raise ValueError(f"only must name fields of the runs; unknown: {', '.join(unknown)} (fields: {known})")
    kept = [s for s in specs if all(s.to_dict().get(key) == value for key, value in only.items())]
    if not kept:
        wanted = ", ".join(f"{key}={value!r}" for key, value in only.items())
        raise ValueError(f"only is {wanted}, which matches none of the {len(specs)} runs")
    return kept


@dataclass(frozen=True)
class SweepRequest:
    """What a sweep is asked to do: the one type of a sweep's arguments, from the command line (``attnrank sweep``) or
    the public API (`experiments.studies.run_sweep`, `experiments.sweeps.runner.run_sweep`) down to the backends.
    Nothing here is checked yet: `check_sweep_request` checks every field before anything is written.

    Fields:
        preset: the preset (`experiments.studies.get_preset(name)`; `experiments.studies.run_sweep` takes a name).
        scale: "quick", "cpu" or "paper" (whatever the preset offers).
        out: sweep directory.
        backend: "local" or "ray".
        workers: local processes (default os.cpu_count()).
        address: Ray cluster address (backend "ray").
        overrides: TrainConfig fields replaced in every training run (e.g. {"steps": 10000}); recorded as part of
            each run's config (and hence of its hash).
        only: run only the specs whose fields equal these (`select_runs`); the others are neither run nor registered,
            so drivers with disjoint selections can share one store (each state change is its own transaction).
        progress: show progress over runs on stderr (a bar on a terminal, else a line every 10 s: training/progress).
        batch_seeds: pack only the runs that differ in their seeds alone (`experiments.packing.SEED_FIELDS`), even
            with ``pack`` False.
        pack: train the runs that may share a pack together (`experiments.sweeps.grouping`,
            `experiments.training.packed`: one process and one step for several runs, each in its own run directory
            with its own checkpoints); False trains every run alone.
        rebuild: first rebuild the store from the runs' files (`experiments.sweeps.runner.rebuild_store`; a damaged
            store is moved aside), then run what is left.
    """

    preset: Preset
    scale: str
    out: Path | str
    backend: str = "local"
    workers: int | None = None
    address: str | None = None
    overrides: Mapping[str, Any] | None = None
    only: Mapping[str, Any] | None = None
    progress: bool = True
    batch_seeds: bool = False
    pack: bool = True
    rebuild: bool = False


@dataclass(frozen=True)
class CheckedSweep:
    """A sweep request after every check (`check_sweep_request`): what `runner.execute_sweep` runs, with nothing left
    to validate. ``out`` is the checked directory and ``workers`` the local processes (the request's, else this
    machine's cores); ``specs`` are every run of the preset at the scale with the overrides applied (each built once,
    init files checked), ``selected`` those that the request's ``only`` keeps."""

    request: SweepRequest
    out: Path
    workers: int
    specs: tuple[RunSpec, ...]
    selected: tuple[RunSpec, ...]


_Entry = TypeVar("_Entry", bound=Callable[..., Any])


def with_request_signature(entry: _Entry) -> _Entry:
    """``entry(preset, scale, out, **options)`` shown (``help``, `inspect.signature`) with `SweepRequest`'s other
    fields as its keyword-only parameters, by name and default: a sweep entry point takes the request's fields, and
    its signature is read from the one type rather than written again."""
    own = list(inspect.signature(entry).parameters.values())
    fields = list(inspect.signature(SweepRequest).parameters.values())
    assert [p.name for p in own[:3]] == [f.name for f in fields[:3]] and own[3].kind is inspect.Parameter.VAR_KEYWORD
    options = [field.replace(kind=inspect.Parameter.KEYWORD_ONLY) for field in fields[3:]]
    setattr(entry, "__signature__", inspect.signature(entry).replace(parameters=[*own[:3], *options]))  # noqa: B010
    return entry


def check_sweep_request(request: SweepRequest) -> CheckedSweep:
    """The one check of a sweep request, before anything is written: every field, the preset's runs (built once), the
    Ray address (probed once) or, for a local sweep, the memory of the runs in flight.

    Raises:
        ValueError / TypeError naming the field (``overrides``' messages also name the TrainConfig field); an OSError
        naming ``out`` (not a directory, not writable); a ValueError starting ``workers:`` when the runs in flight
        would not fit in the memory available now.
    """
    check_instance("request", request, SweepRequest, "a SweepRequest")
    preset, backend, workers, address = request.preset, request.backend, request.workers, request.address
    overrides, only, pack, batch_seeds = request.overrides, request.only, request.pack, request.batch_seeds
    check_instance("preset", preset, Preset, "a Preset (experiments.studies.get_preset(name))")
    check_choice("backend", backend, BACKENDS)
    if workers is not None:
        workers = check_int("workers", workers, minimum=1)
    if address is not None:
        check_instance("address", address, str, "a str (HOST:PORT, ray://HOST:PORT or auto) or None")
        if backend != "ray":
            raise ValueError("address is only used with backend 'ray'")
    for name in ("progress", "batch_seeds", "pack", "rebuild"):
        check_bool(name, getattr(request, name))
    if overrides is not None:
        check_instance("overrides", overrides, Mapping, "a mapping of TrainConfig fields to values, or None")
        strange = [key for key in overrides if not isinstance(key, str)]
        if strange:
            raise TypeError(f"overrides must have str keys (TrainConfig fields), got {strange[0]!r}")
    if only is not None:
        check_instance("only", only, Mapping, "a mapping of run fields to values, or None")
    specs = resolve_runs(preset, request.scale, overrides)
    selected = select_runs(specs, only)
    directory = check_output_dir("out", request.out)
    local_workers = workers if workers is not None else (os.cpu_count() or 1)
    if backend == "ray":
        check_ray_address(address)  # the runs execute on the cluster's machines, with their devices
    else:
        check_devices(specs, overrides)
        in_flight = runs_in_flight(specs, local_workers, pack=pack, batch_seeds=batch_seeds)
        check_memory(
            sweep_bytes(specs, local_workers, pack=pack, batch_seeds=batch_seeds),
            f"{in_flight} runs in flight ({local_workers} worker processes, each with its unit of runs)",
            "workers",
        )
    return CheckedSweep(request, directory, local_workers, tuple(specs), tuple(selected))
