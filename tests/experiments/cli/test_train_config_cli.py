"""`attnrank train --config FILE` and `--print-config` (issue 49): a run's configuration as a file, YAML or JSON (the
config.json a run writes included), flags typed with it overriding it, and the same one-line refusals as the flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.cli.main import main
from experiments.config import TrainConfig

TINY = ["--task", "farthest", "--d", "4", "--N", "3", "--rank", "4", "--ffn-dim", "16", "--batch-size", "8"]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_runs_own_config_json_trains_the_same_run_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    status, out, _ = _cli(["train", *TINY, "--steps", "20", "--log-every", "5", "--device", "cpu", "--out", str(first),
                           "--no-progress", "--json"], capsys)  # fmt: skip
    assert status == 0
    trained = json.loads(out)
    status, out, _ = _cli(["train", "--config", str(first / "config.json"), "--print-config", "--json"], capsys)
    assert status == 0
    record = json.loads((first / "config.json").read_text())
    assert json.loads(out) == record["config"]
    status, out, _ = _cli(["train", "--config", str(first / "config.json"), "--out", str(second), "--json"], capsys)
    assert status == 0
    again = json.loads(out)
    assert json.loads((second / "config.json").read_text())["config_hash"] == record["config_hash"]
    assert (again["best_loss"], again["final_loss"]) == (trained["best_loss"], trained["final_loss"])  # CPU: bitwise


def test_flags_typed_with_a_file_override_it_and_untyped_defaults_do_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("d: 8\nN: 4\nrank: 8\nsteps: 300\nlr: 0.003\nbetas: [0.8, 0.9]\nwarmup_steps: 30\n"
                      "warmup_fraction: 0\n")  # fmt: skip
    status, out, _ = _cli(
        ["train", "--config", str(config), "--rank", "4", "--beta2", "0.99", "--print-config"], capsys
    )
    assert status == 0
    resolved = yaml.safe_load(out)
    assert (resolved["d"], resolved["rank"], resolved["lr"], resolved["betas"]) == (8, 4, 0.003, [0.8, 0.99])
    assert (resolved["warmup_steps"], resolved["warmup_fraction"], resolved["steps"]) == (30, 0.0, 300)
    assert resolved["ffn_dim"] == TrainConfig().ffn_dim  # neither given: the default
    printed = tmp_path / "printed.yaml"
    printed.write_text(out)
    status, again, _ = _cli(["train", "--config", str(printed), "--print-config"], capsys)
    assert status == 0 and again == out  # what it prints, it reads back
    status, out, _ = _cli(["train", "--config", str(config), "--warmup-fraction", "0.1", "--print-config"], capsys)
    assert status == 0 and (yaml.safe_load(out)["warmup_steps"], yaml.safe_load(out)["warmup_fraction"]) == (0, 0.1)
    status, out, _ = _cli(["train", "--config", str(config), "--train-batches", "10", "--print-config"], capsys)
    assert status == 0 and (yaml.safe_load(out)["train_batches"], yaml.safe_load(out)["log_every"]) == (10, 10)


@pytest.mark.parametrize(
    ("text", "name", "flags", "message"),
    [
        ("lr: 20\n", "bad.yaml", [], "bad.yaml: lr must be a real number with 0.0 < value <= 10.0, got 20"),
        ("lr: 0.01\n", "good.yaml", ["--lr", "20"], "--lr must be a real number with 0.0 < value <= 10.0, got 20"),
        ("d: 8\nrank: 3\n", "bad.yaml", [], "bad.yaml: rank must divide d = 8"),
        ("stepz: 3\n", "bad.yaml", [], "bad.yaml: stepz is no run field (fields: task, d, N"),
        (
            "lr: 0.1\nlr: 0.2\n",
            "bad.yaml",
            [],
            "bad.yaml: not valid YAML: key 'lr' appears twice in one mapping (line 2",
        ),
        ('{"lr": 0.1, "lr": 0.2}', "bad.json", [], "bad.json: key 'lr' appears twice in one object"),
        ("[1, 2]\n", "bad.yaml", [], "bad.yaml: must hold a mapping of keys to values at the top, got list"),
        ("lr: [0.1\n", "bad.yaml", [], "bad.yaml: not valid YAML"),
        ("lr: !!python/object:os.system x\n", "bad.yaml", [], "bad.yaml: not valid YAML"),
        ("sampler: reference\ntrain_batches: 3\nlog_every: 4\n", "bad.yaml", [], "bad.yaml: log_every must equal"),
        ("d: 8\n", "good.yaml", [], "--out is required (the run directory), unless --print-config"),
    ],
)
def test_bad_files_and_values_are_one_line_exit_2_naming_file_or_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, name: str, flags: list[str], message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    status, out, err = _cli(["train", "--config", str(path), *flags], capsys)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and out == "", err
    assert lines[0].startswith("attnrank train: error: ") and message in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_missing_or_unreadable_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _cli(["train", "--config", str(tmp_path / "nothing.yaml"), "--print-config"], capsys)
    assert status == 2 and "nothing.yaml: configuration file not found" in err
    status, _, err = _cli(["train", "--config", str(tmp_path), "--print-config"], capsys)
    assert status == 2 and "is a directory, not a configuration file" in err
    binary = tmp_path / "weights.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    status, _, err = _cli(["train", "--config", str(binary), "--print-config"], capsys)
    assert status == 2 and "weights.yaml: not a text file" in err
