"""Which training runs may be trained together in one pack (`experiments.training.packed`), decided from their configs.

Torch-free, like `experiments.config`, so that a sweep's driver can group its runs into packs without loading torch.
The packed models (`experiments.models.packed`) hold K runs of one architecture as stacked parameters; the runs of a
pack must therefore agree in every field that decides a parameter shape or the arithmetic, except:

- ``seed`` (initialisation and batch stream);
- ``temperature`` (a constant factor on the scores, one per run);
- ``rank``, for the encoder with standard values: with H = c D / r heads of rank r its in-projection is (3 c D, D)
  and its output map (D, c D) whatever r is; only the split of the c D projected coordinates into heads differs;
- ``checkpoint_every`` and ``device`` of `EXECUTION_FIELDS` (a pack checkpoints and runs where its first run says).
"""

from __future__ import annotations

import json

from experiments.config import EXECUTION_FIELDS, TrainConfig

PACK_VARYING_FIELDS = ("seed", "temperature", "data_seed")
"""Config fields that may differ between the runs of one pack (and ``rank`` where the shapes allow it)."""


def packing_refusal(config: TrainConfig) -> str | None:
    """Why ``config`` cannot be trained in a pack, or None when it can."""
    if config.init is not None:
        return "runs started from a weight file (init) are trained alone"
    if config.compile or config.bf16:
        return "compile and bf16 runs are trained alone"
    if config.attention != "softmax":
        return "hardmax attention is trained alone"
    if config.model == "encoder":
        if config.value != "standard":
            return "the packed encoder has standard value maps only"
        if config.task == "icl":
            return "the causal encoder (icl) is trained alone"
        return None
    if config.model == "theory":
        if config.value != "full":
            return "the packed theory model has full value maps only"
        if config.task == "farthest":
            return "the theory model on the farthest task is trained alone"
        return None
    return f"model {config.model!r} is trained alone"


def pack_signature(config: TrainConfig) -> str:
    """A key equal for exactly the configs that may share a pack: the fields that must agree, as JSON."""
    varying = set(PACK_VARYING_FIELDS) | set(EXECUTION_FIELDS)
    if config.model == "encoder":
        varying.add("rank")  # (3 c D, D) and (D, c D) whatever r is
    data = {k: v for k, v in config.to_dict().items() if k not in varying}
    return json.dumps(data, sort_keys=True)
