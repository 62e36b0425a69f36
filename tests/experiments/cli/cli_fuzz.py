"""Shared pieces of the command-line fuzz suite: running `attnrank` in-process, snapshots, the bad-input table.

Every case is an argv that must be refused: exit status 2, exactly one line on stderr starting
``attnrank ...: error:``, no traceback, nothing on stdout, and no file created, changed or removed in the working
directory (each case runs in a directory holding a real weight file, a run, reports and a decoy output file).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from experiments.cli.main import main

TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "', "Error:\n")


@dataclass(frozen=True)
class Outcome:
    status: int
    out: str
    err: str


def invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Outcome:
    """Run ``attnrank ARGV`` in this process (argparse's SystemExit becomes the status).

    Python warnings a real process would print on stderr (pytest captures them otherwise) are added to ``err`` as
    lines, so a refusal accompanied by a RuntimeWarning counts as two lines.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    shown = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    extra = "".join(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}\n" for w in shown)
    return Outcome(int(status), captured.out, captured.err + extra)


def snapshot(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every path under ``root`` -> (kind, size, sha256 of a file's bytes); directories included."""
    state: dict[str, tuple[str, int, str]] = {}
    for directory, subdirs, files in os.walk(root):
        for name in subdirs:
            state[os.path.relpath(os.path.join(directory, name), root)] = ("dir", 0, "")
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                state[os.path.relpath(path, root)] = ("link", 0, os.readlink(path))
                continue
            data = Path(path).read_bytes()
            state[os.path.relpath(path, root)] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return state


def refusal_problems(outcome: Outcome, before: dict, after: dict) -> list[str]:
    """What is wrong with how a bad input was refused (empty list: refused properly)."""
    problems = []
    if outcome.status != 2:
        problems.append(f"exit status {outcome.status}, expected 2")
    lines = outcome.err.splitlines()
    if len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines, expected 1")
    elif not (lines[0].startswith("attnrank") and ": error: " in lines[0]):
        problems.append("stderr line is not 'attnrank ...: error: ...'")
    if any(marker in outcome.err for marker in TRACEBACK_MARKERS[:2]):
        problems.append("traceback on stderr")
    if outcome.out:
        problems.append("output on stdout")
    if before != after:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        problems.append(f"files changed: {changed[:5]}")
    return problems


# --- the bad-input table -------------------------------------------------------------------------------------------

INT_JUNK = ("", "x", "1.5", "nan", "inf", "1e3", "0x10", "1,2", "2 3", "--", "-", "1_000_", "None", "[1]", "0b1", "½")
"""Literals that are not integers for any int flag (argparse refuses them)."""
FLOAT_JUNK = ("", "x", "1.2.3", "nan", "1e999", "-1e999", "--", "0x1p3", "1,5", "None", "[]", "1e", "e5", "½")
"""Literals that are not acceptable reals for any float flag (syntax, nan, overflow)."""
PATH_JUNK_NAMES = ("", "DIR", "BLOCKED/child", "/proc/attnrank-fuzz/x", "/dev/null/x", "NUL\x00")
"""Output paths nothing may be written to: empty, an existing directory, under a file, unwritable, NUL byte."""


def _flag_cases(
    base: list[str], flag: str, values: Iterator[str] | tuple[str, ...], replace: bool = True
) -> Iterator[list[str]]:
    """``base`` with ``flag VALUE`` set (replacing the flag's value in base when present) for each value."""
    for value in values:
        argv = list(base)
        if replace and flag in argv:
            index = argv.index(flag)
            argv[index + 1] = value
        else:
            argv += [flag, value]
        yield argv


def _out_cases(base: list[str], flag: str = "--out") -> Iterator[list[str]]:
    yield from _flag_cases(base, flag, PATH_JUNK_NAMES)


BOUND = ["bound", "--d", "8", "--rank", "2", "--heads", "5"]
MIN_HEADS = ["min-heads", "--d", "8", "--rank", "2", "--eps", "0.1"]
FULL_RANK = ["construct", "full-rank", "--d", "3", "--out", "new.safetensors"]
RANDOM_FEATURES = ["construct", "random-features", "--d", "3", "--heads", "4", "--out", "new.safetensors"]
MAJORITY_VOTE = ["construct", "majority-vote", "--d", "3", "--heads", "3", "--no-predict", "--out", "new.safetensors"]
BIASED = ["construct", "biased", "--d", "2", "--out", "new.safetensors"]
EVAL = ["eval", "--weights", "good.safetensors", "--samples", "20"]
EXPORT = ["export", "--weights", "good.safetensors", "--out", "new.safetensors"]
TRAIN = ["train", "--task", "farthest", "--d", "4", "--N", "3", "--rank", "4", "--ffn-dim", "8", "--steps", "2"]
TRAIN += ["--batch-size", "4", "--out", "newrun", "--no-progress"]
ANALYZE = ["analyze", "run", "--samples", "100"]
SWEEP = ["sweep", "smoke", "--scale", "quick", "--out", "newsweep", "--no-progress"]


def bad_argv_table() -> list[tuple[str, list[str]]]:
    """(case id, argv) for every bad input of the table; ids are unique and stable."""
    cases: list[list[str]] = []
    negative, nonpositive = ("-1",), ("-1", "0")
    ints = {
        "bound": (BOUND, {"--d": ("0", "1", "-5"), "--rank": nonpositive}),
        "min-heads": (MIN_HEADS, {"--d": ("0", "1", "-1"), "--rank": nonpositive}),
        "full-rank": (FULL_RANK, {"--d": ("0", "1", "-2")}),
        "random-features": (RANDOM_FEATURES, {"--d": ("0", "1"), "--heads": nonpositive, "--seed": negative}),
        "majority-vote": (MAJORITY_VOTE, {"--d": ("1",), "--heads": nonpositive, "--seed": negative}),
        "biased": (BIASED, {"--d": ("1",), "--m": nonpositive}),
        "eval": (
            EVAL,
            {"--N": nonpositive, "--samples": ("0", "1", "-1"), "--seed": negative, "--batch-size": nonpositive},
        ),
        "train": (
            TRAIN,
            {
                "--d": ("0", "1"),
                "--N": nonpositive,
                "--rank": nonpositive,
                "--width": nonpositive,
                "--layers": nonpositive,
                "--ffn-dim": nonpositive,
                "--steps": nonpositive,
                "--batch-size": nonpositive,
                "--seed": negative,
                "--checkpoint-every": nonpositive,
                "--log-every": nonpositive,
                "--positional-dim": negative,
                "--embed-dim": negative,
            },
        ),
        "analyze": (ANALYZE, {"--samples": ("0", "1", "-1"), "--seed": negative}),
        "sweep": (SWEEP, {"--workers": nonpositive}),
    }
    for base, flags in ints.values():
        for flag, out_of_range in flags.items():
            cases += _flag_cases(base, flag, INT_JUNK)
            cases += _flag_cases(base, flag, out_of_range)
    # out-of-range ints that depend on the flag
    cases += _flag_cases(BOUND, "--rank", ("9", "100"))
    cases += _flag_cases(EVAL, "--samples", ("1",))
    cases += _flag_cases(EVAL, "--N", ("3", "1000000000"))
    cases += _flag_cases(ANALYZE, "--samples", ("0", "1"))
    cases += _flag_cases(TRAIN, "--rank", ("3", "5", "99"))
    cases += _flag_cases(TRAIN, "--batch-size", ("1000000000", "999999999999"))
    cases += _flag_cases(TRAIN, "--ffn-dim", ("100000000000",))
    cases += _flag_cases(FULL_RANK, "--d", ("100000", "3000000"))
    cases += _flag_cases(RANDOM_FEATURES, "--heads", ("10000000", "1000000000"))
    cases += _flag_cases(MAJORITY_VOTE, "--heads", ("1000000000",))
    cases += _flag_cases(BIASED, "--m", ("1000000000000",))
    cases += _flag_cases([*EVAL, "--batch-size", "100000000000"], "--samples", ("100000000000",))
    floats = {
        "min-heads": (MIN_HEADS, ["--eps"], ("0", "-0.1", "0.6", "inf", "1e-320")),
        "full-rank": (FULL_RANK, ["--temperature"], ("0", "-1", "-inf", "1e400", "-1e400")),
        "majority-vote": (MAJORITY_VOTE, ["--temperature"], ("0", "-3", "1e309")),
        "biased": (BIASED, ["--temperature", "--delta"], ("0", "-1")),
        "eval": (EVAL, ["--temperature"], ("0", "-2", "1e400")),
        "train": (
            TRAIN,
            ["--lr", "--temperature", "--beta1", "--beta2", "--weight-decay", "--warmup-fraction"],
            ("-1", "1e400", "-inf"),
        ),
    }
    for base, flags, out_of_range in floats.values():
        for flag in flags:
            cases += _flag_cases(base, flag, FLOAT_JUNK)
            cases += _flag_cases(base, flag, out_of_range)
    cases += _flag_cases(TRAIN, "--lr", ("0", "10.5", "1e10", "inf", "3e38"))
    cases += _flag_cases(TRAIN, "--temperature", ("0", "inf", "infinity"))
    cases += _flag_cases(TRAIN, "--beta1", ("1", "1.5"))
    cases += _flag_cases(TRAIN, "--warmup-fraction", ("1", "2", "0.999", "0.75"))  # 2 steps: no step of decay left
    # issue 41: counts beyond any run (and beyond 64 bits) and the data-regime flags (issue 38)
    for flag in ("--steps", "--schedule-steps", "--warmup-steps"):
        cases += _flag_cases(TRAIN, flag, ("1000000001", "9223372036854775808", "99999999999999999999999"))
    cases += _flag_cases(TRAIN, "--train-batches", ("-1", "3", "1000000000"))
    cases += _flag_cases(TRAIN, "--data-seed", ("-1", "9223372036854775808"))
    cases += [[*TRAIN, "--sampler", "reference"], [*TRAIN, "--train-batches", "2", "--log-every", "1"]]
    cases += [[*TRAIN, "--train-batches", "2", "--sampler", "reference", "--task", "nearest", "--keys", "iid"]]
    # heads of bound: exact parsing, no float, no memory bomb
    cases += _flag_cases(
        BOUND, "--heads", ("0", "-1", "0.5", "1e-5", "x", "", "nan", "inf", "1e999999999999", "1e4096", "2.5")
    )
    # choices and strings
    cases += _flag_cases(EVAL, "--task", ("", "nope", "NEAREST", "farthest", "icl"))
    cases += _flag_cases(EVAL, "--keys", ("", "weird", "Orthonormal"))
    cases += _flag_cases(EXPORT, "--format", ("", "onnx", "torch_mha"))
    cases += _flag_cases(RANDOM_FEATURES, "--distribution", ("", "gaussian"))
    cases += _flag_cases(BIASED, "--keys", ("", "weird"))
    for flag, values in {
        "--task": ("", "nope"),
        "--keys": ("weird",),
        "--value": ("x",),
        "--attention": ("x",),
        "--positional": ("x",),
        "--model": ("x",),
        "--device": ("tpu", "cuda:x", ""),
        "--init": ("missing.safetensors", ""),
    }.items():
        cases += _flag_cases(TRAIN, flag, values)
    cases += _flag_cases(SWEEP, "--scale", ("", "huge", "paper!"))
    cases += [["sweep", preset, "--out", "newsweep"] for preset in ("", "nope", "FIG1")]
    cases += _flag_cases(SWEEP, "--set", ("noequals", "=3", "nofield=3", "steps=-1", "steps=x", "lr=1e400"))
    cases += _flag_cases(SWEEP, "--set", ("schedule_steps=99999999999999999999", "steps=1000000001"))
    cases += [[*SWEEP, "--only", "rank=1", "--only", "rank=2"], [*SWEEP, "--set", "lr=0.1", "--set", "lr=0.2"]]
    cases += _flag_cases(SWEEP, "--backend", ("", "slurm"))
    cases += _flag_cases([*SWEEP, "--backend", "ray"], "--address", ("127.0.0.1:1", "nohostport", "host:99999", ""))
    cases += [[*SWEEP, "--address", "127.0.0.1:1"]]  # address without the ray backend
    # output paths
    for base in (FULL_RANK, RANDOM_FEATURES, MAJORITY_VOTE, BIASED, EXPORT):
        cases += _out_cases(base)
        cases += _flag_cases(base, "--out", ("decoy.txt/x",))
    cases += _flag_cases(EXPORT, "--out", ("good.safetensors",))  # would overwrite its own input
    directories = tuple(p for p in PATH_JUNK_NAMES if p != "DIR") + ("decoy.txt",)  # an existing DIR is fine here
    cases += _flag_cases(TRAIN, "--out", directories)
    cases += _flag_cases(SWEEP, "--out", directories)
    cases += _flag_cases(["check"], "--report-dir", ("", "decoy.txt", "decoy.txt/sub", "/proc/attnrank-fuzz"))
    cases += _flag_cases(["check", "--report-dir", "reports"], "-k", ("((", ")", "", "and", "not", "a or", "a b"))
    # input paths
    cases += [["analyze", p] for p in ("", "missing", "decoy.txt", "good.safetensors")]
    cases += [["report", p] for p in ("", "missing", "decoy.txt")]
    cases += _flag_cases(EVAL, "--weights", ("", "missing.safetensors", "DIR", "decoy.txt", "/dev/null"))
    cases += _flag_cases(EXPORT, "--weights", ("", "missing.safetensors", "DIR", "decoy.txt"))
    # argparse's own errors
    cases += [
        [],
        ["nope"],
        ["--nope"],
        ["bound"],
        ["bound", "--d", "8"],
        [*BOUND, "--unknown", "1"],
        [*BOUND, "extra"],
        ["construct"],
        ["construct", "nope"],
        ["construct", "full-rank"],
        ["construct", "full-rank", "--d", "3"],
        ["eval"],
        ["export", "--weights", "good.safetensors"],
        ["train"],
        ["analyze"],
        ["sweep"],
        ["report"],
        ["check", "--quick", "--full"],
        [*MIN_HEADS, "--eps"],
        [*TRAIN, "--bf16=yes"],
        [*EVAL, "--force=1"],
    ]
    seen: set[str] = set()
    table = []
    for argv in cases:
        key = repr(argv)
        if key in seen:
            continue
        seen.add(key)
        table.append((f"{len(table):03d}:{' '.join(argv)[:60]}", argv))
    return table


def materialise(argv: list[str], root: Path) -> list[str]:
    """Placeholders of the table made concrete under ``root`` (DIR: an existing directory, BLOCKED: a file)."""
    mapping = {"DIR": str(root / "DIR"), "BLOCKED/child": str(root / "decoy.txt" / "child")}
    return [mapping.get(a, a) for a in argv]


Check = Callable[[list[str]], list[str]]


# --- attnrank import -------------------------------------------------------------------------------------------------

IMPORT_MHA = ["import", "--from", "torch-mha", "mha.pt", "--num-heads", "2", "--out", "new.safetensors"]
IMPORT_REFERENCE = ["import", "--from", "reference-encoder", "ref.ckpt", "--num-heads", "2", "--task", "farthest"]
IMPORT_REFERENCE += ["--out", "newrun"]
"""Valid imports in the import workspace (mha.pt: nn.MultiheadAttention(4, 2); ref.ckpt: a reference encoder with
d = 4, p = 2 concatenated codes over maxN = 4 positions, blocks of 2 heads): each case below breaks one thing."""


def _from_cases(base: list[str], values: tuple[str, ...], position: int) -> Iterator[list[str]]:
    """``base`` with its --from SOURCE (position 0) or FILE (position 1) replaced by each value."""
    index = base.index("--from") + 1 + position
    for value in values:
        argv = list(base)
        argv[index] = value
        yield argv


def import_argv_table() -> list[tuple[str, list[str]]]:
    """(case id, argv) for bad input to `attnrank import` (run in the import workspace, see test_fuzz_cli)."""
    cases: list[list[str]] = []
    for base in (IMPORT_MHA, IMPORT_REFERENCE):
        heads = INT_JUNK + ("0", "-1", "5", "7", "1000000000")  # 5 and 7 divide neither d = 4 nor D = 6
        cases += _flag_cases(base, "--num-heads", heads)
        cases += _from_cases(base, ("", "onnx", "Torch-MHA", "reference_encoder", "torch"), 0)
        foreign = ("", "missing.pt", "DIR", "decoy.txt", "good.safetensors", "/dev/null", "run/checkpoint.pt")
        cases += _from_cases(base, foreign, 1)
        cases += [[a for a in base if a not in ("--out", "new.safetensors", "newrun")]]  # --out missing
        cases += [base[: base.index("--num-heads")] + base[base.index("--num-heads") + 2 :]]  # --num-heads missing
    cases += _from_cases(IMPORT_MHA, ("ref.ckpt",), 1)  # mislabelled: a whole encoder is not one module
    cases += _from_cases(IMPORT_REFERENCE, ("mha.pt",), 1)  # mislabelled: one module is not an encoder
    cases += _out_cases(IMPORT_MHA)
    cases += _flag_cases(IMPORT_MHA, "--out", ("decoy.txt/x", "mha.pt", "good.safetensors"))  # never overwritten
    cases += _flag_cases(IMPORT_MHA, "--task", ("nearest",))  # reference-only flags
    cases += _flag_cases(IMPORT_MHA, "--N", ("3",))
    reference_out = tuple(p for p in PATH_JUNK_NAMES if p != "DIR") + ("decoy.txt", "run", "decoy.txt/x")
    cases += _flag_cases(IMPORT_REFERENCE, "--out", reference_out)  # an empty DIR is fine; a run is never replaced
    cases += _flag_cases(IMPORT_REFERENCE, "--task", ("", "nope", "icl", "FARTHEST"))
    cases += _flag_cases(IMPORT_REFERENCE, "--N", INT_JUNK + ("0", "-1", "5", "100"))  # the table holds 4 positions
    cases += _flag_cases([*IMPORT_REFERENCE, "--task", "nearest"], "--N", ("4",))  # 4 keys + the query: 5 > 4
    cases += _flag_cases([*IMPORT_REFERENCE, "--task", "nearest"], "--keys", ("", "weird"))
    cases += _flag_cases([*IMPORT_REFERENCE, "--task", "biased"], "--N", ("3",))
    cases += [["import"], ["import", "--from", "torch-mha"], ["import", "--from"], [*IMPORT_MHA, "extra"]]
    cases += [[*IMPORT_MHA, "--json=1"], ["import", "--from", "torch-mha", "mha.pt", "ref.ckpt", "--num-heads", "2"]]
    seen: set[str] = set()
    table = []
    for argv in cases:
        if repr(argv) not in seen:
            seen.add(repr(argv))
            table.append((f"import-{len(table):03d}:{' '.join(argv)[:60]}", argv))
    return table
