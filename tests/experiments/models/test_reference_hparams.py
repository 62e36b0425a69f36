"""Tests of experiments/models/reference_hparams.py: saved hyper-parameters checked against the state dict."""

from __future__ import annotations

import pytest

from constructions.inert_globals import inert_class
from experiments.models.reference_hparams import check_hyper_parameters
from experiments.models.reference_layout import read_reference_layout
from tests.experiments.models.reference_checkpoints import random_reference_state

LAYOUT = read_reference_layout(
    random_reference_state(d=4, num_heads=2, width=2, layers=3, ffn_dim=5, positional_dim=2, max_length=7)
)
AGREEING = dict(dim=4, positional_dim=2, num_layers=3, width_multiplier=2, dim_feedforward=5, maxN=7, bias=True)


def _check(module: dict, data: dict | None = None, num_heads: int | None = None):  # noqa: ANN202
    hyper = {"hyper_parameters": module, "datamodule_hyper_parameters": data or {}}
    return check_hyper_parameters(LAYOUT, hyper, "f.ckpt", num_heads)


@pytest.mark.parametrize(
    "heads",
    [{"nheads": 3}, {"rank": 2}, {"total_heads": 6}, {"nheads": 3, "rank": 2, "total_heads": 6}],
)
def test_agreeing_hyper_parameters_give_the_head_count_and_max_length(heads: dict) -> None:
    reading = _check({**AGREEING, **heads, "lr": 0.01, "scale_batch": False}, {"dim": 4, "num_points": 5})
    assert (reading.num_heads, reading.max_length) == (3, 7)
    assert reading.used["datamodule_hyper_parameters.dim"] == 4 and "hyper_parameters.lr" not in reading.used
    assert _check({**AGREEING, **heads}, num_heads=3).num_heads == 3


def test_nothing_is_required() -> None:
    reading = _check({})
    assert (reading.num_heads, reading.max_length, reading.used) == (None, None, {})


@pytest.mark.parametrize(
    "module, data, num_heads, phrase",
    [
        ({"dim": 5}, {}, None, "hyper_parameters dim = 5, but the state dict's token dimension d = D - p = 6 - 2"),
        ({}, {"dim": 3}, None, "datamodule_hyper_parameters dim = 3"),
        ({"num_layers": 2}, {}, None, "num_layers = 2, but the state dict has 3 layers"),
        ({"width_multiplier": 1}, {}, None, "width_multiplier = 1, but layer 0 has 2 attention blocks"),
        ({"dim_feedforward": 8}, {}, None, "dim_feedforward = 8, but linear1.weight has 5 rows"),
        ({"maxN": 9}, {}, None, "maxN = 9, but 'positional_encodings' has 7 columns"),
        ({"positional_dim": 0}, {}, None, "positional_dim = 0"),
        ({"bias": False}, {}, None, "bias = False, but the state dict holds biases"),
        ({"bias": "yes"}, {}, None, "expected True/False"),
        ({"nheads": "3"}, {}, None, "nheads is '3', expected an integer >= 1"),
        ({"nheads": True}, {}, None, "nheads is True"),
        ({"nheads": inert_class("task.Thing")()}, {}, None, "nheads is Inert[task.Thing]"),
        ({"nheads": 3}, {}, 6, "num_heads (--num-heads) = 6, but hyper_parameters nheads = 3"),
        ({"nheads": 3, "rank": 3}, {}, None, "nheads = 3 disagrees with hyper_parameters rank = 3"),
        ({"rank": 4}, {}, None, "rank = 4 does not divide the token width D = 6"),
        ({"total_heads": 5}, {}, None, "total_heads = 5 is not a multiple of the 2 blocks"),
        ({"nheads": 4}, {}, None, "nheads = 4 does not divide the token width D = 6"),
    ],
)
def test_each_disagreement_is_one_line_naming_both_sides(module: dict, data: dict, num_heads, phrase: str) -> None:  # noqa: ANN001
    with pytest.raises(ValueError) as caught:
        _check(module, data, num_heads)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("f.ckpt: ") and phrase in message, message
