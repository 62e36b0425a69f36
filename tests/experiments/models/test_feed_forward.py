"""The feed-forward function against the block written out with torch's own operations: bitwise.

`relu_feed_forward` runs the same products and reductions as autograd does for ``F.linear``, ``F.relu``, ``F.linear``
(and ``torch.baddbmm`` / ``bmm`` for the packed form), only with the ReLU and its derivative in place, so outputs and
gradients must be equal bit for bit (``torch.equal``), not merely close. The same holds one level up: the encoder layer
and the packed encoder's block against the formulas they used before the function existed, written out here.
Sizes include the paper's hidden width in float32 (where sums over 2048 products round differently in any other order,
see the negative control) as well as odd, small ones in float64; every check runs through the autograd function and
through the composition that small blocks take instead (`FUNCTION_MIN_HIDDEN_BYTES`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
import torch.nn.functional as F

from experiments.config import TrainConfig
from experiments.models import feed_forward
from experiments.models.encoder import PaperEncoder, PaperEncoderLayer
from experiments.models.feed_forward import relu_feed_forward
from experiments.models.run_axis import stack_models
from experiments.models.spec import AttentionSpec
from experiments.training.run import build_run


def _weights(K: int | None, D: int, Fw: int, dtype: torch.dtype, bias: bool, seed: int) -> list[torch.Tensor | None]:
    """w1 (.., F, D), b1, w2 (.., D, F), b2 (leading K for the packed form), scaled as nn.Linear's init."""
    gen = torch.Generator().manual_seed(seed)
    lead = () if K is None else (K,)

    def draw(*shape: int, fan_in: int) -> torch.Tensor:
        return ((2 * torch.rand(*lead, *shape, generator=gen, dtype=dtype) - 1) / fan_in**0.5).requires_grad_()

    w1, w2 = draw(Fw, D, fan_in=D), draw(D, Fw, fan_in=Fw)
    b1 = draw(Fw, fan_in=D) if bias else None
    b2 = draw(D, fan_in=Fw) if bias else None
    return [w1, b1, w2, b2]


def _grads(
    output: torch.Tensor, probe: torch.Tensor, leaves: Sequence[torch.Tensor | None]
) -> list[torch.Tensor | None]:
    present = [t for t in leaves if t is not None]
    found = iter(torch.autograd.grad(output, present, probe))
    return [None if t is None else next(found) for t in leaves]


def _assert_bitwise(ours: Sequence[torch.Tensor | None], reference: Sequence[torch.Tensor | None]) -> None:
    for index, (a, b) in enumerate(zip(ours, reference, strict=True)):
        assert (a is None) == (b is None), index
        if a is not None:
            assert b is not None
            assert a.shape == b.shape and torch.equal(a, b), f"tensor {index} differs by {(a - b).abs().max().item()}"


CASES = [  # (B, N, D, F, dtype, bias)
    (16, 16, 64, 2048, torch.float32, True),  # the paper's widths (a sixteenth of its batch)
    (16, 16, 64, 2048, torch.float32, False),
    (3, 5, 7, 11, torch.float64, True),
    (2, 1, 1, 3, torch.float64, True),  # one-wide tokens: the column-major branches of torch's mm backward
    (1, 1, 4, 6, torch.float32, False),
]


@pytest.fixture(params=["function", "composition"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every case runs twice: through the autograd function (any size) and through the composition it falls back to
    below `FUNCTION_MIN_HIDDEN_BYTES` (every size); both must be bitwise the reference."""
    limit = 0 if request.param == "function" else 2**62
    monkeypatch.setattr(feed_forward, "FUNCTION_MIN_HIDDEN_BYTES", limit)
    return str(request.param)


@pytest.mark.parametrize(("B", "N", "D", "Fw", "dtype", "bias"), CASES)
def test_function_is_bitwise_the_linear_relu_linear_composition(
    path: str, B: int, N: int, D: int, Fw: int, dtype: torch.dtype, bias: bool
) -> None:
    """Tokens as the encoder layer feeds them: (B, N, D) for the composition, (B N, D) for the function."""
    w1, b1, w2, b2 = _weights(None, D, Fw, dtype, bias, seed=B + Fw)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(B, N, D, generator=gen, dtype=dtype).requires_grad_()
    probe = torch.randn(B, N, D, generator=gen, dtype=dtype)
    assert w1 is not None and w2 is not None
    reference = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)  # (B, N, D): the layer's formula before the function
    ours = relu_feed_forward(x.reshape(B * N, D), w1, b1, w2, b2).view(B, N, D)
    assert torch.equal(ours, reference)
    leaves = [x, w1, b1, w2, b2]
    _assert_bitwise(_grads(ours, probe, leaves), _grads(reference, probe, leaves))


@pytest.mark.parametrize(
    ("K", "M", "D", "Fw", "dtype", "bias"), [(3, 256, 64, 512, torch.float32, True), (2, 5, 3, 4, torch.float64, False)]
)
def test_packed_form_is_bitwise_the_batched_composition(
    path: str, K: int, M: int, D: int, Fw: int, dtype: torch.dtype, bias: bool
) -> None:
    """K runs: baddbmm (bmm without biases) with the transposed weights, relu, baddbmm, as the packed model did."""
    w1, b1, w2, b2 = _weights(K, D, Fw, dtype, bias, seed=K)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(K, M, D, generator=gen, dtype=dtype).requires_grad_()
    probe = torch.randn(K, M, D, generator=gen, dtype=dtype)
    assert w1 is not None and w2 is not None

    def product(t: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        if b is None:
            return torch.bmm(t, w.transpose(1, 2))
        return torch.baddbmm(b.unsqueeze(1), t, w.transpose(1, 2))

    reference = product(F.relu(product(x, w1, b1)), w2, b2)  # (K, M, D)
    ours = relu_feed_forward(x, w1, b1, w2, b2)
    assert torch.equal(ours, reference)
    leaves = [x, w1, b1, w2, b2]
    _assert_bitwise(_grads(ours, probe, leaves), _grads(reference, probe, leaves))


def test_negative_control_another_summation_order_is_not_bitwise(path: str) -> None:
    """The bitwise checks above are sharp: at the paper's hidden width, summing the first bias's gradient in
    another order (two halves of the tokens, then their sum) already changes float32 bits."""
    w1, b1, w2, b2 = _weights(None, 64, 2048, torch.float32, True, seed=5)
    assert w1 is not None and w2 is not None and b1 is not None
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(256, 64, generator=gen).requires_grad_()
    probe = torch.randn(256, 64, generator=gen)
    (grad_b1,) = torch.autograd.grad(relu_feed_forward(x, w1, b1, w2, b2), [b1], probe)
    halves = [
        torch.autograd.grad(relu_feed_forward(x[s], w1, b1, w2, b2), [b1], probe[s])[0]
        for s in (slice(0, 128), slice(128, 256))
    ]
    split = halves[0] + halves[1]
    torch.testing.assert_close(split, grad_b1, rtol=1e-5, atol=1e-6)  # the same sum ...
    assert not torch.equal(split, grad_b1)  # ... rounded differently


def test_autocast_uses_the_composition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed_forward, "FUNCTION_MIN_HIDDEN_BYTES", 0)
    """Under bfloat16 autocast the function is the plain composition (bitwise), forward and backward."""
    w1, b1, w2, b2 = _weights(None, 8, 16, torch.float32, True, seed=7)
    assert w1 is not None and w2 is not None
    x = torch.randn(12, 8, generator=torch.Generator().manual_seed(4)).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = relu_feed_forward(x, w1, b1, w2, b2)
        reference = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
    assert ours.dtype == torch.bfloat16 and torch.equal(ours, reference)
    leaves = [x, w1, b1, w2, b2]
    probe = torch.ones_like(ours)
    _assert_bitwise(_grads(ours, probe, leaves), _grads(reference, probe, leaves))


def test_not_differentiable_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed_forward, "FUNCTION_MIN_HIDDEN_BYTES", 0)
    w1, b1, w2, b2 = _weights(None, 3, 5, torch.float64, True, seed=8)
    x = torch.randn(4, 3, dtype=torch.float64).requires_grad_()
    assert w1 is not None and w2 is not None
    (grad_x,) = torch.autograd.grad(relu_feed_forward(x, w1, b1, w2, b2).sum(), [x], create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad|twice"):
        grad_x.sum().backward()


def test_shapes_are_checked() -> None:
    w1, b1, w2, b2 = _weights(None, 3, 5, torch.float64, True, seed=9)
    assert w1 is not None and w2 is not None
    with pytest.raises(ValueError, match=r"x must be \(M, D\)"):
        relu_feed_forward(torch.zeros(2, 2, 3, dtype=torch.float64), w1, b1, w2, b2)


# ------------------------------------------------------------------------------------------- one level up: models
def test_encoder_forward_and_gradients_are_bitwise_the_written_out_layer(path: str) -> None:
    """A float32 two-layer encoder at the paper's d and FFN width against the same layers computed with
    norm1(x + attention(x)), then norm2(h + F.linear(F.relu(F.linear(h, W1, b1)), W2, b2)): every parameter's
    gradient bitwise."""
    torch.manual_seed(0)
    encoder = PaperEncoder(64, AttentionSpec(32), layers=2, ffn_dim=2048)
    x = torch.randn(8, 16, 64, generator=torch.Generator().manual_seed(6))
    probe = torch.randn(8, 16, 64, generator=torch.Generator().manual_seed(7))

    def written_out(tokens: torch.Tensor) -> torch.Tensor:
        for layer in encoder.layers:
            assert isinstance(layer, PaperEncoderLayer)
            h = layer.norm1(tokens + layer.self_attn(tokens))  # (B, N, D)
            hidden = F.relu(F.linear(h, layer.linear1.weight, layer.linear1.bias))  # (B, N, F)
            tokens = layer.norm2(h + F.linear(hidden, layer.linear2.weight, layer.linear2.bias))  # (B, N, D)
        return tokens

    parameters = list(encoder.parameters())
    ours, reference = encoder(x), written_out(x)
    assert torch.equal(ours, reference)
    _assert_bitwise(
        list(torch.autograd.grad(ours, parameters, probe)), list(torch.autograd.grad(reference, parameters, probe))
    )


def test_packed_block_is_bitwise_the_written_out_chunks(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The packed encoder's feed-forward block (several chunks of runs) against baddbmm, relu, baddbmm per chunk."""
    configs = [TrainConfig(task="farthest", d=8, N=4, ffn_dim=16, batch_size=4, rank=4, seed=s) for s in range(3)]
    task = build_run(configs[0], torch.device("cpu"))[0]
    pack = stack_models([build_run(c, torch.device("cpu"))[1] for c in configs])
    layer = pack.get_submodule("network.layers.0")
    assert isinstance(layer, PaperEncoderLayer) and task.name == "farthest"
    h = torch.randn(3, 16, 8, generator=torch.Generator().manual_seed(8)).requires_grad_()
    probe = torch.randn(3, 16, 8, generator=torch.Generator().manual_seed(9))
    w1, b1, w2, b2 = layer.linear1.weight, layer.linear1.bias, layer.linear2.weight, layer.linear2.bias
    assert w1.shape == (3, 16, 8) and b1 is not None and b2 is not None
    monkeypatch.setattr(
        feed_forward, "FFN_CHUNK_BYTES", 2 * 16 * 16 * 4
    )  # two runs' hidden activations: chunks of 2, 1
    ours = layer.feed_forward(h)
    parts = []
    for part in (slice(0, 2), slice(2, 3)):
        hidden = F.relu(torch.baddbmm(b1[part].unsqueeze(1), h[part], w1[part].transpose(1, 2)))
        parts.append(torch.baddbmm(b2[part].unsqueeze(1), hidden, w2[part].transpose(1, 2)))
    reference = torch.cat(parts)
    assert torch.equal(ours, reference)
    leaves = [h, w1, b1, w2, b2]
    _assert_bitwise(_grads(ours, probe, leaves), _grads(reference, probe, leaves))


def test_the_paper_cell_takes_the_function_and_the_cpu_cell_the_composition(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which path a block takes goes by the size of its hidden activations (the numbers are the same either way)."""
    taken: list[str] = []

    def spy(*args: torch.Tensor) -> torch.Tensor:
        taken.append("function")
        return args[0]

    monkeypatch.setattr(feed_forward._ReluFeedForward, "apply", spy)
    for M, D, Fw in ((256 * 16, 64, 2048), (128 * 8, 16, 256)):
        w1, b1, w2, b2 = _weights(None, D, Fw, torch.float32, True, seed=M)
        assert w1 is not None and w2 is not None
        relu_feed_forward(torch.zeros(M, D), w1, b1, w2, b2)
        taken.append("|")
    assert taken == ["function", "|", "|"]
