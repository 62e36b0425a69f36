"""`attnrank construct majority-vote` and `attnrank eval`: JSON keys, file/task mismatches exit 2 (or warn, --force)."""

import json

import pytest

from constructions.evaluate import evaluate_weight_file
from constructions.weights_io import load_weights
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
    assert status == 2 and "--d must be" in err
    status, _, err = _run(
        capsys, ["construct", "majority-vote", "--d", "4", "--heads", "0", "--out", str(tmp_path / "x")]
    )
    assert status == 2 and "--heads must be" in err  # the flag as typed, not the library's H


def test_eval_refuses_a_file_built_for_another_task_or_N_unless_forced(tmp_path, capsys):
    biased = tmp_path / "biased.safetensors"
    assert _run(capsys, ["construct", "biased", "--d", "3", "--out", str(biased)])[0] == 0
    argv = ["eval", "--weights", str(biased), "--samples", "200", "--json"]
    status, out, err = _run(capsys, [*argv, "--task", "nearest"])
    assert status == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and "task 'biased'" in err and "--task is 'nearest'" in err
    status, out, err = _run(capsys, [*argv, "--task", "nearest", "--force"])
    assert status == 0 and err.count("\n") == 1 and "warning" in err and "task 'biased'" in err
    result = json.loads(out)
    assert result["prediction_applies"] is False and "task 'biased'" in result["metadata_mismatch"]
    status, out, err = _run(capsys, [*argv, "--task", "biased"])
    assert status == 0 and err == "" and "metadata_mismatch" not in json.loads(out)

    full_rank = tmp_path / "fr.safetensors"
    assert _run(capsys, ["construct", "full-rank", "--d", "6", "--out", str(full_rank)])[0] == 0
    argv = ["eval", "--weights", str(full_rank), "--samples", "200", "--json", "--N", "4"]
    status, out, err = _run(capsys, argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and "N = 2 (--N is 4)" in err
    status, out, err = _run(capsys, [*argv, "--force"])
    assert status == 0 and "warning" in err and err.count("\n") == 1
    assert json.loads(out)["mse"] == 0.0  # Fact 1: exact for every N; only the prediction is for N = 2
