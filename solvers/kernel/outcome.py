"""How a compiled search or run ended: one outcome enum for every kernel and race member.

Exact kernels, the generator's dig, stochastic slices and race members all report with these codes, so
a code means the same wherever it is compared. Internal: the public vocabulary is
`solvers.model.result.Status`, and the wire has its own codes. Plain ints beside the enum for kernels:
numba freezes module-level ints as constants, while an IntEnum member does not store into an int array.
"""

from __future__ import annotations

from enum import IntEnum


class Outcome(IntEnum):
    """The end of one kernel call, search, slice or race step."""

    DONE = 0  # search space exhausted: the count is exact (0 means no solution)
    LIMIT = 1  # stopped after finding `limit` solutions
    TIMEOUT = 2  # the per-puzzle time limit or the deadline passed
    BUDGET = 3  # the work budget of the call was spent, nothing decided: the search or run may go on
    STOPPED = 4  # the stop flag was raised
    SOLVED = 5  # a run holds a grid of cost 0 (a race member: one the verifier accepts)
    EXHAUSTED = 6  # a run or member has nothing left to try: it will not improve any more


# The same codes as plain ints, for numba kernels (see the module docstring); in member order.
DONE, LIMIT, TIMEOUT, BUDGET, STOPPED, SOLVED, EXHAUSTED = (int(o) for o in Outcome)
OUTCOME_NAMES: dict[int, str] = {int(o): o.name.lower() for o in Outcome}  # code -> "done", "limit", ...
