"""Training tasks: fresh batches drawn from an explicit ``torch.Generator``, their targets, errors and baselines.

Tasks (docs/paper.md sections 1, 4 and 6):

- ``nearest``: keys x_1..x_N (D_N orthonormal or i.i.d. uniform) and a separate uniform query y; the target is
  x_{argmax_i <x_i, y>}. A sequence model sees the tokens (x_1, ..., x_N, y) and answers at the last position.
- ``farthest``: the paper's Figure 1 task in self-attention form: N i.i.d. uniform tokens; token i's target is
  x_{argmin_j <x_i, x_j>}.
- ``biased``: Theorem 3's target (a sum of biased nearest-neighbour functions, N = 2), defined by
  ``theory.biased_target``; this module only wraps it.
- ``icl``: in-context linear regression as in Garg et al. 2022: x_i ~ N(0, I_d), w ~ N(0, I_d), y_i = <w, x_i>; the
  tokens interleave x_1, (y_1, 0, ..., 0), x_2, ...; a causal model predicts y_i at x_i's position from the prefix.
  With a curriculum (`experiments.config.Curriculum`) training step s draws from :meth:`Task.at_step` (s): fewer
  active dimensions and pairs in early stages; evaluation always draws the full task (:meth:`Task.sample`).

A task draws a batch (:meth:`Task.sample`) on its generator's device in a given precision, the targets always decided
in float64 on the drawn points (the gram and score matrices, a few kFLOP per sample), so an argmin/argmax picks
exactly the point the model's own inputs make nearest or farthest. Which generator, device and precision a run's
batches are drawn with is its sampler's (`experiments.samplers`): the CPU sampler draws in float64 on the CPU (the
same generator state gives the same batch on every machine) and hands the batch out as float32; the device sampler
draws in float32 on the run's device from a generator there (the same distributions, another stream).

Error conventions (the per-sample value whose batch mean is the training loss):

- nearest / biased: ||f - f*||^2 summed over coordinates (docs/paper.md section 1; the zero map scores 1);
- farthest: the same, averaged over the N tokens of a sample;
- icl: (f - y_i)^2 / d averaged over the N positions (Garg et al.'s normalisation: the zero predictor scores about 1).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from experiments.config import TASKS, Curriculum
from theory.biased_target import biased_target, sample_biased_context
from theory.monte_carlo import MonteCarloEstimate, estimate_mean
from theory.validation import check_choice, check_dimension, check_int, check_sample_count

KEY_KINDS = ("orthonormal", "iid")
"""Key distributions of the nearest-neighbour task."""


SAMPLE_DTYPES = (torch.float64, torch.float32)
"""The precisions a task draws in (:meth:`Task.sample`)."""


def check_torch_generator(generator: Any, *, name: str = "generator") -> torch.Generator:
    """Task randomness always comes from an explicit ``torch.Generator`` (on the CPU, or where a sampler keeps it)."""
    if not isinstance(generator, torch.Generator):
        raise ValueError(
            f"{name} must be a torch.Generator (e.g. torch.Generator().manual_seed(0)), got {type(generator).__name__}"
        )
    return generator


def check_sample_dtype(dtype: Any) -> torch.dtype:
    """One of `SAMPLE_DTYPES` (ValueError naming ``dtype`` otherwise)."""
    if dtype not in SAMPLE_DTYPES:
        raise ValueError(f"dtype must be torch.float64 or torch.float32, got {dtype!r}")
    return dtype  # type: ignore[no-any-return]


def sample_sphere(
    shape: tuple[int, ...], d: int, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Uniform points on S^{d-1}: normalised standard Gaussians, drawn in ``dtype`` on the generator's device.

    Args:
        shape: leading batch shape.
        d: dimension (>= 2).
        generator: the source of randomness.
        dtype: float64 (the CPU sampler's) or float32 (the device sampler's).

    Returns:
        (*shape, d) tensor of unit rows.
    """
    gaussian = torch.randn((*shape, d), generator=generator, dtype=dtype, device=generator.device)  # (*shape, d)
    return gaussian / torch.linalg.vector_norm(gaussian, dim=-1, keepdim=True)


def sample_orthonormal_keys(
    n: int, N: int, d: int, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """D_N keys: per sample, the first N columns of a Haar-random orthogonal matrix, stored as rows.

    QR of a d x N Gaussian with the signs of diag(R) moved into Q is Haar on the Stiefel manifold.

    Args:
        n: samples; N: keys per sample (1 <= N <= d); d: dimension; generator: the source of randomness;
        dtype: the precision drawn in (on the generator's device).

    Returns:
        (n, N, d) tensor; the N rows of each sample are orthonormal.
    """
    gaussian = torch.randn((n, d, N), generator=generator, dtype=dtype, device=generator.device)  # (n, d, N)
    q, r = torch.linalg.qr(gaussian)  # q (n, d, N), r (n, N, N)
    signs = torch.where(torch.diagonal(r, dim1=1, dim2=2) < 0, -1.0, 1.0).to(dtype)  # (n, N)
    return (q * signs[:, None, :]).transpose(1, 2).contiguous()  # (n, N, d)


def nearest_neighbor(X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x_{argmax_i <x_i, y>} for keys X (n, N, d) and queries y (n, d), decided in float64 (exact for float32
    points); returns (n, d), rows of X."""
    scores = torch.einsum("nid,nd->ni", X.double(), y.double())  # (n, N)
    index = torch.argmax(scores, dim=1)  # (n,)
    return X[torch.arange(X.shape[0], device=X.device), index]  # (n, d)


def farthest_point(X: torch.Tensor) -> torch.Tensor:
    """Token i's target x_{argmin_j <x_i, x_j>} for tokens X (n, N, d), decided in float64 (exact for float32
    points); returns (n, N, d), rows of X."""
    gram = torch.einsum("nid,njd->nij", X.double(), X.double())  # (n, N, N); i query token, j candidate
    index = torch.argmin(gram, dim=2)  # (n, N)
    return X[torch.arange(X.shape[0], device=X.device)[:, None], index]  # (n, N, d)


@dataclass(frozen=True)
class Batch:
    """One batch of a task.

    Attributes:
        tokens: (B, T, d) input sequence for a sequence model (the encoder).
        target: (B, d) for query tasks, (B, N, d) for farthest, (B, N) for icl.
        context: (B, N, d) keys (query tasks), tokens (farthest) or the x_i (icl).
        query: (B, d) query for the query tasks, else None.
        aux: task-specific extra tensor (icl: the regression vectors w (B, d)), else None.
    """

    tokens: torch.Tensor
    target: torch.Tensor
    context: torch.Tensor
    query: torch.Tensor | None = None
    aux: torch.Tensor | None = None

    def to(self, device: torch.device | str, dtype: torch.dtype = torch.float32) -> Batch:
        """The same batch on ``device`` in ``dtype``."""

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device=device, dtype=dtype)

        return Batch(
            tokens=move(self.tokens),  # type: ignore[arg-type]
            target=move(self.target),  # type: ignore[arg-type]
            context=move(self.context),  # type: ignore[arg-type]
            query=move(self.query),
            aux=move(self.aux),
        )


class Predictor(Protocol):
    """Anything that maps a batch to predictions shaped like ``batch.target`` (models and baselines alike)."""

    def __call__(self, batch: Batch) -> torch.Tensor: ...


class Task:
    """Base class of the tasks: sampling, read-out of a sequence model's outputs, and the per-sample error.

    Attributes:
        name: task name (one of TASKS).
        d: token dimension.
        N: context length (icl: number of (x, y) pairs).
        causal: whether a sequence model must be causal.
        query_task: whether the task has a separate query (nearest, biased).
    """

    name = ""
    causal = False
    query_task = False

    def __init__(self, d: int, N: int) -> None:
        self.d = check_dimension(d)
        self.N = check_int("N", N, minimum=1)

    @property
    def sequence_length(self) -> int:
        """Length T of the token sequence fed to a sequence model."""
        return self.N + 1 if self.query_task else self.N

    def sample(self, batch_size: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Batch:
        """Draw a fresh batch in ``dtype`` (float64 or float32) on the generator's device (module docstring)."""
        raise NotImplementedError

    def at_step(self, step: int) -> Task:
        """The task whose batches training step ``step`` (0-based) draws: this task, unless a curriculum is on.

        Its ``error`` and ``readout`` are this task's, so a model and its loss need not know the stage.
        """
        check_int("step", step, minimum=0)
        return self

    @property
    def full_task_from(self) -> int:
        """The first training step whose batches are this task's own (0 without a curriculum); the epochs that end
        before it were trained on an easier task."""
        return 0

    def readout(self, outputs: torch.Tensor) -> torch.Tensor:
        """Select the predictions from a sequence model's outputs (B, T, d_out) (or a pack's (K, B, T, d_out))."""
        if self.query_task:
            return outputs[..., -1, :]  # (B, d_out); the answer sits at the query token
        return outputs  # (B, N, d_out)

    def error(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-sample error (B,): squared distance summed over coordinates, averaged over output positions."""
        squared = (prediction - target).pow(2).sum(dim=-1)  # (B,) or (B, N)
        return squared if squared.dim() == 1 else squared.mean(dim=1)

    def describe(self) -> dict[str, Any]:
        """The task's parameters (for logs and results)."""
        return {"task": self.name, "d": self.d, "N": self.N}


class NearestTask(Task):
    """Nearest neighbour with a separate uniform query; keys D_N orthonormal or i.i.d. uniform."""

    name = "nearest"
    query_task = True

    def __init__(self, d: int, N: int, keys: str = "orthonormal") -> None:
        super().__init__(d, N)
        self.keys = check_choice("keys", keys, KEY_KINDS)
        if self.keys == "orthonormal" and self.N > self.d:
            raise ValueError(f"N must be <= d = {self.d} for orthonormal keys (D_N), got {self.N}")

    def sample(self, batch_size: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Batch:
        batch_size = check_int("batch_size", batch_size, minimum=1)
        generator, dtype = check_torch_generator(generator), check_sample_dtype(dtype)
        if self.keys == "orthonormal":
            X = sample_orthonormal_keys(batch_size, self.N, self.d, generator, dtype)  # (B, N, d)
        else:
            X = sample_sphere((batch_size, self.N), self.d, generator, dtype)  # (B, N, d)
        y = sample_sphere((batch_size,), self.d, generator, dtype)  # (B, d)
        tokens = torch.cat([X, y[:, None, :]], dim=1)  # (B, N + 1, d)
        return Batch(tokens=tokens, target=nearest_neighbor(X, y), context=X, query=y)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "keys": self.keys}


class FarthestTask(Task):
    """The paper's Figure 1 task: N i.i.d. uniform tokens, each token's target is the token least aligned with it."""

    name = "farthest"

    def sample(self, batch_size: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Batch:
        batch_size = check_int("batch_size", batch_size, minimum=1)
        generator, dtype = check_torch_generator(generator), check_sample_dtype(dtype)
        X = sample_sphere((batch_size, self.N), self.d, generator, dtype)  # (B, N, d)
        return self.batch_of(X, farthest_point(X))

    def batch_of(self, X: torch.Tensor, target: torch.Tensor) -> Batch:
        """The batch of points X (B, N, d) and their targets (B, N, d) drawn elsewhere (the reference sampler's)."""
        return Batch(tokens=X, target=target, context=X)


class BiasedTask(Task):
    """Theorem 3's biased nearest-neighbour target, wrapping ``theory.biased_target`` (N = 2, separate query).

    The theory module supplies the sampler (keys D_2 or i.i.d., Gaussian query y ~ N(0, I_d)) and the target
    F = sum_j f_{b_j} with its default bias grid (unnormalised, so ||F|| is of order d^2); both are numpy functions,
    driven by a numpy Generator seeded from the task's torch.Generator, so the batch is a function of that generator.
    """

    name = "biased"
    query_task = True

    def __init__(self, d: int, N: int = 2, keys: str = "orthonormal") -> None:
        super().__init__(d, N)
        self.keys = check_choice("keys", keys, KEY_KINDS)
        if self.N != 2:
            raise ValueError(f"N must be 2 for the biased nearest-neighbour task, got {self.N}")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "keys": self.keys}

    def sample(self, batch_size: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Batch:
        batch_size = check_int("batch_size", batch_size, minimum=1)
        generator = check_torch_generator(generator)
        if dtype != torch.float64 or generator.device.type != "cpu":
            raise ValueError("the biased task draws in float64 on the CPU only (its target is computed by numpy)")
        seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
        rng = np.random.default_rng(seed)
        X, y = sample_biased_context(batch_size, self.d, rng, keys=self.keys)  # (B, 2, d), (B, d)
        target = biased_target(X, y)  # (B, d)
        X_t = torch.as_tensor(np.asarray(X), dtype=torch.float64)
        y_t = torch.as_tensor(np.asarray(y), dtype=torch.float64)
        tokens = torch.cat([X_t, y_t[:, None, :]], dim=1)  # (B, 3, d)
        return Batch(
            tokens=tokens, target=torch.as_tensor(np.asarray(target), dtype=torch.float64), context=X_t, query=y_t
        )


class LinearRegressionTask(Task):
    """In-context linear regression (Garg et al. 2022): N pairs (x_i, y_i = <w, x_i>) interleaved, causal model.

    Tokens: position 2i holds x_i, position 2i + 1 holds (y_i, 0, ..., 0). The prediction of y_i is read at position
    2i (the model has seen x_1, y_1, ..., x_{i-1}, y_{i-1}, x_i), from the first output coordinate.

    Args:
        d: token dimension.  N: pairs per sequence.
        active_dims: coordinates 0 .. active_dims - 1 of x_i and w are drawn, the others are 0 (Garg et al.'s
            truncated dimensions; default d). y_i = <w, x_i> then has variance active_dims, and the error is still
            divided by d, as in Garg et al.'s code.
        curriculum: the training curriculum (its d and N must be this task's), or None; only :meth:`at_step` uses it.
    """

    name = "icl"
    causal = True

    def __init__(self, d: int, N: int, active_dims: int | None = None, curriculum: Curriculum | None = None) -> None:
        super().__init__(d, N)
        self.active_dims = self.d if active_dims is None else check_int("active_dims", active_dims, minimum=1)
        if self.active_dims > self.d:
            raise ValueError(f"active_dims must be an integer in [1, {self.d}] (d), got {self.active_dims}")
        if curriculum is not None:
            if not isinstance(curriculum, Curriculum):
                raise ValueError(f"curriculum must be a Curriculum or None, got {type(curriculum).__name__}")
            if (curriculum.d, curriculum.N) != (self.d, self.N):
                raise ValueError(
                    f"curriculum must end at this task's d = {self.d} and N = {self.N}, got d = {curriculum.d} and "
                    f"N = {curriculum.N}"
                )
            if self.active_dims != self.d:
                raise ValueError("a curriculum needs the full task (active_dims = d); its stages set their own")
        self.curriculum = curriculum
        self._stages: dict[tuple[int, int], LinearRegressionTask] = {}

    @property
    def sequence_length(self) -> int:
        return 2 * self.N

    def at_step(self, step: int) -> Task:
        """The stage of the curriculum that step ``step`` trains on (this task itself from ``full_task_from`` on).

        Returns:
            a LinearRegressionTask of the same d with the stage's pairs and active dimensions (cached per stage).
        """
        step = check_int("step", step, minimum=0)
        if self.curriculum is None or step >= self.curriculum.end_step:
            return self
        key = (self.curriculum.dims_at(step), self.curriculum.points_at(step))
        if key not in self._stages:
            self._stages[key] = LinearRegressionTask(self.d, key[1], active_dims=key[0])
        return self._stages[key]

    @property
    def full_task_from(self) -> int:
        return 0 if self.curriculum is None else self.curriculum.end_step

    def sample(self, batch_size: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Batch:
        batch_size = check_int("batch_size", batch_size, minimum=1)
        generator, dtype = check_torch_generator(generator), check_sample_dtype(dtype)
        where = generator.device
        X = torch.randn((batch_size, self.N, self.d), generator=generator, dtype=dtype, device=where)  # (B, N, d)
        w = torch.randn((batch_size, self.d), generator=generator, dtype=dtype, device=where)  # (B, d)
        if self.active_dims < self.d:  # truncated dimensions (the full task draws exactly as before: same stream)
            X[:, :, self.active_dims :] = 0.0
            w[:, self.active_dims :] = 0.0
        y = torch.einsum("bnd,bd->bn", X, w)  # (B, N), in the drawn precision (no decision rests on it)
        y_tokens = torch.zeros_like(X)  # (B, N, d)
        y_tokens[:, :, 0] = y
        tokens = torch.stack([X, y_tokens], dim=2).reshape(batch_size, 2 * self.N, self.d)  # (B, 2N, d) interleaved
        return Batch(tokens=tokens, target=y, context=X, aux=w)

    def readout(self, outputs: torch.Tensor) -> torch.Tensor:
        return outputs[..., 0::2, 0]  # (B, N); first coordinate at the x_i positions

    def error_by_position(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(B, N) squared error / d at each number of in-context examples 0 .. N-1."""
        return (prediction - target).pow(2) / self.d

    def error(self, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.error_by_position(prediction, target).mean(dim=1)  # (B,)

    def describe(self) -> dict[str, Any]:
        extra: dict[str, Any] = {} if self.active_dims == self.d else {"active_dims": self.active_dims}
        if self.curriculum is not None:
            extra["curriculum"] = dataclasses.asdict(self.curriculum)
        return {**super().describe(), **extra}


class LeastSquaresBaseline:
    """Predict y_i by the minimum-norm least-squares fit to the previous pairs (0 before any example)."""

    def __call__(self, batch: Batch) -> torch.Tensor:
        X = batch.context.to(torch.float64)  # (B, N, d)
        y = batch.target.to(torch.float64)  # (B, N)
        B, N, _ = X.shape
        predictions = torch.zeros((B, N), dtype=torch.float64)
        for i in range(1, N):
            w_hat = torch.linalg.pinv(X[:, :i, :]) @ y[:, :i, None]  # (B, d, 1); minimum-norm solution
            predictions[:, i] = torch.einsum("bd,bd->b", X[:, i, :], w_hat[:, :, 0])  # (B,)
        return predictions.to(batch.target.dtype)


class AveragingBaseline:
    """Garg et al.'s averaging estimator: w_hat = mean_j y_j x_j over the previous pairs, predict <w_hat, x_i>."""

    def __call__(self, batch: Batch) -> torch.Tensor:
        X = batch.context.to(torch.float64)  # (B, N, d)
        y = batch.target.to(torch.float64)  # (B, N)
        products = X * y[:, :, None]  # (B, N, d): y_j x_j
        prefix = torch.cumsum(products, dim=1)  # (B, N, d): sum over j <= i
        counts = torch.arange(1, X.shape[1] + 1, dtype=torch.float64)[None, :, None]  # (1, N, 1)
        w_hat = torch.zeros_like(X)
        w_hat[:, 1:] = prefix[:, :-1] / counts[:, :-1]  # (B, N, d): mean over j < i
        return torch.einsum("bnd,bnd->bn", X, w_hat).to(batch.target.dtype)  # (B, N)


class ZeroBaseline:
    """Predict zeros shaped like the target (error 1 for unit-norm targets, about 1 for icl)."""

    def __call__(self, batch: Batch) -> torch.Tensor:
        return torch.zeros_like(batch.target)


def estimate_task_error(
    predictor: Predictor,
    task: Task,
    n_samples: int,
    generator: torch.Generator,
    batch_size: int = 4096,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> MonteCarloEstimate:
    """Monte Carlo estimate (mean, standard error) of the task error of ``predictor`` on fresh samples.

    Args:
        predictor: maps a Batch to predictions shaped like its target (a TaskModel or a baseline).
        task: the task.
        n_samples: number of independent samples (>= 2).
        generator: CPU torch.Generator driving the sampler.
        batch_size: samples per forward pass (>= 1).
        device: where the predictor runs.
        dtype: dtype the batch is cast to.

    Returns:
        MonteCarloEstimate of E[per-sample error] (see the module docstring for the error of each task).
    """
    n_samples = check_sample_count("n_samples", n_samples)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    generator = check_torch_generator(generator)
    values = []
    with torch.no_grad():
        done = 0
        while done < n_samples:
            m = min(batch_size, n_samples - done)
            batch = task.sample(m, generator).to(device, dtype)
            prediction = predictor(batch)
            values.append(task.error(prediction.to(torch.float64), batch.target.to(torch.float64)).cpu())
            done += m
    return estimate_mean(torch.cat(values).numpy())


def make_task(name: str, d: int, N: int, keys: str = "orthonormal", curriculum: Curriculum | None = None) -> Task:
    """Build a task by name.

    Args:
        name: one of TASKS.
        d: token dimension (>= 2).
        N: context length (icl: number of pairs; biased: 2).
        keys: key distribution of ``nearest`` ("orthonormal" = D_N, "iid"); ignored by the other tasks.
        curriculum: icl only: the training curriculum (`TrainConfig.curriculum`), or None.

    Returns:
        the task object.
    """
    name = check_choice("task", name, TASKS)
    if curriculum is not None and name != "icl":
        raise ValueError(f"curriculum must be None unless task is 'icl', got task {name!r}")
    if name == "nearest":
        return NearestTask(d, N, keys)
    if name == "farthest":
        return FarthestTask(d, N)
    if name == "biased":
        return BiasedTask(d, N, keys)
    return LinearRegressionTask(d, N, curriculum=curriculum)
