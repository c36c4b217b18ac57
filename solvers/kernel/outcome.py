"""How a compiled search or run ended: one outcome enum for every kernel and race member.

Exact kernels (`solvers.exact`), the generator's dig and rating search (`solvers.generate.dig`),
stochastic slices (`solvers.stochastic`) and race members (`solvers.race.members`) all report
with these codes, so a code means the same wherever it is compared. They are internal:
the public vocabulary is `solvers.model.result.Status`, and the wire has its own fixed codes.

Why plain ints beside the enum: numba freezes module-level ints into compiled code as
constants, while an IntEnum member is typed as an enum value that does not store into
the kernels' int8/int64 status arrays. Kernels use the ints; Python code may use either
(an IntEnum member equals its int).
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
