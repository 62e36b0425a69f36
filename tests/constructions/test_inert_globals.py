"""Tests of constructions/inert_globals.py: which globals are refused, and what a carried name does (nothing)."""

from __future__ import annotations

import io

import pytest
import torch

from constructions.inert_globals import InertGlobal, carried_as_names, global_name_of, inert_class, refusal

REFUSED = [
    "os.system",
    "os.path.join",  # everything under a refused module, however harmless the one name
    "posix.system",
    "nt.system",
    "subprocess.Popen",
    "subprocess.check_output",
    "commands.getoutput",
    "builtins.eval",
    "builtins.exec",
    "builtins.getattr",
    "builtins.__import__",
    "builtins.open",
    "builtins.compile",
    "__builtin__.eval",
    "importlib.import_module",
    "sys.exit",
    "pickle.loads",
    "shutil.rmtree",
    "socket.socket",
    "runpy.run_path",
    "code.interact",
    "ctypes.CDLL",
    "pty.spawn",
    "webbrowser.open",
    "operator.attrgetter",
    "io.open",
    "types.FunctionType",
    "torch.load",
    "torch.hub.load",
    "torch.jit.load",
    "torch.utils.cpp_extension.load_inline",
    "nomodule",
]
CARRIED = [
    "task.NearestPointDataset",
    "builtins.dict",
    "builtins.frozenset",
    "builtins.object",
    "functools.partial",
    "copyreg._reconstructor",
    "collections.defaultdict",
    "numpy.core.multiarray.scalar",
    "torch.optim.adamw.AdamW",
    "torch.loader_of_mine.X",  # "torch.load" refuses torch.load and what is under it, not every name it prefixes
    "osmosis.Model",  # nor does "os" refuse every module whose name starts with os
    "lightning.fabric.utilities.data.AttributeDict",
    "omegaconf.dictconfig.DictConfig",
]


@pytest.mark.parametrize("name", REFUSED)
def test_names_that_run_code_are_refused(name: str) -> None:
    assert refusal(name) is not None
    with pytest.raises(ValueError, match="refused"):
        inert_class(name)


@pytest.mark.parametrize("name", CARRIED)
def test_names_of_classes_and_data_are_carried(name: str) -> None:
    assert refusal(name) is None


def test_a_stand_in_does_nothing_whatever_is_done_to_it() -> None:
    cls = inert_class("task.NearestPointDataset")
    assert global_name_of(cls) == "task.NearestPointDataset" and cls.__qualname__ == "task.NearestPointDataset"
    made = cls("any", "arguments", keyword=1)  # what REDUCE does
    new = cls.__new__(cls, 1, 2)  # what NEWOBJ does
    made.__setstate__({"size": 3, "evil": object()})  # what BUILD does: the state is dropped
    called = made(4)  # applying an instance gives another stand-in
    assert all(isinstance(x, cls) for x in (made, new, called))
    assert not hasattr(made, "size") and not hasattr(made, "__dict__")
    assert global_name_of(called) == "task.NearestPointDataset" and "not loaded" in repr(made)
    assert global_name_of(3) is None and global_name_of(InertGlobal) == ""


def test_the_allowlist_holds_the_stand_ins_inside_the_block_only() -> None:
    before = set(torch.serialization.get_safe_globals())
    with carried_as_names(["task.A", "task.B", "task.A"]) as classes:
        assert sorted(classes) == ["task.A", "task.B"]
        registered = {
            name for entry in torch.serialization.get_safe_globals() if isinstance(entry, tuple) for name in entry[1:]
        }
        assert {"task.A", "task.B"} <= registered
    assert set(torch.serialization.get_safe_globals()) == before


def test_torch_builds_a_file_through_the_stand_ins_and_never_the_real_class() -> None:
    class Real:
        built = 0

        def __init__(self) -> None:
            Real.built += 1

    Real.__module__, Real.__qualname__ = __name__, "Real"
    globals()["Real"] = Real
    buffer = io.BytesIO()
    try:
        torch.save({"w": torch.ones(2), "obj": Real()}, buffer)
    finally:
        del globals()["Real"]
    built = Real.built
    with carried_as_names([f"{__name__}.Real"]):
        loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    assert Real.built == built and global_name_of(loaded["obj"]) == f"{__name__}.Real"
    assert torch.equal(loaded["w"], torch.ones(2))
