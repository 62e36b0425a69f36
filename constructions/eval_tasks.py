"""Tasks that `attnrank eval` can score a weight file on: name -> (sampler, target), numpy float64.

Adding a task is one entry in `EVAL_TASKS`: an `EvalTask` whose ``sampler(n, rng, options)`` returns (X (n, N, d),
y (n, d)) and whose ``target(X, y, options)`` returns (n, d). ``options`` is a `TaskOptions` carrying d, N, the key
distribution and the weight file's metadata (for task parameters a construction stores there, e.g. biases).
``fixed_N`` restricts the context length a task accepts (None = any N >= 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from theory.biased_target import BiasGrid, bias_grid, biased_target, sample_biased_context
from theory.sphere import KEY_KINDS, sample_context
from theory.targets import nearest_neighbor
from theory.validation import check_choice, check_dimension, check_int

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TaskOptions:
    """What a task's sampler and target may depend on.

    Attributes:
        d: token dimension.
        N: context length.
        keys: key distribution, "orthonormal" (D_N) or "iid".
        metadata: the evaluated weight file's metadata (read-only use).
    """

    d: int
    N: int
    keys: str = "orthonormal"
    metadata: Mapping[str, Any] = field(default_factory=dict)


Sampler = Callable[[int, np.random.Generator, TaskOptions], tuple[FloatArray, FloatArray]]
Target = Callable[[FloatArray, FloatArray, TaskOptions], FloatArray]


@dataclass(frozen=True)
class EvalTask:
    """One evaluation task.

    Attributes:
        sampler: (n, rng, options) -> (X (n, N, d), y (n, d)).
        target: (X, y, options) -> (n, d).
        description: one line for --help.
        fixed_N: the only context length the task accepts, or None.
    """

    sampler: Sampler
    target: Target
    description: str
    fixed_N: int | None = None


def context_sampler(n: int, rng: np.random.Generator, options: TaskOptions) -> tuple[FloatArray, FloatArray]:
    """Keys from options.keys (D_N or i.i.d. uniform) and an independent uniform query."""
    return sample_context(n, options.N, options.d, rng, keys=options.keys)


def nearest_target(X: FloatArray, y: FloatArray, options: TaskOptions) -> FloatArray:
    """f*(X, y) = x_{argmax_i <x_i, y>}."""
    return nearest_neighbor(X, y)


def _biased_grid(options: TaskOptions) -> BiasGrid:
    """Theorem 3's bias grid from the weight file's metadata (bias_m, bias_delta), else the default for d."""
    m, delta = options.metadata.get("bias_m"), options.metadata.get("bias_delta")
    return bias_grid(options.d, m=None if m is None else int(m), delta=None if delta is None else float(delta))


def biased_sampler(n: int, rng: np.random.Generator, options: TaskOptions) -> tuple[FloatArray, FloatArray]:
    """Two keys (options.keys) and a Gaussian query y ~ N(0, I_d) (theory.biased_target)."""
    return sample_biased_context(n, options.d, rng, keys=options.keys)


def biased_target_of(X: FloatArray, y: FloatArray, options: TaskOptions) -> FloatArray:
    """Theorem 3's unnormalised sum of biased nearest neighbours over the file's bias grid."""
    return biased_target(X, y, _biased_grid(options))


EVAL_TASKS: dict[str, EvalTask] = {
    "biased": EvalTask(
        sampler=biased_sampler,
        target=biased_target_of,
        description="sum of 2 d^2 + 1 biased nearest neighbours, Gaussian query (docs/paper.md section 4)",
        fixed_N=2,
    ),
    "nearest": EvalTask(
        sampler=context_sampler,
        target=nearest_target,
        description="nearest neighbour x_{argmax <x_i, y>} (docs/paper.md section 1)",
    ),
}
"""The registry used by `attnrank eval --task NAME`."""


def get_task(name: str) -> EvalTask:
    """Look a task up by name (ValueError naming the known tasks otherwise)."""
    return EVAL_TASKS[check_choice("task", name, tuple(EVAL_TASKS))]


def task_options(name: str, d: int, N: int, keys: str, metadata: Mapping[str, Any] | None = None) -> TaskOptions:
    """Validated options for task ``name``: d >= 2, N >= 1 (the task's fixed N if it has one), N <= d for D_N keys."""
    task = get_task(name)
    d = check_dimension(d)
    N = check_int("N", N, minimum=1)
    keys = check_choice("keys", keys, KEY_KINDS)
    if task.fixed_N is not None and N != task.fixed_N:
        raise ValueError(f"task {name!r} needs N = {task.fixed_N}, got N = {N}")
    if keys == "orthonormal" and N > d:
        raise ValueError(f"orthonormal keys need N <= d, got N = {N} > d = {d} (use --keys iid)")
    return TaskOptions(d=d, N=N, keys=keys, metadata=dict(metadata or {}))
