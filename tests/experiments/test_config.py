"""Tests of experiments/config.py: validation, round trips, hashes that never change, no torch at import."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys

import pytest

from experiments.config import TrainConfig


def test_config_round_trip_and_hash() -> None:
    config = TrainConfig(task="nearest", d=8, N=2, keys="orthonormal", rank=2, width=2, lr=0.003)
    again = TrainConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.config_hash() == config.config_hash()
    assert config.heads == 8  # c d / r = 2 * 8 / 2
    assert dataclasses.replace(config, device="cpu").config_hash() == config.config_hash()  # execution knob
    assert dataclasses.replace(config, seed=1).config_hash() != config.config_hash()


def test_paper_defaults() -> None:
    c = TrainConfig()
    assert (c.lr, c.betas, c.weight_decay, c.warmup_fraction, c.batch_size) == (0.01, (0.9, 0.95), 0.0, 0.05, 256)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rank": 17}, "rank must be an integer in \\[1, 16\\]"),
        ({"rank": 3}, "rank must divide d = 16"),
        ({"task": "sorting"}, "task must be one of"),
        ({"lr": 0.0}, "lr must be"),
        ({"betas": (0.9, 1.0)}, "betas\\[1\\]"),
        ({"positional": "concat"}, "positional_dim must be >= 1"),
        ({"positional_dim": 4}, "positional_dim must be 0"),
        ({"task": "nearest", "keys": "orthonormal", "N": 17}, "N must be <= d"),
        ({"task": "icl", "model": "theory"}, "icl"),
        ({"model": "gpt2", "positional": "additive"}, "embed_dim must be >= 1 for model 'gpt2'"),
        ({"model": "gpt2", "embed_dim": 32}, "positional must be 'additive' for model 'gpt2'"),
        ({"model": "gpt2", "embed_dim": 30, "positional": "additive", "rank": 4}, "rank must divide embed_dim = 30"),
        ({"embed_dim": 32}, "embed_dim must be 0 unless model is 'gpt2'"),
        ({"device": "tpu"}, "device must be"),
        ({"bf16": 1}, "bf16 must be true or false"),
        ({"steps": 0}, "steps must be"),
    ],
)
def test_invalid_configs(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TrainConfig(), **changes)


def test_unknown_key_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown config key\\(s\\): colour"):
        TrainConfig.from_dict({"colour": "red"})


def test_config_hash_of_0_1_0_configs_is_unchanged() -> None:
    """embed_dim (added after 0.1.0) enters the hash only when set, so result stores written by 0.1.0 still match."""
    config = TrainConfig()
    old_fields = {k: v for k, v in config.to_dict().items() if k not in ("device", "checkpoint_every", "embed_dim")}
    old_hash = hashlib.sha256(json.dumps(old_fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert config.config_hash() == old_hash
    gpt2 = dataclasses.replace(config, model="gpt2", embed_dim=16, positional="additive")
    assert gpt2.config_hash() != dataclasses.replace(gpt2, embed_dim=32).config_hash()


def test_config_hashes_are_pinned() -> None:
    """Hashes recorded before experiments/config.py existed (result stores key runs by them): byte-identical."""
    assert TrainConfig().config_hash() == "0b743d1bec279967ee4cd6b15f43376740e5a63cfa23cef1108e5dfe195e22e2"
    gpt2 = TrainConfig(model="gpt2", embed_dim=16, positional="additive", task="icl", N=4)
    assert gpt2.config_hash() == "ec119e02e49b5c33da7b45de72235a0bb1adb5ac52c2814e1094aaee0aa858ec"


def test_importing_the_config_does_not_load_torch() -> None:
    """Presets and the command line build configs without paying for torch (a fresh interpreter)."""
    code = "import sys, experiments.config; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
