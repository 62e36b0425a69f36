"""Every preset means what it meant before the per-figure move (issue 31).

`tests/experiments/sweeps/data/preset_specs.json` was written by `scripts/record_preset_specs.py` from the code as it
stood before the presets and claims moved into one module per figure (commit d9a6dac). This test rebuilds the same
description from the current code and compares it entry by entry: every preset and scale resolves to the same run
specs (a digest of every field, in the same order), and the same description, figure, paper numbers, claim wording,
grade rules and scaling rules.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPOSITORY = Path(__file__).resolve().parents[3]
RECORDED = Path(__file__).parent / "data" / "preset_specs.json"


def _recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "record_preset_specs", REPOSITORY / "scripts" / "record_preset_specs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def described() -> tuple[dict[str, Any], dict[str, Any]]:
    recording = json.loads(RECORDED.read_text(encoding="utf-8"))
    # The same JSON round trip as the recording; TrainConfig fields added since are digested only when set.
    now = json.loads(json.dumps(_recorder().describe_presets(known_fields=recording["train_fields"])))
    return recording["presets"], now


def test_every_recorded_preset_still_exists(described: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The recording covers the presets it recorded; presets added since (fig1-d64-replay, finite-set, ...) are new
    runs, not changed ones, and are admitted."""
    recorded, now = described
    missing = sorted(set(recorded) - set(now))
    assert not missing, f"recorded presets that no longer exist: {missing}"


@pytest.mark.parametrize(
    "field", ["description", "figure", "claim", "expected", "paper", "claim_rules", "scaling_rules"]
)
def test_metadata_unchanged(described: tuple[dict[str, Any], dict[str, Any]], field: str) -> None:
    recorded, now = described
    for name in recorded:
        assert now[name][field] == recorded[name][field], f"{name}: {field} changed"


def test_every_scale_resolves_to_the_same_runs(described: tuple[dict[str, Any], dict[str, Any]]) -> None:
    recorded, now = described
    for name in recorded:
        assert sorted(now[name]["scales"]) == sorted(recorded[name]["scales"]), f"{name}: scales changed"
        for scale, runs in recorded[name]["scales"].items():
            assert now[name]["scales"][scale] == runs, f"{name} {scale}: run specs changed"


def test_the_comparison_can_fail(described: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Negative control: one changed field of one run changes its digest, so an altered grid would be caught."""
    from experiments.studies import get_preset

    recorder = _recorder()
    spec = get_preset("fig1").runs("quick")[0].to_dict()
    known = [k for k in spec if k != "layer_init"]  # as if layer_init had been added after the recording
    digest = recorder.full_spec_digest(spec, known)
    assert digest != recorder.full_spec_digest({**spec, "lr": spec["lr"] * 2}, known)
    assert digest != recorder.full_spec_digest({**spec, "checkpoint_every": 7}, known)
    assert digest != recorder.full_spec_digest({**spec, "layer_init": "copies"}, known)  # a new field, set
    assert digest == recorder.full_spec_digest({k: v for k, v in spec.items() if k != "layer_init"}, known)
