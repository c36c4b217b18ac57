"""Portfolios: exact, SAT and stochastic solvers raced with restarts under a time limit, in one thread.

A portfolio is a named list of member configurations (data, below). `race` runs one puzzle through
one: the first exact member first gets a small node budget (the fast path: easy puzzles cost what
the plain exact solver costs), then the member whose next slice would end soonest in work per weight
goes next (weighted fair queueing). Weights come from the portfolio, or per grid size from the
learned shares (`solvers.shares`). Work is counted in nodes, conflicts or iterations, never wall
time, so a race replays exactly under its seed; nothing is spawned, so a race runs inside a Celery
prefork child. The first verified grid wins; an exhaustive search without one ends it `unsolvable`;
at the deadline or the `stop` flag it answers the lowest-cost grid any member holds (`approximate`),
or `timeout`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from solvers import registry
from solvers.exact import EXACT_SOLVERS
from solvers.exact.base import DEFAULT_EXACT, KernelSolver
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import Outcome
from solvers.model.cost import grid_cost
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Puzzle
from solvers.model.result import SolveResult
from solvers.model.status import DECIDED, ENDS, MemberState, Status
from solvers.model.verify import is_solution
from solvers.race.exchange import PROGRESS_S, Exchange
from solvers.race.members import (
    FOUND,
    IDLE,
    NO_SOLUTION,
    OUT_OF_TIME,
    SLICE_S,
    ExactMember,
    Member,
    StochasticMember,
    child_seed,
    exact_nodes_per_slice,
)
from solvers.registry import Kind
from solvers.sat import member as _sat  # noqa: F401 - registers the SAT modes
from solvers.shares import HelperMix, cube_shares, helper_shares, late_starts, learned_shares
from solvers.stochastic import STOCHASTIC_SOLVERS

STOCHASTIC_ONLY_LIMIT = 60.0  # seconds: a race without an exact member cannot end on its own
FAST_SLICES = 8  # fast-path node budget, in exact slices (about 25 ms of work)
ENDGAME = 0.1  # the last fraction of a time limit the stochastic members race alone (`PortfolioSpec.endgame`)
LARGE_SIDE = 25  # from 25x25 up the exact member may take a larger share (`MemberSpec.large_weight`)


class MemberSpec(BaseModel):
    """One solver of a portfolio: its registry name, its share of the time, and options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    solver: str
    weight: float = Field(default=1.0, gt=0)  # share of the work relative to the others
    large_weight: float | None = Field(default=None, gt=0)  # the share from LARGE_SIDE up (None: weight)
    params: dict[str, Any] = Field(default_factory=dict)  # stochastic solver parameters
    randomised: bool = True  # exact: add randomised restarts beside the complete run
    complete_share: float = Field(default=0.75, ge=0, le=1)  # exact: nodes for the complete run
    restart_base: int = Field(default=0, ge=0)  # exact: nodes; stochastic: slices (0 = default)
    searches: int = Field(default=1, ge=1, le=64)  # exact, resumable kernels: searches run side by side
    min_side: int = Field(default=0, ge=0)  # the member races grids of side min_side..max_side only
    max_side: int = Field(default=64, ge=1)

    @field_validator("solver")
    @classmethod
    def _registered(cls, name: str) -> str:
        """Refuse a name that is no registered solver (the error lists those that are)."""
        registry.find(name)
        return name

    @property
    def kind(self) -> Kind:
        """Return the solver's kind in `solvers.registry`: exact, complete or stochastic."""
        return registry.find(self.solver).kind

    def races(self, n: int) -> bool:
        """Whether this member takes part for grid side n."""
        return self.min_side <= n <= self.max_side


class PortfolioSpec(BaseModel):
    """A named list of members; `fast_nodes` is the fast-path node budget (0 = by grid size); `learned`: the
    shares of `solvers.shares` replace the weights where it has some; `endgame`: the last fraction of a time
    limit the stochastic members race alone, so a race ending unsolved answers a grid that had time to
    improve (with learned shares of 0.2% they often held none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    members: tuple[MemberSpec, ...] = Field(min_length=1)
    fast_nodes: int = Field(default=0, ge=0)
    learned: bool = False
    endgame: float = Field(default=ENDGAME, ge=0, lt=1)

    def mix(self, n: int, variant: int = 0, cubes: bool = False) -> HelperMix:
        """The shares for grid side n (None: the members' own weights), whether the complete members
        renumber their literals (a helper's, unless `solvers.shares` moves it to another mode or to cubes)
        and the owner's late starts."""
        if self.learned and variant > 0 and cubes and (mix := cube_shares(n)) is not None:
            return mix
        if self.learned and (helper := helper_shares(n, variant)) is not None:
            return helper
        if not self.learned:
            return HelperMix(None, variant > 0)
        return HelperMix(learned_shares(n), variant > 0, late_starts(n))

    def weights(self, n: int, variant: int = 0, cubes: bool = False) -> list[float]:
        """Return each member's weight for grid side n (0: it sits out this size), as helper
        `variant` races it (0: the owner), under the shares of `mix`."""
        shares = self.mix(n, variant, cubes).shares
        out = []
        for m in self.members:
            if not m.races(n):
                out.append(0.0)
            elif shares is not None:
                out.append(shares.get(m.solver, 0.0))
            else:
                out.append(m.large_weight if m.large_weight is not None and n >= LARGE_SIDE else m.weight)
        return out

    def fast_budget(self, n: int) -> int:
        """Return the fast path's node budget for grid side n."""
        return self.fast_nodes or FAST_SLICES * exact_nodes_per_slice(n)

    @property
    def exact_solver(self) -> KernelSolver | None:
        """Return the first exact member's solver (it runs the fast path), if any."""
        return next((EXACT_SOLVERS[m.solver] for m in self.members if m.kind is Kind.EXACT), None)


# the SAT modes the race holds from LARGE_SIDE beside `sat`: a mode not listed gets no share, learned or not
SAT_MEMBERS = ("sat-rows", "sat-plain", "sat-plain-fewest", "sat-plain-false", "sat-rows-false")


def _presets() -> dict[str, PortfolioSpec]:
    """The preset portfolios. In `race` the exact member weighs 3 (half of the work) below 25x25, where it
    alone proves anything; from 25x25 the learned shares rule (the weights there serve a copy with
    `learned` off); `sat-focused` is left out (docs/decisions.md)."""
    options: dict[str, dict[str, Any]] = {"evolution": {"params": {"propagate": True}}}
    stochastic = [(name, options.get(name, {})) for name in registry.names(Kind.STOCHASTIC)]
    large = {"weight": 57.0, "min_side": LARGE_SIDE}
    members: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "fast": [(DEFAULT_EXACT, {"randomised": False})],
        "race": [
            (DEFAULT_EXACT, {"weight": 3.0, "large_weight": 57.0}),
            ("sat", {"weight": 171.0, "min_side": LARGE_SIDE}),
            *((name, large) for name in SAT_MEMBERS),
            *stochastic,
        ],
        "exact": [(name, {}) for name in sorted(registry.names(Kind.EXACT), key=DEFAULT_EXACT.__ne__)],
        "stochastic": stochastic,
    }
    return {
        name: PortfolioSpec(
            name=name, members=tuple(MemberSpec(solver=s, **o) for s, o in listed), learned=name == "race"
        )
        for name, listed in members.items()
    }


PRESETS: dict[str, PortfolioSpec] = _presets()


def parse_portfolio(portfolio: str | PortfolioSpec | None) -> PortfolioSpec:
    """Return a preset by name, or a portfolio of the comma-listed solvers; raise
    ValueError naming any unknown solver and listing the known names."""
    if isinstance(portfolio, PortfolioSpec):
        return portfolio
    text = (portfolio or "fast").strip()
    if text in PRESETS:
        return PRESETS[text]
    names = [s.strip() for s in text.split(",")]
    unknown = [s for s in names if s not in registry.SOLVERS]
    if unknown:
        raise registry.unknown_names(unknown, f" in portfolio {text!r}", PRESETS)
    return PortfolioSpec(name=text, members=tuple(MemberSpec(solver=s) for s in names))


def _build(
    spec: PortfolioSpec, puzzle: Puzzle, seed: int, variant: int = 0, exchange: Exchange | None = None
) -> list[Member]:
    """Instantiate the members with independent child seeds (spawned, in member order); `variant` > 0
    also gives the exact members' complete search and the SAT member's variables their own order;
    the complete (SAT) members trade through `exchange` when given."""
    children = np.random.SeedSequence(seed).spawn(len(spec.members))
    members: list[Member] = []
    seen: dict[str, int] = {}
    fast_given = False
    cubes = exchange is not None and exchange.cubes is not None
    mix = spec.mix(puzzle.box.n, variant, cubes)
    weights = spec.weights(puzzle.box.n, variant, cubes)
    for m, child, weight in zip(spec.members, children, weights, strict=True):
        fast_path = m.kind is Kind.EXACT and not fast_given and m.races(puzzle.box.n)
        if weight <= 0 and not fast_path:  # sits out; the first exact member still runs the fast path
            continue
        seen[m.solver] = seen.get(m.solver, 0) + 1
        name = m.solver if seen[m.solver] == 1 else f"{m.solver}#{seen[m.solver]}"
        entry = registry.find(m.solver)
        if entry.kind is Kind.EXACT:
            first = 0 if fast_given else spec.fast_budget(puzzle.box.n)
            fast_given = True
            options = m.model_dump(include={"restart_base", "randomised", "complete_share", "searches"})
            member: Member = ExactMember(
                entry.solver,
                puzzle,
                child,
                weight=weight,
                first_budget=first,
                name=name,
                variant=variant,
                **options,
            )
        elif entry.kind is Kind.COMPLETE:
            # the mode's own literal order (a job's seed never renumbers: it would lose what the order is for,
            # docs/decisions.md); a helper that renumbers draws one from its child seed and its variant
            order = child_seed(np.random.SeedSequence([variant, child_seed(child)])) if mix.renumber else 0
            member = entry.solver(puzzle, weight=weight, name=name, seed=order, exchange=exchange)
        else:
            params = entry.solver.make_params(m.params)
            member = StochasticMember(
                entry.solver, puzzle, child, params, weight=weight, restart_slices=m.restart_base, name=name
            )
        members.append(member)
    _hold_back(members, mix.starts or {})
    return members


def _hold_back(members: list[Member], starts: dict[str, float]) -> None:
    """Let each member with a late start join once the others have done about that many CPU seconds of work
    (its clock starts there): a second search that pays only on hard grids would slow every easy one."""
    racing = [m for m in members if m.weight > 0]
    for m in racing:
        start = starts.get(m.name, 0.0)
        others = sum(o.weight for o in racing if o is not m)
        if start > 0 and others > 0:
            m.vtime += start / SLICE_S * m.weight / others


def race(
    puzzle: Puzzle,
    portfolio: str | PortfolioSpec | None = "race",
    *,
    time_limit: float | None = None,
    seed: int = 0,
    stop: np.ndarray | None = None,
    text: str | None = None,
    fast_nodes_done: int = 0,
    spent: float = 0.0,
    trace: list[tuple[str, Outcome, int]] | None = None,
    variant: int = 0,
    exchange: Exchange | None = None,
) -> SolveResult:
    """Race the portfolio's members on one puzzle until a verified solution, a proof of none, the deadline
    or the `stop` flag (int64[1], raised by another thread).

    `fast_nodes_done` > 0: the batch path ran the fast path with that many nodes in `spent` seconds
    (included in `elapsed`). `trace` receives (member, outcome, monotonic ns) for every slice. `variant`
    > 0 (a helper in another process) also reorders the complete searches; `exchange`: what the SAT
    members trade with the other processes racing the puzzle."""
    spec = parse_portfolio(portfolio)
    t_start = time.perf_counter()
    cubes = exchange is not None and exchange.cubes is not None
    weights = spec.weights(puzzle.box.n, variant, cubes)
    has_exact = any(
        m.kind in (Kind.EXACT, Kind.COMPLETE) and w > 0 for m, w in zip(spec.members, weights, strict=True)
    )
    limit = time_limit if time_limit is not None or has_exact else STOCHASTIC_ONLY_LIMIT
    deadline = 0 if limit is None else monotonic_ns() + max(1, int(limit * 1e9))
    stop = np.zeros(1, dtype=np.int64) if stop is None else stop
    members = _build(spec, puzzle, seed, variant, exchange)
    if not members:
        raise ValueError(f"no member of portfolio {spec.name!r} races {puzzle.box.n}x{puzzle.box.n} grids")
    first_exact = next((m for m in members if isinstance(m, ExactMember)), None)
    racing = [m for m in members if m.weight > 0 or m is first_exact]
    heat = _Heat(members, racing, deadline, stop, trace, exchange)
    if first_exact is not None and fast_nodes_done:
        first_exact.skip_complete(fast_nodes_done)
    elif first_exact is not None:  # the fast path: a small node budget before any racing
        heat.step(first_exact)
    if first_exact is not None and first_exact.weight <= 0 and first_exact in heat.active:
        heat.active.remove(first_exact)  # it ran the fast path only: no share of the race at this size
    if heat.active == [first_exact] and first_exact.complete_share >= 1.0:  # nothing to share the time with
        first_exact.alone = True
    heat.run(_endgame_at(spec, members, deadline, limit, has_exact and variant == 0))
    elapsed = spent + time.perf_counter() - t_start
    return _result(puzzle, text, members, heat.current, heat.outcome, elapsed, stop[0] != 0)


@dataclass
class _Heat:
    """One race in progress: its members, those still racing, the member stepped last and how its slice
    ended (what `race` answers from), each slice traced when asked."""

    members: list[Member]
    active: list[Member]  # the members still racing (an idle one leaves)
    deadline: int  # monotonic ns (0: none)
    stop: np.ndarray
    trace: list[tuple[str, Outcome, int]] | None
    exchange: Exchange | None = None  # where the counters so far are noted every PROGRESS_S
    current: Member | None = None
    outcome: Outcome | None = None
    noted_ns: int = 0

    def step(self, member: Member) -> None:
        """Run `member`'s next slice (traced); a member with nothing left to do leaves the race."""
        self.current = member
        self.outcome = member.step(self.deadline, self.stop)
        if self.trace is not None:
            self.trace.append((member.name, self.outcome, monotonic_ns()))
        if self.outcome == IDLE:
            self.active.remove(member)

    def run(self, endgame_at: int) -> None:
        """Step the member whose next slice would end soonest in work per weight (weighted fair queueing)
        until a solution, a proof of none, the deadline or the `stop` flag; from `endgame_at` (0: never)
        only the stochastic members race."""
        while self.active and self.outcome not in (FOUND, NO_SOLUTION, OUT_OF_TIME):
            now = monotonic_ns()
            if self.stop[0] != 0 or (self.deadline and now >= self.deadline):
                self.outcome = OUT_OF_TIME
                break
            if endgame_at and now >= endgame_at:  # the rest of the limit improves the approximate grid
                endgame_at = 0
                self.active = [m for m in self.active if isinstance(m, StochasticMember)] or self.active
            if self.exchange is not None and now - self.noted_ns >= PROGRESS_S * 1e9:
                self.exchange.note(_final_counters(self.members, None, None, stopped=True))
                self.noted_ns = now
            members = self.members
            self.step(min(self.active, key=lambda m: ((m.vtime + 1.0) / m.weight, members.index(m))))


def _endgame_at(
    spec: PortfolioSpec, members: Sequence[Member], deadline: int, limit: float | None, owner: bool
) -> int:
    """The monotonic ns from which only the stochastic members race (0: never): the last `spec.endgame` of
    the limit, for a race's owner (a helper's grid is never its answer) with stochastic members racing."""
    stochastic = any(isinstance(m, StochasticMember) and m.weight > 0 for m in members)
    if not (deadline and limit and owner and stochastic and spec.endgame > 0):
        return 0
    return deadline - int(spec.endgame * limit * 1e9)


def _result(
    puzzle: Puzzle,
    text: str | None,
    members: Sequence[Member],
    winner: Member | None,
    outcome: Outcome | None,
    elapsed: float,
    stopped: bool = False,
) -> SolveResult:
    """Turn the race's end into a SolveResult with every member's counters."""
    counters = _final_counters(members, winner, outcome, stopped)
    common: dict[str, Any] = dict(
        puzzle=puzzle.render() if text is None else text, elapsed=elapsed, counters=counters
    )
    held = [m for m in members if m.best_grid is not None]  # a race undecided: stochastic members' grids
    errors = "; ".join(m.failed for m in members if m.failed)
    if outcome in DECIDED and winner is not None and (outcome != FOUND or winner.solution is not None):
        member, grid, status, error = winner, winner.solution, ENDS[outcome][0], None
        cost = 0 if status is Status.SOLVED else None
        if status is Status.SOLVED:
            counters[winner.name]["time_to_solution_ms"] = elapsed * 1e3
    elif held:
        member = min(held, key=lambda m: m.best_cost or 0)  # the first of the lowest
        grid, error = member.best_grid, errors or None
        cost = grid_cost(puzzle, grid)  # type: ignore[arg-type]
        status = Status.SOLVED if cost == 0 and is_solution(puzzle, grid) else Status.APPROXIMATE
    else:  # no member answered: nodes, guesses and restarts are 0 (each member's are in `counters`)
        return SolveResult(Status.TIMEOUT, error=errors or "no grid within the time limit", **common)
    c = counters[member.name]
    return SolveResult(
        status,
        solution=None if grid is None else puzzle.render(grid),
        cost=cost,
        solver=member.name,
        nodes=int(c.get("nodes", c.get("iterations", 0))),
        guesses=int(c.get("guesses", 0)),
        restarts=int(c["restarts"]),
        error=error,
        **common,
    )


def _final_counters(
    members: Sequence[Member], winner: Member | None, outcome: Outcome | None, stopped: bool
) -> dict[str, dict[str, Any]]:
    """Every member's counters as the race ended: its planned `share` of the work, and for a member still
    `running` how it ended instead (`MemberState`)."""
    total = sum(m.weight for m in members if m.weight > 0)
    out = {}
    for m in members:
        c = m.counters()
        c["share"] = round(max(m.weight, 0.0) / total, 4) if total > 0 else 0.0
        if c.get("status") == MemberState.RUNNING:
            if m.weight <= 0:
                c["status"] = MemberState.FAST_PATH_ONLY
            elif outcome in DECIDED and m is not winner:
                c["status"] = MemberState.LOST
            elif stopped:
                c["status"] = MemberState.STOPPED
            else:
                c["status"] = MemberState.TIMEOUT if outcome == OUT_OF_TIME else MemberState.IDLE
        out[m.name] = c
    return out


def warm_up() -> None:
    """Compile (or load) every stochastic kernel, so a race's first deadline measures solving, not compiling
    (which cannot be interrupted); a real puzzle, as some kernels run only once a first slice left it."""
    puzzle = parse_puzzle("4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......")
    for name in sorted(STOCHASTIC_SOLVERS):
        solver = STOCHASTIC_SOLVERS[name]
        for propagate in (False, True):
            solver.solve(
                puzzle, time_limit=None, params={"propagate": propagate}, max_work=3 * solver.slice_work
            )


__all__ = ["PRESETS", "MemberSpec", "PortfolioSpec", "parse_portfolio", "race", "warm_up"]
