"""The run spec of kind "least-squares-heads": random rank-r heads, least-squares output weights, a fresh score.

The construction is `constructions.random_rank_heads`; a worker solves it with `experiments.sweeps.solve_least_squares`.

Plain data (no numpy import), so the sweep driver can build, validate and hash these specs as it does TrainConfigs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from theory.validation import check_dimension, check_int, check_rank, check_temperature


@dataclass(frozen=True)
class LeastSquaresHeadsSpec:
    """One draw of H random rank-r heads on Theorem 2's task (N = 2, D_2) with least-squares output weights.

    Attributes:
        d: dimension. r: rank of Q_h and K_h. H: number of heads.
        temperatures: inverse temperatures tried (``"inf"`` or math.inf for hardmax); the best on the validation
            sample is kept.
        fit_samples, validation_samples, score_samples: sizes of the fitting, validation and fresh scoring samples.
        draw: index of the draw (the numpy seed is derived from (seed, d, r, H, draw)). seed: base seed.
    """

    d: int
    r: int
    H: int
    temperatures: tuple[float, ...]
    fit_samples: int
    validation_samples: int
    score_samples: int
    draw: int = 0
    seed: int = 0

    kind = "least-squares-heads"

    def __post_init__(self) -> None:
        check_dimension(self.d, name="d")
        check_rank(self.r, self.d, name="r")
        check_int("H", self.H, minimum=1)
        values = tuple(math.inf if t == "inf" else t for t in self.temperatures)
        if not values:
            raise ValueError("temperatures must name at least one inverse temperature")
        object.__setattr__(self, "temperatures", tuple(check_temperature(t, name="temperatures") for t in values))
        check_int("fit_samples", self.fit_samples, minimum=2)
        check_int("validation_samples", self.validation_samples, minimum=2)
        check_int("score_samples", self.score_samples, minimum=2)
        check_int("draw", self.draw, minimum=0)
        check_int("seed", self.seed, minimum=0)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON dictionary (infinite temperatures as the string "inf")."""
        data = asdict(self)
        data["temperatures"] = ["inf" if math.isinf(t) else t for t in self.temperatures]
        return data

    def config_hash(self) -> str:
        """sha256 of the kind and every field (the run's key in a results store)."""
        text = json.dumps({"kind": self.kind, **self.to_dict()}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LeastSquaresHeadsSpec:
        """Rebuild from ``to_dict()`` (unknown keys are errors)."""
        values = dict(data)
        known = {"d", "r", "H", "temperatures", "fit_samples", "validation_samples", "score_samples", "draw", "seed"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown least-squares-heads key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(known))})"
            )
        values["temperatures"] = tuple(values.get("temperatures", ()))
        return cls(**values)
