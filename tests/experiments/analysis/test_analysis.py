"""Tests of experiments/analysis/trained.py and experiments/figures/trained.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions.full_rank import save_full_rank
from experiments.analysis.trained import (
    analyze_layer,
    angle_to_identity,
    effective_rank,
    numerical_rank,
    query_key_matrices,
    records_from_runs,
    summarize_matrix,
)
from experiments.config import TrainConfig
from experiments.figures.trained import plot_trained_vs_bound
from experiments.models.attention import RankedMultiheadAttention
from experiments.training.evaluation import POPULATION_SEED, evaluate_model, evaluation_of, population_error
from experiments.training.run import build_run
from experiments.training.run_record import Evaluation, PopulationError, TheoremTwoBound
from tests.strategies import dimensions
from theory.bounds import rank_lower_bound


@given(d=dimensions(2, 12), a=st.floats(-5, 5), seed=st.integers(0, 2**31 - 1))
def test_angle_matches_the_decomposition_into_identity_and_traceless_parts(d: int, a: float, seed: int) -> None:
    """M = a I + B with tr B = 0 has cos angle = a sqrt(d) / sqrt(a^2 d + ||B||_F^2)."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((d, d))
    B -= np.trace(B) / d * np.eye(d)  # traceless
    M = a * np.eye(d) + B
    expected = math.degrees(math.acos(a * math.sqrt(d) / math.sqrt(a * a * d + np.sum(B * B))))
    assert angle_to_identity(M) == pytest.approx(expected, abs=1e-6)
    assert angle_to_identity(3.0 * M) == pytest.approx(expected, abs=1e-6)  # scale invariant


def test_angle_extremes_and_degenerate_input() -> None:
    assert angle_to_identity(np.eye(5)) == pytest.approx(0.0, abs=1e-6)
    assert angle_to_identity(-7 * np.eye(5)) == pytest.approx(180.0, abs=1e-6)
    assert math.isnan(angle_to_identity(np.zeros((3, 3))))
    with pytest.raises(ValueError, match="square"):
        angle_to_identity(np.ones((2, 3)))
    summary = summarize_matrix(-2 * np.eye(4))
    assert summary["angle_to_minus_I_deg"] == pytest.approx(0.0, abs=1e-6)
    assert summary["frobenius_norm"] == pytest.approx(4.0)


@given(d=dimensions(2, 10), k=st.integers(1, 10), seed=st.integers(0, 2**31 - 1))
def test_effective_and_numerical_rank_of_known_spectra(d: int, k: int, seed: int) -> None:
    k = min(k, d)
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    sigma = np.zeros(d)
    sigma[:k] = 2.5  # k equal singular values: entropy log k
    M = U @ np.diag(sigma) @ V.T
    assert effective_rank(M) == pytest.approx(k, rel=1e-9)
    assert numerical_rank(M) == k
    # Unequal spectrum: compare with the entropy computed from the chosen singular values directly.
    sigma = np.sort(rng.uniform(0.1, 3.0, d))[::-1]
    p = sigma / sigma.sum()
    assert effective_rank(U @ np.diag(sigma) @ V.T) == pytest.approx(math.exp(-np.sum(p * np.log(p))), rel=1e-9)
    assert effective_rank(np.zeros((d, d))) == 0.0


def test_query_key_matrices_reproduce_the_module_attention_weights() -> None:
    """The score form z^T M_h x, softmaxed over keys, equals the weights the module computes itself."""
    torch.manual_seed(0)
    d, r, H, N = 6, 2, 3, 5
    layer = RankedMultiheadAttention(d, r, heads=H, value="full", temperature=1.7, bias=False).double()
    M = query_key_matrices(layer)  # (H, d, d)
    assert M.shape == (H, d, d)
    assert all(numerical_rank(M[h]) == r for h in range(H))
    X = torch.randn(4, N, d, dtype=torch.float64)
    z = torch.randn(4, 1, d, dtype=torch.float64)
    with torch.no_grad():
        weights = layer.attention_weights(z, X)[:, :, 0, :].numpy()  # (4, H, N)
    scores = np.einsum("bd,hde,bne->bhn", z[:, 0].numpy(), M, X.numpy())  # (4, H, N)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights, expected, rtol=1e-10, atol=1e-12)
    report = analyze_layer(layer)
    assert report["heads"] == H and len(report["per_head"]) == H
    assert report["sum"]["frobenius_norm"] == pytest.approx(float(np.linalg.norm(M.sum(0))))


def _full_rank_run(tmp_path: Path, d: int) -> tuple[TrainConfig, object, torch.nn.Module]:
    weights = save_full_rank(tmp_path / "full.safetensors", d, math.inf)
    config = TrainConfig(
        task="nearest", d=d, N=2, keys="orthonormal", rank=d, model="theory", attention="hardmax", init=str(weights)
    )
    task, model = build_run(config, torch.device("cpu"))
    return config, task, model


def test_theorem2_record_for_the_full_rank_construction_and_a_negative_control(tmp_path: Path) -> None:
    """The hardmax full-rank head has error 0 and sits on its own bound (0); against a rank-1 bound it violates it."""
    config, task, model = _full_rank_run(tmp_path, 6)
    report = evaluate_model(config, task, model)
    bound = report["theorem2"]
    assert bound["bound_lower"] == 0.0 and bound["consistent"] and bound["bound_applies"]
    assert (bound["d"], bound["r"], bound["H"]) == (6, 6, 1)
    assert report["population_error"] < 1e-6
    rank1 = rank_lower_bound(6, 1, 1).lower
    upper = report["population_error"] + 4 * report["population_stderr"]
    assert rank1 > 0.1 and upper < rank1  # would fail the trained-vs-bound check


def test_theorem2_applies_to_its_own_task_only() -> None:
    config = TrainConfig(task="farthest", d=4, N=3, rank=4, ffn_dim=8)
    task, model = build_run(config, torch.device("cpu"))
    assert "theorem2" not in evaluate_model(config, task, model)
    assert evaluation_of(config, population_error(model, task, 10)).theorem2 is None


def test_figure_is_written_and_records_are_validated(tmp_path: Path) -> None:
    def evaluation(d: int, r: int, H: int, error: float) -> Evaluation:
        population = PopulationError(error, 0.01, 1000)
        return Evaluation(population, TheoremTwoBound.certify(d, r, H, population, applies=True))

    records = [evaluation(8, 1, 8, 0.3), evaluation(8, 4, 2, 0.2)]
    path = plot_trained_vs_bound(records, tmp_path / "fig.png")
    assert path.exists() and path.stat().st_size > 1000
    with pytest.raises(ValueError, match=r"evaluations\[0\] has no bound record"):
        plot_trained_vs_bound([Evaluation(PopulationError(0.3, 0.01, 1000))], tmp_path / "x.png")
    with pytest.raises(ValueError, match="one dimension d"):
        plot_trained_vs_bound([*records, evaluation(4, 1, 4, 0.3)], tmp_path / "y.png")
    with pytest.raises(ValueError, match="analysis.json not found"):
        records_from_runs([tmp_path])


def test_icl_run_reports_error_curves_next_to_the_baselines(tmp_path: Path) -> None:
    from experiments.analysis.trained import analyze_run
    from experiments.training.loop import train

    config = TrainConfig(task="icl", d=3, N=5, rank=3, ffn_dim=8, steps=5, batch_size=8, positional="additive")
    train(config, tmp_path, progress=False)
    report = analyze_run(tmp_path, samples=3000)
    curves = report["icl"]
    assert set(curves) == {"model", "least_squares", "averaging"}
    assert curves["model"]["examples"] == [0, 1, 2, 3, 4]
    # Least squares is exact once it has seen d = 3 examples; with none, every predictor outputs its prior guess.
    assert max(curves["least_squares"]["error"][3:]) < 1e-12
    mean, se = curves["averaging"]["error"][2], curves["averaging"]["stderr"][2]
    assert abs(mean - (3 + 1) / 2) <= 4 * se  # (d + 1) / i at i = 2 examples


def test_every_run_reports_its_population_error_on_its_own_task(tmp_path: Path) -> None:
    """The analysis's population error is the mean per-sample error of the model on the recipe's held-out samples
    (one batch here, so it can be recomputed directly), with its standard error; the zero map's error on farthest
    (about 1) is the control."""
    from experiments.analysis.trained import analyze_run
    from experiments.tasks import ZeroBaseline, make_task
    from experiments.training.loop import train
    from experiments.training.run_model import load_trained_model

    config = TrainConfig(task="farthest", d=4, N=3, rank=2, ffn_dim=8, steps=5, batch_size=8)
    train(config, tmp_path, progress=False)
    n = 500
    report = analyze_run(tmp_path, samples=n)
    _, task, model = load_trained_model(tmp_path)
    batch = make_task("farthest", 4, 3).sample(n, torch.Generator().manual_seed(POPULATION_SEED))
    with torch.no_grad():
        per_sample = task.error(model(batch.to("cpu")).double(), batch.target)  # (n,)
    assert report["population_samples"] == n and "theorem2" not in report
    assert report["population_error"] == pytest.approx(float(per_sample.mean()), rel=1e-6)
    assert report["population_stderr"] == pytest.approx(float(per_sample.std() / n**0.5), rel=1e-3)
    zero = task.error(ZeroBaseline()(batch), batch.target)  # (n,): ||x_far||^2 = 1 for every token
    error, stderr = report["population_error"], report["population_stderr"]
    assert float(zero.mean()) == pytest.approx(1.0) and abs(error - 1.0) > 4 * stderr
