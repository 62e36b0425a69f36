"""experiments/model_kinds: one object per model kind (one module each, registered by name), the value lists defined
once, torch-free (issues 39 and 48)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from experiments import model_kinds
from experiments.config import TrainConfig
from experiments.model_kinds import MODEL_KINDS, model_kind
from experiments.packing import packing_refusal

BASE = {"d": 4, "N": 3, "rank": 2, "ffn_dim": 8, "steps": 5, "batch_size": 4}
"""A small encoder config, the base of the refusals below."""


def test_the_value_lists_are_defined_once() -> None:
    """The config, the attention module and the encoder check against the same tuples, not copies."""
    from experiments import config
    from experiments.models import attention, encoder, spec

    assert config.POSITIONALS is model_kinds.POSITIONALS and config.LAYER_INITS is model_kinds.LAYER_INITS
    assert attention.VALUE_MAPS is model_kinds.VALUE_MAPS and spec.ATTENTIONS is model_kinds.ATTENTIONS
    assert encoder.POSITIONALS is model_kinds.POSITIONALS and encoder.LAYER_INITS is model_kinds.LAYER_INITS


def test_importing_the_model_kinds_loads_no_torch() -> None:
    code = "import sys, experiments.model_kinds; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", list(MODEL_KINDS))
def test_each_kind_accepts_its_own_config_and_sizes_it(name: str) -> None:
    """Each kind's example config (``ModelKind.example``) is one it trains, sizes (D = embed_dim when the kind is
    sized by it, else d + positional_dim) and packs exactly when the kind packs."""
    kind = model_kind(name)
    config = TrainConfig(**kind.example)
    assert config.model == name
    D = config.embed_dim if kind.sized_by_embed_dim else config.d + config.positional_dim
    assert config.embed_dim_value == kind.embed_dim(config) == D
    assert kind.step_work(config.to_dict()) > 0
    assert (packing_refusal(config) is None) == (kind.packed_value is not None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"model": "theory", "positional": "additive"}, "positional must be 'none' or 'concat' for model 'theory'"),
        ({"model": "gpt2", "embed_dim": 8, "rank": 8, "positional": "none"}, "positional must be 'additive'"),
        ({"model": "gpt2"}, "embed_dim must be >= 1 for model 'gpt2'"),
        ({"embed_dim": 8}, "embed_dim must be 0 unless model is 'gpt2'"),
        ({"model": "theory", "task": "icl"}, "model must be 'encoder' or 'gpt2' for the icl task"),
        ({"model": "theory", "layer_init": "copies"}, "layer_init must be 'independent' unless model is 'encoder'"),
        ({"init": "w.safetensors"}, "init must be used with model 'theory'"),
        ({"model": "rnn"}, f"model must be one of {', '.join(map(repr, model_kinds.KIND_NAMES))}, got 'rnn'"),
    ],
)
def test_each_kind_refuses_what_it_cannot_train_by_field(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        TrainConfig(**{**BASE, **fields})


def test_packing_refusals_come_from_the_kind() -> None:
    encoder_full = TrainConfig(**{**BASE, "value": "full"})
    theory_standard = TrainConfig(**{**MODEL_KINDS["theory"].example, "value": "standard"})
    theory_farthest = TrainConfig(**{**BASE, "model": "theory", "value": "full"})
    assert packing_refusal(encoder_full) == "the packed encoder has standard value maps only"
    assert packing_refusal(theory_standard) == "the packed theory model has full value maps only"
    assert packing_refusal(theory_farthest) == "the theory model on the farthest task is trained alone"
    assert packing_refusal(TrainConfig(**MODEL_KINDS["gpt2"].example)) == "model 'gpt2' is trained alone"


def test_every_kind_module_is_registered_and_every_registered_kind_builds_its_model() -> None:
    """A kind is its module plus one registry line: every module of the package (but the base) is a registered kind,
    and each kind's builder (named on the torch side) builds a network of its config's width, which the model feeds
    as the kind says."""
    from pathlib import Path

    import torch

    from experiments.models.factory import build_model
    from experiments.tasks import make_task

    modules = {p.stem for p in Path(model_kinds.__file__).parent.glob("*.py")} - {"__init__", "base"}
    assert modules == set(model_kinds.KIND_NAMES)
    for name in model_kinds.KIND_NAMES:
        kind = model_kind(name)
        config = TrainConfig(**kind.example)
        task = make_task(config.task, config.d, config.N, config.keys)
        model = build_model(config, task)
        assert any(p.shape[-1] == config.embed_dim_value for p in model.parameters()), name
        assert model.feed == kind.feed and (model.head is not None) == (kind.icl_head and task.name == "icl")
        batch = task.sample(2, torch.Generator().manual_seed(0)).to("cpu")
        with torch.no_grad():
            assert model(batch).shape == batch.target.shape, name


def test_an_unknown_kind_is_an_error_and_a_builder_that_names_nothing_is_named() -> None:
    from dataclasses import replace

    from experiments.models.factory import model_builder

    assert model_kinds.KIND_NAMES[:3] == ("encoder", "theory", "gpt2")  # the paper's kinds first
    with pytest.raises(ValueError, match=f"model must be one of {', '.join(map(repr, model_kinds.KIND_NAMES))}, got"):
        model_kind("rnn")
    broken = replace(MODEL_KINDS["encoder"], builder="experiments.models.factory:build_rnn")
    with pytest.raises(ValueError, match="model kind 'encoder': its builder 'experiments.models.factory:build_rnn'"):
        model_builder(broken)
