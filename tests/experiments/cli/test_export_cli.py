"""`attnrank export`: writes the stock nn.MultiheadAttention state dict, JSON keys, refusals exit 2 writing nothing."""

import json

import numpy as np
import torch
from safetensors.torch import load_file

from constructions.evaluate import weight_file_model
from constructions.weights_io import load_weights
from experiments.cli.main import main


def _run(capsys, argv):
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_export_full_rank_softmax_loads_into_stock_attention(tmp_path, capsys):
    source, out = tmp_path / "fr.safetensors", tmp_path / "mha.safetensors"
    assert _run(capsys, ["construct", "full-rank", "--d", "8", "--temperature", "4", "--out", str(source)])[0] == 0
    status, text, err = _run(capsys, ["export", "--weights", str(source), "--format", "torch-mha", "--out", str(out)])
    assert status == 0 and err == "" and "MultiheadAttention" in text
    status, text, _ = _run(capsys, ["export", "--weights", str(source), "--out", str(out), "--json"])
    result = json.loads(text)
    assert status == 0 and result["embed_dim"] == 8 and result["num_heads"] == 1 and result["head_dim"] == 8
    assert result["path"] == str(out) and result["construction"] == "full-rank" and result["temperature"] == 4.0
    assert result["keys"] == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    mha = torch.nn.MultiheadAttention(embed_dim=8, num_heads=1, batch_first=True, dtype=torch.float64)
    mha.load_state_dict(load_file(str(out)))
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((32, 5, 8)), rng.standard_normal((32, 8))
    with torch.no_grad():
        got = mha(torch.from_numpy(y)[:, None], torch.from_numpy(X), torch.from_numpy(X))[0][:, 0].numpy()
    np.testing.assert_allclose(got, weight_file_model(load_weights(source))(X, y), rtol=0, atol=1e-6)


def test_export_refusals_and_bad_flags_exit_2_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "out.safetensors"
    cases = [
        (["construct", "full-rank", "--d", "4"], "hardmax"),
        (["construct", "random-features", "--d", "4", "--heads", "4"], "hardmax"),
        (["construct", "biased", "--d", "2", "--temperature", "5"], "score_bias"),
        (["construct", "majority-vote", "--d", "4", "--heads", "3", "--no-predict"], "multi-layer"),
    ]
    for index, (construct, reason) in enumerate(cases):
        source = tmp_path / f"w{index}.safetensors"
        assert _run(capsys, [*construct, "--out", str(source)])[0] == 0
        status, text, err = _run(capsys, ["export", "--weights", str(source), "--out", str(out)])
        assert status == 2 and text == "" and "Traceback" not in err, err
        assert err.startswith("attnrank export: error:") and err.count("\n") == 1 and reason in err
        assert str(source) in err and not out.exists()
    soft = tmp_path / "soft.safetensors"
    assert _run(capsys, ["construct", "full-rank", "--d", "4", "--temperature", "2", "--out", str(soft)])[0] == 0
    status, _, err = _run(capsys, ["export", "--weights", str(soft), "--format", "onnx", "--out", str(out)])
    assert status == 2 and err.count("\n") == 1 and "--format" in err and not out.exists()
    status, _, err = _run(capsys, ["export", "--weights", str(tmp_path / "missing"), "--out", str(out)])
    assert status == 2 and "not found" in err and not out.exists()
