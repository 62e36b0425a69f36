"""The README's Python quickstart runs as written, in a fresh interpreter, and prints exactly what the README shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def quickstart_blocks(text: str) -> tuple[str, str]:
    """The quickstart's code block and the expected-output block that follows it."""
    section = text.split("## Python quickstart", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    expected = re.search(r"```text\n(.*?)```", section, re.S)
    assert code and expected, "README.md: the Python quickstart needs a ```python block and a ```text block"
    return code.group(1), expected.group(1)


def test_quickstart_prints_what_the_readme_shows(tmp_path: Path) -> None:
    code, expected = quickstart_blocks(README.read_text(encoding="utf-8"))
    script = tmp_path / "quickstart.py"
    script.write_text(code, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == expected
    assert (tmp_path / "full_rank.safetensors").exists()
