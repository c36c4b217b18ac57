"""`sat`: a clause-learning SAT solver (CaDiCaL 1.9.5, through python-sat) raced as a member.

Why: on the hardest 25x25 grids (the 18 minimal puzzles of gecode's frisch set) the
propagation kernel with restarts solved 11 in 60 s, while clause learning solves all 18
(CaDiCaL on this encoding: 0.04-9.5 s; OR-Tools CP-SAT, one thread: 0.1-15 s). A search
that forgets every failure cannot catch up with one that learns from each. The kernel
stays the fast path and the prover of easy cases; this member runs beside it at 25x25.

Encoding (one Boolean per cell and candidate value, values used by a given peer left
out): every cell holds at least and at most one value, every unit holds each value in at
least and at most one place (pairwise at-most-one). UNSAT is therefore a proof that the
puzzle has no solution. The solver advances `STEP_CONFLICTS` conflicts per race step
(CaDiCaL keeps its learnt clauses, phases and restarts across calls), with inprocessing
off: elimination, probing, vivification and subsumption rounds made single calls take
75-160 ms, longer than a stop may wait (50 ms), for about the same conflicts to a solution.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from pysat.solvers import Solver

from solvers import registry
from solvers.clock import monotonic_ns
from solvers.geometry import geometry
from solvers.outcome import Outcome
from solvers.puzzle import Puzzle
from solvers.registry import Kind
from solvers.restarts import IDLE, NO_SOLUTION, OUT_OF_TIME, PROGRESS, CompleteMember

SAT_SOLVER = "sat"  # the member's name in portfolios
BACKEND = "cadical195"
OPTIONS = {"elim": 0, "probe": 0, "vivify": 0, "subsume": 0}  # no inprocessing rounds (see above)
STEP_CONFLICTS = 150  # per race step: ~12 ms at 25x25, at most 29 ms measured (300: 47 ms)
MAX_CLAUSES = 60_000  # frisch 25x25: 26-30k; an acs 25x25 grid with few givens: 750k (1 s to build)
CLAUSES_PER_SLICE = 2_000  # model of encoding and loading: ~1.5 us a clause, 3 ms a slice


def conflicts_per_slice(n: int) -> int:
    """Model of CaDiCaL's conflicts in a 3 ms slice for grid side n: ~45 at 25x25 (15k
    conflicts/s measured on frisch), scaled by cells x values. It sets time shares only."""
    return max(8, round(45 * (25 / n) ** 3))


@dataclass(frozen=True)
class Cnf:
    """A puzzle's clauses, and each cell's literals (variable cell*N + value + 1, values 0-based)."""

    clauses: list[list[int]]
    cells: list[list[int]]


class TooLarge(Exception):
    """The encoding would exceed the clause limit given to `encode`."""


def encode(puzzle: Puzzle, max_clauses: int | None = None) -> Cnf | None:
    """Return the puzzle's CNF, or None when a cell or a unit's value already has no place
    (no solution); raise TooLarge when it would hold more than `max_clauses` clauses."""
    n = puzzle.box.n
    geo = geometry(puzzle.box)
    givens = puzzle.givens.tolist()
    used = [0] * (n * n)  # bit v: value v+1 is a given of a peer (or the cell's own)
    for unit in geo.units.tolist():
        mask = 0
        for c in unit:
            if givens[c]:
                mask |= 1 << (givens[c] - 1)
        for c in unit:
            used[c] |= mask
    cells: list[list[int]] = []
    places = [[[] for _ in range(n)] for _ in range(3 * n)]  # unit -> value -> literals
    for cell, units in enumerate(geo.cell_units.tolist()):
        g = givens[cell]
        values = [g - 1] if g else [v for v in range(n) if not (used[cell] >> v) & 1]
        if not values:
            return None
        cells.append([cell * n + v + 1 for v in values])
        for v, lit in zip(values, cells[-1], strict=True):
            for u in units:
                places[u][v].append(lit)
    groups = cells + [lits for unit in places for lits in unit]  # exactly one literal of each
    if any(not lits for lits in groups):
        return None
    size = sum(1 + len(lits) * (len(lits) - 1) // 2 for lits in groups)
    if max_clauses is not None and size > max_clauses:
        raise TooLarge(f"{size} clauses")
    clauses: list[list[int]] = []
    for lits in groups:
        clauses.append(lits)
        clauses.extend([-a, -b] for a, b in combinations(lits, 2))
    return Cnf(clauses, cells)


def decode(model: list[int], cnf: Cnf, n: int) -> np.ndarray:
    """Return the grid (uint8[N*N]) of a model: for each cell, the value of its true literal
    (variables left out of the encoding may come back true: they are not read)."""
    true = {lit for lit in model if lit > 0}
    grid = np.zeros(len(cnf.cells), dtype=np.uint8)
    for cell, lits in enumerate(cnf.cells):
        for lit in lits:
            if lit in true:
                grid[cell] = (lit - 1) % n + 1
                break
    return grid


class SatMember(CompleteMember):
    """The SAT solver raced in steps of `STEP_CONFLICTS` conflicts; complete, so UNSAT ends the race.

    The encoding is built in the member's first step (and loaded into the solver in its
    second), not when the race starts: most races end in the exact member's first steps.
    A grid so open that its encoding would exceed `max_clauses` is left to the others (the
    race passes `MAX_CLAUSES` when an exact member runs beside it, None when it runs alone)."""

    def __init__(
        self, puzzle: Puzzle, *, weight: float = 1.0, name: str = SAT_SOLVER, max_clauses: int | None = None
    ) -> None:
        super().__init__(name, weight, puzzle)
        self.max_clauses = max_clauses
        self.slice_conflicts = conflicts_per_slice(puzzle.box.n)
        self.stats: dict[str, int] = {}
        self.cnf: Cnf | None = None
        self.clauses = 0
        self.solver: Solver | None = None

    def step(self, deadline_ns: int, stop: np.ndarray) -> Outcome:
        """Build, load, or run the solver for one step of conflicts; report a verified grid
        or a proof of none."""
        if self.failed or self.status != "running":
            return IDLE
        t0 = monotonic_ns()
        if self.cnf is None:  # first step: the encoding
            try:
                self.cnf = encode(self.puzzle, self.max_clauses)
            except TooLarge as reason:
                self.used_ns += monotonic_ns() - t0
                self.status = f"left to the others ({reason})"
                return IDLE
            self.used_ns += monotonic_ns() - t0
            if self.cnf is None:  # a cell or a unit's value with no place
                self.status = "unsolvable"
                return NO_SOLUTION
            self.clauses = len(self.cnf.clauses)
            self.vtime += self.clauses / CLAUSES_PER_SLICE
            return PROGRESS
        if self.solver is None:  # second step: the solver takes the clauses
            self.solver = Solver(name=BACKEND, bootstrap_with=self.cnf.clauses)
            self.solver.configure(OPTIONS)
            self.used_ns += monotonic_ns() - t0
            self.vtime += self.clauses / CLAUSES_PER_SLICE
            return PROGRESS
        self.solver.conf_budget(STEP_CONFLICTS)
        answer = self.solver.solve_limited()
        self.used_ns += monotonic_ns() - t0
        before = self.stats.get("conflicts", 0)
        self.stats = {k: int(v) for k, v in self.solver.accum_stats().items()}
        self.vtime += max(1, self.stats.get("conflicts", 0) - before) / self.slice_conflicts
        self.restarts += 1
        if answer is True:
            grid = decode(self.solver.get_model() or [], self.cnf, self.puzzle.box.n)
            self._close()
            return self.accept(grid)
        if answer is False:
            self._close()
            self.status = "unsolvable"
            return NO_SOLUTION
        if deadline_ns and monotonic_ns() >= deadline_ns:
            return OUT_OF_TIME
        return PROGRESS

    def _close(self) -> None:
        """Free the solver's memory (its answer is taken); the member is done."""
        if self.solver is not None:
            self.solver.delete()
        self.solver, self.cnf = None, None

    def counters(self) -> dict[str, Any]:
        """Return time, solver calls beyond the first, decisions (as nodes and guesses), conflicts."""
        decisions = self.stats.get("decisions", 0)
        return {
            **self.search_counters(decisions, decisions),
            "conflicts": self.stats.get("conflicts", 0),
            "clauses": self.clauses,
        }


registry.register(SAT_SOLVER, Kind.COMPLETE, SatMember, "clause learning (CaDiCaL), raced at 25x25")
