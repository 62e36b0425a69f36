"""Run specs: what one run of a sweep is, as stored and keyed in the results store.

A run spec is a :class:`experiments.config.TrainConfig` (kind "train", key = ``config_hash()``), a
:class:`RandomFeaturesSpec` (kind "random-features": no training, `constructions.random_features`) or a
`experiments.sweeps.least_squares_spec.LeastSquaresHeadsSpec` (kind "least-squares-heads"). All have ``to_dict()``
and ``config_hash()``; :func:`spec_from_record` turns a stored (kind, dict) back into a spec.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from experiments.config import TrainConfig
from experiments.sweeps.least_squares_spec import LeastSquaresHeadsSpec
from theory.validation import check_choice, check_dimension, check_int


@dataclass(frozen=True)
class RandomFeaturesSpec:
    """One draw of random rank-1 hardmax heads with optimal output weights (docs/paper.md section 6, random features).

    Attributes:
        d: dimension. head_counts: increasing head counts at which the nested prefix error is computed.
        trial: index of the draw (the numpy seed is derived from (seed, d, trial)). seed: base seed.
        distribution: head distribution of `constructions.random_features.sample_heads`.
    """

    d: int
    head_counts: tuple[int, ...]
    trial: int = 0
    seed: int = 0
    distribution: str = "uniform-cosine"

    def __post_init__(self) -> None:
        check_dimension(self.d, name="d")
        counts = tuple(check_int("head_counts", h, minimum=1) for h in self.head_counts)
        if not counts or any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
            raise ValueError(f"head_counts must be a non-empty strictly increasing sequence, got {self.head_counts!r}")
        object.__setattr__(self, "head_counts", counts)
        check_int("trial", self.trial, minimum=0)
        check_int("seed", self.seed, minimum=0)

    kind = "random-features"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["head_counts"] = list(self.head_counts)
        return data

    def config_hash(self) -> str:
        text = json.dumps({"kind": self.kind, **self.to_dict()}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


RunSpec = TrainConfig | RandomFeaturesSpec | LeastSquaresHeadsSpec
SPEC_KINDS = ("train", "random-features", "least-squares-heads")


def spec_kind(spec: RunSpec) -> str:
    """ "train", "random-features" or "least-squares-heads"."""
    if isinstance(spec, TrainConfig):
        return "train"
    if isinstance(spec, RandomFeaturesSpec):
        return "random-features"
    if isinstance(spec, LeastSquaresHeadsSpec):
        return LeastSquaresHeadsSpec.kind
    raise ValueError(
        f"spec must be a TrainConfig, RandomFeaturesSpec or LeastSquaresHeadsSpec, got {type(spec).__name__}"
    )


def spec_from_record(kind: str, data: Mapping[str, Any]) -> RunSpec:
    """Rebuild a run spec from its kind and ``to_dict()`` (validating)."""
    check_choice("kind", kind, SPEC_KINDS)
    if kind == "train":
        return TrainConfig.from_dict(dict(data))
    if kind == LeastSquaresHeadsSpec.kind:
        return LeastSquaresHeadsSpec.from_dict(data)
    values = dict(data)
    known = {"d", "head_counts", "trial", "seed", "distribution"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown random-features key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(known))})")
    values["head_counts"] = tuple(values.get("head_counts", ()))
    return RandomFeaturesSpec(**values)
