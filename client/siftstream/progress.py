"""The progress of ``sift push``: a live bar on a terminal, a plain summary otherwise.

On a terminal the bar is redrawn in place (at most ten times a second) with the items sent,
the rate and the time left: ``[######......] 42,000/100,000 rows  8,350 rows/s  ETA 0:07``.
Elsewhere (a log, a pipe, CI) nothing is drawn and only ``finish``'s summary line is printed.
The rate counts what this run sent: items skipped because an earlier run had them acknowledged
are shown as done but not as speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 28
REDRAW_SECONDS = 0.1


def duration(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour)."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Items (rows or feature columns) sent out of ``total`` (None when not known)."""

    def __init__(
        self,
        stream: TextIO,
        total: int | None,
        unit: str = "rows",
        *,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.total = total
        self.unit = unit
        self.live = stream.isatty() if live is None else live
        self.clock = clock
        self.started = clock()
        self.skipped = 0
        self.done = 0
        self._drawn_at = float("-inf")

    def skip(self, items: int) -> None:
        """Items an earlier run already had acknowledged (resumed, not sent again)."""
        self.skipped += items
        self.done += items

    def advance(self, items: int) -> None:
        self.done += items
        if self.live and self.clock() - self._drawn_at >= REDRAW_SECONDS:
            self._draw()

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    @property
    def rate(self) -> float:
        """Items per second sent by this run."""
        return (self.done - self.skipped) / max(self.elapsed, 1e-9)

    def line(self) -> str:
        """The bar's text: fraction, items, rate and time left (when the total is known)."""
        rate = self.rate
        if self.total:
            fraction = min(1.0, self.done / self.total)
            filled = round(fraction * BAR_WIDTH)
            bar = "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "] "
            count = f"{self.done:,}/{self.total:,} {self.unit}"
            left = max(self.total - self.done, 0)
            eta = f"  ETA {duration(left / rate)}" if rate > 0 else "  ETA -"
        else:
            bar, count, eta = "", f"{self.done:,} {self.unit}", ""
        return f"{bar}{count}  {rate:,.0f} {self.unit}/s{eta}"

    def _draw(self) -> None:
        self._drawn_at = self.clock()
        # Carriage return and clear-to-end-of-line: the bar redraws in place.
        self.stream.write("\r" + self.line() + "\x1b[K")
        self.stream.flush()

    def finish(self, summary: str, out: TextIO | None = None) -> None:
        """End the bar (on a terminal) and print the summary line, on ``out`` (a command's
        result, on standard output) or with the bar (a diagnostic)."""
        if self.live:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
        target = self.stream if out is None else out
        target.write(summary + "\n")
        target.flush()
