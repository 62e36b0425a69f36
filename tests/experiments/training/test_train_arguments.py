"""train()'s and train_packed()'s argument checks: refused by name, memory estimated, nothing created."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import experiments.training.memory as memory
from experiments.config import TrainConfig
from experiments.training.arguments import check_pack_arguments, check_train_arguments
from experiments.training.memory import training_bytes

SMALL = TrainConfig(task="farthest", d=4, N=3, rank=4, ffn_dim=8, steps=2, batch_size=4, device="cpu")


def test_valid_arguments_come_back_normalised(tmp_path: Path) -> None:
    assert check_train_arguments(SMALL, str(tmp_path / "run"), True, 5) == (SMALL, tmp_path / "run", True, 5.0)
    assert check_pack_arguments((SMALL,), ["run"], False, 10.0)[0] == [SMALL]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "position, value, error, name",
    [
        (0, {"d": 4}, TypeError, "config"),
        (1, None, TypeError, "out_dir"),
        (1, "", ValueError, "out_dir"),
        (2, None, TypeError, "progress"),
        (2, 1, TypeError, "progress"),
        (3, 0.0, ValueError, "progress_interval"),
        (3, float("nan"), ValueError, "progress_interval"),
    ],
)
def test_each_bad_train_argument_is_named(tmp_path: Path, position: int, value: object, error: type, name: str) -> None:
    arguments: list[object] = [SMALL, tmp_path / "run", False, 10.0]
    arguments[position] = value
    with pytest.raises(error, match=rf"^{name} "):
        check_train_arguments(*arguments)


def test_an_out_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError, match="out_dir exists and is not a directory"):
        check_train_arguments(SMALL, blocker, False, 10.0)


@pytest.mark.parametrize("configs", [None, SMALL, [], [SMALL, "x"], "configs", [SMALL, SMALL]])
def test_bad_packs_are_named(configs: object, tmp_path: Path) -> None:
    with pytest.raises((TypeError, ValueError), match=r"^configs"):
        check_pack_arguments(configs, [tmp_path / "a", tmp_path / "b"], False, 10.0)


def test_runs_that_cannot_fit_are_refused_with_the_estimate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = training_bytes(SMALL)
    monkeypatch.setattr(memory, "available_memory", lambda: int(one) - 1)
    with pytest.raises(ValueError, match=r"^config: the model and one step's activations need about"):
        check_train_arguments(SMALL, tmp_path / "run", False, 10.0)
    check_train_arguments(dataclasses.replace(SMALL, device="cuda"), tmp_path / "run", False, 10.0)  # GPU memory
    monkeypatch.setattr(memory, "available_memory", lambda: int(one) + 1)  # the control: one byte more fits
    check_train_arguments(SMALL, tmp_path / "run", False, 10.0)
    seeds = [dataclasses.replace(SMALL, seed=s) for s in range(3)]  # packed: three runs' memory at once
    dirs = [tmp_path / f"p{s}" for s in range(3)]
    with pytest.raises(ValueError, match=r"^configs: 3 packed runs"):
        check_pack_arguments(seeds, dirs, False, 10.0)
    monkeypatch.setattr(memory, "available_memory", lambda: int(3 * one) + 1)
    assert check_pack_arguments(seeds, dirs, False, 10.0)[0] == seeds
    assert list(tmp_path.iterdir()) == []
