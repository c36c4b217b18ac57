"""One puzzle's search split into cubes (cube-and-conquer), in cell/value terms every search can read.

Why: helpers racing a puzzle with other seeds or modes repeat much of one another's search; with
cubes each searches a part. A cube fixes one to three cells to candidates; a split's cubes cover
every candidate of those cells, so the puzzle has no solution once every cube is refuted, and a
refuted cube is a clause every other search imports. Terms: `term(cell, value, n)` = cell * n +
value (1 .. n**3; negative: the cell does not hold the value), whatever a search's numbering; a
clause is a tuple of terms (true when one holds), a cube a tuple of positive terms.

`make_cubes` places each candidate of the `LOOKAHEAD_CELLS` open cells with fewest candidates by
root propagation, scores a cell by what its least effective placement removes (balanced cubes),
and takes the best cells until the cubes number `want`, least constraining first. A placement
propagation refutes becomes a unit clause. Deterministic: the same puzzle and `want`, the same cubes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from solvers.model.puzzle import Puzzle

MAX_CUBES = 64  # cubes of one split (each a claim on the race's board)
MAX_CUBE_CELLS = 3  # cells one cube fixes
MAX_CLAUSE_TERMS = 8  # terms of a clause a search shares or imports
LOOKAHEAD_CELLS = 40  # open cells whose candidates the lookahead places (64x64: ~1 ms a placement)

Clause = tuple[int, ...]
Cube = tuple[int, ...]


def term(cell: int, value: int, n: int) -> int:
    """The positive term of `cell` holding `value` (1-based) in a grid of side n."""
    return cell * n + value


def cell_value(t: int, n: int) -> tuple[int, int]:
    """The (cell, value) of a term (either sign)."""
    cell, v = divmod(abs(t) - 1, n)
    return cell, v + 1


def negation(cube: Cube) -> Clause:
    """The clause a refuted cube leaves: not every one of its cells holds its value."""
    return tuple(-t for t in cube)


def valid_clause(clause: object, n: int, width: int = MAX_CLAUSE_TERMS) -> bool:
    """True when `clause` is a tuple or list of 1..width non-zero int terms of a grid of side n (what
    a search accepts from another process: anything else is dropped)."""
    if not isinstance(clause, tuple | list) or not 0 < len(clause) <= width:
        return False
    top = n**3
    return all(type(t) is int and 0 < abs(t) <= top for t in clause)


def valid_cube(cube: object, n: int) -> bool:
    """True when `cube` holds 1..MAX_CUBE_CELLS positive terms on distinct cells of a grid of side n."""
    if not valid_clause(cube, n, MAX_CUBE_CELLS) or any(t < 0 for t in cube):  # type: ignore[union-attr]
        return False
    cells = [cell_value(t, n)[0] for t in cube]  # type: ignore[union-attr]
    return len(set(cells)) == len(cells)


@dataclass(frozen=True)
class Cubes:
    """A puzzle's cubes (empty: nothing to split, propagation settles it) and the unit clauses the
    lookahead found on the way (a candidate whose placement propagation refutes)."""

    cubes: tuple[Cube, ...]
    units: tuple[Clause, ...] = ()


def make_cubes(puzzle: Puzzle, want: int, cand: np.ndarray | None = None) -> Cubes:
    """Cubes the puzzle's search into at least `want` cubes when its open cells allow (see the module
    docstring); `cand` (from `root_candidates`) saves propagating the root again."""
    from solvers.exact.propagation import root_candidates  # compiled: loaded where puzzles are solved

    box = puzzle.box
    n = box.n
    cand = root_candidates(box, puzzle.givens) if cand is None else cand
    if cand is None:
        return Cubes(())
    counts = np.bitwise_count(cand).astype(np.int64)
    open_cells = np.flatnonzero(counts > 1)
    nearest = open_cells[np.argsort(counts[open_cells], kind="stable")][:LOOKAHEAD_CELLS]
    total = int(counts.sum())
    scored: list[tuple[int, int, int, list[int]]] = []
    units: list[Clause] = []
    for cell in nearest.tolist():
        live, removed = [], []
        for value in range(1, n + 1):
            if not (int(cand[cell]) >> (value - 1)) & 1:
                continue
            givens = puzzle.givens.copy()
            givens[cell] = value
            after = root_candidates(box, givens)
            if after is None:
                units.append((-term(cell, value, n),))
            else:
                live.append(value)
                removed.append(total - int(np.bitwise_count(after).sum()))
        if len(live) >= 2:
            scored.append((-min(removed), len(live), cell, list(zip(removed, live, strict=True))))
    scored.sort()
    chosen: list[list[tuple[int, int, int]]] = []  # per cell: (removed, value, cell) of its live values
    count = 1
    for _, k, cell, live in scored:
        if count >= want or len(chosen) == MAX_CUBE_CELLS or count * k > MAX_CUBES:
            break
        chosen.append([(r, v, cell) for r, v in live])
        count *= k
    if not chosen:
        return Cubes((), tuple(units))
    # least constraining first: the cube whose placements remove fewest candidates is likelier to hold a
    # solution (frisch: the solution's value ranked first in 20-26 of 40 cells of two or three values)
    ranked = sorted(itertools.product(*chosen), key=lambda c: sum(r for r, _, _ in c))
    cubes = tuple(tuple(term(cell, v, n) for _, v, cell in c) for c in ranked)
    return Cubes(cubes, tuple(units))
