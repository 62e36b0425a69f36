"""scripts/progress_table.py: the table shows the chosen steps, the last epoch and the running minimum."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "progress_table.py"


def load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("progress_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table_every_k_steps_with_the_running_minimum(tmp_path: Path) -> None:
    path = tmp_path / "L3-r32.csv"
    lines = ["step,loss,lr,time"] + [f"{s},{loss},0.001,{s / 10}" for s, loss in ((100, 0.9), (200, 0.5), (300, 0.7))]
    path.write_text("\n".join(lines) + "\n")
    text = load().table(200, [path])
    body = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert body == ["| 200 | 0.5000 | 0.5000 | 0.00100 | 20 |", "| 300 | 0.7000 | 0.5000 | 0.00100 | 30 |"]
    assert "last epoch: step 300" in text


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    module = load()
    assert module.main(["0", str(tmp_path / "a.csv")]) == 2
    assert module.main(["100", str(tmp_path / "missing.csv")]) == 2
