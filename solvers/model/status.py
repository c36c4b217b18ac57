"""The one status table: each public status's fixed code and summary place, how every kernel or race end
becomes a status, and the states a race member reports. Why one table: statuses were mapped in seven
places that could disagree; everything else here is derived from `STATUSES` and `ENDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from solvers.kernel.outcome import Outcome


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


@dataclass(frozen=True)
class StatusRow:
    """One status: its code (fixed, from `Results.code` to the wire and files), place in the summary,
    whether its grid counts as a win of its solver, whether the summary lists it as a problem line."""

    status: Status
    code: int
    order: int
    answered: bool = False
    problem: bool = False


STATUSES = (  # in code order; a new status gets a new code
    StatusRow(Status.SOLVED, 0, 0, answered=True),
    StatusRow(Status.UNSOLVABLE, 1, 2),
    StatusRow(Status.TIMEOUT, 2, 3),
    StatusRow(Status.APPROXIMATE, 3, 1, answered=True),
    StatusRow(Status.INVALID, 4, 4, problem=True),
    StatusRow(Status.ERROR, 5, 5, problem=True),
)
STATUS_CODE: dict[Status, int] = {r.status: r.code for r in STATUSES}
STATUS_NAMES: list[str] = [r.status.value for r in STATUSES]  # code -> name
STATUS_BY_CODE: list[Status] = [r.status for r in STATUSES]  # code -> Status
SUMMARY_ORDER: tuple[str, ...] = tuple(r.status.value for r in sorted(STATUSES, key=lambda r: r.order))
IS_ANSWERED = np.array([r.answered for r in STATUSES])  # by code
IS_PROBLEM = np.array([r.problem for r in STATUSES])  # by code

STOPPED_ERROR = "stopped before an answer"
REJECTED_ERROR = "{solver} returned a grid the verifier rejects"
# How a kernel's search or a race ended (`solvers.kernel.outcome`) becomes a status. An end without a
# verified grid never reads `solved` (the verifier has the last word); a race that ends without a decision
# answers its best grid, if any (`approximate`).
ENDS: dict[Outcome, tuple[Status, str | None]] = {
    Outcome.SOLVED: (Status.SOLVED, None),  # a race member holds a grid the verifier accepts
    Outcome.DONE: (Status.UNSOLVABLE, None),  # the search space is exhausted: no solution
    Outcome.LIMIT: (Status.UNSOLVABLE, None),  # (a limit of solutions reached with none found cannot be)
    Outcome.TIMEOUT: (Status.TIMEOUT, "no solution within the time limit"),
    Outcome.BUDGET: (Status.TIMEOUT, "no solution within the search budget"),
    Outcome.STOPPED: (Status.TIMEOUT, STOPPED_ERROR),
}
DECIDED = frozenset(o for o, (status, _) in ENDS.items() if status in (Status.SOLVED, Status.UNSOLVABLE))

# The same for a kernel's status array, by outcome code: a status code and an error id (0: none, 1: the
# rejected grid, 2 + k: END_ERRORS[k]); any end not in ENDS (or `solved` without a verified grid) reads
# as the budget's.
END_ERRORS: list[str] = list(dict.fromkeys(e for _, e in ENDS.values() if e))
_UNVERIFIED = {o: end for o, end in ENDS.items() if end[0] is not Status.SOLVED}
END_CODE = np.array([STATUS_CODE[_UNVERIFIED.get(o, ENDS[Outcome.BUDGET])[0]] for o in Outcome], np.uint8)
END_ERROR = np.array(
    [2 + END_ERRORS.index(e) if (e := _UNVERIFIED.get(o, ENDS[Outcome.BUDGET])[1]) else 0 for o in Outcome],
    np.int16,
)


class MemberState(StrEnum):
    """A race member's `status` in its counters: how it ended, or `running`."""

    RUNNING = "running"
    SOLVED = "solved"
    UNSOLVABLE = "unsolvable"
    DONE = "done"  # an enumeration that ended: its count is every solution
    LOST = "lost"  # another member answered first
    TIMEOUT = "timeout"
    STOPPED = "stopped"  # the stop flag was raised
    IDLE = "idle"  # nothing was left to try
    FAST_PATH_ONLY = "fast path only"  # no share of the race at this size
