"""Tests of constructions/state_dict_files.py: state dicts read from safetensors, torch and Lightning files, safely."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from constructions.state_dict_files import StateDictFileError, read_state_dict_file


class NotATensor:
    """A class of 'the training code': torch.load(weights_only=True) must refuse to build it."""


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


def test_an_object_the_safe_loader_will_not_build_is_refused_not_unpickled(tmp_path: Path) -> None:
    path = tmp_path / "lightning.ckpt"
    torch.save({"state_dict": _state(), "hyper_parameters": {"dataset": NotATensor()}}, path)
    message = _refusal(path)
    assert "cannot be read safely" in message and "NotATensor" in message and "state_dict" in message


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
