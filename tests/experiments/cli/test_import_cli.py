"""Tests of `attnrank import` (both sources) and of what the other commands then do with its output.

torch-mha: the imported file, scored by `attnrank eval`, has the stock module's own Monte Carlo error on the same
samples (the stock forward is torch's, not ours); export -> import gives the file back. reference-encoder: the run
directory is accepted by analyze, report and the printed `train --eval-only` command, and they agree with each other
on the same samples.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from constructions.eval_tasks import get_task, task_options
from constructions.weights_io import load_weights
from experiments.cli.main import main
from tests.constructions.test_import_torch import random_module, stock_output
from tests.experiments.cli.cli_fuzz import invoke
from tests.experiments.models.reference_checkpoints import random_reference_state
from theory.monte_carlo import estimate_error


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    outcome = invoke([*argv, "--json"], capsys)
    assert outcome.status == 0, outcome.err
    return json.loads(outcome.out)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    outcome = invoke(argv, capsys)
    lines = outcome.err.splitlines()
    assert outcome.status == 2 and len(lines) == 1 and lines[0].startswith("attnrank import: error: "), outcome.err
    return lines[0]


def test_help_names_both_sources(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    text = capsys.readouterr().out
    assert "torch-mha" in text and "reference-encoder" in text and "weights_only" in text


def test_a_stock_module_imported_and_evaluated_has_its_own_error(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    d, heads, N, n, seed = 8, 4, 3, 4000, 2
    module = random_module(d, heads, seed=21)
    torch.save(module.state_dict(), tmp_path / "mha.pt")
    summary = _json(
        ["import", "--from", "torch-mha", str(tmp_path / "mha.pt"), "--num-heads", "4", "--out", str(tmp_path / "w")],
        capsys,
    )
    assert (summary["d"], summary["H"], summary["r"], summary["container"]) == (d, heads, 2, "torch state dict")
    ours = _json(
        ["eval", "--weights", str(tmp_path / "w"), "--task", "nearest", "--N", "3", "--keys", "iid"]
        + ["--samples", str(n), "--seed", str(seed)],
        capsys,
    )
    spec, options = get_task("nearest"), task_options("nearest", d, N, "iid", {})
    stock = estimate_error(
        lambda X, y: stock_output(module, X, y),
        lambda X, y: spec.target(X, y, options),
        lambda m, rng: spec.sampler(m, rng, options),
        n,
        np.random.default_rng(seed),
    )
    print(f"attnrank eval of the import: {ours['mse']!r}; stock module on the same samples: {stock.mean!r}")
    assert abs(ours["mse"] - stock.mean) <= 1e-12 * stock.mean
    assert ours["predicted_error"] == "nan" and ours["z"] == "nan"  # no prediction for an import: no z-score


def test_export_then_import_from_the_command_line(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    full, mha, back = (str(tmp_path / name) for name in ("full.safetensors", "mha.safetensors", "back.safetensors"))
    assert main(["construct", "full-rank", "--d", "6", "--temperature", "4", "--out", full]) == 0
    assert main(["export", "--weights", full, "--out", mha]) == 0
    capsys.readouterr()
    summary = _json(["import", "--from", "torch-mha", mha, "--num-heads", "1", "--out", back], capsys)
    assert summary["temperature"] == 4.0 and summary["q_scale"] == pytest.approx(4.0 * 6**0.5)
    original, imported = load_weights(full), load_weights(back)
    eps = float(np.finfo(np.float64).eps)
    for name in ("Q", "K", "V"):
        np.testing.assert_allclose(imported.tensors[name], original.tensors[name], rtol=4 * eps, atol=4 * eps)


def _reference_checkpoint(path: Path) -> Path:
    state = random_reference_state(d=4, num_heads=2, width=2, layers=1, ffn_dim=8, seed=8)
    torch.save({"epoch": 9, "state_dict": {f"model.{k}": v.float() for k, v in state.items()}}, path)
    return path


def test_an_imported_reference_encoder_is_analysed_reported_and_evaluated(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    source = _reference_checkpoint(tmp_path / "last.ckpt")
    run = tmp_path / "imported"
    summary = _json(
        ["import", "--from", "reference-encoder", str(source), "--num-heads", "2", "--task", "nearest", "--N", "2"]
        + ["--keys", "orthonormal", "--out", str(run)],
        capsys,
    )
    assert (summary["heads"], summary["rank"], summary["width"], summary["prefix"]) == (4, 2, 2, "model.")
    n = 3000
    analysis = _json(["analyze", str(run), "--samples", str(n)], capsys)
    assert [len(layer["per_head"]) for layer in analysis["layers"]] == [4]
    assert analysis["theorem2"]["bound_applies"] is False and analysis["theorem2"]["r"] == 2
    assert analysis["run"]["imported_from"] == f"reference-encoder: {source}"
    text = invoke(["analyze", str(run), "--samples", "200"], capsys).out
    assert "per head" in text and "population error on the task" in text and "bound_lower" in text
    argv = shlex.split(summary["eval_command"])[1:] + ["--eval-samples", str(n)]
    evaluation = _json(argv, capsys)
    assert (evaluation["source"], evaluation["step"]) == ("checkpoint", 0)
    assert evaluation["population_error"] == analysis["population_error"]  # the one recipe: the same held-out samples
    _json(["analyze", str(run), "--samples", str(n)], capsys)  # analysis.json for the report
    reported = _json(["report", str(run)], capsys)
    report = Path(reported["report"]).read_text()
    assert "Imported with `attnrank import --from reference-encoder`" in report and "## Theorem 2" in report
    assert f"{analysis['population_error']:.4g}" in report


def test_import_refusals_are_one_line_and_write_nothing(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    source = _reference_checkpoint(tmp_path / "last.ckpt")
    reference = ["import", "--from", "reference-encoder", str(source), "--num-heads", "2"]
    assert "--task is required" in _refused([*reference, "--out", str(tmp_path / "a")], capsys)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    assert "--out" in _refused([*reference, "--task", "farthest", "--N", "3", "--out", str(taken)], capsys)
    assert "N must be given" in _refused([*reference, "--task", "farthest", "--out", str(tmp_path / "b")], capsys)
    torch_mha = ["import", "--from", "torch-mha", str(source), "--num-heads", "2", "--out", str(tmp_path / "c")]
    assert "several attention modules" in _refused(torch_mha, capsys)  # a reference checkpoint is not one module
    assert "--task applies to --from reference-encoder only" in _refused([*torch_mha, "--task", "nearest"], capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt", "taken"]


def test_report_of_a_run_directory_needs_a_fresh_analysis(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    source = _reference_checkpoint(tmp_path / "last.ckpt")
    run = tmp_path / "run"
    main(
        ["import", "--from", "reference-encoder", str(source), "--num-heads", "2", "--task", "farthest"]
        + ["--N", "3", "--out", str(run)]
    )
    outcome = invoke(["report", str(run)], capsys)
    assert outcome.status == 2 and "run `attnrank analyze" in outcome.err
    assert main(["analyze", str(run), "--samples", "100"]) == 0
    analysis = json.loads((run / "analysis.json").read_text())
    (run / "analysis.json").write_text(json.dumps({**analysis, "run": {**analysis["run"], "N": 4}}))
    outcome = invoke(["report", str(run)], capsys)
    assert outcome.status == 2 and "stale analysis" in outcome.err and not (run / "report.md").exists()
    outcome = invoke(["report", str(run), "--csv"], capsys)
    assert outcome.status == 2 and "--csv applies to a sweep directory" in outcome.err
