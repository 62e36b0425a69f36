"""The reference implementation's training data, drawn bitwise as it draws it (docs/paper.md section 6).

The reference code (NoahAmsel/attention-formers, read for this account, none of it copied) feeds Figure 1's runs from
an iterable dataset under a PyTorch ``DataLoader`` with W = 7 worker processes. What it does, in our words:

- **One sample** is one float32 standard normal (d, N) draw from a CPU ``torch.Generator``, each column divided by
  its Euclidean norm (the N points are the columns); its target is, for each column j, the column i that minimises
  the float32 inner product <x_i, x_j> (the farthest point), computed as ``X^T X`` then an argmin over the first axis.
- **Worker w** seeds its own generator with S + w (S = the run's data seed) every time the loader is iterated, and
  yields batches of ``batch_size`` consecutive samples of that stream.
- **The loader** takes batches from the workers in turn: batch b of an epoch is worker (b mod W)'s batch number
  (b div W). With W = 0 (no workers) the one stream is seeded S.
- **Every epoch** iterates the loader afresh, so every worker is re-seeded and every epoch replays the same first
  ``limit_train_batches`` = 100 batches: a fixed training set of 100 x 256 sequences.

:func:`reference_training_set` returns that set with the points as rows (our token layout): ``X[b, i]`` is the point
``x_i`` (column i of the reference's sample) of sample i of batch b. A consequence worth knowing: two runs whose data
seeds differ by k < W share worker streams (run S's worker w + k is run S + k's worker w), so their training sets
share most of their batches (:func:`shared_batches` counts them; 85 of 100 for data seeds 0 and 1).
"""

from __future__ import annotations

import torch

from theory.validation import check_int, check_seed

REFERENCE_WORKERS = 7
"""DataLoader worker processes of the reference's Figure 1 runs (``num_workers: 7`` in its fig1 config)."""

MAX_SET_FLOATS = 2**32
"""The largest set drawn (floats of the points; the targets double it): 16 GiB, beyond any machine this runs on."""

REFERENCE_BATCHES = 100
"""Batches per epoch of the reference's Figure 1 runs (``limit_train_batches: 100``): the size of its fixed set."""


def reference_stream(d: int, N: int, samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``samples`` samples of one reference worker stream seeded ``seed``, in the reference's layout.

    Returns:
        (X, target): each (samples, d, N) float32; column j of ``target[s]`` is the column of ``X[s]`` farthest from
        column j (argmin of the float32 Gram matrix along its first axis).
    """
    generator = torch.Generator().manual_seed(seed)
    X = torch.empty((samples, d, N), dtype=torch.float32)  # (samples, d, N): points are columns
    target = torch.empty_like(X)
    for s in range(samples):  # one draw per sample, as the reference draws them (a joint draw is another stream)
        gaussian = torch.randn((d, N), generator=generator, dtype=torch.float32)  # (d, N)
        points = gaussian / gaussian.norm(dim=0)  # (d, N) unit columns
        farthest = (points.T @ points).argmin(dim=0)  # (N,): for column j, argmin_i <x_i, x_j>
        X[s], target[s] = points, points[:, farthest]
    return X, target


def _batch_sources(batches: int, workers: int) -> list[tuple[int, int]]:
    """(worker, that worker's batch number) of loader batches 0 .. batches - 1 (W = 0: the one stream, worker 0)."""
    if workers == 0:
        return [(0, b) for b in range(batches)]
    return [(b % workers, b // workers) for b in range(batches)]


def reference_training_set(
    d: int, N: int, batch_size: int, batches: int, seed: int, workers: int = REFERENCE_WORKERS
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed training set the reference replays every epoch, bitwise (module docstring), with points as rows.

    Args:
        d: dimension (>= 2). N: points per sequence (>= 1). batch_size: sequences per batch (>= 1).
        batches: batches in the set (>= 1; the reference's Figure 1 runs: 100).
        seed: the run's data seed S (the reference's ``data.seed``: 0 .. 4 in Figure 1), >= 0; worker w uses S + w.
        workers: the DataLoader's worker processes W (>= 0; the paper's runs: 7; 0 = drawn in the main process).

    Returns:
        (X, target): each (batches, batch_size, N, d) float32; ``X[b, i, j]`` is point j of sample i of batch b, and
        ``target[b, i, j]`` the point of that sample farthest from it.
    """
    d = check_int("d", d, minimum=2)
    N = check_int("N", N, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    batches = check_int("batches", batches, minimum=1)
    workers = check_int("workers", workers, minimum=0, maximum=64)
    seed = check_seed("seed", seed)
    floats = batches * batch_size * N * d
    if floats > MAX_SET_FLOATS:
        raise ValueError(
            f"batches must keep the set within {MAX_SET_FLOATS} floats (batches x batch_size x N x d, held twice: "
            f"points and targets), got {batches} x {batch_size} x {N} x {d} = {floats}"
        )
    sources = _batch_sources(batches, workers)
    streams = {}
    for worker in sorted({w for w, _ in sources}):
        depth = 1 + max(n for w, n in sources if w == worker)  # batches this worker yields
        streams[worker] = reference_stream(d, N, depth * batch_size, seed + worker)
    X = torch.empty((batches, batch_size, N, d), dtype=torch.float32)
    target = torch.empty_like(X)
    for b, (worker, number) in enumerate(sources):
        rows = slice(number * batch_size, (number + 1) * batch_size)
        X[b] = streams[worker][0][rows].transpose(1, 2)  # (batch_size, d, N) -> (batch_size, N, d)
        target[b] = streams[worker][1][rows].transpose(1, 2)
    return X, target


def shared_batches(seed_a: int, seed_b: int, batches: int = REFERENCE_BATCHES, workers: int = REFERENCE_WORKERS) -> int:
    """How many batches of the reference's fixed set for data seed ``seed_a`` also occur in the set for ``seed_b``.

    A batch is named by its stream seed (S + worker) and its position in that stream, so no sample is drawn: two
    batches are equal exactly when both names are (distinct seeds give distinct streams).
    """
    for name, value in (("seed_a", seed_a), ("seed_b", seed_b)):
        check_int(name, value, minimum=0)
    batches = check_int("batches", batches, minimum=1)
    workers = check_int("workers", workers, minimum=0, maximum=64)
    names_a = {(seed_a + w, n) for w, n in _batch_sources(batches, workers)}
    names_b = {(seed_b + w, n) for w, n in _batch_sources(batches, workers)}
    return len(names_a & names_b)
