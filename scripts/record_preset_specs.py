"""Write every preset's resolved run specs and metadata as JSON (the reference for the preset-equivalence test).

Run before a change that must not alter what any preset means (issue 31's move of the presets into one module per
figure): ``python scripts/record_preset_specs.py tests/experiments/sweeps/data/preset_specs.json``. The test
(`tests/experiments/sweeps/test_preset_equivalence.py`) rebuilds the same description from the current code and
compares it with the recorded file entry by entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from experiments.config import TrainConfig
from experiments.studies import CLAIMS, PRESETS, SCALING_RULES

try:  # after the per-figure move
    from experiments.sweeps.run_specs import spec_kind
except ImportError:  # the code as it stood before it (where the reference was recorded)
    from experiments.studies import spec_kind  # type: ignore[attr-defined,no-redef]

TRAIN_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}


def full_spec_digest(spec: dict[str, Any], known_fields: Collection[str] | None = None) -> str:
    """sha256 of every field of a spec, execution knobs (device, checkpoint_every, ...) included, unlike
    ``config_hash``: two specs with equal digests are the same run, trained and checkpointed the same way.

    ``known_fields``: the TrainConfig fields of the recording; a field added since is left out while it holds its
    default (a new option that keeps old behaviour changes no digest; one set to anything else does)."""
    kept = {
        k: v
        for k, v in spec.items()
        if known_fields is None or k in known_fields or k not in TRAIN_DEFAULTS or v != TRAIN_DEFAULTS[k]
    }
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def describe_presets(known_fields: Collection[str] | None = None) -> dict[str, Any]:
    """Preset name -> metadata, paper numbers, claim, scaling rules and, per scale, each run's "kind:digest"."""
    described: dict[str, Any] = {}
    for name, preset in sorted(PRESETS.items()):
        claim = CLAIMS.get(name)
        described[name] = {
            "description": preset.description,
            "figure": None if preset.figure is None else preset.figure.name,
            "claim": preset.claim,
            "expected": dict(preset.expected),
            "paper": [{"label": p.label, "value": list(p.value), "where": dict(p.where)} for p in preset.paper],
            "claim_rules": None
            if claim is None
            else {"statement": claim.statement, "magnitude": claim.magnitude, "direction": claim.direction},
            "scaling_rules": [
                {
                    f.name: dict(getattr(rule, f.name)) if f.name in ("worse", "better") else getattr(rule, f.name)
                    for f in dataclasses.fields(rule)
                }
                for rule in SCALING_RULES.get(name, ())
            ],
            "scales": {
                scale: [f"{spec_kind(s)}:{full_spec_digest(s.to_dict(), known_fields)}" for s in preset.runs(scale)]
                for scale in preset.scales
                if not getattr(preset, "files_only", False)  # its runs come from files (attnrank sweep --reference)
            },
        }
    return described


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/record_preset_specs.py OUT.json", file=sys.stderr)
        return 2
    recording = {"train_fields": sorted(TRAIN_DEFAULTS), "presets": describe_presets()}
    text = json.dumps(recording, sort_keys=True, indent=1)
    Path(argv[0]).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
