"""Training loop of the experiments: the paper's optimiser and schedule, checkpoints that resume exactly, provenance.

PAPER.md section 6: AdamW (lr 0.01, betas (0.9, 0.95), no weight decay), linear warm-up over the first 5% of the
steps then cosine decay to 0, batches of 256 fresh samples. The paper reports the lowest epoch-mean training loss;
here an epoch is ``log_every`` consecutive steps (the training stream has no natural epochs).

A run directory holds:

- ``config.json``: the resolved config, its hash, git revision, library versions, the device used;
- ``metrics.csv``: one row per epoch: ``step, loss, lr, time`` (loss = mean training loss of the epoch ending at
  ``step``, lr = learning rate of that epoch's last step, time = seconds of training so far);
- ``checkpoint.pt``: model, optimiser, scheduler, step, config, the task sampler's ``torch.Generator`` state, torch's
  and numpy's global RNG states and the epoch statistics; written atomically (temporary file + ``os.replace``);
- ``result.json``: the :class:`TrainResult`, written when the run ends.

Re-running the same config on the same directory resumes from ``checkpoint.pt``; on the CPU the resumed run is
bitwise identical to an uninterrupted one (every source of randomness is restored). A non-finite loss stops the run
(checked after every step on the CPU, at each epoch end and before each checkpoint on a GPU, where a per-step check
would synchronise) and marks it diverged; the last finite checkpoint is kept.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from experiments.json_files import atomic_write_bytes, write_json
from experiments.tasks import TASKS, Task, make_task
from theory.validation import check_choice, check_int, check_real

VALUES = ("standard", "full")
ATTENTIONS = ("softmax", "hardmax")
POSITIONALS = ("none", "additive", "concat")
MODELS = ("encoder", "theory", "gpt2")
KEY_KINDS = ("iid", "orthonormal")
CHECKPOINT_VERSION = 1
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
        check_real("lr", self.lr, minimum=0.0, strict_minimum=True)
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise ValueError(f"betas must be a pair of numbers in [0, 1), got {self.betas!r}")
        for i, beta in enumerate(self.betas):
            check_real(f"betas[{i}]", beta, minimum=0.0, maximum=1.0, strict_maximum=True)
        object.__setattr__(self, "betas", (float(self.betas[0]), float(self.betas[1])))
        check_real("weight_decay", self.weight_decay, minimum=0.0)
        check_real("warmup_fraction", self.warmup_fraction, minimum=0.0, maximum=1.0, strict_maximum=True)
        check_int("seed", self.seed, minimum=0, maximum=2**63 - 1)
        if not isinstance(self.device, str) or not (
            self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")
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
        def number(value: Any) -> float:
            return float(value)  # "nan"/"inf" strings written by cli_output.jsonable parse back

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


def resolve_device(name: str) -> torch.device:
    """The one place where the run's device is chosen: "auto" is CUDA when available, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available on this machine")
    return torch.device(name)


def lr_factor(step: int, steps: int, warmup_fraction: float) -> float:
    """Learning-rate multiplier of optimiser step ``step`` (0-based): linear warm-up, then cosine decay to 0.

    Warm-up covers W = round(warmup_fraction * steps) steps with factors (s + 1) / W; the remaining steps follow
    (1 + cos(pi * (s - W) / (steps - W))) / 2, which starts at 1 and ends just above 0.
    """
    warmup = int(round(warmup_fraction * steps))
    if step < warmup:
        return (step + 1) / warmup
    remaining = max(steps - warmup, 1)
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / remaining))


def make_optimizer(
    model: torch.nn.Module, config: TrainConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW with the config's hyper-parameters and the warm-up + cosine schedule (torch's LambdaLR)."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay
    )
    steps, warmup = config.steps, config.warmup_fraction
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, steps, warmup))
    return optimizer, scheduler


def sampler_generator(seed: int) -> torch.Generator:
    """The task sampler's generator for a run seed (model initialisation uses the seed itself)."""
    return torch.Generator().manual_seed(seed + 1_000_003)


def provenance() -> dict[str, Any]:
    """Git revision and library versions of this process."""
    root = Path(__file__).resolve().parents[2]
    revision, dirty = "unknown", None
    try:
        revision = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        dirty = bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    versions = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__}
    try:
        import importlib.metadata as metadata

        versions["attnrank"] = metadata.version("attnrank")
    except Exception:  # noqa: BLE001 - not installed: run from the source tree
        versions["attnrank"] = "source"
    return {"git_revision": revision, "git_dirty": dirty, "versions": versions}


def read_config_file(path: Path) -> TrainConfig:
    """Read the config recorded in a run directory's config.json."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or "config" not in data:
        raise ValueError(f"{path}: no 'config' entry; not a training run directory")
    return TrainConfig.from_dict(data["config"])


def _check_same_config(recorded: TrainConfig, config: TrainConfig, source: Path) -> None:
    if recorded.config_hash() != config.config_hash():
        a, b = recorded.to_dict(), config.to_dict()
        differing = [k for k in a if k not in EXECUTION_FIELDS and a[k] != b[k]]
        detail = ", ".join(f"{k}: {a[k]!r} there vs {b[k]!r} now" for k in differing)
        raise ValueError(f"{source} belongs to a different config ({detail}); use another output directory")


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint file, refusing anything that is not a complete checkpoint of this format."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for damaged files
        raise ValueError(f"{path}: corrupt or unreadable checkpoint ({type(exc).__name__}: {exc})") from exc
    required = ("version", "config", "config_hash", "step", "model", "optimizer", "scheduler", "rng", "stats")
    if not isinstance(state, dict) or any(k not in state for k in required):
        missing = [k for k in required if not isinstance(state, dict) or k not in state]
        raise ValueError(f"{path}: not a training checkpoint (missing {', '.join(missing)})")
    if state["version"] != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: checkpoint format version {state['version']}, expected {CHECKPOINT_VERSION}")
    return state


def _numpy_state() -> dict[str, Any]:
    """numpy's global RNG state as tensors and numbers (loadable with torch.load(weights_only=True)).

    Nothing here draws from it, but third-party code might; saving it makes resumption independent of that.
    """
    state = np.random.get_state(legacy=False)  # noqa: NPY002 - the legacy global state is what we must save
    assert isinstance(state, dict)
    return {
        "bit_generator": state["bit_generator"],
        "key": torch.as_tensor(np.asarray(state["state"]["key"], dtype=np.int64)),
        "pos": int(state["state"]["pos"]),
        "has_gauss": int(state["has_gauss"]),
        "gauss": float(state["gauss"]),
    }


def _set_numpy_state(state: dict[str, Any]) -> None:
    np.random.set_state(  # noqa: NPY002 - restores the saved global state
        {
            "bit_generator": state["bit_generator"],
            "state": {"key": state["key"].numpy().astype(np.uint32), "pos": state["pos"]},
            "has_gauss": state["has_gauss"],
            "gauss": state["gauss"],
        }
    )


def build_run(config: TrainConfig, device: torch.device) -> tuple[Task, torch.nn.Module]:
    """The run's task and its freshly initialised model on ``device`` (parameters drawn from ``config.seed``).

    Initialisation uses a forked global torch RNG seeded with ``config.seed``, so the caller's RNG is untouched.
    """
    from experiments.models.factory import build_model

    task = make_task(config.task, config.d, config.N, config.keys)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = build_model(config, task)
    return task, model.to(device)


def _read_metrics(path: Path, up_to_step: int) -> list[list[str]]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    return [row for row in rows[1:] if row and int(row[0]) <= up_to_step]


def _write_metrics(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["step", "loss", "lr", "time"])
        writer.writerows(rows)


def train(config: TrainConfig, out_dir: Path, *, progress: bool = True) -> TrainResult:
    """Train (or resume, or return the finished result of) the run ``config`` in ``out_dir``.

    Args:
        config: the run.
        out_dir: run directory (created if needed).
        progress: show a tqdm bar (only when stderr is a terminal).

    Returns:
        the TrainResult (also written to out_dir/result.json).
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config_path, checkpoint_path = out_dir / "config.json", out_dir / "checkpoint.pt"
    result_path, metrics_path = out_dir / "result.json", out_dir / "metrics.csv"

    if config_path.exists():
        _check_same_config(read_config_file(config_path), config, config_path)
    if result_path.exists():
        try:
            return TrainResult.from_dict(json.loads(result_path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, ValueError) as exc:
            raise ValueError(f"{result_path}: corrupt result file ({exc}); delete it to retrain") from exc

    device = resolve_device(config.device)
    task, model = build_run(config, device)
    optimizer, scheduler = make_optimizer(model, config)
    generator = sampler_generator(config.seed)
    start_step, elapsed = 0, 0.0
    epoch_sum, epoch_count, best, last_epoch = 0.0, 0, math.inf, math.nan  # epoch_sum: loss sum of the open epoch

    if checkpoint_path.exists():
        state = load_checkpoint(checkpoint_path)
        _check_same_config(TrainConfig.from_dict(state["config"]), config, checkpoint_path)
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            generator.set_state(state["rng"]["sampler"])
            torch.set_rng_state(state["rng"]["torch"])
            _set_numpy_state(state["rng"]["numpy"])
        except (RuntimeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{checkpoint_path}: checkpoint does not match the model of this config ({exc})") from exc
        start_step = int(state["step"])
        stats = state["stats"]
        epoch_sum, epoch_count = float(stats["epoch_sum"]), int(stats["epoch_count"])
        best, last_epoch, elapsed = float(stats["best"]), float(stats["last_epoch"]), float(stats["elapsed"])
        _write_metrics(metrics_path, _read_metrics(metrics_path, start_step))
    else:
        _write_metrics(metrics_path, [])
    write_json(
        config_path,
        {"config": config.to_dict(), "config_hash": config.config_hash(), **provenance(), "device": str(device)},
    )

    def save(step: int) -> None:
        state = {
            "version": CHECKPOINT_VERSION,
            "config": config.to_dict(),
            "config_hash": config.config_hash(),
            "step": step,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": {"sampler": generator.get_state(), "torch": torch.get_rng_state(), "numpy": _numpy_state()},
            "stats": {
                "epoch_sum": float(running.item()),  # exact float64 round trip
                "epoch_count": epoch_count,
                "best": best,
                "last_epoch": last_epoch,
                "elapsed": elapsed + (time.perf_counter() - started),
            },
        }
        atomic_write_bytes(checkpoint_path, lambda stream: torch.save(state, stream))

    step_model = torch.compile(model) if config.compile else model
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=config.bf16)
    started = time.perf_counter()
    diverged = False
    check_every_step = device.type == "cpu"  # free on the CPU; on a GPU the check waits for the epoch end (no sync)
    running = torch.full((), epoch_sum, dtype=torch.float64, device=device)  # open epoch's loss sum, synced per epoch
    bar = tqdm(
        total=config.steps,
        initial=start_step,
        disable=not progress or not sys.stderr.isatty(),
        desc=f"{config.task} r={config.rank}",
        leave=False,
    )
    step = start_step
    with bar, metrics_path.open("a", newline="", encoding="utf-8") as metrics_stream:
        metrics = csv.writer(metrics_stream)
        model.train()
        while step < config.steps:
            batch = task.sample(config.batch_size, generator).to(device)
            with autocast:
                prediction = step_model(batch)
            loss = task.error(prediction.float(), batch.target).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            lr_used = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            step += 1
            running += loss.detach().double()
            epoch_count += 1
            if check_every_step and not math.isfinite(float(loss.item())):
                diverged = True
                break
            bar.update(1)
            if epoch_count == config.log_every or step == config.steps:
                mean = float(running.item()) / epoch_count
                if not math.isfinite(mean):
                    diverged = True
                    break
                last_epoch, best = mean, min(best, mean)
                metrics.writerow([step, repr(mean), repr(lr_used), f"{elapsed + time.perf_counter() - started:.3f}"])
                metrics_stream.flush()
                bar.set_postfix(loss=f"{mean:.4g}")
                running.zero_()
                epoch_count = 0
            if step % config.checkpoint_every == 0 or step == config.steps:
                if not math.isfinite(float(running.item())):  # never checkpoint a diverged model
                    diverged = True
                    break
                save(step)
    result = TrainResult(
        final_loss=math.nan if diverged else last_epoch,
        best_loss=best,
        steps=step,
        diverged=diverged,
        seconds=elapsed + time.perf_counter() - started,
    )
    write_json(result_path, result.to_dict())
    return result


def train_many(
    jobs: list[tuple[TrainConfig, Path]], *, workers: int = 1, threads_per_worker: int = 1
) -> list[TrainResult]:
    """Run independent trainings, in ``workers`` spawned processes when workers > 1 (results in job order).

    Args:
        jobs: (config, out_dir) pairs.
        workers: number of processes (>= 1); 1 runs them one after another in this process.
        threads_per_worker: torch intra-op threads of each worker process (>= 1).

    Returns:
        the TrainResult of every job.
    """
    workers = check_int("workers", workers, minimum=1)
    threads_per_worker = check_int("threads_per_worker", threads_per_worker, minimum=1)
    if workers == 1 or len(jobs) <= 1:
        return [train(config, Path(out_dir), progress=False) for config, out_dir in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # no fork of a process that already runs torch threads
    with ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)),
        mp_context=context,
        initializer=torch.set_num_threads,
        initargs=(threads_per_worker,),
    ) as pool:
        futures = [pool.submit(train, config, Path(out_dir), progress=False) for config, out_dir in jobs]
        return [future.result() for future in futures]


def load_trained_model(out_dir: Path, device: str = "cpu") -> tuple[TrainConfig, Task, torch.nn.Module]:
    """Rebuild a run's task and model from its directory (config.json + checkpoint.pt), in eval mode."""
    out_dir = Path(out_dir)
    config_path, checkpoint_path = out_dir / "config.json", out_dir / "checkpoint.pt"
    if not config_path.exists():
        raise ValueError(f"{out_dir}: no config.json; not a training run directory")
    if not checkpoint_path.exists():
        raise ValueError(f"{out_dir}: no checkpoint.pt; the run has not saved a model yet")
    config = read_config_file(config_path)
    state = load_checkpoint(checkpoint_path)
    _check_same_config(TrainConfig.from_dict(state["config"]), config, checkpoint_path)
    task, model = build_run(dataclasses.replace(config, init=None, device=device), torch.device(device))
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as exc:
        raise ValueError(f"{checkpoint_path}: checkpoint does not match the model of its config ({exc})") from exc
    model.eval()
    return config, task, model
