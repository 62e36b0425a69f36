"""Fuzz: damaged files are refused, never trusted: weight files, checkpoints and results stores.

Each corpus is made in the test from real small files (a weight file of every construction, a finished training run,
a results store) by truncating them, flipping bytes, rewriting metadata or tensors and relabelling layouts; every
damaged copy is fed to the commands that read it, which must refuse it with one line on stderr naming the file,
exit status 2, no traceback and no file created or changed.
"""

from __future__ import annotations

import json
import math
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file

from tests.experiments.cli.cli_fuzz import invoke, refusal_problems, snapshot
from tests.experiments.models.reference_checkpoints import random_reference_state

# --- weight files ----------------------------------------------------------------------------------------------------

GOOD_FILES = {
    "full-rank": ["construct", "full-rank", "--d", "3", "--temperature", "10"],
    "random-features": ["construct", "random-features", "--d", "3", "--heads", "4"],
    "majority-vote": ["construct", "majority-vote", "--d", "3", "--heads", "3", "--no-predict"],
    "biased": ["construct", "biased", "--d", "2", "--m", "2"],
}

METADATA_DAMAGE: list[tuple[str, str]] = [
    ("d", "3.0"),
    ("d", "-1"),
    ("d", "0"),
    ("d", "x"),
    ("d", ""),
    ("d", " 3"),
    ("d", "3\n"),
    ("d", "1e9"),
    ("d", "4"),
    ("d", "99999999999999"),
    ("r", "99"),
    ("r", "0"),
    ("r", "1,1"),
    ("H", "1,1"),
    ("H", "0"),
    ("H", "-1"),
    ("H", "7"),
    ("H", "1,"),
    ("H", ""),
    ("L", "1000000000"),
    ("L", "0"),
    ("L", "3"),
    ("temperature", "nan"),
    ("temperature", "-1"),
    ("temperature", "0"),
    ("temperature", "1e39"),
    ("temperature", "-inf"),
    ("temperature", "x"),
    ("temperature", "infinity"),
    ("predicted_error", "-1"),
    ("predicted_error", "inf"),
    ("predicted_error", "x"),
    ("predicted_error", "-inf"),
    ("task", "farthest"),
    ("task", "nope"),
    ("task", ""),
    ("layout", "conv"),
    ("layout", ""),
    ("version", "2"),
    ("version", ""),
    ("update", "none"),
    ("N", "0"),
    ("N", "1000000000000000"),
    ("keys", "weird"),
    ("p", "-1"),
    ("p", "100"),
    ("bias_m", "x"),
    ("bias_m", "1000000000"),
    ("bias_m", "0"),
    ("bias_delta", "nan"),
    ("bias_delta", "-1"),
    ("bias_delta", "0"),
]


def _read(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    with safe_open(str(path), framework="np") as handle:
        return {k: handle.get_tensor(k) for k in handle.keys()}, dict(handle.metadata() or {})


def _write(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path), metadata=metadata)


def _data_start(raw: bytes) -> int:
    return 8 + struct.unpack("<Q", raw[:8])[0]


def _byte_damages(raw: bytes) -> dict[str, bytes]:
    """Truncations and flips that no reader may accept (flips only where they cannot leave a valid file)."""
    start = _data_start(raw)
    damages = {f"truncated-{n}": raw[:n] for n in (0, 4, 8, 20, start - 1, start + 3, len(raw) - 1)}
    damages["length-prefix-ff"] = b"\xff" * 8 + raw[8:]
    damages["length-prefix-short"] = struct.pack("<Q", 2) + raw[8:]
    damages["brace-flipped"] = raw[:8] + bytes([raw[8] ^ 0xFF]) + raw[9:]
    damages["header-garbage"] = raw[:8] + b"\x00" * (start - 8) + raw[start:]
    damages["appended-garbage"] = raw + b"\x00garbage"
    exponent = bytearray(raw)
    exponent[start + 6 : start + 8] = b"\xf0\x7f"  # first float64 -> inf (exponent all ones)
    damages["value-to-inf"] = bytes(exponent)
    huge = bytearray(raw)
    huge[start + 7] = 0x7F  # first float64 -> about 1e300 or nan: beyond float32 either way
    huge[start + 6] |= 0xE0
    damages["value-beyond-float32"] = bytes(huge)
    damages["garbage"] = b"not a safetensors file at all" * 3
    return damages


def _tensor_damages(tensors: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    first = sorted(tensors)[0]
    damages = {}
    for label, value in (("nan", np.nan), ("inf", np.inf), ("1e39", 1e39), ("-1e300", -1e300)):
        changed = dict(tensors)
        array = tensors[first].copy()
        array.flat[0] = value
        changed[first] = array
        damages[f"{first}={label}"] = changed
    damages["float32"] = {**tensors, first: tensors[first].astype(np.float32)}
    damages["missing"] = {k: v for k, v in tensors.items() if k != first}
    damages["extra"] = {**tensors, "extra": np.zeros(1)}
    damages["reshaped"] = {**tensors, first: tensors[first].reshape(-1)}
    damages["empty"] = {**tensors, first: np.zeros((0,))}
    return damages


def damaged_weight_files(root: Path, good: dict[str, Path]) -> list[Path]:
    """Write the corpus under root (one file per damage per construction) and return the paths."""
    corpus = []
    for kind, path in good.items():
        raw = path.read_bytes()
        for label, data in _byte_damages(raw).items():
            target = root / f"{kind}.{label}.safetensors"
            target.write_bytes(data)
            corpus.append(target)
        tensors, metadata = _read(path)
        for key, value in METADATA_DAMAGE:
            if key not in metadata and key not in ("task", "keys", "N", "L", "p", "update"):
                continue
            target = root / f"{kind}.meta-{key}={value.encode().hex()}.safetensors"
            _write(target, tensors, {**metadata, key: value})
            corpus.append(target)
        for key in ("construction", "d", "temperature", "predicted_error", "layout"):
            target = root / f"{kind}.meta-without-{key}.safetensors"
            _write(target, tensors, {k: v for k, v in metadata.items() if k != key})
            corpus.append(target)
        other = "single-layer" if metadata["layout"] == "multi-layer" else "multi-layer"
        relabelled = {**metadata, "layout": other}
        if other == "multi-layer":
            relabelled.update(p="0", L="1", update="query", N=metadata.get("N", "2"))
        target = root / f"{kind}.relabelled-{other}.safetensors"
        _write(target, tensors, relabelled)
        corpus.append(target)
        for label, changed in _tensor_damages(tensors).items():
            target = root / f"{kind}.tensor-{label}.safetensors"
            _write(target, changed, metadata)
            corpus.append(target)
    (root / "directory.safetensors").mkdir()
    corpus.append(root / "directory.safetensors")
    return corpus


@pytest.fixture(scope="module")
def weight_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("weights")
    good = {}
    from experiments.cli.main import main

    for kind, argv in GOOD_FILES.items():
        good[kind] = root / f"good-{kind}.safetensors"
        assert main([*argv, "--out", str(good[kind])]) == 0
    corpus_dir = root / "corpus"
    corpus_dir.mkdir()
    return root, damaged_weight_files(corpus_dir, good)


def test_the_weight_file_corpus_is_large(weight_corpus) -> None:
    _, corpus = weight_corpus
    print(f"damaged weight files: {len(corpus)}")
    assert len(corpus) >= 250


READERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "eval": lambda f, out: ["eval", "--weights", str(f), "--samples", "20"],
    "export": lambda f, out: ["export", "--weights", str(f), "--out", str(out / "exported.safetensors")],
    "train --init": lambda f, out: [
        "train",
        "--model",
        "theory",
        "--task",
        "nearest",
        "--d",
        "3",
        "--N",
        "2",
        "--rank",
        "3",
        "--attention",
        "softmax",
        "--temperature",
        "10",
        "--steps",
        "2",
        "--init",
        str(f),
        "--out",
        str(out / "run"),
        "--no-progress",
    ],
}


READS_ONLY_FULL_RANK = {"train --init"}
"""Readers run on the full-rank part of the corpus only (a training run per file is slower; the loader is shared)."""


@pytest.mark.parametrize("reader", list(READERS))
def test_the_readers_accept_the_undamaged_file(weight_corpus, reader, capsys, tmp_path) -> None:
    """Positive control: the argv each reader gets accepts the good full-rank file, so a refusal means damage."""
    root, _ = weight_corpus
    outcome = invoke(READERS[reader](root / "good-full-rank.safetensors", tmp_path), capsys)
    assert outcome.status == 0, outcome.err


@pytest.mark.parametrize("reader", list(READERS))
def test_every_damaged_weight_file_is_refused(weight_corpus, reader, capsys, tmp_path) -> None:
    root, corpus = weight_corpus
    if reader in READS_ONLY_FULL_RANK:
        corpus = [p for p in corpus if p.name.startswith("full-rank.")]
    failures = []
    before = snapshot(root)  # the corpus itself: compared once at the end (hashing it per case is slow)
    out_before = snapshot(tmp_path)
    for path in corpus:
        outcome = invoke(READERS[reader](path, tmp_path), capsys)
        problems = refusal_problems(outcome, out_before, snapshot(tmp_path))
        if not problems and path.name not in outcome.err:
            problems.append("the message does not name the file")
        if problems:
            failures.append(f"{path.name}: {'; '.join(problems)} | {outcome.err.strip()[:160]}")
            shutil.rmtree(tmp_path, ignore_errors=True)
            tmp_path.mkdir(exist_ok=True)
    after = snapshot(root)
    if after != before:
        failures.append(f"corpus files changed: {sorted(k for k in after if before.get(k) != after[k])[:5]}")
    print(f"{reader}: {len(corpus)} damaged weight files, {len(failures)} accepted or refused improperly")
    assert not failures, "\n".join(failures)


# --- checkpoints -----------------------------------------------------------------------------------------------------

RUN_ARGS = ["train", "--task", "farthest", "--d", "4", "--N", "3", "--rank", "4", "--ffn-dim", "8"]
RUN_ARGS += ["--batch-size", "4", "--checkpoint-every", "2", "--log-every", "2", "--no-progress"]
"""A tiny run: farthest, d = 4, N = 3, batches of 4 (``--steps`` and ``--out`` are added per copy)."""


def _run_argv(out: Path) -> list[str]:
    return [*RUN_ARGS, "--out", str(out)]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from experiments.cli.main import main

    out = tmp_path_factory.mktemp("run") / "run"
    assert main([*_run_argv(out), "--steps", "4"]) == 0
    assert (out / "checkpoint.pt").is_file() and (out / "result.json").is_file()
    return out


def _checkpoint_damages(raw: bytes) -> dict[str, bytes]:
    middle = len(raw) // 2
    damages = {f"truncated-{n}": raw[:n] for n in (0, 10, middle, len(raw) - 1, len(raw) - 70)}
    for offset in (0, 100, middle, len(raw) - 80, len(raw) - 5):
        flipped = bytearray(raw)
        flipped[offset] ^= 0x01
        damages[f"flip-{offset}"] = bytes(flipped)
    damages["garbage"] = b"\x00" * 64
    damages["appended"] = raw + b"x"
    return damages


def test_an_undamaged_copy_resumes_and_analyzes(finished_run, capsys, tmp_path) -> None:
    """Positive control for the checkpoint corpus: the same commands accept the intact copy."""
    copy = tmp_path / "intact"
    shutil.copytree(finished_run, copy)
    (copy / "result.json").unlink()
    assert invoke([*_run_argv(copy), "--steps", "4"], capsys).status == 0
    assert (copy / "result.json").is_file()
    assert invoke(["analyze", str(copy), "--samples", "100"], capsys).status == 0


def test_every_damaged_checkpoint_is_refused(finished_run, capsys, tmp_path) -> None:
    """A resumed run (result.json removed) and `analyze` refuse every damaged checkpoint / config and write nothing."""
    raw = (finished_run / "checkpoint.pt").read_bytes()
    failures = []
    cases = 0
    for label, data in _checkpoint_damages(raw).items():
        for command in ("resume", "analyze"):
            copy = tmp_path / f"{label}-{command}"
            shutil.copytree(finished_run, copy)
            (copy / "checkpoint.pt").write_bytes(data)
            if command == "resume":
                (copy / "result.json").unlink()
                argv = [*_run_argv(copy), "--steps", "4"]
            else:
                argv = ["analyze", str(copy), "--samples", "100"]
            before = snapshot(copy)
            outcome = invoke(argv, capsys)
            cases += 1
            problems = refusal_problems(outcome, before, snapshot(copy))
            if problems:
                failures.append(f"{label} ({command}): {'; '.join(problems)} | {outcome.err.strip()[:160]}")
    config = json.loads((finished_run / "config.json").read_text())
    for label, text in {"config-garbage": "{not json", "config-empty": "", "config-list": "[]"}.items():
        copy = tmp_path / label
        shutil.copytree(finished_run, copy)
        (copy / "config.json").write_text(text)
        (copy / "result.json").unlink()
        before = snapshot(copy)
        outcome = invoke([*_run_argv(copy), "--steps", "4"], capsys)
        cases += 1
        problems = refusal_problems(outcome, before, snapshot(copy))
        if problems:
            failures.append(f"{label}: {'; '.join(problems)} | {outcome.err.strip()[:160]}")
    assert config  # the real config is readable
    print(f"checkpoints: {cases} damaged cases, {len(failures)} accepted or refused improperly")
    assert not failures, "\n".join(failures)


# --- results stores --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep directory whose results.sqlite registers the smoke sweep (no run executed)."""
    from experiments.analysis.sweep_directory import SweepDirectory
    from experiments.studies import get_preset
    from experiments.sweeps.preflight import resolve_runs
    from experiments.sweeps.store import ResultsStore

    out = tmp_path_factory.mktemp("sweep") / "sweep"
    out.mkdir()
    specs = resolve_runs(get_preset("smoke"), "quick")
    from experiments.sweeps.runner import _entries  # the runner's own (key, kind, spec) rows

    with ResultsStore(SweepDirectory(out).store) as store:
        store.register("smoke", "quick", _entries(specs))
    return out


def _store_damages(raw: bytes) -> dict[str, bytes]:
    damages = {f"truncated-{n}": raw[:n] for n in (10, 100, len(raw) // 2)}
    damages["garbage"] = b"\x13" * 4096
    damages["header-flipped"] = bytes([raw[0] ^ 0xFF]) + raw[1:]
    damages["page-size-garbage"] = raw[:16] + b"\xff\xff" + raw[18:]
    return damages


def _foreign_db(path: Path) -> None:
    import sqlite3

    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    connection.execute("INSERT INTO notes (text) VALUES ('not a results store')")
    connection.commit()
    connection.close()


def test_every_damaged_store_is_refused(good_store, capsys, tmp_path) -> None:
    """`report` and `sweep` refuse a damaged or foreign results.sqlite and change nothing in the directory."""
    from experiments.analysis.sweep_directory import SweepDirectory

    raw = SweepDirectory(good_store).store.read_bytes()
    damages: dict[str, bytes | None] = {**_store_damages(raw), "foreign-db": None}
    failures = []
    cases = 0
    for label, data in damages.items():
        for command in ("report", "sweep"):
            copy = tmp_path / f"{label}-{command}"
            shutil.copytree(good_store, copy)
            path = SweepDirectory(copy).store
            if data is None:
                path.unlink()
                _foreign_db(path)
            else:
                path.write_bytes(data)
            argv = ["report", str(copy)] if command == "report" else ["sweep", "smoke", "--out", str(copy)]
            before = snapshot(copy)
            outcome = invoke([*argv, "--no-progress"] if command == "sweep" else argv, capsys)
            cases += 1
            problems = refusal_problems(outcome, before, snapshot(copy))
            if problems:
                failures.append(f"{label} ({command}): {'; '.join(problems)} | {outcome.err.strip()[:160]}")
    print(f"stores: {cases} damaged cases, {len(failures)} accepted or refused improperly")
    assert not failures, "\n".join(failures)


# --- files read by `attnrank import` ---------------------------------------------------------------------------------


class TrainingCodeObject:
    """Stands for a class of someone's training code inside a checkpoint: carried as a name, never built."""


class RunsACommand:
    """Pickles as a call of os.system (REDUCE): what a payload, not a trainer, writes into a checkpoint."""

    def __reduce__(self) -> tuple:
        import os

        return (os.system, ("true",))


IMPORTERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "torch-mha": lambda f, out: (
        ["import", "--from", "torch-mha", str(f), "--num-heads", "2"] + ["--out", str(out / "imported.safetensors")]
    ),
    "reference-encoder": lambda f, out: (
        ["import", "--from", "reference-encoder", str(f), "--num-heads", "2"]
        + ["--task", "farthest", "--N", "3", "--out", str(out / "imported-run")]
    ),
}


def _good_import_inputs(root: Path) -> dict[str, dict[str, torch.Tensor]]:
    """The two sources' undamaged state dicts (float32, as trained models are saved)."""
    generator = torch.Generator().manual_seed(0)
    mha = torch.nn.MultiheadAttention(4, 2)
    with torch.no_grad():
        mha.in_proj_bias.copy_(torch.cat([torch.zeros(4), torch.randn(4, generator=generator), torch.zeros(4)]))
    reference = random_reference_state(d=4, num_heads=2, width=2, layers=2, positional_dim=2, max_length=4)
    return {
        "torch-mha": dict(mha.state_dict()),
        "reference-encoder": {f"model.{k}": v.float() for k, v in reference.items()},
    }


def _state_damages(state: dict[str, torch.Tensor]) -> dict[str, dict]:
    """Tensor-level damages, each of which leaves the file readable but not a model of its source."""
    names = sorted(state)
    weight = next(k for k in names if k.endswith("in_proj_weight"))
    damaged: dict[str, dict] = {}
    for label, value in (("nan", math.nan), ("inf", math.inf)):
        changed = dict(state)
        changed[weight] = state[weight].clone()
        changed[weight].view(-1)[0] = value
        damaged[f"{label}-in-{weight}"] = changed
    damaged["missing-weight"] = {k: v for k, v in state.items() if k != weight}
    damaged["extra-key"] = {**state, "extra.weight": torch.zeros(2)}
    damaged["reshaped"] = {**state, weight: state[weight][:, :3].contiguous()}
    damaged["integer"] = {**state, weight: state[weight].to(torch.int64)}
    damaged["renamed"] = {k.replace("in_proj", "inproj"): v for k, v in state.items()}
    damaged["non-tensor"] = {**state, "step": 3}
    damaged["payload-os-system"] = {"state_dict": state, "hyper_parameters": {"data": RunsACommand()}}
    damaged["lightning-list"] = {"state_dict": list(state.values())}
    damaged["empty"] = {}
    bias = next((k for k in names if k.endswith("out_proj.bias")), None)
    if bias is not None:
        damaged["one-bias-missing"] = {k: v for k, v in state.items() if k != bias}
    layer_norm = {k.replace("norm1.scale", "norm1.weight"): v for k, v in state.items()}
    if layer_norm != state:
        damaged["layer-norm"] = layer_norm  # an older reference version: LayerNorm, not the scalar L2 norm
    return damaged


def damaged_import_inputs(root: Path) -> list[tuple[str, Path]]:
    """(reader, file) pairs: every damage of each source, in torch and safetensors containers, for its own reader;
    plus mislabelled inputs (each source's good file given to the other reader, foreign files given to both)."""
    corpus: list[tuple[str, Path]] = []
    good = _good_import_inputs(root)
    for source, state in good.items():
        torch_file, safetensors_file = root / f"{source}.good.pt", root / f"{source}.good.safetensors"
        torch.save(state, torch_file)
        save_file({k: v.contiguous().numpy() for k, v in state.items()}, str(safetensors_file))
        for container, path in (("pt", torch_file), ("safetensors", safetensors_file)):
            raw = path.read_bytes()
            damages = {f"truncated-{n}": raw[:n] for n in (0, 4, 9, 64, len(raw) // 2, len(raw) - 1)}
            damages["garbage"] = b"\x80\x02garbage" * 9 if container == "pt" else b"{not json" * 9
            if container == "safetensors":
                damages.update(_byte_damages(raw))
            for label, data in damages.items():
                target = root / f"{source}.{label}.{container}"
                target.write_bytes(data)
                corpus.append((source, target))
        for label, content in _state_damages(state).items():
            target = root / f"{source}.state-{label}.pt"
            torch.save(content, target)
            corpus.append((source, target))
            if content and all(isinstance(v, torch.Tensor) for v in content.values()):  # the same in safetensors
                target = root / f"{source}.state-{label}.safetensors"
                save_file({k: v.contiguous().numpy() for k, v in content.items()}, str(target))
                corpus.append((source, target))
        other = "reference-encoder" if source == "torch-mha" else "torch-mha"
        corpus += [(other, torch_file), (other, safetensors_file)]  # mislabelled
    foreign = root / "weight-file.safetensors"
    from constructions.full_rank import save_full_rank

    save_full_rank(foreign, 4, 3.0)
    checkpoint = root / "our-checkpoint.pt"  # a training checkpoint of ours: a torch file, not a state dict
    torch.save({"version": 2, "model": good["torch-mha"], "step": 0}, checkpoint)
    corpus += [(reader, path) for reader in IMPORTERS for path in (foreign, checkpoint)]
    return corpus


def test_the_importers_accept_the_undamaged_inputs(capsys, tmp_path) -> None:  # noqa: ANN001
    """Positive control for the corpus below: each source's undamaged file, in both containers, is imported."""
    good = _good_import_inputs(tmp_path)
    for source, state in good.items():
        torch.save(state, tmp_path / f"{source}.pt")
        save_file({k: v.contiguous().numpy() for k, v in state.items()}, str(tmp_path / f"{source}.safetensors"))
        lightning = {"state_dict": state, "hyper_parameters": {"data": TrainingCodeObject()}}
        torch.save(lightning, tmp_path / f"{source}.ckpt")  # a class of the training code: carried as a name
        for suffix in ("pt", "safetensors", "ckpt"):
            out = tmp_path / f"out-{source}-{suffix}"
            out.mkdir()
            outcome = invoke(IMPORTERS[source](tmp_path / f"{source}.{suffix}", out), capsys)
            assert outcome.status == 0, (source, suffix, outcome.err)


def test_every_damaged_or_mislabelled_import_input_is_refused(capsys, tmp_path) -> None:  # noqa: ANN001
    corpus_dir, out = tmp_path / "corpus", tmp_path / "out"
    corpus_dir.mkdir()
    out.mkdir()
    corpus = damaged_import_inputs(corpus_dir)
    before = snapshot(corpus_dir)
    out_before = snapshot(out)
    failures = []
    for reader, path in corpus:
        outcome = invoke(IMPORTERS[reader](path, out), capsys)
        problems = refusal_problems(outcome, out_before, snapshot(out))
        if not problems and path.name not in outcome.err:
            problems.append("the message does not name the file")
        if problems:
            failures.append(f"{reader} {path.name}: {'; '.join(problems)} | {outcome.err.strip()[:160]}")
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
    if snapshot(corpus_dir) != before:
        failures.append("corpus files changed")
    print(f"import inputs: {len(corpus)} damaged or mislabelled, {len(failures)} accepted or refused improperly")
    assert len(corpus) >= 100 and not failures, "\n".join(failures)


# --- damaged rows of a store (issue 41) ------------------------------------------------------------------------------

ROW_DAMAGES: dict[str, tuple[str, str]] = {
    "spec-array": ("UPDATE runs SET spec = '[1, 2]' WHERE hash = :key", "field spec must be a JSON object"),
    "metrics-array": ("UPDATE runs SET metrics = '[]' WHERE hash = :key", "field metrics must be a JSON object"),
    "spec-not-json": ("UPDATE runs SET spec = 'spec' WHERE hash = :key", "field spec is not JSON"),
    "spec-without-rank": ("UPDATE runs SET spec = json_remove(spec, '$.rank') WHERE hash = :key", "lacks rank"),
    "spec-bad-rank": ("UPDATE runs SET spec = json_set(spec, '$.rank', 3) WHERE hash = :key", "not a valid train"),
    "unknown-kind": ("UPDATE runs SET kind = 'zzz' WHERE hash = :key", "field kind must be one of"),
    "text-loss": (
        "UPDATE runs SET metrics = json_set(metrics, '$.best_loss', 'abc') WHERE hash = :key",
        "field metrics.best_loss must be a number",
    ),
    "theorem2-array": (
        "UPDATE runs SET metrics = json_set(metrics, '$.theorem2', json('[]')) WHERE hash = :key",
        "field metrics.theorem2 must be a JSON object",
    ),
    "text-bound": (
        "UPDATE runs SET metrics = json_set(metrics, '$.theorem2.bound_lower', 'x') WHERE hash = :key",
        "metrics.theorem2.bound_lower must be a number",
    ),
    "text-seconds": ("UPDATE runs SET seconds = 'slow' WHERE hash = :key", "field seconds must be a number"),
    "unknown-scale": ("UPDATE sweep_runs SET scale = 'zzz' WHERE hash = :key", "sweep_runs.scale of preset"),
    "unknown-preset": ("UPDATE sweep_runs SET preset = 'fig9' WHERE hash = :key", "sweep_runs.preset names no"),
}
"""Damage to one row of a real store -> what the refusal must say (beside the store's path and the run)."""


@pytest.fixture(scope="module")
def committed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of a committed store whose runs carry theorem2 evaluations (results/bound-vs-trained-cpu)."""
    source = Path(__file__).resolve().parents[3] / "results" / "bound-vs-trained-cpu" / "results.sqlite"
    out = tmp_path_factory.mktemp("committed") / "bound-vs-trained-cpu"
    out.mkdir()
    shutil.copyfile(source, out / "results.sqlite")
    return out


@pytest.mark.parametrize("label", list(ROW_DAMAGES))
def test_every_damaged_row_is_refused_by_report_and_index(committed_store, capsys, tmp_path, label: str) -> None:
    """`report DIR` and `report --index` meet a damaged row with one line naming the store and the field, exit 2,
    and write nothing (no report, no figure, no README)."""
    import sqlite3

    statement, said = ROW_DAMAGES[label]
    results = tmp_path / "results"
    copy = results / "store"
    shutil.copytree(committed_store, copy)
    with sqlite3.connect(copy / "results.sqlite") as connection:
        (key,) = connection.execute("SELECT hash FROM runs ORDER BY hash LIMIT 1").fetchone()
        connection.execute(statement, {"key": key})
    for argv in (["report", str(copy)], ["report", "--index", str(results)]):
        before = snapshot(results)
        outcome = invoke(argv, capsys)
        assert refusal_problems(outcome, before, snapshot(results)) == [], (argv, outcome.err)
        assert said in outcome.err and str(copy / "results.sqlite") in outcome.err, outcome.err


def test_the_undamaged_copy_is_reported(committed_store, capsys, tmp_path) -> None:
    """Positive control of the damage cases: the same copy, untouched, reports with exit 0."""
    copy = tmp_path / "store"
    shutil.copytree(committed_store, copy)
    assert invoke(["report", str(copy)], capsys).status == 0 and (copy / "report.md").is_file()


def test_a_store_that_is_a_directory_is_refused_by_the_index(committed_store, capsys, tmp_path) -> None:
    results = tmp_path / "results"
    shutil.copytree(committed_store, results / "good")
    (results / "odd" / "results.sqlite").mkdir(parents=True)
    before = snapshot(results)
    outcome = invoke(["report", "--index", str(results)], capsys)
    assert refusal_problems(outcome, before, snapshot(results)) == [] and "is not a file" in outcome.err


def test_a_binary_readme_is_refused_by_the_index(committed_store, capsys, tmp_path) -> None:
    """The index splices into results/README.md: a README that is not text is named, not a UnicodeDecodeError."""
    results = tmp_path / "results"
    shutil.copytree(committed_store, results / "good")
    (results / "README.md").write_bytes(b"\xff\xfe\x00binary\x80")
    before = snapshot(results)
    outcome = invoke(["report", "--index", str(results)], capsys)
    assert refusal_problems(outcome, before, snapshot(results)) == []
    assert str(results / "README.md") in outcome.err and "not UTF-8" in outcome.err
