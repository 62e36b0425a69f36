"""The pickle streams of a torch file and the globals they name, found without running any of them.

``torch.save`` writes one of two layouts:

- a zip archive (torch >= 1.6): every entry lies under one top directory (``archive/``), stored uncompressed; the
  object graph is the pickle ``archive/data.pkl``, whose tensors point (persistent ids) at the storage entries
  ``archive/data/0``, ``archive/data/1``, ...;
- the legacy stream: five pickles back to back (a magic number, the protocol version, system information, the object
  graph, the storage keys), then the raw storage bytes.

A plain ``pickle.dump`` file is one pickle. `torch_pickles` returns the pickles of any of these; `named_globals` lists
every global a pickle names, statically, with `pickletools.genops` (the standard library's disassembler, which reads
opcodes and never executes them).

Archives are checked before anything reads their entries, so that a zip bomb costs nothing: every entry must be
stored (a compressed entry is refused: torch.save writes none, and a deflated entry is how a few kilobytes claim
gigabytes), must lie inside the file, and all of them together cannot claim more bytes than the file has.
"""

from __future__ import annotations

import io
import pickletools
import struct
import zipfile
from dataclasses import dataclass

from torch._utils import IMPORT_MAPPING, NAME_MAPPING  # the Python 2 names torch's loaders translate, as they do

ZIP_MAGIC = b"PK\x03\x04"
"""The first bytes of a torch file written by ``torch.save`` since torch 1.6 (a zip archive)."""
PICKLE_PROTOCOL_OPCODE = 0x80
"""The first byte of a pickle stream of protocol >= 2 (torch's legacy format and plain pickles start with one)."""
LEGACY_PICKLES = 5
"""Pickles at the start of a legacy torch file: magic number, protocol version, system info, objects, storage keys."""
_STRING_PUSHES = frozenset(
    {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING", "SHORT_BINSTRING"}
)
_MEMO_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    ValueError,
    OverflowError,
    EOFError,
    NotImplementedError,
    OSError,
    KeyError,
    IndexError,
    struct.error,
)


class PickleScanError(ValueError):
    """Bytes that are not a torch file (or pickle) this reader accepts; the message does not name the file."""


@dataclass(frozen=True)
class NamedGlobal:
    """A global named by a pickle.

    Attributes:
        name: "module.qualname" after torch's Python 2 mapping ("?" when a STACK_GLOBAL's strings were not found).
        opcode: the opcode that named it (GLOBAL for every file torch.save writes; STACK_GLOBAL, INST, OBJ for
            pickles of other protocols, which torch's safe loader does not read).
        position: byte offset of the opcode in its pickle.
    """

    name: str
    opcode: str
    position: int


def _mapped(module: str, name: str) -> str:
    """``module.name`` as torch's loaders look it up (Python 2 module and class names translated)."""
    if (module, name) in NAME_MAPPING:
        module, name = NAME_MAPPING[(module, name)]
    elif module in IMPORT_MAPPING:
        module = IMPORT_MAPPING[module]
    return f"{module}.{name}"


def named_globals(stream: bytes) -> list[NamedGlobal]:
    """Every global ``stream`` (one pickle) names, in order, without executing anything.

    GLOBAL and INST carry the name as their argument. STACK_GLOBAL (protocol 4) takes the module and the name from the
    two strings pushed before it: they are followed through the memo, which is enough for what picklers write, and
    reported as "?" otherwise (the stream is refused either way: torch's safe loader reads no STACK_GLOBAL).

    Raises:
        PickleScanError: the stream is not a complete pickle (unknown opcode, truncated before STOP).
    """
    found: list[NamedGlobal] = []
    pushed: list[str | None] = []  # the values of recent pushes that were strings (None for anything else)
    memo: dict[int, str | None] = {}
    try:
        for opcode, argument, position in pickletools.genops(io.BytesIO(stream)):
            name = opcode.name
            if name in ("GLOBAL", "INST"):
                module, _, qualname = str(argument).partition(" ")
                found.append(NamedGlobal(_mapped(module, qualname), name, position or 0))
                pushed.append(None)
            elif name == "STACK_GLOBAL":
                module_name = pushed[-2:] if len(pushed) >= 2 else [None, None]
                text = _mapped(*module_name) if all(isinstance(s, str) for s in module_name) else "?"  # type: ignore[arg-type]
                found.append(NamedGlobal(text, name, position or 0))
                pushed.append(None)
            elif name in _STRING_PUSHES:
                pushed.append(argument if isinstance(argument, str) else None)
            elif name in _MEMO_GETS:
                pushed.append(memo.get(argument if isinstance(argument, int) else -1))
            elif name in _MEMO_PUTS:
                memo[argument if isinstance(argument, int) else -1] = pushed[-1] if pushed else None
            elif name == "MEMOIZE":
                memo[len(memo)] = pushed[-1] if pushed else None
            elif name not in ("PROTO", "FRAME", "STOP", "MARK"):
                pushed.append(None)
            del pushed[:-2]  # only the last two pushes can name a STACK_GLOBAL
    except (ValueError, EOFError, struct.error, UnicodeDecodeError, OverflowError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise PickleScanError(f"damaged pickle ({detail})") from exc
    return found


def _end_of_pickle(data: bytes, start: int) -> int:
    """The offset just past the STOP of the pickle starting at ``start``."""
    stream = io.BytesIO(data)
    stream.seek(start)
    last = start
    try:
        for opcode, _, position in pickletools.genops(stream):
            last = position if position is not None else last
            if opcode.name == "STOP":
                return last + 1
    except (ValueError, EOFError, struct.error, UnicodeDecodeError, OverflowError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise PickleScanError(f"damaged pickle at byte {start} ({detail})") from exc
    raise PickleScanError(f"damaged pickle at byte {start} (no STOP)")


def _zip_pickle(data: bytes) -> bytes:
    """``data.pkl`` of a torch zip archive, after checking every entry (see the module docstring)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
            if not entries:
                raise PickleScanError("a zip archive without entries, not a torch file")
            top = entries[0].filename.split("/", 1)[0]
            claimed = 0
            for entry in entries:
                if not entry.filename.startswith(top + "/"):
                    raise PickleScanError(
                        f"zip entries under several top directories ({top!r}, {entry.filename!r}); not a torch file"
                    )
                if entry.compress_type != zipfile.ZIP_STORED:
                    raise PickleScanError(
                        f"zip entry {entry.filename!r} is compressed (method {entry.compress_type}); torch.save "
                        "stores entries uncompressed (a zip bomb or another kind of archive)"
                    )
                if entry.file_size != entry.compress_size or entry.header_offset + entry.file_size > len(data):
                    raise PickleScanError(
                        f"zip entry {entry.filename!r} claims {entry.file_size} bytes, more than the file holds"
                    )
                claimed += entry.file_size
            if claimed > len(data):
                raise PickleScanError(f"zip entries claim {claimed} bytes in a file of {len(data)}")
            name = f"{top}/data.pkl"
            if name not in archive.namelist():
                raise PickleScanError(f"zip archive without {name!r}; not a torch file")
            return archive.read(name)
    except PickleScanError:
        raise
    except _ZIP_ERRORS as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise PickleScanError(f"not a readable zip archive ({detail})") from exc


def torch_pickles(data: bytes) -> list[bytes]:
    """The pickles of a torch file (zip or legacy) or a plain pickle, checked to be complete.

    Args:
        data: the file's bytes; a zip archive, or starting with a pickle protocol opcode.

    Returns:
        the zip archive's ``data.pkl``; or the pickles at the start of the stream, back to back until the bytes end
        or `LEGACY_PICKLES` have been read (a legacy torch file's five, after which its raw storages follow; a plain
        pickle's one), each ending at its STOP. Bytes after a plain pickle that are not a pickle are refused as
        damage: torch's legacy loader, which reads five pickles, would not read such a file either.

    Raises:
        PickleScanError: neither layout, a damaged or truncated pickle, or an archive that fails the checks above.
    """
    if data[:4] == ZIP_MAGIC:
        stream = _zip_pickle(data)
        _end_of_pickle(stream, 0)  # complete (named_globals would say so too, with less context)
        return [stream]
    if not data or data[0] != PICKLE_PROTOCOL_OPCODE:
        raise PickleScanError("neither a zip archive nor a pickle")
    streams: list[bytes] = []
    start = 0
    while len(streams) < LEGACY_PICKLES and start < len(data):  # a later pickle may be of protocol 0 (no PROTO)
        end = _end_of_pickle(data, start)
        streams.append(data[start:end])
        start = end
    return streams
