"""Tests of `attnrank train` / `attnrank analyze`: output keys, kill-and-resume, bad input -> one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from constructions.full_rank import save_full_rank
from experiments.cli.main import main
from experiments.model_kinds import KIND_NAMES
from experiments.samplers import SAMPLER_NAMES
from theory.bounds import full_rank_error
from theory.monte_carlo import DEFAULT_Z

ROOT = Path(__file__).resolve().parents[3]
TINY_ARGS = ["--task", "farthest", "--d", "4", "--N", "3", "--rank", "4", "--ffn-dim", "16", "--batch-size", "16"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_train_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(
        ["train", *TINY_ARGS, "--steps", "20", "--log-every", "5", "--out", str(tmp_path), "--json"], capsys
    )
    assert status == 0
    result = json.loads(out)
    assert {"final_loss", "best_loss", "steps", "diverged"} <= set(result)
    assert result["steps"] == 20 and result["diverged"] is False
    assert result["best_loss"] <= result["final_loss"]
    saved = json.loads((tmp_path / "config.json").read_text())["config"]
    assert (saved["d"], saved["N"], saved["rank"], saved["ffn_dim"], saved["steps"]) == (4, 3, 4, 16, 20)
    status, out, _ = run_cli(["train", *TINY_ARGS, "--steps", "20", "--log-every", "5", "--out", str(tmp_path)], capsys)
    assert status == 0 and "final_loss" in out and "best_loss" in out  # text form; finished run is not retrained


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--d", "8", "--rank", "9"], "rank must be an integer in [1, 8]"),
        (["--d", "8", "--rank", "3"], "rank must divide d = 8"),
        (["--task", "nearest", "--keys", "orthonormal", "--d", "4", "--rank", "4", "--N", "5"], "N must be <= d = 4"),
        (["--positional", "concat"], "--positional-dim must be >= 1"),
        (["--model", "theory", "--positional", "additive"], "positional must be 'none' or 'concat' for model 'theory'"),
        (["--lr", "-1"], "lr must be"),
        (["--schedule-steps", "1"], "--schedule-steps must be 0 (the schedule ends at steps) or >= steps = 2, got 1"),
        (["--warmup-steps", "5"], "--warmup-steps must be < the schedule's length 2"),
        (["--layer-init", "tied"], "--layer-init must be one of 'independent', 'copies', got 'tied'"),
        (["--model", "theory", "--layer-init", "copies"], "--layer-init must be 'independent' unless model"),
        (["--sampler", "gpu"], f"--sampler must be one of {', '.join(map(repr, SAMPLER_NAMES))}, got 'gpu'"),
        (["--train-batches", "-1"], "--train-batches must be an integer in [0, 2], got -1"),
        (["--train-batches", "3"], "--train-batches must be an integer in [0, 2], got 3"),
        (["--train-batches", "2", "--log-every", "1"], "--log-every must equal train_batches = 2"),
        (["--data-seed", "-1"], "--data-seed must be an integer in [0, 9223372036854775807], got -1"),
        (["--sampler", "reference"], "--train-batches must be >= 1 with sampler 'reference'"),
        (["--sampler", "reference", "--train-batches", "2", "--task", "nearest", "--keys", "iid"], "--sampler must"),
        (["--matmul-precision", "tf32"], "--matmul-precision must be one of 'highest', 'high', got 'tf32'"),
        (["--capture", "yes"], "--capture must be one of 'none', 'graph', 'compile', got 'yes'"),
        (["--task", "biased", "--N", "2", "--sampler", "device"], "--sampler must be 'cpu' for the biased task"),
        (["--capture", "graph", "--compile"], "--capture must be 'none' when compile is set"),
    ],
)
def test_bad_combinations_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    status, out, err = run_cli(
        ["train", "--steps", "2", "--ffn-dim", "8", *args, "--out", str(tmp_path / "run")], capsys
    )
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("attnrank train: error:") and message in err, err
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_a_paper_schedule_prefix_is_extended_by_rerunning_with_more_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--warmup-steps/--schedule-steps from the command line: 20 steps of a 40-step schedule, then 40 (the flags'
    bitwise check against an uninterrupted run is tests/experiments/training/test_schedule_extension.py)."""
    schedule = ["--schedule-steps", "40", "--warmup-steps", "4", "--log-every", "5", "--json"]
    status, out, _ = run_cli(["train", *TINY_ARGS, *schedule, "--steps", "20", "--out", str(tmp_path)], capsys)
    assert status == 0 and json.loads(out)["steps"] == 20
    config = json.loads((tmp_path / "config.json").read_text())["config"]
    assert (config["warmup_steps"], config["warmup_fraction"], config["schedule_steps"]) == (4, 0.0, 40)
    status, out, _ = run_cli(["train", *TINY_ARGS, *schedule, "--steps", "40", "--out", str(tmp_path)], capsys)
    assert status == 0 and json.loads(out)["steps"] == 40
    rows = (tmp_path / "metrics.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in rows] == list(range(5, 45, 5))


def test_warmup_steps_and_fraction_are_exclusive_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--warmup-steps", "1", "--warmup-fraction", "0.1", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert "--warmup-fraction: not allowed with argument --warmup-steps" in err and not (tmp_path / "run").exists()


def test_unknown_task_and_choices_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag, value, message in (
        ("--task", "sorting", "task must be one of 'nearest', 'farthest', 'biased', 'icl', got 'sorting'"),
        ("--model", "mlp", f"model must be one of {', '.join(map(repr, KIND_NAMES))}, got 'mlp'"),
        ("--attention", "linear", "attention must be one of"),
    ):
        status, _, err = run_cli(["train", flag, value, "--out", str(tmp_path / "run")], capsys)
        assert status == 2 and err.count("\n") == 1 and message in err, err


def test_init_file_mismatch_and_corruption_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    weights = save_full_rank(tmp_path / "full.safetensors", 4, 10.0)
    common = ["train", "--task", "nearest", "--N", "2", "--keys", "orthonormal", "--model", "theory", "--steps", "2"]
    status, _, err = run_cli(
        [
            *common,
            "--d",
            "6",
            "--rank",
            "6",
            "--temperature",
            "10",
            "--init",
            str(weights),
            "--out",
            str(tmp_path / "a"),
        ],
        capsys,
    )
    assert status == 2 and "d is 4 in the file but 6 in the config" in err, err
    status, _, err = run_cli(
        [
            *common,
            "--d",
            "4",
            "--rank",
            "4",
            "--temperature",
            "3",
            "--init",
            str(weights),
            "--out",
            str(tmp_path / "b"),
        ],
        capsys,
    )
    assert status == 2 and "temperature is 10.0 in the file but 3.0 in the config" in err, err
    status, _, err = run_cli(
        [
            *common,
            "--d",
            "4",
            "--rank",
            "4",
            "--attention",
            "hardmax",
            "--init",
            str(weights),
            "--out",
            str(tmp_path / "c"),
        ],
        capsys,
    )
    assert status == 2 and "attention is softmax in the file but hardmax in the config" in err, err
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(weights.read_bytes()[:100])
    status, _, err = run_cli(
        [
            *common,
            "--d",
            "4",
            "--rank",
            "4",
            "--temperature",
            "10",
            "--init",
            str(broken),
            "--out",
            str(tmp_path / "d"),
        ],
        capsys,
    )
    assert status == 2 and "init weight file refused" in err and "broken.safetensors" in err, err
    status, _, err = run_cli(
        [
            *common,
            "--d",
            "4",
            "--rank",
            "4",
            "--init",
            str(tmp_path / "missing.safetensors"),
            "--out",
            str(tmp_path / "e"),
        ],
        capsys,
    )
    assert status == 2 and "--init is not an existing file (not found)" in err
    status, _, err = run_cli(
        [
            *common,
            "--d",
            "4",
            "--rank",
            "4",
            "--temperature",
            "10",
            "--init",
            str(weights),
            "--model",
            "encoder",
            "--out",
            str(tmp_path / "f"),
        ],
        capsys,
    )
    assert status == 2 and "--init must be used with model 'theory'" in err


def test_corrupt_checkpoint_is_refused_by_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["train", *TINY_ARGS, "--steps", "10", "--checkpoint-every", "5", "--out", str(tmp_path)]
    assert run_cli(args, capsys)[0] == 0
    (tmp_path / "result.json").unlink()
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    status, _, err = run_cli(args, capsys)
    assert status == 2 and "corrupt or unreadable checkpoint" in err and "checkpoint.pt" in err


def _subprocess_train(out: Path, extra: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "experiments.cli.main", "train", *TINY_ARGS, *extra, "--out", str(out), "--json"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_then_rerun_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    """Kill a training process (SIGKILL) once a checkpoint exists, re-run the same command: bitwise the same result."""
    extra = ["--steps", "300", "--checkpoint-every", "20", "--log-every", "10", "--seed", "3"]
    killed = _subprocess_train(tmp_path / "killed", extra)
    checkpoint = tmp_path / "killed" / "checkpoint.pt"
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert killed.poll() is None, "the run finished before it could be killed; raise --steps"
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert killed.returncode == -signal.SIGKILL
    step_at_kill = torch.load(checkpoint, weights_only=True)["step"]
    assert 0 < step_at_kill < 300 and not (tmp_path / "killed" / "result.json").exists()

    resumed = _subprocess_train(tmp_path / "killed", extra)
    straight = _subprocess_train(tmp_path / "straight", extra)
    out_resumed, err_resumed = resumed.communicate(timeout=300)
    out_straight, err_straight = straight.communicate(timeout=300)
    assert resumed.returncode == 0, err_resumed
    assert straight.returncode == 0, err_straight
    a, b = json.loads(out_resumed), json.loads(out_straight)
    assert (a["final_loss"], a["best_loss"], a["steps"]) == (b["final_loss"], b["best_loss"], b["steps"])
    pa = torch.load(tmp_path / "killed" / "checkpoint.pt", weights_only=True)["model"]
    pb = torch.load(tmp_path / "straight" / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(pa[k], pb[k]) for k in pb)
    print(f"killed at checkpoint step {step_at_kill}; final loss {a['final_loss']!r} == {b['final_loss']!r}")


def test_analyze_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "train",
        "--task",
        "nearest",
        "--d",
        "4",
        "--N",
        "2",
        "--keys",
        "orthonormal",
        "--rank",
        "2",
        "--model",
        "theory",
        "--steps",
        "10",
        "--batch-size",
        "16",
        "--out",
        str(tmp_path),
    ]
    assert run_cli(args, capsys)[0] == 0
    status, out, _ = run_cli(["analyze", str(tmp_path), "--samples", "2000", "--json"], capsys)
    assert status == 0
    report = json.loads(out)
    assert report["layers"][0]["heads"] == 2 and len(report["layers"][0]["per_head"]) == 2
    assert report["theorem2"]["H"] == 2 and report["population_samples"] == 2000
    assert (tmp_path / "analysis.json").exists()
    status, out, _ = run_cli(["analyze", str(tmp_path), "--samples", "200"], capsys)
    assert status == 0 and "angle_to_I_deg" in out and "bound_lower" in out
    status, _, err = run_cli(["analyze", str(tmp_path / "nowhere")], capsys)
    assert status == 2 and "run directory not found" in err


def test_init_file_with_a_shorter_positional_table_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A multi-layer file (layout of constructions/weights_io.py) holds N = 2 context codes; N = 3 must be refused."""
    import numpy as np

    from constructions.weights_io import FORMAT_VERSION, save_weights

    d, p, N, H, r = 4, 2, 2, 3, 2
    D = d + p
    rng = np.random.default_rng(0)
    tensors = {
        "layers.0.Q": rng.standard_normal((H, r, D)),
        "layers.0.K": rng.standard_normal((H, r, D)),
        "layers.0.V": rng.standard_normal((H, D, D)),
        "context_codes": rng.standard_normal((N, p)),
        "query_code": rng.standard_normal(p),
        "readout": np.eye(d, D),
    }
    metadata = {
        "construction": "test",
        "layout": "multi-layer",
        "d": d,
        "p": p,
        "N": N,
        "L": 1,
        "H": H,
        "r": r,
        "temperature": 2.0,
        "predicted_error": float("nan"),
        "version": FORMAT_VERSION,
        "update": "query",
    }
    path = save_weights(tmp_path / "ml.safetensors", tensors, metadata)
    common = ["train", "--task", "nearest", "--keys", "iid", "--d", "4", "--rank", "2", "--model", "theory"]
    common += ["--positional", "concat", "--positional-dim", "2", "--temperature", "2", "--value", "full"]
    common += ["--steps", "2", "--batch-size", "8", "--init", str(path)]
    status, _, err = run_cli([*common, "--N", "3", "--out", str(tmp_path / "a")], capsys)
    assert status == 2 and "N = 3 is larger than the file's positional table (N = 2)" in err, err
    status, out, err = run_cli([*common, "--N", "2", "--out", str(tmp_path / "b"), "--json"], capsys)
    assert status == 0, err
    assert json.loads(out)["steps"] == 2


def test_init_construction_recipe_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--init construction:full-rank@100 needs no file: the starting model is Fact 1's head (its fresh error,
    n = 20 000, within 4 s.e. of the exact full_rank_error(8, 100) = 0.00556); a recipe that does not fit the run
    exits 2 with one line naming init and writes nothing."""
    base = ["train", "--task", "nearest", "--N", "2", "--keys", "orthonormal", "--model", "theory", "--d", "8"]
    out = tmp_path / "run"
    status, stdout, _ = run_cli([*base, "--rank", "8", "--init", "construction:full-rank@100", "--eval-only",
                                 "--eval-samples", "20000", "--out", str(out), "--json"], capsys)  # fmt: skip
    start = json.loads(stdout)
    exact = full_rank_error(8, 100.0)
    assert (
        status == 0
        and start["source"] == "init"
        and abs(start["population_error"] - exact) <= DEFAULT_Z * start["population_stderr"]
    )
    status, _, stderr = run_cli([*base, "--rank", "4", "--init", "construction:full-rank", "--out", str(out)], capsys)
    assert status == 2 and len(stderr.strip().splitlines()) == 1 and "init" in stderr and "rank = 8" in stderr
    assert not out.exists()


def test_device_path_flags_are_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--sampler device --matmul-precision high --capture graph on the CPU: trained, recorded (capture inactive)."""
    flags = ["--sampler", "device", "--matmul-precision", "high", "--capture", "graph", "--json"]
    status, out, _ = run_cli(
        ["train", *TINY_ARGS, "--steps", "4", "--log-every", "2", *flags, "--out", str(tmp_path)], capsys
    )
    assert status == 0 and json.loads(out)["steps"] == 4
    record = json.loads((tmp_path / "config.json").read_text())
    assert (record["config"]["sampler"], record["config"]["matmul_precision"]) == ("device", "high")
    assert record["step_path"]["capture"] == "none" and record["step_path"]["matmul_precision"] == "high"


def test_eval_only_takes_the_flags_of_the_runs_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41: --eval-only on a prefix of a schedule, given the extension's --steps, scores the prefix's checkpoint
    (the extension names the same run); a config that is neither the run nor its extension is still refused."""
    schedule = ["--schedule-steps", "40", "--warmup-steps", "4", "--log-every", "5", "--json"]
    status, _, _ = run_cli(["train", *TINY_ARGS, *schedule, "--steps", "20", "--out", str(tmp_path)], capsys)
    assert status == 0
    status, out, err = run_cli(
        [
            "train",
            *TINY_ARGS,
            *schedule,
            "--steps",
            "40",
            "--eval-only",
            "--eval-samples",
            "50",
            "--out",
            str(tmp_path),
        ],
        capsys,
    )
    assert status == 0, err
    assert (json.loads(out)["step"], json.loads(out)["source"]) == (20, "checkpoint")
    status, _, err = run_cli(
        ["train", *TINY_ARGS, *schedule, "--steps", "40", "--lr", "0.02", "--eval-only", "--out", str(tmp_path)], capsys
    )
    assert status == 2 and "belongs to a different config" in err
