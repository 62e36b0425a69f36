"""Generated blocks of the docs (`attnrank report --docs`): every committed block is what its source gives now, the
command rewrites only what lies between the markers, and a doc whose markers do not pair is refused in one line with
nothing written."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from experiments.cli.main import main
from experiments.publish.doc_blocks import BLOCK_KINDS, find_blocks, rendered_docs
from experiments.publish.gpu_call_blocks import gpu_runs
from experiments.publish.results_index import sitting_spans
from experiments.publish.store_blocks import control_at_step, regime_control, store_facts
from experiments.reporting.doc_sources import DocSources
from experiments.studies import DOC_BLOCK_KINDS, PRESETS

ROOT = Path(__file__).resolve().parents[3]
SOURCES = DocSources(ROOT, PRESETS)
SMALL_STORE = ROOT / "results" / "icl-cpu" / "results.sqlite"
IN_GIT = (ROOT / ".git").exists() and shutil.which("git") is not None


def _begin(name: str) -> str:
    return f"<!-- BEGIN GENERATED: {name} -->"


def _end(name: str) -> str:
    return f"<!-- END GENERATED: {name} -->"


@pytest.mark.skipif(not IN_GIT, reason="needs the git checkout (blocks read the committed stores)")
def test_every_committed_generated_block_is_what_its_source_gives_now() -> None:
    stale = [path.relative_to(ROOT).as_posix() for path, (now, new) in rendered_docs(ROOT).items() if now != new]
    assert not stale, f"generated blocks are stale in {', '.join(stale)}: run `attnrank report --docs .` and commit"


def test_the_docs_use_every_kind_of_block() -> None:
    """Each kind is used somewhere (an unused generator would be tested by nothing but this module's tests)."""
    used = {block.name.split(":")[0] for now, _ in rendered_docs(ROOT).values() for block in find_blocks(now, "doc")}
    assert used == set(BLOCK_KINDS), set(BLOCK_KINDS) ^ used


def test_the_generators_name_no_preset_store_or_dated_path() -> None:
    """What a block reads is named by its doc's marker (a store, a folder, a recorded run's date) and each kind is
    declared by the module that owns its source: the publishing code spells no preset's name and no date."""
    modules = [*sorted((ROOT / "experiments" / "publish").glob("*.py")), ROOT / "experiments/reporting/doc_sources.py"]
    for path in modules:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\d{4}-\d{2}-\d{2}", text), path
        named = [name for name in PRESETS if f'"{name}"' in text or f"'{name}'" in text]
        assert not named, (path, named)
    declared = {kind.name for kind in DOC_BLOCK_KINDS}
    assert "tightness" in declared and declared <= set(BLOCK_KINDS)  # the tightness study declares its own block


def _root(tmp_path: Path, doc: str) -> Path:
    """A minimal repository root: README.md, docs/page.md holding ``doc``, one committed-looking store."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# root\n", encoding="utf-8")
    (tmp_path / "docs" / "page.md").write_text(doc, encoding="utf-8")
    (tmp_path / "results" / "s-cpu").mkdir(parents=True)
    shutil.copyfile(SMALL_STORE, tmp_path / "results" / "s-cpu" / "results.sqlite")
    return tmp_path


def test_the_command_rewrites_only_between_the_markers_and_twice_gives_the_same_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "best-losses:s-cpu"
    doc = f"# Page\n\nHand-written intro.\n\n{_begin(name)}\nSTALE\n{_end(name)}\n\nkept as typed \n"
    root = _root(tmp_path, doc)
    capsys.readouterr()
    assert main(["report", "--docs", str(root), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"docs": [str(root / "docs" / "page.md")], "blocks": 1}
    text = (root / "docs" / "page.md").read_text(encoding="utf-8")
    assert text.startswith(f"# Page\n\nHand-written intro.\n\n{_begin(name)}\n")
    assert text.endswith(f"\n{_end(name)}\n\nkept as typed \n")
    assert "STALE" not in text
    assert "| rank | best loss |" in text and "| 32 | 0.5536 / 0.6075 |" in text  # icl-cpu's r = 32 seeds
    assert main(["report", "--docs", str(root), "--json"]) == 0  # deterministic: nothing left to change
    assert json.loads(capsys.readouterr().out) == {"docs": [], "blocks": 1}
    assert (root / "docs" / "page.md").read_text(encoding="utf-8") == text


def test_store_facts_state_the_store_and_a_hand_edit_inside_a_block_is_stale(tmp_path: Path) -> None:
    name = "store-facts:s-cpu"
    root = _root(tmp_path, f"{_begin(name)}\n{_end(name)}\n")
    assert main(["report", "--docs", str(root)]) == 0
    text = (root / "docs" / "page.md").read_text(encoding="utf-8")
    assert "- Sweep icl (cpu): 8 runs (finished 8);" in text
    assert "**DIRECTION**" in text and "ratio 1.14x" in text
    assert "- Training time summed over the 8 finished runs: 7201 s (2.00 h)." in text
    assert "(2 sittings: a gap over 10 min begins one)" in text
    assert "`fefef08` (6), `f76a9dd` (2)" in text
    edited = text.replace("7201 s", "7200 s")
    (root / "docs" / "page.md").write_text(edited, encoding="utf-8")
    [(now, new)] = rendered_docs(root).values()
    assert now == edited and new == text  # the test above would name this doc


def test_store_facts_say_when_runs_went_on_from_a_checkpoint() -> None:
    """icl-cpu's two runs that stopped near their end and resumed in a second sitting (its README says so) trained
    longer than their recorded span, and the wall-time line says so; figN-cpu trained in one go and has no caveat."""
    [resumed] = [line for line in store_facts(SOURCES, "icl-cpu") if line.startswith("- Wall time")]
    assert "(2 runs trained longer than their recorded span: a run that goes on from a checkpoint" in resumed
    assert "two resumed runs" in (ROOT / "results" / "icl-cpu" / "README.md").read_text(encoding="utf-8")
    [single] = [line for line in store_facts(SOURCES, "figN-cpu") if line.startswith("- Wall time")]
    assert "recorded span" not in single


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (f"{_begin('long-scale')}\n", "docs/page.md:1: BEGIN long-scale without its END"),
        (f"x\n{_end('long-scale')}\n", "docs/page.md:2: END long-scale without its BEGIN"),
        (f"{_begin('long-scale')}\n{_end('tightness')}\n", "docs/page.md:2: END tightness closes block long-scale"),
        (f"{_begin('long-scale')}\n{_begin('tightness')}\n", "docs/page.md:2: BEGIN tightness inside block long-scale"),
        ("<!-- BEGIN GENERATED: two words -->\n", "docs/page.md:1: malformed generated-block marker"),
        (f"{_begin('no-such-kind')}\n{_end('no-such-kind')}\n", "unknown generated block 'no-such-kind'"),
        (f"{_begin('store-facts')}\n{_end('store-facts')}\n", "store-facts takes 1 to 1 arguments"),
        (
            f"{_begin('store-facts:missing')}\n{_end('store-facts:missing')}\n",
            "results/missing/results.sqlite: no such",
        ),
        (f"{_begin('best-losses:s-cpu:d')}\n{_end('best-losses:s-cpu:d')}\n", "d does not vary in icl (cpu)"),
    ],
)
def test_bad_markers_and_names_are_refused_in_one_line_with_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: str, message: str
) -> None:
    root = _root(tmp_path, doc)
    good = f"{_begin('best-losses:s-cpu')}\nSTALE\n{_end('best-losses:s-cpu')}\n"
    (root / "docs" / "another.md").write_text(good, encoding="utf-8")  # rendered first (sorted), yet not written
    capsys.readouterr()
    assert main(["report", "--docs", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert (root / "docs" / "page.md").read_text(encoding="utf-8") == doc
    assert (root / "docs" / "another.md").read_text(encoding="utf-8") == good


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "--docs", "MISSING"], "repository root not found"),
        (["report", "--docs", "EMPTY"], "is not the repository root"),
        (["report", "--docs", "ROOT", "--csv"], "--csv applies to a sweep directory"),
        (["report", "--docs", "ROOT", "--index"], "--index and --docs write different files"),
    ],
)
def test_docs_refusals_are_one_line_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "root").mkdir()
    root = _root(tmp_path / "root", "no blocks\n")
    paths = {"MISSING": str(tmp_path / "missing"), "EMPTY": str(tmp_path / "empty"), "ROOT": str(root)}
    capsys.readouterr()
    assert main([paths.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_markers_pair_in_order() -> None:
    text = f"a\n{_begin('x')}\nold\n{_end('x')}\nb\n{_begin('y:z')}\n{_end('y:z')}\n"
    assert [(b.name, b.begin, b.end) for b in find_blocks(text, "doc")] == [("x", 1, 3), ("y:z", 5, 6)]
    assert (
        find_blocks("the results index's own markers are not ours: <!-- BEGIN GENERATED RESULTS INDEX -->", "d") == []
    )


def test_sittings_split_where_the_results_index_splits_them() -> None:
    assert sitting_spans([]) == []
    assert sitting_spans([(0.0, 10.0), (5.0, 20.0), (30.0, 40.0)]) == [(0.0, 40.0)]
    assert sitting_spans([(1000.0, 1100.0), (0.0, 100.0)]) == [(0.0, 100.0), (1000.0, 1100.0)]


def test_gpu_step_costs_are_read_from_the_archived_metrics() -> None:
    """The archives of the first GPU calls give the step costs their README once copied by hand (issue 41: the hand
    copies disagreed at the last digit): conjecture6 52.3 ms, not 53; icl 94.4 to 190.7 ms."""
    runs = gpu_runs(ROOT / "results" / "gpu-2026-12-04")
    by_preset: dict[str, list[float]] = {}
    for run in runs:
        by_preset.setdefault(run.preset, []).append(run.ms_per_step)
    assert len(runs) == 15
    assert [round(v, 1) for v in by_preset["conjecture6"]] == [52.3]
    assert round(min(by_preset["icl"]), 1) == 94.4 and round(max(by_preset["icl"]), 1) == 190.7
    assert 17.0 < min(by_preset["fig1"]) < max(by_preset["fig1"]) < 19.0


def _csv_curve(path: Path, key: str, column: str) -> dict[int, float]:
    with path.open(newline="", encoding="utf-8") as handle:
        return {int(row["step"]): float(row[column]) for row in csv.DictReader(handle) if row["hash"] == key}


def test_regime_control_rows_are_the_committed_curves_at_the_last_population_step() -> None:
    """Each row of ``regime-control`` restates the committed files: recomputed here from curves.csv, population.csv and
    the control's run specs with the csv and sqlite3 modules, not through the reporting code."""
    replay, control = ROOT / "results" / "fig1-d64-replay-cpu", ROOT / "results" / "fig1-d64-cpu"
    with sqlite3.connect(replay / "results.sqlite") as db:
        replay_specs = {h: json.loads(s) for h, s in db.execute("SELECT hash, spec FROM runs WHERE kind = 'train'")}
    with sqlite3.connect(control / "results.sqlite") as db:
        control_runs = [
            (h, json.loads(s), json.loads(m)) for h, s, m in db.execute("SELECT hash, spec, metrics FROM runs")
        ]
    lines = regime_control(SOURCES, "fig1-d64-replay-cpu", "fig1-d64-cpu")
    rows = [line for line in lines if line.startswith("| N=")]
    assert len(rows) == len(replay_specs)
    checked = 0
    for key, spec in replay_specs.items():
        population = _csv_curve(replay / "population.csv", key, "population")
        if not population:
            continue
        step = max(population)
        training = _csv_curve(replay / "curves.csv", key, "loss")[step]
        control_curves = [
            (c["seed"], _csv_curve(control / "curves.csv", h, "loss"), m["best_loss"])
            for h, c, m in control_runs
            if (c["d"], c["layers"], c["rank"]) == (spec["d"], spec["layers"], spec["rank"])
        ]
        assert control_curves, spec
        same_cell = [  # a run extended past its control's budget meets "ends at S"
            (seed, f"{curve[step]:#.4g}" if step <= max(curve) else f"ends at {max(curve):,}", best)
            for seed, curve, best in control_curves
        ]
        expected = (
            f"| {spec['steps']:,} | {step:,} | {training:#.4g} | {population[step]:#.4g} | "
            + " / ".join(at for _, at, _ in sorted(same_cell))
            + " | "
            + " / ".join(f"{best:#.4g}" for _, _, best in sorted(same_cell))
            + " |"
        )
        assert sum(row.endswith(expected) for row in rows) == 1, (expected, rows)
        checked += 1
    assert checked >= 2  # the two runs that have measured their population error


def test_a_control_run_that_stopped_before_the_step_says_where_it_ended() -> None:
    """An extended run (40k steps) is compared at a step its 20k-step control never reached: the row says where the
    control ended instead of a loss; at a step the control reached, its loss there."""
    curve = [(100, 0.5), (200, 0.25)]
    assert control_at_step(curve, 300) == "ends at 200"
    assert control_at_step(curve, 200) == "0.2500" and control_at_step(curve, 150) == "-"


def test_regime_control_says_when_the_control_has_no_such_cell() -> None:
    """Negative control: against a store of another preset, no cell matches, and every row says so."""
    rows = [line for line in regime_control(SOURCES, "fig1-d64-replay-cpu", "icl-cpu") if line.startswith("| N=")]
    assert rows and all(row.endswith("| no such cell |") for row in rows)


def test_the_replay_readme_states_what_its_finished_three_layer_runs_show() -> None:
    """results/fig1-d64-replay-cpu/README.md says, of its finished three-layer runs, that on their set the training
    loss is below the fresh-batch runs' at the same step and the population error above them: checked here on the
    committed CSVs and stores (a snapshot that changes this makes the README's sentence a test failure)."""
    replay, control = ROOT / "results" / "fig1-d64-replay-cpu", ROOT / "results" / "fig1-d64-cpu"
    with sqlite3.connect(replay / "results.sqlite") as db:
        finished = [(h, json.loads(s)) for h, s in db.execute("SELECT hash, spec FROM runs WHERE status = 'finished'")]
    with sqlite3.connect(control / "results.sqlite") as db:
        control_runs = [(h, json.loads(s)) for h, s in db.execute("SELECT hash, spec FROM runs")]
    three_layer = [(h, spec) for h, spec in finished if spec["layers"] == 3 and spec["steps"] == 20_000]
    assert three_layer  # the control trained 20k steps: a longer run has no control at its last step
    for key, spec in three_layer:
        population = _csv_curve(replay / "population.csv", key, "population")
        step = max(population)
        fresh = [
            _csv_curve(control / "curves.csv", h, "loss")[step]
            for h, c in control_runs
            if (c["d"], c["layers"], c["rank"]) == (spec["d"], spec["layers"], spec["rank"])
        ]
        assert _csv_curve(replay / "curves.csv", key, "loss")[step] < min(fresh)
        assert population[step] > max(fresh)
    text = re.sub(r"\s+", " ", (replay / "README.md").read_text(encoding="utf-8"))
    assert (
        "the three-layer training losses are below the fresh-batch runs' at the same step, and their population "
        "errors are above them" in text
    )


def test_the_replay_readmes_gaps_are_the_committed_runs() -> None:
    """The README's generalisation gaps (population error on 20 000 held-out samples minus the last epoch's training
    loss, as the report defines the gap), recomputed from results.sqlite and curves.csv with sqlite3 and csv."""
    replay = ROOT / "results" / "fig1-d64-replay-cpu"
    with sqlite3.connect(replay / "results.sqlite") as db:
        rows = list(db.execute("SELECT hash, spec, metrics FROM runs WHERE status = 'finished'"))
    gaps: dict[int, list[float]] = {1: [], 3: []}
    for key, spec, metrics in rows:
        if json.loads(spec)["steps"] != 20_000:
            continue  # the 20k runs; an extension states its own
        curve = _csv_curve(replay / "curves.csv", key, "loss")
        gaps[json.loads(spec)["layers"]].append(json.loads(metrics)["population_error"] - curve[max(curve)])
    [one_layer] = gaps[1]
    said = (
        f"The one-layer model barely fits its set: its gap (population error minus the last epoch's training loss) is "
        f"{one_layer:.3f}, against {min(gaps[3]):.2f} to {max(gaps[3]):.2f} for the three-layer runs."
    )
    assert said in re.sub(r"\s+", " ", (replay / "README.md").read_text(encoding="utf-8")), said
