"""Race members: how one solver of a portfolio advances, slice by slice, with restarts.

Why a module of its own: the scheduler needs only the uniform `Member` interface (one slice; a
verified solution, a proof of none, the best grid so far, counters), while restart policies differ by
kind. `ExactMember` alternates a complete stream (fixed order, node budget doubling: never given up, at
most twice one unlimited run) with randomised Luby restarts (the heavy-tail remedy); a kernel that
resumes a search (`KernelSolver.carries`) makes the complete stream that one search, each call its
next restart. `StochasticMember` restarts its solver with child seeds on a Luby schedule, keeping the
best grid. `SatMember` lives in `solvers.sat.member`. Progress is counted in slices of work, never
wall time, so a race replays exactly.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from solvers.exact.base import KernelSolver
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import DONE, EXHAUSTED, LIMIT, SOLVED, TIMEOUT, Outcome
from solvers.model.puzzle import Puzzle
from solvers.model.status import MemberState
from solvers.model.verify import is_solution
from solvers.stochastic.base import Params, StochasticRun, StochasticSolver

# Member outcomes of one slice: kernel outcomes (`solvers.kernel.outcome`) under the names a race reads.
PROGRESS = Outcome.BUDGET  # worked; nothing decided
FOUND = Outcome.SOLVED  # a grid the verifier accepts: `member.solution`
NO_SOLUTION = Outcome.DONE  # an exhaustive search found none: the puzzle is unsolvable
IDLE = Outcome.EXHAUSTED  # nothing left to do (exhausted or failed)
OUT_OF_TIME = Outcome.TIMEOUT  # the deadline passed inside the slice


def luby(i: int) -> int:
    """Return the i-th term (i >= 1) of the Luby sequence 1,1,2,1,1,2,4,1,1,2,1,1,2,4,8,..."""
    while i != (1 << i.bit_length()) - 1:  # i is no 2^k - 1: its term is the one at i - (2^(k-1) - 1)
        i -= (1 << (i.bit_length() - 1)) - 1
    return 1 << (i.bit_length() - 1)


# Measured CPU cost per node of the propagation kernel (`bench/portfolio.py calibrate`), ns:
# 9x9 band kernel; 16x16 acs; 25x25 frisch; 36x36 to 64x64 grids with holes (bench/hard_sets.py).
NS_PER_NODE: dict[int, float] = {16: 6_500.0, 25: 14_000.0, 36: 20_000.0, 49: 31_000.0, 64: 76_000.0}


def exact_ns_per_node(n: int) -> float:
    """Model of the propagation kernel's CPU ns per node for grid side n: ~500 at 9x9, 1.6 n^3 below 16x16,
    then `NS_PER_NODE` interpolated in log-log; it sets time shares only, never correctness."""
    sides = sorted(NS_PER_NODE)
    if n < sides[0]:
        return 500.0 if n == 9 else 1.6 * n**3
    if n >= sides[-1]:
        return NS_PER_NODE[sides[-1]] * (n / sides[-1]) ** 2
    hi = next(s for s in sides if s >= n)
    lo = max(s for s in sides if s <= n)
    if hi == lo:
        return NS_PER_NODE[n]
    t = math.log(n / lo) / math.log(hi / lo)
    return math.exp((1 - t) * math.log(NS_PER_NODE[lo]) + t * math.log(NS_PER_NODE[hi]))


SLICE_S = 0.003  # CPU seconds a slice of work stands for (each member's unit is measured against it)


def exact_nodes_per_slice(n: int) -> int:
    """Nodes of the exact kernel in about 3 ms for grid side n (at least 16)."""
    return max(16, int(SLICE_S * 1e9 / exact_ns_per_node(n)))


class Member(ABC):
    """One solver of a race, advanced one slice at a time by the scheduler."""

    def __init__(self, name: str, weight: float) -> None:
        self.name = name
        self.weight = weight
        self.vtime = 0.0  # slices of work done: the scheduler's deterministic clock
        self.used_ns = 0
        self.restarts = 0
        self.solution: np.ndarray | None = None
        self.best_cost: int | None = None  # the lowest cost of a full grid it holds (0: solved)
        self.best_grid: np.ndarray | None = None  # that grid
        self.failed: str | None = None  # set when the member returned a rejected grid

    @abstractmethod
    def step(self, deadline_ns: int, stop: np.ndarray) -> Outcome:
        """Do one slice of work; return PROGRESS, FOUND, NO_SOLUTION, IDLE or OUT_OF_TIME."""

    @abstractmethod
    def counters(self) -> dict[str, Any]:
        """Return {time_ms, work (slices), restarts, nodes|iterations, best_cost} for the collector."""


class CompleteMember(Member):
    """A member whose search is complete: it holds a grid only once solved (verified) and
    can prove there is none; the exact kernels and the SAT solver."""

    def __init__(self, name: str, weight: float, puzzle: Puzzle) -> None:
        super().__init__(name, weight)
        self.puzzle = puzzle
        self.status: str = MemberState.RUNNING

    def accept(self, grid: np.ndarray) -> Outcome:
        """Take a grid the solver found if the verifier agrees: FOUND, else IDLE (the member failed)."""
        if not is_solution(self.puzzle, grid):
            self.failed = f"{self.name} returned a grid the verifier rejects"
            return IDLE
        self.solution = self.best_grid = grid
        self.best_cost = 0
        self.status = MemberState.SOLVED
        return FOUND

    def search_counters(self, nodes: int, guesses: int) -> dict[str, Any]:
        """Return time, solver calls beyond the first, nodes, guesses, best cost and the verdict."""
        return {
            "time_ms": self.used_ns / 1e6,
            "work": round(self.vtime, 3),
            "restarts": max(0, self.restarts - 1),
            "nodes": nodes,
            "guesses": guesses,
            "best_cost": self.best_cost,
            "status": self.failed or self.status,
        }


def child_seed(seeds: np.random.SeedSequence) -> int:
    """A non-zero kernel seed (63 bits) drawn from a child seed sequence."""
    return int(seeds.generate_state(1, np.uint64)[0] & 0x3FFF_FFFF_FFFF_FFFF) | 1


class ExactMember(CompleteMember):
    """An exact solver raced as a complete doubling stream plus randomised Luby restarts."""

    def __init__(
        self,
        solver: KernelSolver,
        puzzle: Puzzle,
        seeds: np.random.SeedSequence,
        *,
        weight: float = 1.0,
        first_budget: int = 0,
        restart_base: int = 0,
        randomised: bool = True,
        complete_share: float = 0.75,
        searches: int = 1,
        name: str | None = None,
        variant: int = 0,
    ) -> None:
        super().__init__(name or solver.name, weight, puzzle)
        # the complete stream's order: the puzzle's own (seed 0), or, for a helper racing the
        # puzzle in another process (`variant` > 0), a seeded one: another complete search
        self.first_seed = child_seed(np.random.SeedSequence([variant, 1])) if variant else 0
        self.complete_share = min(1.0, max(0.0, complete_share)) if randomised else 1.0
        self.solver = solver
        self.seeds = seeds
        self.unit = exact_nodes_per_slice(puzzle.box.n)
        self.complete_budget = max(1, first_budget or 4 * self.unit)  # next complete call
        self.restart_base = max(1, restart_base or self.unit)
        # A resuming kernel's complete stream is one search per seed (its restarts are the randomised
        # stream: it takes all nodes); `searches` > 1 runs that many, a run at a time to the one with
        # the fewest nodes (which search solves a hard puzzle soon varies much with the seed).
        self.carries: list[np.ndarray] = []
        self.search_seeds: list[int] = [self.first_seed]
        self.search_nodes: list[int] = []
        if solver.carries(puzzle.box):
            self.complete_share = 1.0
            self.search_seeds += [child_seed(s) for s in seeds.spawn(max(1, searches) - 1)]
            self.carries = [solver.new_carry(puzzle.box) for _ in self.search_seeds]
            self.search_nodes = [0] * len(self.carries)
        # the race's only member: its complete search is one call, as on the plain exact path
        self.alone = False
        self.complete_nodes = 0
        self.random_nodes = 0
        self.nodes = 0
        self.guesses = 0
        self.luby_index = 0
        self.calls: list[tuple[str, int, int]] = []  # (stream, node budget, nodes used) per call

    def skip_complete(self, nodes: int) -> None:
        """Record a complete-stream call already made elsewhere (the batch fast path)."""
        self.complete_nodes += nodes
        self.nodes += nodes
        self.vtime += nodes / self.unit
        self.complete_budget = max(self.complete_budget, 2 * nodes)

    def step(self, deadline_ns: int, stop: np.ndarray) -> Outcome:
        """Make one kernel call: the complete stream's next doubling, or a random restart."""
        if self.failed or self.status != MemberState.RUNNING:
            return IDLE
        share = self.complete_share  # of the member's nodes, for the complete run
        complete = share >= 1.0 or self.complete_nodes * (1.0 - share) <= self.random_nodes * share
        carry, search = None, 0
        if complete and self.carries:
            search = self.search_nodes.index(min(self.search_nodes))
            budget, seed, carry = 0, self.search_seeds[search], self.carries[search]
        elif complete:
            budget, seed = 0 if self.alone else self.complete_budget, self.first_seed
        else:
            self.luby_index += 1
            budget = self.restart_base * luby(self.luby_index)
            seed = child_seed(self.seeds.spawn(1)[0])
        t0 = monotonic_ns()
        out = self.solver.solve_batch(
            self.puzzle.givens[None, :],
            self.puzzle.box,
            limit=1,
            keep=1,
            max_nodes=budget,
            deadline_ns=deadline_ns,
            seed=seed,
            stop=stop,
            carry=carry,
        )
        self.used_ns += monotonic_ns() - t0
        nodes = int(out.nodes[0])
        self.nodes += nodes
        self.guesses += int(out.guesses[0])
        self.vtime += nodes / self.unit
        self.calls.append(("complete" if complete else "random", budget, nodes))
        if complete:
            self.complete_nodes += nodes
            self.complete_budget *= 2
            if carry is not None:
                self.search_nodes[search] += nodes
        else:
            self.random_nodes += nodes
        self.restarts += 1
        code = int(out.status[0])
        if int(out.counts[0]) > 0:
            return self.accept(out.solutions[0, 0].copy())
        if code in (DONE, LIMIT):
            self.status = MemberState.UNSOLVABLE
            return NO_SOLUTION
        if code == TIMEOUT:
            return OUT_OF_TIME
        return PROGRESS

    def counters(self) -> dict[str, Any]:
        """Return time, kernel calls beyond the first, nodes, guesses and the verdict."""
        return self.search_counters(self.nodes, self.guesses)


class StochasticMember(Member):
    """A stochastic solver raced in slices, restarted with child seeds on a Luby schedule."""

    def __init__(
        self,
        solver: StochasticSolver,
        puzzle: Puzzle,
        seeds: np.random.SeedSequence,
        params: Params,
        *,
        weight: float = 1.0,
        restart_slices: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(name or solver.name, weight)
        self.solver = solver
        self.puzzle = puzzle
        self.seeds = seeds
        self.params = params
        self.unit = solver.slice_work
        # slices before the first Luby restart: 64 at 9x9, more with more cells (a 25x25 anneal settles later)
        self.restart_slices = restart_slices or max(16, round(64 * (puzzle.box.n / 9) ** 2))
        self.luby_index = 1
        self.run: StochasticRun | None = None
        self.run_budget = 0
        self.iterations = 0  # over finished runs
        self.inner_restarts = 0  # over finished runs
        self.time_to_best_ns = 0
        self.run_base_ns = 0  # member time used before the current run started
        self.counted = 0  # work of the current run already added to vtime
        self.start_ns = 0  # how long the last run took to build (checked against the deadline)
        # the first run's start-up, charged before it runs: a costly start waits for its turn
        self.prepaid = solver.start_work(puzzle, params) if solver.start_work is not None else 0
        self.vtime = self.prepaid / self.unit

    def _start(self) -> StochasticRun:
        """Start a fresh run on the next child seed, with its Luby-scaled budget."""
        gen = np.random.default_rng(self.seeds.spawn(1)[0])
        t0 = monotonic_ns()
        run = self.solver.start(self.puzzle, gen, self.params)
        self.start_ns = monotonic_ns() - t0
        self.used_ns += self.start_ns
        self.run_base_ns = self.used_ns
        self.counted, self.prepaid = self.prepaid, 0  # the prepaid start-up is not counted twice
        self.run_budget = self.unit * self.restart_slices * luby(self.luby_index)
        self.luby_index += 1
        self._note(run)
        return run

    def _note(self, run: StochasticRun) -> None:
        """Keep the run's best grid if it beats the member's best."""
        if self.best_cost is None or run.best_cost < self.best_cost:
            self.best_cost = run.best_cost
            self.best_grid = run.best_grid.copy()
            self.time_to_best_ns = self.run_base_ns + run.time_to_best_ns

    def step(self, deadline_ns: int, stop: np.ndarray) -> Outcome:
        """Run one slice of the current run (starting or restarting it as its budget says)."""
        if self.failed:
            return IDLE
        if self.run is None or self.run.work >= self.run_budget or self.run.status == EXHAUSTED:
            if deadline_ns and monotonic_ns() + self.start_ns >= deadline_ns:
                self.vtime += 1.0  # no time left to build a fresh run (it cannot be cut short)
                return PROGRESS
            if self.run is not None:
                self.iterations += self.run.iterations
                self.inner_restarts += self.run.restarts
                self.restarts += 1
            self.run = self._start()
        run = self.run
        todo = min(self.unit, max(1, self.run_budget - run.work))
        t0 = run.used_ns
        status = run.step(todo, deadline_ns, stop)
        self.used_ns += run.used_ns - t0
        done = run.work - self.counted  # includes the run's start-up work on its first slice
        self.counted = run.work
        self.vtime += max(done, 1 if status != TIMEOUT else 0) / self.unit
        self._note(run)
        if status == SOLVED or self.best_cost == 0:
            grid = self.best_grid
            if grid is None or not is_solution(self.puzzle, grid):
                self.failed = f"{self.name} reached cost 0 on a grid the verifier rejects"
                return IDLE
            self.solution = grid
            return FOUND
        if status == TIMEOUT:
            return OUT_OF_TIME
        return PROGRESS

    def counters(self) -> dict[str, Any]:
        """Return time, restarts (Luby restarts plus the solver's own), iterations, best cost."""
        its = self.iterations + (self.run.iterations if self.run else 0)
        inner = self.inner_restarts + (self.run.restarts if self.run else 0)
        return {
            "time_ms": self.used_ns / 1e6,
            "work": round(self.vtime, 3),
            "restarts": self.restarts + inner,
            "iterations": its,
            "best_cost": self.best_cost,
            "time_to_best_ms": self.time_to_best_ns / 1e6,
            "status": self.failed or (MemberState.RUNNING if self.solution is None else MemberState.SOLVED),
        }
