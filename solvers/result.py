"""What a solve returns: a status from a closed set, the grid in the input's notation,
its cost, the winning solver and its counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """The outcome of one puzzle (a str enum: compares equal to its value)."""

    SOLVED = "solved"  # a verified valid grid keeping every given
    UNSOLVABLE = "unsolvable"  # givens consistent, but search proved there is no solution
    TIMEOUT = "timeout"  # time ran out with no grid to offer
    APPROXIMATE = "approximate"  # time ran out; `solution` is the lowest-cost grid found
    INVALID = "invalid"  # not a puzzle: `error` says why
    ERROR = "error"  # a solver failed on this puzzle: `error` says how

    def __str__(self) -> str:
        return self.value


@dataclass(slots=True)
class SolveResult:
    """One puzzle's result. `cost` is 0 iff `solution` is a valid grid keeping every given."""

    status: Status
    puzzle: str = ""
    solution: str | None = None
    cost: int | None = None
    solver: str | None = None
    elapsed: float = 0.0  # seconds spent on this puzzle
    nodes: int = 0  # search nodes (exact) or iterations (stochastic) of the winner
    guesses: int = 0  # branching decisions of the winner
    restarts: int = 0
    solution_count: int | None = None  # with limit > 1: solutions found, up to the limit
    error: str | None = None
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)  # per solver

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (status as its string)."""
        d = asdict(self)
        d["status"] = self.status.value
        return d
