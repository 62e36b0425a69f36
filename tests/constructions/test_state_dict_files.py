"""Tests of constructions/state_dict_files.py: state dicts read from safetensors, torch and Lightning files, safely."""

from __future__ import annotations

import hashlib
import pickle
import sys
import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from constructions.inert_globals import InertGlobal
from constructions.state_dict_files import StateDictFileError, read_state_dict_file


def _state() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {
        "a.weight": torch.randn(3, 2, generator=generator),
        "a.bias": torch.randn(3, generator=generator, dtype=torch.float64),
        "b": torch.randn(4, generator=generator).to(torch.bfloat16),
    }


def _same(read: dict[str, torch.Tensor], written: dict[str, torch.Tensor]) -> bool:
    return set(read) == set(written) and all(
        read[k].dtype == torch.float64 and torch.equal(read[k], written[k].to(torch.float64)) for k in written
    )


@pytest.mark.parametrize("container", ["safetensors", "zip", "legacy", "lightning"])
def test_each_container_gives_the_same_float64_tensors(container: str, tmp_path: Path) -> None:
    state = _state()
    path = tmp_path / "weights.bin"  # the container is recognised by its bytes, not by the file name
    if container == "safetensors":
        save_file(state, str(path), metadata={"format": "x"})
    elif container == "lightning":
        optimizer = {"state": {0: {"step": torch.tensor(3.0)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
        torch.save({"epoch": 2, "global_step": 30, "state_dict": state, "optimizer_states": [optimizer]}, path)
    else:
        torch.save(state, path, _use_new_zipfile_serialization=container == "zip")
    read = read_state_dict_file(path)
    assert _same(read.tensors, state)
    expected = {"safetensors": "safetensors", "lightning": "Lightning checkpoint"}.get(container, "torch state dict")
    assert read.container == expected
    assert read.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert read.metadata == ({"format": "x"} if container == "safetensors" else {})


def _refusal(path: Path) -> str:
    with pytest.raises(StateDictFileError) as caught:
        read_state_dict_file(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


def _training_code_module() -> types.ModuleType:
    """A module `training_code` with a class and a function, as the code that wrote a checkpoint would have."""
    module = types.ModuleType("training_code")

    class Dataset:
        def __init__(self, size: int) -> None:
            self.size = size

    def schedule(step: int) -> float:
        raise AssertionError("a function named in the file was called")

    for value in (Dataset, schedule):
        value.__module__ = "training_code"
        value.__qualname__ = value.__name__
        setattr(module, value.__name__, value)
    return module


def test_classes_and_objects_of_the_training_code_are_carried_as_names(tmp_path: Path) -> None:
    """The module exists only while the file is written: reading it must neither import nor call anything."""
    module = _training_code_module()
    sys.modules["training_code"] = module
    try:
        path = tmp_path / "lightning.ckpt"
        content = {
            "state_dict": _state(),
            "hyper_parameters": {"dataset_class": module.Dataset, "dataset": module.Dataset(3), "nheads": 2},
            "lr_schedulers": [{"lr_lambda": module.schedule}],
        }
        torch.save(content, path)
    finally:
        del sys.modules["training_code"]
    read = read_state_dict_file(path)
    assert "training_code" not in sys.modules
    assert _same(read.tensors, _state()) and read.container == "Lightning checkpoint"
    assert read.carried_globals == ("training_code.Dataset", "training_code.schedule")
    assert read.skipped_entries == ("lr_schedulers",)
    hyper = read.hyper_parameters["hyper_parameters"]
    assert hyper["nheads"] == 2
    assert isinstance(hyper["dataset"], InertGlobal) and hyper["dataset"].global_name == "training_code.Dataset"
    assert issubclass(hyper["dataset_class"], InertGlobal) and not hasattr(hyper["dataset"], "size")


@pytest.mark.parametrize(
    "dtypes, stored",
    [
        ((torch.float64,), torch.float64),
        ((torch.float32, torch.float64), torch.float64),
        ((torch.float32,), torch.float32),
        ((torch.bfloat16, torch.float16), torch.float32),
    ],
)
def test_the_precision_the_tensors_were_stored_in_is_reported(
    dtypes: tuple[torch.dtype, ...], stored: torch.dtype, tmp_path: Path
) -> None:
    state = {f"t{i}": torch.ones(2, dtype=dtype) for i, dtype in enumerate(dtypes)}
    torch.save({"state_dict": state}, tmp_path / "a.ckpt")
    save_file(state, str(tmp_path / "a.safetensors"))
    assert read_state_dict_file(tmp_path / "a.ckpt").dtype == stored
    assert read_state_dict_file(tmp_path / "a.safetensors").dtype == stored


def test_a_global_that_runs_code_is_refused_naming_it(tmp_path: Path) -> None:
    class Payload:
        def __reduce__(self) -> tuple:
            return (print, ("this would have run",))

    path = tmp_path / "payload.ckpt"
    torch.save({"state_dict": _state(), "hyper_parameters": {"x": Payload()}}, path)
    message = _refusal(path)
    assert "builtins.print" in message and "refused without loading" in message


@pytest.mark.parametrize(
    "content, reason",
    [
        ({"w": torch.zeros(2, dtype=torch.int64)}, "dtype torch.int64"),
        ({"w": torch.tensor([1.0, float("nan")])}, "non-finite"),
        ({"w": torch.zeros(2), "epoch": 3}, "'epoch' holds a int"),
        ({}, "holds no tensors"),
        ({"state_dict": [torch.zeros(2)]}, "expected a dict of tensors"),
        ([torch.zeros(2)], "holds a list"),
        ({"w": torch.zeros(3).to_sparse()}, "expected a dense tensor"),
    ],
)
def test_what_is_not_a_float_state_dict_is_refused_naming_the_key(content: object, reason: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.pt"
    torch.save(content, path)
    assert reason in _refusal(path)


def test_damaged_and_foreign_bytes_are_refused(tmp_path: Path) -> None:
    good = tmp_path / "good.pt"
    torch.save(_state(), good)
    raw = good.read_bytes()
    cases = {
        "truncated.pt": raw[: len(raw) // 2],
        "empty.pt": b"",
        "text.pt": b"not a state dict at all\n",
        "plain-pickle.pt": pickle.dumps({"w": [1.0, 2.0]}, protocol=2),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        _refusal(tmp_path / name)
    safetensors = tmp_path / "good.safetensors"
    save_file(_state(), str(safetensors))
    (tmp_path / "cut.safetensors").write_bytes(safetensors.read_bytes()[:-3])
    assert "readable safetensors" in _refusal(tmp_path / "cut.safetensors")


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="path must be"):
        read_state_dict_file(3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        read_state_dict_file("/nonexistent/weights.pt")
    with pytest.raises(IsADirectoryError):
        read_state_dict_file(Path(__file__).parent)
