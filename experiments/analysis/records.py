"""What a sweep's records are: one run's spec fields merged with its metrics (`Record`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Record = Mapping[str, Any]
"""One run of a sweep: its spec fields merged with its metrics (`experiments.reporting.sweep_report.sweep_records`)."""
