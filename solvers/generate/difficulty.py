"""How hard a puzzle is: search effort of a fixed-order exact search, bucketed into levels.

The measure is the number of guesses (branching decisions) that the singles + MRV search of
`solvers.generate.dig` makes to solve a puzzle and prove it unique, exploring its whole tree in a fixed order.
Why this one:

* zero guesses means exactly "naked and hidden singles alone solve it": that search
  propagates nothing else, so the easiest level has a plain, checkable meaning;
* the whole tree (count to 2) is explored and the branching cell is chosen by candidate
  counts in row-major order, so relabelling the values cannot change the measure, and
  no lucky value order makes a puzzle look easy;
* it is our own kernel, not the default solver, so a faster `propagation` (locked
  candidates, other heuristics) does not move every corpus to another level.

Levels use absolute guess counts; larger grids need more guesses, so near-minimal 16x16 and 25x25 puzzles are
nearly all `expert` (the measure is effort, not a rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.generate.dig import solve_starts
from solvers.kernel.outcome import BUDGET
from solvers.model.puzzle import Box

# (name, most guesses) in increasing order; the last level has no upper bound.
LEVELS: tuple[tuple[str, int], ...] = (("easy", 0), ("medium", 2), ("hard", 9), ("expert", 2**62))
LEVEL_NAMES: tuple[str, ...] = tuple(name for name, _ in LEVELS)
RATE_BUDGET = 100_000  # nodes per puzzle; past it the guesses are a lower bound (level expert)


@dataclass(frozen=True, slots=True)
class Rating:
    """The difficulty of one puzzle: its level and the counters it is read from."""

    level: str
    guesses: int  # branching decisions of the fixed-order search (whole tree)
    nodes: int  # search states visited (root + one per value tried)
    singles: bool  # naked and hidden singles alone solve it
    solutions: int  # solutions found, up to 2 (1 = unique)
    complete: bool  # the search finished within its budget (else counts are lower bounds)


def level_of(guesses: int) -> str:
    """Name the level of a guess count (the first level whose bound it does not exceed)."""
    return next((name for name, most in LEVELS if guesses <= most), LEVELS[-1][0])


FOUR_BY_FOUR_LEVELS = {True: frozenset({"easy"}), False: frozenset({"easy", "medium", "hard"})}  # by unique


def possible_levels(box: Box, unique: bool, full: bool = False) -> frozenset[str]:
    """The levels a generated puzzle of `box` can have: a filter outside them is refused before any work,
    never tried `attempts` times for nothing (the CLI's `generate` and the page's random puzzle ask here).

    A full grid needs no guess (easy). Every 4x4 puzzle was rated (the 786,432 of the 12 grids whose first row
    is 1234: the measure ignores relabelling, so they are all of them): a unique one is solved by singles
    alone (easy), any other takes at most 7 guesses (up to hard, never expert). Other boxes: every level (none
    has been proven out); `tests/test_generator.py` rates them again."""
    if full:
        return frozenset({LEVEL_NAMES[0]})
    if (box.rows, box.cols) == (2, 2):
        return FOUR_BY_FOUR_LEVELS[unique]
    return frozenset(LEVEL_NAMES)


def parse_levels(
    spec: str | list[str] | tuple[str, ...] | frozenset[str] | set[str] | None,
) -> frozenset[str] | None:
    """Read a level filter (`"hard,expert"` or names); None or empty keeps every level.

    Raises ValueError naming the unknown level, so a typo never filters everything out."""
    if spec is None:
        return None
    names = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    names = [s for s in names if s]
    unknown = [s for s in names if s not in LEVEL_NAMES]
    if unknown:
        raise ValueError(f"difficulty {unknown[0]!r}: choose from {', '.join(LEVEL_NAMES)}")
    return frozenset(names) or None


def rate_batch(box: Box, puzzles: np.ndarray, budget: int = RATE_BUDGET) -> list[Rating]:
    """Rate every puzzle of uint8[B, N*N] (batched in one kernel call: ~10 us per 9x9)."""
    _, count, status, nodes, guesses = solve_starts(box, puzzles, 0, limit=2, budget=budget)
    complete = status != BUDGET
    bounds = np.array([most for _, most in LEVELS], dtype=np.int64)
    levels = np.searchsorted(bounds, guesses).tolist()  # first bound >= guesses
    singles = ((guesses == 0) & (count >= 1)).tolist()
    return [
        Rating(LEVEL_NAMES[lv], g, nd, s, c, ok)
        for lv, g, nd, s, c, ok in zip(
            levels, guesses.tolist(), nodes.tolist(), singles, count.tolist(), complete.tolist(), strict=True
        )
    ]
