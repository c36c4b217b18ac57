"""`sat`: a clause-learning SAT solver (CaDiCaL 1.9.5, through python-sat) raced as a member.

Why: on the hardest large grids a search that forgets every failure cannot catch up with
one that learns from each. On gecode's 18 frisch 25x25 puzzles the propagation kernel with
restarts solved 11 in 60 s, CaDiCaL all 18; on random 36x36 to 64x64 grids with 55-80% of
the cells blanked ("quasigroup with holes") it solves what the kernel leaves.

Encoding: `solvers.sat_encoding` (the root-propagated candidates only; exactly one literal
per cell and per value of each unit). UNSAT is a proof that the puzzle has no solution.

Modes (`SAT_MODES`, one member name each): `sat` runs CaDiCaL in its stable mode with the
options of its `--sat` configuration (target phases, reluctant doubling restarts, lighter
elimination and subsumption), literals of the cells with fewest candidates first: on frisch
it needed 31 s for all 18 where the focused mode with inprocessing off (the member until
issue 16) needed 96 s. `sat-rows` is the same mode with the literals numbered cell by cell,
another search that wins on other grids; the learned shares (`solvers.shares`) pick one per
grid size. `sat-plain` is the stable mode with no restarts, no rephasing and no inprocessing
(probing, elimination, subsumption, vivification), literals cell by cell: a conflict costs it
0.23 ms on a 75%-blanked 64x64 grid where `sat-rows` spends 0.6 ms, and it solved all 10 of
those evidence grids (PAR-2 47.7 s) where `sat-rows` left one (213.9); on 49x49 at 60% it
solved 5 of 10 in 30 s (`sat-rows` 9), so the shares give it 25x25 and 64x64 only.
`sat-plain-fewest` is `sat-plain` with the fewest-candidates-first order: a slower median on
frisch (1.35 s against 0.93) but a shorter tail (PAR-2 34.6 against 53.6), so at 25x25 it
joins the race late (`solvers.shares.LATE_START`).
`sat-focused`, that focused mode, is not in the race (in training it solved 21 of
38 grids, `sat` 35); it stays a solver name for portfolios and the bench.

The solver advances a few slices' worth of conflicts per race step, keeping its learnt
clauses and phases across calls. Each call re-arms CaDiCaL's conflict-counted schedules
(restart, rephase, reduce, inprocessing) from that call's start, so in steps of a few dozen
to a few hundred conflicts none of them fires and a step boundary does not change the search
(q64 #0: 25,261 conflicts to a solution in steps of 15, 30, 60, 120 or 250); in steps of 2,000
they fire, and the same grid was not solved in 272k conflicts. The race's searches are
therefore CDCL without restarts or rephasing, the regime the modes were measured in; a
helper races another mode instead (`solvers.shares.helper_shares`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from pysat.solvers import Solver

from solvers import registry
from solvers.clock import monotonic_ns
from solvers.exact.propagation import root_candidates
from solvers.outcome import Outcome
from solvers.puzzle import Puzzle
from solvers.registry import Kind
from solvers.restarts import IDLE, NO_SOLUTION, OUT_OF_TIME, PROGRESS, CompleteMember
from solvers.sat_encoding import PAIRWISE_UP_TO, Cnf, decode, encode, estimate

BACKEND = "cadical195"
SLICES_PER_STEP = 4  # race step: about 12 ms of conflicts
CLAUSES_PER_SLICE = 2_000  # model of building and loading the CNF: ~1.5 us a clause, 3 ms a slice
LOAD_PER_STEP = 32_768  # clauses handed to the solver per step (~40 ms): a 64x64 CNF loads in ~35 steps
# Above this many clauses CaDiCaL's variable elimination and probing are off: on a 64x64 CNF (~1M clauses)
# their first rounds are single steps of 5.2 and 1.4 s, in which the race can neither stop nor let the
# process's other threads run (an escalation's lease lapsed and its helpers quit); without them `sat-rows`
# solved all 6 64x64 training grids in at most 4.8 s of search, with them 5 (docs/decisions.md).
INPROCESSING_MAX_CLAUSES = 500_000
HEAVY_INPROCESSING = {"elim": 0, "probe": 0}


@dataclass(frozen=True)
class SatMode:
    """A configuration of the SAT member: CaDiCaL options, named in portfolios."""

    name: str
    options: dict[str, int] = field(default_factory=dict)
    summary: str = ""
    pairwise_up_to: int = PAIRWISE_UP_TO  # at-most-one: pairwise up to this many literals, else a counter
    fewest_first: bool = True  # literal ids: fewest-candidates cells first (else cell-major, row by row)
    conflicts_25: float = 78.0  # conflicts in a 3 ms slice at 25x25 (measured) ...
    falloff: float = 2.5  # ... falling as (25/n)^falloff with the grid side

    def conflicts_per_slice(self, n: int) -> int:
        """Model of this mode's conflicts in a 3 ms slice for grid side n (`bench/portfolio.py
        calibrate` measures it); it sets time shares only."""
        return max(4, round(self.conflicts_25 * (25 / n) ** self.falloff))


STABLE = SatMode(
    "sat",
    {"elimreleff": 10, "stabilizeonly": 1, "subsumereleff": 60},
    "CaDiCaL, stable mode (its --sat configuration)",
    conflicts_25=78.0,  # measured: 78 at 25x25 (frisch), 29 at 36x36, 13 at 49x49, 5-27 at 64x64
    falloff=2.5,
)
FOCUSED = SatMode(
    "sat-focused",
    {"elim": 0, "probe": 0, "vivify": 0, "subsume": 0},
    "CaDiCaL, default focused/stable alternation, no inprocessing",
    conflicts_25=83.0,  # measured: 83 at 25x25, 69 at 36x36, 22 at 49x49, 16-29 at 64x64
    falloff=1.7,
)
ROWS = SatMode(
    "sat-rows",
    STABLE.options,
    "CaDiCaL, stable mode, literals numbered cell by cell, row by row",
    fewest_first=False,
    conflicts_25=78.0,
    falloff=2.5,
)
PLAIN = SatMode(
    "sat-plain",
    {"stabilizeonly": 1, "restart": 0, "rephase": 0, "probe": 0, "elim": 0, "subsume": 0, "vivify": 0},
    "CaDiCaL, stable mode without restarts, rephasing or inprocessing, literals cell by cell",
    fewest_first=False,
    conflicts_25=60.0,  # measured: ~13 at 64x64 (q64: 4-5 conflicts a ms, `sat-rows` 1.7)
    falloff=1.6,
)
PLAIN_FEWEST = SatMode(
    "sat-plain-fewest",
    PLAIN.options,
    "`sat-plain` with the literals of the cells with fewest candidates first",
    conflicts_25=60.0,
    falloff=1.6,
)
SAT_MODES: dict[str, SatMode] = {m.name: m for m in (STABLE, ROWS, PLAIN, PLAIN_FEWEST, FOCUSED)}
SAT_SOLVER = STABLE.name  # the default SAT member's name


class SatMember(CompleteMember):
    """The SAT solver raced in steps of conflicts; complete, so UNSAT ends the race.

    The encoding is built in the member's first step and loaded over the next ones (a block of
    clauses a step, so a stop never waits for a 1M-clause load), not when the race starts;
    its estimated cost is charged to the member up front (`vtime`), so a member with a large
    CNF starts only once the others have done that much work, in proportion to the weights:
    a grid so open that the exact member settles it in its first slices never pays for a
    CNF of millions of clauses. `seed` != 0 numbers the literals in another
    order (another search of the same CNF: a second worker racing the same puzzle)."""

    def __init__(
        self,
        puzzle: Puzzle,
        *,
        mode: SatMode = STABLE,
        weight: float = 1.0,
        name: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(name or mode.name, weight, puzzle)
        self.mode = mode
        self.seed = seed
        self.slice_conflicts = mode.conflicts_per_slice(puzzle.box.n)
        self.stats: dict[str, int] = {}
        self.cand = root_candidates(puzzle.box, puzzle.givens)
        self.clauses = estimate(puzzle, self.cand, mode.pairwise_up_to)
        self.vtime = 2 * self.clauses / CLAUSES_PER_SLICE  # building and loading, charged up front
        self.cnf: Cnf | None = None
        self.solver: Solver | None = None
        self.loading: Iterator[list[list[int]]] | None = None  # clause blocks still to hand over

    def step(self, deadline_ns: int, stop: np.ndarray) -> Outcome:
        """Build, load, or run the solver for one step of conflicts; report a verified grid
        or a proof of none."""
        if self.failed or self.status != "running":
            return IDLE
        t0 = monotonic_ns()
        if self.cnf is None:  # first step: the encoding
            self.cnf = encode(
                self.puzzle,
                pairwise_up_to=self.mode.pairwise_up_to,
                fewest_first=self.mode.fewest_first,
                order_seed=self.seed,
                cand=self.cand,
            )
            self.used_ns += monotonic_ns() - t0
            if self.cnf is None:  # root propagation refutes the puzzle
                self.status = "unsolvable"
                return NO_SOLUTION
            self.clauses = self.cnf.clauses
            self.solver = Solver(name=BACKEND)
            self.solver.configure(self.options(self.cnf.clauses))  # before any clause: its configuring state
            self.loading = self.cnf.blocks(LOAD_PER_STEP)
            return PROGRESS
        if self.loading is not None:  # next steps: the solver takes the clauses, a block per step
            block = next(self.loading, None)
            if block is None:
                self.loading = None
            else:
                self.solver.append_formula(block)
                self.used_ns += monotonic_ns() - t0
                return PROGRESS
        assert self.solver is not None  # made with the encoding
        self.solver.conf_budget(SLICES_PER_STEP * self.slice_conflicts)
        answer = self.solver.solve_limited()
        self.used_ns += monotonic_ns() - t0
        before = self.stats.get("conflicts", 0)
        self.stats = {k: int(v) for k, v in self.solver.accum_stats().items()}
        self.vtime += max(1, self.stats.get("conflicts", 0) - before) / self.slice_conflicts
        self.restarts += 1
        if answer is True:
            grid = decode(self.solver.get_model() or [], self.cnf)
            self._close()
            return self.accept(grid)
        if answer is False:
            self._close()
            self.status = "unsolvable"
            return NO_SOLUTION
        if deadline_ns and monotonic_ns() >= deadline_ns:
            return OUT_OF_TIME
        return PROGRESS

    def options(self, clauses: int) -> dict[str, int]:
        """The mode's CaDiCaL options for a CNF of so many clauses (no long inprocessing on huge ones)."""
        if clauses > INPROCESSING_MAX_CLAUSES:
            return {**self.mode.options, **HEAVY_INPROCESSING}
        return dict(self.mode.options)

    def _close(self) -> None:
        """Free the solver's memory (its answer is taken); the member is done."""
        if self.solver is not None:
            self.solver.delete()
        self.solver, self.cnf, self.loading = None, None, None

    def counters(self) -> dict[str, Any]:
        """Return time, solver calls beyond the first, decisions (as nodes and guesses), conflicts."""
        decisions = self.stats.get("decisions", 0)
        return {
            **self.search_counters(decisions, decisions),
            "conflicts": self.stats.get("conflicts", 0),
            "clauses": self.clauses,
        }


for _mode in SAT_MODES.values():  # one registered solver per mode; its factory makes members in that mode
    registry.register(_mode.name, Kind.COMPLETE, partial(SatMember, mode=_mode), _mode.summary)
