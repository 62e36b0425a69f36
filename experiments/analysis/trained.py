"""What a trained attention layer learned: its Q^T K matrices against +-I, their rank, and error against Theorem 2.

For head h with query and key maps Q_h, K_h (r x D, rows of the module's in-projection), the score of key x for query
z is z^T M_h x + (bias terms), with M_h = s Q_h^T K_h the D x D bilinear form in input coordinates, s = temperature x
score scale (1/sqrt(r) by default; the softmax sees exactly s <Q_h z, K_h x>; for a hardmax module with infinite
temperature s is the score scale alone). We report per head and for the sum over heads M = sum_h M_h:

- angle to I: arccos(<M, I>_F / (||M||_F ||I||_F)) in degrees (0 = aligned with +I, 180 = aligned with -I; the
  paper's trained full-rank heads on the farthest task sit near 180);
- ||M||_F;
- effective rank exp(H(p)), p_i = sigma_i / sum_j sigma_j (the entropy of the normalised singular values; equals k
  for k equal non-zero singular values);
- numerical rank: singular values above sigma_max * D * eps(float64) (numpy.linalg.matrix_rank's default); a product
  of rank-r maps has numerical rank <= r.

Every run gets its evaluation by the one recipe (`experiments.training.evaluation`: the population error on its own
task, the training loss's per-sample error on held-out samples, with its standard error). For a one-layer model on
Theorem 2's own task (nearest, N = 2, D_2 keys) that estimate is reported next to ``theory.bounds.rank_lower_bound(d,
r, H)``. For an in-context regression run the error against the number of in-context examples is reported for the
model and for the least-squares and averaging baselines, on the same held-out samples. The bound holds for
every H-head rank-r generalized attention, i.e. for query-to-context models whose output is sum_h sum_i w_hi V_h x_i
(``model="theory"``); the encoder adds the query itself through its residual connection and feeds an FFN, which is
outside that class, so for it the comparison is reported as "bound_applies": false.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from experiments.json_files import read_json_object
from experiments.models.attention import RankedMultiheadAttention
from experiments.tasks import AveragingBaseline, LeastSquaresBaseline, LinearRegressionTask
from experiments.training.evaluation import (
    EVAL_BATCH,
    EVALUATION_SAMPLES,
    POPULATION_SEED,
    check_evaluation_memory,
    evaluation_of,
    population_error,
)
from experiments.training.run_directory import RunDirectory
from experiments.training.run_model import load_trained_model, model_dtype
from experiments.training.run_record import Evaluation
from theory.monte_carlo import MeanAccumulator
from theory.validation import check_array, check_int, check_sample_count

FloatArray = npt.NDArray[np.float64]


def angle_to_identity(M: Any) -> float:
    """Angle in degrees between M (D, D) and the identity in the Frobenius inner product (nan for M = 0)."""
    M = check_array("M", M, ndim=2)
    if M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be square, got shape {M.shape}")
    d = M.shape[0]
    if not np.any(M):
        return math.nan
    # cos = <M, I> / (|M| |I|). Split M = (tr M / d) I + B with B traceless (orthogonal to I): the angle is
    # atan2(|B|, tr M / sqrt d), which stays accurate near 0 and 180 degrees where arccos loses half the digits.
    along = float(np.trace(M)) / math.sqrt(d)  # <M, I / sqrt d>
    across = float(np.linalg.norm(M - (np.trace(M) / d) * np.eye(d)))  # |B|_F
    return math.degrees(math.atan2(across, along))


def effective_rank(M: Any) -> float:
    """exp of the Shannon entropy of the normalised singular values of M (0 for M = 0)."""
    M = check_array("M", M, ndim=2)
    sigma = np.linalg.svd(M, compute_uv=False)  # (min(M.shape),)
    total = float(sigma.sum())
    if total == 0.0:
        return 0.0
    p = sigma[sigma > 0] / total
    return float(math.exp(-float(np.sum(p * np.log(p)))))


def numerical_rank(M: Any) -> int:
    """Number of singular values above sigma_max * max(shape) * eps(float64)."""
    M = check_array("M", M, ndim=2)
    return int(np.linalg.matrix_rank(M))


def summarize_matrix(M: Any) -> dict[str, float | int]:
    """Angle to I, angle to -I, Frobenius norm, effective and numerical rank of a square matrix."""
    M = check_array("M", M, ndim=2)
    angle = angle_to_identity(M)
    return {
        "angle_to_I_deg": angle,
        "angle_to_minus_I_deg": 180.0 - angle if math.isfinite(angle) else math.nan,
        "frobenius_norm": float(np.linalg.norm(M)),
        "effective_rank": effective_rank(M),
        "numerical_rank": numerical_rank(M),
    }


def query_key_matrices(layer: RankedMultiheadAttention) -> FloatArray:
    """The score forms M_h = s Q_h^T K_h of every head in input coordinates, in float64.

    Args:
        layer: the attention module.

    Returns:
        (H, D, D) array; the score of key x for query z is s <Q_h z, K_h x> = z^T M_h x (plus bias terms).
    """
    if not isinstance(layer, RankedMultiheadAttention):
        raise ValueError(f"layer must be a RankedMultiheadAttention, got {type(layer).__name__}")
    H, r, D = layer.heads, layer.rank, layer.embed_dim
    weight = layer.in_proj_weight.detach().to("cpu", torch.float64).numpy()  # (n_proj H r, D)
    Q = weight[: H * r].reshape(H, r, D)  # (H, r, D)
    K = weight[H * r : 2 * H * r].reshape(H, r, D)  # (H, r, D)
    scale = layer.score_scale * (layer.temperature if math.isfinite(layer.temperature) else 1.0)
    return scale * np.einsum("hrd,hre->hde", Q, K)  # (H, D, D); h head, r rank, d query coord, e key coord


def analyze_layer(layer: RankedMultiheadAttention) -> dict[str, Any]:
    """Per-head and summed summaries of a layer's score forms."""
    M = query_key_matrices(layer)  # (H, D, D)
    return {
        "heads": layer.heads,
        "rank": layer.rank,
        "d_model": layer.embed_dim,
        "sum": summarize_matrix(M.sum(axis=0)),
        "per_head": [summarize_matrix(M[h]) for h in range(M.shape[0])],
    }


def attention_layers(model: torch.nn.Module) -> list[RankedMultiheadAttention]:
    """Every RankedMultiheadAttention inside ``model``, in module order (first layer first)."""
    return [m for m in model.modules() if isinstance(m, RankedMultiheadAttention)]


def icl_error_curves(
    predictors: dict[str, Any], task: Any, n_samples: int = EVALUATION_SAMPLES, batch_size: int = EVAL_BATCH
) -> dict[str, dict[str, list[float]]]:
    """In-context regression error against the number of in-context examples, for several predictors.

    Every predictor sees the same held-out samples (the one recipe's stream, `training.evaluation`), so the curves
    are paired.

    Args:
        predictors: name -> callable(batch) -> (B, N) predictions (a trained TaskModel, LeastSquaresBaseline, ...).
        task: a LinearRegressionTask.
        n_samples: held-out samples (>= 2).
        batch_size: samples per forward pass.

    Returns:
        name -> {"examples": [0 .. N-1], "error": [...], "stderr": [...]}: error = E (f - y_i)^2 / d at i examples.
    """
    if not isinstance(task, LinearRegressionTask):
        raise ValueError(f"task must be the icl task, got {getattr(task, 'name', type(task).__name__)!r}")
    n_samples = check_sample_count("n_samples", n_samples)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    accumulators = {name: MeanAccumulator((task.N,)) for name in predictors}
    generator = torch.Generator().manual_seed(POPULATION_SEED)
    done = 0
    with torch.no_grad():
        while done < n_samples:
            m = min(batch_size, n_samples - done)
            raw = task.sample(m, generator)
            for name, predictor in predictors.items():
                device = next(predictor.parameters()).device if isinstance(predictor, torch.nn.Module) else "cpu"
                batch = raw.to(
                    device, model_dtype(predictor) if isinstance(predictor, torch.nn.Module) else torch.float64
                )
                errors = task.error_by_position(predictor(batch).to("cpu", torch.float64), raw.target)  # (m, N)
                accumulators[name].add(errors.numpy())
            done += m
    curves: dict[str, dict[str, list[float]]] = {}
    for name, accumulator in accumulators.items():
        estimates = accumulator.estimates()  # one per position
        curves[name] = {
            "examples": [*range(task.N)],  # ints; list[float] by promotion
            "error": [e.mean for e in estimates],
            "stderr": [e.stderr for e in estimates],
        }
    return curves


def imported_source(path: Path) -> str:
    """One line naming what an imported run was read from (its import.json: format and source file), checked."""
    record = read_json_object(path)
    if not all(isinstance(record.get(k), str) for k in ("format", "source")):
        raise ValueError(f"{path}: field format or source is missing or not text; not an import record")
    return f"{record['format']}: {record['source']}"


def analyze_run(out_dir: Path, samples: int = EVALUATION_SAMPLES) -> dict[str, Any]:
    """Analyse a run directory: its attention layers and its evaluation by the one recipe.

    Args:
        out_dir: a run directory of `experiments.training.loop.train` (or of ``attnrank import``).
        samples: held-out samples of the evaluation (default the recipe's, `training.evaluation`).

    Returns:
        dict with "run" (config summary; "imported_from" for a run of `attnrank import`), "layers" (per layer: sum
        and per-head summaries), the population keys (``population_error``, ``population_stderr``,
        ``population_samples``) and, where they apply, "theorem2" (Theorem 2's bound beside that estimate) and "icl"
        (the error by number of in-context examples, the model's beside two baselines).
    """
    files = RunDirectory(Path(out_dir))
    samples = check_sample_count("samples", samples)
    recorded = files.read_config()
    check_evaluation_memory(recorded, f"{files.config} (N = {recorded.N}, d = {recorded.d})")  # before any sample
    config, task, model = load_trained_model(Path(out_dir))  # float64 for a float64 import, else float32
    report: dict[str, Any] = {
        "run": {
            "out": str(out_dir),
            "task": config.task,
            "model": config.model,
            "d": config.d,
            "N": config.N,
            "rank": config.rank,
            "heads": config.heads,
            "layers": config.layers,
        },
        "layers": [analyze_layer(layer) for layer in attention_layers(model)],
    }
    imported = files.import_record
    if os.path.lexists(imported):
        report["run"]["imported_from"] = imported_source(imported)
    report.update(evaluation_of(config, population_error(model, task, samples)).fields())
    if config.task == "icl":
        predictors = {"model": model, "least_squares": LeastSquaresBaseline(), "averaging": AveragingBaseline()}
        report["icl"] = icl_error_curves(predictors, task, n_samples=samples)
    return report


def records_from_runs(run_dirs: Iterable[Path]) -> list[Evaluation]:
    """The evaluations of analysed run directories (run `attnrank analyze DIR` first): each analysis.json's population
    error and bound record, read by the record's reader (`Evaluation.read`; ValueError naming the file and the field),
    and refused naming the file when the run is not on Theorem 2's task."""
    evaluations = []
    for run_dir in run_dirs:
        files = RunDirectory(Path(run_dir))
        report = files.read_analysis()
        if report is None:
            raise ValueError(f"{files.analysis} not found; run `attnrank analyze {run_dir}` first")
        try:
            found = Evaluation.read(report)
        except ValueError as exc:
            raise ValueError(f"{files.analysis}: {exc}") from None
        if found is None or found.theorem2 is None:
            raise ValueError(
                f"{files.analysis}: no field theorem2: the run is not on Theorem 2's task (nearest, N = 2, "
                "orthonormal keys, 1 layer)"
            )
        evaluations.append(found)
    return evaluations
