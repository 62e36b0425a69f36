"""Figure 1, scaled down: on the farthest-point task, full rank beats rank d/2 and below by an order of magnitude.

Claim (docs/paper.md section 6, Figure 1): one-layer transformers with equal attention parameter count (H = d / r heads
of rank r, c = 1) trained on the self-attention farthest-point task reach a much lower error at full rank (r = d)
than at any lower rank (paper, d = 64, N = 16, L = 1, c = 1: 1.5e-2 at r = 64 against 0.70 at r = 32 and 0.45 - 0.9
at r <= 16), and the learned full-rank score matrix Q^T K is close to -lambda I (angle to I about 180 degrees).

What we run (scaled down so that it fits a CPU budget; every number below is ours):
- d = 16, N = 8 i.i.d. uniform tokens, token i's target x_{argmin_j <x_i, x_j>}; L = 1, c = 1; the paper's encoder
  (post-norm, L2 normalisation times a learned scalar, ReLU FFN, biases, no positional encoding, dropout 0);
- AdamW lr 0.01, betas (0.9, 0.95), no weight decay, 5% linear warm-up then cosine decay, fresh samples every step.

Assumptions / deviations from the paper (stated, applied to every rank alike):
- 800 steps of batch 128 instead of 100k steps of batch 256, FFN width 256 instead of 2048, one seed instead of 5;
- scores multiplied by temperature 128 (on top of the usual 1/sqrt(r)): a full-rank head needs a score scale
  lambda of a few tens to resolve the farthest point, which the paper's 100k steps at lr 0.01 reach from
  temperature 1 but 800 steps do not. The temperature is a fixed factor in front of the learned Q^T K, the same for
  every rank (we measured rank 8 at 0.576 with temperature 32 and 128 alike: it does not help low rank);
- one seed, so the seed spread of each rank is a single value.

Grade. The separation is graded by Figure 1's one predicate, `experiments.studies.fig1.fig1` (the same that
grades the sweep report), on the paper's metric (lowest epoch-mean training loss, epoch = 50 steps): ``magnitude`` when
full rank is at least 10x below every lower rank on every seed (the paper's ~47x, 10x being the threshold stated in
advance). This check reaches that at its scale and asserts ``magnitude``. A fresh Monte Carlo error of each final
model (20000 samples) is recorded beside it for information, not judged.

Default run: r = 16 and r = 8 (= d / 2), two processes in parallel. ``-m slow`` adds r = 4, 2, 1.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.analysis.trained import analyze_layer, attention_layers
from experiments.config import TrainConfig
from experiments.studies.fig1 import fig1
from experiments.sweeps.backends import train_configs
from experiments.sweeps.grading import Grade
from experiments.training.evaluation import population_error
from experiments.training.run import build_run
from experiments.training.run_model import load_trained_model

D, N = 16, 8
SEED = 0
BASE = TrainConfig(
    task="farthest",
    d=D,
    N=N,
    keys="iid",
    width=1,
    layers=1,
    ffn_dim=256,
    steps=800,
    batch_size=128,
    temperature=128.0,
    log_every=50,
    checkpoint_every=800,
    seed=SEED,
    device="cpu",
)


def _train_ranks(ranks: tuple[int, ...], root: Path) -> dict[int, dict[str, Any]]:
    jobs = [(TrainConfig.from_dict({**BASE.to_dict(), "rank": r}), root / f"r{r}") for r in ranks]
    results = train_configs(jobs, workers=2)
    runs = {}
    for (config, out_dir), result in zip(jobs, results, strict=True):
        assert not result.diverged, f"rank {config.rank} diverged"
        _, task, model = load_trained_model(out_dir)
        estimate = population_error(model, task)  # the one recipe: held-out samples
        runs[config.rank] = {"result": result, "estimate": estimate, "model": model, "heads": config.heads}
    return runs


@pytest.fixture(scope="module")
def default_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    return _train_ranks((D, D // 2), tmp_path_factory.mktemp("figure1"))


def _describe(runs: dict[int, dict[str, Any]]) -> str:
    parts = []
    for r, run in sorted(runs.items(), reverse=True):
        e = run["estimate"]
        parts.append(
            f"r={r} (H={run['heads']}): {e.mean:.4g} +- {e.stderr:.2g} (best epoch loss {run['result'].best_loss:.4g})"
        )
    return "; ".join(parts)


def _check_separation(runs: dict[int, dict[str, Any]], record_claim: Any) -> None:
    """Grade the runs with Figure 1's one predicate (the paper's metric, best_loss) and assert ``magnitude``."""
    records = [
        {
            "d": D,
            "N": N,
            "width": 1,
            "layers": 1,
            "rank": r,
            "seed": SEED,
            "status": "finished",
            "best_loss": run["result"].best_loss,
        }
        for r, run in runs.items()
    ]
    verdict = fig1(records)  # the sweep report's Figure 1 predicate: magnitude = 10x on every seed
    record_claim(
        measured=f"d={D}, N={N}, L=1, c=1, seed={SEED}, {BASE.steps} steps: "
        + _describe(runs)
        + f"; worst ratio (lower rank / full rank, best epoch loss) = {verdict.numbers['worst_ratio']:.3g}",
        reference="paper (d=64, N=16, L=1, c=1, 100k steps): 1.5e-2 at r=64 vs 0.70 at r=32 (~47x), 0.45-0.9 at "
        "r<=16; magnitude needs >= 10x (experiments.studies.fig1)",
        grade=verdict.grade.value,
    )
    assert verdict.grade is Grade.MAGNITUDE, f"{verdict.grade.value}: {verdict.explanation}"


@pytest.mark.claim("Figure 1 (scaled): full rank >= 10x below rank d/2 at equal parameters (asserts magnitude)")
def test_full_rank_beats_half_rank(default_runs: dict[int, dict[str, Any]], record_claim: Any) -> None:
    """Full rank (H = 1) against rank d / 2 (H = 2) on the farthest task, equal attention parameters."""
    _check_separation(default_runs, record_claim)


@pytest.mark.claim("Figure 1 (scaled): the learned full-rank Q^T K aligns with -I (angle to I > 150 degrees)")
def test_full_rank_learns_minus_identity(default_runs: dict[int, dict[str, Any]], record_claim: Any) -> None:
    """The trained full-rank score form points at -I; the untrained one (negative control) does not."""
    trained = analyze_layer(attention_layers(default_runs[D]["model"])[0])["sum"]
    _, initial_model = build_run(TrainConfig.from_dict({**BASE.to_dict(), "rank": D}), torch.device("cpu"))
    initial = analyze_layer(attention_layers(initial_model)[0])["sum"]
    half = analyze_layer(attention_layers(default_runs[D // 2]["model"])[0])["sum"]
    record_claim(
        measured=f"trained r={D}: angle to I {trained['angle_to_I_deg']:.2f} deg, "
        f"||M||_F {trained['frobenius_norm']:.4g}, effective rank {trained['effective_rank']:.3g}; "
        f"at initialisation {initial['angle_to_I_deg']:.1f} deg; trained r={D // 2} (sum of 2 heads) "
        f"{half['angle_to_I_deg']:.1f} deg, numerical rank {half['numerical_rank']}",
        reference="paper: KQ^T ~ -lambda I, angle ~ 180 deg (||KQ^T||_F ~ 2400 at d = 64 after 100k steps); "
        "threshold 150 deg; untrained control must stay below it",
    )
    assert trained["angle_to_I_deg"] > 150.0, trained
    assert trained["numerical_rank"] == D
    assert initial["angle_to_I_deg"] < 150.0, initial  # the check can fail: a random score matrix does not pass
    assert math.isfinite(half["angle_to_I_deg"])


@pytest.mark.slow
@pytest.mark.claim("Figure 1 (scaled): full rank >= 10x below every rank <= d/2 (r = 8, 4, 2, 1; asserts magnitude)")
def test_full_rank_beats_every_lower_rank(tmp_path: Path, record_claim: Any) -> None:
    """All ranks r in {16, 8, 4, 2, 1} with H = d / r heads (equal attention parameters)."""
    _check_separation(_train_ranks((16, 8, 4, 2, 1), tmp_path), record_claim)
