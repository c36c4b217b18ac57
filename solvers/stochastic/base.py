"""The stochastic-solver contract: a run advanced in bounded slices, registered in `solvers.registry`.

Why slices: the portfolio interleaves solvers inside one process, so each solver is a compiled kernel that
spends at most a given amount of work (or stops at the deadline or the stop flag) and returns, its whole state
held in numpy arrays. Work counts one unit per move plus a share of the grid size for whole-grid operations (a
recount, a fresh random grid, a copy), so a unit costs about the same time in every solver and at every size;
slices counted in work, not time, make interleaved races replay exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
from pydantic import BaseModel, ConfigDict

from solvers import registry
from solvers.kernel.bits import CHECK_EVERY, GO_ON, interrupted
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import BUDGET, EXHAUSTED, SOLVED, Outcome
from solvers.model.cost import grid_cost
from solvers.model.geometry import geometry
from solvers.model.puzzle import Puzzle
from solvers.model.result import SolveResult
from solvers.model.status import Status
from solvers.model.verify import is_solution
from solvers.registry import Kind, KindView
from solvers.stochastic import state

# Common int64 state slots every kernel maintains (solver slots follow).
I_ITER = 0  # iterations done
I_COST = 1  # cost of the current grid (or population best)
I_BEST = 2  # best cost ever reached
I_BEST_NS = 3  # monotonic ns when the best was reached
I_RESTARTS = 4  # the solver's own restarts (reheats, hive restarts)
I_WORK = 5  # work units done: 1 per move, more for whole-grid operations (see WORK_NS)
I_COMMON = 6
WORK_NS = 150  # measured 90-210 ns per work unit (9x9 to 25x25, all three solvers, loaded box)


@nb.njit(cache=True, nogil=True, inline="always")
def slice_status(it: int, istate: np.ndarray, end: int, stop: np.ndarray, deadline_ns: int) -> int:
    """GO_ON while a slice may make move `it` (counted from 0), else BUDGET (its work is spent), STOPPED or
    TIMEOUT (the flag and the clock are read every CHECK_EVERY + 1 moves: a read costs more than a move)."""
    if istate[I_WORK] >= end:
        return BUDGET
    if (it & CHECK_EVERY) == 0:
        return interrupted(stop, deadline_ns)
    return GO_ON


@nb.njit(cache=True, nogil=True, inline="always")
def note_best(istate: np.ndarray, cost: int, grid: np.ndarray, best_grid: np.ndarray) -> bool:
    """Keep `grid` as the run's best when its cost beats it; True when the best is a solution (cost 0)."""
    if cost < istate[I_BEST]:
        istate[I_BEST] = cost
        istate[I_BEST_NS] = monotonic_ns()
        best_grid[:] = grid
    return istate[I_BEST] == 0


class Params(BaseModel):
    """Base of every solver's parameters: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    propagate: bool = True  # fix the values forced by singles before searching


class StochasticRun:
    """One seeded run of a stochastic solver on one puzzle, advanced slice by slice: `kernel(args, work,
    deadline_ns, stop)` runs one slice on the arrays of the tuple `args` (set by the solver's run) and returns
    an outcome code (`solvers.kernel.outcome`)."""

    kernel: Callable[..., int]
    args: tuple[Any, ...] = ()

    def __init__(self, puzzle: Puzzle, istate_size: int, gen: np.random.Generator) -> None:
        self.puzzle = puzzle
        geo = geometry(puzzle.box)
        self.units, self.cell_units = geo.units, geo.cell_units
        self.givens = puzzle.givens.astype(np.uint8)
        self.rng = state.new_rng(gen)  # the run's own stream, drawn first from `gen`
        self.istate = np.zeros(istate_size, dtype=np.int64)
        self.best_grid = np.zeros(puzzle.box.cells, dtype=np.uint8)
        self.stop = np.zeros(1, dtype=np.int64)
        self.used_ns = 0  # time spent inside this run's slices
        self.time_to_best_ns = 0  # of used_ns, when the best cost was reached
        self.status = Outcome.BUDGET  # nothing decided yet: the run may go on

    def _counted(self, grid: np.ndarray) -> int:
        """Start from `grid`: its unit counts (`counts`), its cost (current and best, SOLVED at 0), the
        start-up's work (fill and count); return the cost."""
        n = self.puzzle.box.n
        self.counts = np.zeros((3 * n, n + 1), dtype=np.int32)
        cost = state.recount(grid, self.givens, self.units, self.counts, state.GIVEN_WEIGHT)
        self.istate[[I_COST, I_BEST]] = cost
        self.istate[I_WORK] = 1 + self.puzzle.box.cells
        self.best_grid[:] = grid
        if cost == 0:
            self.status = Outcome.SOLVED
        return cost

    def step(self, work: int, deadline_ns: int = 0, stop: np.ndarray | None = None) -> Outcome:
        """Advance by about `work` units (less on success, deadline or stop; one move may overshoot); return
        the outcome: BUDGET, SOLVED, TIMEOUT, STOPPED or EXHAUSTED."""
        if self.status in (SOLVED, EXHAUSTED):
            return self.status
        before = int(self.istate[I_BEST])
        t0 = monotonic_ns()
        self.status = Outcome(
            self.kernel(self.args, int(work), int(deadline_ns), self.stop if stop is None else stop)
        )
        t1 = monotonic_ns()
        if int(self.istate[I_BEST]) < before:
            self.time_to_best_ns = self.used_ns + max(0, min(int(self.istate[I_BEST_NS]), t1) - t0)
        self.used_ns += t1 - t0
        return self.status

    best_cost = property(lambda self: int(self.istate[I_BEST]), doc="The lowest cost reached (0: solved).")
    iterations = property(lambda self: int(self.istate[I_ITER]), doc="The iterations spent so far.")
    work = property(lambda self: int(self.istate[I_WORK]), doc="The work units spent so far.")
    restarts = property(lambda self: int(self.istate[I_RESTARTS]), doc="The solver's own restarts so far.")

    def counters(self) -> dict[str, Any]:
        """Return the counters the collector reports for this run."""
        return {
            "time_ms": self.used_ns / 1e6,
            "restarts": self.restarts,
            "iterations": self.iterations,
            "work": self.work,
            "best_cost": self.best_cost,
            "time_to_best_ms": self.time_to_best_ns / 1e6,
        }


@dataclass(frozen=True)
class StochasticSolver:
    """A registered stochastic solver: its parameter model and how to start a run."""

    name: str
    params: type[Params]
    start: Callable[[Puzzle, np.random.Generator, Any], StochasticRun]
    summary: str = ""
    slice_work: int = 20_000  # work units of one slice: about 3 ms (see WORK_NS)
    # the work a fresh run's start-up is counted as, known before it starts (None: negligible)
    start_work: Callable[[Puzzle, Any], int] | None = None

    def make_params(self, overrides: dict[str, Any] | None = None) -> Params:
        """Validate parameter overrides (unknown names raise a pydantic error)."""
        return self.params(**(overrides or {}))

    def solve(
        self,
        puzzle: Puzzle,
        *,
        time_limit: float | None = 10.0,
        seed: int = 0,
        params: dict[str, Any] | Params | None = None,
        max_work: int = 0,
    ) -> SolveResult:
        """Run this solver alone until it solves, the time limit passes or `max_work` units are spent; return
        `solved` (only if the verifier accepts it) or `approximate` with the best grid's true cost."""
        p = params if isinstance(params, Params) else self.make_params(params)
        t0 = time.perf_counter()
        deadline = 0 if time_limit is None else monotonic_ns() + max(1, int(time_limit * 1e9))
        run = self.start(puzzle, np.random.default_rng(np.random.SeedSequence(seed)), p)
        status = run.status
        while status == BUDGET:
            todo = self.slice_work if max_work <= 0 else min(self.slice_work, max_work - run.work)
            if todo <= 0:
                break
            status = run.step(todo, deadline)
        elapsed, grid, cost = time.perf_counter() - t0, run.best_grid, grid_cost(puzzle, run.best_grid)
        return SolveResult(
            Status.SOLVED if cost == 0 and is_solution(puzzle, grid) else Status.APPROXIMATE,
            puzzle=puzzle.render(),
            solution=puzzle.render(grid),
            cost=cost,
            solver=self.name,
            elapsed=elapsed,
            nodes=run.iterations,
            restarts=run.restarts,
            counters={self.name: run.counters()},
        )


STOCHASTIC_SOLVERS: KindView[StochasticSolver] = KindView(Kind.STOCHASTIC)  # those of `solvers.registry`


def register(solver: StochasticSolver) -> StochasticSolver:
    """Add a stochastic solver to the registry (`solvers.registry`) under its name."""
    registry.register(solver.name, Kind.STOCHASTIC, solver, solver.summary)
    return solver
