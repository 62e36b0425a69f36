"""One point of a reference grid read checked: every value from the file that gave it, every refusal one line naming the
file and the key path (``fig1_config.yaml: data.num_workers = 0: ...``). `experiments.sweeps.reference_configs` turns
the points into runs; this is how it reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from theory.validation import check_int, check_real


def refuse(file: Path | None, path: str, value: Any, why: str) -> ValueError:
    """The one-line refusal of a key's value: ``FILE: PATH = VALUE: why``."""
    shown = repr(value) if isinstance(value, str) else value
    return ValueError(f"{file if file is not None else 'the reference files'}: {path} = {shown}: {why}")


class ReferencePoint:
    """One point of the grid: the key paths' values with the file each came from; reads them checked."""

    def __init__(self, values: Mapping[str, tuple[Any, Path]], config: Path, sweep: Path | None) -> None:
        self.values = dict(values)
        self.config, self.sweep = config, sweep
        self.used: set[str] = set()

    def _get(self, path: str) -> tuple[Any, Path | None]:
        self.used.add(path)
        value, file = self.values.get(path, (None, None))
        return value, file

    def integer(self, path: str, *, minimum: int, default: int | None = None, why: str = "") -> int:
        value, file = self._get(path)
        if value is None:
            if default is None:
                raise self.missing(path, why)
            return default
        try:
            return check_int(path, value, minimum=minimum)
        except ValueError as exc:
            raise ValueError(f"{file}: {exc}") from exc

    def real(self, path: str, *, default: float | None = None, **limits: Any) -> float:
        value, file = self._get(path)
        if value is None:
            if default is None:
                raise self.missing(path)
            return default
        if isinstance(value, str):  # YAML reads 1e-3 (no dot) as text; the reference's parser reads it as a float
            try:
                value = float(value)
            except ValueError:
                pass
        try:
            return check_real(path, value, **limits)
        except ValueError as exc:
            raise ValueError(f"{file}: {exc}") from exc

    def raw(self, path: str, default: Any = None) -> tuple[Any, Path | None]:
        value, file = self._get(path)
        return (default if value is None else value), file

    def missing(self, path: str, why: str = "") -> ValueError:
        """A required key that neither file gives, named against the config (where it belongs)."""
        reason = f" ({why})" if why else ""
        where = "" if self.sweep is None else f" (nor in the sweep file {self.sweep.name})"
        return ValueError(f"{self.config}: {path}: required, and not given{where}{reason}")
