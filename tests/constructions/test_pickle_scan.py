"""Tests of constructions/pickle_scan.py: the pickles of torch files and the globals they name, found statically."""

from __future__ import annotations

import collections
import io
import pickle
import zipfile

import pytest
import torch

from constructions.pickle_scan import PickleScanError, named_globals, torch_pickles


class Named:
    """A class pickled by name."""


def _names(data: bytes) -> list[tuple[str, str]]:
    return [(g.name, g.opcode) for g in named_globals(data)]


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_every_protocol_names_its_globals(protocol: int) -> None:
    data = pickle.dumps({"a": [Named, collections.OrderedDict()], "b": Named}, protocol=protocol)
    names = {name for name, _ in _names(data)}
    assert {f"{__name__}.Named", "collections.OrderedDict"} <= names, names


def test_a_stack_global_is_read_through_the_memo() -> None:
    """Protocol 4 names a global by two strings pushed before STACK_GLOBAL; a repeated name reuses the memo."""
    data = pickle.dumps([Named, Named, collections.OrderedDict], protocol=4)
    found = _names(data)
    assert (f"{__name__}.Named", "STACK_GLOBAL") in found and ("collections.OrderedDict", "STACK_GLOBAL") in found


def test_python2_names_are_translated_as_torch_translates_them() -> None:
    assert ("builtins.eval", "GLOBAL") in _names(pickle.dumps(eval, protocol=2))  # written as __builtin__.eval


def test_torch_files_give_their_object_pickles() -> None:
    state = {"w": torch.ones(2, dtype=torch.float64)}
    zipped, legacy = io.BytesIO(), io.BytesIO()
    torch.save(state, zipped)
    torch.save(state, legacy, _use_new_zipfile_serialization=False)
    (data_pkl,) = torch_pickles(zipped.getvalue())
    assert "torch._utils._rebuild_tensor_v2" in {n for n, _ in _names(data_pkl)}
    streams = torch_pickles(legacy.getvalue())
    assert len(streams) == 5 and "torch.DoubleStorage" in {n for s in streams for n, _ in _names(s)}
    assert len(torch_pickles(pickle.dumps({"x": 1}, protocol=2))) == 1
    second = pickle.dumps(1, protocol=2) + pickle.dumps(Named, protocol=0)  # no PROTO opcode to recognise it by
    assert f"{__name__}.Named" in {n for s in torch_pickles(second) for n, _ in _names(s)}


def _rezip(raw: bytes, edit) -> bytes:  # noqa: ANN001
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as source, zipfile.ZipFile(out, "w") as target:
        edit(source, target)
    return out.getvalue()


def test_archives_are_checked_before_an_entry_is_read() -> None:
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    raw = buffer.getvalue()

    def deflate(source, target) -> None:  # noqa: ANN001
        for info in source.infolist():
            target.writestr(info.filename, source.read(info.filename), compress_type=zipfile.ZIP_DEFLATED)

    def second_top(source, target) -> None:  # noqa: ANN001
        for info in source.infolist():
            target.writestr(info, source.read(info.filename))
        target.writestr("other/x", b"")

    def without_data(source, target) -> None:  # noqa: ANN001
        for info in source.infolist():
            if not info.filename.endswith("data.pkl"):
                target.writestr(info, source.read(info.filename))

    cases = {
        "compressed": _rezip(raw, deflate),
        "several top directories": _rezip(raw, second_top),
        "without": _rezip(raw, without_data),
        "not a readable zip": raw[: len(raw) // 2],
        "neither a zip archive nor a pickle": b"text",
        "damaged pickle": pickle.dumps({"x": list(range(50))}, protocol=2)[:-9],
    }
    for phrase, data in cases.items():
        with pytest.raises(PickleScanError, match=phrase):
            torch_pickles(data)
