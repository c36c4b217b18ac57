"""What one search of a puzzle escalated to several processes trades with the others: clauses in, cubes out.

The race's complete members read it between steps; the pipeline fills it from the escalation's board
in another thread (`pipeline.escalation.board`), in cell/value terms (`solvers.race.cubes`). `inbox`:
clauses implied by the puzzle the others shared (each member keeps its own read position); `cubes` (a
helper's only): where it takes parts of the search; `holding`: the cube it searches now (the pipeline
keeps the claim alive); `outbox` (with `sharing`): short learnt clauses for the pipeline to share, at
most `MAX_OUTBOX` waiting; `counters`: the race's counters so far, noted every `PROGRESS_S` (a helper posts
them while it searches, so its owner never waits for them at the end).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple, Protocol

import numpy as np

from solvers.race.cubes import Clause, Cube, Cubes

MAX_OUTBOX = 4096  # learnt clauses waiting for the pipeline's next round (more are not shared)
PROGRESS_S = 0.25  # how often a race notes its counters in its exchange (a helper's poll)


class CubeSource(Protocol):
    """Where a helper's searches take cubes (the race's board in the pipeline; a list in tests)."""

    def published(self) -> list[Cube] | None:
        """The race's cubes (None: nobody has split the puzzle yet)."""

    def publish(self, split: Cubes) -> list[Cube]:
        """Offer a split; return the race's cubes (the first split published wins)."""

    def take(self) -> int | None:
        """Claim a cube no search holds and none refuted (None: none free now)."""

    def refute(self, index: int, clause: Clause) -> None:
        """Cube `index` has no solution (`clause`, implied by the puzzle, says why)."""


class Exchange:
    """One search's trade with the other processes searching its puzzle (see the module docstring).

    `want`: the cubes a split should make at least (about two per helper called); `sharing`: its SAT
    searches export their short learnt clauses (`solvers.sat.member`)."""

    def __init__(self, cubes: CubeSource | None = None, want: int = 4, sharing: bool = False) -> None:
        self.inbox: list[Clause] = []
        self.outbox: list[Clause] = []
        self.cubes = cubes
        self.want = want
        self.sharing = sharing
        self.holding: int | None = None
        self.counters: dict[str, dict[str, Any]] | None = None  # noted since the last `progress`
        self._lock = threading.Lock()

    def offer(self, clauses: list[Clause]) -> None:
        """Add clauses the other processes shared (from the pipeline's thread)."""
        with self._lock:
            self.inbox.extend(clauses)

    def since(self, start: int) -> list[Clause]:
        """The clauses offered from position `start` on."""
        with self._lock:
            return self.inbox[start:]

    def share(self, clauses: list[Clause]) -> None:
        """Queue clauses a search learnt for the other processes (from the search's thread)."""
        with self._lock:
            self.outbox.extend(clauses[: max(0, MAX_OUTBOX - len(self.outbox))])

    def take(self) -> list[Clause]:
        """The clauses queued since the last call (the pipeline's round), the queue emptied."""
        with self._lock:
            out, self.outbox = self.outbox, []
            return out

    def note(self, counters: dict[str, dict[str, Any]]) -> None:
        """Note the race's counters so far (from the search's thread)."""
        with self._lock:
            self.counters = counters

    def progress(self) -> dict[str, dict[str, Any]] | None:
        """The counters noted since the last call (None: none since)."""
        with self._lock:
            out, self.counters = self.counters, None
            return out


class Raced(NamedTuple):
    """What a racing hook (`solvers.api.solve_many(racing=...)`) may yield instead of a bare stop flag:
    the flag of that puzzle's search and its exchange with the other processes searching it."""

    flag: np.ndarray
    exchange: Exchange | None = None
