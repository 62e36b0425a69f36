"""constructions.evaluate: the Monte Carlo error of weight files, the context-length checks and the task registry."""

import math

import numpy as np
import pytest

from constructions.biased import build_biased_construction, save_biased_construction
from constructions.eval_tasks import EVAL_TASKS, task_options
from constructions.evaluate import evaluate_weight_file, metadata_mismatch
from constructions.full_rank import save_full_rank
from constructions.weights_io import load_weights, save_weights
from theory.biased_target import bias_grid


def test_single_layer_full_rank_is_exact_for_every_N(tmp_path):
    path = save_full_rank(tmp_path / "fr.safetensors", 8, math.inf)
    for N in (2, 5):
        result = evaluate_weight_file(path, N=N, samples=2000, seed=1, force=True)
        assert result["mse"] == 0.0 and result["layout"] == "single-layer"
        assert result["prediction_applies"] is (N == 2)


def test_single_layer_with_score_bias_checks_N(tmp_path):
    d, h = 4, 2
    rng = np.random.default_rng(0)
    tensors = {
        "Q": rng.standard_normal((h, 1, d)),
        "K": rng.standard_normal((h, 1, d)),
        "V": rng.standard_normal((h, d, d)),
        "score_bias": rng.standard_normal((h, 3)),
    }
    metadata = {
        "construction": "t",
        "d": d,
        "r": 1,
        "H": h,
        "N": 3,
        "temperature": 2.0,
        "predicted_error": math.nan,
        "layout": "single-layer",
    }
    path = save_weights(tmp_path / "b.safetensors", tensors, metadata)
    result = evaluate_weight_file(path, samples=500, seed=0)
    assert result["N"] == 3 and math.isfinite(result["mse"]) and result["within_4_stderr"] is False
    with pytest.raises(ValueError, match="built for N = 3"):
        evaluate_weight_file(path, N=2, samples=500, force=True)


def test_task_and_N_metadata_mismatches_are_refused_unless_forced(tmp_path):
    d = 3
    path = save_biased_construction(tmp_path / "b.safetensors", build_biased_construction(d, math.inf, bias_grid(d)))
    weights = load_weights(path)
    assert metadata_mismatch(weights, "biased", None) is None
    assert metadata_mismatch(weights, "biased", 2) is None
    assert "task 'biased'" in str(metadata_mismatch(weights, "nearest", None))
    with pytest.raises(ValueError, match="task 'biased'.*--force"):
        evaluate_weight_file(path, task="nearest", samples=100)
    forced = evaluate_weight_file(path, task="nearest", samples=100, force=True)
    assert forced["prediction_applies"] is False and "metadata_mismatch" in forced
    full_rank = load_weights(save_full_rank(tmp_path / "fr.safetensors", 4, math.inf))
    assert metadata_mismatch(full_rank, "nearest", 3) == "the weight file is built for N = 2 (--N is 3)"


def test_task_registry_entries_are_complete():
    for task in EVAL_TASKS.values():
        assert callable(task.sampler) and callable(task.target) and task.description
    options = task_options("nearest", 5, 3, "orthonormal")
    X, y = EVAL_TASKS["nearest"].sampler(4, np.random.default_rng(0), options)
    assert X.shape == (4, 3, 5) and EVAL_TASKS["nearest"].target(X, y, options).shape == (4, 5)
    with pytest.raises(ValueError, match="N <= d"):
        task_options("nearest", 3, 4, "orthonormal")


def test_exact_single_layer_construction_is_within_the_float_floor(tmp_path):
    path = save_full_rank(tmp_path / "fr.safetensors", 5, math.inf)
    result = evaluate_weight_file(path, N=2, samples=500, seed=3)
    # An exact file measures 0 to rounding, but 500 samples only resolve errors down to 1/500: no z-score verdict.
    assert result["prediction_applies"] and result["mse"] < 1e-20
    assert result["resolved"] is False and result["resolution"] == pytest.approx(1 / 500)
    assert result["z"] is None and result["within_4_stderr"] is None


def test_a_prediction_below_the_resolution_gets_no_z_score(tmp_path):
    """Fact 1 at temperature 1e6: error 5.6e-7 lives within 1e-6 of the decision boundary; 1e5 samples miss it."""
    path = save_full_rank(tmp_path / "fr.safetensors", 8, 1e6)
    result = evaluate_weight_file(path, samples=100_000, seed=0)
    assert result["predicted_error"] < result["resolution"] == pytest.approx(1e-5)
    assert result["resolved"] is False and result["z"] is None and result["within_4_stderr"] is None
    resolved = evaluate_weight_file(save_full_rank(tmp_path / "t10.safetensors", 8, 10.0), samples=20_000, seed=0)
    assert resolved["resolved"] is True and resolved["within_4_stderr"] is True and abs(resolved["z"]) < 4


def test_a_broken_exact_file_is_resolved_and_fails(tmp_path):
    """Negative control: a file claiming 0 error whose heads point the wrong way is measured, not excused."""
    path = save_full_rank(tmp_path / "fr.safetensors", 4, math.inf)
    weights = load_weights(path)
    tensors = {**weights.tensors, "Q": -weights.tensors["Q"]}  # picks the farthest key
    save_weights(tmp_path / "wrong.safetensors", tensors, {k: v for k, v in weights.metadata.items() if k != "version"})
    result = evaluate_weight_file(tmp_path / "wrong.safetensors", samples=2_000, seed=0)
    assert result["resolved"] is True and result["within_4_stderr"] is False and result["z"] > 4
