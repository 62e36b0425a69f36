"""The encoder's ReLU feed-forward block, W_2 relu(W_1 h + b_1) + b_2, as one autograd function.

Why: at the paper's size (d = 64, FFN 2048, batch 256 x 16 tokens) the block's hidden activations are (4096, 2048)
float32 tensors, 32 MiB each, and after the six matrix products the passes over them were the largest cost of a CPU
training step (issue 51's profile, under glibc's malloc). Written as ``F.linear``, ``F.relu``, ``F.linear``,
autograd makes three such tensors per layer and step: the first product's output, the ReLU's output, and in backward
``threshold_backward``'s gradient beside the gradient the second product's backward made. This function makes one
of each pass's tensors fewer:

- forward: the ReLU is applied in place to the first product's output (legal: a product's backward needs its
  operands, never its output), so there is one hidden tensor, not two. (``F.relu(inplace=True)`` on
  ``F.linear``'s output does the same, but that output is a view of the product, and an in-place operation on a view
  makes autograd rebuild the view's gradient through full-size copies: slower than no change at all.)
- backward: the ReLU's mask is applied in place to the gradient the second product's backward has just made (this
  function owns that tensor), with ``threshold_backward``'s own out= form, so no third tensor is written.

Everything else is exactly what autograd runs for the composition, operand for operand and layout for layout: the
forward products are those of ``F.linear`` on the flattened tokens (``addmm`` with the bias, ``mm`` without; the
packed form's ``baddbmm`` / ``bmm``), the input and weight gradients are computed as torch's ``mm_mat1_backward`` /
``mm_mat2_backward`` (and the ``bmm`` derivatives) compute them, and the bias gradients are the same ``sum`` over the
token axis that autograd's broadcast reduction (``sum_to``) makes. Matrix products and reductions therefore run the
same kernels on the same operands, and the outputs and every gradient are bitwise those of the composition
(tests/experiments/models/test_feed_forward.py checks it, float32 and float64, with and without biases, both forms).

What is not removed, because removing it would change the rounding: ``addmm`` copies the broadcast bias into its
(M, F) output before the product accumulates onto it, and the first bias's gradient is a separate pass summing the
(M, F) gradient over tokens. Folding the bias into the product (a column of ones) would remove both, but it sums in
another order, so the losses would drift from those of runs made before it, and runs are extended bitwise.

What it gains is small, because the passes it saves are small beside the products: measured on a loaded 2-core AMD
EPYC under jemalloc (one thread, forward + backward of the block, thread CPU time), 0.98x the composition's time at
(4096 tokens, D 64, F 2048) and 0.93x at (4096, 16, 256), but 1.06x at (1024, 16, 256) and 1.4x at (32, 8, 16),
where the function's Python-level backward (about 0.1 ms a call) costs more than the passes it saves. So blocks whose
hidden activations are smaller than `FUNCTION_MIN_HIDDEN_BYTES` keep the composition; either way the numbers are
the same.

A pack's block (the (K, M, D) form, K runs of `experiments.models.run_axis`) runs a few runs at a time on a CPU
(`FFN_CHUNK_BYTES`): the hidden activations are the one large tensor of a small run ((M, F) floats: 1 MiB at M =
1024, F = 256), and computed for all K runs at once they leave the processor's caches, so the products and the ReLU
(forward and backward) then run at memory speed. Measured on a 2-core AMD EPYC (512 KiB L2 per core, one thread),
the block's forward + backward for K = 10 took 43 ms in one piece against 19 ms in pieces of two runs and 17 ms run
by run. On a GPU the block is one batched product for all K runs (chunks would only add kernel launches). Each
chunk goes through this function like any block, so the chunks' numbers are those of the block computed run by run
in the batched form.

The composition is also used instead of the function under autocast (the function's backward would meet bfloat16
activations with float32 weights), while torch.compile traces (inductor fuses the block itself), and for
non-contiguous weights (the layouts above assume contiguous ones). Not differentiable twice.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

FFN_CHUNK_BYTES = 2 * 2**20
"""Largest hidden activation of a pack's block computed in one piece on a CPU (module docstring)."""
FUNCTION_MIN_HIDDEN_BYTES = 4 * 2**20
"""Smallest (.., M, F) hidden activations that go through the function rather than the composition (module docstring):
the paper's d = 64 cell (32 MiB) does, the cpu-scale cells (d = 16, FFN 256, 128 x 8 tokens: 1 MiB) do not."""


def _product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x W^T + b as ``F.linear`` computes it on 2-D tokens, or per run for the packed form.

    Args:
        x: (M, n_in) or (K, M, n_in); weight: (n_out, n_in) or (K, n_out, n_in); bias: (n_out,), (K, n_out) or None.

    Returns:
        (M, n_out) or (K, M, n_out).
    """
    if x.dim() == 2:
        return torch.mm(x, weight.t()) if bias is None else torch.addmm(bias, x, weight.t())  # (M, n_out)
    if bias is None:
        return torch.bmm(x, weight.transpose(1, 2))  # (K, M, n_out)
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))  # (K, M, n_out)


def _operand_gradients(
    grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, need: tuple[bool, bool, bool]
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """The gradients of x, weight and bias in ``_product(x, weight, bias)`` for the output gradient ``grad``,
    computed by the operations autograd uses (see the module docstring); None where ``need`` says not needed.

    The 2-D form mirrors torch's ``mm_mat1_backward`` / ``mm_mat2_backward`` (the product's second operand is
    ``weight.t()``): an operand stored column-major gets its gradient as the transpose of a product, so that both
    take the same branch for the same strides.
    """
    need_x, need_weight, need_bias = need
    grad_x = grad_weight = grad_bias = None
    if x.dim() == 2:
        weight_t = weight.t()  # (n_in, n_out): the product's second operand
        if need_x:
            if x.stride(0) == 1 and x.stride(1) == x.shape[0]:  # x column-major: mm_mat1_backward's first branch
                grad_x = weight_t.mm(grad.t()).t()  # (M, n_in)
            else:
                grad_x = grad.mm(weight_t.t())  # (M, n_in)
        if need_weight:
            if weight_t.stride(0) == 1 and weight_t.stride(1) == weight_t.shape[0]:  # always so for a contiguous W
                grad_weight = grad.t().mm(x)  # (n_out, n_in): mm_mat2_backward's grad.t().mm(x).t(), then t()'s
            else:
                grad_weight = x.t().mm(grad).t()  # (n_out, n_in)
        if need_bias:
            grad_bias = grad.sum([0], keepdim=True).view(grad.shape[1])  # (n_out,): sum_to over the token axis
        return grad_x, grad_weight, grad_bias
    if need_x:
        grad_x = grad.bmm(weight)  # (K, M, n_in): bmm's first-operand derivative, weight = (W^T)^T
    if need_weight:
        grad_weight = x.transpose(1, 2).bmm(grad).transpose(1, 2)  # (K, n_out, n_in), a transposed view as autograd's
    if need_bias:
        grad_bias = grad.sum([1], keepdim=True).squeeze(1)  # (K, n_out): sum_to over the token axis, then unsqueeze's
    return grad_x, grad_weight, grad_bias


class _ReluFeedForward(torch.autograd.Function):
    """W_2 relu(W_1 x + b_1) + b_2 with one hidden tensor in forward and one in backward (module docstring)."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        w1: torch.Tensor,
        b1: torch.Tensor | None,
        w2: torch.Tensor,
        b2: torch.Tensor | None,
    ) -> torch.Tensor:
        hidden = _product(x, w1, b1).relu_()  # (.., M, F): in place on the product's own output
        ctx.save_for_backward(x, w1, w2, hidden)
        return _product(hidden, w2, b2)  # (.., M, D)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w1, w2, hidden = ctx.saved_tensors
        need_x, need_w1, need_b1, need_w2, need_b2 = ctx.needs_input_grad  # False for an absent bias
        need_hidden = need_x or need_w1 or need_b1
        grad_hidden, grad_w2, grad_b2 = _operand_gradients(grad, hidden, w2, (need_hidden, need_w2, need_b2))
        if grad_hidden is None:
            return None, None, None, grad_w2, grad_b2
        # relu's derivative, threshold_backward(grad, result, 0), written over the gradient it reads: this function
        # made grad_hidden and nothing else holds it.
        torch.ops.aten.threshold_backward.grad_input(grad_hidden, hidden, 0, grad_input=grad_hidden)
        grad_x, grad_w1, grad_b1 = _operand_gradients(grad_hidden, x, w1, (need_x, need_w1, need_b1))
        return grad_x, grad_w1, grad_b1, grad_w2, grad_b2


def relu_feed_forward(
    x: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor | None,
    w2: torch.Tensor,
    b2: torch.Tensor | None,
) -> torch.Tensor:
    """W_2 relu(W_1 x + b_1) + b_2 for every token (row) of x; bitwise ``F.linear(F.relu(F.linear(x, w1, b1)), w2,
    b2)`` with fewer passes over the hidden activations (module docstring).

    Args:
        x: tokens (M, D), or the packed form (K, M, D): K independent runs, each with its own weights.
        w1, b1: the first product's weight (F, D) and bias (F,) or None; packed (K, F, D) and (K, F).
        w2, b2: the second product's weight (D, F) and bias (D,) or None; packed (K, D, F) and (K, D).

    Returns:
        (M, D), or (K, M, D).
    """
    if x.dim() not in (2, 3) or w1.dim() != x.dim() or w2.dim() != x.dim():
        raise ValueError(
            f"x must be (M, D) with 2-D weights or (K, M, D) with 3-D weights, got x {tuple(x.shape)}, "
            f"w1 {tuple(w1.shape)}, w2 {tuple(w2.shape)}"
        )
    if x.dim() == 3 and x.device.type == "cpu":
        K, M, _ = x.shape
        chunk = max(1, FFN_CHUNK_BYTES // max(M * w1.shape[1] * x.element_size(), 1))  # runs per piece
        if chunk < K:
            parts = []
            for start in range(0, K, chunk):
                part = slice(start, start + chunk)
                b1_part, b2_part = None if b1 is None else b1[part], None if b2 is None else b2[part]
                parts.append(_block(x[part], w1[part], b1_part, w2[part], b2_part))  # (k, M, D)
            return torch.cat(parts, dim=0)  # (K, M, D)
    return _block(x, w1, b1, w2, b2)


def _block(
    x: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor | None,
    w2: torch.Tensor,
    b2: torch.Tensor | None,
) -> torch.Tensor:
    """`relu_feed_forward` of one piece: the function, or the composition where it gains nothing (module docstring)."""
    hidden_bytes = x.shape[:-1].numel() * w1.shape[-2] * x.element_size()
    if (
        hidden_bytes < FUNCTION_MIN_HIDDEN_BYTES
        or torch.is_autocast_enabled(x.device.type)
        or torch.compiler.is_compiling()
        or not (w1.is_contiguous() and w2.is_contiguous())
    ):
        return _product(F.relu(_product(x, w1, b1)), w2, b2)
    return _ReluFeedForward.apply(x, w1, b1, w2, b2)
