"""Checkpoints shaped as PyTorch Lightning writes them for the reference implementation, built here with torch.save.

Nothing of Lightning or of the reference code is installed: the classes such a file names (the data module's
``task.NearestPointDataset``, Lightning's callbacks, an OmegaConf config) are made here under their real module names
and registered in ``sys.modules`` only while ``torch.save`` pickles them (`fake_modules`), then removed, so a reader
that tried to import one would fail and one that executed one would be seen. The layouts follow Lightning's
``_dump_checkpoint``: ``epoch``, ``global_step``, ``pytorch-lightning_version``, ``state_dict`` (the module's
parameters under its attribute name, ``model.``), ``loops`` (progress counters), ``callbacks`` (state per callback,
keyed by a string since Lightning 1.5, by the class before), ``optimizer_states`` (AdamW: a step count and two moments
per parameter), ``lr_schedulers``, ``hparams_name``, ``hyper_parameters`` and ``datamodule_hyper_parameters``.

Payloads are objects whose ``__reduce__`` names a function that runs code (os.system, subprocess.check_output,
builtins.eval, ...): pickle writes the function's name and a call of it (REDUCE), as an attacker's file would.
"""

from __future__ import annotations

import contextlib
import functools
import io
import pickle
import sys
import types
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _named_class(module: str, qualname: str, **attributes: Any) -> type:
    """A class whose pickle name is ``module.qualname``."""
    cls = type(qualname.rsplit(".", 1)[-1], (), dict(attributes))
    cls.__module__, cls.__qualname__ = module, qualname
    return cls


NearestPointDataset = _named_class("task", "NearestPointDataset")
ModelCheckpoint = _named_class("lightning.pytorch.callbacks.model_checkpoint", "ModelCheckpoint")
LearningRateMonitor = _named_class("lightning.pytorch.callbacks.lr_monitor", "LearningRateMonitor")
DictConfig = _named_class("omegaconf.dictconfig", "DictConfig")
_FAKE = (NearestPointDataset, ModelCheckpoint, LearningRateMonitor, DictConfig)


@contextlib.contextmanager
def fake_modules() -> Iterator[None]:
    """The fake classes' modules (and their parents) exist in sys.modules inside the block only."""
    added: list[str] = []
    for cls in _FAKE:
        parts = cls.__module__.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            if name not in sys.modules:
                sys.modules[name] = types.ModuleType(name)
                added.append(name)
        setattr(sys.modules[cls.__module__], cls.__qualname__, cls)
    try:
        yield
    finally:
        for name in added:
            del sys.modules[name]


def fake_module_names() -> set[str]:
    """The module names `fake_modules` registers (none of them may be in sys.modules after a read)."""
    return {".".join(cls.__module__.split(".")[: d + 1]) for cls in _FAKE for d in range(cls.__module__.count(".") + 1)}


def _adamw_state(state: dict[str, torch.Tensor], steps: int) -> dict[str, Any]:
    """AdamW's state_dict after ``steps`` steps over the parameters of ``state`` (moments of their shapes)."""
    generator = torch.Generator().manual_seed(1)
    per_parameter = {
        index: {
            "step": torch.tensor(float(steps)),
            "exp_avg": 1e-3 * torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype),
            "exp_avg_sq": 1e-6 * torch.rand(tensor.shape, generator=generator, dtype=tensor.dtype),
        }
        for index, tensor in enumerate(state.values())
    }
    group = {
        "lr": 0.001,
        "betas": (0.9, 0.95),
        "eps": 1e-08,
        "weight_decay": 0.0,
        "amsgrad": False,
        "foreach": None,
        "maximize": False,
        "capturable": False,
        "differentiable": False,
        "fused": None,
        "initial_lr": 0.01,
        "params": list(per_parameter),
    }
    return {"state": per_parameter, "param_groups": [group]}


def _loops(steps: int) -> dict[str, Any]:
    progress = {"ready": steps, "started": steps, "processed": steps, "completed": steps}
    return {
        "fit_loop": {
            "state_dict": {},
            "epoch_loop.state_dict": {"_batches_that_stepped": steps},
            "epoch_loop.batch_progress": {"total": dict(progress), "current": dict(progress), "is_last_batch": True},
            "epoch_loop.scheduler_progress": {"total": {"ready": 4, "completed": 4}, "current": {"ready": 4}},
            "epoch_progress": {"total": dict(progress), "current": dict(progress)},
        },
        "validate_loop": {"state_dict": {}, "batch_progress": {"total": {"ready": 0}}},
    }


def lightning_checkpoint(
    state: dict[str, torch.Tensor],
    hyper_parameters: dict[str, Any],
    *,
    layout: str = "lightning-2",
    steps: int = 400,
) -> dict[str, Any]:
    """A Lightning checkpoint's dictionary around ``state`` (already prefixed, e.g. ``model.``).

    Layouts:
        "lightning-2": Lightning 2.x: callbacks keyed by strings, hyper-parameters plain dicts, the data module's
            ``dataset_class`` a class object, numpy scalars and a ``functools.partial`` among the states.
        "lightning-1": Lightning 1.x before 1.5: callbacks keyed by their class, the module's hyper-parameters an
            OmegaConf ``DictConfig`` (with ``hparams_type``), ``native_amp_scaling_state``.
        "plain": only tensors, numbers, strings and containers (no class objects at all).
    """
    checkpoint: dict[str, Any] = {
        "epoch": steps // 100 - 1,
        "global_step": steps,
        "state_dict": state,
        "loops": _loops(steps),
        "optimizer_states": [_adamw_state(state, steps)],
        "lr_schedulers": [
            {
                "warmup_epochs": 10,
                "max_epochs": 200,
                "eta_min": 0.0,
                "base_lrs": [0.01],
                "last_epoch": 4,
                "_step_count": 5,
            }
        ],
        "hyper_parameters": dict(hyper_parameters),
    }
    if layout == "plain":
        checkpoint["pytorch-lightning_version"] = "2.2.1"
        checkpoint["callbacks"] = {"ModelCheckpoint{'monitor': 'train_loss'}": {"best_model_score": torch.tensor(0.5)}}
        checkpoint["datamodule_hyper_parameters"] = {"dim": hyper_parameters.get("dim", 4), "num_points": 5}
        return checkpoint
    if layout == "lightning-2":
        checkpoint["pytorch-lightning_version"] = "2.2.1"
        checkpoint["hparams_name"] = "kwargs"
        checkpoint["callbacks"] = {
            "ModelCheckpoint{'monitor': 'train_loss', 'mode': 'min', 'every_n_train_steps': 0}": {
                "monitor": "train_loss",
                "best_model_score": torch.tensor(0.5123),
                "best_model_path": "/scratch/ckpts/epoch=3-step=400.ckpt",
                "best_k_models": {"/scratch/ckpts/epoch=3-step=400.ckpt": torch.tensor(0.5123)},
                "kth_value": np.float64(0.5123),
            },
            "LearningRateMonitor{'logging_interval': 'epoch'}": {},
        }
        checkpoint["datamodule_hyper_parameters"] = {
            "dataset_class": NearestPointDataset,
            "dim": hyper_parameters.get("dim", 4),
            "num_points": 5,
            "num_queries": -1,
            "batch_size": 4096,
            "num_workers": 15,
        }
        checkpoint["hyper_parameters"]["optimizer"] = functools.partial(torch.optim.AdamW, lr=0.01, betas=(0.9, 0.95))
        return checkpoint
    if layout == "lightning-1":
        checkpoint["pytorch-lightning_version"] = "1.4.9"
        config = DictConfig()
        config.__dict__.update({"_content": dict(hyper_parameters), "_metadata": {"object_type": dict}})
        checkpoint["hyper_parameters"] = config
        checkpoint["hparams_type"] = DictConfig
        checkpoint["callbacks"] = {ModelCheckpoint: {"best_model_score": torch.tensor(0.5)}, LearningRateMonitor: {}}
        checkpoint["native_amp_scaling_state"] = {"scale": 65536.0, "growth_factor": 2.0, "_growth_tracker": 3}
        checkpoint["datamodule_hyper_parameters"] = {"dataset_class": NearestPointDataset, "num_points": 5}
        return checkpoint
    raise ValueError(f"unknown layout {layout!r}")


def save_checkpoint(path: Path, checkpoint: dict[str, Any], *, legacy: bool = False) -> Path:
    """torch.save with the fake modules present only while pickling."""
    with fake_modules():
        torch.save(checkpoint, path, _use_new_zipfile_serialization=not legacy)
    return path


class Call:
    """Pickles as a call ``function(*args)`` (REDUCE): the shape of every pickle payload."""

    def __init__(self, function: Any, *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (self.function, self.args)


def payloads() -> dict[str, Any]:
    """The global each payload names (as pickle writes it on Linux) -> an object whose unpickling would run code."""
    import importlib
    import os
    import subprocess

    return {
        "posix.system": Call(os.system, "touch PWNED"),  # os.system is posix.system on Linux
        "subprocess.check_output": Call(subprocess.check_output, ["touch", "PWNED"]),
        "builtins.eval": Call(eval, "__import__('os').system('touch PWNED')"),
        "builtins.exec": Call(exec, "open('PWNED', 'w')"),
        "builtins.getattr": Call(getattr, Call(importlib.import_module, "os"), "system"),
        "builtins.__import__": Call(__import__, "os"),
        "importlib.import_module": Call(importlib.import_module, "os"),
        "io.open": Call(open, "PWNED", "w"),  # builtins.open is io.open
    }


def raw_pickle(value: Any, protocol: int) -> bytes:
    """``pickle.dumps`` of ``value`` (protocol 2 writes Python 2 names: ``__builtin__.eval``)."""
    return pickle.dumps(value, protocol=protocol)


def zip_with_compressed_storage(raw: bytes, claimed: int) -> bytes:
    """A torch zip file whose first storage entry is deflated and inflates to ``claimed`` bytes (a zip bomb)."""
    source = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    bombed = next(i.filename for i in source.infolist() if "/data/" in i.filename and not i.filename.endswith(".pkl"))
    with zipfile.ZipFile(out, "w") as archive:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == bombed:
                archive.writestr(info.filename, b"\0" * claimed, compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
            else:
                archive.writestr(info.filename, data)
    return out.getvalue()


def with_defaultdict(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint with a ``collections.defaultdict`` (a dict subclass filled item by item) in its loop state."""
    changed = dict(checkpoint)
    changed["loops"] = {**checkpoint["loops"], "counts": defaultdict(int, {"train": 3})}
    return changed
