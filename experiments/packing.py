"""Which training runs may be trained together in one unit (a pack, `experiments.training.packed`), decided from their
configs: :func:`unit_key` is the one rule, called by the sweep's grouping, its memory check and the pack's own check.

Torch-free, like `experiments.config`, so that a sweep's driver can group its runs into packs without loading torch.
A pack computes K runs of one architecture as one module with stacked parameters (`experiments.models.run_axis`);
the runs of a pack must therefore agree in every field that decides a parameter shape or the arithmetic, except:

- ``seed`` (initialisation) and ``data_seed`` (each run draws its own batches or its own fixed set);
- ``temperature`` (a constant factor on the scores, one per run);
- the fields the model kind lets differ (`experiments.model_kinds.ModelKind.pack_varies`): the encoder's ``rank``
  (standard values: with H = c D / r heads of rank r its in-projection is (3 c D, D) and its output map (D, c D)
  whatever r is; only the split of the c D projected coordinates into heads differs);
- ``checkpoint_every``, ``device`` and ``capture`` of `EXECUTION_FIELDS` (a pack runs as its first run says).

``attnrank sweep --batch-seeds`` packs only runs that differ in their seeds (:data:`SEED_FIELDS`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from experiments.config import EXECUTION_FIELDS, TrainConfig
from experiments.model_kinds import MODEL_KINDS, model_kind

PACK_VARYING_FIELDS = ("seed", "temperature", "data_seed")
"""Config fields that may differ between the runs of one pack (and those the model kind lets differ)."""
SEED_FIELDS = ("seed", "data_seed")
"""The fields that may differ between the runs of a seed pack (``--batch-seeds``): the seeds alone."""


def packing_refusal(config: TrainConfig) -> str | None:
    """Why ``config`` cannot be trained in a pack, or None when it can (the reason half of :func:`unit_key`)."""
    if config.init is not None:
        return "runs started from a weight file (init) are trained alone"
    if config.compile or config.bf16:
        return "compile and bf16 runs are trained alone"
    if config.attention != "softmax":
        return "hardmax attention is trained alone"
    return model_kind(config.model).packing_refusal(config)  # the kind's own part (experiments.model_kinds)


def unit_key(config: TrainConfig, varying: Sequence[str] = PACK_VARYING_FIELDS) -> str | None:
    """The one packing rule: None when ``config`` is trained alone (:func:`packing_refusal`), else a key that is equal
    for exactly the configs that may share a unit with it: the fields that must agree, as JSON.

    Args:
        config: a run.
        varying: the fields the runs of a unit may differ in (:data:`PACK_VARYING_FIELDS`, or :data:`SEED_FIELDS`
            for seed packs); an encoder's ``rank`` may differ too when ``temperature`` may (a pack, not seeds alone).
    """
    if packing_refusal(config) is not None:
        return None
    free = set(varying) | set(EXECUTION_FIELDS)
    if "temperature" in free:
        free.update(model_kind(config.model).pack_varies)  # e.g. the encoder's rank: (3 c D, D) whatever r is
    data = {k: v for k, v in config.to_dict().items() if k not in free}
    return json.dumps(data, sort_keys=True)


def why_apart(first: TrainConfig, other: TrainConfig) -> str:
    """In words, why two configs cannot share a unit (for refusals): the refusal of either, or the fields that
    differ beyond the varying ones."""
    for config in (first, other):
        reason = packing_refusal(config)
        if reason is not None:
            return reason
    a, b = first.to_dict(), other.to_dict()
    kind_fields = [(kind.name, field) for kind in MODEL_KINDS.values() for field in kind.pack_varies]
    allowed = (*PACK_VARYING_FIELDS, *EXECUTION_FIELDS, *(field for _, field in kind_fields))
    differing = [k for k in a if a[k] != b[k] and k not in allowed]
    by_kind = "".join(f" and ({name}) {field}" for name, field in kind_fields)  # "and (encoder) rank"
    return f"the runs of one pack may differ only in seed, data_seed, temperature{by_kind}; these differ in " + (
        ", ".join(differing) or ", ".join(field for _, field in kind_fields)
    )


def check_one_unit(configs: Sequence[TrainConfig], varying: Sequence[str] = PACK_VARYING_FIELDS) -> None:
    """ValueError unless ``configs`` may share one unit: every :func:`unit_key` equal and not None (reason named)."""
    keys = [unit_key(c, varying) for c in configs]
    for config, key in zip(configs, keys, strict=True):
        if key is None:
            raise ValueError(f"config {config.config_hash()[:12]} cannot be packed: {packing_refusal(config)}")
    for config, key in zip(configs[1:], keys[1:], strict=True):
        if key != keys[0]:
            raise ValueError(why_apart(configs[0], config))
