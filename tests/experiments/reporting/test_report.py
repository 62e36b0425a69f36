"""The sweep report: figure files, paper-vs-ours table, and claim verdicts that flip when the data contradict them."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.reporting.sweep_report import (
    error_grows_with_n,
    full_beats_low_every_d,
    full_rank_beats_lower,
    write_report,
)
from experiments.sweeps.presets import get_preset, spec_kind
from experiments.sweeps.runner import store_path
from experiments.sweeps.store import ResultsStore
from experiments.training.loop import TrainConfig

PROV = {"git_revision": "abc", "versions": {}}


def _fake_fig1(out: Path, loss_of_rank: dict[int, float]) -> None:
    """A fig1 quick store whose runs have the given losses (per rank; seed 1 slightly worse)."""
    specs = get_preset("fig1").runs("quick")
    with ResultsStore(store_path(out)) as store:
        store.register("fig1", "quick", [(s.config_hash(), spec_kind(s), s.to_dict()) for s in specs])
        for s in specs:
            assert isinstance(s, TrainConfig)
            loss = loss_of_rank[s.rank] * (1.0 + 0.1 * s.seed)
            store.record_result(s.config_hash(), {"best_loss": loss, "final_loss": loss, "seconds": 1.0}, PROV)


def test_report_reproduced(tmp_path: Path) -> None:
    _fake_fig1(tmp_path, {16: 0.02, 8: 0.6, 4: 0.7, 1: 0.8})
    assert main(["report", str(tmp_path)]) == 0
    text = (tmp_path / "report.md").read_text()
    assert (tmp_path / "fig1-quick.png").stat().st_size > 1000
    assert "**REPRODUCED**" in text
    # the paper's L=1 c=1 cells next to ours (best seed = seed 0)
    assert "| L=1 full rank, c=1 | 0.015 | 0.02 | 2 | agrees" in text
    assert "| L=1 r=d/2, c=1 | 0.7 | 0.6 | 2 | agrees" in text
    assert "| L=3 full rank, c=1 | 0.003 | - | 0 | not run at this scale |" in text


def test_report_negative_control(tmp_path: Path) -> None:
    _fake_fig1(tmp_path, {16: 0.65, 8: 0.6, 4: 0.7, 1: 0.8})  # full rank loses to r = 8
    write_report(tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "**NOT REPRODUCED**" in text
    assert "ours higher" in text  # 0.65 vs the paper's 0.015


def test_claim_functions_on_hand_made_records() -> None:
    def rec(**k: object) -> dict:
        return {"status": "finished", "d": 16, "N": 8, "width": 1, "layers": 1, **k}

    holds, _ = full_rank_beats_lower([rec(rank=16, best_loss=0.1), rec(rank=4, best_loss=0.5)])
    assert holds is True
    holds, _ = full_rank_beats_lower([rec(rank=16, best_loss=0.6), rec(rank=4, best_loss=0.5)])
    assert holds is False
    assert full_rank_beats_lower([rec(rank=4, best_loss=0.5)])[0] is None
    grows = [rec(rank=1, N=2, best_loss=0.1), rec(rank=1, N=16, best_loss=0.7), rec(rank=16, N=16, best_loss=0.2)]
    assert error_grows_with_n(grows)[0] is True
    flat = [rec(rank=1, N=2, best_loss=0.7), rec(rank=1, N=16, best_loss=0.6), rec(rank=16, N=16, best_loss=0.2)]
    assert error_grows_with_n(flat)[0] is False
    # both grow but the gap shrinks: full rank does not "stay low"
    parallel = [*grows[:2], rec(rank=16, N=2, best_loss=0.01), rec(rank=16, N=16, best_loss=0.65)]
    assert error_grows_with_n(parallel)[0] is False
    learned = [rec(d=8, rank=8, best_loss=0.2), rec(d=8, rank=2, best_loss=0.6)]
    assert full_beats_low_every_d(learned)[0] is True
    untrained = [*learned, rec(d=32, rank=32, best_loss=0.999), rec(d=32, rank=8, best_loss=1.0)]
    assert full_beats_low_every_d(untrained)[0] is False  # 0.999 < 1.0 is not "full rank wins": neither learned


def test_report_without_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "no results store" in capsys.readouterr().err
