"""The study registry (issue 40): a preset holds its figure, report sections and cell rule as objects, checked when it
is built; every study module file is registered and covered by the independence contract; nothing under
experiments/figures/ trains or runs as a program."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

from experiments.studies import PRESETS, STUDY_MODULES
from experiments.sweeps.grading import CellRule
from experiments.sweeps.preset_kit import Figure, Preset, ReportSection

ROOT = Path(__file__).resolve().parents[3]


def test_every_preset_holds_objects_not_names() -> None:
    for name, preset in PRESETS.items():
        assert preset.figure is None or isinstance(preset.figure, Figure), name
        assert all(isinstance(section, ReportSection) for section in preset.report_sections), name
        assert isinstance(preset.cell_rule, CellRule), name
    assert PRESETS["tightness"].figure is not None  # drawn now (it used to name a figure nobody had)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"figure": "fig1"}, "figure must be a Figure"),
        ({"figure": None, "report_sections": ("curve-projections",)}, "report_sections must hold ReportSection"),
        ({"figure": None, "cell_rule": "loss"}, "cell_rule must be a CellRule"),
    ],
)
def test_a_name_where_an_object_belongs_is_refused_when_the_preset_is_built(fields: dict, message: str) -> None:
    """What used to be a silent skip at report time is an error the moment the study module is imported."""
    with pytest.raises(TypeError, match=message):
        Preset(name="x", description="x", scales={}, **fields)


def test_the_independence_contract_covers_every_study_module_and_the_registry_every_file() -> None:
    """A new study is one file plus its entry in STUDY_MODULES: the contract names the modules by a wildcard (no
    pyproject line to add), and a module file left out of the registry is caught here."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (independence,) = [c for c in contracts if c["type"] == "independence"]
    assert independence["modules"] == ["experiments.studies.*"]
    files = {path.stem for path in (ROOT / "experiments" / "studies").glob("*.py") if path.stem != "__init__"}
    assert files == {module.__name__.rsplit(".", 1)[1] for module in STUDY_MODULES}


def test_figures_only_draw() -> None:
    """No module under experiments/figures/ has a main() or calls the training entry points."""
    for path in sorted((ROOT / "experiments" / "figures").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert "main" not in functions, f"{path.name} has a main()"
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("experiments.training")
            for alias in node.names
        }
        assert not imported & {"train", "train_packed", "evaluate_run"}, f"{path.name} trains: {imported}"
        assert "__main__" not in path.read_text(), f"{path.name} runs as a program"
