"""Fuzz of the public Python API: every callable of ``import attnrank``, every argument, junk drawn by hypothesis.

A case calls one public function with valid arguments except one, replaced by junk drawn for that argument: values
of the wrong type, numbers out of range (and nan, inf, bools), strings outside a choice, paths nothing can be read
from or written to. The function must refuse it with TypeError, ValueError or an OSError (FileNotFoundError,
IsADirectoryError, PermissionError, ...) whose message names the argument (as a word: ``d must be ...``,
``[Errno 21] path is a directory ...``), and leave the sandbox directory (weight files, a trained run, state-dict files,
the working directory of the call) unchanged, every byte hashed before and after. Any other exception
(AttributeError, KeyError, safetensors' SafetensorError, RuntimeError, ...) or an accepted junk value fails the case.

Junk is invalid by construction (the strategies below say how); sizes are fuzzed below their minimum, never above:
an allocation too large to fit is refused by the command line's memory estimates and by `run_sweep` and `train`, not
by the constructions' Python functions. Damaged file contents are the file fuzz's (tests/experiments/cli/
test_fuzz_files.py); here every file argument is a path that names no usable file.

Controls: every function's valid call succeeds (`test_the_valid_calls_succeed`), so a refusal comes from the damaged
argument; the checker fails a function that raises AttributeError, or a ValueError without the argument's name, or
accepts junk, or writes a file (`test_the_checker_fails_bad_refusals`); every public callable has an entry here
(`test_every_public_callable_is_fuzzed`).

Sample size: 30 derandomised examples per (function, argument) under the default ``ci`` hypothesis profile
(tests/conftest.py), 500 random ones with HYPOTHESIS_PROFILE=thorough.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import math
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import attnrank
from constructions.eval_tasks import EVAL_TASKS
from constructions.random_features import DISTRIBUTIONS
from experiments.config import TrainConfig
from experiments.models.encoder import PaperEncoder
from experiments.models.spec import AttentionSpec
from experiments.sweeps.backends import BACKENDS
from tests.experiments.cli.cli_fuzz import snapshot
from tests.experiments.models.reference_checkpoints import random_reference_state
from theory.sphere import KEY_KINDS
from theory.validation import MAX_SEED

# --- the sandbox: valid inputs every case starts from ---------------------------------------------------------------

SMALL_RUN = TrainConfig(
    task="farthest", d=4, N=3, rank=4, ffn_dim=8, steps=2, batch_size=4, checkpoint_every=1, log_every=1, device="cpu"
)


@dataclass
class Sandbox:
    """A directory holding one valid input of every kind, and the in-memory objects built from them."""

    root: Path
    weights: Path  # full-rank, d = 3, temperature 5 (exportable)
    run: Path  # a finished two-step training run
    state_dict: Path  # a stock nn.MultiheadAttention(4, 1) state dict (.pt)
    reference: Path  # a reference-encoder Lightning checkpoint (d = 4, two heads)
    blocker: Path  # a plain file (a parent that is not a directory)
    directory: Path  # an existing empty directory
    objects: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    root = tmp_path_factory.mktemp("api-fuzz")
    weights = attnrank.save_full_rank(root / "good.safetensors", 3, 5.0)
    run = root / "run"
    attnrank.train(SMALL_RUN, run, progress=False)
    module = torch.nn.MultiheadAttention(4, 1, batch_first=True, dtype=torch.float64)
    torch.save(module.state_dict(), root / "mha.pt")
    state = random_reference_state(d=4, num_heads=2, ffn_dim=6, positional_dim=2, max_length=5)
    torch.save({"state_dict": {f"model.{k}": v.float() for k, v in state.items()}}, root / "last.ckpt")
    (root / "blocker").write_text("a plain file")
    (root / "empty").mkdir()
    box = Sandbox(root, weights, run, root / "mha.pt", root / "last.ckpt", root / "blocker", root / "empty")
    loaded = attnrank.load_weights(weights)
    box.objects.update(
        weights=loaded,
        export=attnrank.torch_mha_export(loaded),
        majority_vote=attnrank.build_majority_vote(3, 3, np.random.default_rng(0), predict=False),
        biased=attnrank.build_biased_construction(2),
        random_features=attnrank.construct_random_features(3, 4, np.random.default_rng(0)),
        state=module.state_dict(),
        encoder=PaperEncoder(4, AttentionSpec(2, width=2), layers=1, ffn_dim=6, positional="additive", max_length=5),
    )
    return box


def _weights(box: Sandbox) -> attnrank.WeightFile:
    return copy.deepcopy(box.objects["weights"])


# --- junk: values each argument must refuse --------------------------------------------------------------------------

TEXT = st.text(max_size=8)
OBJECTS = st.one_of(
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.builds(object),
    st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
)
"""Objects no argument of the API accepts (strings and None are added where they are junk)."""
SPECIAL_NUMBERS = st.sampled_from([math.nan, math.inf, -math.inf, True, False])


def ints(minimum: int | None = None, maximum: int | None = None, *, none_ok: bool = False) -> st.SearchStrategy[Any]:
    """Not an integer in [minimum, maximum]: out of range, fractional floats, nan/inf, bools, strings, objects
    (and None unless ``none_ok``). Integral floats (3.0) are left out: the validators accept them."""
    options = [
        st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()),
        SPECIAL_NUMBERS,
        TEXT,
        OBJECTS,
    ]
    if minimum is not None:
        options.append(st.integers(max_value=minimum - 1))
    if maximum is not None:
        options.append(st.integers(min_value=maximum + 1))
    if not none_ok:
        options.append(st.none())
    return st.one_of(options)


def reals(
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    strict: bool = False,
    allow_inf: bool = False,
    none_ok: bool = False,
) -> st.SearchStrategy[Any]:
    """Not a real number in the range (``strict``: minimum excluded): out of range, nan, -inf (and inf unless
    ``allow_inf``), bools, strings, objects (and None unless ``none_ok``)."""
    specials = [math.nan, -math.inf, True, False] + ([] if allow_inf else [math.inf])
    options = [st.sampled_from(specials), TEXT, OBJECTS]
    if minimum is not None:
        options.append(st.floats(max_value=minimum, exclude_max=not strict, allow_nan=False, allow_infinity=False))
    if maximum is not None:
        options.append(st.floats(min_value=maximum, exclude_min=True, allow_nan=False, allow_infinity=False))
    if not none_ok:
        options.append(st.none())
    return st.one_of(options)


def choices(allowed: tuple[str, ...], *, none_ok: bool = False) -> st.SearchStrategy[Any]:
    """Anything but one of ``allowed``: other strings, numbers, objects (and None unless ``none_ok``)."""
    options = [TEXT.filter(lambda t: t not in allowed), st.integers(), OBJECTS]
    return st.one_of(options if none_ok else [*options, st.none()])


def switches() -> st.SearchStrategy[Any]:
    """Not True or False: None, integers (0 and 1 included), floats, strings."""
    return st.one_of(st.none(), st.integers(), st.floats(), TEXT)


def others(*, none_ok: bool = False) -> st.SearchStrategy[Any]:
    """Objects of the wrong type for an argument that takes one class (a WeightFile, a TrainConfig, ...)."""
    options = [st.integers(), st.floats(), TEXT, OBJECTS]
    return st.one_of(options if none_ok else [*options, st.none()])


NOT_MAPPINGS = st.one_of(st.integers(), st.floats(), TEXT, st.binary(max_size=4), st.lists(st.integers(), max_size=2))
"""Objects that are not mappings (junk for an argument taking a dict, or None where None is allowed)."""
NOT_PATHS = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=4), st.lists(TEXT, max_size=2))
LONG_NAME = "n" * 300  # longer than any file-name limit: looking it up fails with ENAMETOOLONG


def output_paths(box: Sandbox) -> st.SearchStrategy[Any]:
    """Where no file can be written: not a path, empty, a NUL byte, a directory, under a file, in /proc."""
    places = ["", "  ", "a\x00b", str(box.directory), str(box.blocker / "child"), "/proc/attnrank-fuzz/x", LONG_NAME]
    return st.one_of(NOT_PATHS, st.sampled_from(places))


def output_dirs(box: Sandbox) -> st.SearchStrategy[Any]:
    """Where no directory can be made: not a path, empty, a NUL byte, a file, under a file, in /proc."""
    places = ["", "a\x00b", str(box.blocker), str(box.blocker / "sub"), "/proc/attnrank-fuzz/d", LONG_NAME]
    return st.one_of(NOT_PATHS, st.sampled_from(places))


def input_files(box: Sandbox) -> st.SearchStrategy[Any]:
    """Paths naming no file: not a path, empty, a NUL byte, missing, a directory, under a file."""
    places = ["", "a\x00b", "missing.safetensors", str(box.directory), str(box.blocker / "x"), LONG_NAME]
    return st.one_of(NOT_PATHS, st.sampled_from(places))


def input_dirs(box: Sandbox) -> st.SearchStrategy[Any]:
    """Paths naming no run directory: not a path, empty, missing, a file, an empty directory."""
    places = ["", "a\x00b", "missing_run", str(box.blocker), str(box.directory), LONG_NAME]
    return st.one_of(NOT_PATHS, st.sampled_from(places))


def tensor_maps(box: Sandbox) -> st.SearchStrategy[Any]:
    """Not the tensors of a weight file: not a mapping, wrong key types, arrays of strings, wrong names or shapes."""
    good = box.objects["weights"].tensors
    return st.one_of(
        others(),
        st.just({}),
        st.just({1: good["Q"]}),
        st.just({**good, "Q": np.array(["x"])}),
        st.just({**good, "Q": good["Q"][0]}),
        st.just({**good, "extra": good["Q"]}),
        st.just({**good, "V": good["V"] * math.nan}),
    )


def metadata_maps(box: Sandbox) -> st.SearchStrategy[Any]:
    """Not the metadata of a weight file: not a mapping, wrong key types, missing or malformed fields."""
    good = box.objects["weights"].metadata
    return st.one_of(
        others(),
        st.just({}),
        st.just({1: 2}),
        st.just({**good, "layout": "x"}),
        st.just({**good, "d": "three"}),
        st.just({**good, "temperature": -1.0}),
        st.just({k: v for k, v in good.items() if k != "H"}),
    )


def damaged_weight_files(box: Sandbox) -> st.SearchStrategy[Any]:
    """WeightFiles whose dicts were changed after they were built, and objects that are not WeightFiles."""

    def damaged(key: str, value: Any) -> attnrank.WeightFile:
        weights = _weights(box)
        weights.metadata[key] = value
        return weights

    return st.one_of(
        others(),
        st.just(dict(_weights(box).tensors)),
        st.builds(damaged, st.sampled_from(["layout", "d", "temperature"]), st.sampled_from(["x", -1, math.nan])),
    )


def train_config_junk(name: str, annotation: str) -> st.SearchStrategy[Any]:
    """Junk for one TrainConfig field, by its annotation (the type alone; ranges are each validator's)."""
    if annotation == "int":
        return ints()
    if annotation == "float":
        return reals(allow_inf=name == "temperature")
    if annotation == "bool":
        return switches()
    if annotation == "str":
        return others()
    if annotation == "str | None":  # any str is a path to look for later; only other types are junk here
        return st.one_of(st.integers(), st.floats(), OBJECTS)
    if annotation == "tuple[float, float]":
        return st.one_of(others(), st.just((math.nan, 0.9)), st.just((0.9,)), st.just(("a", "b")))
    return st.one_of(
        st.builds(object), st.complex_numbers(max_magnitude=10)
    )  # a field added later: no type takes these


# --- one entry per public callable ------------------------------------------------------------------------------------

Junk = Callable[[Sandbox], st.SearchStrategy[Any]]


def fixed(strategy: st.SearchStrategy[Any]) -> Junk:
    return lambda box: strategy


@dataclass(frozen=True)
class Entry:
    """How to call one public function validly (fresh keyword arguments each time) and the junk for each argument."""

    valid: Callable[[Sandbox], dict[str, Any]]
    junk: Mapping[str, Junk]
    waits_for: Mapping[str, str] = field(default_factory=dict)
    """Argument -> a fix not yet made: a strict xfail, so the case fails until the fix lands, then must be unmarked."""


def _rng(box: Sandbox) -> np.random.Generator:
    return np.random.default_rng(0)


RNG_JUNK = fixed(st.one_of(others(), st.just(np.random.RandomState(0))))
TRAIN_CONFIG_FIELDS = {f.name: str(f.type) for f in dataclasses.fields(TrainConfig)}
COMMITTED_STORE = Path(__file__).resolve().parents[1] / "results" / "finite-set-cpu"
"""A store the readers read (read only: the sandbox's byte check covers the files the calls could write)."""
SWEEP = {"preset": "smoke", "scale": "quick", "out": "newsweep", "workers": 1, "progress": False}

ENTRIES: dict[str, Entry] = {
    "rank_lower_bound": Entry(
        lambda box: {"d": 8, "r": 2, "H": 5},
        {"d": fixed(ints(2)), "r": fixed(ints(1, 8)), "H": fixed(ints(1))},
    ),
    "min_heads": Entry(
        lambda box: {"d": 8, "r": 2, "eps": 0.1},
        {"d": fixed(ints(2)), "r": fixed(ints(1, 8)), "eps": fixed(reals(0.0, 0.5, strict=True))},
    ),
    "reference_training_set": Entry(
        lambda box: {"d": 4, "N": 3, "batch_size": 2, "batches": 3, "seed": 0, "workers": 2},
        {
            "d": fixed(ints(2)),
            "N": fixed(ints(1)),
            "batch_size": fixed(ints(1)),
            "batches": fixed(ints(1)),
            "seed": fixed(ints(0, MAX_SEED)),
            "workers": fixed(ints(0, 64)),
        },
    ),
    "full_rank_error": Entry(
        lambda box: {"d": 4, "temperature": 2.0},
        {"d": fixed(ints(2)), "temperature": fixed(reals(0.0, strict=True, allow_inf=True))},
    ),
    "BoundInterval": Entry(
        lambda box: {"lower": 0.1, "upper": 0.2},
        {"lower": fixed(reals()), "upper": fixed(reals(0.1))},  # lower: no range of its own (upper is checked >= it)
    ),
    "save_full_rank": Entry(
        lambda box: {"path": "new.safetensors", "d": 3, "temperature": 5.0},
        {"path": output_paths, "d": fixed(ints(2)), "temperature": fixed(reals(0.0, strict=True, allow_inf=True))},
    ),
    "construct_random_features": Entry(
        lambda box: {"d": 3, "H": 4, "rng": _rng(box), "distribution": "uniform-cosine"},
        {"d": fixed(ints(2)), "H": fixed(ints(1)), "rng": RNG_JUNK, "distribution": fixed(choices(DISTRIBUTIONS))},
    ),
    "save_random_features": Entry(
        lambda box: {"path": "new.safetensors", "construction": box.objects["random_features"], "seed": 0},
        {"path": output_paths, "construction": fixed(others()), "seed": fixed(ints(0, MAX_SEED))},
    ),
    "build_majority_vote": Entry(
        lambda box: {"d": 3, "heads": 3, "rng": _rng(box), "temperature": math.inf, "predict": False},
        {
            "d": fixed(ints(2)),
            "heads": fixed(ints(1)),
            "rng": RNG_JUNK,
            "temperature": fixed(reals(0.0, strict=True, allow_inf=True)),
            "predict": fixed(switches()),
            "positional_codes": fixed(switches()),
        },
    ),
    "save_majority_vote": Entry(
        lambda box: {"path": "new.safetensors", "built": box.objects["majority_vote"], "seed": 0},
        {"path": output_paths, "built": fixed(others()), "seed": fixed(ints(0, MAX_SEED))},
    ),
    "build_biased_construction": Entry(
        lambda box: {"d": 2, "temperature": math.inf, "grid": None},
        {
            "d": fixed(ints(2)),
            "temperature": fixed(reals(0.0, strict=True, allow_inf=True)),
            "grid": fixed(others(none_ok=True)),
        },
    ),
    "save_biased_construction": Entry(
        lambda box: {"path": "new.safetensors", "construction": box.objects["biased"], "keys": "orthonormal"},
        {"path": output_paths, "construction": fixed(others()), "keys": fixed(choices(KEY_KINDS))},
    ),
    "load_weights": Entry(lambda box: {"path": box.weights}, {"path": input_files}),
    "save_weights": Entry(
        lambda box: {"path": "new.safetensors", "tensors": _weights(box).tensors, "metadata": _weights(box).metadata},
        {"path": output_paths, "tensors": tensor_maps, "metadata": metadata_maps},
    ),
    "WeightFile": Entry(
        lambda box: {"tensors": _weights(box).tensors, "metadata": _weights(box).metadata},
        {"tensors": tensor_maps, "metadata": metadata_maps},
    ),
    "evaluate": Entry(
        lambda box: {"path": box.weights, "samples": 20, "batch_size": 10},
        {
            "path": input_files,
            "task": fixed(choices(tuple(EVAL_TASKS))),
            "N": fixed(ints(1, none_ok=True)),
            "samples": fixed(ints(2)),
            "seed": fixed(ints(0)),
            "keys": fixed(choices(KEY_KINDS)),
            "temperature": fixed(reals(0.0, strict=True, allow_inf=True, none_ok=True)),
            "batch_size": fixed(ints(1)),
            "force": fixed(switches()),
        },
    ),
    "weight_file_model": Entry(
        lambda box: {"weights": _weights(box), "temperature": None},
        {"weights": damaged_weight_files, "temperature": fixed(reals(0.0, strict=True, allow_inf=True, none_ok=True))},
    ),
    "torch_mha_export": Entry(lambda box: {"weights": _weights(box)}, {"weights": damaged_weight_files}),
    "stock_attention": Entry(
        lambda box: {"export": box.objects["export"], "dtype": torch.float64},
        {
            "export": lambda box: st.one_of(
                others(),
                st.just(dataclasses.replace(box.objects["export"], state_dict={})),
                st.just(dataclasses.replace(box.objects["export"], metadata={"embed_dim": "3", "num_heads": "2"})),
            ),
            "dtype": fixed(st.one_of(others(), st.sampled_from([torch.int64, torch.bool, torch.uint8]))),
        },
    ),
    "TrainConfig": Entry(
        lambda box: {},
        {name: fixed(train_config_junk(name, annotation)) for name, annotation in TRAIN_CONFIG_FIELDS.items()},
    ),
    "TrainResult": Entry(
        lambda box: {"final_loss": 0.1, "best_loss": 0.1, "steps": 2, "diverged": False, "seconds": 1.0},
        {
            "final_loss": fixed(st.one_of(TEXT, OBJECTS, st.none(), st.booleans())),
            "best_loss": fixed(st.one_of(TEXT, OBJECTS, st.none(), st.booleans())),
            "steps": fixed(ints(0)),
            "diverged": fixed(switches()),
            "seconds": fixed(reals(0.0)),
            "extra": fixed(st.one_of(st.none(), st.integers(), TEXT, st.lists(st.integers(), max_size=2))),
        },
    ),
    "load_trained_model": Entry(
        lambda box: {"out_dir": box.run, "device": "cpu"},
        {
            "out_dir": input_dirs,
            "device": fixed(choices(("auto", "cpu")).filter(lambda v: not (isinstance(v, str) and "cuda" in v))),
        },
    ),
    "train": Entry(
        lambda box: {"config": SMALL_RUN, "out_dir": "newrun", "progress": False, "progress_interval": 10.0},
        {
            "config": fixed(others()),
            "out_dir": output_dirs,
            "progress": fixed(switches()),
            "progress_interval": fixed(reals(0.0, strict=True)),
        },
    ),
    "train_packed": Entry(
        lambda box: {"configs": [SMALL_RUN], "out_dirs": ["newpack"], "progress": False, "progress_interval": 10.0},
        {
            "configs": fixed(
                st.one_of(
                    others(),
                    st.just([]),
                    st.just(["x"]),
                    st.just([SMALL_RUN, dataclasses.replace(SMALL_RUN, steps=3, seed=1)]),  # not one pack
                )
            ),
            "out_dirs": fixed(st.one_of(others(), st.just([]), st.just(["a", "b"]), st.just([None]))),
            "progress": fixed(switches()),
            "progress_interval": fixed(reals(0.0, strict=True)),
        },
    ),
    "run_sweep": Entry(
        lambda box: dict(SWEEP),
        {
            "preset": fixed(choices(tuple(attnrank.PRESETS))),
            "scale": fixed(choices(("quick",))),
            "out": output_dirs,
            "backend": fixed(choices(BACKENDS)),
            "workers": fixed(ints(1, none_ok=True)),
            "address": fixed(st.one_of(st.integers(), OBJECTS, TEXT)),  # any str: only backend "ray" takes one
            "overrides": fixed(st.one_of(NOT_MAPPINGS, st.just({1: 2}), st.just({"stepz": 3}), st.just({"steps": -1}))),
            "progress": fixed(switches()),
            "batch_seeds": fixed(switches()),
            "pack": fixed(switches()),
            "rebuild": fixed(switches()),
            "only": fixed(st.one_of(st.just({"nokey": 3}), st.just({"seed": -7}))),  # no such field; matches no run
        },
    ),
    "read_store": Entry(lambda box: {"directory": COMMITTED_STORE}, {"directory": input_dirs}),
    "read_curves": Entry(
        lambda box: {"directory": COMMITTED_STORE, "column": "population"},
        {"directory": input_dirs, "column": fixed(choices(("loss", "population")))},
    ),
    "import_torch_mha": Entry(
        lambda box: {"path": box.state_dict, "num_heads": 1, "out": "imported.safetensors"},
        {"path": input_files, "num_heads": fixed(ints(1)), "out": output_paths},
    ),
    "torch_mha_import": Entry(
        lambda box: {"state_dict": box.objects["state"], "num_heads": 1},
        {
            "state_dict": fixed(others()),
            "num_heads": fixed(st.one_of(ints(1), st.just(3))),  # 3 does not divide d = 4
            "metadata": fixed(NOT_MAPPINGS),
            "source": fixed(st.one_of(st.none(), st.integers(), OBJECTS)),
        },
    ),
    "import_reference_encoder": Entry(
        lambda box: {"path": box.reference, "out_dir": "imported", "num_heads": 2, "task": "farthest"},
        {
            "path": input_files,
            "out_dir": output_dirs,
            "num_heads": fixed(st.one_of(ints(1), st.just(4))),  # 4 does not divide the width d + p = 6
            "task": fixed(choices(("farthest", "nearest", "biased", "icl"))),
            "N": fixed(ints(1, none_ok=True)),
            "keys": fixed(choices(KEY_KINDS)),
        },
    ),
    "reference_state_from_encoder": Entry(
        lambda box: {"encoder": box.objects["encoder"], "prefix": ""},
        {"encoder": fixed(others()), "prefix": fixed(st.one_of(st.none(), st.integers(), OBJECTS))},
    ),
}


# --- the checker ------------------------------------------------------------------------------------------------------


def names_argument(message: str, argument: str) -> bool:
    """Whether ``argument`` appears in ``message`` as a word (``d`` in ``d must be``, not in ``dimension``)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(argument)}(?![A-Za-z0-9_])", message) is not None


def refusal_problem(function: Callable[..., Any], arguments: dict[str, Any], argument: str, root: Path) -> str | None:
    """What is wrong with how ``function(**arguments)`` refused junk in ``argument`` (None: refused properly).

    The call runs in ``root`` (relative paths land there); every file under ``root`` must be unchanged.
    """
    before = snapshot(root)
    problem: str | None
    with contextlib.chdir(root):
        try:
            function(**arguments)
        except (TypeError, ValueError, OSError) as exc:
            message = str(exc)
            problem = None if names_argument(message, argument) else f"{type(exc).__name__} not naming it: {message}"
        except Exception as exc:  # noqa: BLE001 - any other exception is the finding
            problem = f"raised {type(exc).__name__}: {exc}"
        else:
            problem = "accepted the junk"
    after = snapshot(root)
    if before != after:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        problem = f"{problem or 'refused'}, but files changed: {changed[:5]}"
        _remove_new(root, set(after) - set(before))  # so that later cases start from the same sandbox
    return problem


def _remove_new(root: Path, created: set[str]) -> None:
    """Remove what a failed case created under ``root`` (deepest first); what existed before is never touched."""
    for relative in sorted(created, key=lambda p: p.count("/"), reverse=True):
        path = root / relative
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


def _callable(name: str) -> Callable[..., Any]:
    return typing.cast(Callable[..., Any], getattr(attnrank, name))


def _cases() -> list[Any]:
    cases = []
    for name, entry in ENTRIES.items():
        for argument in entry.junk:
            reason = entry.waits_for.get(argument)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(name, argument, marks=marks, id=f"{name}-{argument}"))
    return cases


@pytest.mark.parametrize("name, argument", _cases())
def test_junk_is_refused_by_name(sandbox: Sandbox, name: str, argument: str) -> None:
    entry = ENTRIES[name]
    function = _callable(name)
    # An expected failure is not shrunk (each shrinking step would be a training run).
    quick = {"phases": [Phase.explicit, Phase.generate]} if argument in entry.waits_for else {}

    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], **quick)
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        value = data.draw(entry.junk[argument](sandbox), label=argument)
        arguments = {**entry.valid(sandbox), argument: value}
        problem = refusal_problem(function, arguments, argument, sandbox.root)
        assert problem is None, f"{name}({argument}={value!r}): {problem}"

    case()


# --- controls ---------------------------------------------------------------------------------------------------------


def test_every_public_callable_is_fuzzed() -> None:
    public = {
        n for n in attnrank.__all__ if callable(getattr(attnrank, n)) and not isinstance(getattr(attnrank, n), dict)
    }
    assert public == set(ENTRIES), f"without an entry: {sorted(public - set(ENTRIES))}"
    for name, entry in ENTRIES.items():
        parameters = set(inspect.signature(_callable(name)).parameters)
        assert set(entry.junk) == parameters, f"{name}: no junk for {sorted(parameters - set(entry.junk))}"


def test_the_valid_calls_succeed(sandbox: Sandbox, tmp_path: Path) -> None:
    """Every entry's valid arguments are accepted (run in a fresh directory: the valid calls write files)."""
    skipped = {"run_sweep", "train", "train_packed", "import_reference_encoder"}  # slower; below or elsewhere
    with contextlib.chdir(tmp_path):
        for name, entry in ENTRIES.items():
            if name not in skipped:
                _callable(name)(**entry.valid(sandbox))


@pytest.mark.slow
def test_the_slow_valid_calls_succeed(sandbox: Sandbox, tmp_path: Path) -> None:
    """The entries a sweep or training run stands behind: accepted too (about 20 s on 2 shared cores)."""
    with contextlib.chdir(tmp_path):
        for name in ("train", "train_packed", "import_reference_encoder", "run_sweep"):
            _callable(name)(**ENTRIES[name].valid(sandbox))


def test_the_checker_fails_bad_refusals(tmp_path: Path) -> None:
    def attribute_error(weights: Any) -> None:
        weights.layout  # noqa: B018 - the unchecked argument's AttributeError

    def unnamed(d: Any) -> None:
        raise ValueError("must be an integer >= 2")

    def accepts(d: Any) -> None:
        return None

    def writes(path: Any) -> None:
        Path("stray.txt").write_text("x")
        raise ValueError("path must be a path")

    def refuses(d: Any) -> None:
        raise ValueError("d must be an integer >= 2, got 1")

    assert "AttributeError" in (refusal_problem(attribute_error, {"weights": None}, "weights", tmp_path) or "")
    assert "not naming it" in (refusal_problem(unnamed, {"d": 1}, "d", tmp_path) or "")
    assert refusal_problem(accepts, {"d": 1}, "d", tmp_path) == "accepted the junk"
    assert "files changed" in (refusal_problem(writes, {"path": 1}, "path", tmp_path) or "")
    clean = tmp_path / "clean"
    clean.mkdir()
    assert refusal_problem(refuses, {"d": 1}, "d", clean) is None  # the positive control
    assert not names_argument("the dimension is wrong", "d") and names_argument("[Errno 2] d is bad", "d")


def test_the_failures_measured_in_issue_20(sandbox: Sandbox) -> None:
    """The issue's measured escapes, each as a named refusal now (SafetensorError and AttributeError before)."""
    for unwritable in ("/proc/attnrank-fuzz/full.safetensors", str(sandbox.blocker / "full.safetensors")):
        assert refusal_problem(attnrank.save_full_rank, {"path": unwritable, "d": 3}, "path", sandbox.root) is None
    for junk in (None, {}):
        assert refusal_problem(attnrank.torch_mha_export, {"weights": junk}, "weights", sandbox.root) is None
    assert refusal_problem(attnrank.stock_attention, {"export": None}, "export", sandbox.root) is None
