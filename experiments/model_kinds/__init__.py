"""The registry of model kinds a run can train: one module per kind, each holding its `ModelKind` as ``KIND``.

A kind is one object (`experiments.model_kinds.base.ModelKind`): what it accepts, its widths, whether and how its
runs pack, its memory estimate, how much work a step is, what its evaluation means, and the builder of its model.
A new kind is one module here plus one line in :data:`KIND_NAMES` (docs/models.md, "A new model kind"); its builder
is a function on the torch side that the kind names. An unknown name is an error (:func:`model_kind`), never a
default. Torch-free, below `experiments.config` (which validates a config's model through :func:`check_model`), so
presets, the command line and a sweep's driver read the kinds without loading torch.

The three kinds (docs/models.md): ``encoder`` (the paper's encoder), ``theory`` (the query-to-context theory model)
and ``gpt2`` (a GPT-2-style causal backbone).

The value lists every module checks against (`VALUE_MAPS`, `ATTENTIONS`, `POSITIONALS`, `LAYER_INITS`, `FEEDS`) are
defined once (`experiments.model_kinds.base`); the config, the models and the encoder import them from here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from experiments.model_kinds.base import ATTENTIONS, FEEDS, LAYER_INITS, POSITIONALS, VALUE_MAPS, ModelKind
from theory.validation import check_choice

KIND_NAMES = ("encoder", "theory", "gpt2")
"""The registry: every model kind of this package by name (the ``model`` field's values, in this order). A new kind
is its module plus one name here."""

MODEL_KINDS: dict[str, ModelKind] = {name: importlib.import_module(f"{__name__}.{name}").KIND for name in KIND_NAMES}
"""Every model kind by name (`TrainConfig.model`)."""
MODELS = tuple(MODEL_KINDS)
"""The ``model`` field's values."""


def model_kind(name: str) -> ModelKind:
    """The kind called ``name`` (ValueError naming ``model`` and the allowed values otherwise)."""
    return MODEL_KINDS[check_choice("model", name, MODELS)]


def _kinds_that(accept: Callable[[ModelKind], bool]) -> str:
    """The names of the kinds that ``accept``, quoted and joined with "or" (for refusals)."""
    return " or ".join(repr(kind.name) for kind in MODEL_KINDS.values() if accept(kind))


def check_model(config: Any) -> None:
    """ValueError naming the field unless ``config`` (a TrainConfig being built) is one its model kind can train: the
    kind's own rules (`ModelKind.check`), then the rules that name the kinds which would accept what this one
    refuses."""
    kind = model_kind(config.model)
    if not kind.sized_by_embed_dim and config.embed_dim != 0:
        raise ValueError(
            f"embed_dim must be 0 unless model is {_kinds_that(lambda k: k.sized_by_embed_dim)}, got {config.embed_dim}"
        )
    kind.check(config)
    if config.task == "icl" and not kind.trains_icl:
        raise ValueError(
            f"model must be {_kinds_that(lambda k: k.trains_icl)} for the icl task (it needs a causal sequence model)"
        )
    if config.layer_init not in kind.layer_inits:
        others = _kinds_that(lambda k: config.layer_init in k.layer_inits)
        raise ValueError(f"layer_init must be 'independent' unless model is {others}, got {config.layer_init!r}")


def check_init_file(config: Any) -> None:
    """ValueError unless ``config``'s kind can start from ``config.init`` when it names a weight file (a construction
    recipe is checked against its own needs by the config)."""
    kind = model_kind(config.model)
    if config.init is not None and not kind.loads_init:
        loaders = _kinds_that(lambda k: k.loads_init)
        raise ValueError(
            f"init must be used with model {loaders} (weight files load into the theory model), got {config.model!r}"
        )


__all__ = [
    "ATTENTIONS",
    "FEEDS",
    "KIND_NAMES",
    "LAYER_INITS",
    "MODELS",
    "MODEL_KINDS",
    "POSITIONALS",
    "VALUE_MAPS",
    "ModelKind",
    "check_init_file",
    "check_model",
    "model_kind",
]
