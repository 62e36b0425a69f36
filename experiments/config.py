"""What defines a training run and what it returns: `TrainConfig`, `TrainResult` and the choices of their fields.

This module imports neither torch nor `experiments.tasks` (which does), so sweep presets, the command line and result
stores can build, validate and hash configs without loading torch. `TrainConfig.config_hash` is the key of a run in
every results store: its value must never change for an existing config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from theory.validation import check_choice, check_int, check_real

VALUES = ("standard", "full")
ATTENTIONS = ("softmax", "hardmax")
POSITIONALS = ("none", "additive", "concat")
MODELS = ("encoder", "theory", "gpt2")
KEY_KINDS = ("iid", "orthonormal")
TASKS = ("nearest", "farthest", "biased", "icl")
"""Task names (`experiments.tasks.make_task` accepts exactly these)."""
EXECUTION_FIELDS = ("device", "checkpoint_every")
"""Fields that do not change a run's result and are left out of :meth:`TrainConfig.config_hash`."""
LATER_FIELDS = {"embed_dim": 0}
"""Fields added after 0.1.0, hashed only when they differ from these defaults (so 0.1.0 result stores still match)."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run; all fields validated at construction (ValueError naming the field)."""

    task: str = "farthest"
    d: int = 16
    N: int = 8
    keys: str = "iid"
    rank: int = 8
    width: int = 1
    layers: int = 1
    value: str = "standard"
    attention: str = "softmax"
    temperature: float = 1.0
    positional: str = "none"
    positional_dim: int = 0
    ffn_dim: int = 2048
    steps: int = 2000
    batch_size: int = 256
    lr: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05
    seed: int = 0
    device: str = "auto"
    bf16: bool = False
    compile: bool = False
    checkpoint_every: int = 500
    log_every: int = 50
    init: str | None = None
    model: str = "encoder"
    embed_dim: int = 0

    def __post_init__(self) -> None:
        check_choice("task", self.task, TASKS)
        d = check_int("d", self.d, minimum=2)
        check_int("N", self.N, minimum=1)
        check_choice("keys", self.keys, KEY_KINDS)
        positional_dim = check_int("positional_dim", self.positional_dim, minimum=0)
        embed_dim = check_int("embed_dim", self.embed_dim, minimum=0)
        if self.model == "gpt2":
            if embed_dim < 1:
                raise ValueError("embed_dim must be >= 1 for model 'gpt2' (its residual width D), got 0")
            if self.positional != "additive":
                raise ValueError(
                    "positional must be 'additive' for model 'gpt2' (learned absolute positions), "
                    f"got {self.positional!r}"
                )
            width_name, D = "embed_dim", embed_dim
        else:
            if embed_dim != 0:
                raise ValueError(f"embed_dim must be 0 unless model is 'gpt2', got {embed_dim}")
            width_name = "d" if positional_dim == 0 else "(d + positional_dim)"
            D = d + positional_dim  # width of the attention layers
        rank = check_int("rank", self.rank, minimum=1, maximum=D)
        width = check_int("width", self.width, minimum=1)
        check_int("layers", self.layers, minimum=1)
        check_choice("value", self.value, VALUES)
        check_choice("attention", self.attention, ATTENTIONS)
        check_real("temperature", self.temperature, minimum=0.0, strict_minimum=True)
        check_choice("positional", self.positional, POSITIONALS)
        check_int("ffn_dim", self.ffn_dim, minimum=1)
        check_int("steps", self.steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_real("lr", self.lr, minimum=0.0, strict_minimum=True, maximum=10.0)  # larger: Adam steps overflow
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise ValueError(f"betas must be a pair of numbers in [0, 1), got {self.betas!r}")
        for i, beta in enumerate(self.betas):
            check_real(f"betas[{i}]", beta, minimum=0.0, maximum=1.0, strict_maximum=True)
        object.__setattr__(self, "betas", (float(self.betas[0]), float(self.betas[1])))
        check_real("weight_decay", self.weight_decay, minimum=0.0)
        check_real("warmup_fraction", self.warmup_fraction, minimum=0.0, maximum=1.0, strict_maximum=True)
        check_int("seed", self.seed, minimum=0, maximum=2**63 - 1)
        if not isinstance(self.device, str) or not (
            self.device in ("auto", "cpu", "cuda") or (self.device[:5] == "cuda:" and self.device[5:].isdecimal())
        ):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:K', got {self.device!r}")
        for flag in ("bf16", "compile"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        check_int("log_every", self.log_every, minimum=1)
        if self.init is not None and (not isinstance(self.init, str) or not self.init):
            raise ValueError(f"init must be a weight-file path or None, got {self.init!r}")
        check_choice("model", self.model, MODELS)
        # Combinations.
        if self.positional == "concat" and positional_dim < 1:
            raise ValueError("positional_dim must be >= 1 when positional is 'concat', got 0")
        if self.positional != "concat" and positional_dim != 0:
            raise ValueError(f"positional_dim must be 0 unless positional is 'concat', got {positional_dim}")
        if self.value == "standard" and D % rank != 0:
            raise ValueError(
                f"rank must divide {width_name} = {D} for standard heads (each block has {width_name} / rank "
                f"heads of size rank), got {rank}"
            )
        if (width * D) % rank != 0:
            raise ValueError(
                f"rank must divide width * {width_name} = {width * D} (H = width * {width_name} / rank), got {rank}"
            )
        if self.task == "nearest" and self.keys == "orthonormal" and self.N > d:
            raise ValueError(f"N must be <= d = {d} for orthonormal keys (D_N), got {self.N}")
        if self.task == "biased" and self.N != 2:
            raise ValueError(f"N must be 2 for the biased task, got {self.N}")
        if self.task == "icl" and self.model == "theory":
            raise ValueError("model must be 'encoder' or 'gpt2' for the icl task (it needs a causal sequence model)")

    @property
    def model_width(self) -> int:
        """Width D of the attention layers: embed_dim for gpt2, else d plus positional_dim (concatenated encodings)."""
        return self.embed_dim if self.model == "gpt2" else self.d + self.positional_dim

    @property
    def heads(self) -> int:
        """Heads per layer, H = width * D / rank (D = model_width)."""
        return self.width * self.model_width // self.rank

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON dictionary of every field."""
        data = dataclasses.asdict(self)
        data["betas"] = list(self.betas)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dictionary; unknown keys are errors."""
        if not isinstance(data, dict):
            raise ValueError(f"config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config key(s): {', '.join(unknown)} (allowed: {', '.join(sorted(known))})")
        values = dict(data)
        if "betas" in values and isinstance(values["betas"], list):
            values["betas"] = tuple(values["betas"])
        return cls(**values)

    def config_hash(self) -> str:
        """Stable sha256 of the config without the pure execution knobs (EXECUTION_FIELDS)."""
        data = {
            k: v
            for k, v in self.to_dict().items()
            if k not in EXECUTION_FIELDS and not (k in LATER_FIELDS and v == LATER_FIELDS[k])
        }
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class TrainResult:
    """Outcome of a run: mean training loss of the last epoch, lowest epoch-mean loss, steps done, divergence."""

    final_loss: float
    best_loss: float
    steps: int
    diverged: bool
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dictionary: the five core fields, then ``extra``."""
        data = {
            "final_loss": self.final_loss,
            "best_loss": self.best_loss,
            "steps": self.steps,
            "diverged": self.diverged,
            "seconds": self.seconds,
        }
        data.update(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainResult:
        """Parse a result dictionary (keys beyond the core fields go to ``extra``)."""

        def number(value: Any) -> float:
            return float(value)  # "nan"/"inf" strings written by experiments.json_files.jsonable parse back

        core = {"final_loss", "best_loss", "steps", "diverged", "seconds"}
        missing = sorted(core - set(data))
        if missing:
            raise ValueError(f"result is missing key(s): {', '.join(missing)}")
        return cls(
            final_loss=number(data["final_loss"]),
            best_loss=number(data["best_loss"]),
            steps=int(data["steps"]),
            diverged=bool(data["diverged"]),
            seconds=number(data["seconds"]),
            extra={k: v for k, v in data.items() if k not in core},
        )
