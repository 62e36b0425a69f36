"""One-layer theory models with H heads of rank r: the trained cells of Theorems 2 and 3 at reachable sizes.

The tightness preset (`experiments.studies.tightness`, Theorem 2 on D_2) and the biased crossing study
(`experiments.analysis.biased_crossing`, Theorem 3) train the same model at the same learning rate and differ only in
the task, the score temperature and how often they log and checkpoint; `head_count_run` is that shared model.
"""

from __future__ import annotations

import math

from experiments.config import TrainConfig


def head_count_lr(d: int, H: int) -> float:
    """AdamW's learning rate for H heads at dimension d: min(0.01, 0.25 / sqrt(H d)).

    The learning rate falls with H because Adam moves every entry of every V_h by about lr per step, coherently across
    heads at the start, so the sum of the H value maps moves by about H lr: at lr 0.01, d = 32, r = 1, H = 1024 the
    loss jumped to 17 at step 100 and was still 0.69 at step 700. A quarter of an entry's initial scale 1 / sqrt(H d)
    keeps it stable (d = 32, r = 8, H = 1024, 400 steps: 0.38 with temperature 4 against 0.50 at temperature 1).
    """
    return min(0.01, 0.25 / math.sqrt(H * d))


def head_count_run(
    *,
    task: str,
    d: int,
    r: int,
    H: int,
    temperature: float,
    seed: int,
    steps: int,
    batch_size: int,
    log_every: int,
    checkpoint_every: int,
) -> TrainConfig:
    """A one-layer rank-r theory model with H heads (width H r / d; H r must be a multiple of d) and full value maps,
    on ``task`` with N = 2 orthonormal (D_2) keys, softmax at score ``temperature``, AdamW at `head_count_lr`, on the
    CPU."""
    if (H * r) % d:
        raise ValueError(f"H r must be a multiple of d = {d} (width H r / d), got H = {H}, r = {r}")
    return TrainConfig(
        task=task,
        N=2,
        keys="orthonormal",
        model="theory",
        layers=1,
        value="full",
        d=d,
        rank=r,
        width=H * r // d,
        temperature=temperature,
        lr=head_count_lr(d, H),
        steps=steps,
        batch_size=batch_size,
        log_every=log_every,
        checkpoint_every=checkpoint_every,
        device="cpu",
        seed=seed,
    )
