"""The reference implementation's own experiment files, read and turned into our runs (`attnrank sweep --reference`).

The authors describe every experiment of the paper as LightningCLI YAML: a config (``trainer``, ``model``, ``data``,
``optimizer``, ``lr_scheduler`` sections) and, for a grid, a sweep file whose keys are dotted paths into the config
and whose values are lists; the grid is the Cartesian product of the lists in the file's order (the first key varies
slowest), each point overriding the config. :func:`read_reference` reads the two files (NoahAmsel/attention-formers'
format, read for this account, none of it copied) and builds one `TrainConfig` per point, in the reference's regime:

- data: its sampler and fixed set (``sampler="reference"``: the 7 worker streams seeded ``data.seed`` + w, bitwise,
  `experiments.samplers.reference_data`), K = ``trainer.limit_train_batches`` batches replayed every epoch, so an
  epoch is K steps (``log_every = K``) and best_loss the lowest epoch-mean training loss on the set;
- schedule: ``trainer.max_epochs`` x K steps; the reference links its scheduler to the trainer (warm-up
  ``max_epochs // 20`` epochs, cosine to ``eta_min = lr // 10``, which is 0 for every lr < 10) and Lightning steps it
  once per epoch: ``lr_interval="epoch"``, the staircase of `experiments.training.schedule.epoch_lr_factor`;
- model: our encoder with the reference's sizes (``nheads`` heads per block of rank (dim + positional_dim) / nheads,
  ``width_multiplier`` blocks, ``num_layers`` layers starting as copies of one, ``dim_feedforward``);
- optimiser: AdamW with ``lr``, ``betas`` and ``weight_decay`` (torch's defaults (0.9, 0.999) and 0.01 where the file
  names none, as the reference's command line would use them);
- initialisation: one for the whole grid (``seed`` 0); the reference's runs share theirs (``seed_everything``), whose
  draws ours cannot repeat whatever the seed.

Every key is either honoured, reported and skipped because it changes nothing here (loggers, strategy, devices,
callbacks, the experiment's name: :data:`SKIPPED`), or refused: a key or value this toolkit cannot honour is one
ValueError naming the file and the key path (``fig1_config.yaml: data.num_workers = 0: ...``), raised before any run
is built.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.config import TrainConfig
from experiments.config_files import load_mapping
from experiments.samplers.reference_data import REFERENCE_WORKERS
from experiments.sweeps.reference_points import ReferencePoint, refuse

DATASET_CLASS = "task.NearestPointDataset"
"""The reference's dataset of uniform points on the sphere; with ``num_queries: -1`` its target is the farthest
point."""
ADAMW = ("torch.optim.AdamW", "AdamW")
"""Names an ``optimizer.class_path`` may give (the reference's command line adds AdamW's arguments)."""
WARMUP_DIVISOR = 20
"""The reference links ``lr_scheduler.warmup_epochs`` to ``trainer.max_epochs // 20``."""
INITIALISATION_SEED = 0
"""The initialisation every run of a reference grid shares (module docstring)."""

SKIPPED: dict[str, str] = {
    "experiment_name": "names the reference's log folder",
    "seed_everything": "the reference's initialisation seed; its draws cannot be repeated here, so every run of the "
    f"grid shares one initialisation of ours (seed {INITIALISATION_SEED}), as the reference's runs share theirs",
    "trainer.logger": "logging only",
    "trainer.callbacks": "logging and checkpoint callbacks",
    "trainer.strategy": "where Lightning runs; the device is the run's own",
    "trainer.devices": "where Lightning runs; the device is the run's own",
    "trainer.accelerator": "where Lightning runs; the device is the run's own",
    "trainer.num_nodes": "where Lightning runs",
    "trainer.default_root_dir": "where Lightning writes",
    "trainer.enable_checkpointing": "checkpoints (every run here checkpoints)",
    "trainer.enable_progress_bar": "progress display",
    "trainer.enable_model_summary": "console output",
    "trainer.log_every_n_steps": "logging only",
    "optimizer.foreach": "an implementation of the same AdamW step",
    "optimizer.fused": "an implementation of the same AdamW step",
    "optimizer.capturable": "an implementation of the same AdamW step",
    "optimizer.differentiable": "an implementation of the same AdamW step",
}
"""Key paths that change nothing here, and why; each found is reported (:attr:`ReferenceGrid.skipped`)."""

_SECTIONS = ("trainer", "model", "data", "optimizer", "lr_scheduler")


@dataclass(frozen=True)
class SkippedKey:
    """A key of a reference file that changes nothing here: the file, the key path and why."""

    file: Path
    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.file.name}: {self.path} skipped ({self.why})"


@dataclass(frozen=True)
class ReferenceGrid:
    """The runs of a reference config and sweep file, in the grid's order, and the keys skipped."""

    config: Path
    sweep: Path | None
    runs: tuple[TrainConfig, ...]
    skipped: tuple[SkippedKey, ...]


def _leaves(file: Path, config: Mapping[str, Any]) -> tuple[dict[str, tuple[Any, Path]], list[SkippedKey]]:
    """The config's key paths -> (value, file), sections flattened one level; skipped keys apart; unknown refused."""
    values: dict[str, tuple[Any, Path]] = {}
    skipped: list[SkippedKey] = []
    for key, value in config.items():
        if key in SKIPPED:
            skipped.append(SkippedKey(file, key, SKIPPED[key]))
        elif key == "ckpt_path":
            if value is not None:
                raise refuse(file, key, value, "resuming a Lightning checkpoint is not supported; remove the key")
        elif key in _SECTIONS:
            if value is None:
                continue  # an empty section (``lr_scheduler:``): the reference's defaults
            if not isinstance(value, Mapping):
                raise refuse(file, key, value, "must be a mapping of keys to values")
            for name, item in value.items():
                path = f"{key}.{name}"
                if path in SKIPPED:
                    skipped.append(SkippedKey(file, path, SKIPPED[path]))
                else:
                    values[path] = (item, file)
        else:
            raise ValueError(
                f"{file}: {key}: not a key of the reference's command line this toolkit knows (sections: "
                f"{', '.join(_SECTIONS)}; also experiment_name, seed_everything, ckpt_path)"
            )
    return values, skipped


def _grid(file: Path, sweep: Mapping[str, Any], known: Sequence[str]) -> list[dict[str, Any]]:
    """The sweep file's points, each a mapping key path -> value, the first key varying slowest."""
    axes: list[tuple[str, list[Any]]] = []
    for path, values in sweep.items():
        if path in SKIPPED:
            raise refuse(file, path, values, f"changes nothing here ({SKIPPED[path]}), so its points would repeat")
        if path.split(".")[0] not in _SECTIONS or path.count(".") != 1:
            raise ValueError(
                f"{file}: {path}: a sweep key must be a dotted path SECTION.KEY with SECTION one of "
                f"{', '.join(_SECTIONS)}"
            )
        if path not in known:
            raise ValueError(f"{file}: {path}: not a key this toolkit honours (honoured: {', '.join(known)})")
        if not isinstance(values, list) or not values:
            raise refuse(file, path, values, "must be a non-empty list of values (the sweep's axis)")
        for index, value in enumerate(values):
            if value in values[:index]:
                raise refuse(file, path, values, f"lists {value!r} twice, which would train one run twice")
        axes.append((path, values))
    return [dict(zip((p for p, _ in axes), point, strict=True)) for point in itertools.product(*(v for _, v in axes))]


HONOURED = (
    "trainer.max_epochs",
    "trainer.limit_train_batches",
    "trainer.max_steps",
    "trainer.precision",
    "model.nheads",
    "model.num_layers",
    "model.width_multiplier",
    "model.dim_feedforward",
    "model.bias",
    "model.positional_dim",
    "model.additive_positional",
    "data.dim",
    "data.num_points",
    "data.batch_size",
    "data.dataset_class",
    "data.num_queries",
    "data.seed",
    "data.num_workers",
    "data.device_name",
    "optimizer.lr",
    "optimizer.betas",
    "optimizer.weight_decay",
    "optimizer.eps",
    "optimizer.amsgrad",
    "optimizer.maximize",
    "lr_scheduler.warmup_start_lr",
)
"""Key paths read (some only to check that they hold the one value honoured here, e.g. ``data.num_workers: 7``)."""

_LINKED = {
    "model.dim": "data.dim",
    "model.maxN": "data.num_points",
    "lr_scheduler.warmup_epochs": "trainer.max_epochs (warm-up max_epochs // 20)",
    "lr_scheduler.max_epochs": "trainer.max_epochs",
    "lr_scheduler.eta_min": "optimizer.lr (eta_min = lr // 10)",
}
"""Keys the reference's command line links to others (``link_arguments``): a file cannot set them."""


def _only(point: ReferencePoint, path: str, allowed: Sequence[Any], default: Any, why: str) -> None:
    """Refuse ``path`` unless it holds one of ``allowed`` (absent: ``default``, or required when that is None)."""
    value, file = point.raw(path)
    if value is None:
        if default is None:
            raise point.missing(path, why)
        return
    if isinstance(value, bool) != isinstance(allowed[0], bool) or value not in allowed:
        raise refuse(file, path, value, why)


def _run(point: ReferencePoint) -> TrainConfig:
    """The TrainConfig of one point (module docstring); ValueError naming the file and key path."""
    epochs = point.integer("trainer.max_epochs", minimum=1)
    if epochs < WARMUP_DIVISOR:
        _, file = point.raw("trainer.max_epochs")
        raise refuse(
            file,
            "trainer.max_epochs",
            epochs,
            f"must be >= {WARMUP_DIVISOR}: the reference warms up for max_epochs // {WARMUP_DIVISOR} epochs, and "
            "with none its scheduler never leaves its starting rate 0",
        )
    batches_value, batches_file = point.raw("trainer.limit_train_batches")
    if batches_value is None:
        raise point.missing("trainer.limit_train_batches", "the size of the fixed set, in batches")
    if isinstance(batches_value, float):
        raise refuse(
            batches_file,
            "trainer.limit_train_batches",
            batches_value,
            "must be a whole number of batches >= 1 (the reference's dataset is endless: a fraction of it, or no "
            "limit, is an epoch that never ends)",
        )
    K = point.integer("trainer.limit_train_batches", minimum=1)
    _only(point, "trainer.max_steps", (-1,), -1, "must be -1 (the schedule is counted in epochs)")
    _only(point, "trainer.precision", (32, "32", "32-true"), 32, "must be 32 (float32 training, as the paper's)")
    d = point.integer("data.dim", minimum=2)
    positional_dim = point.integer("model.positional_dim", minimum=0, default=0)
    additive, additive_file = point.raw("model.additive_positional", False)
    if not isinstance(additive, bool):
        raise refuse(additive_file, "model.additive_positional", additive, "must be true or false")
    if additive and positional_dim:
        raise refuse(
            additive_file,
            "model.additive_positional",
            additive,
            f"with positional_dim = {positional_dim}: additive and concatenated encodings together are not modelled",
        )
    width = d + positional_dim
    nheads = point.integer("model.nheads", minimum=1)
    if width % nheads:
        _, file = point.raw("model.nheads")
        raise refuse(
            file,
            "model.nheads",
            nheads,
            f"must divide data.dim + model.positional_dim = {width} (each head has rank {width} / nheads)",
        )
    _only(point, "model.bias", (True,), True, "must be true (the encoder here has biases, as the paper's)")
    dataset, dataset_file = point.raw("data.dataset_class")
    if dataset != DATASET_CLASS:
        raise refuse(
            dataset_file,
            "data.dataset_class",
            dataset,
            f"must be {DATASET_CLASS} (uniform points; the reference sampler does not draw the others)",
        )
    _only(point, "data.num_queries", (-1,), None, "must be -1 (the farthest-point task of the paper's figures)")
    _only(
        point,
        "data.num_workers",
        (REFERENCE_WORKERS,),
        None,
        f"must be {REFERENCE_WORKERS}: the fixed set is reproduced for the paper's {REFERENCE_WORKERS} worker streams",
    )
    device_name, device_file = point.raw("data.device_name")
    if device_name is not None:
        raise refuse(device_file, "data.device_name", device_name, "must be absent (the data are drawn on the CPU)")
    data_seed = point.integer(
        "data.seed", minimum=0, why="without it the reference draws a fresh data seed per run, never to be repeated"
    )
    lr = point.real("optimizer.lr", minimum=0.0, strict_minimum=True, maximum=10.0, strict_maximum=True)
    betas_value, betas_file = point.raw("optimizer.betas", [0.9, 0.999])
    if not isinstance(betas_value, list) or len(betas_value) != 2:
        raise refuse(betas_file, "optimizer.betas", betas_value, "must be a list of two numbers")
    betas: list[float] = []
    for index, beta in enumerate(betas_value):
        if isinstance(beta, str):
            try:
                beta = float(beta)
            except ValueError:
                pass
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not 0 <= float(beta) < 1:
            raise refuse(betas_file, f"optimizer.betas[{index}]", beta, "must be a number in [0, 1)")
        betas.append(float(beta))
    weight_decay = point.real("optimizer.weight_decay", default=0.01, minimum=0.0)
    eps = point.real("optimizer.eps", default=1e-8, minimum=0.0)
    if not math.isclose(eps, 1e-8, rel_tol=0, abs_tol=0):
        _, file = point.raw("optimizer.eps")
        raise refuse(file, "optimizer.eps", eps, "must be 1e-08 (AdamW's default, the one used here)")
    _only(point, "optimizer.amsgrad", (False,), False, "must be false (plain AdamW)")
    _only(point, "optimizer.maximize", (False,), False, "must be false (the loss is minimised)")
    warmup_start = point.real("lr_scheduler.warmup_start_lr", default=0.0, minimum=0.0)
    if warmup_start != 0.0:
        _, file = point.raw("lr_scheduler.warmup_start_lr")
        raise refuse(file, "lr_scheduler.warmup_start_lr", warmup_start, "must be 0 (the warm-up starts at 0)")
    warmup_epochs = epochs // WARMUP_DIVISOR
    return TrainConfig(
        task="farthest",
        model="encoder",
        d=d,
        N=point.integer("data.num_points", minimum=1),
        rank=width // nheads,
        width=point.integer("model.width_multiplier", minimum=1, default=1),
        layers=point.integer("model.num_layers", minimum=1),
        ffn_dim=point.integer("model.dim_feedforward", minimum=1),
        positional="concat" if positional_dim else "additive" if additive else "none",
        positional_dim=positional_dim,
        batch_size=point.integer("data.batch_size", minimum=1),
        lr=lr,
        betas=(betas[0], betas[1]),
        weight_decay=weight_decay,
        steps=epochs * K,
        schedule_steps=epochs * K,
        warmup_steps=warmup_epochs * K,
        warmup_fraction=0.0,
        lr_interval="epoch",
        layer_init="copies",
        sampler="reference",
        train_batches=K,
        log_every=K,
        checkpoint_every=warmup_epochs * K,
        seed=INITIALISATION_SEED,
        data_seed=data_seed,
    )


def _optimizer_section(file: Path, values: dict[str, tuple[Any, Path]]) -> None:
    """Unfold ``optimizer: {class_path: torch.optim.AdamW, init_args: {...}}`` into plain optimizer.* keys."""
    if "optimizer.class_path" not in values:
        if "optimizer.init_args" in values:
            raise refuse(file, "optimizer.init_args", "...", "needs optimizer.class_path (torch.optim.AdamW)")
        return
    name, where = values.pop("optimizer.class_path")
    if name not in ADAMW:
        raise refuse(where, "optimizer.class_path", name, "must be torch.optim.AdamW (the paper's optimiser)")
    arguments, where = values.pop("optimizer.init_args", ({}, where))
    if not isinstance(arguments, Mapping):
        raise refuse(where, "optimizer.init_args", arguments, "must be a mapping of AdamW's arguments")
    for key, value in arguments.items():
        path = f"optimizer.{key}"
        if path in values:
            raise ValueError(f"{where}: {path} is given twice (in optimizer and in optimizer.init_args)")
        values[path] = (value, where)


def read_reference(config: Path | str, sweep: Path | str | None = None) -> ReferenceGrid:
    """The runs of a reference config (and sweep file), in the reference's regime (module docstring).

    Args:
        config: the LightningCLI config (YAML).
        sweep: the sweep file (YAML: dotted key paths -> lists), or None for the config's one run.

    Returns:
        ReferenceGrid: the runs in the grid's order (first sweep key slowest), and the keys skipped.

    Raises:
        ValueError: one line naming the file and the key path of the first key or value that cannot be honoured.
    """
    config_path = Path(config)
    values, skipped = _leaves(config_path, load_mapping(config_path))
    _optimizer_section(config_path, values)
    for path, (value, file) in values.items():
        if path in _LINKED:
            raise refuse(file, path, value, f"is linked to {_LINKED[path]} by the reference's command line")
        if path not in HONOURED:
            raise ValueError(
                f"{file}: {path}: not a key this toolkit can honour (honoured: {', '.join(HONOURED)}; skipped as "
                f"changing nothing here: {', '.join(SKIPPED)})"
            )
    sweep_path = None if sweep is None else Path(sweep)
    points: list[dict[str, Any]] = [{}]
    if sweep_path is not None:
        axes = load_mapping(sweep_path)
        for path in axes:
            if path in _LINKED:
                raise ValueError(f"{sweep_path}: {path}: is linked to {_LINKED[path]} by the reference's command line")
        points = _grid(sweep_path, axes, HONOURED)
    runs: list[TrainConfig] = []
    for point in points:
        merged = dict(values)
        if sweep_path is not None:
            merged.update({path: (value, sweep_path) for path, value in point.items()})
        reader = ReferencePoint(merged, config_path, sweep_path)
        try:
            runs.append(_run(reader))
        except ValueError as exc:
            if str(exc).startswith((str(config_path), str(sweep_path))):
                raise
            where = ", ".join(f"{k} = {v!r}" for k, v in point.items()) or "its one run"
            raise ValueError(f"{config_path}: the run at {where}: {exc}") from exc
        unread = sorted(set(merged) - reader.used)
        assert not unread, f"keys accepted but never read: {unread}"  # every honoured key is read by _run
    hashes = [run.config_hash() for run in runs]
    if len(set(hashes)) != len(hashes):
        raise ValueError(f"{sweep_path or config_path}: two points of the grid build the same run")
    return ReferenceGrid(config_path, sweep_path, tuple(runs), tuple(skipped))
