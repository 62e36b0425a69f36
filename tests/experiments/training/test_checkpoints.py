"""Tests of experiments/training/checkpoints.py: the sha256 trailer, field validation, stale temporaries, format 1."""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.config import TrainConfig
from experiments.tasks import Batch
from experiments.training.checkpoints import (
    CHECKPOINT_VERSION,
    TRAILER_LENGTH,
    load_checkpoint,
    write_checkpoint_file,
)
from experiments.training.loop import train
from experiments.training.packed import TrainedRuns
from experiments.training.run_model import load_trained_model

# A tiny run: 10 steps, epochs of 4 steps, a checkpoint every 5 steps (the last one at step 10 closes a short epoch).
CONFIG = TrainConfig(
    task="farthest", d=4, N=3, rank=4, ffn_dim=16, steps=10, batch_size=16, log_every=4, checkpoint_every=5
)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run directory of CONFIG (shared; tests copy it)."""
    out = tmp_path_factory.mktemp("run")
    train(CONFIG, out, progress=False)
    return out


def copy_run(source: Path, target: Path, *, finished: bool = False) -> Path:
    """A copy of ``source``; without result.json unless ``finished`` (so that train() resumes)."""
    shutil.copytree(source, target)
    if not finished:
        (target / "result.json").unlink()
    return target


def one_line_error(call: Any, *fragments: str) -> str:
    """Run ``call``; it must raise a one-line ValueError containing every fragment."""
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def raw_state(path: Path) -> dict[str, Any]:
    return torch.load(path, weights_only=True)  # torch.load ignores the trailer


def test_checkpoint_is_an_ordinary_torch_file_with_a_trailer(finished_run: Path) -> None:
    data = (finished_run / "checkpoint.pt").read_bytes()
    assert data[-TRAILER_LENGTH:].startswith(b"\nattnrank-checkpoint-sha256 ") and data.endswith(b"\n")
    state = raw_state(finished_run / "checkpoint.pt")
    assert state["version"] == CHECKPOINT_VERSION and state["step"] == 10
    assert load_checkpoint(finished_run / "checkpoint.pt")["config"] == CONFIG


@pytest.mark.parametrize("where", [0, 1, 0.25, 0.5, 0.9, -TRAILER_LENGTH + 3, -40, -2, -1])
def test_a_flipped_byte_anywhere_is_refused(finished_run: Path, tmp_path: Path, where: float) -> None:
    """One byte xor 0x01 at the start, inside the payload, in the trailer's tag and its hex digest, in the newline."""
    run = copy_run(finished_run, tmp_path / "run")
    path = run / "checkpoint.pt"
    data = bytearray(path.read_bytes())
    offset = int(where * len(data)) if isinstance(where, float) else where % len(data)
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    one_line_error(lambda: load_checkpoint(path), str(path), "integrity check failed")
    one_line_error(lambda: train(CONFIG, run, progress=False), str(path))
    one_line_error(lambda: load_trained_model(run), str(path))


def test_truncated_and_foreign_files_are_refused(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path / "run")
    path = run / "checkpoint.pt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 10])  # the trailer cut: torch could still read the payload
    one_line_error(lambda: load_checkpoint(path), str(path), "sha256 trailer missing or damaged")
    path.write_bytes(data[: len(data) // 2])
    one_line_error(lambda: load_checkpoint(path), str(path), "corrupt or unreadable checkpoint")
    path.write_bytes(b"")
    one_line_error(lambda: load_checkpoint(path), str(path))
    torch.save({"step": 3}, path)
    one_line_error(lambda: load_checkpoint(path), str(path), "not a training checkpoint (missing version")


def forge(run: Path, change: Any) -> Path:
    """Rewrite run/checkpoint.pt with ``change(state)`` applied and a valid digest (so the fields are judged)."""
    path = run / "checkpoint.pt"
    state = raw_state(path)
    change(state)
    write_checkpoint_file(path, state)
    return path


def set_step(value: Any) -> Any:
    def change(state: dict[str, Any]) -> None:
        state["step"] = value

    return change


def set_stats(key: str, value: Any = None, *, delete: bool = False) -> Any:
    def change(state: dict[str, Any]) -> None:
        if delete:
            del state["stats"][key]
        else:
            state["stats"][key] = value

    return change


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (set_step(-5), ["field step is -5, outside [0, 10]"]),
        (set_step(11), ["field step is 11, outside [0, 10]"]),
        (set_step(7), ["field scheduler.last_epoch is 10, expected step = 7"]),
        (set_step("10"), ["field step must be an integer"]),
        (set_step(10.0), ["field step must be an integer"]),
        (set_step(True), ["field step must be an integer"]),
        (set_stats("best", delete=True), ["field stats is missing stats.best"]),
        (set_stats("elapsed", delete=True), ["stats.elapsed"]),
        (set_stats("best", "0.1"), ["field stats.best must be a real number"]),
        (set_stats("epoch_count", 1.0), ["field stats.epoch_count must be an integer"]),
        (set_stats("epoch_count", 3), ["field stats.epoch_count is 3"]),
        (set_stats("epoch_sum", float("nan")), ["field stats.epoch_sum must be finite"]),
        (set_stats("elapsed", -1.0), ["field stats.elapsed must be finite and >= 0"]),
        (set_stats("last_epoch", float("inf")), ["field stats.last_epoch must be finite"]),
        (set_stats("best", 1e9), ["field stats.best (1000000000.0) exceeds stats.last_epoch"]),
        (lambda s: s.__setitem__("stats", [1, 2]), ["field stats must be a dict"]),
        (lambda s: s.__setitem__("version", 7), ["field version is 7"]),
        (lambda s: s["config"].__setitem__("d", -1), ["field config is invalid"]),
        (lambda s: s.__setitem__("config_hash", "0" * 64), ["field config_hash"]),
        (lambda s: s["optimizer"]["state"][0].__setitem__("step", torch.tensor(11.0)), ["optimizer.state[0].step"]),
        (lambda s: s["optimizer"]["state"][1].__setitem__("step", torch.tensor(2.5)), ["optimizer.state[1].step"]),
    ],
)
def test_bad_fields_are_refused_naming_file_and_field(
    finished_run: Path, tmp_path: Path, change: Any, fragments: list[str]
) -> None:
    run = copy_run(finished_run, tmp_path / "run")
    path = forge(run, change)
    one_line_error(lambda: load_checkpoint(path), str(path), *fragments)
    one_line_error(lambda: train(CONFIG, run, progress=False), str(path))
    one_line_error(lambda: load_trained_model(run), str(path))


def test_metrics_must_agree_with_the_checkpoint(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path / "run")
    metrics = run / "metrics.csv"
    lines = metrics.read_text().splitlines()
    assert [line.split(",")[0] for line in lines] == ["step", "4", "8", "10"]
    metrics.write_text("\n".join(lines[:2] + lines[3:]) + "\n")  # the row of step 8 lost
    one_line_error(lambda: train(CONFIG, run, progress=False), str(metrics), "do not match the checkpoint at step 10")
    last = lines[3].split(",")
    last[1] = "0.123"  # a last loss the checkpoint never saw (every other column as written)
    metrics.write_text("\n".join([*lines[:3], ",".join(last)]) + "\n")
    one_line_error(lambda: train(CONFIG, run, progress=False), str(metrics), "stats.last_epoch")
    metrics.write_text("\n".join([*lines, "x,y"]) + "\n")
    one_line_error(lambda: train(CONFIG, run, progress=False), str(metrics), "line 5")


def test_stale_temporaries_are_removed_and_the_run_resumes(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path / "run")
    stale = [run / ".checkpoint.pt.abc123.tmp", run / ".metrics.csv.x.tmp", run / ".result.json.y.tmp"]
    for path in stale:
        path.write_bytes(b"half a file")
    other = run / ".notes.txt.z.tmp"  # not one of ours: left alone
    other.write_bytes(b"keep")
    result = train(CONFIG, run, progress=False)
    assert result.steps == 10 and not any(path.exists() for path in stale) and other.exists()


def test_format_1_without_digest_loads_with_a_warning(finished_run: Path, tmp_path: Path) -> None:
    run = copy_run(finished_run, tmp_path / "run")
    path = run / "checkpoint.pt"
    state = raw_state(path)
    state["version"] = 1
    torch.save(state, path)  # format 1: no trailer
    with pytest.warns(UserWarning, match="format 1 has no integrity digest"):
        assert load_checkpoint(path)["step"] == 10
    with pytest.warns(UserWarning, match="format 1"):
        assert train(CONFIG, run, progress=False).steps == 10
    # A format-2 payload without its trailer is refused, not mistaken for format 1.
    state["version"] = CHECKPOINT_VERSION
    torch.save(state, path)
    one_line_error(lambda: load_checkpoint(path), str(path), "sha256 trailer missing or damaged")


def test_resume_from_a_checkpoint_inside_an_epoch_is_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped at step 7 (last checkpoint at step 5, one step into the second epoch), validated and resumed without
    warnings: the same result and bitwise the same parameters as an uninterrupted run."""
    straight = train(CONFIG, tmp_path / "straight", progress=False)
    calls = {"n": 0}
    original = TrainedRuns.losses

    def losses(self: TrainedRuns, batches: Batch) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return original(self, batches)

    with monkeypatch.context() as patch:
        patch.setattr(TrainedRuns, "losses", losses)
        with pytest.raises(KeyboardInterrupt):
            train(CONFIG, tmp_path / "resumed", progress=False)
    state = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")
    assert state["step"] == 5 and state["stats"]["epoch_count"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = train(CONFIG, tmp_path / "resumed", progress=False)
    assert dataclasses.replace(resumed, seconds=0) == dataclasses.replace(straight, seconds=0)
    a, b = raw_state(tmp_path / "straight" / "checkpoint.pt"), raw_state(tmp_path / "resumed" / "checkpoint.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
