"""Tests of experiments/training/run_model.py: a run directory's recorded precision, and loading the model in it (the
one load_trained_model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from experiments.training.imported_run import import_reference_encoder
from experiments.training.run_directory import IMPORT_NAME
from experiments.training.run_model import dtype_name, load_trained_model, run_dtype
from tests.experiments.models.reference_checkpoints import random_reference_state


def _imported(tmp_path: Path, dtype: torch.dtype) -> Path:
    state = {k: v.to(dtype) for k, v in random_reference_state(d=4, num_heads=2).items()}
    torch.save(state, tmp_path / f"{dtype}.pt")
    return import_reference_encoder(
        tmp_path / f"{dtype}.pt", tmp_path / str(dtype), num_heads=2, task="farthest", N=3
    ).out_dir


def test_an_import_keeps_the_files_precision_and_its_weights_bit_for_bit(tmp_path: Path) -> None:
    for dtype in (torch.float64, torch.float32):
        run = _imported(tmp_path, dtype)
        assert run_dtype(run) == dtype
        _, _, model = load_trained_model(run)
        assert {p.dtype for p in model.parameters()} == {dtype} and not model.training
    _, _, model = load_trained_model(tmp_path / "torch.float64")
    source = random_reference_state(d=4, num_heads=2)
    scale = source["encoder.layers.0.norm1.scale"].reshape(())
    assert torch.equal(model.network.layers[0].norm1.scale.detach(), scale)  # no float32 on the way


def test_the_public_load_trained_model_keeps_the_runs_precision(tmp_path: Path) -> None:
    import attnrank

    run = _imported(tmp_path, torch.float64)
    _, _, model = attnrank.load_trained_model(run)
    assert {p.dtype for p in model.parameters()} == {torch.float64}


def test_a_run_without_a_record_is_float32_and_a_damaged_record_is_refused(tmp_path: Path) -> None:
    assert run_dtype(tmp_path) == torch.float32
    record = tmp_path / IMPORT_NAME
    for content, phrase in (("{not json", "not a readable JSON"), (json.dumps({"dtype": "float16"}), "field dtype")):
        record.write_text(content)
        with pytest.raises(ValueError, match=phrase):
            run_dtype(tmp_path)
    record.write_text(json.dumps({"source": "x"}))  # written before the precision was recorded
    assert run_dtype(tmp_path) == torch.float32
    assert dtype_name(torch.float64) == "float64"
    with pytest.raises(ValueError, match="dtype must be one of"):
        dtype_name(torch.float16)
