"""No hang: special files are refused before reading, a cluster address gets a bounded handshake, and work whose size
would take hours or exhaust memory is refused up front with the estimate.

The probe's cases: a FIFO given where a weight file or checkpoint is expected waited for ever; a --address that
answers but is not Ray ran for over five minutes (25 log lines, a store already written); an imported model with
N = 100,000,000 was analysed until the machine ran out of memory; sample counts of 1e11 ran for hours without output.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import pytest
import torch

import attnrank
from experiments.sweeps.backends import check_ray_address
from tests.experiments.cli.cli_fuzz import invoke, refusal_problems
from tests.experiments.models.reference_checkpoints import random_reference_state
from tests.hostile.common import TINY_FLAGS, FifoRescuer, copy_run, snapshot, train_short_run

THEORY_FLAGS = ["--task", "nearest", "--d", "3", "--N", "2", "--rank", "3", "--model", "theory"]


@pytest.fixture(scope="module")
def weight_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("weights") / "full.safetensors"
    attnrank.save_full_rank(path, 3, 10.0)
    return path


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_short_run(tmp_path_factory.mktemp("short") / "run")


def _refused(argv: list[str], root: Path, capsys: pytest.CaptureFixture[str], *names: str) -> str:
    before = snapshot(root)
    outcome = invoke(argv, capsys)
    assert refusal_problems(outcome, before, snapshot(root)) == [], outcome.err
    for name in names:
        assert name in outcome.err, outcome.err
    return outcome.err


# --- special files ---------------------------------------------------------------------------------------------------

WEIGHT_READERS = {
    "eval --weights": lambda f, out: ["eval", "--weights", str(f), "--samples", "100"],
    "export --weights": lambda f, out: ["export", "--weights", str(f), "--out", str(out / "x.safetensors")],
    "train --init": lambda f, out: ["train", *THEORY_FLAGS, "--steps", "2", "--init", str(f), "--out", str(out / "r")],
    "import --from torch-mha": lambda f, out: [
        "import", "--from", "torch-mha", str(f), "--num-heads", "1", "--out", str(out / "i.safetensors"),
    ],
    "train --config": lambda f, out: ["train", "--config", str(f), "--out", str(out / "r")],
    "import --from reference-encoder": lambda f, out: [
        "import", "--from", "reference-encoder", str(f), "--num-heads", "1", "--task", "nearest", "--N", "2",
        "--out", str(out / "imported"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("reader", WEIGHT_READERS)
def test_a_fifo_given_as_a_weight_file_is_refused_without_reading(
    reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = FifoRescuer(tmp_path / "w.safetensors")
    try:
        _refused(WEIGHT_READERS[reader](fifo.path, tmp_path), tmp_path, capsys, "w.safetensors")
    finally:
        fifo.close()
    assert not fifo.rescued, f"{reader} blocked on a FIFO"


@pytest.mark.parametrize("reader", ["eval --weights", "export --weights", "train --init"])
def test_a_device_given_as_a_weight_file_is_refused_without_reading(
    reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/zero never ends: reading it would fill the memory."""
    err = _refused(WEIGHT_READERS[reader](Path("/dev/zero"), tmp_path), tmp_path, capsys, "/dev/zero")
    assert "character device" in err


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("checkpoint.pt", ["analyze", "RUN", "--samples", "100"]),
        ("checkpoint.pt", ["train", *TINY_FLAGS, "--log-every", "5", "--checkpoint-every", "10"]
         + ["--schedule-steps", "40", "--steps", "20", "--eval-only", "--out", "RUN"]),
        ("import.json", ["analyze", "RUN", "--samples", "100"]),
        ("analysis.json", ["report", "RUN"]),
        ("config.json", ["report", "RUN"]),
    ],
)  # fmt: skip
def test_a_fifo_in_a_run_directory_is_refused_without_reading(
    name: str, argv: list[str], short_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(short_run, tmp_path / "run")
    (run / name).unlink(missing_ok=True)
    fifo = FifoRescuer(run / name)
    try:
        _refused([str(run) if a == "RUN" else a for a in argv], tmp_path, capsys, name)
    finally:
        fifo.close()
    assert not fifo.rescued, f"{argv[0]} blocked on the FIFO {name}"


# --- a cluster address -----------------------------------------------------------------------------------------------


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never answers (what a wrong service, or a stuck one, looks like)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture
def web_server() -> Iterator[int]:
    """An HTTP/1 server (it answers, but not as Ray does)."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


def test_a_listening_port_that_is_not_ray_is_refused_before_any_store(
    silent_listener: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    argv = ["sweep", "smoke", "--backend", "ray", "--address", f"127.0.0.1:{silent_listener}", "--out", str(out)]
    err = _refused(argv, tmp_path, capsys, "--address", "is not a Ray cluster")
    assert "no answer" in err and not out.exists()


def test_a_web_server_is_not_a_ray_cluster(web_server: int) -> None:
    with pytest.raises(ValueError, match="is not a Ray cluster.*it answered"):
        check_ray_address(f"ray://127.0.0.1:{web_server}", timeout=10.0)


def test_a_grpc_server_passes_the_handshake() -> None:
    """The positive control: a gRPC server (as a Ray head's GCS and client server are) answers the HTTP/2 preface
    with its SETTINGS frame, and the address is accepted."""
    grpc = pytest.importorskip("grpc")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        assert check_ray_address(f"127.0.0.1:{port}", timeout=10.0) == f"127.0.0.1:{port}"
        assert check_ray_address(f"ray://127.0.0.1:{port}", timeout=10.0) == f"ray://127.0.0.1:{port}"
    finally:
        server.stop(None)


# --- work too large to start -----------------------------------------------------------------------------------------


def test_analysing_an_import_with_a_huge_context_is_refused_with_the_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe's import: N = 100,000,000 (the encoder has no positional table, so the import itself is valid)."""
    source = tmp_path / "last.ckpt"
    state = random_reference_state(d=4, num_heads=2, width=2, layers=1, ffn_dim=8, seed=8)
    torch.save({"state_dict": {f"model.{k}": v.float() for k, v in state.items()}}, source)
    run = tmp_path / "imported"
    argv = ["import", "--from", "reference-encoder", str(source), "--num-heads", "2", "--task", "farthest"]
    assert invoke([*argv, "--N", "100000000", "--out", str(run)], capsys).status == 0
    err = _refused(["analyze", str(run)], tmp_path, capsys, "N = 100000000", "held-out samples need about")
    assert "PiB" in err


HUGE = str(10**11)
SAMPLE_FLAGS = {
    "eval --samples": lambda w, out: ["eval", "--weights", str(w), "--samples", HUGE],
    "train --eval-samples": lambda w, out: [
        "train", *THEORY_FLAGS, "--steps", "2", "--eval-only", "--eval-samples", HUGE, "--out", str(out / "r"),
    ],
    "construct random-features --fit-samples": lambda w, out: [
        "construct", "random-features", "--d", "3", "--heads", "4", "--fit-samples", HUGE,
        "--out", str(out / "rf.safetensors"),
    ],
    "figure depth --samples": lambda w, out: ["figure", "depth", "--samples", HUGE, "--out", str(out / "depth")],
}  # fmt: skip


@pytest.mark.parametrize("flag", SAMPLE_FLAGS)
def test_a_sample_count_of_1e11_is_refused_up_front(
    flag: str, weight_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typed = flag.split()[-1]
    _refused(SAMPLE_FLAGS[flag](weight_file, tmp_path), tmp_path, capsys, f"{typed} must be an integer in [")


def test_the_python_api_refuses_a_sample_count_of_1e11(weight_file: Path) -> None:
    with pytest.raises(ValueError, match=r"samples must be an integer in \[2, 1000000000\]"):
        attnrank.evaluate(weight_file, samples=10**11)
