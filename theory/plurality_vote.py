"""Monte Carlo error of the rank-1 plurality vote over N tokens, with fresh random heads for every sample.

docs/paper.md section 5 (Conjecture 6 evidence). Each of H heads draws a direction q uniform on S^{d-1} and picks
argmax_j <q, y><q, x_j>; the prediction is the token with the most picks (ties to the lowest index). This is what
constructions/tournament.py computes exactly under hardmax (and, for N = 2 with odd H, what the majority vote
computes), averaged over random constructions because every sample gets its own heads.

Only the projections of the Gaussian direction G (q = G / |G|) on span(x_1, .., x_N, y) matter, and the positive factor
1 / |G|^2 does not change an argmax, so per sample we draw z ~ N(0, I_{N+1}) and set
(<G, x_1>, .., <G, x_N>, <G, y>) = R^T z with [x_1, .., x_N, y] = Q R (QR factorisation, z of dimension
min(d, N + 1)): O(H N^2) work, not O(H d).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from theory.monte_carlo import MonteCarloEstimate, estimate_mean
from theory.sphere import sample_context
from theory.targets import nearest_index
from theory.validation import check_choice, check_dimension, check_generator, check_int, check_sample_count

FloatArray = npt.NDArray[np.float64]


def plurality_vote_errors(
    d: int,
    N: int,
    heads: Sequence[int],
    n_samples: int,
    rng: np.random.Generator,
    keys: str = "orthonormal",
    batch_size: int | None = None,
) -> dict[int, MonteCarloEstimate]:
    """Estimate E||x_winner - f*||^2 of the H-head plurality vote for several H at once (nested heads).

    For each sample the first H heads of one stream of max(heads) fresh heads are used for every H in ``heads``, so
    the estimates are correlated across H (each one is unbiased).

    Args:
        d: token dimension (>= 2).
        N: context length (>= 2; <= d for orthonormal keys).
        heads: head counts H (each >= 1).
        n_samples: number of samples (>= 2).
        rng: source of randomness.
        keys: "orthonormal" (D_N) or "iid".
        batch_size: samples per batch (default keeps about 4e6 projections in memory).

    Returns:
        {H: MonteCarloEstimate of the error}.
    """
    d = check_dimension(d)
    N = check_int("N", N, minimum=2)
    n_samples = check_sample_count("n_samples", n_samples)
    rng = check_generator(rng)
    keys = check_choice("keys", keys, ("orthonormal", "iid"))
    counts_wanted = sorted({check_int("heads", h, minimum=1) for h in heads})
    if not counts_wanted:
        raise ValueError("heads must list at least one head count")
    h_max = counts_wanted[-1]
    if batch_size is None:
        batch_size = max(1, 4_000_000 // (h_max * (N + 1)))
    batch_size = check_int("batch_size", batch_size, minimum=1)
    errors = {h: np.empty(n_samples) for h in counts_wanted}
    done = 0
    while done < n_samples:
        m = min(batch_size, n_samples - done)
        X, y = sample_context(m, N, d, rng, keys=keys)  # (m, N, d), (m, d)
        basis = np.concatenate([X, y[:, None, :]], axis=1)  # (m, N+1, d)
        _, r = np.linalg.qr(np.swapaxes(basis, 1, 2))  # r (m, k, N+1), k = min(d, N+1): basis^T = Q r
        k = r.shape[1]
        target = nearest_index(X, y)  # (m,)
        tally = np.zeros((m, N), dtype=np.int64)
        start = 0
        for h in counts_wanted:
            z = rng.standard_normal((m, h - start, k))  # (m, h', k): G's coordinates in the span's basis
            proj = np.matmul(z, r)  # (m, h', N+1): columns <G, x_1> .. <G, x_N>, <G, y>
            picks = np.argmax(proj[:, :, N : N + 1] * proj[:, :, :N], axis=2)  # (m, h')
            tally += np.stack([np.count_nonzero(picks == j, axis=1) for j in range(N)], axis=1)  # (m, N)
            start = h
            winner = np.argmax(tally, axis=1)  # (m,); ties -> lowest index, as the round robin
            chosen = X[np.arange(m), winner]  # (m, d)
            right = X[np.arange(m), target]  # (m, d)
            errors[h][done : done + m] = np.sum((chosen - right) ** 2, axis=1)
        done += m
    return {h: estimate_mean(errors[h]) for h in counts_wanted}
