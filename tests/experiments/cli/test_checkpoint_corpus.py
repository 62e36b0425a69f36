"""A hostile corpus for `attnrank import --from reference-encoder`: every file imports correctly or is refused cleanly.

Built in the test (`tests.experiments.cli.lightning_checkpoints`), nothing binary committed:

- checkpoints shaped as Lightning writes them for the reference code (Lightning 2 and 1.x layouts, zip and legacy
  torch files, float64 and float32, with and without class objects, AdamW states, schedulers, loops, callbacks,
  hyper-parameters): each must import, report what it skipped, and reproduce the reference forward;
- payloads (os.system, subprocess, eval, exec, getattr, __import__, import_module, open in a REDUCE; in zip and legacy
  torch files and raw pickles of protocols 2 and 4), zip bombs, truncations, storage bombs, hyper-parameters that
  contradict the shapes or the flags, a dict subclass the safe loader will not fill: each must be refused with exit
  status 2, exactly one line on stderr naming the file (and the global, for a payload), nothing on stdout, nothing
  written, nothing run (the commands would create a file PWNED in the working directory), nothing imported.

Precision: a float64 file imports as float64; our encoder then computes the reference forward in float64 to
`TOLERANCE` (the two sum the same products in a different order; measured 2e-16 to 7e-15 on outputs of norm ~1).
"""

from __future__ import annotations

import io
import json
import pickletools
import shutil
import struct
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from experiments.training.run_model import load_trained_model
from tests.experiments.cli.cli_fuzz import invoke, refusal_problems, snapshot
from tests.experiments.cli.lightning_checkpoints import (
    fake_module_names,
    fake_modules,
    lightning_checkpoint,
    payloads,
    save_checkpoint,
    with_defaultdict,
    zip_with_compressed_storage,
)
from tests.experiments.models.reference_checkpoints import random_reference_state, reference_forward

TOLERANCE = 1e-12
"""float64: about 4500 eps(float64) on outputs of norm ~1; the forwards differ by a few ulps per layer."""
FLOAT32_TOLERANCE = 512 * float(torch.finfo(torch.float32).eps)
"""A float32 file: the weights are the file's, the computation float32 (a few hundred eps32 through two layers)."""
SPEC = dict(d=4, num_heads=2, width=2, layers=2, ffn_dim=6, positional_dim=2, max_length=5)
HYPER = dict(dim=4, nheads=2, num_layers=2, width_multiplier=2, dim_feedforward=6, positional_dim=2, maxN=5, bias=True)
TASK = ["--task", "farthest"]


def _state(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {k: v.to(dtype) for k, v in random_reference_state(**SPEC, prefix="model.", seed=11).items()}


def good_checkpoints(root: Path) -> dict[str, tuple[Path, torch.dtype, list[str], set[str]]]:
    """label -> (file, stored dtype, extra flags, globals that must be reported as carried)."""
    lightning_2 = {"task.NearestPointDataset", "torch.optim.adamw.AdamW", "functools.partial"}
    lightning_1 = {
        "omegaconf.dictconfig.DictConfig",
        "lightning.pytorch.callbacks.model_checkpoint.ModelCheckpoint",
        "lightning.pytorch.callbacks.lr_monitor.LearningRateMonitor",
        "task.NearestPointDataset",
    }
    cases: dict[str, tuple[Path, torch.dtype, list[str], set[str]]] = {}
    for legacy in (False, True):
        suffix = "legacy" if legacy else "zip"
        path = root / f"lightning2-float64-{suffix}.ckpt"
        save_checkpoint(path, lightning_checkpoint(_state(torch.float64), HYPER), legacy=legacy)
        cases[path.name] = (path, torch.float64, [], lightning_2)
    path = root / "lightning1-float64.ckpt"  # hyper-parameters in a config object: not read, so the flags are given
    save_checkpoint(path, lightning_checkpoint(_state(torch.float64), HYPER, layout="lightning-1"))
    cases[path.name] = (path, torch.float64, ["--num-heads", "2"], lightning_1)
    path = root / "plain-float32.ckpt"  # no class object at all
    save_checkpoint(path, lightning_checkpoint(_state(torch.float32), HYPER, layout="plain"))
    cases[path.name] = (path, torch.float32, ["--num-heads", "2", "--N", "5"], set())
    path = root / "lightning2-rank-only.ckpt"  # the head count from rank (D / rank) instead of nheads
    hyper = {k: v for k, v in HYPER.items() if k != "nheads"} | {"rank": 3}
    save_checkpoint(path, lightning_checkpoint(_state(torch.float64), hyper), legacy=True)
    cases[path.name] = (path, torch.float64, [], lightning_2)
    return cases


def _import(path: Path, out: Path, extra: list[str], capsys: pytest.CaptureFixture[str]):  # noqa: ANN202
    argv = ["import", "--from", "reference-encoder", str(path), *TASK, *extra, "--out", str(out), "--json"]
    return invoke(argv, capsys)


def test_checkpoints_shaped_like_the_reference_code_import_and_compute_its_forward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    X = torch.randn(5, 4, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)  # (B, d, N)
    gaps: list[str] = []  # printed at the end: capsys hands what is printed to the next command's output
    for label, (path, dtype, extra, carried) in good_checkpoints(tmp_path).items():
        outcome = _import(path, tmp_path / f"run-{label}", extra, capsys)
        assert outcome.status == 0, (label, outcome.err)
        summary = json.loads(outcome.out)
        assert summary["dtype"] == str(dtype).removeprefix("torch."), label
        assert carried <= set(summary["skipped"]["globals"]), (label, summary["skipped"])
        assert {"optimizer_states", "loops", "callbacks", "lr_schedulers"} <= set(summary["skipped"]["entries"])
        assert (summary["heads"], summary["N"], summary["layers"], summary["width"]) == (4, 5, 2, 2), label
        assert not fake_module_names() & set(sys.modules), "a module named in the file was imported"
        _, _, model = load_trained_model(tmp_path / f"run-{label}")
        stored = {k: v.double() for k, v in _state(dtype).items()}  # the file's weights, computed in float64
        with torch.no_grad():
            ours = model.network(X.permute(0, 2, 1).to(dtype)).permute(0, 2, 1).double()  # (B, d, N)
            expected = reference_forward(stored, X, 2, prefix="model.")
        gap = float((ours - expected).abs().max())
        tolerance = TOLERANCE if dtype == torch.float64 else FLOAT32_TOLERANCE
        gaps.append(f"{label}: {dtype} import vs reference forward {gap:.3g} (tolerance {tolerance:.3g})")
        assert next(model.parameters()).dtype == dtype and gap < tolerance, (label, gap)
    with capsys.disabled():
        print("\n".join(gaps))


def _legacy_storage_bomb(raw: bytes) -> bytes:
    """A legacy torch file whose first storage claims 2^31 - 1 elements (16 GiB of float64) in a few hundred bytes."""
    stream = io.BytesIO(raw)
    for _ in range(3):  # past the magic number, protocol version and system information
        for opcode, _, _ in pickletools.genops(stream):
            if opcode.name == "STOP":
                break
    start = stream.tell()
    previous = None
    for opcode, _, position in pickletools.genops(stream):
        if opcode.name == "BINPERSID":
            break
        if opcode.name in ("BININT1", "BININT2", "BININT"):
            previous = (opcode, position)
    assert previous is not None
    opcode, position = previous
    width = {"BININT1": 1, "BININT2": 2, "BININT": 4}[opcode.name]
    at = start + position
    return raw[:at] + b"J" + struct.pack("<i", 2**31 - 1) + raw[at + 1 + width :]


def refused_inputs(root: Path) -> list[tuple[str, Path, list[str], str]]:
    """(label, file, extra flags, a phrase the one-line refusal must contain)."""
    corpus: list[tuple[str, Path, list[str], str]] = []
    good = lightning_checkpoint(_state(torch.float64), HYPER)

    def add(label: str, data: bytes, phrase: str, extra: list[str] | None = None) -> None:
        path = root / label
        path.write_bytes(data)
        corpus.append((label, path, extra or [], phrase))

    def saved(content: dict, legacy: bool = False) -> bytes:
        buffer = io.BytesIO()
        with fake_modules():
            torch.save(content, buffer, _use_new_zipfile_serialization=not legacy)
        return buffer.getvalue()

    for name, payload in payloads().items():
        qualname = name.rsplit(".", 1)[-1]
        add(f"payload-{name}-hyper.ckpt", saved({**good, "hyper_parameters": {**HYPER, "x": payload}}), qualname)
        add(f"payload-{name}-loops-legacy.ckpt", saved({**good, "loops": [payload]}, legacy=True), qualname)
        add(f"payload-{name}-raw2.pkl", pickle_dumps(payload, 2), qualname)
        add(f"payload-{name}-raw4.pkl", pickle_dumps({"state_dict": payload}, 4), qualname)
    magic = pickle_dumps(0x1950A86A20F9469CFC6C, 2)  # a legacy file's first pickle, then one of protocol 0
    add("payload-protocol0-second-pickle.ckpt", magic + b"cposix\nsystem\n(S'true'\ntR.", "posix.system")
    add("payload-callback-key.ckpt", saved({**good, "callbacks": {payloads()["posix.system"]: {}}}), "posix.system")
    add("payload-in-state-dict.ckpt", saved({**good, "state_dict": {"x": payloads()["builtins.eval"]}}), "eval")
    raw = saved(good)
    legacy = saved(good, legacy=True)
    add("zip-bomb.ckpt", zip_with_compressed_storage(raw, 64 << 20), "compressed")
    add("legacy-storage-bomb.ckpt", _legacy_storage_bomb(legacy), "not a readable torch file")
    for fraction in (0.0, 0.01, 0.3, 0.5, 0.9, 0.999):
        for kind, data in (("zip", raw), ("legacy", legacy)):
            cut = max(1, int(len(data) * fraction))
            add(f"truncated-{kind}-{fraction}.ckpt", data[:cut], "")
    archive = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as source, zipfile.ZipFile(archive, "w") as out:
        for info in source.infolist():
            out.writestr(info, source.read(info.filename))
        out.writestr("elsewhere/extra", b"x")
    add("zip-two-top-directories.ckpt", archive.getvalue(), "several top directories")
    for key, value, phrase in (
        ("nheads", 4, "nheads = 4"),  # does not divide D = 6 (a head count that does is a model, not a damage)
        ("num_layers", 3, "num_layers = 3"),
        ("maxN", 7, "maxN = 7"),
        ("width_multiplier", 1, "width_multiplier = 1"),
        ("dim_feedforward", 8, "dim_feedforward = 8"),
        ("bias", False, "bias = False"),
        ("nheads", "two", "nheads is 'two'"),
        ("rank", 2, "disagrees"),
    ):
        add(f"hyper-{key}-{value}.ckpt", saved({**good, "hyper_parameters": {**HYPER, key: value}}), phrase)
    wrong_dim = {**good, "datamodule_hyper_parameters": {**good["datamodule_hyper_parameters"], "dim": 5}}
    add("datamodule-dim.ckpt", saved(wrong_dim), "datamodule_hyper_parameters dim = 5")
    add(
        "flag-disagrees.ckpt", raw, "num_heads (--num-heads) = 3, but hyper_parameters nheads = 2", ["--num-heads", "3"]
    )
    add("defaultdict-in-loops.ckpt", saved(with_defaultdict(good)), "safe loader")
    from tests.experiments.cli.lightning_checkpoints import NearestPointDataset

    add("whole-object.ckpt", saved({"x": 1} | {"state_dict": NearestPointDataset()}), "task.NearestPointDataset")
    return corpus


def pickle_dumps(value: object, protocol: int) -> bytes:
    import pickle

    return pickle.dumps(value, protocol=protocol)


def test_every_hostile_checkpoint_is_refused_in_one_line_and_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus_dir, out, cwd = tmp_path / "corpus", tmp_path / "out", tmp_path / "cwd"
    for directory in (corpus_dir, out, cwd):
        directory.mkdir()
    monkeypatch.chdir(cwd)  # where a payload's command would leave PWNED
    corpus = refused_inputs(corpus_dir)
    before, out_before = snapshot(corpus_dir), snapshot(out)
    failures = []
    for label, path, extra, phrase in corpus:
        outcome = _import(path, out / "run", extra, capsys)
        problems = refusal_problems(outcome, out_before, snapshot(out))
        if not problems and str(path) not in outcome.err:
            problems.append("the message does not name the file")
        if not problems and phrase not in outcome.err:
            problems.append(f"the message does not say {phrase!r}")
        if problems:
            failures.append(f"{label}: {'; '.join(problems)} | {outcome.err.strip()[:240]}")
            shutil.rmtree(out / "run", ignore_errors=True)
    if snapshot(corpus_dir) != before:
        failures.append("corpus files changed")
    if any(cwd.iterdir()):
        failures.append(f"something ran: {sorted(p.name for p in cwd.iterdir())}")
    if fake_module_names() & set(sys.modules):
        failures.append("a module named in a file was imported")
    print(f"hostile checkpoints: {len(corpus)} files, {len(failures)} accepted or refused improperly")
    assert len(corpus) >= 60 and not failures, "\n".join(failures)
