"""Globals of an untrusted pickle carried as names: inert stand-ins, and the names that are refused outright.

A pickle names every class or function it needs with a GLOBAL opcode (``module name``) and then calls it (REDUCE,
NEWOBJ) or hands it a state (BUILD). ``torch.load(weights_only=True)`` builds tensors and plain containers itself and
refuses every other global. A PyTorch Lightning checkpoint names many others: the data module's class in
``datamodule_hyper_parameters`` (``task.NearestPointDataset``), callbacks, scheduler and optimizer classes,
``functools.partial``, numpy scalars. None of them is needed to read the weights in ``state_dict``.

So every such name is handed to torch's safe loader, through its own allowlist (``torch.serialization.safe_globals``
with ``(object, "module.name")`` pairs), as an `InertGlobal`: a fresh class that carries the name and nothing else.
The loader then "calls" it and gets an instance that carries the same name; building, calling or handing a state to
an instance does nothing and yields an instance again. No module named in the file is imported, no function named in
it runs, and no state it carries is interpreted (`InertGlobal.__setstate__` drops it). The safe loader's own rules
still hold for everything else: it fills only lists, dicts, OrderedDicts and Counters, so an unknown dict subclass
filled item by item (``collections.defaultdict``) is refused by torch, in one line, rather than guessed at.

Names that run code when called are refused before anything is loaded (`refusal`), even though an inert stand-in
would never run them: no trainer writes ``os.system`` or ``builtins.eval`` into a checkpoint, so such a file is a
payload, and saying so is more useful than reading around it. The rule is a list of modules (`REFUSED_MODULES`:
process, file, network, import, code-object and FFI machinery, pickle itself, ``operator``'s call gadgets) refused
with everything under them, plus ``builtins`` except the plain data types in `BUILTIN_DATA_TYPES` (``dict``,
``frozenset``, ``object``, ...: names an OmegaConf config or a pickled frozenset carry), and a few torch entry points
that load or compile code (`REFUSED_TORCH`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import torch

REFUSED_MODULES = frozenset(
    {
        # processes, the interpreter and its imports
        "os",
        "posix",
        "nt",
        "posixpath",
        "ntpath",
        "subprocess",
        "_posixsubprocess",
        "_winapi",
        "msvcrt",
        "sys",
        "importlib",
        "imp",
        "pkgutil",
        "zipimport",
        "runpy",
        "site",
        "sysconfig",
        "multiprocessing",
        "_thread",
        "threading",
        "concurrent",
        "asyncio",
        "signal",
        "pty",
        "tty",
        "termios",
        "fcntl",
        "resource",
        "platform",
        "commands",
        "popen2",
        # code objects, evaluation, debuggers
        "code",
        "codeop",
        "types",
        "ast",
        "inspect",
        "dis",
        "gc",
        "marshal",
        "pdb",
        "bdb",
        "timeit",
        "trace",
        "profile",
        "cProfile",
        "pydoc",
        "compileall",
        "py_compile",
        # pickle and other deserialisers that would run a second, unrestricted load
        "pickle",
        "_pickle",
        "pickletools",
        "shelve",
        "dill",
        "cloudpickle",
        "joblib",
        "yaml",
        "jsonpickle",
        # files and the network
        "io",
        "_io",
        "codecs",
        "shutil",
        "tempfile",
        "glob",
        "pathlib",
        "socket",
        "ssl",
        "select",
        "selectors",
        "http",
        "urllib",
        "urllib2",
        "ftplib",
        "smtplib",
        "telnetlib",
        "requests",
        "webbrowser",
        # foreign functions
        "ctypes",
        "_ctypes",
        "cffi",
        # call gadgets: attrgetter / methodcaller / itemgetter turn data into calls
        "operator",
        "_operator",
        # package managers and build tools
        "pip",
        "setuptools",
        "distutils",
        "ensurepip",
        "venv",
        "__builtin__",  # Python 2's builtins (torch maps it to builtins; refused under either name)
    }
)
"""Modules refused with everything under them (``os.path.join`` as much as ``os.system``). ``builtins`` is handled
apart (`BUILTIN_DATA_TYPES`); ``copyreg`` and ``functools`` are not refused: their reconstructors and ``partial`` only
combine names the file already gives, and are carried as names like those."""

BUILTIN_DATA_TYPES = frozenset(
    {
        "object",
        "dict",
        "list",
        "tuple",
        "set",
        "frozenset",
        "int",
        "float",
        "complex",
        "bool",
        "str",
        "bytes",
        "bytearray",
        "slice",
        "range",
        "NoneType",
        "Ellipsis",
        "NotImplemented",
    }
)
"""The names in ``builtins`` carried as names: plain data types. Every other builtin (``eval``, ``exec``,
``getattr``, ``__import__``, ``open``, ``compile``, ``globals``, ``setattr``, ...) is refused."""

REFUSED_TORCH = (
    "torch.load",
    "torch.hub",
    "torch.jit",
    "torch.package",
    "torch.ops",
    "torch._ops",
    "torch._C",
    "torch.compile",
    "torch._dynamo",
    "torch.fx",
    "torch.utils.cpp_extension",
    "torch.serialization",
    "torch.multiprocessing",
    "torch.distributed",
)
"""Torch names (and everything under them) that load, compile or run code; torch's safe loader builds the few torch
globals a checkpoint needs (tensors, storages, dtypes, ``_rebuild_*``) itself, before any of these rules apply."""


def refusal(name: str) -> str | None:
    """Why the global ``name`` ("module.qualname") is refused, or None when it may be carried as a name.

    Args:
        name: the global as the pickle names it (module, a dot, the qualified name).

    Returns:
        a short reason ("runs code: module os"), or None.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    root = name.split(".", 1)[0]
    if root in REFUSED_MODULES:
        return f"module {root} runs processes, code, files or imports"
    if root == "builtins":
        attribute = name[len("builtins.") :]
        if attribute not in BUILTIN_DATA_TYPES:
            return "a builtin other than a plain data type (eval, exec, getattr, __import__, open, ...)"
        return None
    for prefix in REFUSED_TORCH:
        if name == prefix or name.startswith(prefix + "."):
            return f"{prefix} loads, compiles or runs code"
    if not name or name.startswith(".") or name.endswith(".") or "." not in name:
        return "not a module-qualified name"
    return None


class InertGlobal:
    """A stand-in for a global of an untrusted pickle: it carries the global's name and does nothing else.

    Each global gets its own subclass (`inert_class`), registered with torch's safe loader under the global's name.
    The loader calls the class (REDUCE), creates it (NEWOBJ) and hands its instances a state (BUILD); all three give
    an instance of the same subclass and drop their arguments. Calling an instance gives another one.
    """

    __slots__ = ()
    global_name: ClassVar[str] = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> InertGlobal:  # noqa: ARG003 - arguments are dropped unread
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ARG002
        pass

    def __setstate__(self, state: Any) -> None:  # noqa: ARG002 - BUILD's state is dropped, never interpreted
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> InertGlobal:  # noqa: ARG002
        return type(self)()

    def __repr__(self) -> str:
        return f"<{self.global_name} (not loaded)>"


def inert_class(name: str) -> type[InertGlobal]:
    """A fresh `InertGlobal` subclass standing for the global ``name``."""
    if refusal(name) is not None:
        raise ValueError(f"name {name!r} is refused ({refusal(name)}); it has no stand-in")
    attributes = {"__slots__": (), "global_name": name, "__module__": "inert", "__qualname__": name}
    return type(f"Inert[{name}]", (InertGlobal,), attributes)


def global_name_of(value: object) -> str | None:
    """The global an inert stand-in (a class or an instance) carries, or None for anything else."""
    if isinstance(value, InertGlobal):
        return value.global_name
    if isinstance(value, type) and issubclass(value, InertGlobal):
        return value.global_name
    return None


@contextlib.contextmanager
def carried_as_names(names: Iterable[str]) -> Iterator[dict[str, type[InertGlobal]]]:
    """Inside the block, torch's safe loader builds each of ``names`` as an inert stand-in.

    Uses ``torch.serialization.safe_globals`` (torch's allowlist, with ``(object, "module.name")`` pairs); the
    allowlist is process-wide, so loads in other threads see the stand-ins while the block runs. Names torch already
    builds itself (tensors, storages, ``collections.OrderedDict``, ...) are looked up in torch's own table first and
    are never replaced.

    Yields:
        name -> its stand-in class.
    """
    classes = {name: inert_class(name) for name in sorted(set(names))}
    with torch.serialization.safe_globals([(cls, name) for name, cls in classes.items()]):
        yield classes
