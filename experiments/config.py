"""What defines a training run and what it returns: `TrainConfig`, `TrainResult` and the choices of their fields.

This module imports neither torch nor `experiments.tasks` (which does), so sweep presets, the command line and result
stores can build, validate and hash configs without loading torch. `TrainConfig.config_hash` is the key of a run in
every results store: its value must never change for an existing config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from experiments.model_kinds import (
    ATTENTIONS,
    LAYER_INITS,
    POSITIONALS,
    VALUE_MAPS,
    check_init_file,
    check_model,
    model_kind,
)
from experiments.samplers import get_sampler
from theory.validation import (
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_real,
    check_sample_count,
    check_seed,
)

KEY_KINDS = ("iid", "orthonormal")
TASKS = ("nearest", "farthest", "biased", "icl")
"""Task names (`experiments.tasks.make_task` accepts exactly these)."""
MATMUL_PRECISIONS = ("highest", "high")
"""``torch.set_float32_matmul_precision`` during a run: "highest" = full fp32 products, "high" = TF32 on GPUs that
have it (10-bit mantissa inputs, fp32 accumulation); recorded in the config and its hash."""
CAPTURES = ("none", "graph", "compile")
"""How a CUDA run replays its training step: eagerly, as one CUDA graph captured with ``torch.cuda.graph``, or through
``torch.compile(mode="reduce-overhead")``. Only active on CUDA (a CPU run steps eagerly whatever it says)."""
LR_INTERVALS = ("step", "epoch")
"""How often the learning rate changes along its schedule: every optimiser step (the schedule of every run before issue
49), or once per epoch as the reference implementation's scheduler steps it (`experiments.training.schedule`: a
staircase that starts at 0 in the first epoch)."""
EXECUTION_FIELDS = ("device", "checkpoint_every", "capture")
"""Fields that do not change a run's result and are left out of :meth:`TrainConfig.config_hash`."""
EVALUATION_SAMPLES = 20_000
"""Held-out samples of a run's evaluation when it ends (``eval_samples``'s default; standard error ~0.002 at the
errors of Figure 1's runs): `experiments.training.evaluation` scores every model by this recipe. Fewer make a cheaper,
coarser estimate (a CPU rehearsal of paper-size models); the count is recorded beside the error
(``population_samples``) and, away from the default, in the config's hash."""
CURVE_SAMPLES = 4_096
"""Samples of each point of a run's population curve (the first of the evaluation's samples; fewer when a config's
``eval_samples`` is smaller: :meth:`TrainConfig.curve_samples`)."""
LATER_FIELDS = {
    "embed_dim": 0,
    "curriculum_dims": 0,
    "curriculum_points": 0,
    "curriculum_dims_increment": 1,
    "curriculum_points_increment": 2,
    "curriculum_interval": 2000,
    "warmup_steps": 0,
    "schedule_steps": 0,
    "layer_init": "independent",
    "sampler": "cpu",
    "matmul_precision": "highest",
    "train_batches": 0,
    "data_seed": None,
    "lr_interval": "step",
    "eval_samples": EVALUATION_SAMPLES,
}
"""Fields added after 0.1.0, hashed only when they differ from these defaults (so 0.1.0 result stores still match)."""
MAX_STEPS = 10**9
"""The most steps (and schedule or warm-up steps) a run may name: a billion, years of any machine this runs on (a d =
64 three-layer step takes under half a second on one core: benchmarks/results/bench_cpu_step_2026-12-07.md); beyond
it a value is a typo, not a plan."""

LATER_EXECUTION_FIELDS = ("capture",)
"""Execution fields added after 0.1.0 (a stored spec may lack them, like the LATER_FIELDS)."""
CURRICULUM_FIELDS = ("curriculum_dims_increment", "curriculum_points_increment", "curriculum_interval")
"""The curriculum's schedule fields, which mean something only when curriculum_dims or curriculum_points is set."""
CONSTRUCTION_INIT_PREFIX = "construction:"
"""An ``init`` value starting with this names a construction recipe (`ConstructionInit`), not a weight file."""
INIT_CONSTRUCTIONS = ("majority-vote", "full-rank")
"""Construction recipes an ``init`` may name: Theorem 5's majority vote and Fact 1's full-rank head."""


@dataclass(frozen=True)
class ConstructionInit:
    """A construction the theory model starts from, built from the run's own fields (no file to ship or trust).

    ``init = "construction:NAME"`` or ``"construction:NAME@LAMBDA"``. The weights are those of the construction
    (`experiments.models.construction_init` builds and loads them), so a preset run stays regenerable from its
    config alone; extra heads, rank rows and scratch coordinates of the model are zero.

    Attributes:
        name: "majority-vote" (Theorem 5: layer-1 voting heads = every head of layer 1, directions drawn from
            numpy's default_rng(seed), as `attnrank construct majority-vote --seed SEED` draws them) or
            "full-rank" (Fact 1's head Q = lambda I, K = V = I).
        temperature: the construction's inverse temperature lambda (its scores lambda <Q s, K s'>), folded into the
            query maps, so the run's own ``temperature`` is left as it is; None = the run's temperature
            (hardmax runs: hardmax).
    """

    name: str
    temperature: float | None = None

    def __post_init__(self) -> None:
        check_choice("init construction", self.name, INIT_CONSTRUCTIONS)
        if self.temperature is not None:
            check_real("init construction temperature", self.temperature, minimum=0.0, strict_minimum=True)

    @classmethod
    def parse(cls, init: str | None) -> ConstructionInit | None:
        """The recipe named by an ``init`` value, or None for a weight-file path (or no init).

        ValueError naming ``init`` and the allowed forms when the value starts with "construction:" but is not one.
        """
        if init is None or not init.startswith(CONSTRUCTION_INIT_PREFIX):
            return None
        body = init[len(CONSTRUCTION_INIT_PREFIX) :]
        name, at, scale = body.partition("@")
        allowed = f"'construction:NAME' or 'construction:NAME@LAMBDA' with NAME in {', '.join(INIT_CONSTRUCTIONS)}"
        if name not in INIT_CONSTRUCTIONS:
            raise ValueError(f"init {init!r} names no construction; allowed: {allowed} (or a weight-file path)")
        if not at:
            return cls(name)
        try:
            value = float(scale)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"init {init!r}: LAMBDA must be a finite number > 0, got {scale!r}; allowed: {allowed}")
        return cls(name, value)


@dataclass(frozen=True)
class Curriculum:
    """Garg et al.'s curriculum for in-context regression (docs/paper.md section 6): the task grows in stages.

    Optimiser step s (0-based) belongs to stage k = s // interval, which trains on
    min(d, dims + k * dims_increment) active dimensions (the other coordinates of every x_i, and of w, are 0) and
    min(N, points + k * points_increment) pairs. Garg et al.: d = 20, N = 41, dims 5 (+1), points 11 (+2), interval
    2000, so both reach the full task at stage 15, i.e. from step 30 000 on.

    Attributes:
        d, N: the full task's dimension and number of pairs (the last stage).
        dims, points: active dimensions and pairs of stage 0 (1 <= dims <= d, 1 <= points <= N).
        dims_increment, points_increment: growth per stage (>= 1).
        interval: steps per stage (>= 1).
    """

    d: int
    N: int
    dims: int
    points: int
    dims_increment: int = 1
    points_increment: int = 2
    interval: int = 2000

    def __post_init__(self) -> None:
        d, N = check_int("d", self.d, minimum=1), check_int("N", self.N, minimum=1)
        check_int("curriculum_dims", self.dims, minimum=1, maximum=d)
        check_int("curriculum_points", self.points, minimum=1, maximum=N)
        check_int("curriculum_dims_increment", self.dims_increment, minimum=1)
        check_int("curriculum_points_increment", self.points_increment, minimum=1)
        check_int("curriculum_interval", self.interval, minimum=1)

    def stage(self, step: int) -> int:
        """The stage of optimiser step ``step`` (0-based): step // interval."""
        return check_int("step", step, minimum=0) // self.interval

    def dims_at(self, step: int) -> int:
        """Active dimensions of the batches of step ``step``."""
        return min(self.d, self.dims + self.stage(step) * self.dims_increment)

    def points_at(self, step: int) -> int:
        """Pairs per sequence in the batches of step ``step``."""
        return min(self.N, self.points + self.stage(step) * self.points_increment)

    @property
    def end_step(self) -> int:
        """The first step trained on the full task (d dimensions, N pairs); every later step is too.

        The dimensions reach d at stage ceil((d - dims) / dims_increment) and the pairs reach N at stage
        ceil((N - points) / points_increment); the later of the two stages starts at that stage times interval.
        """
        dims_stage = -(-(self.d - self.dims) // self.dims_increment)  # ceil division of non-negative integers
        points_stage = -(-(self.N - self.points) // self.points_increment)
        return max(dims_stage, points_stage) * self.interval


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
    curriculum_dims: int = 0
    curriculum_points: int = 0
    curriculum_dims_increment: int = 1
    curriculum_points_increment: int = 2
    curriculum_interval: int = 2000
    warmup_steps: int = 0
    schedule_steps: int = 0
    layer_init: str = "independent"
    sampler: str = "cpu"
    matmul_precision: str = "highest"
    capture: str = "none"
    train_batches: int = 0
    data_seed: int | None = None
    lr_interval: str = "step"
    eval_samples: int = EVALUATION_SAMPLES

    def __post_init__(self) -> None:
        check_choice("task", self.task, TASKS)
        d = check_int("d", self.d, minimum=2)
        check_int("N", self.N, minimum=1)
        check_choice("keys", self.keys, KEY_KINDS)
        positional_dim = check_int("positional_dim", self.positional_dim, minimum=0)
        check_int("embed_dim", self.embed_dim, minimum=0)
        kind = model_kind(self.model)
        check_choice("positional", self.positional, POSITIONALS)
        check_choice("layer_init", self.layer_init, LAYER_INITS)
        check_model(self)  # the model kind's own rules (experiments.model_kinds)
        width_name = kind.embed_dim_name(self)
        D = kind.embed_dim(self)  # the residual width: the width of the attention layers
        rank = check_int("rank", self.rank, minimum=1, maximum=D)
        width = check_int("width", self.width, minimum=1)
        check_int("layers", self.layers, minimum=1)
        check_choice("value", self.value, VALUE_MAPS)
        check_choice("attention", self.attention, ATTENTIONS)
        check_real("temperature", self.temperature, minimum=0.0, strict_minimum=True)
        check_int("ffn_dim", self.ffn_dim, minimum=1)
        check_int("steps", self.steps, minimum=1, maximum=MAX_STEPS)
        check_int("batch_size", self.batch_size, minimum=1)
        check_real("lr", self.lr, minimum=0.0, strict_minimum=True, maximum=10.0)  # larger: Adam steps overflow
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise ValueError(f"betas must be a pair of numbers in [0, 1), got {self.betas!r}")
        for i, beta in enumerate(self.betas):
            check_real(f"betas[{i}]", beta, minimum=0.0, maximum=1.0, strict_maximum=True)
        object.__setattr__(self, "betas", (float(self.betas[0]), float(self.betas[1])))
        check_real("weight_decay", self.weight_decay, minimum=0.0)
        check_real("warmup_fraction", self.warmup_fraction, minimum=0.0, maximum=1.0, strict_maximum=True)
        check_seed("seed", self.seed)
        if not isinstance(self.device, str) or not (
            self.device in ("auto", "cpu", "cuda") or (self.device[:5] == "cuda:" and self.device[5:].isdecimal())
        ):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:K', got {self.device!r}")
        for flag in ("bf16", "compile"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        check_int("log_every", self.log_every, minimum=1)
        object.__setattr__(self, "eval_samples", check_sample_count("eval_samples", self.eval_samples))  # 64.0 -> 64
        if self.init is not None and (not isinstance(self.init, str) or not self.init):
            raise ValueError(
                f"init must be a weight-file path, 'construction:NAME[@LAMBDA]' or None, got {self.init!r}"
            )
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
        self._check_schedule()
        self._check_curriculum()
        self._check_construction_init()
        if self.construction_init is None:
            check_init_file(self)
        self._check_step_path()
        self._check_data()

    def _check_data(self) -> None:
        """ValueError naming the field unless train_batches, data_seed and the sampler describe a data regime this run
        can train in (docs/training.md, "Training data").

        train_batches = K >= 1 draws K batches once and trains step t on batch t mod K; an epoch is then one pass over
        the set (log_every = K), so best_loss is the lowest epoch-mean loss on the set (the paper's metric); K may not
        exceed steps (the rest of the set would never be seen) and excludes a curriculum (whose batches change shape
        by stage). data_seed seeds the data apart from the initialisation; equal to seed it is the default and is
        stored as None (so the config, and its hash, are those of a run that never named it).
        """
        K = check_int("train_batches", self.train_batches, minimum=0, maximum=self.steps)
        if self.data_seed is not None:
            data_seed = check_seed("data_seed", self.data_seed)
            if data_seed == self.seed:
                object.__setattr__(self, "data_seed", None)
        if K and self.curriculum is not None:
            raise ValueError(
                f"train_batches must be 0 for a curriculum run (its batches change shape by stage, so no fixed set "
                f"serves every stage), got {K}"
            )
        if K and self.log_every != K:
            raise ValueError(
                f"log_every must equal train_batches = {K} (an epoch is one pass over the fixed set), "
                f"got {self.log_every}"
            )
        get_sampler(self.sampler).check(self)  # the sampler's own rules (experiments.samplers)

    @property
    def data_seed_value(self) -> int:
        """The seed of the run's training data: data_seed when set, else seed."""
        return self.seed if self.data_seed is None else self.data_seed

    @property
    def regime(self) -> str:
        """The run's data regime in words: "fresh batches" or "K batches replayed (sampler S)"."""
        if not self.train_batches:
            return "fresh batches"
        return f"{self.train_batches} batches replayed ({self.sampler} sampler)"

    def _check_step_path(self) -> None:
        """ValueError naming the field unless sampler, matmul_precision and capture are known and fit the run.

        A captured step replays fixed shapes, so it excludes a curriculum (whose batches change shape) and the
        ``compile`` flag (which compiles the model alone).
        """
        get_sampler(self.sampler)  # a known sampler (its own rules: _check_data)
        check_choice("matmul_precision", self.matmul_precision, MATMUL_PRECISIONS)
        check_choice("capture", self.capture, CAPTURES)
        if self.capture != "none" and self.compile:
            raise ValueError(
                f"capture must be 'none' when compile is set (compile compiles the model alone, capture the whole "
                f"step), got {self.capture!r}"
            )
        if self.capture != "none" and self.curriculum is not None:
            raise ValueError(
                f"capture must be 'none' for a curriculum run (its batches change shape), got {self.capture!r}"
            )

    def _check_schedule(self) -> None:
        """ValueError naming the field unless the warm-up and the schedule's length fit together.

        schedule_steps = 0 means the schedule ends where the run does (``steps``); otherwise it must be >= steps, and
        the run stops at ``steps`` partway along it. warmup_steps > 0 (an absolute warm-up) excludes warmup_fraction
        (which must then be 0) and must be shorter than the schedule. With lr_interval "epoch" the rate changes once
        per epoch of log_every steps, so the schedule and its warm-up must be whole numbers of epochs.
        """
        schedule = check_int("schedule_steps", self.schedule_steps, minimum=0, maximum=MAX_STEPS)
        warmup = check_int("warmup_steps", self.warmup_steps, minimum=0, maximum=MAX_STEPS)
        if schedule and schedule < self.steps:
            raise ValueError(
                f"schedule_steps must be 0 (the schedule ends at steps) or >= steps = {self.steps}, got {schedule}"
            )
        if warmup and self.warmup_fraction != 0:
            raise ValueError(
                f"warmup_steps and warmup_fraction are exclusive: with warmup_steps = {warmup} set warmup_fraction "
                f"to 0, got {self.warmup_fraction!r}"
            )
        if warmup >= self.schedule_length:
            raise ValueError(
                f"warmup_steps must be < the schedule's length {self.schedule_length} (schedule_steps, or steps), "
                f"got {warmup}"
            )
        if not warmup and self.warmup_length >= self.schedule_length:
            raise ValueError(
                f"warmup_fraction must leave at least one step of decay: round({self.warmup_fraction!r} x "
                f"{self.schedule_length}) = {self.warmup_length} warm-up steps of a {self.schedule_length}-step "
                "schedule (the same rule as warmup_steps)"
            )
        check_choice("lr_interval", self.lr_interval, LR_INTERVALS)
        if self.lr_interval == "epoch":
            epoch = self.log_every
            lengths = (
                ("schedule_steps", self.schedule_length, "the schedule's length: schedule_steps, or steps"),
                ("warmup_steps", self.warmup_length, "the warm-up: warmup_steps, or warmup_fraction x the schedule"),
            )
            for name, length, what in lengths:
                if length % epoch:
                    raise ValueError(
                        f"{name} must be a whole number of epochs (log_every = {epoch} steps) when lr_interval is "
                        f"'epoch' (the learning rate changes once per epoch), got {length} steps ({what})"
                    )

    @property
    def schedule_length(self) -> int:
        """Steps of the learning-rate schedule: schedule_steps when set, else steps (the cosine reaches 0 there)."""
        return self.schedule_steps or self.steps

    @property
    def warmup_length(self) -> int:
        """Steps of linear warm-up: warmup_steps when set, else round(warmup_fraction * schedule_length)."""
        return self.warmup_steps or int(round(self.warmup_fraction * self.schedule_length))

    def extends(self, earlier: TrainConfig) -> bool:
        """Whether this run is ``earlier`` trained further along the same schedule (only ``steps`` grew).

        Both must name the schedule's length explicitly (schedule_steps > 0, equal), so that every learning rate of
        the earlier run's steps is the same in this one; execution fields (device, checkpoint_every) may differ.
        """
        if not self.schedule_steps or self.steps <= earlier.steps:
            return False
        mine = {k: v for k, v in self.to_dict().items() if k not in EXECUTION_FIELDS and k != "steps"}
        theirs = {k: v for k, v in earlier.to_dict().items() if k not in EXECUTION_FIELDS and k != "steps"}
        return mine == theirs

    def _check_construction_init(self) -> None:
        """ValueError naming ``init`` unless its construction recipe (if it names one) fits this run exactly.

        majority-vote (Theorem 5, docs/depth.md): the theory model on nearest neighbour with N = 2, two layers, full
        value maps, concatenated scratch of positional_dim >= d + 1 (content, tally, out block); full-rank (Fact 1):
        the theory model on nearest neighbour, one layer, no positions, rank = d. A hardmax run takes no LAMBDA.
        """
        recipe = ConstructionInit.parse(self.init)
        if recipe is None:
            return
        needs: dict[str, object] = {"model": "theory", "task": "nearest"}
        if recipe.name == "majority-vote":
            needs.update({"N": 2, "layers": 2, "value": "full", "positional": "concat"})
        else:
            needs.update({"layers": 1, "positional": "none", "rank": self.d})
        for name, wanted in needs.items():
            if getattr(self, name) != wanted:
                raise ValueError(
                    f"init {self.init!r} needs {name} = {wanted!r} (the construction's shape), "
                    f"got {getattr(self, name)!r}"
                )
        if recipe.name == "majority-vote" and self.positional_dim < self.d + 1:
            raise ValueError(
                f"init {self.init!r} needs positional_dim >= d + 1 = {self.d + 1} (a tally coordinate and a d-wide "
                f"output block beside the content), got {self.positional_dim}"
            )
        if self.attention == "hardmax" and recipe.temperature is not None:
            raise ValueError(f"init {self.init!r}: a hardmax run holds the construction at hardmax; drop '@LAMBDA'")

    @property
    def construction_init(self) -> ConstructionInit | None:
        """The construction recipe named by ``init``, or None (a weight file, or no init)."""
        return ConstructionInit.parse(self.init)

    def _check_curriculum(self) -> None:
        """ValueError unless the curriculum fields describe no curriculum, or one of icl whose full task is trained
        for at least the last epoch (the epochs graded by best_loss are those on the full task).

        curriculum_dims = curriculum_points = 0 means no curriculum; the schedule fields must then keep their
        defaults (a changed interval alone would do nothing, yet give the run another hash).
        """
        dims = check_int("curriculum_dims", self.curriculum_dims, minimum=0, maximum=self.d)
        points = check_int("curriculum_points", self.curriculum_points, minimum=0, maximum=self.N)
        for name in CURRICULUM_FIELDS:
            check_int(name, getattr(self, name), minimum=1)
        if dims == 0 and points == 0:
            changed = [name for name in CURRICULUM_FIELDS if getattr(self, name) != LATER_FIELDS[name]]
            if changed:
                raise ValueError(
                    f"{changed[0]} applies only to a curriculum (curriculum_dims or curriculum_points >= 1); "
                    f"leave it at {LATER_FIELDS[changed[0]]} or set a curriculum"
                )
            return
        if self.task != "icl":
            raise ValueError(f"curriculum_dims and curriculum_points must be 0 unless task is 'icl', got {self.task!r}")
        curriculum = self.curriculum
        assert curriculum is not None
        if curriculum.end_step > self.steps - self.log_every:  # so the last epoch, at least, is on the full task
            raise ValueError(
                f"the curriculum reaches d = {self.d} dimensions and N = {self.N} pairs only at step "
                f"{curriculum.end_step} (curriculum_interval {self.curriculum_interval}); it must end at least one "
                f"epoch (log_every = {self.log_every} steps) before the last step, so steps must be >= "
                f"{curriculum.end_step + self.log_every}, got {self.steps}"
            )

    @property
    def curriculum(self) -> Curriculum | None:
        """The icl curriculum of this run, or None (curriculum_dims = curriculum_points = 0: the full task throughout).

        A field left at 0 keeps its axis at the full task (curriculum_dims = 0: all d dimensions from the start).
        """
        if self.curriculum_dims == 0 and self.curriculum_points == 0:
            return None
        return Curriculum(
            d=self.d,
            N=self.N,
            dims=self.curriculum_dims or self.d,
            points=self.curriculum_points or self.N,
            dims_increment=self.curriculum_dims_increment,
            points_increment=self.curriculum_points_increment,
            interval=self.curriculum_interval,
        )

    @property
    def embed_dim_value(self) -> int:
        """D, the residual width (the width of the attention layers): the ``embed_dim`` field for a kind sized by it
        (gpt2), else d plus positional_dim (concatenated encodings), where the field stays 0."""
        return model_kind(self.model).embed_dim(self)

    @property
    def heads(self) -> int:
        """Heads per layer, H = width * D / rank (D = embed_dim_value)."""
        return self.width * self.embed_dim_value // self.rank

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

    @classmethod
    def always_recorded(cls) -> tuple[str, ...]:
        """The fields every stored spec has carried since 0.1.0 (all but LATER_FIELDS and LATER_EXECUTION_FIELDS): a
        stored spec without one of them is damaged, not old."""
        later = set(LATER_FIELDS) | set(LATER_EXECUTION_FIELDS)
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in later)

    def curve_samples(self) -> int:
        """Held-out samples of each point of the run's population curve: CURVE_SAMPLES, or all ``eval_samples`` when
        the evaluation is smaller (the curve's samples are always the first of the evaluation's)."""
        return min(CURVE_SAMPLES, self.eval_samples)

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

    def __post_init__(self) -> None:
        for name in ("final_loss", "best_loss"):  # nan or inf when a run diverged
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a real number (nan and inf allowed), got {type(value).__name__}")
        self.final_loss, self.best_loss = float(self.final_loss), float(self.best_loss)
        self.steps = check_int("steps", self.steps, minimum=0)
        self.diverged = check_bool("diverged", self.diverged)
        self.seconds = check_real("seconds", self.seconds, minimum=0.0)
        check_instance("extra", self.extra, dict, "a dict of further metrics")

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
        """Parse a result dictionary (keys beyond the core fields go to ``extra``), read as untrusted input: each core
        field by type and range, ValueError naming the field.

        final_loss and best_loss are numbers (or the strings "nan", "inf", "-inf" that `experiments.json_files`
        writes for non-finite floats), never negative (they are mean errors); a run that did not diverge has a finite
        final_loss and a best_loss that is finite (or inf: no epoch on the full task closed) and at most final_loss;
        steps is an integer >= 0 (not a bool, not 3.0); diverged is true or false; seconds is finite and >= 0.
        """
        core = {"final_loss", "best_loss", "steps", "diverged", "seconds"}
        if not isinstance(data, dict):
            raise ValueError(f"result must be a JSON object, got {type(data).__name__}")
        missing = sorted(core - set(data))
        if missing:
            raise ValueError(f"result is missing key(s): {', '.join(missing)}")
        final, best = _loss_value("final_loss", data["final_loss"]), _loss_value("best_loss", data["best_loss"])
        steps, diverged = data["steps"], data["diverged"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"steps must be an integer >= 0, got {steps!r:.40}")
        if not isinstance(diverged, bool):
            raise ValueError(f"diverged must be true or false, got {diverged!r:.40}")
        if not diverged and not math.isfinite(final):
            raise ValueError(f"final_loss must be finite for a run that did not diverge, got {final}")
        if not diverged and (math.isnan(best) or (math.isfinite(best) and best > final)):
            raise ValueError(f"best_loss must be at most final_loss = {final!r} (the lowest epoch), got {best!r}")
        seconds = data["seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r:.40}")
        return cls(
            final_loss=final,
            best_loss=best,
            steps=steps,
            diverged=diverged,
            seconds=float(seconds),
            extra={k: v for k, v in data.items() if k not in core},
        )


_NON_FINITE_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
"""The strings `experiments.json_files.jsonable` writes for non-finite floats."""


def _loss_value(name: str, value: Any) -> float:
    """A recorded loss: a number or one of `_NON_FINITE_WORDS`, nan or >= 0 (ValueError naming ``name``)."""
    if isinstance(value, str) and value in _NON_FINITE_WORDS:
        number = _NON_FINITE_WORDS[value]
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number (or 'nan', 'inf'), got {value!r:.40}")
    else:
        number = float(value)
    if number < 0:
        raise ValueError(f"{name} must be >= 0 or nan (a mean error), got {number!r}")
    return number
