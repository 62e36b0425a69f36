"""`ModelKind`: everything about one model kind a run can train, in one object, and the value lists its fields use.

A kind holds what it accepts (its checks), its widths, whether and how its runs pack, its memory estimate, how much
work a step is, what its evaluation means, the builder of its network and how a task feeds that network. The builder
runs on the torch side, so the kind names it (``"module:function"``) and `experiments.models.factory.build_model`
imports it and wraps the network it returns as the kind's ``feed`` says: the kind itself stays torch-free, below
`experiments.config`, which validates a config through it. A builder may live in the kind's own module when it needs
nothing above it (it then imports torch inside itself); the paper's models live in `experiments.models`. Behaviour
common to several kinds is a field here; a kind whose behaviour is its own overrides a method in its file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

VALUE_MAPS = ("standard", "full")
"""Value maps of a head: standard (rank-r value and output maps, as in ``nn.MultiheadAttention``) or full (D x D)."""
ATTENTIONS = ("softmax", "hardmax")
"""How scores become weights."""
POSITIONALS = ("none", "additive", "concat")
"""Positional encodings: none, added to the tokens, or concatenated as ``positional_dim`` extra coordinates."""
FEEDS = ("sequence", "context")
"""How a task feeds a kind's network: its token sequence (tokens in, per-token outputs out: the encoder, the GPT-2
backbone), or its context and query (the theory model)."""
LAYER_INITS = ("independent", "copies")
"""How the encoder's L layers start: each drawn on its own, or all copies of one drawn layer (the reference's
``nn.TransformerEncoder`` deep-copies the layer it is given, so its layers start equal)."""


@dataclass(frozen=True)
class ModelKind:
    """One model kind (module docstring).

    Attributes:
        name: the ``model`` field's value.
        label: the kind in words ("encoder", "theory model", "GPT-2 backbone").
        builder: ``"module:function"``, the torch-side function ``(config, task) -> torch.nn.Module`` that builds a
            run's network (parameters drawn from torch's global RNG, which the caller seeds).
        feed: how a task feeds the network (`FEEDS`): a sequence model takes the tokens (B, T, d) and returns (B, T,
            d) (the task reads its answer off them); a context model takes (context (B, N, d), query (B, d)).
        icl_head: on the icl task a learned linear map R^d -> R (Garg et al.'s read-out) follows the network.
        positionals: the positional encodings it accepts, and ``positional_note``: why, when it refuses some.
        layer_inits: the layer starts it accepts.
        trains_icl: whether it can train the causal icl task.
        loads_init: whether it can start from ``init`` (a weight file or a construction recipe).
        sized_by_embed_dim: its residual width D is the ``embed_dim`` field (else d plus the concatenated positions,
            and ``embed_dim`` must stay 0).
        packed_value: the value maps a pack of its runs computes (None: its runs are trained alone).
        pack_varies: config fields beyond seed, data seed and temperature in which the runs of one pack may differ
            (the encoder's rank: H r = c D whatever r is, so the parameters stack).
        generalized_attention: whether it is a generalized attention, the class Theorem 2's bound holds for (its
            evaluation on Theorem 2's task then compares the bound with a model it applies to).
        feed_forward: whether its layers have a feed-forward block (``ffn_dim`` means something).
        example: the fields, beside the defaults, of a small config this kind trains (and packs, where it packs):
            what the tests check every registered kind with, so a new kind brings its own.
    """

    name: str
    label: str
    builder: str
    feed: str
    positionals: tuple[str, ...]
    trains_icl: bool
    loads_init: bool
    packed_value: str | None
    generalized_attention: bool
    positional_note: str = ""
    layer_inits: tuple[str, ...] = ("independent",)
    sized_by_embed_dim: bool = False
    pack_varies: tuple[str, ...] = ()
    feed_forward: bool = True
    icl_head: bool = False
    example: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.feed not in FEEDS:
            raise ValueError(f"model kind {self.name!r}: feed must be one of {FEEDS}, got {self.feed!r}")

    # ------------------------------------------------------------------------------------------------- widths
    def embed_dim(self, config: Any) -> int:
        """D, the residual width (the width of the attention layers)."""
        if self.sized_by_embed_dim:
            return int(config.embed_dim)
        return int(config.d) + int(config.positional_dim)

    def embed_dim_name(self, config: Any) -> str:
        """How D is spelled in a refusal: the field (or sum of fields) that sets it."""
        if self.sized_by_embed_dim:
            return "embed_dim"
        return "d" if config.positional_dim == 0 else "(d + positional_dim)"

    def embed_dim_flag(self) -> str:
        """The command-line flag that sets D (what a memory refusal blames)."""
        return "--embed-dim" if self.sized_by_embed_dim else "--d"

    # ------------------------------------------------------------------------------------------------- checks
    def check(self, config: Any) -> None:
        """ValueError naming the field unless ``config`` (a TrainConfig being built) sets this kind's own fields as it
        needs them: its positional encoding and its width (the rules that name other kinds are
        `experiments.model_kinds.check_model`'s)."""
        if self.sized_by_embed_dim and config.embed_dim < 1:
            raise ValueError(f"embed_dim must be >= 1 for model {self.name!r} (its residual width D), got 0")
        if config.positional not in self.positionals:
            allowed = " or ".join(repr(p) for p in self.positionals)
            why = f" ({self.positional_note})" if self.positional_note else ""
            raise ValueError(f"positional must be {allowed} for model {self.name!r}{why}, got {config.positional!r}")

    # -------------------------------------------------------------------------------------------------- packs
    def packing_refusal(self, config: Any) -> str | None:
        """Why this kind does not pack ``config`` (its part of `experiments.packing.packing_refusal`), or None."""
        if self.packed_value is None:
            return f"model {self.name!r} is trained alone"
        if config.value != self.packed_value:
            return f"the packed {self.label} has {self.packed_value} value maps only"
        return None

    # --------------------------------------------------------------------------------------- work and memory
    def step_work(self, spec: Mapping[str, Any]) -> float:
        """Rough arithmetic of one run's training (steps x layers x a token's work per layer), from its spec
        dictionary; only ratios matter (they order and balance a sweep's units, `sweeps.grouping`).

        A sequence model: B T (F + D (H + 1)) per layer (feed-forward block, projections and scores).
        """
        steps, layers, batch, D, heads = work_sizes(spec)
        N = int(spec.get("N", 1))
        tokens = N + 1 if spec.get("task") == "nearest" else 2 * N if spec.get("task") == "icl" else N
        per_layer = batch * tokens * (int(spec.get("ffn_dim", 1)) + D * (heads + 1))
        return float(steps * layers * per_layer) / 1e6

    def training_bytes(self, config: Any, batch_size: int | None = None) -> dict[str, float]:
        """A rough upper estimate of the bytes one training step of ``config`` holds (float32: parameters, AdamW
        state, activations), split by what sets each part and keyed by the flags that size it (as `attnrank train`
        spells them): the attention weights and their AdamW state, the attention activations, the feed-forward block
        (weights, state and hidden activations, all proportional to ffn_dim) and a fixed training set.
        ``batch_size`` replaces the config's (an evaluation's batches).

        Per layer: H heads of rank r on width D (query/key maps H r D each, value maps H D D), a feed-forward block of
        width ffn_dim; activations of batch_size (N + 1) tokens (icl: 2 N + 1) kept for the backward pass: the token
        streams, the per-head queries/keys/values, the (N + 1) x (N + 1) score matrices and the feed-forward hidden
        layer, times 3 for the backward pass and autograd's temporaries. A fixed training set (train_batches = K)
        adds its K batches, held for the whole run: tokens, context and target, each at most batch_size (N + 1) x D
        floats.
        """
        D, heads, layers = self.embed_dim(config), config.heads, config.layers
        batch = config.batch_size if batch_size is None else batch_size
        tokens = batch * (2 * config.N + 1 if config.task == "icl" else config.N + 1)
        flag = self.embed_dim_flag()
        attention_params = layers * (heads * (2 * config.rank * D + D * D) + 4 * D)
        attention_per_token = layers * (6 * D + heads * (2 * config.rank + D + config.N + 1))
        return {
            f"{flag}/--width/--rank/--layers": 4.0 * 4 * attention_params,
            f"--batch-size/--N/{flag}/--width/--layers": 4.0 * 3 * tokens * attention_per_token,
            "--ffn-dim": 4.0 * (4 * layers * 2 * D * config.ffn_dim + 3 * tokens * layers * 2 * config.ffn_dim),
            "--train-batches": 4.0 * config.train_batches * 3 * tokens * D,
        }


def work_sizes(spec: Mapping[str, Any]) -> tuple[int, int, int, int, int]:
    """(steps, layers, batch, D, H) of a run's spec dictionary: what the `ModelKind.step_work` formulas use."""
    steps, layers, batch = int(spec.get("steps", 0)), int(spec.get("layers", 1)), int(spec.get("batch_size", 1))
    d, p = int(spec.get("d", 1)), int(spec.get("positional_dim", 0))
    D = int(spec.get("embed_dim") or 0) or d + p
    heads = max(1, int(spec.get("width", 1)) * D // max(1, int(spec.get("rank", 1))))
    return steps, layers, batch, D, heads
