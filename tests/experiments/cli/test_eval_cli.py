"""`attnrank construct majority-vote` and `attnrank eval`: JSON keys, any layout, file/task mismatches exit 2."""

import json
import math

import numpy as np
import pytest

from constructions.eval_tasks import EVAL_TASKS, task_options
from constructions.weights_io import load_weights, save_weights
from experiments.cli.commands.eval import evaluate_weight_file
from experiments.cli.main import main


def _run(capsys, argv):
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_construct_then_eval_majority_vote(tmp_path, capsys):
    path = tmp_path / "mv.safetensors"
    status, out, _ = _run(
        capsys, ["construct", "majority-vote", "--d", "6", "--heads", "9", "--out", str(path), "--json"]
    )
    assert status == 0
    built = json.loads(out)
    assert built["H"] == [9, 1] and built["p"] == 7 and built["L"] == 2 and built["r"] == 1
    loaded = load_weights(path)
    for key in ("construction", "d", "p", "N", "L", "H", "r", "temperature", "predicted_error", "update"):
        assert key in loaded.metadata
    assert loaded.metadata["predicted_error"] == pytest.approx(built["predicted_error"], rel=1e-15)
    argv = ["eval", "--weights", str(path), "--task", "nearest", "--N", "2", "--samples", "3000", "--seed", "0"]
    status, out, _ = _run(capsys, [*argv, "--json"])
    assert status == 0
    result = json.loads(out)
    for key in ("mse", "stderr", "predicted_error", "n_samples", "prediction_applies", "z", "task", "N", "layout"):
        assert key in result
    assert result["n_samples"] == 3000 and result["prediction_applies"] is True and result["layout"] == "multi-layer"
    # The same samples through the library function give the same number (the CLI adds nothing).
    direct = evaluate_weight_file(path, samples=3000, seed=0)
    assert direct["mse"] == result["mse"]


def test_eval_single_layer_full_rank_is_exact_for_every_N(tmp_path, capsys):
    path = tmp_path / "fr.safetensors"
    assert _run(capsys, ["construct", "full-rank", "--d", "8", "--out", str(path)])[0] == 0
    for N in (2, 5):
        result = evaluate_weight_file(path, N=N, samples=2000, seed=1)
        assert result["mse"] == 0.0 and result["layout"] == "single-layer"


def test_eval_single_layer_with_score_bias_checks_N(tmp_path):
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
        evaluate_weight_file(path, N=2, samples=500)


def test_eval_mismatches_exit_2(tmp_path, capsys):
    path = tmp_path / "mv.safetensors"
    _run(capsys, ["construct", "majority-vote", "--d", "4", "--heads", "3", "--out", str(path)])
    status, _, err = _run(capsys, ["eval", "--weights", str(path), "--N", "3", "--samples", "10"])
    assert status == 2 and "N = 2" in err and "Traceback" not in err
    status, _, err = _run(capsys, ["eval", "--weights", str(path), "--task", "nope", "--samples", "10"])
    assert status == 2 and "task must be one of" in err
    status, _, err = _run(capsys, ["eval", "--weights", str(path), "--keys", "weird", "--samples", "10"])
    assert status == 2 and "keys" in err
    status, _, err = _run(capsys, ["eval", "--weights", str(tmp_path / "missing.safetensors")])
    assert status == 2 and "not found" in err
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    status, _, err = _run(capsys, ["eval", "--weights", str(tmp_path / "junk.safetensors")])
    assert status == 2 and "safetensors" in err


def test_construct_rejects_bad_arguments(tmp_path, capsys):
    status, _, err = _run(
        capsys, ["construct", "majority-vote", "--d", "1", "--heads", "3", "--out", str(tmp_path / "x")]
    )
    assert status == 2 and "d must be" in err
    status, _, err = _run(
        capsys, ["construct", "majority-vote", "--d", "4", "--heads", "0", "--out", str(tmp_path / "x")]
    )
    assert status == 2 and "H must be" in err


def test_task_registry_entries_are_complete():
    for task in EVAL_TASKS.values():
        assert callable(task.sampler) and callable(task.target) and task.description
    options = task_options("nearest", 5, 3, "orthonormal")
    X, y = EVAL_TASKS["nearest"].sampler(4, np.random.default_rng(0), options)
    assert X.shape == (4, 3, 5) and EVAL_TASKS["nearest"].target(X, y, options).shape == (4, 5)
    with pytest.raises(ValueError, match="N <= d"):
        task_options("nearest", 3, 4, "orthonormal")


def test_exact_single_layer_construction_is_within_the_float_floor(tmp_path, capsys):
    path = tmp_path / "fr.safetensors"
    _run(capsys, ["construct", "full-rank", "--d", "5", "--out", str(path)])
    result = evaluate_weight_file(path, N=2, samples=500, seed=3)
    assert result["prediction_applies"] and result["within_4_stderr"] and abs(result["z"]) < 1
