"""How one training step is executed: eagerly, or captured once and replayed (CUDA only), under a matmul precision.

A step is: the K runs' losses on their batches (forward), backward of their sum, and one AdamW step. On a GPU the
arithmetic of the paper's small models takes well under a millisecond while launching its few hundred kernels one
by one from Python takes tens (docs/gpu_step.md), so ``TrainConfig.capture`` replays the whole step:

- "graph": ``torch.cuda.graph``. The first `GRAPH_WARMUP_STEPS` steps run eagerly on a side stream (real training
  steps: they build the optimiser state and let the caching allocator settle), the next step is captured into a
  ``torch.cuda.CUDAGraph`` with static batch buffers and then replayed; every later step copies its batch into the
  buffers and replays the graph. The optimiser is the capturable AdamW (step counts and learning rate on the GPU;
  `training.schedule.make_optimizer`), and the schedule writes the learning-rate tensor in place between replays.
- "compile": ``torch.compile(mode="reduce-overhead")`` of the losses (forward and, through AOTAutograd, backward
  as CUDA graphs by torch's cudagraph trees); the optimiser is the fused AdamW, outside the compiled region.

Both are active only on CUDA: on any other device `make_stepper` returns the eager step, and `describe_step_path`
records what was used. The arithmetic is the same in every mode; only launch overhead differs (and the order of
float sums inside kernels torch picks).

``TrainConfig.matmul_precision`` is applied for the duration of a run by `matmul_precision` ("high": TF32 on GPUs
that have it), then restored: the setting is process-global in torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch

from experiments.config import TrainConfig
from experiments.tasks import Batch

GRAPH_WARMUP_STEPS = 3
"""Eager steps (on a side stream) before a CUDA graph is captured (PyTorch's recipe for whole-network capture)."""


class LossModels(Protocol):
    """What a step needs of the models: their K losses on the drawn batches (`loop.TrainedModels`)."""

    def losses(self, batches: Any) -> torch.Tensor: ...


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """``torch.set_float32_matmul_precision(precision)`` inside the block, the previous value restored after."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def capture_active(config: TrainConfig, device: torch.device) -> bool:
    """Whether ``config.capture`` takes effect on ``device`` (only on CUDA)."""
    return config.capture != "none" and device.type == "cuda"


def describe_step_path(config: TrainConfig, device: torch.device, optimizer_kind: str) -> dict[str, Any]:
    """What a run's step really uses, for its config.json: sampler, capture (and whether it is active), AdamW
    implementation and the matmul precision in force."""
    capture = config.capture if capture_active(config, device) or config.capture == "none" else "none"
    note = {} if capture == config.capture else {"capture_inactive": f"capture {config.capture!r} is CUDA-only"}
    return {
        "sampler": config.sampler,
        "capture": capture,
        "optimizer": optimizer_kind,
        "matmul_precision": torch.get_float32_matmul_precision(),
        **note,
    }


def eager_step(models: LossModels, optimizer: torch.optim.Optimizer, batches: Any) -> torch.Tensor:
    """One step as ordinary Python: the (K,) losses (detached) after backward and the AdamW step."""
    losses = models.losses(batches)  # (K,)
    optimizer.zero_grad(set_to_none=True)
    losses.sum().backward()
    optimizer.step()
    return losses.detach()


def _map_tensors(value: Any, function: Callable[..., Any], *others: Any) -> Any:
    """``function`` applied to every tensor of a Batch, a list of Batches or a tensor (None kept)."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return function(value, *others)
    if isinstance(value, Batch):
        return Batch(
            **{
                f.name: _map_tensors(getattr(value, f.name), function, *(getattr(o, f.name) for o in others))
                for f in dataclasses.fields(Batch)
            }
        )
    if isinstance(value, list):
        return [_map_tensors(v, function, *(o[i] for o in others)) for i, v in enumerate(value)]
    raise TypeError(f"cannot capture a batch of type {type(value).__name__}")


class GraphStep:
    """The step as one CUDA graph (module docstring); call it with each step's batches."""

    def __init__(self, models: LossModels, optimizer: torch.optim.Optimizer) -> None:
        self.models, self.optimizer = models, optimizer
        self.eager_steps = 0
        self.graph: Any = None
        self.static_batches: Any = None
        self.static_losses: torch.Tensor | None = None

    def __call__(self, batches: Any) -> torch.Tensor:
        if self.graph is None and self.eager_steps < GRAPH_WARMUP_STEPS:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                losses = eager_step(self.models, self.optimizer, batches)
            torch.cuda.current_stream().wait_stream(side)
            self.eager_steps += 1
            return losses
        if self.graph is None:
            self.static_batches = _map_tensors(batches, torch.clone)
            self.optimizer.zero_grad(set_to_none=True)  # gradients are allocated inside the graph's pool
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_losses = self.models.losses(self.static_batches)  # (K,)
                static_losses.sum().backward()
                self.optimizer.step()
            self.graph, self.static_losses = graph, static_losses.detach()
        else:
            _map_tensors(self.static_batches, lambda static, fresh: static.copy_(fresh), batches)
        self.graph.replay()
        assert self.static_losses is not None
        return self.static_losses.clone()  # the buffer is overwritten by the next replay


class CompiledStep:
    """The losses through ``torch.compile(mode="reduce-overhead")`` (forward and backward replayed as CUDA graphs),
    the fused AdamW step after them."""

    def __init__(self, models: LossModels, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        # The trained tensors keep their addresses (the optimiser updates them in place): marked static, the graphs
        # read them where they are instead of copying every parameter into their input buffers at each replay.
        for group in optimizer.param_groups:
            for tensor in group["params"]:
                torch._dynamo.mark_static_address(tensor)
        self.losses = torch.compile(models.losses, mode="reduce-overhead", dynamic=False)

    def __call__(self, batches: Any) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()  # the previous step's outputs may be overwritten from here on
        losses = self.losses(batches)  # (K,)
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        self.optimizer.step()
        return losses.detach().clone()


Stepper = Callable[[Any], torch.Tensor]


def make_stepper(
    config: TrainConfig, device: torch.device, models: LossModels, optimizer: torch.optim.Optimizer
) -> Stepper:
    """The step function of a run: `GraphStep` / `CompiledStep` when ``config.capture`` is active on ``device``,
    else the eager step."""
    if capture_active(config, device):
        return GraphStep(models, optimizer) if config.capture == "graph" else CompiledStep(models, optimizer)
    return lambda batches: eager_step(models, optimizer, batches)
