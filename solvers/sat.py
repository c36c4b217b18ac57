"""`sat`: a clause-learning SAT solver (CaDiCaL 1.9.5, through python-sat) raced as a member.

Why: on the hardest 25x25 grids (the 18 minimal puzzles of gecode's frisch set) the
propagation kernel with restarts solved 11 in 60 s, while clause learning solves all 18
(CaDiCaL on this encoding: 0.04-9.5 s; OR-Tools CP-SAT, one thread: 0.1-15 s). A search
that forgets every failure cannot catch up with one that learns from each. The kernel
stays the fast path and the prover of easy cases; this member runs beside it from 25x25.

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

from solvers.clock import monotonic_ns
from solvers.geometry import geometry
from solvers.puzzle import Puzzle
from solvers.restarts import FOUND, IDLE, NO_SOLUTION, OUT_OF_TIME, PROGRESS, Member
from solvers.verify import is_solution

SAT_SOLVER = "sat"  # the member's name in portfolios
BACKEND = "cadical195"
OPTIONS = {"elim": 0, "probe": 0, "vivify": 0, "subsume": 0}  # no inprocessing rounds (see above)
STEP_CONFLICTS = 150  # per race step: ~12 ms at 25x25, at most 29 ms measured (300: 47 ms)


def conflicts_per_slice(n: int) -> int:
    """Model of CaDiCaL's conflicts in a 3 ms slice for grid side n: ~45 at 25x25 (15k
    conflicts/s measured on frisch), scaled by cells x values. It sets time shares only."""
    return max(8, round(45 * (25 / n) ** 3))


@dataclass(frozen=True)
class Cnf:
    """A puzzle's clauses, and each cell's literals (variable cell*N + value + 1, values 0-based)."""

    clauses: list[list[int]]
    cells: list[list[int]]


def encode(puzzle: Puzzle) -> Cnf | None:
    """Return the puzzle's CNF, or None when a cell or a unit's value already has no place
    (no solution)."""
    n = puzzle.box.n
    units = geometry(puzzle.box).units
    givens = puzzle.givens.tolist()
    used = [0] * (n * n)  # bit v: value v+1 is a given of a peer (or the cell's own)
    for unit in units.tolist():
        mask = 0
        for c in unit:
            if givens[c]:
                mask |= 1 << (givens[c] - 1)
        for c in unit:
            used[c] |= mask
    clauses: list[list[int]] = []
    cells: list[list[int]] = []
    places: dict[int, list[int]] = {}
    for cell in range(n * n):
        g = givens[cell]
        values = [g - 1] if g else [v for v in range(n) if not (used[cell] >> v) & 1]
        if not values:
            return None
        lits = [cell * n + v + 1 for v in values]
        cells.append(lits)
        clauses.append(lits)
        clauses.extend([-a, -b] for a, b in combinations(lits, 2))
        for v in values:
            places.setdefault(v, []).append(cell)
    for unit in units.tolist():
        members = set(unit)
        for v in range(n):
            lits = [c * n + v + 1 for c in places.get(v, ()) if c in members]
            if not lits:
                return None
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


class SatMember(Member):
    """The SAT solver raced in steps of `STEP_CONFLICTS` conflicts; complete, so UNSAT ends the race."""

    def __init__(self, puzzle: Puzzle, *, weight: float = 1.0, name: str = SAT_SOLVER) -> None:
        super().__init__(name, weight)
        self.puzzle = puzzle
        self.slice_conflicts = conflicts_per_slice(puzzle.box.n)
        self.status = "running"
        self.stats: dict[str, int] = {}
        t0 = monotonic_ns()
        self.cnf = encode(puzzle)
        self.solver: Solver | None = None
        if self.cnf is not None:
            self.solver = Solver(name=BACKEND, bootstrap_with=self.cnf.clauses)
            self.solver.configure(OPTIONS)
        self.used_ns += monotonic_ns() - t0

    def step(self, deadline_ns: int, stop: np.ndarray) -> str:
        """Run the solver for one step of conflicts; report a verified grid or a proof of none."""
        if self.failed or self.status != "running":
            return IDLE
        if self.solver is None:  # the encoder found a cell or a unit's value with no place
            self.status = "unsolvable"
            return NO_SOLUTION
        t0 = monotonic_ns()
        self.solver.conf_budget(STEP_CONFLICTS)
        answer = self.solver.solve_limited()
        self.used_ns += monotonic_ns() - t0
        before = self.stats.get("conflicts", 0)
        self.stats = {k: int(v) for k, v in self.solver.accum_stats().items()}
        self.vtime += max(1, self.stats.get("conflicts", 0) - before) / self.slice_conflicts
        self.restarts += 1
        if answer is True:
            grid = decode(self.solver.get_model() or [], self.cnf, self.puzzle.box.n)  # type: ignore[arg-type]
            self._close()
            if not is_solution(self.puzzle, grid):
                self.failed = f"{self.name} returned a grid the verifier rejects"
                return IDLE
            self.solution = grid
            self.status = "solved"
            return FOUND
        if answer is False:
            self._close()
            self.status = "unsolvable"
            return NO_SOLUTION
        if deadline_ns and monotonic_ns() >= deadline_ns:
            return OUT_OF_TIME
        return PROGRESS

    def _close(self) -> None:
        """Free the solver's memory (its answer is taken)."""
        if self.solver is not None:
            self.solver.delete()
            self.solver = None

    @property
    def best_cost(self) -> int | None:
        """Return 0 once solved; an unfinished SAT search holds no full grid."""
        return 0 if self.solution is not None else None

    @property
    def best_grid(self) -> np.ndarray | None:
        """Return the solution once found."""
        return self.solution

    def counters(self) -> dict[str, Any]:
        """Return time, solver calls beyond the first, decisions (as nodes and guesses), conflicts."""
        return {
            "time_ms": self.used_ns / 1e6,
            "restarts": max(0, self.restarts - 1),
            "nodes": self.stats.get("decisions", 0),
            "guesses": self.stats.get("decisions", 0),
            "conflicts": self.stats.get("conflicts", 0),
            "best_cost": self.best_cost,
            "status": self.failed or self.status,
        }
