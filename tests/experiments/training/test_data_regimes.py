"""The training-data regimes (issue 38): the reference's fixed set, replay of K batches, the data seed, the population
error beside the training loss."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

import attnrank
from experiments.config import TrainConfig
from experiments.samplers import SAMPLER_SEED_OFFSET, SAMPLERS, get_sampler
from experiments.samplers.reference_data import REFERENCE_WORKERS, reference_training_set, shared_batches
from experiments.tasks import Batch, Task, make_task
from experiments.training.evaluation import POPULATION_SEED
from experiments.training.loop import train
from experiments.training.packed import TrainedRuns
from experiments.training.run import build_run
from theory.validation import MAX_SEED

TINY = TrainConfig(
    task="farthest", d=6, N=4, rank=3, ffn_dim=16, batch_size=8, steps=12, log_every=3, train_batches=3,
    checkpoint_every=6, device="cpu",
)  # fmt: skip


class SphereStream(IterableDataset):
    """A data module as the reference describes its own (docs in `reference_data`): each DataLoader worker seeds a CPU
    generator with seed + its worker id whenever it is iterated and yields (X, farthest target) samples, X a float32
    (d, N) Gaussian draw with unit columns. Batching and the order of the workers are the DataLoader's own."""

    def __init__(self, d: int, N: int, seed: int) -> None:
        self.d, self.N, self.seed = d, N, seed

    def __iter__(self):  # type: ignore[no-untyped-def]
        info = get_worker_info()
        generator = torch.Generator().manual_seed(self.seed + (0 if info is None else info.id))
        while True:
            X = torch.randn((self.d, self.N), generator=generator)  # (d, N)
            X = X / X.norm(dim=0)
            yield X, X[:, (X.T @ X).argmin(dim=0)]


def _loader_set(d: int, N: int, batch_size: int, batches: int, seed: int, workers: int) -> tuple[torch.Tensor, ...]:
    loader = DataLoader(SphereStream(d, N, seed), batch_size=batch_size, num_workers=workers)
    drawn = [pair for _, pair in zip(range(batches), loader, strict=False)]
    X = torch.stack([x.transpose(1, 2) for x, _ in drawn])  # (batches, B, d, N) -> (batches, B, N, d)
    target = torch.stack([t.transpose(1, 2) for _, t in drawn])
    return X, target


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("workers", [0, 2, 3])
def test_reference_set_is_what_a_dataloader_with_workers_yields(workers: int) -> None:
    """Against a real torch DataLoader with worker processes: the round-robin order and the layout, bitwise."""
    X, target = reference_training_set(5, 4, 3, 7, seed=2, workers=workers)
    loader_X, loader_target = _loader_set(5, 4, 3, 7, seed=2, workers=workers)
    assert X.dtype == torch.float32 and X.shape == (7, 3, 4, 5)
    assert torch.equal(X, loader_X) and torch.equal(target, loader_target)


def test_the_worker_count_matters() -> None:
    """Negative control of the test above: another worker count orders other batches (so the check is sensitive)."""
    three, _ = reference_training_set(5, 4, 3, 7, seed=2, workers=3)
    two, _ = reference_training_set(5, 4, 3, 7, seed=2, workers=2)
    assert torch.equal(three[0], two[0]) and not torch.equal(three[1:], two[1:])  # batch 0: worker 0's first, both


def test_targets_are_the_farthest_points_and_points_are_unit() -> None:
    X, target = reference_training_set(8, 5, 4, 3, seed=0, workers=2)
    X64 = X.double()
    farthest = torch.einsum("bsid,bsjd->bsij", X64, X64).argmin(dim=-1)  # (3, 4, 5), float64 decision
    expected = torch.gather(X, 2, farthest[..., None].expand(-1, -1, -1, 8))
    agree = (expected == target).all(dim=-1).double().mean().item()
    assert agree == 1.0  # no float32 near-tie among these 60 decisions
    assert torch.allclose(X.norm(dim=-1), torch.ones(3, 4, 5), atol=1e-6)


def test_shared_batches_counts_equal_batches() -> None:
    """The count by stream names against the tensors themselves (data seeds 0 and 1 share most of the set)."""
    sets = {s: reference_training_set(3, 2, 2, 20, seed=s, workers=3)[0] for s in (0, 1, 5)}
    for a, b in ((0, 1), (0, 5), (1, 0)):
        equal = sum(any(torch.equal(x, y) for y in sets[b]) for x in sets[a])
        assert shared_batches(a, b, batches=20, workers=3) == equal
    assert shared_batches(0, 1) == 85 and shared_batches(0, REFERENCE_WORKERS) == 0  # the paper's sizes


def test_public_function_is_exported() -> None:
    assert attnrank.reference_training_set is reference_training_set


def _fixed(config: TrainConfig, task: Task, device: torch.device) -> list[Batch]:
    return get_sampler(config.sampler).fixed_set(config, task, device)


def _fixed(config: TrainConfig, task: Task, device: torch.device) -> list[Batch]:
    """The run's fixed set, as its sampler draws it."""
    return get_sampler(config.sampler).fixed_set(config, task, device)


# ------------------------------------------------------------------------------------------------------ replay
def _recorded_batches(config: TrainConfig, out: Path, monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """The tokens of every training batch of a run, in order."""
    seen: list[torch.Tensor] = []
    losses = TrainedRuns.losses

    def recording(self: TrainedRuns, batch: Batch) -> torch.Tensor:
        seen.append(batch.tokens.clone())
        return losses(self, batch)

    monkeypatch.setattr(TrainedRuns, "losses", recording)
    train(config, out, progress=False)
    return seen


@pytest.mark.parametrize("sampler", ["cpu", "reference"])
def test_step_t_trains_on_batch_t_mod_k(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sampler: str) -> None:
    config = dataclasses.replace(TINY, sampler=sampler)
    seen = _recorded_batches(config, tmp_path, monkeypatch)
    fixed = get_sampler(config.sampler).fixed_set(config, make_task("farthest", 6, 4), torch.device("cpu"))
    assert len(seen) == 12 and all(torch.equal(s, fixed[t % 3].tokens) for t, s in enumerate(seen))
    assert not torch.equal(fixed[0].tokens, fixed[1].tokens)
    if sampler == "reference":
        X, _ = reference_training_set(6, 4, 8, 3, seed=0)
        assert all(torch.equal(fixed[k].tokens, X[k]) for k in range(3))


def test_a_fixed_set_is_the_start_of_the_fresh_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the cpu sampler, the fixed set is the first K batches a fresh-batch run of the same data seed draws."""
    fresh = dataclasses.replace(TINY, train_batches=0, steps=3)
    seen = _recorded_batches(fresh, tmp_path / "fresh", monkeypatch)
    fixed = get_sampler(TINY.sampler).fixed_set(TINY, make_task("farthest", 6, 4), torch.device("cpu"))
    assert all(torch.equal(s, f.tokens) for s, f in zip(seen, fixed, strict=True))


def test_the_data_seed_moves_the_data_and_not_the_initialisation() -> None:
    task, device = make_task("farthest", 6, 4), torch.device("cpu")
    other_data = dataclasses.replace(TINY, data_seed=7)
    other_init = dataclasses.replace(TINY, seed=7, data_seed=0)
    assert not torch.equal(_fixed(TINY, task, device)[0].tokens, _fixed(other_data, task, device)[0].tokens)
    assert torch.equal(_fixed(TINY, task, device)[0].tokens, _fixed(other_init, task, device)[0].tokens)

    def weights(config: TrainConfig) -> torch.Tensor:
        return torch.cat([p.flatten() for p in build_run(config, device)[1].parameters()])

    assert torch.equal(weights(TINY), weights(other_data)) and not torch.equal(weights(TINY), weights(other_init))
    assert (
        TrainConfig(data_seed=0) == TrainConfig()
        and TrainConfig(data_seed=0).config_hash() == TrainConfig().config_hash()
    )
    assert TrainConfig(data_seed=1).config_hash() != TrainConfig().config_hash()


def test_defaults_leave_the_hash_and_set_changes_it() -> None:
    """A default run is unchanged (the pinned hash of tests/experiments/test_config.py); a fixed set is another run."""
    assert TrainConfig().config_hash() == "0b743d1bec279967ee4cd6b15f43376740e5a63cfa23cef1108e5dfe195e22e2"
    assert dataclasses.replace(TINY, train_batches=0, log_every=3).config_hash() != TINY.config_hash()
    assert dataclasses.replace(TINY, sampler="reference").config_hash() != TINY.config_hash()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"train_batches": -1}, "train_batches must be an integer in [0, 12], got -1"),
        ({"train_batches": 13, "log_every": 13}, "train_batches must be an integer in [0, 12], got 13"),
        ({"log_every": 4}, "log_every must equal train_batches = 3"),
        ({"data_seed": -2}, "data_seed must be an integer in [0, 9223372036854775807], got -2"),
        ({"data_seed": 1.5}, "data_seed must be an integer"),
        ({"sampler": "reference", "task": "nearest", "keys": "iid"}, "sampler must be 'cpu' or 'device' for task"),
        ({"sampler": "reference", "train_batches": 0, "log_every": 50}, "train_batches must be >= 1 with sampler"),
    ],
)
def test_bad_data_fields_are_refused_by_name(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", "\\[").replace("]", "\\]")):
        dataclasses.replace(TINY, **changes)


def test_a_curriculum_takes_no_fixed_set() -> None:
    icl = {"task": "icl", "model": "gpt2", "embed_dim": 8, "positional": "additive", "d": 4, "N": 6, "rank": 8}
    with pytest.raises(ValueError, match="train_batches must be 0 for a curriculum run"):
        TrainConfig(**icl, steps=400, log_every=10, train_batches=10, curriculum_dims=2, curriculum_interval=50)
    TrainConfig(**icl, steps=400, log_every=10, train_batches=10)  # the full task alone: fine


# ------------------------------------------------------------------------------------------------ population
def _rows(path: Path) -> list[dict[str, str]]:
    with (path / "metrics.csv").open(newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def test_population_error_is_recorded_along_the_curve_and_at_the_end(tmp_path: Path) -> None:
    result = train(TINY, tmp_path, progress=False)
    rows = _rows(tmp_path)
    measured = [int(r["step"]) for r in rows if r["population"]]
    assert measured == [6, 12]  # the checkpoint steps (checkpoint_every 6) and the last step
    assert result.extra["population_samples"] == 20_000 and result.extra["population_stderr"] > 0
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["population_error"] == result.extra["population_error"]
    # The curve's last point and the final estimate score the same model on nested held-out samples (the first 4096
    # of the 20 000): their difference has standard deviation sigma sqrt(1/4096 - 1/20000) = stderr_final
    # sqrt(20000/4096 - 1) ~ 1.97 stderr_final. Bound: 4 such standard deviations.
    spread = saved["population_stderr"] * (20_000 / 4_096 - 1) ** 0.5
    assert abs(float(rows[-1]["population"]) - saved["population_error"]) < 4 * spread


def test_a_smaller_evaluation_is_recorded_and_the_curve_uses_all_of_it(tmp_path: Path) -> None:
    """eval_samples = 50 (< CURVE_SAMPLES): the end's estimate and the curve's last point score the same final model on
    the same 50 held-out samples, so they agree exactly; the record says 50. The losses are those of the default run
    (the count scores the model, it does not train it)."""
    coarse = dataclasses.replace(TINY, eval_samples=50)
    result = train(coarse, tmp_path / "coarse", progress=False)
    saved = json.loads((tmp_path / "coarse" / "result.json").read_text())
    assert saved["population_samples"] == 50 == result.extra["population_samples"]
    assert float(_rows(tmp_path / "coarse")[-1]["population"]) == saved["population_error"]
    train(TINY, tmp_path / "default", progress=False)
    default = json.loads((tmp_path / "default" / "result.json").read_text())
    assert default["population_samples"] == 20_000 and default["best_loss"] == saved["best_loss"]
    assert [r["loss"] for r in _rows(tmp_path / "coarse")] == [r["loss"] for r in _rows(tmp_path / "default")]


def test_population_evaluations_do_not_touch_training(tmp_path: Path) -> None:
    """The losses are bitwise those of a run evaluated at other steps (the evaluation takes no training randomness)."""
    train(TINY, tmp_path / "a", progress=False)
    train(dataclasses.replace(TINY, checkpoint_every=4), tmp_path / "b", progress=False)
    assert [r["loss"] for r in _rows(tmp_path / "a")] == [r["loss"] for r in _rows(tmp_path / "b")]
    assert [r["step"] for r in _rows(tmp_path / "b") if r["population"]] == ["12"]  # 4 and 8 end no epoch of 3


def test_the_held_out_stream_is_no_training_stream() -> None:
    """Every training stream is seeded below the population seed: each sampler's streams lie within its seed_span
    above the data seed (cpu/device: data_seed + offset; reference: data_seed + worker, workers <= 64), and
    data_seed <= MAX_SEED (the largest any seed may be)."""
    largest = MAX_SEED
    for sampler in SAMPLERS.values():
        assert largest + sampler.seed_span < POPULATION_SEED < 2**64, sampler.name
    assert SAMPLERS["reference"].seed_span >= 63  # its workers' streams, data_seed + w for w < 64
    assert get_sampler("cpu").generator(largest, torch.device("cpu")).initial_seed() == largest + SAMPLER_SEED_OFFSET
