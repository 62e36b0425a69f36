"""`attnrank construct random-features --fit-samples N`: the paper's procedure (weights fitted on N samples)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from constructions.random_features import kernel_matrix, target_kernel, weight_error
from constructions.weights_io import load_weights
from experiments.cli.main import main


def test_fit_samples_reports_in_sample_beside_the_exact_error_of_the_file(tmp_path: Path, capsys) -> None:
    """Same heads as without the option; predicted_error is the exact population error of the weights in the file
    (recomputed here from the file's q, k, a with the kernels); with 2 heads per 100 samples the in-sample error is
    below the exact optimum and the population error above it."""
    fitted, exact = tmp_path / "fit.safetensors", tmp_path / "exact.safetensors"
    base = ["construct", "random-features", "--d", "8", "--heads", "64", "--seed", "2", "--json"]
    assert main([*base, "--fit-samples", "3200", "--out", str(fitted)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main([*base, "--out", str(exact)]) == 0
    optimum = json.loads(capsys.readouterr().out)["predicted_error"]
    tensors = load_weights(fitted).tensors
    q, k = tensors["Q"][:, 0], tensors["K"][:, 0]  # (H, d)
    assert np.array_equal(q, load_weights(exact).tensors["Q"][:, 0])
    a = tensors["V"][:, 0, 0]  # (H,): V_h = a_h I
    assert printed["predicted_error"] == pytest.approx(weight_error(kernel_matrix(q, k), target_kernel(q, k), a))
    assert printed["in_sample_error"] < optimum < printed["predicted_error"]
    assert printed["fit_samples"] == 3200 and printed["solver"] == "monte-carlo-fit"


def test_fit_samples_below_one_exits_2_and_writes_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.safetensors"
    argv = ["construct", "random-features", "--d", "8", "--heads", "4", "--fit-samples", "0", "--out", str(out)]
    assert main(argv) == 2
    assert "--fit-samples" in capsys.readouterr().err and not out.exists()
