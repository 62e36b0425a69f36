"""Build the model of a training config: its model kind's builder (`experiments.model_kinds`), the paper's kinds' here.

:func:`build_model` imports and calls the builder the config's kind names (``"module:function"``) and feeds the
network it returns as the kind says (``feed``, ``icl_head``); an unknown kind is refused by the kind registry, never
built as another. Every model built is a :class:`TaskModel`: ``model(batch) -> predictions`` shaped like
``batch.target``, the same interface as the baselines of `experiments.tasks`, so training, evaluation and analysis
treat them alike.

- ``model="encoder"``: the paper's post-norm encoder (`PaperEncoder`) on the task's token sequence; the task reads the
  answer off the outputs (query tasks: the query token; farthest: every token). For ``icl`` a learned linear map
  R^d -> R (Garg et al.'s read-out) is applied to the encoder outputs and the encoder is causal.
- ``model="gpt2"``: a GPT-2-style pre-norm backbone (`experiments.models.gpt2`) of width ``embed_dim`` with learned
  positions, the in-context regression experiment's model (the encoder's L2 norms erase the y-tokens' magnitudes).
- ``model="theory"``: the query-to-context theory model (`TheoryModel`), fed (context, query) directly; on the
  farthest task every token is a query over the whole context. ``init`` loads a construction weight file into it
  (`experiments.models.from_weights`), after checking that the file matches the config, or builds the construction a
  recipe names (`experiments.models.construction_init`).

Hardmax attention is trained with the straight-through softmax gradient at the config's temperature (the hardmax
itself has zero derivative almost everywhere).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable

import torch
from torch import nn

from constructions.weights_io import WeightFileError, load_weights
from experiments.config import TrainConfig
from experiments.model_kinds import FEEDS, ModelKind, model_kind
from experiments.models.construction_init import load_construction
from experiments.models.encoder import PaperEncoder
from experiments.models.from_weights import theory_model_from_file
from experiments.models.gpt2 import GPT2Backbone
from experiments.models.spec import AttentionSpec
from experiments.models.theory_model import TheoryModel
from experiments.tasks import Batch, Task
from theory.validation import check_choice


class TaskModel(nn.Module):
    """A network together with the way a task feeds it and reads its answer (a pack's: the K runs' batches stacked,
    `experiments.models.run_axis`).

    Args:
        task: the task whose batches the model answers.
        network: the torch module (encoder, GPT-2 backbone or theory model).
        feed: "sequence" or "context" (`FEEDS`).
        head: optional extra read-out module applied to a sequence model's outputs (icl: R^d -> R).
    """

    def __init__(self, task: Task, network: nn.Module, feed: str, head: nn.Module | None = None) -> None:
        super().__init__()
        self.task = task
        self.network = network
        self.feed = check_choice("feed", feed, FEEDS)
        self.head = head

    def forward(self, batch: Batch) -> torch.Tensor:
        """Predictions for a batch, shaped like ``batch.target``."""
        if self.feed == "sequence":
            outputs = self.network(batch.tokens)  # (B, T, d)
            if self.head is not None:
                outputs = self.head(outputs)  # (B, T, 1)
            return self.task.readout(outputs)
        if self.task.query_task:
            assert batch.query is not None
            return self.network(batch.context, batch.query)  # (B, d)
        # Self-attention form (farthest): every token is a query over the whole context.
        X = batch.context  # (B, N, d)
        B, N, d = X.shape
        contexts = X.unsqueeze(1).expand(B, N, N, d).reshape(B * N, N, d)  # (B N, N, d): row (b, i) = sample b
        return self.network(contexts, X.reshape(B * N, d)).reshape(B, N, d)  # (B, N, d)


def build_encoder(config: TrainConfig, task: Task) -> PaperEncoder:
    """The paper's encoder for ``config`` (positional table sized to the task's sequence length)."""
    attention = AttentionSpec(
        config.rank,
        width=config.width,
        value=config.value,
        attention=config.attention,
        temperature=config.temperature,
        causal=task.causal,
        hardmax_gradient="straight-through" if config.attention == "hardmax" else "none",
    )
    return PaperEncoder(
        config.d,
        attention,
        layers=config.layers,
        ffn_dim=config.ffn_dim,
        positional=config.positional,
        positional_dim=config.positional_dim,
        max_length=task.sequence_length if config.positional != "none" else None,
        layer_init=config.layer_init,
    )


def build_gpt2(config: TrainConfig, task: Task) -> GPT2Backbone:
    """The GPT-2-style backbone (`models.gpt2`): width embed_dim, read-out to R (icl) or R^d (other tasks)."""
    return GPT2Backbone(
        d_in=config.d,
        d_out=1 if task.name == "icl" else config.d,
        embed_dim=config.embed_dim,
        attention=AttentionSpec(config.rank, width=config.width, causal=task.causal),
        layers=config.layers,
        ffn_dim=config.ffn_dim,
        max_length=task.sequence_length,
    )


def theory_network(config: TrainConfig) -> TheoryModel:
    """A fresh `TheoryModel` for ``config``.

    One layer is plain H-head attention (no residual: f(X, y) = sum_h sum_i w_hi V_h x_i, the generalized-attention
    class of Theorem 2); more layers keep the residual streams of theory/multilayer.py. Scores are
    temperature * <Q_h s_q, K_h s_i> (score scale 1, the theory's convention); "concat" positional encodings become
    the model's p = positional_dim scratch coordinates.
    """
    hardmax = config.attention == "hardmax"
    p = config.positional_dim
    attention = AttentionSpec.theory(
        config.rank,
        math.inf if hardmax else config.temperature,
        value=config.value,
        hardmax_gradient="straight-through" if hardmax else "none",
        surrogate_temperature=config.temperature,
    )
    return TheoryModel(
        config.d,
        attention,
        config.heads,
        layers=config.layers,
        positional_dim=p,
        context_length=config.N if p > 0 else None,
        update="query",
        residual=config.layers > 1,
    )


def theory_network_from_file(config: TrainConfig) -> TheoryModel:
    """The `TheoryModel` holding ``config.init``: a weight file, refused unless it matches the config, or a
    construction recipe ("construction:NAME[@LAMBDA]", `experiments.models.construction_init`) built for the config.

    The file fixes d, r, heads per layer, layers, temperature (inf = hardmax), and for positional layouts N and p;
    each must agree with the config, and the error names the first that does not.
    """
    assert config.init is not None
    if config.construction_init is not None:  # built from the config itself: no file to read
        network = theory_network(config)
        load_construction(network, config)
        return network
    try:
        weights = load_weights(config.init)
    except WeightFileError as exc:
        raise ValueError(f"init weight file refused: {exc}") from exc
    meta = weights.metadata
    heads = weights.layer_heads
    layers = int(meta.get("L", 1))
    temperature = weights.temperature
    checks = [
        ("d", int(meta["d"]), config.d),
        ("rank", int(meta["r"]), config.rank),
        ("layers", layers, config.layers),
        ("heads per layer", heads, [config.heads] * config.layers),
        ("attention", "hardmax" if math.isinf(temperature) else "softmax", config.attention),
    ]
    if not math.isinf(temperature):
        checks.append(("temperature", temperature, config.temperature))
    p = int(meta.get("p", 0))
    checks.append(("positional_dim", p, config.positional_dim))
    if "N" in meta and (weights.layout == "multi-layer" or "score_bias" in weights.tensors):
        file_n = int(meta["N"])
        if config.N > file_n:
            raise ValueError(
                f"init weight file {config.init}: N = {config.N} is larger than the file's positional table "
                f"(N = {file_n})"
            )
        checks.append(("N", file_n, config.N))
    for name, in_file, in_config in checks:
        if in_file != in_config:
            raise ValueError(
                f"init weight file {config.init} does not match the config: {name} is {in_file} in the "
                f"file but {in_config} in the config"
            )
    hardmax = config.attention == "hardmax"
    return theory_model_from_file(
        weights,
        value=config.value,
        hardmax_gradient="straight-through" if hardmax else "none",
        surrogate_temperature=config.temperature,
        dtype=torch.float32,
    )


def build_theory(config: TrainConfig, task: Task) -> TheoryModel:
    """The query-to-context theory model for ``config``, or started from ``config.init`` (file or recipe)."""
    return theory_network_from_file(config) if config.init is not None else theory_network(config)


def model_builder(kind: ModelKind) -> Callable[[TrainConfig, Task], nn.Module]:
    """The function ``kind.builder`` names (``"module:function"``), imported (ValueError when it names nothing
    callable: a kind registered without its builder)."""
    module_name, _, function_name = kind.builder.partition(":")
    try:
        builder = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"model kind {kind.name!r}: its builder {kind.builder!r} names nothing ({exc})") from exc
    if not callable(builder):
        raise ValueError(f"model kind {kind.name!r}: its builder {kind.builder!r} is not a function")
    return builder  # type: ignore[no-any-return]


def build_model(config: TrainConfig, task: Task) -> TaskModel:
    """The model of a training config: its kind's builder's network, fed as the kind says (parameters drawn from
    torch's global RNG, which the caller seeds: the network's first, then the icl head's)."""
    kind = model_kind(config.model)
    network = model_builder(kind)(config, task)
    head = nn.Linear(config.d, 1) if kind.icl_head and task.name == "icl" else None
    return TaskModel(task, network, kind.feed, head)
