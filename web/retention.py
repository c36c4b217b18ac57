"""What an embedded server keeps: at most `max_jobs_kept` jobs and `max_memory_mb` of its own memory, the
oldest finished jobs dropped first (its jobs live in its memory); every drop and purge hands the freed heap
back with `malloc_trim`, else the resident size never fell (docs/decisions.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import time
from collections import deque
from dataclasses import dataclass

log = logging.getLogger(__name__)
MAX_DROPPED_LISTED = 20  # dropped jobs the page names (the count goes on)
FINISHED = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class Dropped:
    """A job the bound dropped: its id, input name, why (`jobs` or `memory`) and when (epoch seconds)."""

    job: str
    name: str
    why: str
    at: float


def resident_mb() -> float | None:
    """This process's resident memory in MB (None where /proc is not there to say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def _libc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """glibc's `malloc_trim`, or None (another C library)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


_TRIM = _libc_trim()


def release_memory() -> None:
    """Give the heap's free memory back to the system (glibc keeps it otherwise); nothing elsewhere."""
    if _TRIM is not None:
        _TRIM(0)


class Retention:
    """Chooses the finished jobs to drop, oldest first, to stay within the count and memory bounds."""

    def __init__(self, max_jobs: int, max_memory_mb: int) -> None:
        self.max_jobs = max_jobs
        self.max_memory_mb = max_memory_mb
        self.dropped: deque[Dropped] = deque(maxlen=MAX_DROPPED_LISTED)
        self.dropped_total = 0

    def over(self, rows: list[dict[str, object]]) -> tuple[dict[str, object], str] | None:
        """The next job to drop and why, given every job's row (None: within both bounds, or nothing
        can go). Rows are the jobs list's: `job`, `name`, `phase`, `created`."""
        finished = sorted(
            (r for r in rows if r["phase"] in FINISHED),
            key=lambda r: float(r["created"]),  # type: ignore[arg-type]
        )
        newest = max(rows, key=lambda r: float(r["created"]), default=None)  # type: ignore[arg-type]
        candidates = [r for r in finished if r is not newest]
        if not candidates:
            return None
        if len(rows) > self.max_jobs:
            return candidates[0], "jobs"
        rss = resident_mb()
        if rss is not None and rss > self.max_memory_mb:
            return candidates[0], "memory"
        return None

    def note(self, row: dict[str, object], why: str) -> None:
        """Remember a dropped job for the page (and log it: the server's operator sees it too)."""
        self.dropped.append(Dropped(str(row["job"]), str(row["name"]), why, time.time()))
        self.dropped_total += 1
        log.info("dropped job %s (%s): the server keeps at most %s", row["job"], row["name"], self.bound(why))

    def bound(self, why: str) -> str:
        """The bound a drop kept: `50 jobs` or `1,024 MB`."""
        return f"{self.max_jobs:,} jobs" if why == "jobs" else f"{self.max_memory_mb:,} MB"

    def was_dropped(self, job: str) -> Dropped | None:
        """The record of `job` if the bound dropped it (among the last MAX_DROPPED_LISTED)."""
        return next((d for d in self.dropped if d.job == job), None)

    def state(self, kept: int) -> dict[str, object]:
        """What the jobs page says: the bounds, what is kept now, and what was dropped."""
        rss = resident_mb()
        return {
            "max_jobs_kept": self.max_jobs,
            "max_memory_mb": self.max_memory_mb,
            "jobs_kept": kept,
            "memory_mb": None if rss is None else round(rss),
            "dropped_total": self.dropped_total,
            "dropped": [d.__dict__ for d in reversed(self.dropped)],
        }
