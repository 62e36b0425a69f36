"""The explicit softmax core equals scaled_dot_product_attention in float64 (outputs and gradients, with and
without the causal mask), and the grouped dispatch picks it only on a CPU for heads of dimension >= 2."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from experiments.models import attention_cores
from experiments.models.attention_cores import explicit_attention, grouped_attention

TOL = 1e-12


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("r", [1, 3])
def test_explicit_core_equals_sdpa(causal: bool, r: int) -> None:
    gen = torch.Generator().manual_seed(r + 2 * causal)
    q, k, v = (3 * torch.randn(2, 4, 6, r, dtype=torch.float64, generator=gen) for _ in range(3))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    ours = explicit_attention(q, k, v, 0.7, causal)
    reference = F.scaled_dot_product_attention(q, k, v, scale=0.7, is_causal=causal)
    torch.testing.assert_close(ours, reference, rtol=0, atol=TOL)
    probe = torch.randn(ours.shape, dtype=torch.float64, generator=gen)
    grads = torch.autograd.grad(ours, (q, k, v), probe)
    reference_grads = torch.autograd.grad(reference, (q, k, v), probe)
    for g, ref in zip(grads, reference_grads, strict=True):
        torch.testing.assert_close(g, ref, rtol=0, atol=TOL)


@pytest.mark.parametrize(("r", "explicit"), [(1, False), (2, True), (64, True)])
def test_dispatch_on_cpu(r: int, explicit: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[bool] = []

    def spy(*args: object) -> torch.Tensor:
        called.append(True)
        return explicit_attention(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(attention_cores, "explicit_attention", spy)
    q = torch.randn(1, 2, 3, r)
    grouped_attention(q, q, q, 1.0, False)
    assert bool(called) is explicit
