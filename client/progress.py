"""A one-line progress bar on stderr: done/total, puzzles/s, ETA (redrawn at most 5 times a second)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from client import numbers


class Progress:
    """Draws `[#####.....] done/total  rate/s  ETA` with carriage returns; silent when disabled."""

    WIDTH = 24  # the bar's cells

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self._drawn = 0.0
        self._shown = False

    def update(self, done: int, total: int | None, submitted: int, force: bool = False) -> None:
        """Redraw if due; `total` is None while the input is still being read (then `submitted` is shown)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn < 0.2:
            return
        self._drawn = now
        elapsed = max(1e-9, now - self.started)
        rate = done / elapsed
        if total:
            filled = int(self.WIDTH * min(1.0, done / total))
            bar = "#" * filled + "." * (self.WIDTH - filled)
            eta = f"ETA {numbers.duration((total - done) / rate)}" if rate > 0 and done < total else ""
            count = f"{numbers.count(done)}/{numbers.count(total)}"
        else:
            bar, eta = "." * self.WIDTH, ""
            count = f"{numbers.count(done)}/{numbers.count(max(done, submitted))}+"
        line = f"\r[{bar}] {count} puzzles  {numbers.per_second(rate)}/s  {eta}".rstrip()
        self.stream.write(line + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def say(self, line: str) -> None:
        """Write a line on the bar's stream, above the bar (redrawn at the next update)."""
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[K")
            self._shown, self._drawn = False, 0.0
        self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled and self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False
