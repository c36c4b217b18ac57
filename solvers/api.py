"""The public Python API: `solve` one puzzle, `solve_many` a batch (the pipeline's path).

`solve_many` parses, solves, verifies and formats whole groups of puzzles with one compiled kernel call
each, so per-puzzle Python overhead stays small even for puzzles solved in microseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from solvers import registry
from solvers.exact import EXACT_SOLVERS
from solvers.exact.base import DEFAULT_EXACT, ExactBatch, KernelSolver
from solvers.kernel.outcome import BUDGET
from solvers.model.batch import Group, read_batch
from solvers.model.parse import Lines, clash_mask, parse_puzzle
from solvers.model.puzzle import ALPHABET, Box, Notation, NotationKind, Puzzle, PuzzleError, as_box
from solvers.model.result import Results, SolveResult
from solvers.model.status import (
    END_CODE,
    END_ERROR,
    END_ERRORS,
    REJECTED_ERROR,
    STATUS_CODE,
    STOPPED_ERROR,
    Status,
)
from solvers.model.verify import verify_batch
from solvers.race.exchange import Raced
from solvers.race.portfolio import PRESETS, MemberSpec, PortfolioSpec, parse_portfolio, race
from solvers.registry import Kind

_RENDER = np.frombuffer((" " + ALPHABET).encode("ascii"), dtype=np.uint8)

# input position -> that search's stop flag, or the flag and its exchange with other processes (`Raced`)
Racing = Callable[[int], AbstractContextManager[np.ndarray | Raced]]
OnFinal = Callable[[Results, list[int]], object]  # called with the results and positions made final


def solve(
    puzzle: str | Puzzle,
    *,
    box: Box | str | None = None,
    time_limit: float | None = None,
    solver: str | None = None,
    portfolio: str | None = None,
    limit: int = 1,
    seed: int = 0,
    stop: np.ndarray | None = None,
) -> SolveResult:
    """Solve one puzzle (a text in any supported notation, or a Puzzle)."""
    return solve_many(
        [puzzle],
        box=box,
        time_limit=time_limit,
        solver=solver,
        portfolio=portfolio,
        limit=limit,
        seed=seed,
        stop=stop,
    )[0]


def solve_many(
    lines: Iterable[str | Puzzle],
    *,
    box: Box | str | None = None,
    time_limit: float | None = None,
    solver: str | None = None,
    portfolio: str | None = None,
    limit: int = 1,
    seed: int = 0,
    stop: np.ndarray | None = None,
    racing: Racing | None = None,
    variant: int = 0,
    on_final: OnFinal | None = None,
) -> Results:
    """Solve every puzzle of `lines`; return one result per line, in the same order (a list-like `Results`).

    A line that is not a puzzle gets an `invalid` result naming the reason; it never stops the batch.
    `time_limit` is per puzzle, in seconds. With `limit` > 1 the solutions are counted up to `limit`
    (`solution_count`). `stop` (int64[1]) is a flag another thread may raise: every puzzle not answered by
    then comes back `timeout`, "stopped before an answer". For the pipeline's escalation: `racing` is
    entered around the search of each puzzle the first pass left (with its input position; even on the
    plain exact path) and yields that search's stop flag, or a `Raced`; `variant` > 0 is a helper's
    search; `on_final` is called with the results and the positions made final: all but the puzzles left
    to race once every first pass is done, then each raced puzzle's as its race ends.
    """
    box = as_box(box)
    items = lines if isinstance(lines, (list, Lines)) else list(lines)
    exact, spec = _plan(solver, portfolio, limit)
    if spec is None and racing is not None and limit == 1:  # one exact member: searched puzzle by puzzle
        spec = PortfolioSpec(name=exact.name, members=(MemberSpec(solver=exact.name, randomised=False),))
    _, results, groups = read_batch(items, box)
    stop = np.zeros(1, dtype=np.int64) if stop is None else stop
    run = _Batch(exact, results, limit, time_limit, seed, stop, box)
    races: list[_Leftovers] = []
    for group in groups.items():
        if spec is not None:  # the batch fast path with a node budget; the leftovers are raced below
            races.append(run.first_pass(spec, group))
            continue
        batch = exact.solve_batch(
            group.givens, group.box, limit=limit, keep=1, time_limit=time_limit, seed=seed, stop=stop
        )
        run.collect(batch, group)
    if on_final is not None:
        final = np.ones(len(results), dtype=bool)
        for left in races:
            final[left.group.indices[left.rows]] = False
        on_final(results, np.flatnonzero(final))
    for left in races:
        run.race_left(spec, left, racing, variant, on_final)  # type: ignore[arg-type]
    return results


def _plan(solver: str | None, portfolio: str | None, limit: int) -> tuple[KernelSolver, PortfolioSpec | None]:
    """Read the names a user gave: the exact solver of the batch path and the portfolio to race the puzzles
    it leaves (None: the plain exact path). `solver` names an exact solver; `portfolio` a preset or a comma
    list of solvers, raced unless it is one exact solver or solutions are counted (limit > 1). An unknown
    name raises ValueError listing what exists."""
    if solver:
        entry = registry.find(solver, PRESETS)
        if entry.kind is not Kind.EXACT:
            raise ValueError(
                f"solver {solver!r} is {entry.kind}, not exact: race it with portfolio={solver!r}; "
                f"exact solvers: {', '.join(registry.names(Kind.EXACT))}"
            )
        return entry.solver, None
    spec = parse_portfolio(portfolio)
    exact = spec.exact_solver or EXACT_SOLVERS[DEFAULT_EXACT]
    alone = len(spec.members) == 1 and spec.members[0].kind is Kind.EXACT
    return exact, None if alone or limit > 1 else spec


class _Leftovers(NamedTuple):
    """A group's puzzles its first pass left to race: rows `rows` of the group, with what they spent."""

    group: Group
    rows: list[int]
    spent: np.ndarray  # seconds, per row of the group
    nodes: np.ndarray


@dataclass
class _Batch:
    """One `solve_many` call: what each group's passes read, and the results they write."""

    exact: KernelSolver
    results: Results
    limit: int
    time_limit: float | None
    seed: int
    stop: np.ndarray
    box: Box | None  # the user's (None: inferred per puzzle)

    def first_pass(self, spec: PortfolioSpec, group: Group) -> _Leftovers:
        """A group's first pass through a portfolio: one batch kernel call with the fast path's node budget
        (easy puzzles cost what the plain exact solver costs; the seed randomises the value order as on the
        plain path); the puzzles it leaves, to race. Clashing givens are answered `invalid`, never raced."""
        k = len(group.indices)
        if spec.exact_solver is None:  # stochastic only: nothing to run the fast path
            left = np.flatnonzero(~self.invalid(np.arange(k), group)).tolist()
            return _Leftovers(group, left, np.zeros(k), np.zeros(k, np.int64))
        batch = self.exact.solve_batch(
            group.givens,
            group.box,
            limit=1,
            keep=1,
            max_nodes=spec.fast_budget(group.box.n),
            time_limit=self.time_limit,
            seed=self.seed,
            stop=self.stop,
        )
        invalid = self.collect(batch, group)
        left = np.flatnonzero((batch.status == BUDGET) & ~invalid).tolist()
        return _Leftovers(group, left, batch.ns / 1e9, batch.nodes)

    def race_left(
        self,
        spec: PortfolioSpec,
        left: _Leftovers,
        racing: Racing | None,
        variant: int,
        on_final: OnFinal | None,
    ) -> None:
        """Race each puzzle a first pass left, one by one, with the rest of its time limit (none once `stop`
        is raised), inside `racing` when given (its flag stops that race alone)."""
        group, texts, limit = left.group, self.results.texts, self.time_limit
        for k in left.rows:
            i, spent = int(group.indices[k]), float(left.spent[k])
            if self.stop[0] != 0:
                self.results.put(i, SolveResult(Status.TIMEOUT, texts[i], error=STOPPED_ERROR, elapsed=spent))
            else:
                with racing(i) if racing is not None else nullcontext(self.stop) as link:
                    flag, exchange = (link, None) if isinstance(link, np.ndarray) else link
                    raced = race(
                        Puzzle(group.box, group.givens[k], group.notation),
                        spec,
                        time_limit=None if limit is None else max(1e-3, limit - spent),
                        seed=self.seed,
                        text=texts[i],
                        fast_nodes_done=int(left.nodes[k]),
                        spent=spent,
                        stop=flag,
                        variant=variant,
                        exchange=exchange,
                    )
                self.results.put(i, raced)
            if on_final is not None:
                on_final(self.results, [i])

    def collect(self, batch: ExactBatch, group: Group) -> np.ndarray:
        """Write a kernel's output arrays into the results' columns; the verifier has the last word. Rows
        that end without a verified grid are checked for clashing givens (answered `invalid`, with the
        reason): -> bool[k], the rows found invalid."""
        givens, box, first = group.givens, group.box, batch.solutions[:, 0, :]
        found = batch.counts > 0
        if found.all():
            verified = verify_batch(givens, first, box.rows, box.cols)
        else:
            verified = np.zeros(len(group.indices), dtype=bool)
            if found.any():
                verified[found] = verify_batch(givens[found], first[found], box.rows, box.cols)
        status = batch.status.astype(np.int64)
        codes = END_CODE[status]  # the status table (`solvers.model.status.ENDS`), by kernel outcome
        errors = END_ERROR[status]
        codes[verified] = STATUS_CODE[Status.SOLVED]
        errors[verified] = 0
        rejected = found & ~verified
        codes[rejected] = STATUS_CODE[Status.ERROR]
        errors[rejected] = 1
        self.results.fill(
            group.indices,
            codes,
            self.exact.name,
            _render_rows(first, box, group.notation, verified),
            errors,
            [REJECTED_ERROR.format(solver=self.exact.name), *END_ERRORS],
            batch.ns,
            batch.nodes,
            batch.guesses,
            batch.counts if self.limit > 1 else None,
        )
        if verified.all():
            return ~verified
        return self.invalid(np.flatnonzero(~verified), group)

    def invalid(self, rows: np.ndarray, group: Group) -> np.ndarray:
        """Answer `invalid` (with the parser's reason) the rows among `rows` whose givens clash: -> bool[k],
        the rows so answered. Parsing reads symbols only: this is where a clash is found."""
        out = np.zeros(len(group.givens), dtype=bool)
        if not len(rows):
            return out
        for k in rows[clash_mask(group.givens[rows], group.box)].tolist():
            i = int(group.indices[k])
            text = self.results.texts[i]
            try:
                parse_puzzle(text, self.box)
            except PuzzleError as exc:
                self.results.put(i, SolveResult(Status.INVALID, text, error=str(exc)))
                out[k] = True
        return out


def _render_rows(
    grids: np.ndarray, box: Box, notation: Notation, mask: np.ndarray
) -> list[str | None] | tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Each grid where `mask` holds in `notation`: for compact notation the block of values with the mask
    and the table of their symbols (None: "1".."9"; symbols and texts are made only when read), else
    as texts."""
    if notation.kind is NotationKind.COMPACT and box.n <= len(ALPHABET):
        return grids, mask, None if box.n <= 9 else _RENDER
    out: list[str | None] = [None] * grids.shape[0]
    for row in np.flatnonzero(mask).tolist():
        out[row] = notation.render(grids[row], box)
    return out


__all__ = ["solve", "solve_many"]
