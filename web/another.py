""" "New solution": a solution of the puzzle other than the ones the page has shown, or why there is none.

A race under another seed need not find another solution (a SAT member keeps its own literal order), so when
the portfolio's answer was shown already, the exact kernel enumerates solutions in the seed's random value
order, up to one more than were shown: the first new one, or, when the enumeration ends, a count of them all.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from client.pool import WarmPool
from pipeline.contract.tasks import solver_seed
from solvers.exact import EXACT_SOLVERS
from solvers.exact.base import DEFAULT_EXACT
from solvers.kernel.outcome import DONE
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Box, PuzzleError
from solvers.model.status import MemberState, Status
from solvers.model.verify import is_solution
from web.errors import ANSWER_GRACE_S, ApiError, in_pool

MAX_EXCLUDE = 16  # solutions a request may name as shown (the page keeps the last 16)
DIED = "the solving process died on this puzzle (a new one is started)"


def excluded_grids(texts: list[str], box: str, most_chars: int) -> list[bytes]:
    """The shown solutions as grids (uint8 bytes, notation aside); ApiError 422 naming a bad one."""
    if len(texts) > MAX_EXCLUDE:
        raise ApiError(422, f"exclude names {len(texts)} grids; at most {MAX_EXCLUDE}")
    shape = Box.parse(box)
    out = []
    for k, text in enumerate(texts):
        if len(text) > most_chars:
            raise ApiError(413, f"exclude[{k}] is {len(text):,} characters; at most {most_chars:,}")
        try:
            grid = parse_puzzle(text, shape).givens
        except PuzzleError as exc:
            raise ApiError(422, f"exclude[{k}] is not a grid of this puzzle: {exc}") from None
        if not grid.all():
            raise ApiError(422, f"exclude[{k}] is not a full grid of this puzzle's size")
        out.append(grid.tobytes())
    return out


def other_solution(text: str, box: str, shown: list[bytes], seed: int, time_limit: float) -> dict[str, Any]:
    """Enumerate the puzzle's solutions in the seed's value order, up to len(shown) + 1 (in a pool process):
    {grid: the first verified one not shown or None, count: solutions found, complete: the count is every
    solution, nodes, guesses, time_ms}."""
    puzzle = parse_puzzle(text, Box.parse(box))
    solver = EXACT_SOLVERS[DEFAULT_EXACT]
    limit = len(shown) + 1
    started = time.perf_counter()
    batch = solver.solve_batch(
        puzzle.givens[None, :], puzzle.box, limit=limit, keep=limit, time_limit=time_limit, seed=seed
    )
    found = int(batch.counts[0])
    seen = set(shown)
    grid = next(
        (
            g
            for g in batch.solutions[0, : min(found, limit)]
            if g.tobytes() not in seen and is_solution(puzzle, np.asarray(g))
        ),
        None,
    )
    return {
        "grid": None if grid is None else puzzle.render(grid),
        "count": found,
        "complete": int(batch.status[0]) == DONE,
        "nodes": int(batch.nodes[0]),
        "guesses": int(batch.guesses[0]),
        "time_ms": (time.perf_counter() - started) * 1e3,
    }


async def answer(
    pool: WarmPool,
    record: dict[str, Any],
    shown: list[bytes],
    text: str,
    box: str,
    seed: int,
    time_limit: float,
) -> dict[str, Any]:
    """The portfolio's record when its solution is new; else the enumeration's new solution as a record of its
    own, or the record with `another: false`; each with `another` (a solution not shown) and `solutions` (the
    count, null unless known)."""
    if record.get("status") != Status.SOLVED or not record.get("solution"):
        return {**record, "another": False, "solutions": None}
    mine = parse_puzzle(record["solution"], Box.parse(box)).givens.tobytes()  # a verified grid: it parses
    if mine not in shown:
        return {**record, "another": True, "solutions": None}
    seeded = solver_seed(str(seed), 1)  # not the race's own seed (`solver_seed(seed, 0)`)
    args = (text, box, shown, seeded, time_limit)
    other = await in_pool(pool, time_limit + ANSWER_GRACE_S, "no answer", DIED, other_solution, *args)
    ended = MemberState.DONE if other["complete"] else MemberState.TIMEOUT  # counted every solution, or not
    name = f"{DEFAULT_EXACT} (another)"  # beside the portfolio's members in the counters
    member = {key: other[key] for key in ("time_ms", "nodes", "guesses")}
    member |= {"solutions_found": other["count"], "status": MemberState.SOLVED if other["grid"] else ended}
    counters = {**record.get("counters", {}), name: member}
    if other["grid"] is None:
        counted = other["count"] if other["complete"] else None
        return {**record, "counters": counters, "another": False, "solutions": counted}
    return {
        **record,
        "solution": other["grid"],
        "solver": name,
        "time_ms": record["time_ms"] + other["time_ms"],
        "nodes": other["nodes"],
        "guesses": other["guesses"],
        "restarts": 0,
        "counters": counters,
        "another": True,
        "solutions": None,
    }
