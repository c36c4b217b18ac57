"""`sat`: a clause-learning SAT solver (CaDiCaL 1.9.5, through python-sat) raced as a member.

Why: on the hardest large grids a search that forgets every failure cannot catch up with
one that learns from each. On gecode's 18 frisch 25x25 puzzles the propagation kernel with
restarts solved 11 in 60 s, CaDiCaL all 18; on random 36x36 to 64x64 grids with 55-80% of
the cells blanked ("quasigroup with holes") it solves what the kernel leaves.

Encoding: `solvers.sat.encoding` (the root-propagated candidates only; exactly one literal
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

Clause sharing (`Exchange.sharing`, at `SHARING_SIDES`): python-sat's CaDiCaL hands out no learnt
clause, so a sharing search runs `share/`'s compiled CaDiCaL (`share_backend`: Debian's 1.5.3 with a
Learner) behind the same calls; after each step the clauses it learnt of at most
`LEARNT_MAX_LITERALS` literals, over cell/value variables only, go to the exchange as terms (a
cube's search adds the cube's negation: its clauses follow from the puzzle with the cube's cells
given, so only that disjunction is implied by the puzzle). Without `share/` the search runs as
before and the process says once that it shares none.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
from pysat.solvers import Solver

from solvers import registry
from solvers.exact.propagation import root_candidates
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import Outcome
from solvers.model.puzzle import Puzzle
from solvers.model.status import MemberState
from solvers.race.cubes import (
    MAX_CLAUSE_TERMS,
    Clause,
    Cube,
    cell_value,
    make_cubes,
    negation,
    term,
    valid_clause,
)
from solvers.race.exchange import Exchange
from solvers.race.members import IDLE, NO_SOLUTION, OUT_OF_TIME, PROGRESS, CompleteMember
from solvers.registry import Kind
from solvers.sat.encoding import PAIRWISE_UP_TO, Cnf, decode, encode, estimate

log = logging.getLogger(__name__)
BACKEND = "cadical195"
LEARNT_MAX_LITERALS = 4  # learnt clauses a search shares: at most this many literals (docs/decisions.md)
LEARNT_BUFFER = 1 << 16  # literals of learnt clauses one search buffers between steps
# A sharing search's clauses must follow from the puzzle. CaDiCaL's inprocessing either keeps that (learning,
# resolution, probing, vivification, equivalences) or drops clauses (blocked, covered, conditioned: a weaker
# formula implies less), except variable instantiation, which strengthens clauses beyond what the formula
# implies (satisfiability only): off wherever clauses are exported (its default, made sure of).
SHARING_OPTIONS = {"instantiate": 0}
# Grid sides whose searches share learnt clauses: `share/`'s CaDiCaL is 1.5.3, and the race's modes were
# chosen on python-sat's 1.9.5. Measured (CPU, member steps, load 4-8): frisch (25x25) with `sat-plain`
# near it; q49 #0 with `sat-rows` (the 49x49 owner's mode) unsolved in 30 s, 1.9.5: 10.5 s (decisions.md).
SHARING_SIDES = frozenset({25})
SLICES_PER_STEP = 4  # race step: about 12 ms of conflicts
CLAUSES_PER_SLICE = 2_000  # model of building and loading the CNF: ~1.5 us a clause, 3 ms a slice
LOAD_PER_STEP = 32_768  # clauses handed to the solver per step (~40 ms): a 64x64 CNF loads in ~35 steps
# Above this many clauses CaDiCaL's variable elimination and probing are off: on a 64x64 CNF (~1M clauses)
# their first rounds are single steps of 5.2 and 1.4 s, in which the race can neither stop nor let the
# process's other threads run (an escalation's lease lapsed and its helpers quit); without them `sat-rows`
# solved all 6 64x64 training grids in at most 4.8 s of search, with them 5 (docs/decisions.md).
INPROCESSING_MAX_CLAUSES = 500_000
HEAVY_INPROCESSING = {"elim": 0, "probe": 0}
RETAKE_STEPS = 64  # with no cube free, a helper's member asks again after this many steps of its own search


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


@functools.cache
def share_backend() -> ModuleType | None:
    """The compiled CaDiCaL that exports learnt clauses (`share/`, the `share` extra), or None: then a race's
    searches import clauses but share none, said once per process."""
    try:
        import cadical_share  # type: ignore[import-not-found]
    except ImportError as exc:
        log.warning("this process cannot share learnt clauses (%s: pip install ./share): cubes only", exc)
        return None
    return cadical_share


class _Search:
    """One CNF a SAT member searches: its puzzle's, or one cube's (the puzzle with the cube's cells given).

    Built in one step, loaded a block of clauses a step, then searched in steps of conflicts;
    `var_of` maps a term (`solvers.race.cubes`) to this CNF's variable (0: decided at the root).
    `exports`: searched by `share_backend`'s CaDiCaL, whose learnt clauses are read after each step."""

    def __init__(
        self, cnf: Cnf, options: dict[str, int], cube: int | None = None, share: bool = False
    ) -> None:
        self.cnf = cnf
        self.cube = cube
        backend = share_backend() if share else None
        self.exports = backend is not None
        self.solver: Any = (
            Solver(name=BACKEND)
            if backend is None
            else backend.Search(LEARNT_MAX_LITERALS, LEARNT_BUFFER, max(1, cnf.variables))
        )
        # before any clause: its configuring state
        self.solver.configure(options if backend is None else {**options, **SHARING_OPTIONS})
        self.loading: Iterator[list[list[int]]] | None = cnf.blocks(LOAD_PER_STEP)
        self.var_of: np.ndarray | None = None
        self.read = 0  # shared clauses imported so far
        self.stats: dict[str, int] = {}

    def lits(self, clause: Clause, n: int) -> list[int] | None:
        """`clause` in this CNF's numbering, its literals decided at the root left out (None: a literal
        is true at the root, the clause holds already; []: every one is false)."""
        if self.var_of is None:
            self.var_of = np.zeros(n**3 + 1, dtype=np.int32)
            cells = self.cnf.cell.astype(np.int64)
            self.var_of[cells * n + self.cnf.value] = np.arange(1, len(cells) + 1)
        out = []
        for t in clause:
            cell, value = cell_value(t, n)
            fixed = int(self.cnf.fixed[cell])
            var = int(self.var_of[abs(t)])
            if fixed or not var:  # decided at the root: the cell holds `fixed` (0: the value was removed)
                if (fixed == value) == (t > 0):
                    return None
                continue
            out.append(var if t > 0 else -var)
        return out

    def terms(self, lits: list[int], n: int) -> Clause:
        """Literals of this CNF (cell/value variables only) as terms."""
        out = []
        for lit in lits:
            k = abs(lit) - 1
            t = term(int(self.cnf.cell[k]), int(self.cnf.value[k]), n)
            out.append(t if lit > 0 else -t)
        return tuple(out)

    def close(self) -> None:
        """Free the solver's memory."""
        if self.solver is not None:
            self.solver.delete()
        self.solver, self.loading = None, None


class SatMember(CompleteMember):
    """The SAT solver raced in steps of conflicts; complete, so UNSAT ends the race.

    The encoding is built in the member's first step and loaded over the next ones (a block of
    clauses a step, so a stop never waits for a 1M-clause load), not when the race starts;
    its estimated cost is charged to the member up front (`vtime`), so a member with a large
    CNF starts only once the others have done that much work, in proportion to the weights:
    a grid so open that the exact member settles it in its first slices never pays for a
    CNF of millions of clauses. `seed` != 0 numbers the literals in another
    order (another search of the same CNF: a second worker racing the same puzzle).

    `exchange` (a puzzle raced in several processes, `solvers.race.exchange`): between steps the member
    imports the clauses the others shared, in its own numbering. A helper's member also searches
    cubes (parts of the search, `solvers.race.cubes`; the first member to find the race unsplit splits
    it): each cube is the puzzle with the cube's cells given, encoded afresh (root propagation
    prunes it first), its own CNF searched in the member's mode; a refuted cube goes back as a
    clause and the member takes the next; with none free it searches the whole puzzle and asks
    again every `RETAKE_STEPS` steps. Why not one solver under assumptions: on a 49x49 evidence
    grid (q49 #0, `sat-rows` 8.5 s whole) no cube of 8 was settled in 30 s under assumptions,
    each was solved in 2-27 s given (docs/decisions.md)."""

    def __init__(
        self,
        puzzle: Puzzle,
        *,
        mode: SatMode = STABLE,
        weight: float = 1.0,
        name: str | None = None,
        seed: int = 0,
        exchange: Exchange | None = None,
    ) -> None:
        super().__init__(name or mode.name, weight, puzzle)
        self.mode = mode
        self.seed = seed
        self.exchange = exchange
        self.slice_conflicts = mode.conflicts_per_slice(puzzle.box.n)
        self.closed: dict[str, int] = {}  # the counters of the CNFs searched and freed
        self.cand = root_candidates(puzzle.box, puzzle.givens)
        self.clauses = estimate(puzzle, self.cand, mode.pairwise_up_to)
        self.vtime = 2 * self.clauses / CLAUSES_PER_SLICE  # building and loading, charged up front
        self.whole: _Search | None = None  # the puzzle's own CNF
        self.search: _Search | None = None  # the CNF searched now: `whole` or a cube's
        self.cubes: list[Cube] | None = None  # the race's split (a helper's member)
        self.retake_at = 0  # the step from which a member searching the whole puzzle asks for a cube again
        self.imported = 0
        self.exported = 0
        self.refuted = 0

    def step(self, deadline_ns: int, stop: np.ndarray) -> Outcome:
        """Build, load, or run the solver for one step of conflicts; report a verified grid
        or a proof of none."""
        if self.failed or self.status != MemberState.RUNNING:
            return IDLE
        t0 = monotonic_ns()
        try:
            return self._step(deadline_ns)
        finally:
            self.used_ns += monotonic_ns() - t0

    def _step(self, deadline_ns: int) -> Outcome:
        if self.search is None:  # a step builds the next CNF
            if not self._next_search():  # root propagation refutes the puzzle itself
                self.status = MemberState.UNSOLVABLE
                return NO_SOLUTION
            return PROGRESS
        search = self.search
        assert search is not None and search.solver is not None
        if search.loading is not None:  # the solver takes the clauses, a block per step
            block = next(search.loading, None)
            if block is not None:
                search.solver.append_formula(block)
                return PROGRESS
            search.loading = None
        if self.exchange is not None:
            self._trade(search)
            if self.search is not search:  # it took a cube: searched from the next step on
                return PROGRESS
        search.solver.conf_budget(SLICES_PER_STEP * self.slice_conflicts)
        answer = search.solver.solve_limited()
        if search.exports and answer is None:
            self._export(search)
        before = search.stats.get("conflicts", 0)
        search.stats = {k: int(v) for k, v in search.solver.accum_stats().items()}
        self.vtime += max(1, search.stats.get("conflicts", 0) - before) / self.slice_conflicts
        self.restarts += 1
        if answer is True:
            grid = decode(search.solver.get_model() or [], search.cnf)
            self._done(search)
            return self.accept(grid)
        if answer is False and search.cube is not None:  # the cube is refuted, not the puzzle: hand it back
            self._done(search)
            self._hand_back(search.cube)
        elif answer is False:
            self._done(search)
            self.status = MemberState.UNSOLVABLE
            return NO_SOLUTION
        if deadline_ns and monotonic_ns() >= deadline_ns:
            return OUT_OF_TIME
        return PROGRESS

    def _next_search(self) -> bool:
        """Start the next CNF: a free cube's (a helper), else the whole puzzle's; False when root
        propagation refutes the whole puzzle."""
        if self.exchange is not None and self.exchange.cubes is not None and self._take_cube():
            return True
        if self.whole is None:
            cnf = self._encode(self.puzzle, self.cand)
            if cnf is None:
                return False
            self.clauses = cnf.clauses
            self.whole = _Search(cnf, self.options(cnf.clauses), share=self._sharing)
        self.search = self.whole
        return True

    def _encode(self, puzzle: Puzzle, cand: np.ndarray | None) -> Cnf | None:
        return encode(
            puzzle,
            pairwise_up_to=self.mode.pairwise_up_to,
            fewest_first=self.mode.fewest_first,
            order_seed=self.seed,
            cand=cand,
        )

    def _take_cube(self) -> bool:
        """Take a free cube of the race's split (splitting it first if nobody has) and start its CNF;
        a cube root propagation refutes is handed back at once. False: no cube is free."""
        source = self.exchange.cubes if self.exchange is not None else None
        if source is None:
            return False
        n = self.puzzle.box.n
        if self.cubes is None:
            self.cubes = source.published()
        if self.cubes is None:
            self.cubes = source.publish(make_cubes(self.puzzle, self.exchange.want, self.cand))  # type: ignore[union-attr]
        while (index := source.take()) is not None and 0 <= index < len(self.cubes):
            givens = self.puzzle.givens.copy()
            for t in self.cubes[index]:
                cell, value = cell_value(t, n)
                givens[cell] = value if givens[cell] in (0, value) else 0
            cube = Puzzle(self.puzzle.box, givens, self.puzzle.notation)
            cand = root_candidates(cube.box, cube.givens)
            cnf = self._encode(cube, cand) if cand is not None else None
            if cnf is None or any(cube.givens[cell_value(t, n)[0]] == 0 for t in self.cubes[index]):
                self._hand_back(index)  # no grid holds these cells' values
                continue
            self.search = _Search(cnf, self.options(cnf.clauses), index, share=self._sharing)
            self.vtime += 2 * cnf.clauses / CLAUSES_PER_SLICE
            self.exchange.holding = index  # type: ignore[union-attr]
            return True
        self.retake_at = self.restarts + RETAKE_STEPS
        return False

    def _trade(self, search: _Search) -> None:
        """Import the clauses shared since the last step; a member searching the whole puzzle asks for
        a cube again every `RETAKE_STEPS` steps."""
        assert self.exchange is not None and search.solver is not None
        n = self.puzzle.box.n
        new = self.exchange.since(search.read)
        search.read += len(new)
        for clause in new:
            if not valid_clause(clause, n):  # not a clause of a grid of this side
                continue
            lits = search.lits(clause, n)
            if lits is not None:
                search.solver.add_clause(lits)  # []: the formula is unsatisfiable, as the clause says
                self.imported += 1
        if search.cube is None and self.exchange.cubes is not None and self.restarts >= self.retake_at:
            self._take_cube()

    @property
    def _sharing(self) -> bool:
        """This member's searches export learnt clauses: its race shares them, at a side where that pays."""
        return self.exchange is not None and self.exchange.sharing and self.puzzle.box.n in SHARING_SIDES

    def _export(self, search: _Search) -> None:
        """Queue the clauses `search` learnt in its last step, in terms, for the other processes: only those
        over cell/value literals (no counter auxiliary), each implied by the puzzle: a cube's search adds
        the cube's negation (its clauses follow from the puzzle with the cube's cells given)."""
        assert self.exchange is not None
        learnt = search.solver.learnt()
        if not learnt:
            return
        n, top = self.puzzle.box.n, len(search.cnf.cell)
        unless = negation(self.cubes[search.cube]) if search.cube is not None and self.cubes else ()
        out = []
        for lits in learnt:
            if lits and all(abs(lit) <= top for lit in lits) and len(lits) + len(unless) <= MAX_CLAUSE_TERMS:
                out.append(search.terms(lits, n) + unless)
        self.exported += len(out)
        self.exchange.share(out)

    def _hand_back(self, index: int) -> None:
        """Cube `index` has no solution: say so (its clause goes to every search) and count it."""
        assert self.exchange is not None and self.cubes is not None
        self.refuted += 1
        self.exchange.holding = None
        if self.exchange.cubes is not None:
            self.exchange.cubes.refute(index, negation(self.cubes[index]))

    def _done(self, search: _Search) -> None:
        """Free a CNF's solver (its answer is taken), keeping its counters in the member's."""
        for key, value in search.stats.items():
            self.closed[key] = self.closed.get(key, 0) + value
        search.stats = {}
        search.close()
        if search is self.whole:
            self.whole = None
        self.search = None

    def options(self, clauses: int) -> dict[str, int]:
        """The mode's CaDiCaL options for a CNF of so many clauses (no long inprocessing on huge ones)."""
        return {**self.mode.options, **(HEAVY_INPROCESSING if clauses > INPROCESSING_MAX_CLAUSES else {})}

    @property
    def stats(self) -> dict[str, int]:
        """The solvers' counters, summed over every CNF searched."""
        stats = dict(self.closed)
        for search in {id(s): s for s in (self.whole, self.search) if s is not None}.values():
            for key, value in search.stats.items():
                stats[key] = stats.get(key, 0) + value
        return stats

    def counters(self) -> dict[str, Any]:
        """Return time, solver calls beyond the first, decisions (as nodes and guesses), conflicts."""
        stats = self.stats
        decisions = stats.get("decisions", 0)
        out = {
            **self.search_counters(decisions, decisions),
            "conflicts": stats.get("conflicts", 0),
            "clauses": self.clauses,
        }
        if self.exchange is not None:
            out["imported"] = self.imported
            out["exported"] = self.exported
            out["cubes_refuted"] = self.refuted
            if self.cubes is not None:
                out["cubes"] = len(self.cubes)
        return out


for _mode in SAT_MODES.values():  # one registered solver per mode; its factory makes members in that mode
    registry.register(_mode.name, Kind.COMPLETE, partial(SatMember, mode=_mode), _mode.summary)
