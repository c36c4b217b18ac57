"""`sat`: a clause-learning SAT solver (CaDiCaL 1.9.5, through python-sat) raced as a member.

Why: on the hardest large grids a search that forgets every failure cannot catch up with one that
learns from each (frisch 25x25: the propagation kernel with restarts solved 11 of 18 in 60 s,
CaDiCaL all 18). The encoding is `solvers.sat.encoding`; UNSAT is a proof of no solution. Each mode
(`SAT_MODES`) is one member name; which mode races at which size is learned (`solvers.shares`).
Steps of a few hundred conflicts keep CaDiCaL's restart, rephase and inprocessing schedules from
firing, so the race's searches are CDCL without restarts (docs/decisions.md). With `Exchange.sharing`
at `SHARING_SIDES` a search runs `share/`'s CaDiCaL (`share_backend`) and hands its short learnt
clauses to the exchange as terms (a cube's search adds the cube's negation, so each is implied by the
puzzle); without `share/` the process says once that it shares none.
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
from solvers.race.cubes import MAX_CLAUSE_TERMS, Clause, cell_value, make_cubes, negation, term, valid_clause
from solvers.race.exchange import Exchange
from solvers.race.members import IDLE, NO_SOLUTION, OUT_OF_TIME, PROGRESS, CompleteMember
from solvers.registry import Kind
from solvers.sat.encoding import PAIRWISE_UP_TO, Cnf, decode, encode, estimate

log = logging.getLogger(__name__)
BACKEND = "cadical195"
SAME_CADICAL = "1.9.5"  # python-sat's `cadical195`: `share/` built from its source is the same search
LEARNT_MAX_LITERALS = 8  # learnt clauses a search shares: at most this many literals (docs/decisions.md)
LEARNT_BUFFER = 1 << 16  # literals of learnt clauses one search buffers between steps
# variable instantiation strengthens clauses beyond what the formula implies: off where clauses are exported
SHARING_OPTIONS = {"instantiate": 0}
# sides that share learnt clauses: at 25x25 it pays (frisch, 1-4 helpers); not at 49x49 or 64x64, where
# nearly every short learnt clause holds an at-most-one counter's auxiliary, which cell/value terms cannot
# carry (q64 on 2 workers: 0 exported; docs/decisions.md, docs/pipeline.md)
SHARING_SIDES = frozenset({25})
SLICES_PER_STEP = 4  # race step: about 12 ms of conflicts
CLAUSES_PER_SLICE = 2_000  # model of building and loading the CNF: ~1.5 us a clause, 3 ms a slice
LOAD_PER_STEP = 32_768  # clauses handed to python-sat's solver a step (~35 ms): a 64x64 CNF in ~35 steps
FLAT_PER_STEP = 131_072  # clauses handed to `share/`'s solver a step, one array (~30 ms): 64x64 in 9 steps
# above this many clauses elimination and probing are off: their first rounds on a 64x64 CNF are single
# steps of seconds in which the race cannot stop (docs/decisions.md)
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


_STABLE = {"elimreleff": 10, "stabilizeonly": 1, "subsumereleff": 60}  # CaDiCaL's --sat configuration
_PLAIN = {"stabilizeonly": 1, "restart": 0, "rephase": 0, "probe": 0, "elim": 0, "subsume": 0, "vivify": 0}
_MODES = (  # conflicts a slice at 25x25 measured: `sat` 78 (13 at 49x49), `sat-focused` 83, `sat-plain` 60
    SatMode("sat", _STABLE, "CaDiCaL, stable mode (its --sat configuration)"),
    SatMode(
        "sat-rows",
        _STABLE,
        "CaDiCaL, stable mode, literals numbered cell by cell, row by row",
        fewest_first=False,
    ),
    SatMode(
        "sat-plain",
        _PLAIN,
        "CaDiCaL, stable mode without restarts, rephasing or inprocessing, literals cell by cell",
        fewest_first=False,
        conflicts_25=60.0,
        falloff=1.6,
    ),
    SatMode(
        "sat-plain-fewest",
        _PLAIN,
        "`sat-plain` with the literals of the cells with fewest candidates first",
        conflicts_25=60.0,
        falloff=1.6,
    ),
    # deciding false first: a search far from the others' (all start from true), so it answers where they are
    # slow; conflicts a slice copied from the true-first twin, not calibrated (they only split a race's time)
    SatMode(
        "sat-plain-false",
        {**_PLAIN, "phase": 0},
        "`sat-plain` deciding each variable false first (CaDiCaL's initial phase 0)",
        fewest_first=False,
        conflicts_25=60.0,
        falloff=1.6,
    ),
    SatMode(
        "sat-rows-false",
        {**_STABLE, "phase": 0},
        "`sat-rows` deciding each variable false first (CaDiCaL's initial phase 0)",
        fewest_first=False,
    ),
    SatMode(
        "sat-focused",
        {"elim": 0, "probe": 0, "vivify": 0, "subsume": 0},
        "CaDiCaL, default focused/stable alternation, no inprocessing",
        conflicts_25=83.0,
        falloff=1.7,
    ),
)
SAT_MODES: dict[str, SatMode] = {m.name: m for m in _MODES}


@functools.cache
def _compiled() -> ModuleType | ImportError:
    """`share/`'s compiled CaDiCaL, or why it cannot be imported."""
    try:
        import cadical_share  # type: ignore[import-not-found]
    except ImportError as exc:
        return exc
    return cadical_share


@functools.cache
def share_backend() -> ModuleType | None:
    """The compiled CaDiCaL that exports learnt clauses (`share/`, the `share` extra), or None: then a race's
    searches import clauses but share none, said once per process."""
    backend = _compiled()
    if isinstance(backend, ImportError):
        log.warning("this process cannot share learnt clauses (%s: pip install ./share): cubes only", backend)
        return None
    return backend


def load_backend() -> ModuleType | None:
    """`share/`'s CaDiCaL for a search that exports nothing, when it is python-sat's own version (the
    modes were learned on it): it loads a CNF in blocks (`add_flat`), 4 times faster at 64x64; else None."""
    backend = _compiled()
    if isinstance(backend, ImportError) or backend.CADICAL_VERSION != SAME_CADICAL:
        return None
    return backend


class _Search:
    """One CNF a SAT member searches (its puzzle's, or one cube's), loaded a block of clauses a step so a
    stop never waits for a load; `exports`: run by `share_backend`'s CaDiCaL, its learnt clauses read; a
    search that exports nothing runs there too when it is the same CaDiCaL (`load_backend`: loads faster)."""

    def __init__(
        self, cnf: Cnf, options: dict[str, int], cube: int | None = None, share: bool = False
    ) -> None:
        self.cnf = cnf
        self.cube = cube
        backend = share_backend() if share else load_backend()
        self.exports = share and backend is not None
        if backend is None:
            self.solver: Any = Solver(name=BACKEND)
            self.loading: Iterator[Any] | None = cnf.blocks(LOAD_PER_STEP)
        else:
            width = LEARNT_MAX_LITERALS if self.exports else 0
            self.solver = backend.Search(width, LEARNT_BUFFER, max(1, cnf.variables))
            self.loading = cnf.flat_blocks(FLAT_PER_STEP)
        self.flat = backend is not None
        self.solver.configure({**options, **SHARING_OPTIONS} if self.exports else options)
        self.var_of: np.ndarray | None = None
        self.read = 0  # shared clauses imported so far
        self.stats: dict[str, int] = {}

    def load(self, block: Any) -> None:
        """Hand the solver a block of `loading`."""
        if self.flat:
            self.solver.add_flat(block)
        else:
            self.solver.append_formula(block)

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
        terms = (term(int(self.cnf.cell[abs(lit) - 1]), int(self.cnf.value[abs(lit) - 1]), n) for lit in lits)
        return tuple(t if lit > 0 else -t for t, lit in zip(terms, lits, strict=True))

    def close(self) -> None:
        """Free the solver's memory."""
        if self.solver is not None:
            self.solver.delete()
        self.solver, self.loading = None, None


class SatMember(CompleteMember):
    """The SAT solver raced in steps of conflicts; complete, so UNSAT ends the race.

    The CNF is built in the member's first step, and its estimated cost charged up front (`vtime`): a grid
    the exact member settles in its first slices never pays for a CNF of millions of clauses. `seed` != 0
    numbers the literals in another order. With `exchange` the member imports the clauses other processes
    shared; a helper's member also searches cubes (`solvers.race.cubes`), each given as cells and encoded
    afresh (not under assumptions: far slower, docs/decisions.md), a refuted one handed back as a clause;
    with none free it searches the whole puzzle and asks again every `RETAKE_STEPS` steps."""

    def __init__(
        self,
        puzzle: Puzzle,
        *,
        mode: SatMode = _MODES[0],
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
        self.cubes: list[Clause] | None = None  # the race's split, its cubes (a helper's member)
        self.retake_at = 0  # the step from which a member searching the whole puzzle asks for a cube again
        self.imported = 0
        self.exported = 0
        self.refuted = 0

    def step(self, deadline_ns: int, stop: np.ndarray) -> Outcome:
        """Build, load, or run the solver a step of conflicts; report a verified grid or a proof of none."""
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
                search.load(block)
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
        grid = decode(search.solver.get_model() or [], search.cnf) if answer is True else None
        if answer is not None:
            self._done(search)
        if grid is not None:
            return self.accept(grid)
        if answer is False and search.cube is not None:  # the cube is refuted, not the puzzle: hand it back
            self._hand_back(search.cube)
        elif answer is False:
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
        mode = self.mode
        return encode(
            puzzle,
            pairwise_up_to=mode.pairwise_up_to,
            fewest_first=mode.fewest_first,
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
        n, top = self.puzzle.box.n, len(search.cnf.cell)
        unless = negation(self.cubes[search.cube]) if search.cube is not None and self.cubes else ()
        out = [
            search.terms(lits, n) + unless
            for lits in search.solver.learnt()
            if lits and all(abs(lit) <= top for lit in lits) and len(lits) + len(unless) <= MAX_CLAUSE_TERMS
        ]
        if not out:
            return
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
        out = self.search_counters(stats.get("decisions", 0), stats.get("decisions", 0))
        out.update(conflicts=stats.get("conflicts", 0), clauses=self.clauses)
        if self.exchange is not None:
            out.update(imported=self.imported, exported=self.exported, cubes_refuted=self.refuted)
            if self.cubes is not None:
                out["cubes"] = len(self.cubes)
        return out


for _mode in SAT_MODES.values():  # one registered solver per mode; its factory makes members in that mode
    registry.register(_mode.name, Kind.COMPLETE, partial(SatMember, mode=_mode), _mode.summary)
