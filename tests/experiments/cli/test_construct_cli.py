"""`attnrank construct biased` and `construct random-features`: loadable files, printed keys, bad input exits 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from constructions.biased import predicted_error
from constructions.random_features import kernel_matrix, target_kernel
from constructions.weights_io import load_weights
from experiments.cli.main import main


def test_biased_writes_a_loadable_file(tmp_path, capsys):
    out = tmp_path / "b.safetensors"
    assert main(["construct", "biased", "--d", "3", "--temperature", "50", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    weights = load_weights(out)
    assert weights.metadata["construction"] == "biased" and weights.metadata["task"] == "biased"
    assert weights.tensors["score_bias"].shape == (19, 2)
    assert printed["predicted_error"] == pytest.approx(predicted_error(3, 50.0))


@pytest.mark.parametrize(
    "argv",
    [
        ["construct", "biased", "--d", "1", "--out", "x.safetensors"],
        ["construct", "biased", "--d", "3", "--temperature", "-2", "--out", "x.safetensors"],
        ["construct", "biased", "--d", "3", "--m", "0", "--out", "x.safetensors"],
        ["construct", "biased", "--d", "3", "--keys", "bad", "--out", "x.safetensors"],
    ],
)
def test_biased_bad_input_exits_2(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


def test_random_features_writes_a_loadable_file(tmp_path, capsys) -> None:
    out = tmp_path / "rf.safetensors"
    status = main(
        ["construct", "random-features", "--d", "8", "--heads", "32", "--seed", "3", "--out", str(out), "--json"]
    )
    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    loaded = load_weights(out)
    assert printed["predicted_error"] == pytest.approx(loaded.predicted_error, rel=1e-15)
    assert int(loaded.metadata["seed"]) == 3  # extra metadata keys come back as strings
    C = kernel_matrix(loaded.tensors["Q"][:, 0, :], loaded.tensors["K"][:, 0, :])
    b = target_kernel(loaded.tensors["Q"][:, 0, :], loaded.tensors["K"][:, 0, :])
    assert loaded.predicted_error == pytest.approx(1.0 - b @ np.linalg.solve(C, b), abs=1e-12)
    assert main(["construct", "random-features", "--d", "8", "--heads", "0", "--out", str(out)]) == 2
