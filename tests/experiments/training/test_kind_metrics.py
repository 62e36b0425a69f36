"""A short run of each model kind and sampler, and a pack of each packing kind, gives the metrics it gave before the
one training pipeline (issue 48: "numbers must not move").

Both sides are trained on this machine by `scripts/record_kind_metrics.py` (its ``CASES``: every kind alone, the
encoder's samplers, fixed set, hardmax, icl read-out head and copied layers, an encoder pack and a theory pack of 20
steps each), once with the code of :data:`BASELINE` (the last revision before issue 48, read with ``git archive`` into
a temporary folder) and once with this tree's, each in its own process; recorded metrics from another machine would
not do, since a CPU's kernels may round differently.

Every run trained alone and every run of the encoder pack must be bitwise equal: metrics.csv's step, loss, lr and
population columns as written, and result.json's best and final loss and population error.

The theory pack is not bitwise: its attention is `RankedMultiheadAttention`'s pack path
(``_pack_full_value_mix``) where the baseline's ``PackedTheoryModel`` wrote its own softmax and products, the same
arithmetic in another order (the query scale folded into the projection, products batched otherwise).
Tolerance: relative :data:`THEORY_PACK_RTOL` = 1e-5 on every recorded number, about 84 float32 epsilons
(2**-23 = 1.19e-7), for rounding differences of a few epsilons per operation carried through 20 AdamW steps; the same
tolerance as the pack-against-separate-runs test (test_packed_training.py). Measured when this test was written
(with the theory pack through ``scaled_dot_product_attention``): at most 6.2e-8, half an epsilon. Negative control:
the pack's runs differ from each other by far more than the tolerance, so the agreement is not trivial.

Slow (two processes train 13 cases each: about a minute on a loaded 2-core machine); skipped where the checkout holds
no history of :data:`BASELINE` (a shallow clone, an unpacked archive).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPOSITORY = Path(__file__).resolve().parents[3]
SCRIPT = REPOSITORY / "scripts" / "record_kind_metrics.py"
BASELINE = "66a125c"
"""The last revision before issue 48's pipeline (benchmarks/bench_pipeline.py compares its step times with it)."""
PACKAGES = ("attnrank", "experiments", "theory", "constructions")
THEORY_PACK = "theory pack (three seeds and temperatures)"
THEORY_PACK_RTOL = 1e-5

pytestmark = pytest.mark.slow


def _recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_kind_metrics", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES: dict[str, list[dict[str, Any]]] = _recorder().CASES


def _record(code: Path, label: str, out: Path) -> dict[str, Any]:
    """The cases' metrics as the code under ``code`` trains them, in a process of its own."""
    environment = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run([sys.executable, str(SCRIPT), "--revision", label, str(out)], env=environment, check=True, cwd=code)
    recorded = json.loads(out.read_text(encoding="utf-8"))
    assert recorded["code"] == str(code.resolve()), "the process imported another tree's code"
    assert recorded["revision"] == label and list(recorded["cases"]) == list(CASES)
    return recorded["cases"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def metrics(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(baseline's, this tree's) metrics of every case."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", BASELINE, *PACKAGES], cwd=REPOSITORY, capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.skip(f"revision {BASELINE} is not in this checkout: {archive.stderr.decode(errors='replace').strip()}")
    old_code = tmp_path_factory.mktemp("baseline_code")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(old_code, filter="data")
    out = tmp_path_factory.mktemp("metrics")
    return _record(old_code, BASELINE, out / "old.json"), _record(REPOSITORY, "this tree", out / "new.json")


@pytest.mark.parametrize("case", [name for name in CASES if name != THEORY_PACK])
def test_a_run_alone_and_an_encoder_pack_are_bitwise_the_baselines(
    metrics: tuple[dict[str, Any], dict[str, Any]], case: str
) -> None:
    old, new = metrics
    assert len(new[case]) == len(CASES[case])
    assert new[case] == old[case]


def _numbers(run: dict[str, Any]) -> list[float]:
    """Every recorded number of a run: its metrics rows' loss, lr and population (where written), then its result's."""
    values = [float(v) for row in run["metrics"] for v in row[1:] if v != ""]
    return values + [float(run[key]) for key in ("best_loss", "final_loss", "population_error")]


def test_a_theory_pack_agrees_with_the_baselines_to_float32_rounding(
    metrics: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    old, new = metrics
    for before, now in zip(old[THEORY_PACK], new[THEORY_PACK], strict=True):
        assert [row[0] for row in now["metrics"]] == [row[0] for row in before["metrics"]]  # the same steps
        for a, b in zip(_numbers(now), _numbers(before), strict=True):
            assert a == pytest.approx(b, rel=THEORY_PACK_RTOL, abs=0.0)
    # negative control: the pack's runs end far apart, so agreeing within the tolerance is not trivial
    finals = [float(run["final_loss"]) for run in new[THEORY_PACK]]
    gaps = [abs(a - b) / abs(b) for i, a in enumerate(finals) for b in finals[i + 1 :]]
    assert min(gaps) > 10 * THEORY_PACK_RTOL
