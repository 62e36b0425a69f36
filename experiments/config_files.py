"""Configuration files as plain mappings: YAML (PyYAML's safe loader) or JSON, checked, never trusted.

`attnrank train --config FILE` (:func:`read_train_config`) and `attnrank sweep --reference CONFIG [SWEEP]` read their
files here. A file is read
as untrusted input: an unreadable file, a syntax error, a document that is not a mapping, a key given twice in one
mapping (YAML and JSON parsers keep the last one silently; here it is refused, since the other value was written for a
reason) or a tag outside YAML's plain types (the safe loader refuses ``!!python/...``) is one ValueError naming the
file, and the line where the parser says so. Only a regular file is read (a FIFO or a device is refused unread), of at
most `experiments.json_files.MAX_JSON_BYTES`, nested at most `MAX_JSON_DEPTH` levels (issue 50).

Torch-free, like `experiments.config`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import yaml

from experiments.config import TrainConfig
from experiments.json_files import MAX_JSON_BYTES, MAX_JSON_DEPTH, json_depth
from theory.validation import read_regular_file

JSON_SUFFIXES = (".json",)
"""Suffixes read as JSON; every other file is read as YAML (of which JSON is nearly a subset)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key that appears twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                repeated = key in seen
            except TypeError:  # an unhashable key (a list as a key): the base class refuses it with its mark
                break
            if repeated:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _refuse_json_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for key, value in pairs:
        if key in mapping:
            raise ValueError(f"key {key!r} appears twice in one object")
        mapping[key] = value
    return mapping


def _where(exc: yaml.YAMLError) -> str:
    """The parser's complaint in one line, with the line and column it points at (1-based)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    place = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return " ".join(str(problem).split()) + place


def load_mapping(path: Path | str) -> dict[str, Any]:
    """The top-level mapping of a YAML or JSON file (JSON for a ``.json`` suffix, else YAML).

    An empty YAML document reads as an empty mapping. Raises ValueError (or OSError for a file that cannot be opened)
    naming the file; see the module docstring for what is refused.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not a configuration file")
    if not os.path.lexists(path):
        raise ValueError(f"{path}: configuration file not found")
    try:  # a regular file only (a FIFO would block, a device never end), of at most MAX_JSON_BYTES
        text = read_regular_file("file", path, max_bytes=MAX_JSON_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file (not UTF-8 at byte {exc.start})") from exc
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"{path}: not a readable configuration file ({detail})") from None
    if json_depth(text) > MAX_JSON_DEPTH:  # the parsers recurse once per level (a RecursionError otherwise)
        raise ValueError(f"{path}: nested more than {MAX_JSON_DEPTH} levels deep; not a configuration file")
    data: Any
    if path.suffix.lower() in JSON_SUFFIXES:
        try:
            data = json.loads(text, object_pairs_hook=_refuse_json_duplicates)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}, column {exc.colno})") from exc
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc
    else:
        try:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {_where(exc)}") from exc
        except RecursionError:  # block-style nesting, which json_depth does not count
            raise ValueError(f"{path}: nested too deeply; not a configuration file") from None
        if data is None:
            data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must hold a mapping of keys to values at the top, got {type(data).__name__}")
    strange = [key for key in data if not isinstance(key, str)]
    if strange:
        raise ValueError(f"{path}: every top-level key must be a name, got {strange[0]!r}")
    return data


def read_train_config(path: Path | str) -> dict[str, Any]:
    """The TrainConfig fields a run's configuration file gives (checked by name, not yet by value).

    The file is either a mapping of TrainConfig fields (any subset; the others keep their defaults) or the
    ``config.json`` a run writes (`experiments.training.run_directory.config_record`), whose ``config`` entry holds
    them (its provenance, hash and device entries describe where it ran and are not read). ValueError naming the file
    and the key for a key that is no field.
    """
    data = load_mapping(path)
    if isinstance(data.get("config"), dict) and "config_hash" in data:  # a run directory's config.json
        data = data["config"]
        strange = [key for key in data if not isinstance(key, str)]
        if strange:
            raise ValueError(f"{path}: every key of config must be a name, got {strange[0]!r}")
    known = [f.name for f in dataclasses.fields(TrainConfig)]
    unknown = [key for key in data if key not in known]
    if unknown:
        raise ValueError(f"{path}: {unknown[0]} is no run field (fields: {', '.join(known)})")
    values = dict(data)
    if isinstance(values.get("betas"), list):
        values["betas"] = tuple(values["betas"])
    return values
