"""experiments/samplers: one object per sampler (one module each, registered by name), torch-free at import
(issue 48)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments import samplers
from experiments.config import TrainConfig
from experiments.samplers import SAMPLER_NAMES, SAMPLERS, get_sampler
from experiments.tasks import make_task


def test_importing_the_samplers_loads_no_torch() -> None:
    code = "import sys, experiments.samplers; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_sampler_module_is_registered() -> None:
    """A sampler is its module plus one registry line (the reference's data recipe is its helper, not a sampler)."""
    modules = {p.stem for p in Path(samplers.__file__).parent.glob("*.py")} - {"__init__", "base", "reference_data"}
    assert modules == set(samplers.SAMPLER_NAMES) == set(SAMPLERS)
    assert all(SAMPLERS[name].name == name and SAMPLERS[name].summary for name in SAMPLERS)


def test_an_unknown_sampler_is_an_error() -> None:
    """The refusal lists every registered sampler (the paper's three first), so a new one needs no test edited."""
    assert SAMPLER_NAMES[:3] == ("cpu", "device", "reference")
    message = f"sampler must be one of {', '.join(map(repr, SAMPLER_NAMES))}, got 'gpu'"
    with pytest.raises(ValueError, match=message):
        get_sampler("gpu")
    with pytest.raises(ValueError, match=message):
        TrainConfig(sampler="gpu")


@pytest.mark.parametrize("name", ["cpu", "device"])
def test_a_sampler_draws_float32_batches_and_its_fixed_set_is_its_stream(name: str) -> None:
    """The first K batches of a fresh generator of the data seed are the fixed set, batch for batch."""
    config = TrainConfig(d=4, N=3, rank=4, batch_size=5, steps=4, log_every=2, train_batches=2, sampler=name, seed=3)
    task, cpu, sampler = make_task("farthest", 4, 3), torch.device("cpu"), get_sampler(name)
    fixed = sampler.fixed_set(config, task, cpu)
    generator = sampler.generator(config.data_seed_value, cpu)
    drawn = [sampler.draw(task, 5, generator, cpu) for _ in range(2)]
    assert [b.tokens.dtype for b in drawn] == [torch.float32] * 2
    assert all(
        torch.equal(a.tokens, b.tokens) and torch.equal(a.target, b.target) for a, b in zip(fixed, drawn, strict=True)
    )
    assert not torch.equal(drawn[0].tokens, drawn[1].tokens)
