"""Progress of a long loop on stderr: a tqdm bar on a terminal, else a plain line at least every ``interval`` seconds.

Logs of batch jobs (stderr redirected to a file or a pipe) cannot show a bar, and a bar's carriage returns make them
unreadable; there a background thread writes one line per interval,

    train farthest r=8: step 1200/2000 (60.0%), loss 0.5123, 3.41 steps/s, ETA 3m55s

(rate and ETA from the steps done by this process since it started), and one last line when the loop ends. The
counters are plain attributes updated by the loop and read by the thread (single writer; a line may be one step
behind). Any loop counting units of work can use it (`unit` names them).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from types import TracebackType
from typing import TextIO

from tqdm import tqdm

DEFAULT_INTERVAL = 10.0
"""Seconds between two progress lines when stderr is not a terminal."""


def format_duration(seconds: float) -> str:
    """``1h02m03s``, ``2m05s``, ``7s``; ``?`` when unknown (not finite)."""
    if not math.isfinite(seconds):
        return "?"
    whole = round(max(seconds, 0.0))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Progress of ``total`` units of work from ``initial``: a tqdm bar on a terminal, else periodic lines.

    Use as a context manager; call `update` after each unit and `set_loss` when a new loss is known.

    Args:
        total: units of the whole loop.
        initial: units already done (a resumed run).
        desc: what the loop is (the line's prefix).
        enabled: False shows nothing.
        stream: where to write (default: sys.stderr at construction).
        interval: seconds between lines when ``stream`` is not a terminal (> 0).
        unit: name of a unit of work ("step", "run").
    """

    def __init__(
        self,
        total: int,
        *,
        initial: int = 0,
        desc: str = "",
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = DEFAULT_INTERVAL,
        unit: str = "step",
    ) -> None:
        if not (isinstance(interval, (int, float)) and math.isfinite(interval) and interval > 0):
            raise ValueError(f"progress interval must be a finite number of seconds > 0, got {interval!r}")
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.initial, self.done = total, initial, initial
        self.desc, self.unit, self.interval = desc, unit, float(interval)
        self.loss: float | None = None
        terminal = self.stream.isatty()
        disable = not enabled or not terminal
        self.bar = tqdm(
            total=total, initial=initial, desc=desc, unit=unit, leave=False, file=self.stream, disable=disable
        )
        self.lines = enabled and not terminal
        self.started = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        self.started = time.perf_counter()
        if self.lines:
            self._thread = threading.Thread(target=self._report, name="progress-lines", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done."""
        self.done += n
        self.bar.update(n)

    def write(self, message: str) -> None:
        """A message line (a failure, a warning) that does not break the bar or the progress lines."""
        if self.bar.disable:
            if self.lines:
                self.stream.write(message + "\n")
                self.stream.flush()
        else:
            self.bar.write(message, file=self.stream)

    def set_loss(self, loss: float) -> None:
        """The latest loss (shown on the bar and in the lines)."""
        self.loss = loss
        self.bar.set_postfix(loss=f"{loss:.4g}")

    def line(self) -> str:
        """The current progress line (without newline)."""
        elapsed = time.perf_counter() - self.started
        rate = (self.done - self.initial) / elapsed if elapsed > 0 else math.nan
        remaining = (self.total - self.done) / rate if rate > 0 else math.inf
        share = 100.0 * self.done / self.total if self.total else 100.0
        parts = [f"{self.unit} {self.done}/{self.total} ({share:.1f}%)"]
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4g}")
        parts += [f"{rate:.3g} {self.unit}s/s", f"ETA {format_duration(remaining)}"]
        return f"{self.desc}: {', '.join(parts)}" if self.desc else ", ".join(parts)

    def _write_line(self) -> None:
        self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _report(self) -> None:
        """The background thread: one line every ``interval`` seconds until closed."""
        while not self._stop.wait(self.interval):
            self._write_line()

    def close(self) -> None:
        """Stop the lines (writing a last one) or close the bar."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._write_line()
        self.bar.close()
