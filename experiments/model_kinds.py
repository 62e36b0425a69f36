"""The model kinds a run can train, one object each: what the kind accepts, whether and how it packs, how much work a
step is, and what its evaluation means. Torch-free, below `experiments.config` (which validates a config's model
through :func:`model_kind`), so presets, the command line and a sweep's driver read it without loading torch.

The three kinds (docs/models.md):

- ``encoder``: the paper's encoder (`experiments.models.encoder`): post-norm TransformerEncoder layers with L2 norms,
  H = c D / r heads of rank r per layer, any positional encoding, layers drawn apart or as copies; packs with
  standard value maps (its packed twin, `experiments.models.packed`) except on the causal icl task;
- ``theory``: the query-to-context theory model (`experiments.models.theory_model`): generalized attention, the class
  Theorem 2 bounds, so its evaluation on Theorem 2's task stands beside a bound that applies to it; no additive
  positions (its scratch coordinates are concatenated); the only kind that starts from a weight file or a
  construction (``init``); packs with full value maps on the query tasks;
- ``gpt2``: a GPT-2-style causal backbone (`experiments.models.gpt2`) of residual width ``embed_dim``, with learned
  absolute positions; trained alone.

The value lists every module checks against (`VALUE_MAPS`, `ATTENTIONS`, `POSITIONALS`, `LAYER_INITS`) are defined
here once; the config, the attention module and the encoder import them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from theory.validation import check_choice

VALUE_MAPS = ("standard", "full")
"""Value maps of a head: standard (rank-r value and output maps, as in ``nn.MultiheadAttention``) or full (D x D)."""
ATTENTIONS = ("softmax", "hardmax")
"""How scores become weights."""
POSITIONALS = ("none", "additive", "concat")
"""Positional encodings: none, added to the tokens, or concatenated as ``positional_dim`` extra coordinates."""
LAYER_INITS = ("independent", "copies")
"""How the encoder's L layers start: each drawn on its own, or all copies of one drawn layer (the reference's
``nn.TransformerEncoder`` deep-copies the layer it is given, so its layers start equal)."""


@dataclass(frozen=True)
class ModelKind:
    """One model kind (module docstring).

    Attributes:
        name: the ``model`` field's value.
        label: the kind in words ("encoder", "theory model", "GPT-2 backbone").
        positionals: the positional encodings it accepts.
        layer_inits: the layer starts it accepts.
        trains_icl: whether it can train the causal icl task.
        loads_init: whether it can start from ``init`` (a weight file or a construction recipe).
        packed_value: the value maps its packed twin has (None: it never packs).
        generalized_attention: whether it is a generalized attention, the class Theorem 2's bound holds for (its
            evaluation on Theorem 2's task then compares the bound with a model it applies to).
    """

    name: str
    label: str
    positionals: tuple[str, ...]
    layer_inits: tuple[str, ...]
    trains_icl: bool
    loads_init: bool
    packed_value: str | None
    generalized_attention: bool

    def residual_width(self, config: Any) -> int:
        """D, the width of the attention layers: ``embed_dim`` for gpt2, else d plus the concatenated positions."""
        return int(config.embed_dim) if self.name == "gpt2" else int(config.d) + int(config.positional_dim)

    def check(self, config: Any) -> None:
        """ValueError naming the field unless ``config`` (a TrainConfig being built) is one this kind can train."""
        if self.name == "gpt2":
            if config.embed_dim < 1:
                raise ValueError("embed_dim must be >= 1 for model 'gpt2' (its residual width D), got 0")
        elif config.embed_dim != 0:
            raise ValueError(f"embed_dim must be 0 unless model is 'gpt2', got {config.embed_dim}")
        if config.positional not in self.positionals:
            allowed = " or ".join(repr(p) for p in self.positionals)
            why = {
                "gpt2": "learned absolute positions",
                "theory": "it has no additive encodings",
            }.get(self.name, "")
            raise ValueError(
                f"positional must be {allowed} for model {self.name!r}"
                + (f" ({why})" if why else "")
                + f", got {config.positional!r}"
            )
        if config.task == "icl" and not self.trains_icl:
            raise ValueError("model must be 'encoder' or 'gpt2' for the icl task (it needs a causal sequence model)")
        if config.layer_init not in self.layer_inits:
            raise ValueError(f"layer_init must be 'independent' unless model is 'encoder', got {config.layer_init!r}")

    def check_init_file(self, config: Any) -> None:
        """ValueError unless this kind can start from ``config.init`` when it names a weight file (a construction
        recipe is checked against its own needs by the config)."""
        if config.init is not None and not self.loads_init:
            raise ValueError(
                f"init must be used with model 'theory' (weight files load into the theory model), got {config.model!r}"
            )

    def packing_refusal(self, config: Any) -> str | None:
        """Why this kind does not pack ``config`` (its part of `experiments.packing.packing_refusal`), or None."""
        if self.packed_value is None:
            return f"model {self.name!r} is trained alone"
        if config.value != self.packed_value:
            return f"the packed {self.label} has {self.packed_value} value maps only"
        if self.name == "encoder" and config.task == "icl":
            return "the causal encoder (icl) is trained alone"
        if self.name == "theory" and config.task == "farthest":
            return "the theory model on the farthest task is trained alone"
        return None

    def step_work(self, spec: Mapping[str, Any]) -> float:
        """Rough arithmetic of one run's training (steps x layers x a token's work per layer), from its spec
        dictionary; only ratios matter (they order and balance a sweep's units, `sweeps.grouping`).

        Encoder and gpt2: B T (F + D (H + 1)) per layer (feed-forward block, projections and scores); theory model:
        B H D (D + N) (its query's scores, mixing and value maps).
        """
        steps, layers, batch = int(spec.get("steps", 0)), int(spec.get("layers", 1)), int(spec.get("batch_size", 1))
        d, N, p = int(spec.get("d", 1)), int(spec.get("N", 1)), int(spec.get("positional_dim", 0))
        D = int(spec.get("embed_dim") or 0) or d + p
        heads = max(1, int(spec.get("width", 1)) * D // max(1, int(spec.get("rank", 1))))
        if self.name == "theory":
            per_layer = batch * heads * D * (D + N)
        else:
            tokens = N + 1 if spec.get("task") == "nearest" else 2 * N if spec.get("task") == "icl" else N
            per_layer = batch * tokens * (int(spec.get("ffn_dim", 1)) + D * (heads + 1))
        return float(steps * layers * per_layer) / 1e6


MODEL_KINDS: dict[str, ModelKind] = {
    "encoder": ModelKind(
        "encoder",
        "encoder",
        positionals=POSITIONALS,
        layer_inits=LAYER_INITS,
        trains_icl=True,
        loads_init=False,
        packed_value="standard",
        generalized_attention=False,
    ),
    "theory": ModelKind(
        "theory",
        "theory model",
        positionals=("none", "concat"),
        layer_inits=("independent",),
        trains_icl=False,
        loads_init=True,
        packed_value="full",
        generalized_attention=True,
    ),
    "gpt2": ModelKind(
        "gpt2",
        "GPT-2 backbone",
        positionals=("additive",),
        layer_inits=("independent",),
        trains_icl=True,
        loads_init=False,
        packed_value=None,
        generalized_attention=False,
    ),
}
"""Every model kind by name (`TrainConfig.model`)."""
MODELS = tuple(MODEL_KINDS)
"""The ``model`` field's values."""


def model_kind(name: str) -> ModelKind:
    """The kind called ``name`` (ValueError naming ``model`` and the allowed values otherwise)."""
    return MODEL_KINDS[check_choice("model", name, MODELS)]
