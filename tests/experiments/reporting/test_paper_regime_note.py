"""The sentence under a report's paper-cell table: what the runs trained beside what the paper's values measure."""

from __future__ import annotations

from experiments.reporting.sweep_report import PAPER_REGIME, paper_regime_note, training_budgets


def _run(**fields: object) -> dict[str, object]:
    return {"kind": "train", "d": 64, "N": 16, "steps": 20000, "schedule_steps": 100000, **fields}


def test_a_replay_store_is_said_to_train_prefixes_on_the_papers_kind_of_set() -> None:
    note = paper_regime_note([_run(train_batches=100), _run(train_batches=100, steps=40000)])
    assert note.startswith(
        "These runs train 20,000 and 40,000 steps of a 100,000-step schedule, on one fixed set of 100"
    )
    assert PAPER_REGIME in note and "smaller" not in note.split(".")[0]


def test_a_fresh_batch_store_is_said_to_estimate_the_population_error() -> None:
    note = paper_regime_note([_run(), _run(d=16, N=8, steps=2000, schedule_steps=None)])
    assert "2,000 and 20,000 steps of a 2,000 and 100,000-step schedule" in note
    assert "on fresh batches every step, so their training loss estimates the population error" in note
    assert "at d = 16 and 64, N = 8 and 16." in note


def test_a_mixed_store_names_both_regimes() -> None:
    note = paper_regime_note([_run(), _run(train_batches=4), _run(train_batches=16)])
    assert "some on fresh batches, some on fixed sets of 4 and 16 batches" in note


def test_budgets_are_the_training_runs_distinct_steps() -> None:
    runs = [_run(steps=40000), _run(), _run(), {"kind": "least-squares-heads", "steps": 7}]
    assert training_budgets(runs) == [20000, 40000]
